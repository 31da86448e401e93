/**
 * The Node the image ships (Node 24 LTS, pinned in scripts/node24.sh) and the
 * compiled code it runs (`dist/`), for suites that check the driver and the
 * controller on it rather than on the test runner's own Node.
 */
import { join } from "node:path";
import { REPO_ROOT } from "./driver-harness.js";
import { fetchEnv, mustSucceed, newestMtime, runCommand, runtimeEnv } from "./runtimes.js";

let nodeBinary: string | undefined;
let distChecked = false;

/** The shipped Node's path; fetched once (npm registry, integrity checked) when missing. */
export function ensureShippedNode(timeoutMs = 180_000): string {
  if (nodeBinary) return nodeBinary;
  const out = mustSucceed(
    "scripts/node24.sh",
    runCommand("bash", ["scripts/node24.sh"], { cwd: REPO_ROOT, timeoutMs, env: fetchEnv() }),
  );
  nodeBinary = join(REPO_ROOT, out.trim());
  return nodeBinary;
}

/** What `npm run build` compiles into dist/ that the driver and the controller run. */
const DIST_SOURCES = ["src", "tsconfig.json", "package.json"];

/**
 * `npm run build` when dist/ is missing or older than its sources, once per test
 * process (CI builds before testing; a local run must not test stale output).
 */
export function ensureDistBuilt(timeoutMs = 180_000): void {
  if (distChecked) return;
  const builtAt = newestMtime(join(REPO_ROOT, "dist/src"));
  const sourcesAt = Math.max(...DIST_SOURCES.map((s) => newestMtime(join(REPO_ROOT, s))));
  if (builtAt === 0 || builtAt < sourcesAt) {
    mustSucceed(
      "npm run build",
      runCommand("npm", ["run", "--silent", "build"], {
        cwd: REPO_ROOT,
        timeoutMs,
        env: runtimeEnv(),
      }),
    );
  }
  distChecked = true;
}
