/**
 * The driver's configuration as data: the keys of the `--config-dir` ConfigMap
 * in, a validated DriverConfig out. Pure: the caller reads the files and says
 * which plugins exist; nothing here touches the disk.
 *
 * Validation is complete on purpose: whatever would make the first pod fail
 * (a plugin that is not installed, a subnet host-local would refuse, a pod CIDR
 * the node does not have) fails the load instead, so a bad ConfigMap update is
 * rejected while the last good configuration keeps serving.
 */

import { createHash } from "node:crypto";
import { isDeepStrictEqual } from "node:util";
import {
  type NetworkConfigList,
  type PluginConfig,
  parseNetworkConfigList,
} from "../../cni/conflist.js";
import { CniError, ErrorCode } from "../../cni/errors.js";
import { utf8Bytes, utf8Text } from "../../cni/go-json.js";
import { isObject, type JsonObject } from "../../common/json.js";
import { podSubnetOf } from "../../midonet/node-contract.js";
import {
  cidrHasHostBits,
  cidrNetwork,
  formatCidr,
  ipToBigInt,
  type ParsedIp,
  parseCidr,
  parseIp,
} from "../../net/ip.js";
import { RangeConfigError, type RangeSet, rangeSetsOf } from "../builtin/host-local/ranges.js";
import { MIDONET_PLUGIN_TYPE } from "../builtin/midonet/config.js";
import {
  ClusterNetworkSettingsError,
  readClusterNetworkSettings,
} from "../cluster-network/settings.js";
import {
  NetworkPolicySettingsError,
  readNetworkPolicySettings,
} from "../network-policy/settings.js";
import { readServicesMode, ServicesSettingsError } from "../services/settings.js";
import { expandPodCidr, type PodCidrs } from "./pod-cidr.js";
import {
  madeByDriver,
  type NodeAddress,
  nodeLinkNames,
  podRangeProblem,
} from "./pod-range-guard.js";

/** The optional `driver.json` key. */
const DRIVER_SETTINGS_KEY = "driver.json";
/** Keys with this suffix are networks. */
const CONFLIST_SUFFIX = ".conflist";

export interface DriverSettings {
  /** The network used when a call names none; default: the first conflist by key name. */
  defaultNetwork?: string;
  /** IPv4 CIDRs the node link routes to (datapath "midonet"); absent: no route. */
  clusterCidr?: string;
  serviceCidr?: string;
  /** The node link's interface names (datapath "midonet"). */
  nodeInterface?: string;
  nodePeerInterface?: string;
  /** Other driver.json keys pass through for the modules that read them. */
  [k: string]: unknown;
}

export interface DriverConfig {
  /** Keyed by the conflist's `name`. */
  networks: ReadonlyMap<string, NetworkConfigList>;
  defaultNetwork: string;
  /** Parsed driver.json ({} when absent). */
  settings: DriverSettings;
  /** Where it was read from, e.g. the config dir path. */
  source: string;
  /** sha256 hex over the sorted key names and their bytes (see contentHash). */
  contentHash: string;
  /** Set by the ConfigSource: 1, 2, … */
  generation: number;
  loadedAt: Date;
}

export type BuiltinValidator = (pluginConf: Record<string, unknown>) => void;

export interface LoadOptions {
  source: string;
  /** The node's pod CIDRs, for the `usePodCidr` template. */
  podCidrs?: PodCidrs;
  /** Is an executable `type` in the bin dirs (or a built-in). */
  pluginExists: (type: string) => boolean;
  /** Built-in plugin validators; each throws a CniError (code 7) naming the offending key. */
  builtins?: ReadonlyMap<string, BuiltinValidator>;
  /** host-local's `dataDir` for networks that set none (`--host-local-data-dir`). */
  hostLocalDataDir?: string;
  /** The dirs `pluginExists` searches; only named in the message for a missing plugin. */
  binDirs?: readonly string[];
  /**
   * The addresses on the node's interfaces (the driver's namespace), those of
   * interfaces the driver made included: no pod range may overlap the others.
   */
  nodeAddresses?: readonly NodeAddress[];
  /**
   * Interfaces the driver made beyond what the loaded config names: the node
   * link of the config in use, still up under its names while a new one loads.
   */
  ownInterfaces?: readonly string[];
}

