/**
 * NetworkPolicy on this node as nftables, and the change from one ruleset to
 * the next as one transaction that touches only what changed. Pure: the
 * model and the node's pods in, text out.
 *
 *   table inet cni-driver-policy
 *     chain egress    hook forward, priority filter: established/related
 *                     accept; then the source pod's egress chain (by saddr)
 *     chain ingress   hook forward, priority filter + 1: the same, then the
 *                     destination pod's ingress chain (by daddr)
 *     map egress4/6, ingress4/6   a local pod's address → jump to its chain
 *     chain in-<veth>, eg-<veth>  one per isolated pod and direction: a jump
 *                     to each rule that applies to it, `drop` at the end
 *     chain r_<rule>  one per rule (per rule and resolved ports, for ingress
 *                     named ports), shared by every pod it applies to: a line
 *                     per port match that accepts (any peer) or jumps to the
 *                     rule's peer chain; then a jump to its named targets' chain
 *     chain k_<rule>  the rule's peer lookups: accept when the peer is in a set
 *     chain n_<rule>  an egress rule's named ports: accept when the
 *                     destination . protocol . port is in its t_ set
 *     set p_<rule>_4/6  a rule's pod peers' addresses (hash set, changed
 *                     element by element)
 *     set b_<rule>_4/6  a rule's ipBlocks, excepts cut out (interval set)
 *     set t_<rule>_4/6  an egress rule's named ports resolved on each
 *                     destination pod: address . protocol . port
 *     chain deny      a pod whose labels are not known yet (see enforcer.ts)
 *
 * `accept` ends only the base chain it is reached from: a packet egress lets
 * through still meets ingress, so a pod-to-pod packet passes both pods'
 * policies. A policy edit rewrites its rule chains only, a pod joining or
 * leaving a peer selection adds or deletes its address: nothing of a change
 * grows with the number of pods a rule applies to. Pod peers are plain hash
 * sets rather than interval sets because nftables (1.0.6) reads back every
 * interval set's elements before any transaction that changes elements.
 *
 * The forward hook sees pod-to-pod traffic on one bridge too: the bridge
 * passes bridged IP through the IP hooks (nf_call_iptables, bridge.ts), after
 * prerouting's DNAT, so Service traffic is checked against the endpoint. The
 * node's own traffic to and from its pods goes through input and output, not
 * forward: it is never filtered here.
 */
import { createHash } from "node:crypto";
import { formatRange } from "../../policy/addresses.js";
import type {
  NamedTarget,
  NumericPort,
  PodPolicy,
  PodRule,
  PolicyModel,
  PortName,
} from "../../policy/model.js";
import type { Direction, Protocol } from "../../policy/types.js";

export const POLICY_TABLE = "cni-driver-policy";
const T = `inet ${POLICY_TABLE}`;
const DENY_CHAIN = "deny";
const DISPATCH_MAPS = ["egress4", "egress6", "ingress4", "ingress6"] as const;
type DispatchMap = (typeof DISPATCH_MAPS)[number];

/** What a pod of this node gets. */
export type PodStanding =
  | { kind: "open" }
  /** Selected pod unknown: every forwarded packet to or from it is dropped. */
  | { kind: "deny" }
  | { kind: "policy"; policy: PodPolicy };

export interface LocalPodRules {
  /** The host end of its veth: names its chains. */
  hostIf: string;
  ips: readonly string[];
  standing: PodStanding;
}

interface SetSpec {
  type: string;
  interval: boolean;
  /** The elements in chunks: a chunk that is the same array as before is unchanged. */
  chunks: ReadonlyArray<readonly string[]>;
}

export interface Ruleset {
  sets: Map<string, SetSpec>;
  /** Chain name → its rules, in order. */
  chains: Map<string, string[]>;
  dispatch: Record<DispatchMap, Map<string, string>>;
}

const proto = (p: Protocol) => p.toLowerCase();
/** Names from ids, remembered: every sync names the same rules again. */
const hashes = new Map<string, string>();
function hash(id: string): string {
  let h = hashes.get(id);
  if (h === undefined) {
    // Bounded: policies come and go for as long as the driver runs.
    if (hashes.size >= 100_000) hashes.clear();
    h = createHash("sha1").update(id).digest("hex").slice(0, 16);
    hashes.set(id, h);
  }
  return h;
}
export const chainName = (direction: Direction, hostIf: string) =>
  `${direction === "ingress" ? "in" : "eg"}-${hostIf}`;

function portFragments(ports: "any" | NumericPort[]): string[] {
  if (ports === "any") return [""];
  const byProtocol = new Map<Protocol, string[] | "all">();
  for (const p of ports) {
    const have = byProtocol.get(p.protocol);
    if (p.port === undefined) byProtocol.set(p.protocol, "all");
    else if (have !== "all") {
      const text = p.endPort !== undefined ? `${p.port}-${p.endPort}` : String(p.port);
      byProtocol.set(p.protocol, [...(have ?? []), text]);
    }
  }
  return [...byProtocol].map(([protocol, list]) => {
    if (list === "all") return `meta l4proto ${proto(protocol)}`;
    const unique = [...new Set(list)];
    // One port is a comparison; more make an anonymous set.
    const match = unique.length === 1 ? unique[0] : `{ ${unique.join(", ")} }`;
    return `meta l4proto ${proto(protocol)} th dport ${match}`;
  });
}

