/**
 * driver.json's keys for the kernel datapath across nodes, read and checked in
 * one place (the config load calls `readClusterNetworkSettings`, so a bad value
 * rejects the ConfigMap update and the last good config keeps serving):
 *
 *   "crossNode": "auto" | "host-gw" | "vxlan" | "none"   (default "auto")
 *   "vxlan": { "vni": 1, "port": 4789 }                   (defaults shown)
 *   "masquerade": true                                     (default true)
 *   "nonMasqueradeCidrs": ["192.168.0.0/16", …]            (default [])
 *   "clusterCidr": "10.244.0.0/16"                         (shared with the midonet datapath)
 *   "clusterCidrIPv6": "fd00:10:244::/48"                  (dual stack: IPv6 pods' range)
 *
 * Pure: no I/O.
 */
import { isObject } from "../../common/json.js";
import { cidrHasHostBits, cidrNetwork, formatCidr, parseCidr } from "../../net/ip.js";

export type CrossNodeMode = "auto" | "host-gw" | "vxlan" | "none";

const CROSS_NODE_MODES: readonly CrossNodeMode[] = ["auto", "host-gw", "vxlan", "none"];

/** The VXLAN device's name: the driver owns the device, and everything on it. */
export const VXLAN_DEVICE = "midokube-vxlan";
const DEFAULT_VXLAN_VNI = 1;
/** IANA's VXLAN port. */
const DEFAULT_VXLAN_PORT = 4789;

export interface ClusterNetworkSettings {
  crossNode: CrossNodeMode;
  vxlan: { vni: number; port: number };
  masquerade: boolean;
  /** Destinations pod traffic reaches with its own source address, beyond clusterCidr. */
  nonMasqueradeCidrs: string[];
  /** Every pod's IPv4 address is in it; traffic leaving it is masqueraded. */
  clusterCidr?: string;
  /** The same for pods' IPv6 addresses (a dual-stack cluster). */
  clusterCidrIPv6?: string;
}

/** A driver.json value that is not what its key takes: the message names the key. */
export class ClusterNetworkSettingsError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ClusterNetworkSettingsError";
  }
}

const bad = (key: string, what: string, v: unknown) =>
  new ClusterNetworkSettingsError(`${key} must be ${what}, not ${JSON.stringify(v)}`);

function integerIn(key: string, v: unknown, min: number, max: number, dflt: number): number {
  if (v === undefined) return dflt;
  if (typeof v !== "number" || !Number.isInteger(v) || v < min || v > max)
    throw bad(key, `an integer from ${min} to ${max}`, v);
  return v;
}

function cidr(key: string, v: unknown, family?: 4 | 6): string {
  const c = typeof v === "string" ? parseCidr(v) : undefined;
  if (!c || (family !== undefined && c.family !== family))
    throw bad(key, family ? `an IPv${family} CIDR` : "a CIDR", v);
  if (cidrHasHostBits(c))
    throw new ClusterNetworkSettingsError(
      `${key} ${JSON.stringify(v)} has host bits set (the network is ${formatCidr(cidrNetwork(c))})`,
    );
  return formatCidr(c);
}

/** The cluster-network keys of a parsed driver.json (other keys are ignored). Throws naming the key. */
export function readClusterNetworkSettings(
  settings: Record<string, unknown>,
): ClusterNetworkSettings {
  const crossNode = settings.crossNode ?? "auto";
  if (!CROSS_NODE_MODES.includes(crossNode as CrossNodeMode))
    throw bad("crossNode", CROSS_NODE_MODES.map((m) => JSON.stringify(m)).join(" | "), crossNode);
  const vx = settings.vxlan ?? {};
  if (!isObject(vx)) throw bad("vxlan", 'an object ({"vni": …, "port": …})', vx);
  const vxo = vx as Record<string, unknown>;
  const unknown = Object.keys(vxo).filter((k) => k !== "vni" && k !== "port");
  if (unknown.length > 0)
    throw new ClusterNetworkSettingsError(
      `vxlan: unknown key ${JSON.stringify(unknown[0])} (known: vni, port)`,
    );
  const masquerade = settings.masquerade ?? true;
  if (typeof masquerade !== "boolean") throw bad("masquerade", "true or false", masquerade);
  const list = settings.nonMasqueradeCidrs ?? [];
  if (!Array.isArray(list)) throw bad("nonMasqueradeCidrs", "an array of CIDRs", list);
  const nonMasqueradeCidrs = list.map((c, i) => cidr(`nonMasqueradeCidrs[${i}]`, c));
  const out: ClusterNetworkSettings = {
    crossNode: crossNode as CrossNodeMode,
    vxlan: {
      // VNI 0 is reserved; 2^24 - 1 is the largest.
      vni: integerIn("vxlan.vni", vxo.vni, 1, 16_777_215, DEFAULT_VXLAN_VNI),
      port: integerIn("vxlan.port", vxo.port, 1, 65_535, DEFAULT_VXLAN_PORT),
    },
    masquerade,
    nonMasqueradeCidrs,
  };
  if (settings.clusterCidr !== undefined)
    out.clusterCidr = cidr("clusterCidr", settings.clusterCidr);
  if (settings.clusterCidrIPv6 !== undefined)
    out.clusterCidrIPv6 = cidr("clusterCidrIPv6", settings.clusterCidrIPv6, 6);
  return out;
}
