/**
 * Network configuration lists (cni-spec §2): parsing a `.conflist`. The
 * driver reads lists only (ConfigMap keys ending in .conflist), so libcni's
 * single-plugin `.conf` has no reader here.
 *
 * The rules and messages mirror libcni's conf.go (NetworkConfFromBytes,
 * ConfFromBytes). Where libcni leaves a check to a later
 * step (network name, supported version, the plugin `type` as a file name),
 * it is done here at once, so a list that parses is a list the chain can run.
 * Codes: undecodable JSON 6, an unsupported version 1, anything else wrong
 * with the config 7.
 */
import { isObject } from "../common/json.js";
import { CniError, ErrorCode } from "./errors.js";
import { goTypeName, utf8Bytes, utf8Text } from "./go-json.js";
import { validateNetworkName } from "./names.js";
import {
  type CniVersion,
  compareVersions,
  DEFAULT_CONFIG_VERSION,
  LATEST_VERSION,
  requireSupportedVersion,
} from "./versions.js";

/** One plugin of a list, as written in the config. */
export interface PluginConfig {
  /** The executable's file name (a bare name, never a path). */
  readonly type: string;
  /** What the plugin declares under `capabilities`, true and false alike. */
  readonly capabilities: Readonly<Record<string, boolean>>;
  /**
   * The plugin's object exactly as decoded, unknown keys included; frozen.
   * What the plugin receives is built from a copy of it (plugin-config.ts).
   */
  readonly raw: Readonly<Record<string, unknown>>;
}

export interface NetworkConfigList {
  readonly name: string;
  /** The version the chain runs at: `cniVersion`, or the pick from `cniVersions`. */
  readonly cniVersion: CniVersion;
  readonly disableCheck: boolean;
  readonly disableGC: boolean;
  readonly loadOnlyInlinedPlugins: boolean;
  readonly plugins: readonly PluginConfig[];
  /** The bytes the list was parsed from; libcni's cache keeps them (base64). */
  readonly bytes: Uint8Array;
}

const LIST = "error parsing configuration list";
const CONF = "error parsing configuration";

function invalid(msg: string): CniError {
  return new CniError(ErrorCode.InvalidNetworkConfig, msg);
}

function deepFreeze<T>(value: T): T {
  if (typeof value === "object" && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}

/**
 * Decodes the JSON object at the top of a config. JSON `null` decodes to an
 * empty object, as it does into Go's map (so it then fails for its missing
 * name or type, code 7); any other non-object is a decoding failure.
 */
function decodeTopObject(input: Uint8Array | string, prefix: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(utf8Text(input));
  } catch (err) {
    throw new CniError(ErrorCode.DecodingFailure, `${prefix}: ${(err as Error).message}`);
  }
  if (value === null) return {};
  if (!isObject(value)) {
    throw new CniError(
      ErrorCode.DecodingFailure,
      `${prefix}: cannot decode ${goTypeName(value)} into a JSON object`,
    );
  }
  return value;
}

/**
 * A `type` names an executable looked up in the CNI_PATH directories: a bare
 * file name. A path (or `.`/`..`) would let a config run anything on the node.
 */
function checkPluginType(type: string): void {
  if (type === "." || type === ".." || type.includes("/") || type.includes("\0")) {
    throw invalid(
      `${CONF}: invalid 'type' ${JSON.stringify(type)}: a plugin type is a file name, not a path`,
    );
  }
}

/**
 * One plugin object, checked as libcni's decode into types.PluginConf checks
 * it (`name`, `cniVersion` and `type` strings, `capabilities` a map of
 * booleans, JSON null counting as absent), plus the file-name rule for `type`.
 * Errors are code 7; the caller adds which plugin.
 */
function parsePluginObject(value: unknown): PluginConfig {
  // null decodes into Go's struct as all-zero, so it fails for its missing type.
  const raw = value === null ? {} : value;
  if (!isObject(raw)) {
    throw invalid(`${CONF}: cannot decode ${goTypeName(raw)} into a plugin object`);
  }
  for (const key of ["name", "cniVersion"]) {
    const v = raw[key];
    if (v !== undefined && v !== null && typeof v !== "string") {
      throw invalid(`${CONF}: '${key}' must be a string, not ${goTypeName(v)}`);
    }
  }
  const type = raw.type;
  if (type === undefined || type === null || type === "") {
    throw invalid(`${CONF}: missing 'type'`);
  }
  if (typeof type !== "string") {
    throw invalid(`${CONF}: 'type' must be a string, not ${goTypeName(type)}`);
  }
  checkPluginType(type);

  const capabilities: Record<string, boolean> = {};
  const caps = raw.capabilities;
  if (caps !== undefined && caps !== null) {
    if (!isObject(caps)) {
      throw invalid(`${CONF}: 'capabilities' must be an object, not ${goTypeName(caps)}`);
    }
    for (const [name, enabled] of Object.entries(caps)) {
      if (enabled !== null && typeof enabled !== "boolean") {
        throw invalid(
          `${CONF}: capability ${JSON.stringify(name)} must be true or false, not ${goTypeName(enabled)}`,
        );
      }
      capabilities[name] = enabled === true;
    }
  }
  return deepFreeze({ type, capabilities, raw });
}