class RulesetBuilder {
  readonly out: Ruleset = {
    sets: new Map(),
    chains: new Map([[DENY_CHAIN, ["drop"]]]),
    dispatch: {
      egress4: new Map(),
      egress6: new Map(),
      ingress4: new Map(),
      ingress6: new Map(),
    },
  };

  constructor(private readonly model: PolicyModel) {}

  addPod(pod: LocalPodRules): void {
    if (pod.standing.kind === "open") return;
    for (const direction of ["egress", "ingress"] as const) {
      let chain: string;
      if (pod.standing.kind === "deny") chain = DENY_CHAIN;
      else {
        const rules = pod.standing.policy[direction];
        if (!rules) continue;
        chain = chainName(direction, pod.hostIf);
        const jumps = new Set(rules.map((r) => `jump ${this.ruleChain(r, direction)}`));
        this.out.chains.set(chain, [...jumps, "drop"]);
      }
      for (const ip of pod.ips) {
        const map: DispatchMap = `${direction}${ip.includes(":") ? "6" : "4"}`;
        this.out.dispatch[map].set(ip, chain);
      }
    }
  }

  /** The rule's chain, written once per ruleset however many pods jump to it. */
  private ruleChain(rule: PodRule, direction: Direction): string {
    const ports = portFragments(rule.ports);
    const name = `r_${hash(rule.perPod ? `${rule.id}|${ports.join(";")}` : rule.id)}`;
    if (this.out.chains.has(name)) return name;
    const field = direction === "ingress" ? "saddr" : "daddr";
    // The port first: a packet for another port leaves the line before any set lookup.
    const then = rule.anyPeer ? "accept" : `jump ${this.peerChain(rule.id, field)}`;
    const lines = ports.map((port) => `${port ? `${port} ` : ""}${then}`);
    if (direction === "egress" && rule.portNames.length > 0)
      lines.push(`jump ${this.targetChain(rule.id, rule.portNames)}`);
    this.out.chains.set(name, lines);
    return name;
  }

  /**
   * The rule's peer lookups, in a chain of their own that its port lines
   * jump to. nftables (1.0.6) reads back every element of a set that a rule
   * being added names: kept apart, a port edit rewrites lines that name no
   * set, and this chain changes only when the peers' kinds do.
   */
  private peerChain(ruleId: string, field: "saddr" | "daddr"): string {
    const name = `k_${hash(ruleId)}`;
    if (!this.out.chains.has(name))
      this.out.chains.set(
        name,
        this.peerFragments(ruleId, field).map((f) => `${f} accept`),
      );
    return name;
  }

  /** The rule's peer sets: pod addresses (always both families) and ipBlocks (where any). */
  private peerFragments(ruleId: string, field: "saddr" | "daddr"): string[] {
    const out: string[] = [];
    const h = hash(ruleId);
    const pods = this.model.hasPodPeers(ruleId) ? this.model.peerPodAddresses(ruleId) : undefined;
    const blocks = this.model.peerBlocks(ruleId);
    for (const family of [4, 6] as const) {
      const ip = family === 4 ? "ip" : "ip6";
      const type = family === 4 ? "ipv4_addr" : "ipv6_addr";
      // Kept even when empty: a pod joining later is an element, not a rule.
      if (pods) {
        const name = `p_${h}_${family}`;
        this.out.sets.set(name, { type, interval: false, chunks: pods[`v${family}`] });
        out.push(`${ip} ${field} @${name}`);
      }
      const ranges = blocks[`v${family}`];
      if (ranges.length > 0) {
        const name = `b_${h}_${family}`;
        this.out.sets.set(name, {
          type,
          interval: true,
          chunks: [ranges.map((r) => formatRange(r, family))],
        });
        out.push(`${ip} ${field} @${name}`);
      }
    }
    return out;
  }

  /** An egress rule's named ports as resolved on its peers: a chain of its own, as peerChain. */
  private targetChain(ruleId: string, names: readonly PortName[]): string {
    const h = hash(`${ruleId}|${names.map((n) => `${n.protocol}/${n.name}`).join(",")}`);
    const name = `n_${h}`;
    if (this.out.chains.has(name)) return name;
    const chunks = this.model.namedTargetChunks(ruleId, names).map(targetElements);
    const lines: string[] = [];
    for (const family of [4, 6] as const) {
      const set = `t_${h}_${family}`;
      this.out.sets.set(set, {
        type: `${family === 4 ? "ipv4_addr" : "ipv6_addr"} . inet_proto . inet_service`,
        interval: false,
        chunks: chunks.map((c) => c[`v${family}`]).filter((c) => c.length > 0),
      });
      lines.push(`${family === 4 ? "ip" : "ip6"} daddr . meta l4proto . th dport @${set} accept`);
    }
    this.out.chains.set(name, lines);
    return name;
  }
}

