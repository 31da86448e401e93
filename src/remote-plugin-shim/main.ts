#!/usr/bin/env node
/**
 * The `cni-driver-shim` executable: the runtime's environment and stdin in, one
 * answer on stdout, exit 0 or 1. Everything else is in shim.ts.
 */
import { CniError } from "../cni/errors.js";
import { runShim } from "./shim.js";
import { readStdin } from "./stdin.js";

function exit(stdout: string, code: number): void {
  // Exit as soon as the answer is written: nothing else is worth waiting for. A
  // runtime that closed our stdout early gets no answer, and no stack trace either.
  process.stdout.on("error", () => process.exit(code));
  process.stdout.write(stdout, () => process.exit(code));
}

runShim(process.env, () => readStdin()).then(
  (out) => exit(out.stdout, out.exitCode),
  (err: unknown) => exit(`${JSON.stringify(CniError.from(err).toJSON(), null, 4)}\n`, 1),
);
