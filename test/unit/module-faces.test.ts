/**
 * Each module of src/ shows its face and keeps its insides: a name is exported
 * when another module imports it (or it is a type in the signature of a name
 * that is), and a name exported for tests only says so above it. Read from the
 * files' import and export declarations (test/support/module-faces.ts).
 */
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { expect } from "chai";
import { type ExportedName, moduleFaces } from "../support/module-faces.js";

const root = join(dirname(fileURLToPath(import.meta.url)), "../..");
const named = (e: ExportedName) => `${e.file}: ${e.name}`;

describe("the faces of src/'s modules", () => {
  let faces: ExportedName[];
  before(function () {
    this.timeout(60_000);
    faces = moduleFaces(root);
  });

  it("reads the project's exports and their importers, namespace imports included", () => {
    const face = (file: string, name: string) =>
      faces.find((e) => e.file === file && e.name === name)?.importers;
    expect(face("src/common/logger.ts", "createLogger")).to.include.members([
      "src/driver/lifecycle/daemon.ts",
      "src/midonet/controller/main.ts",
      "scripts/demo.ts",
    ]);
    // `import * as nft from ".../nftables.ts"` uses every name the module exports.
    expect(face("src/plumbing/nftables.ts", "NftBatch")).to.include(
      "test/integration/nftables-elements.test.ts",
    );
  });

  it("exports no name that only its own file uses", () => {
    const insides = faces.filter((e) => e.importers.length === 0 && !e.inSignature);
    expect(insides.map(named), "exported, but no other module imports them").to.deep.equal([]);
  });

  it("says above a name exported for tests only that it is", () => {
    const forTests = faces.filter(
      (e) =>
        !e.inSignature &&
        e.importers.length > 0 &&
        e.importers.every((f) => f.startsWith("test/")) &&
        !/\btests?\b/i.test(e.leadingComment),
    );
    expect(
      forTests.map(named),
      "imported by tests only, without a comment saying so",
    ).to.deep.equal([]);
  });

  it("keeps each file of src/ under 600 lines, a table of kernel constants aside", () => {
    const files = readdirSync(join(root, "src"), { recursive: true, encoding: "utf8" });
    const long = files
      .filter((f) => f.endsWith(".ts") && !f.endsWith("-constants.ts"))
      .map((f) => join("src", f))
      .map((f) => [f, readFileSync(join(root, f), "utf8").split("\n").length] as const)
      .filter(([, lines]) => lines > 600);
    expect(long, "split by job").to.deep.equal([]);
  });
});
