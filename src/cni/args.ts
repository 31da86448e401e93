/**
 * CNI_ARGS: `K=V;K=V` pairs a runtime passes to every plugin (cni-spec §1).
 * Parsing and the known/unknown key rules mirror libcni's pkg/types LoadArgs
 * and UnmarshallableBool; the messages keep LoadArgs's "ARGS: " wording.
 *
 * Error code: LoadArgs returns a plain Go error, which a reference plugin
 * hands back from cmdAdd and skel then wraps as code 999. We raise code 4
 * (invalid environment variable) instead: CNI_ARGS is an environment
 * variable and code 4 is the spec's code for one that is wrong. No runtime
 * branches on 4 versus 999; they log the message.
 */
import { CniError, ErrorCode } from "./errors.js";
import { echo } from "./limits.js";

export type CniArgPair = [key: string, value: string];

/** The keys runtimes send (containerd, CRI-O, podman; IP and MAC where static addresses are asked for). */
// Exported for its tests only (unit/args.test.ts).
export const RUNTIME_ARG_KEYS = [
  "K8S_POD_NAMESPACE",
  "K8S_POD_NAME",
  "K8S_POD_INFRA_CONTAINER_ID",
  "K8S_POD_UID",
  "IgnoreUnknown",
  "IP",
  "MAC",
] as const;

/** Present in every args struct in Go (types.CommonArgs), so always a known key. */
const IGNORE_UNKNOWN = "IgnoreUnknown";

const FORMAT_HINT = "CNI_ARGS must be KEY=VALUE pairs separated by ;";

/** A bad pair or key is quoted cut short (limits.ts): CNI_ARGS may hold 64 KiB. */
const quote = echo;

/**
 * Splits CNI_ARGS into pairs, keeping their order. "" is no pairs. A pair that
 * does not split on `=` into exactly two parts is an error (code 4), and so is
 * an empty pair, as a trailing `;` leaves one: LoadArgs rejects both.
 */
export function parseCniArgs(text: string): CniArgPair[] {
  if (text === "") return [];
  return text.split(";").map((pair) => {
    const kv = pair.split("=");
    if (kv.length !== 2) {
      throw new CniError(
        ErrorCode.InvalidEnvironment,
        `ARGS: invalid pair ${quote(pair)}`,
        FORMAT_HINT,
      );
    }
    return [kv[0] as string, kv[1] as string];
  });
}

/**
 * Joins pairs into CNI_ARGS (libcni's invoke stringify). A key or value
 * holding `;` or `=` could not be read back, so it is refused (code 4) here
 * rather than by the plugin that would receive it.
 */
export function formatCniArgs(pairs: ReadonlyArray<readonly [string, string]>): string {
  return pairs
    .map(([key, value]) => {
      if (/[;=]/.test(key) || /[;=]/.test(value)) {
        throw new CniError(
          ErrorCode.InvalidEnvironment,
          `ARGS: cannot encode pair ${quote(key)}=${quote(value)}: keys and values may not contain ";" or "="`,
          FORMAT_HINT,
        );
      }
      return `${key}=${value}`;
    })
    .join(";");
}

/**
 * A CNI_ARGS boolean (UnmarshallableBool): `1`/`true` and `0`/`false` in any
 * case; anything else is undefined.
 */
// Exported for its tests only (unit/args.test.ts).
export function parseArgBool(value: string): boolean | undefined {
  switch (value.toLowerCase()) {
    case "1":
    case "true":
      return true;
    case "0":
    case "false":
      return false;
    default:
      return undefined;
  }
}

/**
 * The values of the known keys (case-sensitive, as Go's struct field lookup),
 * the last occurrence winning. `IgnoreUnknown` is always known: its value must
 * be a boolean (else code 4), and when true, unknown keys are skipped; when
 * not, any unknown key is an error (code 4) listing every unknown pair, as
 * LoadArgs does. `IgnoreUnknown` appears in the record only if `known` lists it.
 */
export function loadArgs<K extends string>(
  pairs: ReadonlyArray<readonly [string, string]>,
  known: readonly K[],
): Partial<Record<K, string>> {
  const knownKeys = new Set<string>(known);
  const out: Partial<Record<K, string>> = {};
  const unknown: string[] = [];
  let ignoreUnknown = false;

  for (const [key, value] of pairs) {
    if (key === IGNORE_UNKNOWN) {
      const flag = parseArgBool(value);
      if (flag === undefined) {
        throw new CniError(
          ErrorCode.InvalidEnvironment,
          `ARGS: error parsing value of pair ${quote(`${key}=${value}`)}: boolean unmarshal error: invalid input ${value.toLowerCase()}`,
          "IgnoreUnknown takes 1, true, 0 or false",
        );
      }
      ignoreUnknown = flag;
    }
    if (knownKeys.has(key)) {
      out[key as K] = value;
    } else if (key !== IGNORE_UNKNOWN) {
      unknown.push(`${key}=${value}`);
    }
  }

  if (unknown.length > 0 && !ignoreUnknown) {
    throw new CniError(
      ErrorCode.InvalidEnvironment,
      `ARGS: unknown args [${unknown.map(quote).join(" ")}]`,
      `known keys: ${[...knownKeys].join(", ") || "none"}; IgnoreUnknown=1 skips the others`,
    );
  }
  return out;
}

/** Who the pod is, from the keys a Kubernetes runtime sends. */
export interface PodIdentity {
  namespace?: string;
  name?: string;
  uid?: string;
  infraContainerId?: string;
}

/**
 * The pod identity in CNI_ARGS, whatever the order of the pairs (containerd
 * builds them from a map). Other keys are ignored; an empty value is treated
 * as absent; a repeated key takes its last value, as loadArgs does.
 */
export function podIdentityFromArgs(pairs: ReadonlyArray<readonly [string, string]>): PodIdentity {
  const field: Record<string, keyof PodIdentity> = {
    K8S_POD_NAMESPACE: "namespace",
    K8S_POD_NAME: "name",
    K8S_POD_UID: "uid",
    K8S_POD_INFRA_CONTAINER_ID: "infraContainerId",
  };
  const identity: PodIdentity = {};
  for (const [key, value] of pairs) {
    const name = Object.hasOwn(field, key) ? field[key] : undefined;
    if (name === undefined) continue;
    if (value === "") delete identity[name];
    else identity[name] = value;
  }
  return identity;
}

/**
 * Adds IgnoreUnknown=1 when absent, in place: every runtime sends it, and the
 * reference plugins refuse the K8S_POD_* keys without it.
 */
export function withIgnoreUnknown(cniArgs: CniArgPair[]): CniArgPair[] {
  if (!cniArgs.some(([key]) => key === "IgnoreUnknown")) cniArgs.unshift(["IgnoreUnknown", "1"]);
  return cniArgs;
}
