/**
 * A NetworkPolicy ruleset (ruleset.ts) as nftables commands: the whole table
 * (the first write, and after a failed one), or the change from the ruleset
 * the kernel has to the next as one transaction that touches only what
 * differs, its element changes kept apart so that a change made of nothing
 * else can go to the kernel as one netlink batch (see enforcer.ts).
 */
import {
  DISPATCH_MAPS,
  type DispatchMap,
  POLICY_TABLE,
  type Ruleset,
  type SetSpec,
} from "./ruleset.js";

const T = `inet ${POLICY_TABLE}`;

/** Whether two lists of lines are the same, line by line. */
const sameList = (a: readonly string[], b: readonly string[]) =>
  a.length === b.length && a.every((x, i) => x === b[i]);

const setDecl = (s: SetSpec) => `type ${s.type};${s.interval ? " flags interval;" : ""}`;
const elementsOf = (s: SetSpec) => [...new Set(s.chunks.flat())];
const braced = (list: readonly string[]) => `{ ${list.join(", ")} }`;
const mapType = (m: DispatchMap) => (m.endsWith("4") ? "ipv4_addr" : "ipv6_addr");
const verdicts = (m: Map<string, string>) =>
  `{ ${[...m].map(([ip, chain]) => `${ip} : jump ${chain}`).join(", ")} }`;

const ND =
  "icmpv6 type { nd-router-solicit, nd-router-advert, nd-neighbor-solicit, nd-neighbor-advert } accept";
/**
 * A TCP packet conntrack has no entry for that is not a connection's first
 * (no SYN, or SYN-ACK): a mid-stream pickup (nf_conntrack_tcp_loose), as
 * after a cut. Dropped when it comes from or goes to an isolated pod of the
 * node: else the side a policy does not check picks the connection up again
 * (the server's next packet makes a new entry as if the server had opened
 * it), and the side it checks passes as that entry's replies.
 */
const NO_PICKUP = (["ip", "ip6"] as const).flatMap((ip) =>
  (["saddr", "daddr"] as const).flatMap((field) =>
    (["ingress", "egress"] as const).map(
      (map) =>
        `ct state new tcp flags & (syn | ack) != syn ${ip} ${field} @${map}${ip === "ip" ? "4" : "6"} drop`,
    ),
  ),
);

/** The two base chains: each direction ends in its own, so one's accept does not skip the other. */
const BASE_CHAINS: Array<[name: string, lines: string[]]> = [
  [
    "egress",
    [
      "type filter hook forward priority filter; policy accept;",
      "ct state established,related accept",
      // Neighbour discovery between pods on one bridge is no connection a policy speaks of.
      ND,
      ...NO_PICKUP,
      "ip saddr vmap @egress4",
      "ip6 saddr vmap @egress6",
    ],
  ],
  [
    "ingress",
    [
      "type filter hook forward priority filter + 1; policy accept;",
      "ct state established,related accept",
      ND,
      "ip daddr vmap @ingress4",
      "ip6 daddr vmap @ingress6",
    ],
  ],
];

/** The whole table, replacing whatever is there (the first apply, and after a failed one). */
export function fullScript(r: Ruleset): string {
  const lines = [`table ${T}`, `delete table ${T}`, `table ${T} {`];
  for (const [name, s] of r.sets) {
    const els = elementsOf(s);
    lines.push(`  set ${name} { ${setDecl(s)}${els.length ? ` elements = ${braced(els)}` : ""} }`);
  }
  for (const [name, rules] of r.chains) {
    lines.push(`  chain ${name} {`, ...rules.map((l) => `    ${l}`), "  }");
  }
  for (const m of DISPATCH_MAPS) {
    const els = r.dispatch[m].size ? ` elements = ${verdicts(r.dispatch[m])}` : "";
    lines.push(`  map ${m} { type ${mapType(m)} : verdict;${els} }`);
  }
  for (const [name, chain] of BASE_CHAINS)
    lines.push(`  chain ${name} {`, ...chain.map((l) => `    ${l}`), "  }");
  lines.push("}");
  return `${lines.join("\n")}\n`;
}

/**
 * A hash set's change as elements to delete and to add, found from the chunks
 * that changed. Unchanged chunks are read only when something is to go, to
 * keep an address that another namespace's pod still has; an address added
 * that an unchanged chunk already holds is harmless (`add` of a present
 * element is no error).
 */
function elementDelta(prev: SetSpec, next: SetSpec): { gone: string[]; added: string[] } {
  const before = new Set(prev.chunks);
  const after = new Set(next.chunks);
  const was = new Set(prev.chunks.filter((c) => !after.has(c)).flat());
  const now = new Set(next.chunks.filter((c) => !before.has(c)).flat());
  const added = [...now].filter((e) => !was.has(e));
  let gone = [...was].filter((e) => !now.has(e));
  if (gone.length > 0) {
    const kept = new Set(next.chunks.filter((c) => before.has(c)).flat());
    gone = gone.filter((e) => !kept.has(e));
  }
  return { gone, added };
}

const sameChunks = (a: SetSpec, b: SetSpec) =>
  a.chunks.length === b.chunks.length && a.chunks.every((c, i) => c === b.chunks[i]);

/**
 * An element change of a plain address set or a verdict map: the changes a
 * pod's setup and teardown mostly are, which the kernel datapath can write
 * without libnftables (see enforcer.ts).
 */
