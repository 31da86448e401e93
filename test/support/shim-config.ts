/**
 * What cni-driver-shim checks on its own, before it makes any call: the CNI
 * environment, the size and shape of its stdin configuration, the verb against
 * the config's version, CNI_ARGS, and for GC the runtime's valid set. A failure
 * here changes nothing anywhere: no call reaches the driver, nothing is written.
 *
 * The shim is a separate (C) program, src/remote-plugin-shim/config.c; this is
 * its mirror in TypeScript, for the tests only. Both apply exactly these rules
 * and are held to one table of cases, test/vectors/shim-validation.json, which
 * the unit tests run through checkShimCall and the integration tests through
 * the built binary.
 *
 * The shim's conflist keys, each optional:
 *
 *   socket          the driver's socket            default /run/cni-driver/driver.sock
 *   network         which driver network           default "" (the driver's default)
 *   timeoutSeconds  how long ADD/CHECK wait        default 30
 *   stateDir        where the deletion queue is    default /var/lib/cni-driver
 *   logFile         where the shim logs            default none: the shim logs nothing
 *   capabilities    declared for the runtime's sake (it passes runtimeConfig only for
 *                   declared capabilities); the driver reads runtimeConfig itself
 *
 * A key of the wrong type or an unusable value is code 7, naming the key.
 */

import { type CniArgPair, parseCniArgs } from "../../src/cni/args.js";
import { type EnvRecord, type PluginEnv, parsePluginEnv } from "../../src/cni/env.js";
import { CniError, ErrorCode } from "../../src/cni/errors.js";
import { type GcAttachment, parseGcValidAttachments } from "../../src/cni/gc.js";
import { goTypeName, utf8Text } from "../../src/cni/go-json.js";
import { requireStdinConfigSize } from "../../src/cni/limits.js";
import { validateNetworkName } from "../../src/cni/names.js";
import { DEFAULT_SOCKET, DEFAULT_STATE_DIR, socketPathProblem } from "../../src/cni/socket-path.js";
import {
  type CniVersion,
  DEFAULT_CONFIG_VERSION,
  requireSupportedVersion,
  requireVerbSupported,
} from "../../src/cni/versions.js";
import { isObject } from "../../src/common/json.js";

export const DEFAULT_TIMEOUT_SECONDS = 30;
/**
 * The longest timer Node keeps (2^31-1 ms), in whole seconds. The shim's limit
 * stays the same whatever the shim is written in, so one config means the same
 * to every build of it.
 */
export const MAX_TIMEOUT_SECONDS = Math.floor((2 ** 31 - 1) / 1000);

export interface ShimConfig {
  /** The network name of the runtime's conflist (not the driver network). */
  name: string;
  /** The version the runtime speaks: results are printed in exactly this version. */
  cniVersion: CniVersion;
  socket: string;
  /** The driver network; "" for the driver's default. */
  network: string;
  timeoutMs: number;
  stateDir: string;
  logFile?: string;
  /** The whole decoded object (GC reads its valid attachments from it). */
  raw: Record<string, unknown>;
}

function invalidKey(key: string, want: string, value: unknown): CniError {
  return new CniError(
    ErrorCode.InvalidNetworkConfig,
    `invalid cni-driver-shim configuration: "${key}" must be ${want}, not ${goTypeName(value)} ${JSON.stringify(value)}`,
  );
}

function absolutePath(
  raw: Record<string, unknown>,
  key: string,
  fallback?: string,
): string | undefined {
  const v = raw[key];
  if (v === undefined || v === null) return fallback;
  if (typeof v !== "string" || !v.startsWith("/")) throw invalidKey(key, "an absolute path", v);
  return v;
}

/**
 * Reads the runtime's stdin. Codes: not JSON, or JSON that is not an object, 6;
 * `name` missing or invalid, 7; `cniVersion` not a string, 6 (Go's decoder fails
 * on it); a version we do not speak, 1 (absent means 0.1.0, as libcni reads it);
 * a shim key of the wrong type, 7.
 */
