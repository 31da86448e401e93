/**
 * rtnetlink requests as bytes: the messages pod plumbing sends. No I/O here.
 * Attribute order follows iproute2's where it matters to no one but a reader
 * comparing against `strace ip …`.
 */

import { type IpFamily, parseCidr, parseIp } from "../../net/ip.js";
import { normalizeMac } from "../../net/mac.js";
import {
  AF_INET,
  AF_INET6,
  AF_UNSPEC,
  align4,
  IFA_ADDRESS,
  IFA_F_NODAD,
  IFA_LOCAL,
  IFADDRMSG_LEN,
  IFF_UP,
  IFINFOMSG_LEN,
  IFLA_ADDRESS,
  IFLA_BR_NF_CALL_IP6TABLES,
  IFLA_BR_NF_CALL_IPTABLES,
  IFLA_BRPORT_MODE,
  IFLA_IFNAME,
  IFLA_INFO_DATA,
  IFLA_INFO_KIND,
  IFLA_INFO_SLAVE_DATA,
  IFLA_INFO_SLAVE_KIND,
  IFLA_LINKINFO,
  IFLA_MASTER,
  IFLA_MTU,
  IFLA_NET_NS_FD,
  IFLA_NET_NS_PID,
  NLM_F_ACK,
  NLM_F_CREATE,
  NLM_F_DUMP,
  NLM_F_EXCL,
  NLM_F_REPLACE,
  NLM_F_REQUEST,
  NLMSG_HDRLEN,
  RT_SCOPE_LINK,
  RT_SCOPE_UNIVERSE,
  RT_TABLE_MAIN,
  RTA_DST,
  RTA_GATEWAY,
  RTA_OIF,
  RTM_DELLINK,
  RTM_GETADDR,
  RTM_GETLINK,
  RTM_GETROUTE,
  RTM_NEWADDR,
  RTM_NEWLINK,
  RTM_NEWROUTE,
  RTM_SETLINK,
  RTMSG_LEN,
  RTN_UNICAST,
  RTPROT_BOOT,
  VETH_INFO_PEER,
} from "./rtnetlink-constants.js";

// Exported for the tests.
/** One attribute: length, type, payload, padding to 4 bytes. */
export function nlattr(type: number, payload: Uint8Array): Buffer {
  const len = 4 + payload.length;
  const b = Buffer.alloc(align4(len));
  b.writeUInt16LE(len, 0);
  b.writeUInt16LE(type, 2);
  b.set(payload, 4);
  return b;
}

function attrU32(type: number, value: number): Buffer {
  const p = Buffer.alloc(4);
  p.writeUInt32LE(value >>> 0, 0);
  return nlattr(type, p);
}

/** A NUL-terminated string (IFLA_IFNAME: the kernel takes at most IFNAMSIZ-1 bytes). */
function attrString(type: number, text: string): Buffer {
  return nlattr(type, Buffer.from(`${text}\0`, "utf8"));
}

/** A nest: the children already encoded, back to back. */
function attrNest(type: number, children: readonly Uint8Array[]): Buffer {
  return nlattr(type, Buffer.concat(children));
}

interface IfInfoFields {
  family?: number;
  index?: number;
  flags?: number;
  change?: number;
}

/** struct ifinfomsg (16 bytes). */
function ifinfomsg(f: IfInfoFields = {}): Buffer {
  const b = Buffer.alloc(IFINFOMSG_LEN);
  b.writeUInt8(f.family ?? AF_UNSPEC, 0);
  b.writeInt32LE(f.index ?? 0, 4);
  b.writeUInt32LE(f.flags ?? 0, 8);
  b.writeUInt32LE(f.change ?? 0, 12);
  return b;
}

/** A whole message: nlmsghdr (port id 0, the kernel fills in ours) and its body. */
function nlmsg(type: number, flags: number, seq: number, body: readonly Uint8Array[]): Buffer {
  const payload = Buffer.concat(body);
  const b = Buffer.alloc(NLMSG_HDRLEN + payload.length);
  b.writeUInt32LE(b.length, 0);
  b.writeUInt16LE(type, 4);
  b.writeUInt16LE(flags, 6);
  b.writeUInt32LE(seq >>> 0, 8);
  b.writeUInt32LE(0, 12);
  b.set(payload, NLMSG_HDRLEN);
  return b;
}