/** A chunk of named targets as set elements by family, kept as long as the chunk is. */
const formattedTargets = new WeakMap<readonly NamedTarget[], { v4: string[]; v6: string[] }>();
function targetElements(chunk: readonly NamedTarget[]): { v4: string[]; v6: string[] } {
  let out = formattedTargets.get(chunk);
  if (!out) {
    out = { v4: [], v6: [] };
    for (const t of chunk)
      out[t.ip.includes(":") ? "v6" : "v4"].push(`${t.ip} . ${proto(t.protocol)} . ${t.port}`);
    formattedTargets.set(chunk, out);
  }
  return out;
}

export function buildRuleset(model: PolicyModel, pods: Iterable<LocalPodRules>): Ruleset {
  const b = new RulesetBuilder(model);
  for (const pod of pods) b.addPod(pod);
  return b.out;
}

/** Whether no pod of the node is isolated or denied in it. */
export function enforcesNothing(r: Ruleset): boolean {
  return DISPATCH_MAPS.every((m) => r.dispatch[m].size === 0);
}

const setDecl = (s: SetSpec) => `type ${s.type};${s.interval ? " flags interval;" : ""}`;
const elementsOf = (s: SetSpec) => [...new Set(s.chunks.flat())];
const braced = (list: readonly string[]) => `{ ${list.join(", ")} }`;
const mapType = (m: DispatchMap) => (m.endsWith("4") ? "ipv4_addr" : "ipv6_addr");
const verdicts = (m: Map<string, string>) =>
  `{ ${[...m].map(([ip, chain]) => `${ip} : jump ${chain}`).join(", ")} }`;

const ND =
  "icmpv6 type { nd-router-solicit, nd-router-advert, nd-neighbor-solicit, nd-neighbor-advert } accept";
/** The two base chains: each direction ends in its own, so one's accept does not skip the other. */
const BASE_CHAINS: Array<[name: string, lines: string[]]> = [
  [
    "egress",
    [
      "type filter hook forward priority filter; policy accept;",
      "ct state established,related accept",
      // Neighbour discovery between pods on one bridge is no connection a policy speaks of.
      ND,
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

const sameList = (a: readonly string[], b: readonly string[]) =>
  a.length === b.length && a.every((x, i) => x === b[i]);

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

/** The commands that bring one set from `old` (undefined: new) to `s`. */
function setCommands(name: string, old: SetSpec | undefined, s: SetSpec): string[] {
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
  return [
    ...(gone.length ? [`delete element ${T} ${name} ${braced(gone)}`] : []),
    ...(added.length ? [`add element ${T} ${name} ${braced(added)}`] : []),
  ];
}

/**
 * The commands that turn `prev` into `next`, touching only what differs; ""
 * when nothing does. Order matters within the transaction: sets exist before
 * rules name them, chains before rules jump to them, and what goes is
 * unreferenced before it is deleted.
 */
export function diffScript(prev: Ruleset, next: Ruleset): string {
  const out: string[] = [];
  for (const [name, s] of next.sets) out.push(...setCommands(name, prev.sets.get(name), s));
  for (const name of next.chains.keys()) {
    if (!prev.chains.has(name)) out.push(`add chain ${T} ${name}`);
  }
  for (const [name, rules] of next.chains) {
    const old = prev.chains.get(name);
    if (old && sameList(old, rules)) continue;
    if (old) out.push(`flush chain ${T} ${name}`);
    for (const l of rules) out.push(`add rule ${T} ${name} ${l}`);
  }
  for (const m of DISPATCH_MAPS) {
    const gone = new Map<string, string>();
    const added = new Map<string, string>();
    for (const [ip, chain] of prev.dispatch[m]) {
      if (next.dispatch[m].get(ip) !== chain) gone.set(ip, chain);
    }
    for (const [ip, chain] of next.dispatch[m]) {
      if (prev.dispatch[m].get(ip) !== chain) added.set(ip, chain);
    }
    if (gone.size) out.push(`delete element ${T} ${m} ${braced([...gone.keys()])}`);
    if (added.size) out.push(`add element ${T} ${m} ${verdicts(added)}`);
  }
  // Every chain that goes is emptied before any is deleted: one may jump to another.
  const goneChains = [...prev.chains.keys()].filter((name) => !next.chains.has(name));
  for (const name of goneChains) out.push(`flush chain ${T} ${name}`);
  for (const name of goneChains) out.push(`delete chain ${T} ${name}`);
  for (const name of prev.sets.keys()) {
    if (!next.sets.has(name)) out.push(`delete set ${T} ${name}`);
  }
  return out.length ? `${out.join("\n")}\n` : "";
}

/** What a change touched, for the log and the metrics. */
export function countChanges(script: string): number {
  return script ? script.split("\n").filter(Boolean).length : 0;
}
