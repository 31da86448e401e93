/**
 * The nf_tables expressions the driver's rules are made of, each encoded as
 * one NFTA_LIST_ELEM { NFTA_EXPR_NAME, NFTA_EXPR_DATA } of a rule's
 * expression list. Attribute numbers from the kernel's nf_tables.h; which
 * attributes nft itself sends (and so what `nft list` shows back) checked
 * against `nft --debug=netlink` (test/integration/services-netlink.test.ts).
 * Expressions that recur (a protocol match, a modulus, a set) are encoded
 * once and kept: a table of 100,000 rules is mostly the same few dozen.
 */
import { type Attr, attrBytes, be32, cstr } from "./attribute-bytes.js";

const LIST_ELEM = 1;
const EXPR_NAME = 1;
const EXPR_DATA = 2;
const DATA_VALUE = 1;
const DATA_VERDICT = 2;
const VERDICT_CODE = 1;
const VERDICT_CHAIN = 2;

/** Registers: the verdict, the first 16-byte one; 32-bit ones are numbered from 8. */
const REG_VERDICT = 0;
export const REG_1 = 1;
export const REG_2 = 2;
/**
 * The register of the 32-bit slot `slot` (concatenations fill slots in
 * order): a slot on a 16-byte boundary by its 16-byte number, as nft does.
 */
export const regOfSlot = (slot: number) => (slot % 4 === 0 ? REG_1 + slot / 4 : 8 + slot);

/** enum nft_verdicts and the netfilter verdicts. */
export const VERDICT = { drop: 0, accept: 1, jump: -3, goto: -4, return: -5 } as const;
export type VerdictKind = keyof typeof VERDICT;

/** One expression, encoded: a rule's expression list is these back to back. */
export type Expr = Uint8Array;

const kept = new Map<string, Expr>();
/** The expression under `key`, made once (the cache is bounded: set names come and go). */
function once(key: string, make: () => Expr): Expr {
  let e = kept.get(key);
  if (e) return e;
  if (kept.size >= 4096) kept.clear();
  e = make();
  kept.set(key, e);
  return e;
}

const exprNames = new Map<string, Uint8Array>();

function expr(name: string, data: Attr[]): Expr {
  let n = exprNames.get(name);
  if (!n) {
    n = cstr(name);
    exprNames.set(name, n);
  }
  return attrBytes([
    LIST_ELEM,
    [
      [EXPR_NAME, n],
      [EXPR_DATA, data],
    ],
  ]);
}

const u32 = (type: number, v: number): Attr => [type, be32(v)];
const value = (type: number, data: Uint8Array): Attr => [type, [[DATA_VALUE, data]]];

/** A u32 as registers hold host-order values (meta mark, ct status, fib, numgen). */
export function hostU32(v: number): Uint8Array {
  const n = v >>> 0;
  return Uint8Array.of(n & 255, (n >>> 8) & 255, (n >>> 16) & 255, n >>> 24);
}

/** enum nft_meta_keys, those used. */
export const META = { mark: 3, nfproto: 15, l4proto: 16 } as const;

export const metaLoad = (key: number, dreg = REG_1): Expr =>
  once(`meta<${key},${dreg}`, () => expr("meta", [u32(1 /* DREG */, dreg), u32(2 /* KEY */, key)]));

export const metaSet = (key: number, sreg = REG_1): Expr =>
  once(`meta>${key},${sreg}`, () => expr("meta", [u32(2 /* KEY */, key), u32(3 /* SREG */, sreg)]));

/** enum nft_payload_bases. */
export const BASE = { network: 1, transport: 2 } as const;

export const payload = (base: number, offset: number, len: number, dreg = REG_1): Expr =>
  once(`payload${base},${offset},${len},${dreg}`, () =>
    expr("payload", [
      u32(1 /* DREG */, dreg),
      u32(2 /* BASE */, base),
      u32(3 /* OFFSET */, offset),
      u32(4 /* LEN */, len),
    ]),
  );

/**
 * An expression whose data (its last attribute's payload) varies, made from
 * a kept one of the same shape with the data copied in: an address in a
 * comparison or an immediate, one per rule.
 */
function patched(template: Expr, data: Uint8Array): Expr {
  const out = template.slice();
  const at = out.length - ((data.length + 3) & ~3);
  for (let i = 0; i < data.length; i++) out[at + i] = data[i] as number;
  return out;
}

/** NFT_CMP_EQ, NFT_CMP_NEQ. */
export function cmp(op: "eq" | "neq", data: Uint8Array, sreg = REG_1): Expr {
  const shape = once(`cmp${op},${sreg},${data.length}`, () =>
    expr("cmp", [
      u32(1 /* SREG */, sreg),
      u32(2 /* OP */, op === "eq" ? 0 : 1),
      value(3, new Uint8Array(data.length)),
    ]),
  );
  return patched(shape, data);
}

/** reg = (reg & mask) ^ xor, over mask.length bytes. */
export const bitwise = (mask: Uint8Array, xor: Uint8Array, reg = REG_1): Expr =>
  once(`bitwise${reg},${mask.join(".")},${xor.join(".")}`, () =>
    expr("bitwise", [
      u32(1 /* SREG */, reg),
      u32(2 /* DREG */, reg),
      u32(3 /* LEN */, mask.length),
      value(4 /* MASK */, mask),
      value(5 /* XOR */, xor),
    ]),
  );