/** "02:00:…" as 6 bytes; a TypeError for anything else (a caller bug, not a kernel answer). */
function macBytes(mac: string): Buffer {
  const norm = normalizeMac(mac);
  if (!norm) throw new TypeError(`not a MAC address: ${JSON.stringify(mac)}`);
  return Buffer.from(norm.replaceAll(":", ""), "hex");
}

function ipBytes(text: string): { family: IpFamily; bytes: Uint8Array } {
  const ip = parseIp(text);
  if (!ip) throw new TypeError(`not an IP address: ${JSON.stringify(text)}`);
  return ip;
}

const addressFamily = (f: IpFamily): number => (f === 4 ? AF_INET : AF_INET6);

/** A link by name or by index: ifi_index when known, else IFLA_IFNAME (kernel looks it up). */
export type LinkSelector =
  | { name: string; index?: undefined }
  | { index: number; name?: undefined };

function selectorParts(sel: LinkSelector): { index: number; attrs: Buffer[] } {
  return sel.index !== undefined
    ? { index: sel.index, attrs: [] }
    : { index: 0, attrs: [attrString(IFLA_IFNAME, sel.name)] };
}

const CREATE_EXCL = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL;

interface VethPeerSpec {
  name: string;
  mtu?: number;
  address?: string;
  /** An fd of the target netns, open in the sending process (any nsfs path works). */
  netnsFd?: number;
  netnsPid?: number;
}

interface NewVethSpec {
  name: string;
  mtu?: number;
  address?: string;
  /** ifindex of the bridge to enslave the new end to (applied at creation by the kernel). */
  master?: number;
  up?: boolean;
  peer: VethPeerSpec;
}

function linkAttrs(s: { name: string; mtu?: number; address?: string; master?: number }): Buffer[] {
  return [
    ...(s.mtu !== undefined ? [attrU32(IFLA_MTU, s.mtu)] : []),
    ...(s.address !== undefined ? [nlattr(IFLA_ADDRESS, macBytes(s.address))] : []),
    ...(s.master !== undefined ? [attrU32(IFLA_MASTER, s.master)] : []),
    attrString(IFLA_IFNAME, s.name),
  ];
}

/** The kind without its NUL, as iproute2 sends it (the kernel accepts both). */
const kindAttr = (kind: string) => nlattr(IFLA_INFO_KIND, Buffer.from(kind, "utf8"));

/** RTM_NEWLINK type veth, create-exclusive: `ip link add NAME … type veth peer name PEER … netns NS`. */
export function encodeNewVeth(seq: number, spec: NewVethSpec): Buffer {
  const p = spec.peer;
  const peerBody = Buffer.concat([
    // Never up here: the kernel opens the peer before linking the two ends, and
    // veth_open then fails with ENOTCONN. The peer is brought up afterwards.
    ifinfomsg(),
    ...(p.mtu !== undefined ? [attrU32(IFLA_MTU, p.mtu)] : []),
    ...(p.address !== undefined ? [nlattr(IFLA_ADDRESS, macBytes(p.address))] : []),
    ...(p.netnsFd !== undefined ? [attrU32(IFLA_NET_NS_FD, p.netnsFd)] : []),
    ...(p.netnsPid !== undefined ? [attrU32(IFLA_NET_NS_PID, p.netnsPid)] : []),
    attrString(IFLA_IFNAME, p.name),
  ]);
  return nlmsg(RTM_NEWLINK, CREATE_EXCL, seq, [
    ifinfomsg(spec.up ? { flags: IFF_UP, change: IFF_UP } : {}),
    ...linkAttrs(spec),
    attrNest(IFLA_LINKINFO, [
      kindAttr("veth"),
      attrNest(IFLA_INFO_DATA, [nlattr(VETH_INFO_PEER, peerBody)]),
    ]),
  ]);
}

