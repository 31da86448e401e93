/**
 * Pod ranges that would break the node are refused at config load (pure; the
 * caller lists the node's addresses). The kernel datapath puts each range's
 * gateway on the node's bridge, with a connected route for the whole range:
 *
 * - a range that contains, or lies inside, the network of an address on a
 *   node interface the driver did not make takes the node's own subnet (the
 *   bridge gets the node's gateway address: 192.0.2.0/24 on a node at
 *   192.0.2.2);
 * - 0.0.0.0/0 and ::/0 take every address;
 * - loopback, link-local, multicast and unspecified ranges take what the
 *   kernel reserves (127.0.0.0/8 puts 127.0.0.1/8 on the bridge).
 */

import { NODE_INTERFACE, NODE_PEER_INTERFACE } from "../../midonet/node-contract.js";
import {
  cidrContains,
  cidrNetwork,
  cidrsOverlap,
  formatCidr,
  type ParsedCidr,
  parseCidr,
} from "../../net/ip.js";
import { bridgeMac } from "../../plumbing/mac.js";
import type { InterfaceAddress } from "../../plumbing/node-addresses.js";
import { VXLAN_DEVICE } from "../cluster-network/settings.js";

/** One address on one of the node's interfaces, as the driver's namespace shows it. */
export type NodeAddress = InterfaceAddress;

/** Ranges the kernel reserves, which no pod range may touch. */
const RESERVED: ReadonlyArray<{ cidr: ParsedCidr; what: string }> = [
  ["0.0.0.0/8", "unspecified"],
  ["127.0.0.0/8", "loopback"],
  ["169.254.0.0/16", "link-local"],
  ["224.0.0.0/4", "multicast"],
  ["::/128", "unspecified"],
  ["::1/128", "loopback"],
  ["fe80::/10", "link-local"],
  ["ff00::/8", "multicast"],
].map(([cidr, what]) => ({ cidr: parseCidr(cidr as string) as ParsedCidr, what: what as string }));

/**
 * Whether the driver made the interface itself, so its addresses are the pod
 * ranges' own: a bridge with the MAC the driver gives its bridges (plumbing's
 * bridgeMac, derived from the name), the MidoNet node link. Pods' host veths
 * carry no address of the driver's: one with an address is someone else's.
 */
export function madeByDriver(a: NodeAddress, nodeLinkNames: readonly string[]): boolean {
  if (a.kind === "bridge" && a.mac?.toLowerCase() === bridgeMac(a.ifName)) return true;
  return nodeLinkNames.includes(a.ifName);
}

/**
 * The node link's names under driver.json's settings, and the defaults; and
 * the VXLAN device, whose address is the pod range's network address.
 */
export function nodeLinkNames(settings: {
  nodeInterface?: unknown;
  nodePeerInterface?: unknown;
}): string[] {
  return [
    VXLAN_DEVICE,
    NODE_INTERFACE,
    NODE_PEER_INTERFACE,
    settings.nodeInterface,
    settings.nodePeerInterface,
  ].filter((n): n is string => typeof n === "string");
}

/**
 * Why a pod range would break the node, or undefined. `node`: the addresses
 * on interfaces the driver did not make (see madeByDriver).
 */
export function podRangeProblem(
  subnet: ParsedCidr,
  node: readonly NodeAddress[],
): string | undefined {
  const text = formatCidr(cidrNetwork(subnet));
  if (subnet.prefix === 0)
    return `${text} takes every ${subnet.family === 4 ? "IPv4" : "IPv6"} address, the node's own too`;
  for (const r of RESERVED) {
    if (cidrsOverlap(subnet, r.cidr))
      return `${text} overlaps the ${r.what} range ${formatCidr(r.cidr)}`;
  }
  for (const a of node) {
    const addr = parseCidr(a.cidr);
    if (!addr || !cidrsOverlap(subnet, addr)) continue;
    const inside = cidrContains(subnet, addr);
    return `${text} ${inside ? "contains" : "lies inside"} the node's address ${a.cidr} on ${a.ifName}${
      inside ? "" : ` (network ${formatCidr(cidrNetwork(addr))})`
    }`;
  }
  return undefined;
}
