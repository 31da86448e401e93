/**
 * rtnetlink answers from bytes: what the kernel sends back to pod plumbing's
 * requests, and iproute2's names for the values in them. No I/O here.
 */

import { formatIp, type IpFamily } from "../../net/ip.js";
import {
  AF_INET,
  AF_INET6,
  align4,
  IFA_ADDRESS,
  IFA_FLAGS,
  IFA_LOCAL,
  IFADDRMSG_LEN,
  IFF_UP,
  IFINFOMSG_LEN,
  IFLA_ADDRESS,
  IFLA_IFNAME,
  IFLA_INFO_KIND,
  IFLA_LINKINFO,
  IFLA_MASTER,
  IFLA_MTU,
  IFLA_OPERSTATE,
  NLM_F_ACK_TLVS,
  NLM_F_CAPPED,
  NLM_F_DUMP_INTR,
  NLMSG_DONE,
  NLMSG_ERROR,
  NLMSG_HDRLEN,
  NLMSG_NOOP,
  NLMSGERR_ATTR_MSG,
  NLMSGERR_ATTR_OFFS,
  RTA_DST,
  RTA_GATEWAY,
  RTA_OIF,
  RTA_TABLE,
  RTMSG_LEN,
} from "./rtnetlink-constants.js";

export interface NlMessage {
  type: number;
  flags: number;
  seq: number;
  pid: number;
  /** The bytes after the header, up to nlmsg_len. */
  payload: Buffer;
}

// Exported for the tests.
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

// Exported for the tests.
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
function attrText(b: Buffer | undefined): string | undefined {
  if (!b) return undefined;
  const nul = b.indexOf(0);
  return b.toString("utf8", 0, nul < 0 ? b.length : nul);
}

const u32 = (b: Buffer | undefined): number | undefined =>
  b && b.length >= 4 ? b.readUInt32LE(0) : undefined;

interface NlErrorInfo {
  /** Positive errno; 0 is an ack. */
  errno: number;
  /** The kernel's extended ack text (NETLINK_EXT_ACK), e.g. "Unknown device type". */
  extack?: string;
  /** Offset in the request of the attribute the kernel rejected. */
  extackOffset?: number;
}

// Exported for the tests.
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

interface ExchangeOutcome {
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

interface AddrMessage {
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

interface RouteMessage {
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
