/**
 * The shim's stdin configuration: the checks every CNI plugin makes (skel's
 * validateConfig and version decoding: JSON, a valid `name`, a `cniVersion` the
 * plugin speaks), then the shim's own conflist keys, each optional:
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
import { CniError, ErrorCode } from "../cni/errors.js";
import { goTypeName, utf8Text } from "../cni/go-json.js";
import { validateNetworkName } from "../cni/names.js";
import {
  type CniVersion,
  DEFAULT_CONFIG_VERSION,
  requireSupportedVersion,
} from "../cni/versions.js";
import { socketPathProblem } from "../wire/socket-path.js";

export const DEFAULT_SOCKET = "/run/cni-driver/driver.sock";
export const DEFAULT_STATE_DIR = "/var/lib/cni-driver";
export const DEFAULT_TIMEOUT_SECONDS = 30;
/** The longest timer Node keeps (2^31-1 ms), in whole seconds. */
const MAX_TIMEOUT_SECONDS = Math.floor((2 ** 31 - 1) / 1000);

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
  if (typeof raw !== "object" || Array.isArray(raw)) {
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
    // Past 2^31-1 ms a timer fires after 1 ms (Node clamps it): every call would time out at once.
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
