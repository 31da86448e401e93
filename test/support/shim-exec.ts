/** Execs a built shim binary as a runtime does: exactly the given env, the config on stdin. */
import { performance } from "node:perf_hooks";
import { execa } from "execa";

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

/** Runs `shimPath` with exactly `env` and `stdin`; killed after `timeoutMs`. Status null: killed. */
export async function execShim(
  shimPath: string,
  env: Record<string, string>,
  stdin: string | Buffer,
  timeoutMs = 20_000,
  opts: ExecShimOptions = {},
): Promise<ShimRun> {
  const started = performance.now();
  const cancel = new AbortController();
  opts.killWhen?.then(() => cancel.abort());
  const r = await execa(shimPath, [], {
    env,
    extendEnv: false,
    input: stdin,
    timeout: timeoutMs,
    cancelSignal: cancel.signal,
    killSignal: "SIGKILL",
    forceKillAfterDelay: false,
    stripFinalNewline: false,
    reject: false,
    ...(opts.uid !== undefined ? { uid: opts.uid } : {}),
    ...(opts.gid !== undefined ? { gid: opts.gid } : {}),
  });
  // Only a shim that could not be started at all is the harness's error; a shim
  // that stops reading early (oversized stdin) and closes the pipe is not.
  if (r.exitCode === undefined && r.signal === undefined) throw r;
  let json: Record<string, unknown> | undefined;
  try {
    json = JSON.parse(r.stdout) as Record<string, unknown>;
  } catch {
    json = undefined;
  }
  const status = r.exitCode ?? null;
  return { status, stdout: r.stdout, stderr: r.stderr, ms: performance.now() - started, json };
}
