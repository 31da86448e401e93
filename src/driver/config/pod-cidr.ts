/**
 * The podCIDR template: host-local's `"subnet": "usePodCidr"` (IPv4) and
 * `"usePodCidrIPv6"` (IPv6) are replaced by the node's pod CIDRs, so one
 * ConfigMap serves every node. Pure: works on parsed JSON, returns a copy.
 */

import { CniError, ErrorCode } from "../../cni/errors.js";
import { goField } from "../../cni/go-json.js";
import { isObject, type JsonObject } from "../../common/json.js";
import { podSubnetOf } from "../../midonet/node-contract.js";
import { ipFamily, parseCidr } from "../../net/ip.js";
import { MIDONET_PLUGIN_TYPE } from "../builtin/midonet/config.js";

const POD_CIDR_V4 = "usePodCidr";
const POD_CIDR_V6 = "usePodCidrIPv6";

export interface PodCidrs {
  v4?: string;
  v6?: string;
}

/** Where a template sits, for the error message: `plugins[0] ("ptp"): ipam.ranges[1][0].subnet`. */
function where(pluginIndex: number, plugin: JsonObject, field: string): string {
  const type = typeof plugin.type === "string" ? ` (${JSON.stringify(plugin.type)})` : "";
  return `plugins[${pluginIndex}]${type}: ipam.${field}`;
}

/**
 * Replaces the template in one `subnet` holder (the legacy top-level ipam, or
 * one range), in place on the copy. `skipNodeLink`: an IPv4 pod CIDR filled
 * in starts after the node link's address, unless the holder says where to start.
 */
function fill(
  holder: JsonObject,
  podCidrs: PodCidrs,
  at: () => string,
  skipNodeLink = false,
): void {
  const subnet = holder.subnet;
  if (subnet === POD_CIDR_V4 || subnet === POD_CIDR_V6) {
    const v6 = subnet === POD_CIDR_V6;
    const cidr = v6 ? podCidrs.v6 : podCidrs.v4;
    if (cidr === undefined || cidr === "") {
      const family = v6 ? "IPv6" : "IPv4";
      throw new CniError(
        ErrorCode.InvalidNetworkConfig,
        `${at()}: "${subnet}" needs the node's ${family} pod CIDR, and the node has no ${family} pod CIDR yet (--pod-cidr unset and no ${family} entry in the Node's spec.podCIDRs)`,
      );
    }
    // A v6 CIDR given as the v4 one (or the reverse) would pass every later
    // check and hand out addresses of the wrong family: catch it here.
    if (ipFamily(cidr) !== (v6 ? 6 : 4)) {
      throw new CniError(
        ErrorCode.InvalidNetworkConfig,
        `${at()}: "${subnet}": the node's ${v6 ? "IPv6" : "IPv4"} pod CIDR ${JSON.stringify(cidr)} is not an ${v6 ? "IPv6" : "IPv4"} CIDR`,
      );
    }
    holder.subnet = cidr;
    // host-local's default start (network + 1, the gateway skipped) would give the first pod the node's.
    const parsed = skipNodeLink && !v6 ? parseCidr(cidr) : undefined;
    if (parsed && goField(holder, "rangeStart") === undefined)
      holder.rangeStart = podSubnetOf(parsed).firstPodIp;
  }
}

/**
 * Returns a copy of `conflist` (parsed JSON) with every `usePodCidr` /
 * `usePodCidrIPv6` subnet of a host-local `ipam` replaced by the matching pod
 * CIDR: the legacy top-level `ipam.subnet` and every `ipam.ranges[i][j].subnet`,
 * in every plugin. Throws code 7 when a network uses a template whose pod CIDR
 * is unknown. Anything that is not shaped like a conflist is returned (copied)
 * as it is: structural errors are the conflist parser's to report.
 *
 * With `hostLocalDataDir`, a host-local `ipam` without `dataDir` gets it.
 *
 * Only host-local is expanded: another IPAM plugin may give `subnet` a meaning
 * of its own, and the template is host-local's by contract.
 */
export function expandPodCidr(
  conflist: unknown,
  podCidrs: PodCidrs,
  hostLocalDataDir?: string,
): unknown {
  const copy: unknown = structuredClone(conflist);
  if (!isObject(copy) || !Array.isArray(copy.plugins)) return copy;
  copy.plugins.forEach((plugin: unknown, i: number) => {
    if (!isObject(plugin) || !isObject(plugin.ipam) || plugin.ipam.type !== "host-local") return;
    const ipam = plugin.ipam;
    // The node's lease directory (--host-local-data-dir) where the network sets none,
    // so tests and demos run under a temporary root and the cache records where leases live.
    // host-local reads the key in any case ("datadir"): one written so is the network's own.
    if (hostLocalDataDir && goField(ipam, "dataDir") === undefined) ipam.dataDir = hostLocalDataDir;
    // The midonet plugin's `midonet` datapath puts the node link on the pod CIDR's network + 2.
    const skipNodeLink = plugin.type === MIDONET_PLUGIN_TYPE && plugin.datapath === "midonet";
    fill(ipam, podCidrs, () => where(i, plugin, "subnet"), skipNodeLink);
    if (!Array.isArray(ipam.ranges)) return;
    ipam.ranges.forEach((set: unknown, s: number) => {
      if (!Array.isArray(set)) return;
      set.forEach((range: unknown, r: number) => {
        if (isObject(range))
          fill(range, podCidrs, () => where(i, plugin, `ranges[${s}][${r}].subnet`), skipNodeLink);
      });
    });
  });
  return copy;
}
