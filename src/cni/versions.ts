/**
 * CNI specification versions: which we speak, how they compare, and which
 * result family each belongs to (cni-spec §3, §5).
 */
import { ECHO_BYTES } from "../common/cut-short.js";
import { CniError, ErrorCode } from "./errors.js";
import { echo } from "./limits.js";

export const SUPPORTED_VERSIONS = [
  "0.1.0",
  "0.2.0",
  "0.3.0",
  "0.3.1",
  "0.4.0",
  "1.0.0",
  "1.1.0",
] as const;
export type CniVersion = (typeof SUPPORTED_VERSIONS)[number];

/** The newest version we speak, used when a caller does not ask for one. */
export const LATEST_VERSION: CniVersion = "1.1.0";

/** A config without `cniVersion` is 0.1.0 (libcni). */
export const DEFAULT_CONFIG_VERSION: CniVersion = "0.1.0";

/**
 * Result shapes: "0.1" covers 0.1.0/0.2.0 (ip4/ip6), "0.3" covers 0.3.0/0.3.1/0.4.0
 * (ips carry `version`), "1" covers 1.0.0/1.1.0.
 */
export type ResultFamily = "0.1" | "0.3" | "1";

export function isSupportedVersion(v: unknown): v is CniVersion {
  return typeof v === "string" && (SUPPORTED_VERSIONS as readonly string[]).includes(v);
}

/** Parses "a.b.c" into numbers; undefined when it is not a semver-like triple. */
function parseVersion(v: string): [number, number, number] | undefined {
  const m = /^(\d+)\.(\d+)\.(\d+)$/.exec(v);
  if (!m) return undefined;
  return [Number(m[1]), Number(m[2]), Number(m[3])];
}

/** Compares two versions; throws code 1 when either does not parse. */
export function compareVersions(a: string, b: string): number {
  const pa = parseVersion(a);
  const pb = parseVersion(b);
  if (!pa || !pb) {
    throw new CniError(
      ErrorCode.IncompatibleVersion,
      `invalid version "${pa ? b : a}"`,
      `comparing ${a} with ${b}`,
    );
  }
  for (let i = 0; i < 3; i++) {
    const d = (pa[i] as number) - (pb[i] as number);
    if (d !== 0) return d < 0 ? -1 : 1;
  }
  return 0;
}

/** a >= b */
export function versionAtLeast(a: string, b: string): boolean {
  return compareVersions(a, b) >= 0;
}

export function resultFamily(v: CniVersion): ResultFamily {
  if (v === "0.1.0" || v === "0.2.0") return "0.1";
  if (v === "1.0.0" || v === "1.1.0") return "1";
  return "0.3";
}

/**
 * A config version must be one we speak exactly; otherwise code 1, with details
 * naming both what was asked and what we support.
 */
export function requireSupportedVersion(v: unknown, what = "config"): CniVersion {
  if (isSupportedVersion(v)) return v;
  // A version string past ECHO_BYTES is quoted cut short: it may be a request's hostile field.
  const long = typeof v === "string" && Buffer.byteLength(v, "utf8") > ECHO_BYTES;
  throw new CniError(
    ErrorCode.IncompatibleVersion,
    `incompatible CNI versions: ${what} is ${long ? echo(v) : JSON.stringify(v)}, plugin supports ${JSON.stringify(SUPPORTED_VERSIONS)}`,
    `config version ${long ? echo(v) : String(v)}; supported versions ${SUPPORTED_VERSIONS.join(", ")}`,
  );
}

/**
 * What a plugin's skel checks before the plugin sees a call, in skel's words:
 * CHECK needs a config of 0.4.0 or later, and a plugin version at least the
 * config's; every verb needs a config version the plugin speaks. A config
 * without a version is 0.1.0.
 */
export function requireSkelVersion(command: string, cniVersion: unknown): void {
  const v = typeof cniVersion === "string" && cniVersion !== "" ? cniVersion : "0.1.0";
  if (command === "CHECK") {
    if (!versionAtLeast(v, "0.4.0"))
      throw new CniError(ErrorCode.IncompatibleVersion, "config version does not allow CHECK");
    if (!SUPPORTED_VERSIONS.some((p) => versionAtLeast(p, v)))
      throw new CniError(ErrorCode.IncompatibleVersion, "plugin version does not allow CHECK");
  }
  if (!isSupportedVersion(v)) {
    throw new CniError(
      ErrorCode.IncompatibleVersion,
      "incompatible CNI versions",
      `config is ${JSON.stringify(v)}, plugin supports [${SUPPORTED_VERSIONS.map((s) => JSON.stringify(s)).join(" ")}]`,
    );
  }
}

/** The answer to VERSION. */
export function versionInfo(cniVersion: string = LATEST_VERSION): {
  cniVersion: string;
  supportedVersions: string[];
} {
  return { cniVersion, supportedVersions: [...SUPPORTED_VERSIONS] };
}

/**
 * The oldest config version each verb exists in, as skel and libcni check it:
 * CHECK came with 0.4.0, GC and STATUS with 1.1.0. An older config is code 1,
 * in libcni's words ("configuration version … does not support the CHECK command").
 */
export function requireVerbSupported(verb: string, cniVersion: string): void {
  const since = verb === "CHECK" ? "0.4.0" : verb === "GC" || verb === "STATUS" ? "1.1.0" : "";
  if (since && !versionAtLeast(cniVersion, since)) {
    throw new CniError(
      ErrorCode.IncompatibleVersion,
      `configuration version "${cniVersion}" does not support the ${verb} command`,
      `config version ${cniVersion}; ${verb} needs ${since} or later`,
    );
  }
}
