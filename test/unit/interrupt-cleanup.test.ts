import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { expect } from "chai";

const support = join(dirname(fileURLToPath(import.meta.url)), "../support/interrupt-cleanup.ts");

/** A child that registers undos for three files, takes one back, then waits to be signalled. */
function child(dir: string) {
  const script = `
    import { writeFileSync, rmSync } from "node:fs";
    import { undoOnInterrupt } from ${JSON.stringify(support)};
    for (const f of ["a", "b", "c"]) writeFileSync(${JSON.stringify(dir)} + "/" + f, "");
    undoOnInterrupt(() => rmSync(${JSON.stringify(dir)} + "/a"));
    const keep = undoOnInterrupt(() => rmSync(${JSON.stringify(dir)} + "/b"));
    undoOnInterrupt(() => { throw new Error("one undo failing"); });
    undoOnInterrupt(() => rmSync(${JSON.stringify(dir)} + "/c"));
    keep();
    console.log("ready");
    setTimeout(() => {}, 60_000);
  `;
  return spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
    stdio: ["ignore", "pipe", "inherit"],
  });
}

describe("test/support/interrupt-cleanup", () => {
  for (const [signal, code] of [
    ["SIGINT", 130],
    ["SIGTERM", 143],
  ] as const)
    it(`on ${signal}, runs every undo still registered (one failing does not stop the rest) and exits ${code}`, async function () {
      this.timeout(30_000);
      const dir = mkdtempSync(join(tmpdir(), "cni-driver-interrupt-"));
      try {
        const c = child(dir);
        await new Promise<void>((resolve, reject) => {
          c.stdout?.on("data", (b: Buffer) => b.toString().includes("ready") && resolve());
          c.once("exit", (status) => reject(new Error(`child exited early: ${status}`)));
        });
        const exited = new Promise<number | null>((r) => c.once("exit", (status) => r(status)));
        c.kill(signal);
        expect(await exited).to.equal(code);
        expect(existsSync(join(dir, "a")), "undone").to.equal(false);
        expect(existsSync(join(dir, "c")), "undone after the failing one").to.equal(false);
        expect(existsSync(join(dir, "b")), "taken back, so kept").to.equal(true);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
});