export interface ElementChange {
  op: "add" | "delete";
  set: string;
  /** The set's key type: an address, or an address . protocol . port (`t_` sets). */
  keyType: string;
  /** As nft writes them: `10.0.0.1`, or `10.0.0.1 . tcp . 8080`. */
  keys: readonly string[];
  /** A verdict map's: the chain each key jumps to. */
  jumps?: readonly string[];
}

/** One command of a change: nft text, or an element change (written as text where text is). */
export type Command = string | ElementChange;

/** The change as an nft script. */
export function scriptOf(commands: readonly Command[]): string {
  if (commands.length === 0) return "";
  const text = commands.map((c) => {
    if (typeof c === "string") return c;
    const els = c.jumps ? c.keys.map((k, i) => `${k} : jump ${c.jumps?.[i]}`) : c.keys;
    return `${c.op} element ${T} ${c.set} ${braced(els)}`;
  });
  return `${text.join("\n")}\n`;
}

/** The change's element changes when that is all it is; undefined when some command is text. */
export function elementsOnly(commands: readonly Command[]): ElementChange[] | undefined {
  const out: ElementChange[] = [];
  for (const c of commands) {
    if (typeof c === "string") return undefined;
    out.push(c);
  }
  return out;
}

/** The commands that bring one set from `old` (undefined: new) to `s`. */
function setCommands(name: string, old: SetSpec | undefined, s: SetSpec): Command[] {
  if (old && sameChunks(old, s)) return [];
  if (!old) {
    const els = elementsOf(s);
    return [
      `add set ${T} ${name} { ${setDecl(s)} }`,
      ...(els.length ? [`add element ${T} ${name} ${braced(els)}`] : []),
    ];
  }
  if (s.interval) {
    // ipBlocks only, changed with their policy: rewritten whole.
    const before = elementsOf(old);
    const els = elementsOf(s);
    if (sameList(before, els)) return [];
    return [
      `flush set ${T} ${name}`,
      ...(els.length ? [`add element ${T} ${name} ${braced(els)}`] : []),
    ];
  }
  const { gone, added } = elementDelta(old, s);
  const change = (op: "add" | "delete", keys: string[]): Command => ({
    op,
    set: name,
    keyType: s.type,
    keys,
  });
  return [
    ...(gone.length ? [change("delete", gone)] : []),
    ...(added.length ? [change("add", added)] : []),
  ];
}

/**
 * The commands that turn `prev` into `next`, touching only what differs;
 * none when nothing does. Order matters within the transaction: sets exist
 * before rules name them, chains before rules jump to them, and what goes is
 * unreferenced before it is deleted.
 */
export function diffCommands(prev: Ruleset, next: Ruleset): Command[] {
  const out: Command[] = [];
  for (const [name, s] of next.sets) out.push(...setCommands(name, prev.sets.get(name), s));
  for (const name of next.chains.keys()) {
    if (!prev.chains.has(name)) out.push(`add chain ${T} ${name}`);
  }
  for (const [name, rules] of next.chains) {
    const old = prev.chains.get(name);
    if (old === rules || (old && sameList(old, rules))) continue;
    if (old) out.push(`flush chain ${T} ${name}`);
    for (const l of rules) out.push(`add rule ${T} ${name} ${l}`);
  }
  for (const m of DISPATCH_MAPS) {
    const gone: string[] = [];
    const added = new Map<string, string>();
    for (const [ip, chain] of prev.dispatch[m]) {
      if (next.dispatch[m].get(ip) !== chain) gone.push(ip);
    }
    for (const [ip, chain] of next.dispatch[m]) {
      if (prev.dispatch[m].get(ip) !== chain) added.set(ip, chain);
    }
    const keyType = mapType(m);
    if (gone.length) out.push({ op: "delete", set: m, keyType, keys: gone });
    if (added.size)
      out.push({ op: "add", set: m, keyType, keys: [...added.keys()], jumps: [...added.values()] });
  }
  // Every chain that goes is emptied before any is deleted: one may jump to another.
  const goneChains = [...prev.chains.keys()].filter((name) => !next.chains.has(name));
  for (const name of goneChains) out.push(`flush chain ${T} ${name}`);
  for (const name of goneChains) out.push(`delete chain ${T} ${name}`);
  for (const name of prev.sets.keys()) {
    if (!next.sets.has(name)) out.push(`delete set ${T} ${name}`);
  }
  return out;
}

/** diffCommands as an nft script; "" when nothing differs. */
// Exported for its tests only (integration/network-policy-nft.test.ts, unit/network-policy-ruleset.test.ts).
export function diffScript(prev: Ruleset, next: Ruleset): string {
  return scriptOf(diffCommands(prev, next));
}

/**
 * Keeps in `next` what `prev` has and `next` no longer uses (the chains and
 * sets of rules no pod of the node has now): deleting costs a transaction
 * that nftables 1.0.6 makes read back every set element of the table, while
 * a pod of the same kind may well come back soon. Unreferenced, they are
 * inert; their sets are not kept up to date, and the diff that uses them
 * again brings them up to date. Answers how many it kept.
 */
export function keepIdle(prev: Ruleset, next: Ruleset): number {
  let kept = 0;
  for (const [name, rules] of prev.chains) {
    if (next.chains.has(name)) continue;
    next.chains.set(name, rules);
    kept++;
  }
  for (const [name, set] of prev.sets) {
    if (next.sets.has(name)) continue;
    next.sets.set(name, set);
    kept++;
  }
  return kept;
}
