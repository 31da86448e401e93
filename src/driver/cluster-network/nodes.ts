/**
 * What the cluster network needs of a Node: its name, its pod CIDRs, its
 * underlay addresses (status.addresses, InternalIP first, as kubelet reports
 * them) and the MAC of its VXLAN device, which each driver publishes on its
 * own Node.
 */
import { canonicalIp } from "../../net/ip.js";
import type { PodCidrs } from "../config/pod-cidr.js";
import type { KubeObjectView } from "../kube/api.js";
import { podCidrsOfNode } from "../kube/node-pod-cidrs.js";

/** The Node annotation carrying the MAC of its `midokube-vxlan` device. */
export const VTEP_MAC_ANNOTATION = "midonet.org/vtep-mac";

export interface ClusterNode {
  name: string;
  podCidrs: PodCidrs;
  /** The node's IPv4 underlay address. */
  ipv4?: string;
  ipv6?: string;
  /** From VTEP_MAC_ANNOTATION. */
  vtepMac?: string;
}

interface NodeAddress {
  type?: unknown;
  address?: unknown;
}

/** InternalIP before ExternalIP, each family's first. */
function addressesOf(node: KubeObjectView): { ipv4?: string; ipv6?: string } {
  const status = (node.status ?? {}) as { addresses?: unknown };
  const list = Array.isArray(status.addresses) ? (status.addresses as NodeAddress[]) : [];
  const out: { ipv4?: string; ipv6?: string } = {};
  for (const type of ["InternalIP", "ExternalIP"]) {
    for (const a of list) {
      if (a.type !== type || typeof a.address !== "string") continue;
      const ip = canonicalIp(a.address);
      if (!ip) continue;
      if (ip.includes(":")) out.ipv6 ??= ip;
      else out.ipv4 ??= ip;
    }
  }
  return out;
}

const MAC = /^[0-9a-f]{2}(:[0-9a-f]{2}){5}$/;

export function clusterNodeOf(node: KubeObjectView): ClusterNode | undefined {
  const name = node.metadata?.name;
  if (!name) return undefined;
  const annotations = ((node.metadata as { annotations?: Record<string, unknown> }).annotations ??
    {}) as Record<string, unknown>;
  const mac = annotations[VTEP_MAC_ANNOTATION];
  const vtepMac =
    typeof mac === "string" && MAC.test(mac.toLowerCase()) ? mac.toLowerCase() : undefined;
  return {
    name,
    podCidrs: podCidrsOfNode(node),
    ...addressesOf(node),
    ...(vtepMac ? { vtepMac } : {}),
  };
}
