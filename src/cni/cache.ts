/**
 * libcni's result cache as data (cni-spec §6; api.go: cachedInfo, cacheAdd,
 * getCachedResult, getLegacyCachedResult, GetCachedAttachments): the file
 * name, the file's JSON text, and reading it back. The driver does the I/O:
 * `<cacheDir>/results/<name>`, directory 0700, file 0600.
 *
 * The text is what Go's json.Marshal(&cachedInfo) writes: fields in the
 * struct's order, `netns`, `cniArgs`, `capabilityArgs` and `result` left out
 * when empty, `config` in base64, and the maps (`capabilityArgs`, `result`)
 * with their keys sorted at every level. libcni turns the result into a map
 * before writing it, so its keys are sorted too.
 */
import { isObject } from "../common/json.js";
import { CniError, ErrorCode } from "./errors.js";
import { compareGoStrings, goTypeName, marshalGoStruct, utf8Bytes, utf8Text } from "./go-json.js";

/** The cache's `kind`. */
export const CACHE_KIND_V1 = "cniCacheV1";

/** The directory, relative to the cache dir, that holds the files. */
export const CACHE_RESULTS_DIR = "results";

/** One attachment to write. */
export interface CacheEntryInput {
  containerId: string;
  /** The whole network config list, as parsed (NetworkConfigList.bytes). */
  config: Uint8Array | string;
  ifName: string;
  networkName: string;
  netns?: string;
  /** CNI_ARGS pairs, in the order they were given. */
  cniArgs?: ReadonlyArray<readonly [string, string]>;
  capabilityArgs?: Readonly<Record<string, unknown>>;
  /** The list's final ADD result. */
  result?: object;
}

/** A `cniCacheV1` file. */
export interface CachedAttachment {
  kind: typeof CACHE_KIND_V1;
  containerId: string;
  config: Uint8Array;
  ifName: string;
  networkName: string;
  /** "" when the file has none. */
  netns: string;
  /** Undefined when the file has none (libcni then keeps the caller's args). */
  cniArgs?: [string, string][];
  capabilityArgs?: Record<string, unknown>;
  /** Undefined when the file has none: there is no cached result. */
  result?: Record<string, unknown>;
}

/** A file from before `cniCacheV1`: the bare result, nothing else. */
export interface LegacyCachedResult {
  kind: "legacy";
  result: Record<string, unknown>;
}

export type CacheEntry = CachedAttachment | LegacyCachedResult;

function unreadable(detail: string): CniError {
  return new CniError(
    ErrorCode.DecodingFailure,
    `failed to unmarshal cached network config: ${detail}`,
  );
}

/**
 * `<networkName>-<containerId>-<ifName>` (libcni's getCacheFilePath). All
 * three are required; none may hold `/` or NUL, so the name can never leave
 * the results directory (callers validate them earlier; this is the last
 * guard, and reaching it is a caller's bug: code 999).
 */
export function cacheFileName(networkName: string, containerId: string, ifName: string): string {
  if (networkName === "" || containerId === "" || ifName === "") {
    throw new CniError(
      ErrorCode.Internal,
      `cache file path requires network name (${JSON.stringify(networkName)}), container ID (${JSON.stringify(containerId)}), and interface name (${JSON.stringify(ifName)})`,
    );
  }
  for (const part of [networkName, containerId, ifName]) {
    if (part.includes("/") || part.includes("\0")) {
      throw new CniError(
        ErrorCode.Internal,
        `invalid cache file name part ${JSON.stringify(part)}`,
      );
    }
  }
  return `${networkName}-${containerId}-${ifName}`;
}

/** The file's text, byte for byte what libcni's cacheAdd writes (no trailing newline). */
export function encodeCacheEntry(entry: CacheEntryInput): string {
  const nonEmptyMap = (m: object | undefined) =>
    m !== undefined && Object.keys(m).length > 0 ? m : undefined;
  return marshalGoStruct([
    ["kind", CACHE_KIND_V1],
    ["containerId", entry.containerId],
    ["config", utf8Bytes(entry.config)],
    ["ifName", entry.ifName],
    ["networkName", entry.networkName],
    ["netns", entry.netns ? entry.netns : undefined],
    ["cniArgs", entry.cniArgs && entry.cniArgs.length > 0 ? entry.cniArgs : undefined],
    ["capabilityArgs", nonEmptyMap(entry.capabilityArgs)],
    ["result", nonEmptyMap(entry.result)],
  ]);
}

/** Go's base64.StdEncoding: padded, standard alphabet; CR and LF are skipped. */
function decodeBase64(text: string, field: string): Uint8Array {
  const s = text.replace(/[\r\n]/g, "");
  if (!/^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/.test(s)) {
    throw unreadable(`${field} is not base64`);
  }
  return new Uint8Array(Buffer.from(s, "base64"));
}