/**
 * sha256 over every key, in sorted order, each as `name NUL length NUL bytes`:
 * the length framing keeps two different key sets from hashing alike. Ignored
 * keys count too, so equal hashes mean the same ConfigMap data on every node
 * (before the per-node pod CIDRs are filled in).
 */
export function contentHash(files: ReadonlyMap<string, Uint8Array>): string {
  const h = createHash("sha256");
  for (const key of [...files.keys()].sort()) {
    const bytes = files.get(key) as Uint8Array;
    h.update(`${key}\u0000${bytes.length}\u0000`);
    h.update(bytes);
  }
  return h.digest("hex");
}

/**
 * Builds the driver's configuration from the volume's keys:
 *
 * - `*.conflist`: one network each, keyed by its `name` (two with the same name
 *   are an error); at least one is required;
 * - `driver.json` (optional): a JSON object; `defaultNetwork` must name one of
 *   the networks, else the default is the first conflist by key name;
 * - any other key is ignored, so a ConfigMap may carry notes or files for
 *   other consumers beside the networks.
 *
 * Each conflist has its `usePodCidr` templates filled first and is then parsed
 * from the re-serialised bytes, so `bytes` (what the result cache stores) is
 * the config the chain actually runs. Every plugin `type` must be a built-in or
 * exist (`pluginExists`); built-ins validate their own object; every
 * host-local `ipam` is checked as host-local would check it.
 *
 * Throws a CniError whose message starts with the key at fault; the code is 6
 * (undecodable JSON) or 1 (unsupported version) when the conflist parser says
 * so, otherwise 7.
 */
export function loadDriverConfig(
  files: ReadonlyMap<string, Uint8Array>,
  opts: LoadOptions,
  generation: number,
): DriverConfig {
  const settings = parseSettings(files.get(DRIVER_SETTINGS_KEY));

  const conflistKeys = [...files.keys()].filter((k) => k.endsWith(CONFLIST_SUFFIX)).sort();
  if (conflistKeys.length === 0) {
    throw invalid(
      `${opts.source}: no network configured: no key ending in ${CONFLIST_SUFFIX} (keys: ${
        [...files.keys()].sort().join(", ") || "none"
      })`,
    );
  }

  const ownLinks = [...nodeLinkNames(settings), ...(opts.ownInterfaces ?? [])];
  const foreign = (opts.nodeAddresses ?? []).filter((a) => !madeByDriver(a, ownLinks));
  const networks = new Map<string, NetworkConfigList>();
  const keyOf = new Map<string, string>();
  for (const key of conflistKeys) {
    const list = atKey(key, () => loadConflist(files.get(key) as Uint8Array, opts, foreign));
    const other = keyOf.get(list.name);
    if (other !== undefined) {
      throw invalid(
        `${key}: network name ${JSON.stringify(list.name)} is already defined by ${other}`,
      );
    }
    networks.set(list.name, list);
    keyOf.set(list.name, key);
  }

  let defaultNetwork: string;
  if (settings.defaultNetwork !== undefined) {
    defaultNetwork = settings.defaultNetwork;
    if (!networks.has(defaultNetwork)) {
      throw invalid(
        `${DRIVER_SETTINGS_KEY}: defaultNetwork ${JSON.stringify(defaultNetwork)} is not a configured network (networks: ${[
          ...networks.keys(),
        ].join(", ")})`,
      );
    }
  } else {
    const first = networks.values().next().value as NetworkConfigList;
    defaultNetwork = first.name;
  }

  return {
    networks,
    defaultNetwork,
    settings,
    source: opts.source,
    contentHash: contentHash(files),
    generation,
    loadedAt: new Date(),
  };
}

function invalid(msg: string): CniError {
  return new CniError(ErrorCode.InvalidNetworkConfig, msg);
}

/** Runs `fn`, prefixing any error with the key; keeps code 6 and 1, makes the rest 7. */
function atKey<T>(key: string, fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    const e = CniError.from(err, ErrorCode.InvalidNetworkConfig);
    const code =
      e.code === ErrorCode.DecodingFailure || e.code === ErrorCode.IncompatibleVersion
        ? e.code
        : ErrorCode.InvalidNetworkConfig;
    throw new CniError(code, `${key}: ${e.message}`, e.details);
  }
}

