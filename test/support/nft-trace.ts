/**
 * A packet tracer for the Services tables (src/driver/services/ruleset.ts), in
 * the spirit of kube-proxy's packetFlowTest (pkg/proxy/nftables/helpers_test.go):
 * parse the nft script the driver loads, then follow one new connection's
 * first packet through the tables' base chains and say where it ends up.
 * Chains and sets are known as `table/name`; a rule names those of its own
 * table. As the kernel does, a nat hook's chains stop at the first DNAT.
 *
 * Only the grammar the ruleset emits is understood, and every rule is
 * compiled when it is added: a rule of any other shape throws there, so a
 * change of the ruleset's grammar fails the suite instead of tracing as a
 * silent non-match. Applying a change script checks what the kernel checks
 * (a chain or set still referenced cannot go, a map key cannot be added
 * twice with another verdict, a missing element cannot be deleted), so the
 * order of changeScript's commands is tested too.
 */
import { canonicalIp, cidrContains, parseCidr, parseIp } from "../../src/net/ip.js";

export type Proto = "tcp" | "udp" | "sctp";

export interface TraceInput {
  hook: "prerouting" | "output";
  src: string;
  dst: string;
  protocol: Proto;
  dport: number;
  /** What `fib ... type local` matches, besides loopback. */
  nodeAddresses: string[];
}

export interface TraceResult {
  verdict: "dnat" | "reject" | "drop" | "none";
  /** Every DNAT target the packet may get ("ip:port", "[ip6]:port"), sorted. */
  endpoints: string[];
  /** Masqueraded on some path: the mark, or a pod reaching itself (the hairpin set). */
  masquerade: boolean;
}

type Verdict =
  | { k: "accept" | "drop" | "reject" | "return" }
  | { k: "jump" | "goto"; chain: string };
/** The packet as it goes: the input's fields, rewritten by DNAT, plus what the rules set. */
type Pkt = TraceInput & { family: 4 | 6; mark: number; dnat?: string; masq: boolean };
/** One way out of an operation: on to the next one (neither set), a verdict, or no match. */
type Step = { p: Pkt; v?: Verdict; miss?: true };
type Op = (p: Pkt) => Step[];
type Rule = { text: string; ops: Op[] };
type Chain = { rules: Rule[]; base?: { type: string; hook: string; priority: number } };

/** The tables of a script, as one: chains and sets by `table/name`. */
export interface NftTable {
  chains: Map<string, Chain>;
  /** Maps and sets: key -> verdict ("" in a set). */
  elems: Map<string, { kind: "map" | "set"; items: Map<string, string> }>;
}

/** The name of a table's chain or set, as NftTable files it. */
export const qualified = (table: string, name: string) => `${table}/${name}`;
const tableOf = (q: string) => q.slice(0, q.indexOf("/"));

const PRIORITIES: Record<string, number> = { dstnat: -100, srcnat: 100 };
const ip = (s: string) => canonicalIp(s) ?? s;
/** A set or map key with its addresses written one way, whoever wrote them. */
const key = (parts: readonly string[]) => parts.map(ip).join(" . ");
const fam = (kw: string): 4 | 6 => (kw === "ip6" ? 6 : 4);
const hit = (p: Pkt, ok: boolean): Step[] => [ok ? { p } : { p, miss: true }];
const fail = (msg: string): never => {
  throw new Error(`nft-trace: ${msg}`);
};
/** What `fib ... type local` says: one of the node's addresses, or loopback. */
const isLocal = (p: Pkt, a: string) =>
  p.nodeAddresses.some((n) => ip(n) === ip(a)) || ip(a) === "::1" || /^127\./.test(a);
const need = <T>(v: T | undefined, what: string): T => v ?? fail(`no ${what}`);
/** The chains and the sets a rule's text names: what the kernel counts as references. */
const chainRefs = (text: string) =>
  [...text.matchAll(/\b(?:jump|goto) ([\w-]+)/g)].map((m) => m[1] ?? "");
