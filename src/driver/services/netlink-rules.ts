/**
 * One rule of the Services table, from the nft text ruleset.ts writes to the
 * nf_tables expressions nft would make of it: the same dependencies (`meta
 * nfproto` before the first address of a rule, in an inet table), the same
 * registers, the same prefix matches (whole bytes loaded and compared, else
 * the address masked). Only the grammar the table uses is understood; any
 * other text throws, so a new shape of rule fails the tests that compile
 * every script (test/unit/services-netlink.test.ts) rather than the kernel.
 */
import { parseCidr, parseIp } from "../../net/ip.js";
import {
  BASE,
  bitwise,
  CT,
  cmp,
  ctLoad,
  dnat,
  dynsetUpdate,
  type Expr,
  fibAddrType,
  hostU32,
  immediateData,
  lookup,
  META,
  masquerade,
  metaLoad,
  metaSet,
  numgenRandom,
  payload,
  REG_1,
  REG_2,
  regOfSlot,
  reject,
  verdict,
} from "../../plumbing/nft-netlink/expressions.js";

const L4: Record<string, number> = { tcp: 6, udp: 17, sctp: 132 };
/** NFPROTO_IPV4, NFPROTO_IPV6. */
const NFPROTO = { ip: 2, ip6: 10 } as const;
/** Where an address is in its header. */
const ADDR = {
  ip: { saddr: 12, daddr: 16, len: 4 },
  ip6: { saddr: 8, daddr: 24, len: 16 },
} as const;
/** RTN_LOCAL, for `fib ... type local`. */
const RTN_LOCAL = 2;
/** IPS_DST_NAT (`ct status dnat`) and the bit of IP_CT_NEW (`ct state new`). */
const CT_STATUS_DNAT = 0x20;
const CT_STATE_NEW = 0x8;

const fail = (rule: string, why: string): never => {
  throw new Error(`cannot encode rule "${rule}": ${why}`);
};

const u8 = (v: number) => Uint8Array.of(v);

/** The bytes of an address of `kw`'s family; undefined when it is not one. */
function addressBytes(kw: "ip" | "ip6", text: string): Uint8Array | undefined {
  const a = parseIp(text);
  return a && a.family === (kw === "ip" ? 4 : 6) ? a.bytes : undefined;
}

/** `ip saddr 10.0.0.0/8`, `ip6 daddr != ::1`: as nft matches an address or a prefix. */
function addressMatch(
  rule: string,
  kw: "ip" | "ip6",
  field: "saddr" | "daddr",
  op: "eq" | "neq",
  text: string,
): Expr[] {
  const at = ADDR[kw];
  const cidr = text.includes("/") ? parseCidr(text) : undefined;
  const bytes = cidr ? cidr.bytes : addressBytes(kw, text);
  if (!bytes || bytes.length !== at.len) return fail(rule, `${text} is not an ${kw} address`);
  const prefix = cidr ? cidr.prefix : at.len * 8;
  if (prefix % 8 === 0)
    return [payload(BASE.network, at[field], prefix / 8), cmp(op, bytes.subarray(0, prefix / 8))];
  const mask = new Uint8Array(at.len);
  for (let i = 0; i < prefix; i++) mask[i >> 3] = (mask[i >> 3] ?? 0) | (0x80 >> (i & 7));
  const net = bytes.map((b, i) => b & (mask[i] ?? 0));
  return [
    payload(BASE.network, at[field], at.len),
    bitwise(mask, new Uint8Array(at.len)),
    cmp(op, net),
  ];
}

/** A selector of a concatenation and the bytes it loads. */
function selector(rule: string, a: string, b: string): { len: number; load(reg: number): Expr } {
  if ((a === "ip" || a === "ip6") && (b === "saddr" || b === "daddr")) {
    const at = ADDR[a];
    return { len: at.len, load: (reg) => payload(BASE.network, at[b], at.len, reg) };
  }
  if (a === "meta" && b === "l4proto")
    return { len: 1, load: (reg) => metaLoad(META.l4proto, reg) };
  if (a === "th" && b === "dport")
    return { len: 2, load: (reg) => payload(BASE.transport, 2, 2, reg) };
  return fail(rule, `${a} ${b} in a concatenation`);
}