/**
 * libcni's readBool: absent is false; a JSON boolean; or the string "true" or
 * "false" in any case. Anything else (null included) is code 7 naming the key.
 */
function readBool(list: Record<string, unknown>, key: string): boolean {
  if (!Object.hasOwn(list, key)) return false;
  const v = list[key];
  if (typeof v === "boolean") return v;
  if (typeof v !== "string") throw invalid(`${LIST}: invalid type ${goTypeName(v)} for ${key}`);
  const s = v.toLowerCase();
  if (s === "true") return true;
  if (s === "false") return false;
  throw invalid(`${LIST}: invalid value ${JSON.stringify(s)} for ${key}`);
}

/** v > the newest version we speak; an unparsable version is code 1. */
function isAboveLatest(v: string, what: string): boolean {
  try {
    return compareVersions(v, LATEST_VERSION) > 0;
  } catch (err) {
    throw new CniError(
      ErrorCode.IncompatibleVersion,
      `${LIST}: ${what}: ${(err as Error).message}`,
    );
  }
}

/**
 * `cniVersions` (1.1.0), exactly as libcni resolves it: drop the entries
 * newer than the newest version we speak, add `cniVersion` when it is set and
 * not newer, and take the highest. When nothing is left, `cniVersion` stays
 * as it was (so a list of only newer versions and no `cniVersion` is 0.1.0,
 * as with libcni). An unparsable entry is code 1.
 */
function resolveCniVersion(cniVersion: string, rawVersions: unknown): string {
  if (rawVersions === undefined) return cniVersion;
  if (!Array.isArray(rawVersions)) {
    throw invalid(`${LIST}: invalid type for cniVersions: ${goTypeName(rawVersions)}`);
  }
  const candidates: string[] = [];
  rawVersions.forEach((v: unknown, i) => {
    if (typeof v !== "string") {
      throw invalid(`${LIST}: invalid type for cniVersions index ${i}: ${goTypeName(v)}`);
    }
    if (!isAboveLatest(v, `invalid cniVersions entry ${v} at index ${i}`)) candidates.push(v);
  });
  if (cniVersion !== "" && !isAboveLatest(cniVersion, `invalid cniVersion ${cniVersion}`)) {
    candidates.push(cniVersion);
  }
  candidates.sort(compareVersions);
  return candidates.at(-1) ?? cniVersion;
}

/**
 * Parses a network configuration list (`.conflist`).
 *
 * - not JSON, or not a JSON object: code 6;
 * - `name` missing or not a valid network name: code 7;
 * - `cniVersion` missing or "": 0.1.0; `cniVersions` resolved as libcni does;
 *   the result must be a version we speak exactly, else code 1;
 * - `disableCheck`, `disableGC`, `loadOnlyInlinedPlugins`: booleans or
 *   "true"/"false" in any case, else code 7 naming the key;
 * - `plugins`: a non-empty list of objects, each with a bare-file-name
 *   `type`, else code 7 naming the plugin index. There is no plugin directory
 *   to fall back on (libcni's `<confdir>/<name>/*.conf`), so a list without
 *   `plugins` is an error even when `loadOnlyInlinedPlugins` is false.
 */
export function parseNetworkConfigList(input: Uint8Array | string): NetworkConfigList {
  const bytes = utf8Bytes(input);
  const raw = decodeTopObject(input, LIST);

  if (!Object.hasOwn(raw, "name")) throw invalid(`${LIST}: no name`);
  const name = validateNetworkName(raw.name);

  let cniVersion = "";
  if (Object.hasOwn(raw, "cniVersion")) {
    const v = raw.cniVersion;
    if (typeof v !== "string") throw invalid(`${LIST}: invalid cniVersion type ${goTypeName(v)}`);
    cniVersion = v;
  }
  cniVersion = resolveCniVersion(cniVersion, raw.cniVersions);
  const version = requireSupportedVersion(
    cniVersion === "" ? DEFAULT_CONFIG_VERSION : cniVersion,
    `config of network ${JSON.stringify(name)}`,
  );

  const disableCheck = readBool(raw, "disableCheck");
  const disableGC = readBool(raw, "disableGC");
  const loadOnlyInlinedPlugins = readBool(raw, "loadOnlyInlinedPlugins");

  if (!Object.hasOwn(raw, "plugins")) {
    throw invalid(
      loadOnlyInlinedPlugins
        ? `${LIST}: \`loadOnlyInlinedPlugins\` is true, and no 'plugins' key`
        : `no plugin configs found: network ${JSON.stringify(name)} has no 'plugins' key`,
    );
  }
  const rawPlugins = raw.plugins;
  if (!Array.isArray(rawPlugins)) {
    throw invalid(`${LIST}: invalid 'plugins' type ${goTypeName(rawPlugins)}`);
  }
  if (rawPlugins.length === 0) throw invalid(`${LIST}: no plugins in list`);

  const plugins = rawPlugins.map((p: unknown, i) => {
    try {
      return parsePluginObject(p);
    } catch (err) {
      const e = err as CniError;
      throw new CniError(e.code, `failed to parse plugin config ${i}: ${e.message}`, e.details);
    }
  });

  return Object.freeze({
    name,
    cniVersion: version,
    disableCheck,
    disableGC,
    loadOnlyInlinedPlugins,
    plugins: Object.freeze(plugins),
    bytes,
  });
}