function parseSettings(bytes: Uint8Array | undefined): DriverSettings {
  if (bytes === undefined) return {};
  let value: unknown;
  try {
    value = JSON.parse(utf8Text(bytes));
  } catch (err) {
    throw new CniError(
      ErrorCode.DecodingFailure,
      `${DRIVER_SETTINGS_KEY}: invalid JSON: ${(err as Error).message}`,
    );
  }
  if (!isObject(value)) {
    throw invalid(
      `${DRIVER_SETTINGS_KEY}: must be a JSON object, not ${value === null ? "null" : Array.isArray(value) ? "an array" : typeof value}`,
    );
  }
  const dn = value.defaultNetwork;
  if (dn !== undefined && (typeof dn !== "string" || dn === "")) {
    throw invalid(`${DRIVER_SETTINGS_KEY}: defaultNetwork must be a non-empty string`);
  }
  for (const key of ["clusterCidr", "serviceCidr"]) checkRouteCidr(value, key);
  for (const key of ["nodeInterface", "nodePeerInterface"]) checkInterfaceName(value, key);
  // The kernel datapath's keys: cross-node (crossNode, vxlan, masquerade, …), NetworkPolicy, Services.
  const readers: Array<[(v: JsonObject) => unknown, new (m: string) => Error]> = [
    [readClusterNetworkSettings, ClusterNetworkSettingsError],
    [readNetworkPolicySettings, NetworkPolicySettingsError],
    [readServicesMode, ServicesSettingsError],
  ];
  for (const [read, Kind] of readers) {
    try {
      read(value);
    } catch (err) {
      if (err instanceof Kind) throw invalid(`${DRIVER_SETTINGS_KEY}: ${err.message}`);
      throw err;
    }
  }
  return value as DriverSettings;
}

/**
 * `clusterCidr` / `serviceCidr`: where the node link (datapath "midonet")
 * routes via the pod CIDR's gateway; absent means no such route. IPv4, as the
 * node link is, and without host bits (almost always a typo).
 */
function checkRouteCidr(settings: JsonObject, key: string): void {
  const v = settings[key];
  if (v === undefined) return;
  const cidr = typeof v === "string" ? parseCidr(v) : undefined;
  if (cidr?.family !== 4) {
    throw invalid(`${DRIVER_SETTINGS_KEY}: ${key} must be an IPv4 CIDR, not ${JSON.stringify(v)}`);
  }
  if (cidrHasHostBits(cidr)) {
    throw invalid(
      `${DRIVER_SETTINGS_KEY}: ${key} ${JSON.stringify(v)} has host bits set (the network is ${formatCidr(cidrNetwork(cidr))})`,
    );
  }
}

/** `nodeInterface` / `nodePeerInterface`: the node link's names (defaults midokube-node / midokube-mido). */
function checkInterfaceName(settings: JsonObject, key: string): void {
  const v = settings[key];
  if (v === undefined) return;
  if (typeof v !== "string" || !/^[A-Za-z0-9_.-]{1,15}$/.test(v)) {
    throw invalid(
      `${DRIVER_SETTINGS_KEY}: ${key} must be an interface name of 1-15 characters, not ${JSON.stringify(v)}`,
    );
  }
}

/**
 * The bytes the chain will run: the conflist with its pod CIDR templates
 * filled, or the original bytes when it has none (byte for byte, as the
 * operator wrote it). Undecodable bytes are passed on for the conflist parser
 * to report (code 6, one place for that message).
 */
function expandedBytes(
  bytes: Uint8Array,
  podCidrs: PodCidrs,
  hostLocalDataDir?: string,
): Uint8Array {
  let value: unknown;
  try {
    value = JSON.parse(utf8Text(bytes));
  } catch {
    return bytes;
  }
  const expanded = expandPodCidr(value, podCidrs, hostLocalDataDir);
  return isDeepStrictEqual(value, expanded) ? bytes : utf8Bytes(JSON.stringify(expanded));
}