/** Rule heads already compiled: a DNAT's conditions recur across endpoints and Services. */
const heads = new Map<string, Expr[]>();

/**
 * Compiles one rule's text. A DNAT rule (most of the table: one per
 * endpoint) is its conditions, compiled once per distinct text, and its
 * target, which is only copied into a kept shape.
 */
export function compileRule(rule: string): Expr[] {
  let cut = rule.indexOf(" dnat ip to ");
  if (cut < 0) cut = rule.indexOf(" dnat ip6 to ");
  if (cut < 0) return compileStatements(rule);
  let head = heads.get(rule.slice(0, cut));
  if (!head) {
    if (heads.size >= 1024) heads.clear();
    head = compileStatements(rule.slice(0, cut));
    heads.set(rule.slice(0, cut), head);
  }
  const out = head.slice();
  out.push(...dnatTarget(rule, rule.slice(cut + 1)));
  return out;
}

/**
 * `dnat ip to A:P` / `dnat ip6 to [A]:P`: the address and port loaded into
 * registers 1 and 2, then the NAT (what compileStatements makes of it, read
 * without splitting the text: a table holds 100,000 of them).
 */
function dnatTarget(rule: string, target: string): Expr[] {
  const six = target.startsWith("dnat ip6 to [");
  const at = six ? "dnat ip6 to [".length : "dnat ip to ".length;
  const colon = target.lastIndexOf(":");
  const addrText = target.slice(at, six ? colon - 1 : colon);
  if (six && target[colon - 1] !== "]") return fail(rule, "dnat target");
  const addr = addressBytes(six ? "ip6" : "ip", addrText);
  const port = Number(target.slice(colon + 1));
  if (!addr || !Number.isInteger(port) || port < 0 || port > 65535)
    return fail(rule, "dnat target");
  return [
    immediateData(REG_1, addr),
    immediateData(REG_2, Uint8Array.of(port >> 8, port & 255)),
    dnat(six ? 6 : 4, REG_1, REG_2),
  ];
}

