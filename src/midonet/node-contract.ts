/**
 * What a node's driver and the MidoNet side (mapping, controller) agree on, in
 * one place and without I/O, so that neither can drift from the other:
 *
 * - the node link's names: `midokube-node` in the host carries the node's
 *   address on the pod network; its peer `midokube-mido` is what the MidoNet
 *   agent binds to the node's port;
 * - the annotations on Nodes and Pods (names kept from midonet-kubernetes);
 * - the addressing of a pod CIDR: its network + 1 is the gateway (the cluster
 *   router's port), network + 2 the node itself, for either family.
 */
import {
  bigIntToIp,
  cidrNetwork,
  formatIp,
  type IpFamily,
  ipToBigInt,
  type ParsedCidr,
  parseCidr,
} from "../net/ip.js";

/** The host end of the node link, holding the node's pod-network address. */
export const NODE_INTERFACE = "midokube-node";
/** The MidoNet end of the node link, bound to the node port by the agent. */
export const NODE_PEER_INTERFACE = "midokube-mido";

/** On a Pod: the MAC of its interface; on a Node: the MAC of NODE_INTERFACE. */
export const ANNOTATION_MAC_ADDRESS = "midonet.org/mac-address";
/** On a Node: its MidoNet host's id. */
export const ANNOTATION_HOST_ID = "midonet.org/host-id";
/** On a Node: the tunnel zone its host joins (absent: the default zone). */
export const ANNOTATION_TUNNEL_ZONE_ID = "midonet.org/tunnel-zone-id";
/** On a Node: its host's address in the tunnel zone (absent: the first IPv4 InternalIP). */
export const ANNOTATION_TUNNEL_ENDPOINT_IP = "midonet.org/tunnel-endpoint-ip";
/**
 * Ours, not the original's: the tunnel zone the controller last joined the
 * node's host to (written before the join), so a membership left in a zone
 * the node moved out of while the controller was down is found at restart.
 */
export const ANNOTATION_TUNNEL_ZONE_JOINED = "midonet.org/tunnel-zone-joined";

/** The gateway's distance from the pod CIDR's network address. */
const GATEWAY_OFFSET = 1;
/** The node's distance from the pod CIDR's network address. */
const NODE_OFFSET = 2;

export interface PodSubnet {
  family: IpFamily;
  /** The network, canonical: "10.1.0.0/24". */
  cidr: string;
  network: string;
  prefix: number;
  /** network + 1: the router port's address. */
  gateway: string;
  /** network + 2: the node's own address on the pod network. */
  nodeIp: string;
  /** network + 3: the first address a pod may get (none gets the gateway's or the node's). */
  firstPodIp: string;
}

type PodSubnetResult =
  | { ok: true; subnet: PodSubnet }
  | { ok: false; reason: "invalid" | "too-small" };

/**
 * The gateway and node address of a pod CIDR ("10.1.0.0/24" or "fd00:1::/64"),
 * host bits ignored; "too-small" when the CIDR has no room for both.
 */
export function podSubnet(text: string): PodSubnetResult {
  const parsed = parseCidr(text);
  if (!parsed) return { ok: false, reason: "invalid" };
  // Room for the network, the gateway and the node (and IPv4's broadcast).
  if (parsed.prefix > (parsed.family === 4 ? 30 : 126)) return { ok: false, reason: "too-small" };
  return { ok: true, subnet: podSubnetOf(parsed) };
}

/** The addressing of a parsed pod CIDR, whatever its size (see podSubnet for the check). */
export function podSubnetOf(cidr: ParsedCidr): PodSubnet {
  const net = cidrNetwork(cidr);
  const network = formatIp(net);
  const base = ipToBigInt(net.bytes);
  const at = (offset: number): string => bigIntToIp(base + BigInt(offset), net.family);
  return {
    family: net.family,
    cidr: `${network}/${net.prefix}`,
    network,
    prefix: net.prefix,
    gateway: at(GATEWAY_OFFSET),
    nodeIp: at(NODE_OFFSET),
    firstPodIp: at(NODE_OFFSET + 1),
  };
}
