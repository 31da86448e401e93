/**
 * rtnetlink messages as bytes: the encoders for the requests pod plumbing sends
 * and the decoders for what the kernel answers. No I/O here. Host byte order is
 * little-endian on every platform the driver ships for (x86_64, arm64), so
 * native-endian netlink fields are written LE; addresses are network order.
 *
 * Layouts are those of <linux/netlink.h>, <linux/rtnetlink.h>, <linux/if_link.h>,
 * <linux/if_addr.h> and <linux/veth.h>. Attribute order follows iproute2's
 * where it matters to no one but a reader comparing against `strace ip …`.
 */

import { formatIp, type IpFamily, parseCidr, parseIp } from "../../net/ip.js";
import { normalizeMac } from "../../net/mac.js";

export const NLMSG_HDRLEN = 16;
const IFINFOMSG_LEN = 16;
const IFADDRMSG_LEN = 8;
const RTMSG_LEN = 12;

export const NLMSG_NOOP = 1;
export const NLMSG_ERROR = 2;
export const NLMSG_DONE = 3;

export const NLM_F_REQUEST = 0x01;
export const NLM_F_ACK = 0x04;
export const NLM_F_DUMP_INTR = 0x10;
export const NLM_F_DUMP = 0x300;
export const NLM_F_REPLACE = 0x100;
export const NLM_F_EXCL = 0x200;
export const NLM_F_CREATE = 0x400;
/** In an NLMSG_ERROR's own header: the echoed request was cut to its header / TLVs follow. */
export const NLM_F_CAPPED = 0x100;
export const NLM_F_ACK_TLVS = 0x200;

export const NLMSGERR_ATTR_MSG = 1;
export const NLMSGERR_ATTR_OFFS = 2;

export const RTM_NEWLINK = 16;
export const RTM_DELLINK = 17;
export const RTM_GETLINK = 18;
export const RTM_SETLINK = 19;
export const RTM_NEWADDR = 20;
export const RTM_GETADDR = 22;
export const RTM_NEWROUTE = 24;
export const RTM_GETROUTE = 26;

export const AF_UNSPEC = 0;
export const AF_INET = 2;
export const AF_INET6 = 10;

export const IFLA_ADDRESS = 1;
export const IFLA_IFNAME = 3;
export const IFLA_MTU = 4;
export const IFLA_MASTER = 10;
export const IFLA_OPERSTATE = 16;
export const IFLA_LINKINFO = 18;
export const IFLA_NET_NS_PID = 19;
export const IFLA_NET_NS_FD = 28;
export const IFLA_INFO_KIND = 1;
export const IFLA_INFO_DATA = 2;
export const IFLA_INFO_SLAVE_KIND = 4;
export const IFLA_INFO_SLAVE_DATA = 5;
/** A bridge port's hairpin mode (IFLA_BRPORT_MODE). */
export const IFLA_BRPORT_MODE = 4;
export const IFLA_BR_NF_CALL_IPTABLES = 36;
export const IFLA_BR_NF_CALL_IP6TABLES = 37;
export const VETH_INFO_PEER = 1;

export const IFA_ADDRESS = 1;
export const IFA_LOCAL = 2;
export const IFA_FLAGS = 8;
export const IFA_F_NODAD = 0x02;

export const RTA_DST = 1;
export const RTA_OIF = 4;
export const RTA_GATEWAY = 5;
export const RTA_TABLE = 15;
export const RT_TABLE_MAIN = 254;
export const RTPROT_BOOT = 3;
export const RT_SCOPE_UNIVERSE = 0;
export const RT_SCOPE_LINK = 253;
export const RTN_UNICAST = 1;
export const RTM_F_CLONED = 0x200;

export const IFF_UP = 0x1;

// ---------------------------------------------------------------------------
// Encoding

const align4 = (n: number): number => (n + 3) & ~3;

/** One attribute: length, type, payload, padding to 4 bytes. */
export function nlattr(type: number, payload: Uint8Array): Buffer {
  const len = 4 + payload.length;
  const b = Buffer.alloc(align4(len));
  b.writeUInt16LE(len, 0);
  b.writeUInt16LE(type, 2);
  b.set(payload, 4);
  return b;
}

