/**
 * Sets of addresses as sorted, disjoint, inclusive ranges per family: what a
 * rule's peers come to once pods are addresses and ipBlocks have their
 * excepts cut out. Disjoint ranges go into an nftables interval set as they
 * are (no auto-merge needed), and answer "is this address a peer?" for the
 * connections a change must cut.
 */
import { bigIntToIp, type IpFamily, ipToBigInt, parseCidr, parseIp } from "../net/ip.js";
import type { IpBlock } from "./types.js";

export type Range = readonly [start: bigint, end: bigint];

export interface AddressRanges {
  v4: Range[];
  v6: Range[];
}

const WIDTH: Record<IpFamily, bigint> = { 4: 32n, 6: 128n };

function cidrRange(text: string): { family: IpFamily; range: Range } | undefined {
  const c = parseCidr(text);
  if (!c) return undefined;
  const host = WIDTH[c.family] - BigInt(c.prefix);
  const start = (ipToBigInt(c.bytes) >> host) << host;
  return { family: c.family, range: [start, start + (1n << host) - 1n] };
}

/** Sorts and joins overlapping or touching ranges. */
function merge(ranges: Range[]): Range[] {
  const sorted = [...ranges].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  const out: Array<[bigint, bigint]> = [];
  for (const [s, e] of sorted) {
    const last = out.at(-1);
    if (last && s <= last[1] + 1n) {
      if (e > last[1]) last[1] = e;
    } else out.push([s, e]);
  }
  return out;
}

/** `ranges` less `cut` (both sorted and disjoint). */
function subtract(ranges: Range[], cut: Range[]): Range[] {
  const out: Range[] = [];
  for (const [s0, e] of ranges) {
    let s = s0;
    for (const [cs, ce] of cut) {
      if (ce < s || cs > e) continue;
      if (cs > s) out.push([s, cs - 1n]);
      s = ce + 1n;
      if (s > e) break;
    }
    if (s <= e) out.push([s, e]);
  }
  return out;
}

/** Why an ipBlock cannot be applied (a CIDR that does not parse); undefined when it can. */
export function ipBlockProblem(block: IpBlock): string | undefined {
  for (const text of [block.cidr, ...(block.except ?? [])]) {
    if (!cidrRange(text)) return `ipBlock: ${JSON.stringify(text)} is not a CIDR`;
  }
  return undefined;
}

/** Pod addresses and ipBlocks (less their excepts) as one set of ranges. */
export function addressRanges(ips: Iterable<string>, blocks: readonly IpBlock[]): AddressRanges {
  const acc: Record<IpFamily, Range[]> = { 4: [], 6: [] };
  for (const text of ips) {
    const ip = parseIp(text);
    if (!ip) continue;
    const n = ipToBigInt(ip.bytes);
    acc[ip.family].push([n, n]);
  }
  for (const block of blocks) {
    const base = cidrRange(block.cidr);
    if (!base) continue;
    const cut = (block.except ?? [])
      .map(cidrRange)
      .filter((c) => c?.family === base.family)
      .map((c) => (c as { range: Range }).range);
    acc[base.family].push(...subtract([base.range], merge(cut)));
  }
  return { v4: merge(acc[4]), v6: merge(acc[6]) };
}

export function rangesContain(ranges: AddressRanges, ipText: string): boolean {
  const ip = parseIp(ipText);
  if (!ip) return false;
  const n = ipToBigInt(ip.bytes);
  // Few ranges per rule in practice; a binary search would pay off only for thousands.
  return (ip.family === 4 ? ranges.v4 : ranges.v6).some(([s, e]) => n >= s && n <= e);
}

/** A range as nftables writes it: one address, or `first-last`. */
export function formatRange(range: Range, family: IpFamily): string {
  const [s, e] = range;
  return s === e ? bigIntToIp(s, family) : `${bigIntToIp(s, family)}-${bigIntToIp(e, family)}`;
}

/**
 * A range as the fewest CIDRs that cover exactly it (largest aligned blocks
 * first): for datapaths whose matches take a prefix, not an interval.
 */
export function rangeCidrs(range: Range, family: IpFamily): string[] {
  const width = WIDTH[family];
  const out: string[] = [];
  let [s] = range;
  const [, e] = range;
  while (s <= e) {
    // The largest block aligned at s that does not pass e.
    let host = 0n;
    while (
      host < width &&
      (s & ((1n << (host + 1n)) - 1n)) === 0n &&
      s + (1n << (host + 1n)) - 1n <= e
    )
      host++;
    out.push(`${bigIntToIp(s, family)}/${width - host}`);
    s += 1n << host;
  }
  return out;
}
