/**
 * IP addresses and CIDRs, read and written as Go's net package does (CNI,
 * Kubernetes and MidoNet all speak it). Imports nothing of the project.
 *
 * Parsing follows Go's net.ParseIP / net.ParseCIDR (netip rules): IPv4 is a
 * dotted quad without leading zeros, IPv6 allows one `::` and a dotted IPv4
 * tail, zones are refused, a prefix is decimal digits up to the address width.
 * Text comes out as Go's net.IP.String / net.IPNet.String write it: IPv6 in
 * lowercase with the first longest run of two or more zero groups as `::`.
 *
 * An IPv4-mapped IPv6 address (::ffff:a.b.c.d) counts as IPv4 everywhere, as
 * Go's net.IP.To4 makes it: CNI decides an ip's `version` with To4, and Go
 * prints such an address (and its CIDR, with the prefix less 96) as IPv4.
 */

export type IpFamily = 4 | 6;

export interface ParsedIp {
  family: IpFamily;
  /** 4 bytes for IPv4, 16 for IPv6. */
  bytes: Uint8Array;
}

export interface ParsedCidr extends ParsedIp {
  /** Prefix length, 0..32 or 0..128. */
  prefix: number;
}

/**
 * Decimal octets separated by dots: exactly four, each 0..255, no leading zero.
 * One scan of the characters, allocating nothing: the mapping of a large
 * cluster parses hundreds of thousands of addresses.
 */
function parseIpv4Octets(text: string, out: Uint8Array, at: number): boolean {
  let octet = 0;
  let value = 0;
  let digits = 0;
  let leadingZero = false;
  for (let i = 0; i <= text.length; i++) {
    const ch = i < text.length ? text.charCodeAt(i) : 0x2e;
    if (ch === 0x2e) {
      if (digits === 0 || octet === 4) return false;
      out[at + octet++] = value;
      value = 0;
      digits = 0;
    } else if (ch >= 0x30 && ch <= 0x39) {
      if (digits === 0) leadingZero = ch === 0x30;
      else if (leadingZero) return false;
      value = value * 10 + (ch - 0x30);
      if (++digits > 3 || value > 255) return false;
    } else {
      return false;
    }
  }
  return octet === 4;
}

const HEX_GROUP = /^[0-9a-fA-F]{1,4}$/;

/** Groups of up to four hex digits, at most one `::`, an optional dotted IPv4 tail. */
function parseIpv6(text: string): Uint8Array | undefined {
  const halves = text.split("::");
  if (halves.length > 2) return undefined;
  const out = new Uint8Array(16);
  const groups = (half: string): string[] => (half === "" ? [] : half.split(":"));
  const head = groups(halves[0] as string);
  const tail = halves.length === 2 ? groups(halves[1] as string) : [];
  // Bytes of each side; a dotted IPv4 may only end the whole address.
  const fill = (parts: string[], last: boolean): number[] | undefined => {
    const bytes: number[] = [];
    for (let i = 0; i < parts.length; i++) {
      const p = parts[i] as string;
      if (last && i === parts.length - 1 && p.includes(".")) {
        const v4 = new Uint8Array(4);
        if (!parseIpv4Octets(p, v4, 0)) return undefined;
        bytes.push(...v4);
      } else if (HEX_GROUP.test(p)) {
        const n = Number.parseInt(p, 16);
        bytes.push(n >> 8, n & 0xff);
      } else {
        return undefined;
      }
    }
    return bytes;
  };
  const headBytes = fill(head, halves.length === 1);
  const tailBytes = fill(tail, true);
  if (!headBytes || !tailBytes) return undefined;
  const used = headBytes.length + tailBytes.length;
  if (halves.length === 1) {
    if (used !== 16) return undefined;
  } else if (used > 14) {
    // `::` must stand for at least one zero group.
    return undefined;
  }
  out.set(headBytes, 0);
  out.set(tailBytes, 16 - tailBytes.length);
  return out;
}

function isIpv4Mapped(bytes: Uint8Array): boolean {
  if (bytes.length !== 16) return false;
  for (let i = 0; i < 10; i++) if (bytes[i] !== 0) return false;
  return bytes[10] === 0xff && bytes[11] === 0xff;
}

/** Parses an IP address; undefined when Go's net.ParseIP would return nil. */
export function parseIp(text: string): ParsedIp | undefined {
  if (text.includes(":")) {
    const bytes = parseIpv6(text);
    if (!bytes) return undefined;
    if (isIpv4Mapped(bytes)) return { family: 4, bytes: bytes.slice(12) };
    return { family: 6, bytes };
  }
  const bytes = new Uint8Array(4);
  return parseIpv4Octets(text, bytes, 0) ? { family: 4, bytes } : undefined;
}

/**
 * Parses "address/prefix" keeping the host bits (CNI's types.ParseCIDR);
 * undefined when Go's net.ParseCIDR would fail.
 */
