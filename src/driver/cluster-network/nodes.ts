/**
 * What the cluster network needs of a Node: its name, its pod CIDRs, its
 * underlay addresses (status.addresses, InternalIP first, as kubelet reports
 * them) and the MAC of its VXLAN device, which each driver publishes on its
 * own Node.
 */
import type { PodCidrs } from "../config/pod-cidr.js";
import type { KubeObjectView } from "../kube/api.js";
import { nodeIpsOf, podCidrsOfNode } from "../kube/node-pod-cidrs.js";

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
    ...nodeIpsOf(node),
    ...(vtepMac ? { vtepMac } : {}),
  };
}