function compileStatements(rule: string): Expr[] {
  const t = rule.split(" ");
  const out: Expr[] = [];
  const deps = new Set<string>();
  const need = (kw: "ip" | "ip6") => {
    if (deps.has(kw)) return;
    deps.add(kw);
    out.push(metaLoad(META.nfproto), cmp("eq", u8(NFPROTO[kw])));
  };
  const word = (i: number) => t[i] ?? "";
  let i = 0;
  const expect = (...words: string[]) => {
    for (const w of words) if (t[i++] !== w) fail(rule, `expected "${w}" at word ${i}`);
  };
  const hex = (s: string) => (/^0x[0-9a-f]+$/.test(s) ? Number(s) : fail(rule, `${s}: not hex`));
  while (i < t.length) {
    const [a, b] = [word(i), word(i + 1)];
    // A concatenation: selectors joined by " . ", then a (verdict) map or a set.
    if (word(i + 2) === ".") {
      const parts: { len: number; load(reg: number): Expr }[] = [];
      let first = true;
      while (true) {
        const [x, y] = [word(i), word(i + 1)];
        if (first && (x === "ip" || x === "ip6")) need(x);
        first = false;
        parts.push(selector(rule, x, y));
        i += 2;
        if (word(i) !== ".") break;
        i++;
      }
      let slot = 0;
      for (const p of parts) {
        out.push(p.load(regOfSlot(slot)));
        slot += Math.ceil(p.len / 4);
      }
      const isMap = word(i) === "vmap";
      if (isMap) i++;
      const set = word(i++);
      if (!set.startsWith("@")) fail(rule, "a concatenation must be looked up");
      out.push(lookup(set.slice(1), { verdictMap: isMap }));
      continue;
    }
    if (a === "meta" && b === "l4proto") {
      out.push(metaLoad(META.l4proto), cmp("eq", u8(L4[word(i + 2)] ?? fail(rule, "protocol"))));
      i += 3;
    } else if (a === "meta" && b === "mark" && word(i + 2) === "set") {
      i += 3;
      expect("meta", "mark");
      const [op, v] = [word(i), hex(word(i + 1))];
      i += 2;
      if (op === "|") out.push(metaLoad(META.mark), bitwise(hostU32(~v), hostU32(v)));
      else if (op === "and") out.push(metaLoad(META.mark), bitwise(hostU32(v), hostU32(0)));
      else fail(rule, `meta mark set ... ${op}`);
      out.push(metaSet(META.mark));
    } else if (a === "meta" && b === "mark" && word(i + 2) === "&") {
      const v = hex(word(i + 3));
      i += 4;
      expect("==", "0");
      out.push(metaLoad(META.mark), bitwise(hostU32(v), hostU32(0)), cmp("eq", hostU32(0)));
    } else if ((a === "ip" || a === "ip6") && (b === "saddr" || b === "daddr")) {
      need(a);
      i += 2;
      const op = word(i) === "!=" ? "neq" : "eq";
      if (op === "neq") i++;
      const v = word(i++);
      if (v.startsWith("@")) {
        if (op === "neq") fail(rule, "a negated set lookup");
        out.push(payload(BASE.network, ADDR[a][b], ADDR[a].len), lookup(v.slice(1)));
      } else out.push(...addressMatch(rule, a, b, op, v));
    } else if (a === "fib" && (b === "saddr" || b === "daddr")) {
      i += 2;
      expect("type");
      const op = word(i) === "!=" ? "neq" : "eq";
      if (op === "neq") i++;
      expect("local");
      out.push(fibAddrType(b), cmp(op, hostU32(RTN_LOCAL)));
    } else if (a === "numgen" && b === "random") {
      i += 2;
      expect("mod");
      const n = Number(word(i++));
      expect("==", "0");
      if (!Number.isInteger(n) || n < 1) fail(rule, "numgen modulus");
      out.push(numgenRandom(n), cmp("eq", hostU32(0)));
    } else if (a === "ct" && b === "status" && word(i + 2) === "dnat") {
      i += 3;
      out.push(ctLoad(CT.status), bitwise(hostU32(CT_STATUS_DNAT), hostU32(0)));
      out.push(cmp("neq", hostU32(0)));
    } else if (a === "ct" && b === "state" && word(i + 2) === "new") {
      i += 3;
      out.push(ctLoad(CT.state), bitwise(hostU32(CT_STATE_NEW), hostU32(0)));
      out.push(cmp("neq", hostU32(0)));
    } else if (a === "dnat" && (b === "ip" || b === "ip6") && word(i + 2) === "to") {
      out.push(...dnatTarget(rule, `dnat ${b} to ${word(i + 3)}`));
      i += 4;
    } else if (a === "masquerade") {
      const fully = b === "fully-random";
      i += fully ? 2 : 1;
      out.push(masquerade(fully));
    } else if (a === "reject") {
      if (b === "with") {
        i += 1;
        expect("with", "tcp", "reset");
        out.push(reject("tcp reset"));
      } else {
        i += 1;
        out.push(reject("icmpx port-unreachable"));
      }
    } else if (a === "update" && b.startsWith("@")) {
      i += 2;
      expect("{");
      const [kw, field] = [word(i), word(i + 1)];
      if ((kw !== "ip" && kw !== "ip6") || field !== "saddr") fail(rule, "update key");
      i += 2;
      expect("}");
      need(kw as "ip" | "ip6");
      out.push(payload(BASE.network, ADDR[kw as "ip"].saddr, ADDR[kw as "ip"].len));
      out.push(dynsetUpdate(b.slice(1)));
    } else if (a === "goto" || a === "jump") {
      if (!b) fail(rule, `${a} without a chain`);
      out.push(verdict(a, b));
      i += 2;
    } else if (a === "drop" || a === "accept" || a === "return") {
      out.push(verdict(a));
      i += 1;
    } else fail(rule, `"${a}" at word ${i + 1}`);
  }
  return out;
}