export function parseCidr(text: string): ParsedCidr | undefined {
  const slash = text.indexOf("/");
  if (slash < 0) return undefined;
  const addr = text.slice(0, slash);
  const prefixText = text.slice(slash + 1);
  if (!/^\d+$/.test(prefixText)) return undefined;
  const prefix = Number(prefixText);
  const ip = parseIp(addr);
  if (!ip) return undefined;
  // The prefix is checked against the width as written: a mapped address is 128 bits wide.
  const width = addr.includes(":") ? 128 : 32;
  if (prefix > width) return undefined;
  const effective = ip.family === 4 && width === 128 ? Math.max(0, prefix - 96) : prefix;
  return { family: ip.family, bytes: ip.bytes, prefix: effective };
}

/** Go's net.IP.String: dotted quad, or RFC 5952 IPv6. */
export function formatIp(ip: ParsedIp | Uint8Array): string {
  const bytes = ip instanceof Uint8Array ? ip : ip.bytes;
  if (bytes.length === 4) return `${bytes[0]}.${bytes[1]}.${bytes[2]}.${bytes[3]}`;
  if (isIpv4Mapped(bytes)) return bytes.slice(12).join(".");
  const groups: number[] = [];
  for (let i = 0; i < 16; i += 2)
    groups.push(((bytes[i] as number) << 8) | (bytes[i + 1] as number));
  // The first longest run of at least two zero groups becomes "::".
  let bestStart = -1;
  let bestLen = 1;
  for (let i = 0; i < 8; ) {
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLen) {
      bestStart = i;
      bestLen = j - i;
    }
    i = j === i ? i + 1 : j;
  }
  const hex = (g: number[]) => g.map((n) => n.toString(16)).join(":");
  if (bestStart < 0) return hex(groups);
  return `${hex(groups.slice(0, bestStart))}::${hex(groups.slice(bestStart + bestLen))}`;
}

/** Go's net.IPNet.String for a CIDR parsed with its host bits kept: "10.1.0.5/24". */
export function formatCidr(cidr: ParsedCidr): string {
  return `${formatIp(cidr.bytes)}/${cidr.prefix}`;
}

/** The text Go would write back for an IP; undefined when it does not parse. */
export function canonicalIp(text: string): string | undefined {
  const ip = parseIp(text);
  return ip ? formatIp(ip) : undefined;
}

/** The text Go would write back for a CIDR; undefined when it does not parse. */
export function canonicalCidr(text: string): string | undefined {
  const cidr = parseCidr(text);
  return cidr ? formatCidr(cidr) : undefined;
}

/**
 * The family of "a.b.c.d", "a.b.c.d/n", an IPv6 address or an IPv6 CIDR,
 * with Go's To4 rule; undefined when the text is neither an IP nor a CIDR.
 */
export function ipFamily(cidrOrIp: string): IpFamily | undefined {
  return (cidrOrIp.includes("/") ? parseCidr(cidrOrIp) : parseIp(cidrOrIp))?.family;
}

/** True when the address has bits set beyond the prefix ("10.1.0.5/24"; "10.1.0.0/24" has none). */
export function cidrHasHostBits(cidr: ParsedCidr): boolean {
  return cidr.bytes.some((b, i) => (b & ~prefixMaskByte(cidr.prefix, i)) !== 0);
}

/** The network itself: host bits cleared ("10.1.0.5/24" → 10.1.0.0/24). */
export function cidrNetwork(cidr: ParsedCidr): ParsedCidr {
  const bytes = cidr.bytes.map((b, i) => b & prefixMaskByte(cidr.prefix, i));
  return { family: cidr.family, bytes, prefix: cidr.prefix };
}

/** True when `ip` lies within `cidr` (same family, same leading `prefix` bits). */
export function cidrContains(cidr: ParsedCidr, ip: ParsedIp): boolean {
  if (cidr.family !== ip.family) return false;
  return cidr.bytes.every(
    (b, i) =>
      (b & prefixMaskByte(cidr.prefix, i)) ===
      ((ip.bytes[i] as number) & prefixMaskByte(cidr.prefix, i)),
  );
}

/** Whether two CIDRs share an address: the shorter prefix contains the other's network. */
export function cidrsOverlap(a: ParsedCidr, b: ParsedCidr): boolean {
  if (a.family !== b.family) return false;
  return a.prefix <= b.prefix ? cidrContains(a, b) : cidrContains(b, a);
}

/** An address's bytes as one number, so stepping and comparing are plain arithmetic in both families. */
export function ipToBigInt(bytes: Uint8Array): bigint {
  let n = 0n;
  for (const b of bytes) n = (n << 8n) | BigInt(b);
  return n;
}

/** The address `n` of the family, as Go writes it. */
export function bigIntToIp(n: bigint, family: IpFamily): string {
  const bytes = new Uint8Array(family === 4 ? 4 : 16);
  for (let i = bytes.length - 1; i >= 0; i--) {
    bytes[i] = Number(n & 0xffn);
    n >>= 8n;
  }
  return formatIp(bytes);
}

/** The mask byte at `index` for a prefix length. */
function prefixMaskByte(prefix: number, index: number): number {
  const bits = Math.min(8, Math.max(0, prefix - index * 8));
  return (0xff << (8 - bits)) & 0xff;
}
