/** Execs a built shim binary as a runtime does: exactly the given env, the config on stdin. */
import { spawn } from "node:child_process";
import { performance } from "node:perf_hooks";

export interface ShimRun {
  status: number | null;
  stdout: string;
  stderr: string;
  ms: number;
  /** stdout parsed as JSON, when it is JSON. */
  json: Record<string, unknown> | undefined;
}

export interface ExecShimOptions {
  /** Kills the shim as soon as this resolves (a call seen at the far end is all a test needed). */
  killWhen?: Promise<unknown>;
  /** Runs the shim as this user and group, with no supplementary groups (libuv drops them). */
  uid?: number;
  gid?: number;
}

/** Runs `shimPath` with exactly `env` and `stdin`; killed after `timeoutMs`. */
export function execShim(
  shimPath: string,
  env: Record<string, string>,
  stdin: string | Buffer,
  timeoutMs = 20_000,
  opts: ExecShimOptions = {},
): Promise<ShimRun> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = spawn(shimPath, [], {
      env,
      stdio: ["pipe", "pipe", "pipe"],
      ...(opts.uid !== undefined ? { uid: opts.uid } : {}),
      ...(opts.gid !== undefined ? { gid: opts.gid } : {}),
    });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (c: string) => {
      stdout += c;
    });
    child.stderr.setEncoding("utf8").on("data", (c: string) => {
      stderr += c;
    });
    // A shim that stops reading early (oversized stdin) closes the pipe: not our error.
    child.stdin.on("error", () => {});
    child.stdin.end(stdin);
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    opts.killWhen?.then(() => child.kill("SIGKILL"));
    child.on("error", reject);
    child.on("close", (status) => {
      clearTimeout(timer);
      let json: Record<string, unknown> | undefined;
      try {
        json = JSON.parse(stdout) as Record<string, unknown>;
      } catch {
        json = undefined;
      }
      resolve({ status, stdout, stderr, ms: performance.now() - started, json });
    });
  });
}