/** A set lookup from sreg; with a verdict map, the verdict register gets the element's verdict. */
export const lookup = (set: string, opts: { sreg?: number; verdictMap?: boolean } = {}): Expr =>
  once(`lookup${set},${opts.sreg ?? REG_1},${!!opts.verdictMap}`, () =>
    expr("lookup", [
      [1 /* SET */, cstr(set)],
      u32(2 /* SREG */, opts.sreg ?? REG_1),
      ...(opts.verdictMap ? [u32(3 /* DREG */, REG_VERDICT)] : []),
    ]),
  );

/** `update @set { key }`: NFT_DYNSET_OP_UPDATE, the set's own timeout. */
export const dynsetUpdate = (set: string, sreg = REG_1): Expr =>
  expr("dynset", [[1 /* SET_NAME */, cstr(set)], u32(3 /* OP */, 1), u32(4 /* SREG_KEY */, sreg)]);

/** `numgen random mod n`: NFT_NG_RANDOM. */
export const numgenRandom = (modulus: number, dreg = REG_1): Expr =>
  once(`numgen${modulus},${dreg}`, () =>
    expr("numgen", [u32(1 /* DREG */, dreg), u32(2 /* MODULUS */, modulus), u32(3 /* TYPE */, 1)]),
  );

/** enum nft_ct_keys, those used. */
export const CT = { state: 0, status: 2 } as const;

export const ctLoad = (key: number, dreg = REG_1): Expr =>
  once(`ct${key},${dreg}`, () => expr("ct", [u32(1 /* DREG */, dreg), u32(2 /* KEY */, key)]));

/** `fib saddr|daddr type`: NFT_FIB_RESULT_ADDRTYPE with NFTA_FIB_F_SADDR or _DADDR. */
export const fibAddrType = (of: "saddr" | "daddr", dreg = REG_1): Expr =>
  once(`fib${of},${dreg}`, () =>
    expr("fib", [
      u32(1 /* DREG */, dreg),
      u32(2 /* RESULT */, 3),
      u32(3 /* FLAGS */, of === "saddr" ? 1 : 2),
    ]),
  );

/** Loads constant bytes into a register. */
export function immediateData(dreg: number, data: Uint8Array): Expr {
  const shape = once(`imm${dreg},${data.length}`, () =>
    expr("immediate", [u32(1 /* DREG */, dreg), value(2 /* DATA */, new Uint8Array(data.length))]),
  );
  return patched(shape, data);
}

/** The NFTA_DATA_VERDICT nest (rules' immediates and verdict map elements). */
export function verdictAttr(kind: VerdictKind, chain?: string): Attr {
  return [
    DATA_VERDICT,
    [
      u32(VERDICT_CODE, VERDICT[kind]),
      ...(chain !== undefined ? [[VERDICT_CHAIN, cstr(chain)] as Attr] : []),
    ],
  ];
}

export const verdict = (kind: VerdictKind, chain?: string): Expr =>
  once(`verdict${kind},${chain ?? ""}`, () =>
    expr("immediate", [u32(1 /* DREG */, REG_VERDICT), [2 /* DATA */, [verdictAttr(kind, chain)]]]),
  );

/** NF_NAT_RANGE_PROTO_SPECIFIED: nft sets it with a port; the kernel adds MAP_IPS itself. */
const PROTO_SPECIFIED = 0x2;

/** DNAT to the address in addrReg and the port in portReg (NFPROTO_IPV4 2 or _IPV6 10). */
export const dnat = (family: 4 | 6, addrReg: number, portReg: number): Expr =>
  once(`dnat${family},${addrReg},${portReg}`, () =>
    expr("nat", [
      u32(1 /* TYPE */, 1 /* NFT_NAT_DNAT */),
      u32(2 /* FAMILY */, family === 4 ? 2 : 10),
      u32(3 /* REG_ADDR_MIN */, addrReg),
      u32(5 /* REG_PROTO_MIN */, portReg),
      u32(7 /* FLAGS */, PROTO_SPECIFIED),
    ]),
  );

/** NF_NAT_RANGE_PROTO_RANDOM_FULLY. */
const RANDOM_FULLY = 0x10;

export const masquerade = (fullyRandom = false): Expr =>
  once(`masq${fullyRandom}`, () =>
    expr("masq", fullyRandom ? [u32(1 /* FLAGS */, RANDOM_FULLY)] : []),
  );

/** `reject with tcp reset` (NFT_REJECT_TCP_RST) or inet's `reject` (ICMPX port unreachable). */
export const reject = (how: "tcp reset" | "icmpx port-unreachable"): Expr =>
  once(`reject${how}`, () =>
    expr(
      "reject",
      how === "tcp reset"
        ? [u32(1 /* TYPE */, 1)]
        : [u32(1 /* TYPE */, 2), [2 /* ICMP_CODE */, Uint8Array.of(1)]],
    ),
  );