const setRefs = (text: string) => [...text.matchAll(/@([\w-]+)/g)].map((m) => m[1] ?? "");

/** A verdict of a rule or element of `table`: its chain, if any, by its qualified name. */
function parseVerdict(s: string, table: string): Verdict {
  const m = /^(jump|goto) (\S+)$/.exec(s);
  if (m) return { k: m[1] as "jump" | "goto", chain: qualified(table, m[2] as string) };
  if (s === "accept" || s === "drop" || s === "return") return { k: s };
  return fail(`not a verdict: "${s}"`);
}

function inCidr(addr: string, cidr: string): boolean {
  const a = parseIp(addr);
  const c = parseCidr(cidr.includes("/") ? cidr : `${cidr}/${cidr.includes(":") ? 128 : 32}`);
  return a && c ? cidrContains(c, a) : fail(`not an address or CIDR: "${cidr}"`);
}

/** A DNAT to `a` port `port`: the verdict accepts (nat statements end the hook's evaluation). */
const dnat = (p: Pkt, a: string, port: string): Step => {
  const dnat = p.family === 6 ? `[${ip(a)}]:${port}` : `${ip(a)}:${port}`;
  return { p: { ...p, dst: ip(a), dport: Number(port), dnat }, v: { k: "accept" } };
};

type M = [string, string, string, string, string, string, string];
/** The pieces a rule is made of, left to right: a pattern at the rest's start, and what it does. */
const PIECES: Array<[RegExp, (m: M, t: NftTable, table: string) => Op]> = [
  [/^ct state new/, () => (p) => hit(p, true)],
  [/^ct status dnat/, () => (p) => hit(p, p.dnat !== undefined)],
  [
    /^fib (s|d)addr type (!= )?local/,
    (m) => (p) => hit(p, isLocal(p, m[1] === "s" ? p.src : p.dst) !== !!m[2]),
  ],
  [
    /^(?:(ip6?) daddr \. )?meta l4proto \. th dport vmap @(\S+)/,
    (m, t, table) => (p) => {
      if (m[1] && fam(m[1]) !== p.family) return hit(p, false);
      const parts = [...(m[1] ? [p.dst] : []), p.protocol, String(p.dport)];
      const v = t.elems.get(qualified(table, m[2]))?.items.get(key(parts));
      return v === undefined ? hit(p, false) : [{ p, v: parseVerdict(v, table) }];
    },
  ],
  // A node port's key in a map, looked up as a set (is there such a key?).
  [
    /^meta l4proto \. th dport @(\S+)/,
    (m, t, table) => (p) =>
      hit(
        p,
        t.elems.get(qualified(table, m[1]))?.items.has(key([p.protocol, String(p.dport)])) === true,
      ),
  ],
  [
    /^(ip6?) saddr (?:\. (ip6?) daddr )?@(\S+)/,
    (m, t, table) => (p) => {
      const k = key(m[2] ? [p.src, p.dst] : [p.src]);
      const set = t.elems.get(qualified(table, m[3]));
      return hit(p, fam(m[1]) === p.family && set?.items.has(k) === true);
    },
  ],
  [
    /^(ip6?) (saddr|daddr) (!= )?(\d[\d.]*(?:\/\d+)?|[0-9a-f]*:[0-9a-f:]*(?:\/\d+)?)(?= |$)/,
    (m) => (p) => {
      if (fam(m[1]) !== p.family) return hit(p, false);
      return hit(p, inCidr(m[2] === "saddr" ? p.src : p.dst, m[4]) !== !!m[3]);
    },
  ],
  [/^meta l4proto (tcp|udp|sctp)/, (m) => (p) => hit(p, p.protocol === m[1])],
  [/^meta mark & (0x[0-9a-f]+) == 0/, (m) => (p) => hit(p, (p.mark & Number(m[1])) === 0)],
  [
    /^meta mark set meta mark (\||and) (0x[0-9a-f]+)/,
    (m) => (p) => {
      const v = Number(m[2]);
      return [{ p: { ...p, mark: (m[1] === "|" ? p.mark | v : p.mark & v) >>> 0 } }];
    },
  ],
  // A trace is one first packet: affinity sets stay as they are, recording a client is a no-op.
  [/^update @(\S+) \{ (ip6?) saddr \}/, () => (p) => [{ p }]],
  // The i-th of n picks: taken or not, both followed (numgen picks any).
  [
    /^numgen random mod (\d+) == 0/,
    (m) => (p) => (Number(m[1]) > 1 ? [{ p }, { p, miss: true }] : [{ p }]),
  ],
  [
    /^dnat (ip6?) to (?:\[([0-9a-f:]+)\]|([\d.]+)):(\d+)/,
    (m) => (p) => (p.family !== fam(m[1]) ? hit(p, false) : [dnat(p, m[2] ?? m[3] ?? "", m[4])]),
  ],
  [
    /^(?:jump|goto) \S+|^return|^drop|^accept/,
    (m, _t, table) => (p) => [{ p, v: parseVerdict(m[0], table) }],
  ],
  [/^reject(?: with tcp reset)?/, () => (p) => [{ p, v: { k: "reject" } }]],
  [/^masquerade(?: fully-random)?/, () => (p) => [{ p: { ...p, masq: true }, v: { k: "accept" } }]],
];

