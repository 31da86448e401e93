/**
 * Address arithmetic of the integration: in a node's pod CIDR the first address
 * is the gateway (the cluster router's port) and the second the node itself
 * (midokube-node), for either family.
 */
import { cidrNetwork, formatIp, type IpFamily, parseCidr, parseIp } from "../../cni/ip.js";

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
}

export type PodSubnetResult =
  | { ok: true; subnet: PodSubnet }
  | { ok: false; reason: "invalid" | "too-small" };

function plus(bytes: Uint8Array, n: number): Uint8Array {
  const out = Uint8Array.from(bytes);
  let carry = n;
  for (let i = out.length - 1; i >= 0 && carry > 0; i--) {
    const sum = (out[i] as number) + carry;
    out[i] = sum & 0xff;
    carry = sum >> 8;
  }
  return out;
}

/** The gateway and node address of a pod CIDR ("10.1.0.0/24" or "fd00:1::/64"). */
export function podSubnet(text: string): PodSubnetResult {
  const parsed = parseCidr(text);
  if (!parsed) return { ok: false, reason: "invalid" };
  // Room for the network, the gateway and the node (and IPv4's broadcast).
  if (parsed.prefix > (parsed.family === 4 ? 30 : 126)) return { ok: false, reason: "too-small" };
  const net = cidrNetwork(parsed);
  const network = formatIp(net.bytes);
  return {
    ok: true,
    subnet: {
      family: parsed.family,
      cidr: `${network}/${net.prefix}`,
      network,
      prefix: net.prefix,
      gateway: formatIp(plus(net.bytes, 1)),
      nodeIp: formatIp(plus(net.bytes, 2)),
    },
  };
}

/**
 * True when `text` is already a canonical dotted quad (four decimal octets ≤ 255,
 * no leading zeros): the common case, recognised without allocating.
 */
function isCanonicalIpv4(text: string): boolean {
  let dots = 0;
  let digits = 0;
  let value = 0;
  let first = 0;
  for (let i = 0; i < text.length; i++) {
    const ch = text.charCodeAt(i);
    if (ch === 0x2e) {
      if (digits === 0 || dots === 3) return false;
      dots++;
      digits = 0;
      value = 0;
    } else if (ch >= 0x30 && ch <= 0x39) {
      if (digits === 0) first = ch;
      else if (first === 0x30) return false;
      value = value * 10 + (ch - 0x30);
      if (++digits > 3 || value > 255) return false;
    } else {
      return false;
    }
  }
  return dots === 3 && digits > 0;
}

/** Canonical text and family of an address (as Go writes it); undefined when it does not parse. */
export function parseAddress(text: string): { ip: string; family: IpFamily } | undefined {
  if (isCanonicalIpv4(text)) return { ip: text, family: 4 };
  const ip = parseIp(text);
  return ip ? { ip: formatIp(ip), family: ip.family } : undefined;
}

/**
 * A sort key that orders canonical IPv4 addresses numerically with plain string
 * comparison ("10.0.0.9" before "10.0.0.10"): eight hex digits.
 */
export function ipv4SortKey(ip: string): string {
  let key = "";
  for (const octet of ip.split(".")) key += Number(octet).toString(16).padStart(2, "0");
  return key;
}
