/**
 * The sets and maps of the Services tables as nf_tables wants them: a
 * declaration (`type … ; flags … ; timeout …`) as a set's attributes, and an
 * element's text as its key's bytes and its verdict. Only the types the
 * tables use are known; any other throws.
 */
import { parseIp } from "../../net/ip.js";
import type { ElementSpec, SetSpec } from "../../plumbing/nft-netlink/objects.js";

/** nft's data types: their number and length (a concatenation pads each part to 4 bytes). */
const TYPES: Record<string, { id: number; len: number }> = {
  ipv4_addr: { id: 7, len: 4 },
  ipv6_addr: { id: 8, len: 16 },
  inet_proto: { id: 12, len: 1 },
  inet_service: { id: 13, len: 2 },
};

/**
 * What nft 1.0.6 stores in NFTA_SET_USERDATA for each declaration the table
 * uses (the key's byte order and how to print it; `nft list` reads it back),
 * as `nft --debug=mnl` shows it sent.
 */
const USERDATA = {
  concatMap: "000400000000010400000000030800040d0000000100060400000000",
  concatSet: "000400000000030800040d0000000100",
  address: "000402000000",
};

const NFT_SET_MAP = 0x8;
const NFT_SET_TIMEOUT = 0x10;
const NFT_SET_EVAL = 0x20;

/** A set's shape: the parts of its key, and whether it maps to verdicts. */
export interface SetShape {
  parts: string[];
  verdict: boolean;
}

/** `type ipv4_addr . inet_proto . inet_service : verdict` and the flags/timeout clauses. */
export function setSpec(name: string, decl: string): { spec: SetSpec; shape: SetShape } {
  const clauses = decl
    .split(";")
    .map((c) => c.trim())
    .filter(Boolean);
  let shape: SetShape | undefined;
  let flags = 0;
  let timeoutMs: number | undefined;
  for (const c of clauses) {
    const type = /^type (.+?)( : verdict)?$/.exec(c);
    const flagList = /^flags ([a-z,]+)$/.exec(c);
    const timeout = /^timeout (\d+)s$/.exec(c);
    if (type) shape = { parts: (type[1] ?? "").split(" . "), verdict: !!type[2] };
    else if (flagList)
      for (const f of (flagList[1] ?? "").split(","))
        flags |=
          f === "dynamic" ? NFT_SET_EVAL : f === "timeout" ? NFT_SET_TIMEOUT : unknown(name, c);
    else if (timeout) timeoutMs = Number(timeout[1]) * 1000;
    else unknown(name, c);
  }
  if (!shape || shape.parts.some((p) => !TYPES[p])) return unknown(name, decl);
  const types = shape.parts.map((p) => TYPES[p] as { id: number; len: number });
  const concat = types.length > 1;
  const spec: SetSpec = {
    name,
    flags: flags | (shape.verdict ? NFT_SET_MAP : 0),
    keyType: types.reduce((acc, t) => acc * 64 + t.id, 0),
    keyLength: concat
      ? types.reduce((n, t) => n + Math.ceil(t.len / 4) * 4, 0)
      : (types[0]?.len ?? 0),
    verdict: shape.verdict,
    ...(timeoutMs !== undefined ? { timeoutMs } : {}),
    userdata: Buffer.from(
      concat ? (shape.verdict ? USERDATA.concatMap : USERDATA.concatSet) : USERDATA.address,
      "hex",
    ),
  };
  if (!concat && shape.verdict) unknown(name, decl);
  return { spec, shape };
}

export const unknown = (what: string, text: string): never => {
  throw new Error(`cannot encode ${what}: "${text}"`);
};

/** One part of a key: an address, a protocol (one byte) or a port (two, network order). */
function keyPart(type: string, word: string, key: string): number[] {
  if (type === "ipv4_addr" || type === "ipv6_addr") {
    const ip = parseIp(word);
    if (!ip || ip.family !== (type === "ipv4_addr" ? 4 : 6)) return unknown("element key", key);
    return [...ip.bytes];
  }
  if (type === "inet_proto") {
    const n = L4_NUMBERS[word];
    return n === undefined ? unknown("element key", key) : [n];
  }
  const n = Number(word);
  if (!Number.isInteger(n) || n < 0 || n > 65535) return unknown("element key", key);
  return [n >> 8, n & 255];
}

const L4_NUMBERS: Record<string, number> = { tcp: 6, udp: 17, sctp: 132 };

/** An element's key as the kernel stores it: each part of a concatenation in 4-byte words. */
function keyBytes(shape: SetShape, key: string): Uint8Array {
  const words = key.split(" . ");
  if (words.length !== shape.parts.length) return unknown("element key", key);
  const out: number[] = [];
  for (let k = 0; k < words.length; k++) {
    out.push(...keyPart(shape.parts[k] as string, words[k] as string, key));
    if (words.length > 1) while (out.length % 4 !== 0) out.push(0);
  }
  return Uint8Array.from(out);
}

/** An element of an add (`key : verdict` in a map) or of a delete (the key alone). */
export function elementSpec(shape: SetShape, item: string, add: boolean): ElementSpec {
  const [key = "", value] = item.split(" : ");
  if (!shape.verdict || !add) return { key: keyBytes(shape, key) };
  const m = /^(goto|jump) (\S+)$/.exec(value ?? "");
  if (!m) return unknown("verdict", item);
  return { key: keyBytes(shape, key), verdict: { kind: m[1] as "goto", chain: m[2] as string } };
}