/** RTM_NEWLINK type bridge, create-exclusive, down. */
export function encodeNewBridge(
  seq: number,
  spec: { name: string; mtu?: number; address?: string },
): Buffer {
  return nlmsg(RTM_NEWLINK, CREATE_EXCL, seq, [
    ifinfomsg(),
    ...linkAttrs(spec),
    attrNest(IFLA_LINKINFO, [kindAttr("bridge")]),
  ]);
}

/** RTM_SETLINK: bring up (or down), and/or enslave to a master (0 releases). */
export function encodeSetLink(
  seq: number,
  sel: LinkSelector,
  change: { up?: boolean; master?: number },
): Buffer {
  const { index, attrs } = selectorParts(sel);
  const flags =
    change.up === undefined ? {} : { flags: change.up ? IFF_UP : 0, change: IFF_UP as number };
  return nlmsg(RTM_SETLINK, NLM_F_REQUEST | NLM_F_ACK, seq, [
    ifinfomsg({ index, ...flags }),
    ...attrs,
    ...(change.master !== undefined ? [attrU32(IFLA_MASTER, change.master)] : []),
  ]);
}

/**
 * RTM_NEWLINK (no create) on a bridge port: `ip link set NAME type
 * bridge_slave hairpin on` — frames may leave by the port they came in, so a
 * pod reaches itself through a Service's DNAT.
 */
export function encodeBridgePortHairpin(seq: number, sel: LinkSelector, on: boolean): Buffer {
  const { index, attrs } = selectorParts(sel);
  return nlmsg(RTM_NEWLINK, NLM_F_REQUEST | NLM_F_ACK, seq, [
    ifinfomsg({ index }),
    ...attrs,
    attrNest(IFLA_LINKINFO, [
      nlattr(IFLA_INFO_SLAVE_KIND, Buffer.from("bridge", "utf8")),
      attrNest(IFLA_INFO_SLAVE_DATA, [nlattr(IFLA_BRPORT_MODE, Buffer.from([on ? 1 : 0]))]),
    ]),
  ]);
}

/**
 * RTM_NEWLINK (no create) on a bridge: `ip link set NAME type bridge
 * nf_call_iptables 1 nf_call_ip6tables 1` — bridged IP traffic goes through
 * the IP hooks (br_netfilter), whatever the node-wide sysctl says.
 */
export function encodeBridgeNfCall(seq: number, sel: LinkSelector, on: boolean): Buffer {
  const { index, attrs } = selectorParts(sel);
  const v = Buffer.from([on ? 1 : 0]);
  return nlmsg(RTM_NEWLINK, NLM_F_REQUEST | NLM_F_ACK, seq, [
    ifinfomsg({ index }),
    ...attrs,
    attrNest(IFLA_LINKINFO, [
      kindAttr("bridge"),
      attrNest(IFLA_INFO_DATA, [
        nlattr(IFLA_BR_NF_CALL_IPTABLES, v),
        nlattr(IFLA_BR_NF_CALL_IP6TABLES, v),
      ]),
    ]),
  ]);
}

export function encodeDelLink(seq: number, sel: LinkSelector): Buffer {
  const { index, attrs } = selectorParts(sel);
  return nlmsg(RTM_DELLINK, NLM_F_REQUEST | NLM_F_ACK, seq, [ifinfomsg({ index }), ...attrs]);
}

/** RTM_GETLINK for one link: the kernel answers an RTM_NEWLINK, then the ack. */
export function encodeGetLink(seq: number, sel: LinkSelector): Buffer {
  const { index, attrs } = selectorParts(sel);
  return nlmsg(RTM_GETLINK, NLM_F_REQUEST | NLM_F_ACK, seq, [ifinfomsg({ index }), ...attrs]);
}

/** RTM_GETLINK dump; with `master`, the kernel returns only that bridge's ports. */
export function encodeDumpLinks(seq: number, filter: { master?: number } = {}): Buffer {
  return nlmsg(RTM_GETLINK, NLM_F_REQUEST | NLM_F_DUMP, seq, [
    ifinfomsg(),
    ...(filter.master !== undefined ? [attrU32(IFLA_MASTER, filter.master)] : []),
  ]);
}

