/**
 * Runs one short-lived host command with input on stdin. Plumbing execs only
 * iproute2 (and nsenter in front of it), so a thin wrapper over spawn is enough;
 * a general-purpose exec library would cost more at import than it saves.
 */
import { spawn } from "node:child_process";

export interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

export function run(
  file: string,
  args: readonly string[],
  input: string,
  timeoutMs = 30_000,
): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { stdio: ["pipe", "pipe", "pipe"] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.stdout.on("data", (b: Buffer) => out.push(b));
    child.stderr.on("data", (b: Buffer) => err.push(b));
    child.on("error", (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      const stderr = Buffer.concat(err).toString("utf8");
      resolve({
        code: code ?? 128,
        stdout: Buffer.concat(out).toString("utf8"),
        stderr: signal ? `${stderr}killed by ${signal} after ${timeoutMs} ms` : stderr,
      });
    });
    // A command that exits before reading its input must not crash us with EPIPE.
    child.stdin.on("error", () => {});
    child.stdin.end(input);
  });
}
