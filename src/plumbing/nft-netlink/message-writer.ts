/**
 * nf_tables netlink messages as bytes: a growing buffer of messages, each an
 * nlmsghdr and an nfgenmsg followed by attributes, nests closed by length.
 * The numbers are the kernel's (include/uapi/linux/netfilter/nf_tables.h,
 * linux/netlink.h); the batch's BEGIN and END and the sequence numbers are
 * the addon's (native/nftables `batch`). Integers in attributes are in
 * network order, as nf_tables reads them (nla_get_be32); register data is
 * raw bytes, laid out by the caller.
 */
import { attrBytes, be32, be64, cstr } from "./attribute-bytes.js";

/** NFNL_SUBSYS_NFTABLES: the high byte of every nf_tables message type. */
const SUBSYS_NFTABLES = 10;
const NLM_F_REQUEST = 0x1;
const NLM_F_APPEND = 0x800;
const NLM_F_CREATE = 0x400;
const NLA_F_NESTED = 0x8000;
/** NFPROTO_INET: every message of ours is about an inet table. */
const NFPROTO_INET = 1;

/** enum nf_tables_msg_types. */
export const MSG = {
  NEWTABLE: 0,
  DELTABLE: 2,
  NEWCHAIN: 3,
  DELCHAIN: 5,
  NEWRULE: 6,
  DELRULE: 8,
  NEWSET: 9,
  DELSET: 11,
  NEWSETELEM: 12,
  DELSETELEM: 14,
} as const;

/** The flags a message of each kind carries: creations create, rules go last in their chain. */
function messageFlags(type: number): number {
  if (type === MSG.NEWRULE) return NLM_F_REQUEST | NLM_F_CREATE | NLM_F_APPEND;
  if (
    type === MSG.NEWTABLE ||
    type === MSG.NEWCHAIN ||
    type === MSG.NEWSET ||
    type === MSG.NEWSETELEM
  )
    return NLM_F_REQUEST | NLM_F_CREATE;
  return NLM_F_REQUEST;
}

const HEADER = 16 + 4; // nlmsghdr + nfgenmsg

/**
 * Messages written back to back. Each message is labelled (what it does, in
 * nft's words), so a refusal the kernel reports by index can be named.
 */
export class NftMessageWriter {
  private buf: Uint8Array;
  private len = 0;
  private msg = -1;
  private readonly labels: string[] = [];
  /** String attributes already encoded (table and chain names repeat message after message). */
  private readonly names = new Map<string, Uint8Array>();

  /** expectedBytes: a guess of the batch's size, so a large one is not copied as it grows. */
  constructor(expectedBytes = 64 * 1024) {
    this.buf = Buffer.allocUnsafe(Math.max(4096, expectedBytes));
  }

  /** Starts a message of `type` (MSG.*), labelled for error reports. */
  begin(type: number, label: string): this {
    this.end();
    this.room(HEADER);
    const at = this.len;
    this.buf.fill(0, at, at + HEADER);
    const t = (SUBSYS_NFTABLES << 8) | type;
    const f = messageFlags(type);
    this.buf[at + 4] = t & 255;
    this.buf[at + 5] = t >> 8;
    this.buf[at + 6] = f & 255;
    this.buf[at + 7] = f >> 8;
    this.buf[at + 16] = NFPROTO_INET; // nfgen_family; version 0; res_id 0
    this.msg = at;
    this.len += HEADER;
    this.labels.push(label);
    return this;
  }

  /** Closes the message under way (its length written). */
  private end(): void {
    if (this.msg < 0) return;
    const n = this.len - this.msg;
    const at = this.msg;
    this.buf[at] = n & 255;
    this.buf[at + 1] = (n >>> 8) & 255;
    this.buf[at + 2] = (n >>> 16) & 255;
    this.buf[at + 3] = n >>> 24;
    this.msg = -1;
  }

  private room(n: number): void {
    if (this.len + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.len + n) size *= 2;
    const grown = Buffer.allocUnsafe(size);
    grown.set(this.buf.subarray(0, this.len));
    this.buf = grown;
  }

  /** Bytes already encoded as whole attributes (attribute-bytes.ts), copied in. */
  raw(bytes: Uint8Array): this {
    this.room(bytes.length);
    const b = this.buf;
    const at = this.len;
    if (bytes.length > 64) b.set(bytes, at);
    else for (let i = 0; i < bytes.length; i++) b[at + i] = bytes[i] as number;
    this.len += bytes.length;
    return this;
  }

  /** An attribute of raw bytes. */
  bytes(type: number, data: Uint8Array): this {
    return this.raw(attrBytes([type, data]));
  }

  /** A NUL-terminated string attribute, encoded once per writer. */
  str(type: number, s: string): this {
    const key = `${type}\0${s}`;
    let a = this.names.get(key);
    if (!a) {
      a = attrBytes([type, cstr(s)]);
      this.names.set(key, a);
    }
    return this.raw(a);
  }

  /** A 32-bit attribute in network order (signed values as their two's complement). */
  u32(type: number, v: number): this {
    return this.bytes(type, be32(v));
  }

  /** A 64-bit attribute in network order. */
  u64(type: number, v: bigint): this {
    return this.bytes(type, be64(v));
  }

  /** A nested attribute holding what `body` writes. */
  nest(type: number, body: () => void): this {
    this.room(4);
    const at = this.len;
    this.len += 4;
    body();
    const total = this.len - at;
    if (total > 0xffff)
      throw new RangeError(`nf_tables attribute ${type} over 64 KiB (${total} bytes)`);
    const t = type | NLA_F_NESTED;
    this.buf[at] = total & 255;
    this.buf[at + 1] = total >> 8;
    this.buf[at + 2] = t & 255;
    this.buf[at + 3] = t >> 8;
    return this;
  }

  /** Bytes written so far in the message under way (for splitting long element lists). */
  messageLength(): number {
    return this.msg < 0 ? 0 : this.len - this.msg;
  }

  get count(): number {
    return this.labels.length;
  }

  /** The label of message i (0-based), as given to begin(). */
  label(i: number): string | undefined {
    return this.labels[i];
  }

  /** The messages, back to back. */
  finish(): Buffer {
    this.end();
    return Buffer.from(this.buf.buffer, this.buf.byteOffset, this.len);
  }
}