function loadConflist(
  bytes: Uint8Array,
  opts: LoadOptions,
  nodeAddresses: readonly NodeAddress[],
): NetworkConfigList {
  const list = parseNetworkConfigList(
    expandedBytes(bytes, opts.podCidrs ?? {}, opts.hostLocalDataDir),
  );
  list.plugins.forEach((plugin, i) => {
    const at = `plugins[${i}] (${JSON.stringify(plugin.type)})`;
    try {
      checkPlugin(plugin, opts, nodeAddresses);
    } catch (err) {
      const e = CniError.from(err, ErrorCode.InvalidNetworkConfig);
      throw new CniError(e.code, `${at}: ${e.message}`, e.details);
    }
  });
  return list;
}

function checkPlugin(
  plugin: PluginConfig,
  opts: LoadOptions,
  nodeAddresses: readonly NodeAddress[],
): void {
  const builtin = opts.builtins?.get(plugin.type);
  if (builtin) {
    builtin(plugin.raw as JsonObject);
  } else if (!opts.pluginExists(plugin.type)) {
    const where = opts.binDirs?.length ? ` in ${opts.binDirs.join(":")}` : " in the CNI bin dirs";
    throw invalid(`no such plugin${where}`);
  }
  const ipam = plugin.raw.ipam;
  if (isObject(ipam) && ipam.type === "host-local") {
    validateHostLocal(ipam, plugin.capabilities.ipRanges === true);
    checkPodRanges(ipam, nodeAddresses);
    if (plugin.type === MIDONET_PLUGIN_TYPE && plugin.raw.datapath === "midonet")
      checkNodeLinkAddress(ipam);
  }
}

/**
 * The `midonet` datapath's node link holds each IPv4 pod range's network + 2
 * (node-contract.ts): a range that would hand it to a pod is refused, naming
 * where to start instead (a usePodCidr range without rangeStart starts there
 * by itself: pod-cidr.ts).
 */
function checkNodeLinkAddress(ipam: JsonObject): void {
  for (const set of rangeSetsOf(ipam, { strict: true }))
    for (const r of set) {
      if (r.family !== 4) continue;
      const { cidr, nodeIp, firstPodIp } = podSubnetOf(r.subnet);
      const node = ipToBigInt((parseIp(nodeIp) as ParsedIp).bytes);
      if (node < r.start || node > r.end || node === r.gateway) continue;
      throw invalid(
        `ipam: range ${cidr} would hand out ${nodeIp}, the node link's address on the midonet datapath (network + 2): start it after that ("rangeStart": "${firstPodIp}")`,
      );
    }
}

/** Every subnet of a host-local `ipam` (already valid) keeps off the node: see pod-range-guard.ts. */
function checkPodRanges(ipam: JsonObject, nodeAddresses: readonly NodeAddress[]): void {
  for (const set of rangeSetsOf(ipam, { strict: true })) {
    for (const range of set) {
      const problem = podRangeProblem(range.subnet, nodeAddresses);
      if (problem) throw invalid(`ipam: pod range ${problem}`);
    }
  }
}

// host-local ----------------------------------------------------------------

/**
 * host-local's own config rules and wording (builtin/host-local/ranges.ts):
 * the legacy top-level `subnet` becomes range set 0 ahead of `ranges`; there
 * must be one set unless the plugin takes `ipRanges` at runtime; each set is
 * non-empty, of one family, without overlaps; sets do not overlap each other;
 * each subnet leaves room for addresses (IPv4 at most /30, IPv6 at most /126)
 * and has no host bits ("10.1.0.5/24" is refused, as host-local refuses it).
 */
function validateHostLocal(ipam: JsonObject, ipRangesAtRuntime = false): void {
  let sets: RangeSet[];
  try {
    sets = rangeSetsOf(ipam, { strict: true });
  } catch (err) {
    // host-local's words, and the subnet as the operator wrote it when they leave it out.
    const { message } = err as Error;
    const subnet = err instanceof RangeConfigError ? err.subnet : undefined;
    const named = subnet && !message.includes(subnet) ? ` (subnet ${JSON.stringify(subnet)})` : "";
    throw invalid(`ipam: ${message}${named}`);
  }
  if (sets.length === 0 && !ipRangesAtRuntime) throw invalid("ipam: no IP ranges specified");
}