function compileRule(t: NftTable, table: string, text: string): Rule {
  const ops: Op[] = [];
  let rest = text.trim();
  while (rest) {
    const found = PIECES.map(([re, make]) => [re.exec(rest), make] as const).find(([m]) => m);
    if (!found?.[0]) return fail(`cannot parse "${rest}" in rule "${text}"`);
    ops.push(found[1](found[0] as unknown as M, t, table));
    rest = rest.slice(found[0][0].length).trimStart();
  }
  for (const c of chainRefs(text))
    need(t.chains.get(qualified(table, c)), `chain ${c} for "${text}"`);
  for (const s of setRefs(text)) need(t.elems.get(qualified(table, s)), `set ${s} for "${text}"`);
  return { text, ops };
}

/** Whether a rule or (for a chain) a map element still refers to `q`: the kernel's EBUSY. */
function inUse(t: NftTable, q: string, kind: "chain" | "set"): boolean {
  const refs = kind === "chain" ? chainRefs : setRefs;
  const [table, name] = [tableOf(q), q.slice(q.indexOf("/") + 1)];
  const mine = <T>(m: Map<string, T>) => [...m].filter(([k]) => tableOf(k) === table);
  for (const [, c] of mine(t.chains))
    if (c.rules.some((r) => refs(r.text).includes(name))) return true;
  if (kind === "set") return false;
  for (const [, e] of mine(t.elems))
    for (const v of e.items.values()) if (v.endsWith(` ${name}`)) return true;
  return false;
}

