/**
 * The driver never loads Node's bundled undici: an `import` of `node:http` does
 * (its ES module view reads the lazy WebSocket getters), for 11 MiB of RSS on
 * Node 24 (src/common/node-http.ts). Checked both in the sources and in a
 * process that loads the driver's modules.
 */
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { expect } from "chai";
import { execaSync } from "execa";

const root = join(dirname(fileURLToPath(import.meta.url)), "../..");

function sourcesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && e.name.endsWith(".ts"))
    .map((e) => join(e.parentPath, e.name));
}

/** An import of node:http or node:https that is not `import type`, static or dynamic. */
const VALUE_IMPORT =
  /^\s*import\s+(?!type\b)[^;]*?from\s+["']node:https?["']|import\(\s*["']node:https?["']\s*\)/m;

describe("node:http without undici", () => {
  it("no module of src imports node:http or node:https but through src/common/node-http.ts", () => {
    const offenders = sourcesUnder(join(root, "src"))
      .filter((f) => VALUE_IMPORT.test(readFileSync(f, "utf8")))
      .map((f) => relative(root, f));
    expect(offenders).to.deep.equal([]);
  });

  it("the pattern finds an import of node:http, and not a type import", () => {
    expect(VALUE_IMPORT.test('import http from "node:http";')).to.equal(true);
    expect(VALUE_IMPORT.test('import { request } from "node:https";')).to.equal(true);
    expect(VALUE_IMPORT.test('const h = await import("node:http");')).to.equal(true);
    expect(VALUE_IMPORT.test('import type * as Http from "node:http";')).to.equal(false);
    expect(VALUE_IMPORT.test('import http2 from "node:http2";')).to.equal(false);
  });

  it("a process that loads the driver's daemon, health and kube modules has not loaded undici", function () {
    this.timeout(60_000);
    const modules = [
      "src/driver/lifecycle/daemon.ts",
      "src/driver/kube/api.ts",
      "src/driver/services/health-check.ts",
    ].map((m) => join(root, m));
    const script = `for (const m of ${JSON.stringify(modules)}) await import(m);
      const undici = process.moduleLoadList.filter((m) => m.includes("undici"));
      const http = process.moduleLoadList.some((m) => m.endsWith(" http"));
      console.log(JSON.stringify({ undici, http }));`;
    const r = execaSync(
      process.execPath,
      ["--import", "tsx", "--input-type=module", "-e", script],
      { cwd: root, reject: false },
    );
    expect(r.exitCode, r.stderr).to.equal(0);
    const seen = JSON.parse(r.stdout.trim().split("\n").at(-1) ?? "{}");
    // node:http itself is loaded (the health server needs it), undici is not.
    expect(seen.http, "node:http loaded").to.equal(true);
    expect(seen.undici).to.deep.equal([]);
  });
});
