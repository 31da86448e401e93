/**
 * The shapes pod-interface.ts and the netlink backend share: what a pod's
 * veth pair, addresses and routes are, and what CHECK reads back. Types only,
 * so both sides import them without importing each other.
 */

export interface PodAddress {
  /** CIDR with host bits, e.g. "10.1.0.5/24". */
  cidr: string;
}

export interface PodRoute {
  dst: string;
  gw?: string;
  /**
   * A default route (0.0.0.0/0, ::/0) added only when the pod has none of its
   * family yet: a pod's second interface (Multus' net1) must neither fail on
   * the first one's route nor take its traffic.
   */
  ifNoDefault?: boolean;
}

export interface VethSpec {
  netns: string;
  ifName: string;
  hostIfName: string;
  mtu: number;
  containerMac: string;
  hostMac: string;
}

export interface HostAttachment {
  /** Enslave the host end to this bridge; absent: leave it standalone (an agent binds it). */
  bridge?: string;
  /**
   * The bridge port in hairpin mode (default on), which kube-proxy needs for a
   * pod reaching itself through a Service's DNAT on a bridge whose IP traffic
   * br_netfilter hands to iptables.
   */
  hairpin?: boolean;
}

export interface ContainerSideSpec {
  netns: string;
  ifName: string;
  addresses: readonly PodAddress[];
  routes: readonly PodRoute[];
}

export interface PodInterfaceRef {
  netns?: string;
  ifName: string;
  hostIfName: string;
  /**
   * The host end's MAC as ADD made it. The host end is deleted by name only when
   * it still has this MAC: a newer sandbox of the same pod may own the name by
   * now. Without it the host end is left (see hostMacStillMatches).
   */
  hostMac?: string;
}

export interface LinkInfo {
  ifname: string;
  address?: string;
  mtu?: number;
  operstate?: string;
  flags?: string[];
  linkinfo?: { info_kind?: string };
  master?: string;
}

export interface AddrInfo {
  family: "inet" | "inet6";
  local: string;
  prefixlen: number;
}

export interface RouteInfo {
  dst: string;
  gateway?: string;
}

export interface PodInterfaceState {
  link: LinkInfo;
  addresses: AddrInfo[];
  routes: RouteInfo[];
}