/** A line of a `table inet NAME { ... }` block, inside `block`. */
function blockLine(
  t: NftTable,
  table: string,
  block: { kind: string; name: string } | undefined,
  line: string,
) {
  const open = /^(map|set|chain) (\S+) \{$/.exec(line);
  if (open) {
    const [, kind, bare] = open as unknown as M;
    const name = qualified(table, bare);
    if (kind === "chain") t.chains.set(name, { rules: [] });
    else t.elems.set(name, { kind: kind as "map" | "set", items: new Map() });
    return { kind, name };
  }
  if (block?.kind !== "chain") {
    if (!/^type [\w. :]+$/.test(line)) fail(`cannot parse "${line}"`);
    return block;
  }
  const chain = need(t.chains.get(block.name), `chain ${block.name}`);
  // Any other priority is no base chain declaration: compiled as a rule, it fails to parse.
  const base = /^type (\w+) hook (\w+) priority (-?\d+|dstnat|srcnat); policy accept;$/.exec(line);
  const [, type = "", hook = "", prio = ""] = base ?? [];
  if (!base) chain.rules.push(compileRule(t, table, line));
  else chain.base = { type, hook, priority: PRIORITIES[prio] ?? Number(prio) };
  return block;
}

/** `add element` / `delete element` of `{ k : v, ... }` into map or set `name`. */
function elements(t: NftTable, table: string, verb: string, name: string, rest: string) {
  const e = need(t.elems.get(qualified(table, name)), `map or set ${name}`);
  for (const item of need(/^\{ (.*) \}$/.exec(rest)?.[1], `elements in "${rest}"`).split(", ")) {
    const [k = "", v = ""] = item.split(" : ");
    const id = key(k.split(" . "));
    const had = e.items.get(id);
    if (verb === "delete") {
      if (had === undefined) fail(`no element ${k} in ${name}`);
      e.items.delete(id);
      continue;
    }
    if ((e.kind === "map") !== (v !== "")) fail(`element "${item}" in ${e.kind} ${name}`);
    for (const c of chainRefs(v)) need(t.chains.get(qualified(table, c)), `chain ${c}`);
    // The kernel refuses a key already there with other data: a change deletes it first.
    if (had !== undefined && had !== v) fail(`${name} already maps ${k} to ${had}`);
    e.items.set(id, v);
  }
}

/** Applies an nft script (fullScript's or changeScript's) to `t`, as one transaction would. */
export function applyScript(t: NftTable, script: string): NftTable {
  let block: { kind: string; name: string } | undefined;
  let inTable: string | undefined;
  for (const line of script.split("\n").map((l) => l.trim())) {
    if (!line || /^table inet \S+ \{\}$/.test(line)) continue;
    const deleted = /^delete table inet (\S+)$/.exec(line)?.[1];
    if (inTable && line === "}") {
      // A block's end, or the table's.
      if (block) block = undefined;
      else inTable = undefined;
    } else if (inTable) block = blockLine(t, inTable, block, line);
    else if (/^table inet \S+ \{$/.test(line)) inTable = line.split(" ")[2];
    else if (deleted) {
      for (const m of [t.chains, t.elems] as Map<string, unknown>[])
        for (const k of [...m.keys()]) if (tableOf(k) === deleted) m.delete(k);
    } else command(t, line);
  }
  if (inTable) fail("unterminated table block");
  return t;
}

function command(t: NftTable, line: string): void {
  const m = /^(add|delete|flush) (chain|rule|set|element) inet (\S+) (\S+)(?: (.*))?$/.exec(line);
  const [, verb, what, table, bare, rest = ""] = (m ??
    fail(`cannot parse "${line}"`)) as unknown as M;
  const name = qualified(table, bare);
  const chain = () => need(t.chains.get(name), `chain ${bare}`);
  const op = `${verb} ${what}`;
  if (op === "add chain") t.chains.set(name, t.chains.get(name) ?? { rules: [] });
  else if (op === "add rule") chain().rules.push(compileRule(t, table, rest));
  else if (op === "flush chain") chain().rules = [];
  else if (op === "add set")
    t.elems.set(name, t.elems.get(name) ?? { kind: "set", items: new Map() });
  else if (op === "delete chain" || op === "delete set") {
    const where: Map<string, unknown> = what === "chain" ? t.chains : t.elems;
    need(where.get(name), `${what} ${bare}`);
    if (inUse(t, name, what as "chain" | "set")) fail(`${what} ${bare} is still in use`);
    where.delete(name);
  } else if (what === "element") elements(t, table, verb, bare, rest);
  else fail(`cannot apply "${line}"`);
}

export const parseScript = (script: string): NftTable =>
  applyScript({ chains: new Map(), elems: new Map() }, script);

interface Path {
  p: Pkt;
  end: "accept" | "drop" | "reject" | "return";
}

function runChain(t: NftTable, name: string, p: Pkt, depth = 0): Path[] {
  if (depth > 16) fail(`chain ${name}: jumps too deep`);
  const rules = need(t.chains.get(name), `chain ${name}`).rules;
  const from = (i: number, p: Pkt): Path[] => {
    const rule = rules[i];
    if (!rule) return [{ p, end: "return" }];
    let steps: Step[] = [{ p }];
    for (const op of rule.ops) steps = steps.flatMap((s) => (s.v || s.miss ? [s] : op(s.p)));
    return steps.flatMap((s): Path[] => {
      if (!s.v) return from(i + 1, s.p);
      if (s.v.k === "goto") return runChain(t, s.v.chain, s.p, depth + 1);
      if (s.v.k === "jump")
        return runChain(t, s.v.chain, s.p, depth + 1).flatMap((r) =>
          r.end === "return" ? from(i + 1, r.p) : [r],
        );
      return [{ p: s.p, end: s.v.k }];
    });
  };
  return from(0, p);
}

/** Falling off a base chain is its policy: accept. */
const policyAccept = (r: Path): Path => (r.end === "return" ? { ...r, end: "accept" } : r);

/**
 * Every base chain of `hook`, by priority; a packet accepted by one goes on
 * to the next, but not to another nat chain once DNATed (the kernel sets up
 * a connection's NAT once per hook).
 */
function runHook(t: NftTable, hook: string, paths: Path[]): Path[] {
  const bases = [...t.chains].filter(([, c]) => c.base?.hook === hook);
  bases.sort(([, a], [, b]) => (a.base?.priority ?? 0) - (b.base?.priority ?? 0));
  const natDone = (c: Chain, x: Path) =>
    c.base?.type === "nat" && hook !== "postrouting" && x.p.dnat !== undefined;
  for (const [name, c] of bases)
    paths = paths.flatMap((x) =>
      x.end !== "accept" || natDone(c, x) ? [x] : runChain(t, name, x.p).map(policyAccept),
    );
  return paths;
}

/** Where a new connection's first packet goes: through nat and the filter checks to postrouting. */
export function trace(t: NftTable, input: TraceInput): TraceResult {
  const family = need(parseIp(input.src)?.family, `address ${input.src}`);
  const p: Pkt = { ...input, src: ip(input.src), dst: ip(input.dst), family, mark: 0, masq: false };
  // After nat: delivered here (input), or forwarded and on through postrouting.
  const next = (x: Path) => {
    if (input.hook === "output") return ["postrouting"];
    return isLocal(x.p, x.p.dst) ? ["input"] : ["forward", "postrouting"];
  };
  const paths = runHook(t, input.hook, [{ p, end: "accept" }]).flatMap((x) =>
    next(x).reduce((ps, hook) => runHook(t, hook, ps), [x]),
  );
  const ends = new Set(
    paths.map((x) => (x.end === "accept" ? (x.p.dnat ? "dnat" : "none") : x.end)),
  );
  if (ends.size !== 1) fail(`paths end differently: ${[...ends].join(", ")}`);
  return {
    verdict: [...ends][0] as TraceResult["verdict"],
    endpoints: [...new Set(paths.flatMap((x) => (x.p.dnat ? [x.p.dnat] : [])))].sort(),
    masquerade: paths.some((x) => x.p.masq),
  };
}

/** The table as text, one line per rule, element and set: two tables loaded alike dump alike. */
export function dumpTable(t: NftTable): string[] {
  const out: string[] = [];
  for (const [name, c] of [...t.chains].sort(([a], [b]) => (a < b ? -1 : 1)))
    out.push(`chain ${name} ${JSON.stringify(c.base ?? {})}`, ...c.rules.map((r) => `  ${r.text}`));
  for (const [name, e] of [...t.elems].sort(([a], [b]) => (a < b ? -1 : 1)))
    out.push(
      `${e.kind} ${name}`,
      ...[...e.items].map(([k, v]) => `  ${k}${v ? ` : ${v}` : ""}`).sort(),
    );
  return out;
}