export function attrU32(type: number, value: number): Buffer {
  const p = Buffer.alloc(4);
  p.writeUInt32LE(value >>> 0, 0);
  return nlattr(type, p);
}

/** A NUL-terminated string (IFLA_IFNAME: the kernel takes at most IFNAMSIZ-1 bytes). */
export function attrString(type: number, text: string): Buffer {
  return nlattr(type, Buffer.from(`${text}\0`, "utf8"));
}

/** A nest: the children already encoded, back to back. */
export function attrNest(type: number, children: readonly Uint8Array[]): Buffer {
  return nlattr(type, Buffer.concat(children));
}

export interface IfInfoFields {
  family?: number;
  index?: number;
  flags?: number;
  change?: number;
}

/** struct ifinfomsg (16 bytes). */
export function ifinfomsg(f: IfInfoFields = {}): Buffer {
  const b = Buffer.alloc(IFINFOMSG_LEN);
  b.writeUInt8(f.family ?? AF_UNSPEC, 0);
  b.writeInt32LE(f.index ?? 0, 4);
  b.writeUInt32LE(f.flags ?? 0, 8);
  b.writeUInt32LE(f.change ?? 0, 12);
  return b;
}

/** A whole message: nlmsghdr (port id 0, the kernel fills in ours) and its body. */
export function nlmsg(
  type: number,
  flags: number,
  seq: number,
  body: readonly Uint8Array[],
): Buffer {
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
export function macBytes(mac: string): Buffer {
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

export interface VethPeerSpec {
  name: string;
  mtu?: number;
  address?: string;
  /** An fd of the target netns, open in the sending process (any nsfs path works). */
  netnsFd?: number;
  netnsPid?: number;
}

export interface NewVethSpec {
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

export interface NewAddrSpec {
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

export interface NewRouteSpec {
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

// ---------------------------------------------------------------------------
// Decoding

export interface NlMessage {
  type: number;
  flags: number;
  seq: number;
  pid: number;
  /** The bytes after the header, up to nlmsg_len. */
  payload: Buffer;
}

/** Splits a buffer of back-to-back messages; stops at a malformed length. */
export function splitMessages(buf: Uint8Array): NlMessage[] {
  const b = Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength);
  const out: NlMessage[] = [];
  let off = 0;
  while (off + NLMSG_HDRLEN <= b.length) {
    const len = b.readUInt32LE(off);
    if (len < NLMSG_HDRLEN || off + len > b.length) break;
    out.push({
      type: b.readUInt16LE(off + 4),
      flags: b.readUInt16LE(off + 6),
      seq: b.readUInt32LE(off + 8),
      pid: b.readUInt32LE(off + 12),
      payload: b.subarray(off + NLMSG_HDRLEN, off + len),
    });
    off += align4(len);
  }
  return out;
}

/** Attributes from `offset` on, by type; the first of a repeated type wins. Flags bits are masked off. */
export function parseAttrs(buf: Buffer, offset = 0): Map<number, Buffer> {
  const attrs = new Map<number, Buffer>();
  let off = offset;
  while (off + 4 <= buf.length) {
    const len = buf.readUInt16LE(off);
    const type = buf.readUInt16LE(off + 2) & 0x3fff;
    if (len < 4 || off + len > buf.length) break;
    if (!attrs.has(type)) attrs.set(type, buf.subarray(off + 4, off + len));
    off += align4(len);
  }
  return attrs;
}

/** A string attribute without its NUL (and anything after it). */
export function attrText(b: Buffer | undefined): string | undefined {
  if (!b) return undefined;
  const nul = b.indexOf(0);
  return b.toString("utf8", 0, nul < 0 ? b.length : nul);
}

const u32 = (b: Buffer | undefined): number | undefined =>
  b && b.length >= 4 ? b.readUInt32LE(0) : undefined;

export interface NlErrorInfo {
  /** Positive errno; 0 is an ack. */
  errno: number;
  /** The kernel's extended ack text (NETLINK_EXT_ACK), e.g. "Unknown device type". */
  extack?: string;
  /** Offset in the request of the attribute the kernel rejected. */
  extackOffset?: number;
}

/**
 * NLMSG_ERROR (and a dump's NLMSG_DONE, whose payload starts with the same
 * error). The TLVs follow the echoed request: only its header when the kernel
 * capped it (NETLINK_CAP_ACK), the whole request otherwise.
 */
export function decodeError(msg: NlMessage): NlErrorInfo {
  const p = msg.payload;
  const err = p.length >= 4 ? p.readInt32LE(0) : 0;
  const info: NlErrorInfo = { errno: Math.abs(err) };
  if (msg.type !== NLMSG_ERROR || !(msg.flags & NLM_F_ACK_TLVS) || p.length < 4 + NLMSG_HDRLEN)
    return info;
  const echoedLen = p.readUInt32LE(4);
  const tlvOffset = 4 + (msg.flags & NLM_F_CAPPED ? NLMSG_HDRLEN : align4(echoedLen));
  const attrs = parseAttrs(p, tlvOffset);
  const text = attrText(attrs.get(NLMSGERR_ATTR_MSG));
  if (text) info.extack = text;
  const offs = u32(attrs.get(NLMSGERR_ATTR_OFFS));
  if (offs !== undefined) info.extackOffset = offs;
  return info;
}

export interface ExchangeOutcome {
  /** The answer's data messages (RTM_NEWLINK … of a get or dump), without the terminator. */
  messages: NlMessage[];
  /** Set when the kernel refused: the terminator carried a negative error. */
  error?: NlErrorInfo;
  /** The dump raced with a change (NLM_F_DUMP_INTR): its content may be inconsistent. */
  interrupted: boolean;
}

/** Reads one exchange's answer (the messages carrying `seq`), up to its NLMSG_ERROR or NLMSG_DONE. */
export function readExchange(buf: Uint8Array, seq: number): ExchangeOutcome {
  const messages: NlMessage[] = [];
  let interrupted = false;
  for (const m of splitMessages(buf)) {
    if (m.seq !== seq >>> 0) continue;
    if (m.flags & NLM_F_DUMP_INTR) interrupted = true;
    if (m.type === NLMSG_ERROR || m.type === NLMSG_DONE) {
      const e = decodeError(m);
      return e.errno !== 0 ? { messages, error: e, interrupted } : { messages, interrupted };
    }
    if (m.type !== NLMSG_NOOP) messages.push(m);
  }
  // No terminator: the answer was cut short; say so as the kernel would for a bad message.
  return { messages, error: { errno: 71 /* EPROTO */ }, interrupted };
}

export interface LinkMessage {
  index: number;
  /** ARPHRD_* */
  type: number;
  flags: number;
  ifname?: string;
  address?: string;
  mtu?: number;
  operstate?: number;
  master?: number;
  kind?: string;
}

/** An RTM_NEWLINK (answer to RTM_GETLINK). */
export function decodeLink(msg: NlMessage): LinkMessage {
  const p = msg.payload;
  const attrs = parseAttrs(p, IFINFOMSG_LEN);
  const link: LinkMessage = {
    index: p.readInt32LE(4),
    type: p.readUInt16LE(2),
    flags: p.readUInt32LE(8),
  };
  const name = attrText(attrs.get(IFLA_IFNAME));
  if (name !== undefined) link.ifname = name;
  const addr = attrs.get(IFLA_ADDRESS);
  if (addr && addr.length > 0)
    link.address = Array.from(addr, (x) => x.toString(16).padStart(2, "0")).join(":");
  const mtu = u32(attrs.get(IFLA_MTU));
  if (mtu !== undefined) link.mtu = mtu;
  const oper = attrs.get(IFLA_OPERSTATE);
  if (oper && oper.length >= 1) link.operstate = oper.readUInt8(0);
  const master = u32(attrs.get(IFLA_MASTER));
  if (master !== undefined) link.master = master;
  const info = attrs.get(IFLA_LINKINFO);
  if (info) {
    const kind = attrText(parseAttrs(info).get(IFLA_INFO_KIND));
    if (kind) link.kind = kind;
  }
  return link;
}

export interface AddrMessage {
  family: IpFamily;
  prefixlen: number;
  flags: number;
  scope: number;
  index: number;
  /** IFA_LOCAL, else IFA_ADDRESS: the interface's own address (what iproute2 shows as `local`). */
  local?: string;
}

/** An RTM_NEWADDR; undefined for families other than IPv4 and IPv6. */
export function decodeAddr(msg: NlMessage): AddrMessage | undefined {
  const p = msg.payload;
  const af = p.readUInt8(0);
  if (af !== AF_INET && af !== AF_INET6) return undefined;
  const attrs = parseAttrs(p, IFADDRMSG_LEN);
  // IFA_FLAGS carries the full 32-bit flags where the header byte cannot.
  const flags = u32(attrs.get(IFA_FLAGS)) ?? p.readUInt8(2);
  const addr: AddrMessage = {
    family: af === AF_INET ? 4 : 6,
    prefixlen: p.readUInt8(1),
    flags,
    scope: p.readUInt8(3),
    index: p.readUInt32LE(4),
  };
  const local = attrs.get(IFA_LOCAL) ?? attrs.get(IFA_ADDRESS);
  if (local) addr.local = formatIp(new Uint8Array(local));
  return addr;
}

export interface RouteMessage {
  family: IpFamily;
  dstLen: number;
  dst?: string;
  gateway?: string;
  oif?: number;
  table: number;
  protocol: number;
  scope: number;
  type: number;
  flags: number;
}

/** An RTM_NEWROUTE; undefined for families other than IPv4 and IPv6. */
export function decodeRoute(msg: NlMessage): RouteMessage | undefined {
  const p = msg.payload;
  const af = p.readUInt8(0);
  if (af !== AF_INET && af !== AF_INET6) return undefined;
  const attrs = parseAttrs(p, RTMSG_LEN);
  const route: RouteMessage = {
    family: af === AF_INET ? 4 : 6,
    dstLen: p.readUInt8(1),
    // RTA_TABLE holds tables past 255; rtm_table is then RT_TABLE_COMPAT.
    table: u32(attrs.get(RTA_TABLE)) ?? p.readUInt8(4),
    protocol: p.readUInt8(5),
    scope: p.readUInt8(6),
    type: p.readUInt8(7),
    flags: p.readUInt32LE(8),
  };
  const dst = attrs.get(RTA_DST);
  if (dst) route.dst = formatIp(new Uint8Array(dst));
  const gw = attrs.get(RTA_GATEWAY);
  if (gw) route.gateway = formatIp(new Uint8Array(gw));
  const oif = u32(attrs.get(RTA_OIF));
  if (oif !== undefined) route.oif = oif;
  return route;
}

/** The destination as `ip -j route` prints it: "default", "10.1.0.0/24", or a bare host address. */
export function routeDstText(r: RouteMessage): string {
  if (r.dstLen === 0) return "default";
  const full = r.family === 4 ? 32 : 128;
  const addr = r.dst ?? (r.family === 4 ? "0.0.0.0" : "::");
  return r.dstLen === full ? addr : `${addr}/${r.dstLen}`;
}

const OPERSTATES = ["UNKNOWN", "NOTPRESENT", "DOWN", "LOWERLAYERDOWN", "TESTING", "DORMANT", "UP"];

/** IF_OPER_* as iproute2 names it. */
export function operstateName(state: number): string {
  return OPERSTATES[state] ?? `${state}`;
}

/** IFF_* in iproute2's order (print_link_flags), with its NO-CARRIER for up-but-not-running. */
const LINK_FLAGS: ReadonlyArray<readonly [number, string]> = [
  [0x8, "LOOPBACK"],
  [0x2, "BROADCAST"],
  [0x10, "POINTOPOINT"],
  [0x1000, "MULTICAST"],
  [0x80, "NOARP"],
  [0x200, "ALLMULTI"],
  [0x100, "PROMISC"],
  [0x20, "NOTRAILERS"],
  [0x4, "DEBUG"],
  [0x8000, "DYNAMIC"],
  [0x4000, "AUTOMEDIA"],
  [0x2000, "PORTSEL"],
  [0x400, "MASTER"],
  [0x800, "SLAVE"],
  [0x1, "UP"],
  [0x10000, "LOWER_UP"],
  [0x20000, "DORMANT"],
  [0x40000, "ECHO"],
];

export function linkFlagNames(flags: number): string[] {
  const IFF_RUNNING = 0x40;
  const names: string[] = flags & IFF_UP && !(flags & IFF_RUNNING) ? ["NO-CARRIER"] : [];
  for (const [bit, name] of LINK_FLAGS) if (flags & bit) names.push(name);
  return names;
}
