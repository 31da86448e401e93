#!/usr/bin/env node
/**
 * The `cni-driver-shim` executable: the runtime's environment and stdin in, one
 * answer on stdout, exit 0 or 1. Everything else is in shim.ts.
 */
import { writeSync } from "node:fs";
import { CniError } from "../cni/errors.js";
import { runShim } from "./shim.js";
import { readStdin } from "./stdin.js";

/**
 * Writes the answer and exits at once: nothing else is worth waiting for (the
 * driver's connection is torn down by the kernel). Plain write(2) calls on fd 1,
 * as for stdin; a non-blocking stdout that is full (EAGAIN) is finished through
 * process.stdout. A runtime that closed our stdout early gets no answer, and no
 * stack trace either.
 */
function exit(stdout: string, code: number): void {
  const data = Buffer.from(stdout);
  let written = 0;
  try {
    while (written < data.length) written += writeSync(1, data, written);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "EAGAIN") {
      process.stdout.on("error", () => process.exit(code));
      process.stdout.write(data.subarray(written), () => process.exit(code));
      return;
    }
  }
  process.exit(code);
}

runShim(process.env, () => readStdin()).then(
  (out) => exit(out.stdout, out.exitCode),
  (err: unknown) => exit(`${JSON.stringify(CniError.from(err).toJSON(), null, 4)}\n`, 1),
);