export function parseShimConfig(stdin: Uint8Array): ShimConfig {
  let value: unknown;
  try {
    value = JSON.parse(utf8Text(stdin));
  } catch (err) {
    throw new CniError(
      ErrorCode.DecodingFailure,
      `error unmarshalling network config from stdin: ${(err as Error).message}`,
    );
  }
  // JSON null decodes into Go's struct as all-zero, so it fails for its missing name.
  const raw = value === null ? {} : value;
  if (!isObject(raw)) {
    throw new CniError(
      ErrorCode.DecodingFailure,
      `error unmarshalling network config from stdin: cannot decode ${goTypeName(raw)} into a JSON object`,
    );
  }
  const conf = raw as Record<string, unknown>;

  const name = validateNetworkName(conf.name);
  const v = conf.cniVersion;
  if (v !== undefined && v !== null && typeof v !== "string") {
    throw new CniError(
      ErrorCode.DecodingFailure,
      `decoding version from network config: "cniVersion" must be a string, not ${goTypeName(v)}`,
    );
  }
  const cniVersion = requireSupportedVersion(v || DEFAULT_CONFIG_VERSION);

  let network = "";
  if (conf.network !== undefined && conf.network !== null && conf.network !== "") {
    if (typeof conf.network !== "string") throw invalidKey("network", "a string", conf.network);
    network = validateNetworkName(conf.network);
  }

  let timeoutSeconds = DEFAULT_TIMEOUT_SECONDS;
  if (conf.timeoutSeconds !== undefined && conf.timeoutSeconds !== null) {
    const t = conf.timeoutSeconds;
    if (typeof t !== "number" || !Number.isFinite(t) || t <= 0 || t > MAX_TIMEOUT_SECONDS) {
      throw invalidKey(
        "timeoutSeconds",
        `a positive number of seconds, at most ${MAX_TIMEOUT_SECONDS}`,
        t,
      );
    }
    timeoutSeconds = t;
  }

  const socket = absolutePath(conf, "socket", DEFAULT_SOCKET) as string;
  const tooLong = socketPathProblem(socket);
  if (tooLong)
    throw new CniError(ErrorCode.InvalidNetworkConfig, `"socket" cannot be used: ${tooLong}`);

  const out: ShimConfig = {
    name,
    cniVersion,
    socket,
    network,
    timeoutMs: Math.round(timeoutSeconds * 1000),
    stateDir: absolutePath(conf, "stateDir", DEFAULT_STATE_DIR) as string,
    raw: conf,
  };
  const logFile = absolutePath(conf, "logFile");
  if (logFile !== undefined) out.logFile = logFile;
  return out;
}

/** A call that passed every local check: what the shim sends on. */
export interface CheckedShimCall {
  command: Exclude<PluginEnv["command"], "VERSION">;
  env: PluginEnv;
  conf: ShimConfig;
  cniArgs: CniArgPair[];
  /** GC only: the runtime's valid set. */
  validAttachments?: GcAttachment[];
}

export type ShimCallCheck = { command: "VERSION" } | CheckedShimCall;

/**
 * Every check the shim makes before a call, in the shim's order (the first
 * failure is the answer): the environment (skel's), VERSION answered with no
 * look at stdin, stdin's size, the configuration, the verb against its
 * cniVersion, CNI_ARGS, and for GC the valid attachments. Throws the CniError
 * the shim prints.
 */
export function checkShimCall(env: EnvRecord, stdin: Uint8Array): ShimCallCheck {
  const pluginEnv = parsePluginEnv(env);
  if (pluginEnv.command === "VERSION") return { command: "VERSION" };
  // The driver's own limit and answer (limits.ts): code 4, before the JSON is decoded.
  requireStdinConfigSize(stdin.length);
  const conf = parseShimConfig(stdin);
  requireVerbSupported(pluginEnv.command, conf.cniVersion);
  const call: CheckedShimCall = {
    command: pluginEnv.command,
    env: pluginEnv,
    conf,
    cniArgs: parseCniArgs(pluginEnv.cniArgs),
  };
  if (pluginEnv.command === "GC") call.validAttachments = parseGcValidAttachments(conf.raw);
  return call;
}