/** A string field as Go decodes it: JSON null or absent is "". */
function readString(obj: Record<string, unknown>, field: string): string {
  const v = obj[field];
  if (v === undefined || v === null) return "";
  if (typeof v !== "string") throw unreadable(`${field} must be a string, not ${goTypeName(v)}`);
  return v;
}

function readMap(obj: Record<string, unknown>, field: string): Record<string, unknown> | undefined {
  const v = obj[field];
  if (v === undefined || v === null) return undefined;
  if (!isObject(v)) throw unreadable(`${field} must be an object, not ${goTypeName(v)}`);
  return v;
}

function readCniArgs(obj: Record<string, unknown>): [string, string][] | undefined {
  const v = obj.cniArgs;
  if (v === undefined || v === null) return undefined;
  if (!Array.isArray(v)) throw unreadable(`cniArgs must be a list, not ${goTypeName(v)}`);
  return v.map((pair: unknown, i) => {
    if (
      !Array.isArray(pair) ||
      pair.length !== 2 ||
      typeof pair[0] !== "string" ||
      typeof pair[1] !== "string"
    ) {
      throw unreadable(`cniArgs[${i}] must be a [key, value] pair of strings`);
    }
    return [pair[0], pair[1]];
  });
}

/**
 * Reads a cache file.
 *
 * - `kind` "cniCacheV1": the attachment, every field checked by type.
 * - no `kind`: a legacy file holding the bare result, which libcni's
 *   getLegacyCachedResult still reads.
 * - not JSON, not an object, another `kind`, or a field of the wrong type:
 *   code 6. libcni's DEL deletes such a file and goes on without a cached
 *   result; that choice is the caller's.
 */
export function decodeCacheEntry(text: string | Uint8Array): CacheEntry {
  let value: unknown;
  try {
    value = JSON.parse(utf8Text(text));
  } catch (err) {
    throw unreadable((err as Error).message);
  }
  if (!isObject(value)) throw unreadable(`expected a JSON object, not ${goTypeName(value)}`);

  if (!Object.hasOwn(value, "kind")) {
    if (value.cniVersion !== undefined && typeof value.cniVersion !== "string") {
      throw unreadable(
        `legacy result's cniVersion must be a string, not ${goTypeName(value.cniVersion)}`,
      );
    }
    return { kind: "legacy", result: value };
  }
  if (value.kind !== CACHE_KIND_V1) {
    throw unreadable(`wrong kind: ${JSON.stringify(value.kind)}`);
  }

  const config = value.config;
  let configBytes: Uint8Array;
  if (config === undefined || config === null) configBytes = new Uint8Array();
  else if (typeof config === "string") configBytes = decodeBase64(config, "config");
  else throw unreadable(`config must be a base64 string, not ${goTypeName(config)}`);

  const entry: CachedAttachment = {
    kind: CACHE_KIND_V1,
    containerId: readString(value, "containerId"),
    config: configBytes,
    ifName: readString(value, "ifName"),
    networkName: readString(value, "networkName"),
    netns: readString(value, "netns"),
  };
  const cniArgs = readCniArgs(value);
  if (cniArgs !== undefined) entry.cniArgs = cniArgs;
  const capabilityArgs = readMap(value, "capabilityArgs");
  if (capabilityArgs !== undefined) entry.capabilityArgs = capabilityArgs;
  const result = readMap(value, "result");
  if (result !== undefined && Object.keys(result).length > 0) entry.result = result;
  return entry;
}

/**
 * The file names of a results directory that may belong to `containerId`,
 * sorted as Go sorts them: libcni's GetCachedAttachments keeps a name when
 * `-<containerId>-` occurs in it after its first character and before its
 * end. With no containerId, every name. Only the file's content says for sure
 * (see attachmentFromCacheEntry): network names and interface names may hold
 * `-` themselves.
 */
export function attachmentsFromFileNames(
  fileNames: readonly string[],
  containerId?: string,
): string[] {
  const sorted = [...fileNames].sort(compareGoStrings);
  if (!containerId) return sorted;
  const part = `-${containerId}-`;
  return sorted.filter((name) => {
    const pos = name.indexOf(part);
    return pos > 0 && pos + part.length < name.length;
  });
}

/**
 * The rest of GetCachedAttachments' filter, applied to a decoded file: only
 * `cniCacheV1` files, of `containerId` when one is given, that name both an
 * interface and a network. Undefined for anything else.
 */
export function attachmentFromCacheEntry(
  entry: CacheEntry,
  containerId?: string,
): CachedAttachment | undefined {
  if (entry.kind !== CACHE_KIND_V1) return undefined;
  if (containerId && entry.containerId !== containerId) return undefined;
  if (entry.ifName === "" || entry.networkName === "") return undefined;
  return entry;
}
