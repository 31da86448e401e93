/**
 * The format versions of the driver's own files (src/common/file-format.ts): a
 * file that declares no version is version 1 (release 0.1.0's layout), older
 * versions are brought up to the current one, and a version this build does
 * not know is refused, naming the file and both versions, and never replaced.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect } from "chai";
import {
  type FileFormat,
  FileFormatError,
  formatRefusal,
  formatVersion,
  readVersionedFile,
  writeVersionedFile,
} from "../../src/common/file-format.js";

const BY_FIELD: FileFormat = { what: "test record", current: 1, declaredBy: { field: "version" } };
const BY_KIND: FileFormat = { what: "test entry", current: 1, declaredBy: { kindPrefix: "testV" } };

/** The error `fn` throws; fails when it throws none. */
function thrown(fn: () => unknown): Error {
  try {
    fn();
  } catch (err) {
    return err as Error;
  }
  throw new Error("expected a throw");
}

describe("file formats: versions declared, older ones read, newer ones refused", () => {
  let dir = "";
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "cni-driver-file-format-"));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  describe("a `version` field", () => {
    it("absent is version 1, the layout release 0.1.0 wrote", () => {
      expect(formatVersion(BY_FIELD, "/f", { node: "n" })).to.equal(1);
      expect(formatVersion(BY_FIELD, "/f", { version: 1, node: "n" })).to.equal(1);
    });

    it("newer than this build knows: refused, naming the file and both versions", () => {
      const err = thrown(() => formatVersion(BY_FIELD, "/state/f.json", { version: 2 }));
      expect(err).to.be.instanceOf(FileFormatError);
      expect(err.message).to.equal(
        "/state/f.json: a test record of version 2, which this cni-driver does not know (it knows up to version 1); left as it is for a cni-driver that knows it",
      );
    });

    for (const v of [0, -1, 1.5, "1", null, [1]]) {
      it(`${JSON.stringify(v)} is no version this build knows: refused`, () => {
        expect(formatRefusal(BY_FIELD, "/f", { version: v })?.found).to.equal(
          `version ${JSON.stringify(v)}`,
        );
      });
    }
  });

  describe("a `kind` carrying the version", () => {
    it("reads the number after the prefix", () => {
      expect(formatVersion(BY_KIND, "/f", { kind: "testV1" })).to.equal(1);
    });

    for (const [kind, found] of [
      ["testV2", 'kind "testV2"'],
      ["testV01", 'kind "testV01"'],
      ["otherV1", 'kind "otherV1"'],
      [undefined, "no kind"],
      [7, "kind 7"],
    ] as const) {
      it(`${found}: refused, naming both kinds`, () => {
        const err = formatRefusal(BY_KIND, "/q/r.json", kind === undefined ? {} : { kind });
        expect(err?.message).to.equal(
          `/q/r.json: a test entry of ${found}, which this cni-driver does not know (it knows up to kind "testV1"); left as it is for a cni-driver that knows it`,
        );
      });
    }
  });

  it("brings an older version up through each upgrade step in turn", () => {
    const v3: FileFormat = {
      ...BY_FIELD,
      current: 3,
      upgrades: [
        (d) => ({ ...d, steps: ["1→2"] }),
        (d) => ({ ...d, steps: [...((d.steps as string[] | undefined) ?? []), "2→3"] }),
      ],
    };
    const read = (text: string) => {
      writeFileSync(join(dir, "r.json"), text);
      return readVersionedFile(v3, join(dir, "r.json"));
    };
    expect(read('{"a":1}')).to.deep.equal({ a: 1, steps: ["1→2", "2→3"] });
    expect(read('{"version":2,"a":1}')).to.deep.equal({ version: 2, a: 1, steps: ["2→3"] });
    expect(read('{"version":3,"a":1}')).to.deep.equal({ version: 3, a: 1 });
    expect(() => read('{"version":4}')).to.throw(FileFormatError);
  });

  describe("files", () => {
    it("reads a missing file or one that is not a JSON object as none", () => {
      expect(readVersionedFile(BY_FIELD, join(dir, "missing.json"))).to.equal(undefined);
      writeFileSync(join(dir, "list.json"), "[1]");
      expect(readVersionedFile(BY_FIELD, join(dir, "list.json"))).to.equal(undefined);
      writeFileSync(join(dir, "torn.json"), '{"version": 1, "no');
      expect(readVersionedFile(BY_FIELD, join(dir, "torn.json"))).to.equal(undefined);
    });

    it("writes the current version first, and migrates a file that declared none", async () => {
      const path = join(dir, "r.json");
      writeFileSync(path, '{"node":"n1"}\n');
      expect(readVersionedFile(BY_FIELD, path)).to.deep.equal({ node: "n1" });
      expect(await writeVersionedFile(BY_FIELD, path, { node: "n1" })).to.equal(true);
      expect(readFileSync(path, "utf8")).to.equal('{"version":1,"node":"n1"}\n');
      expect(await writeVersionedFile(BY_FIELD, path, { node: "n1" }), "unchanged").to.equal(false);
      expect(readVersionedFile(BY_FIELD, path)).to.deep.equal({ version: 1, node: "n1" });
    });

    it("marks a kind-versioned document with its kind", async () => {
      const path = join(dir, "k.json");
      await writeVersionedFile(BY_KIND, path, { id: "x" });
      expect(readFileSync(path, "utf8")).to.equal('{"kind":"testV1","id":"x"}\n');
    });

    it("never reads or replaces a file of a newer version: it stays byte for byte", async () => {
      const path = join(dir, "r.json");
      const newer = '{"version":2,"nodes":["n1"]}\n';
      writeFileSync(path, newer);
      expect(() => readVersionedFile(BY_FIELD, path)).to.throw(FileFormatError, path);
      const err = await writeVersionedFile(BY_FIELD, path, { node: "n1" }).catch((e: Error) => e);
      expect(err).to.be.instanceOf(FileFormatError);
      expect((err as FileFormatError).path).to.equal(path);
      expect(readFileSync(path, "utf8")).to.equal(newer);
    });

    it("replaces a file that is not a JSON object (none of our formats is anything else)", async () => {
      const path = join(dir, "r.json");
      writeFileSync(path, "garbage");
      expect(await writeVersionedFile(BY_FIELD, path, { node: "n1" })).to.equal(true);
      expect(readVersionedFile(BY_FIELD, path)).to.deep.equal({ version: 1, node: "n1" });
    });
  });
});
