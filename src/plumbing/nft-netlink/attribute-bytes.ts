/**
 * Netlink attributes encoded to bytes on their own, for the parts of a
 * message that repeat: an expression (its NFTA_LIST_ELEM with name and
 * data), a name. Encoded once and copied into each message that holds them,
 * which costs a fraction of writing them field by field (bench/services).
 */

/** An attribute: its type and its payload, raw bytes or nested attributes. */
export type Attr = [type: number, payload: Uint8Array | readonly Attr[]];

const NLA_F_NESTED = 0x8000;
const align4 = (n: number) => (n + 3) & ~3;

function size(a: Attr): number {
  const p = a[1];
  if (p instanceof Uint8Array) return 4 + align4(p.length);
  let n = 4;
  for (const c of p) n += size(c);
  return n;
}

function put(out: Uint8Array, at: number, a: Attr): number {
  const [type, p] = a;
  const nested = !(p instanceof Uint8Array);
  const len = nested ? size(a) : 4 + p.length;
  out[at] = len & 255;
  out[at + 1] = len >> 8;
  const t = nested ? type | NLA_F_NESTED : type;
  out[at + 2] = t & 255;
  out[at + 3] = t >> 8;
  if (!nested) {
    // Byte by byte: most payloads are a few bytes, where set() costs more than the copy.
    for (let i = 0; i < p.length; i++) out[at + 4 + i] = p[i] as number;
    return at + align4(len);
  }
  let off = at + 4;
  for (const c of p) off = put(out, off, c);
  return off;
}

/** The attribute as bytes (padding included). */
export function attrBytes(a: Attr): Uint8Array {
  const out = new Uint8Array(size(a));
  put(out, 0, a);
  return out;
}

/** A 32-bit value in network order, as nf_tables attributes carry integers. */
export function be32(v: number): Uint8Array {
  const n = v >>> 0;
  return Uint8Array.of(n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255);
}

export function be64(v: bigint): Uint8Array {
  const out = new Uint8Array(8);
  new DataView(out.buffer).setBigUint64(0, v);
  return out;
}

/** A NUL-terminated string (names are ASCII: nft's names, ours). */
export function cstr(s: string): Uint8Array {
  const out = new Uint8Array(s.length + 1);
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c > 127) return Buffer.from(`${s}\0`);
    out[i] = c;
  }
  return out;
}