interface NewAddrSpec {
  index: number;
  /** "10.1.0.5/24", "fd00::5/64": the address with its prefix. */
  cidr: string;
  /** `addr replace` (create or update) instead of `addr add` (EEXIST when present). */
  replace?: boolean;
  /** IPv6 only: skip duplicate address detection, so the address is usable at once. */
  nodad?: boolean;
}

/** RTM_NEWADDR with IFA_LOCAL and IFA_ADDRESS both the address, as iproute2 sends them. */
export function encodeNewAddr(seq: number, spec: NewAddrSpec): Buffer {
  const cidr = parseCidr(spec.cidr);
  if (!cidr) throw new TypeError(`not a CIDR: ${JSON.stringify(spec.cidr)}`);
  const head = Buffer.alloc(IFADDRMSG_LEN);
  head.writeUInt8(addressFamily(cidr.family), 0);
  head.writeUInt8(cidr.prefix, 1);
  head.writeUInt8(spec.nodad && cidr.family === 6 ? IFA_F_NODAD : 0, 2);
  head.writeUInt8(RT_SCOPE_UNIVERSE, 3);
  head.writeUInt32LE(spec.index, 4);
  const flags = spec.replace
    ? NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE
    : CREATE_EXCL;
  return nlmsg(RTM_NEWADDR, flags, seq, [
    head,
    nlattr(IFA_LOCAL, cidr.bytes),
    nlattr(IFA_ADDRESS, cidr.bytes),
  ]);
}

/** RTM_GETADDR dump of one family (or both); filtered by interface on our side. */
export function encodeDumpAddrs(seq: number, family?: IpFamily): Buffer {
  const head = Buffer.alloc(IFADDRMSG_LEN);
  head.writeUInt8(family ? addressFamily(family) : AF_UNSPEC, 0);
  return nlmsg(RTM_GETADDR, NLM_F_REQUEST | NLM_F_DUMP, seq, [head]);
}

interface NewRouteSpec {
  /** "0.0.0.0/0", "10.96.0.0/12", "::/0". */
  dst: string;
  gateway?: string;
  oif: number;
}

/**
 * RTM_NEWROUTE, create-exclusive (`ip route add`): main table, protocol boot,
 * scope link for an IPv4 route without a gateway and universe otherwise, as
 * iproute2 chooses them.
 */
export function encodeNewRoute(seq: number, spec: NewRouteSpec): Buffer {
  const dst = parseCidr(spec.dst);
  if (!dst) throw new TypeError(`not a CIDR: ${JSON.stringify(spec.dst)}`);
  const gw = spec.gateway !== undefined ? ipBytes(spec.gateway) : undefined;
  const head = Buffer.alloc(RTMSG_LEN);
  head.writeUInt8(addressFamily(dst.family), 0);
  head.writeUInt8(dst.prefix, 1);
  head.writeUInt8(RT_TABLE_MAIN, 4);
  head.writeUInt8(RTPROT_BOOT, 5);
  head.writeUInt8(!gw && dst.family === 4 ? RT_SCOPE_LINK : RT_SCOPE_UNIVERSE, 6);
  head.writeUInt8(RTN_UNICAST, 7);
  return nlmsg(RTM_NEWROUTE, CREATE_EXCL, seq, [
    head,
    ...(dst.prefix > 0 ? [nlattr(RTA_DST, dst.bytes)] : []),
    ...(gw ? [nlattr(RTA_GATEWAY, gw.bytes)] : []),
    attrU32(RTA_OIF, spec.oif),
  ]);
}

/** RTM_GETROUTE dump of one family (all tables; filtered on our side). */
export function encodeDumpRoutes(seq: number, family: IpFamily): Buffer {
  const head = Buffer.alloc(RTMSG_LEN);
  head.writeUInt8(addressFamily(family), 0);
  return nlmsg(RTM_GETROUTE, NLM_F_REQUEST | NLM_F_DUMP, seq, [head]);
}
