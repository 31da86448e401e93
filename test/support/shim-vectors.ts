/**
 * The shim's validation vectors (test/vectors/shim-validation.json): one table
 * of what cni-driver-shim answers before it makes any call, run by the unit
 * tests through test/support/shim-config.ts and by the integration tests through the
 * built binary, so the two cannot drift.
 *
 * A vector:
 *   name    what it pins, unique
 *   env     the whole environment of the exec: a value, {"repeat": s, "bytes": N,
 *           "suffix"?: t} as for stdin, or null for unset
 *   stdin   the text on stdin, or {"repeat": s, "bytes": N, "suffix"?: t}: s
 *           repeated, then t, N bytes of UTF-8 in all (inputs too big to write out)
 *   expect  {"code": N, "msg": regex source (JavaScript)}: the CNI error, exit 1;
 *           or {"ok": true}: every check passes (VERSION answers; any other verb
 *           goes on to call the driver)
 */
import { readFileSync } from "node:fs";

export interface RepeatedInput {
  repeat: string;
  bytes: number;
  suffix?: string;
}

export type ShimVectorExpect = { ok: true } | { code: number; msg: string };

export interface ShimVector {
  name: string;
  env: Record<string, string | RepeatedInput | null>;
  stdin: string | RepeatedInput;
  expect: ShimVectorExpect;
}

export const SHIM_VECTORS_PATH = new URL("../vectors/shim-validation.json", import.meta.url)
  .pathname;

export function loadShimVectors(): ShimVector[] {
  return JSON.parse(readFileSync(SHIM_VECTORS_PATH, "utf8")) as ShimVector[];
}

/** The bytes of a value written out or repeated. */
function inputBytes(v: ShimVector, input: string | RepeatedInput): Buffer {
  if (typeof input === "string") return Buffer.from(input, "utf8");
  const suffix = Buffer.from(input.suffix ?? "", "utf8");
  const unit = Buffer.from(input.repeat, "utf8");
  const padding = input.bytes - suffix.length;
  if (unit.length === 0 || padding < 0 || padding % unit.length !== 0) {
    throw new Error(
      `vector ${JSON.stringify(v.name)}: ${JSON.stringify(input)} cannot fill its bytes`,
    );
  }
  return Buffer.concat([Buffer.alloc(padding, unit), suffix]);
}

/** The bytes a vector puts on stdin. */
export function vectorStdin(v: ShimVector): Buffer {
  return inputBytes(v, v.stdin);
}

/** The vector's environment as an exec gets it: unset variables left out. */
export function vectorEnv(v: ShimVector): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(v.env)) {
    if (value !== null) out[key] = inputBytes(v, value).toString("utf8");
  }
  return out;
}

export function isOkVector(v: ShimVector): v is ShimVector & { expect: { ok: true } } {
  return "ok" in v.expect;
}
