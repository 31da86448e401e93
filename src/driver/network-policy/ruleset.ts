/**
 * NetworkPolicy on this node as nftables: the ruleset the model and the
 * node's pods come to (ruleset-commands.ts turns it, or the change from the
 * last one, into a transaction). Pure.
 *
 *   table inet cni-driver-policy
 *     chain egress    hook forward, priority filter: established/related
 *                     accept; then the source pod's egress chain (by saddr)
 *     chain ingress   hook forward, priority filter + 1: the same, then the
 *                     destination pod's ingress chain (by daddr)
 *     map egress4/6, ingress4/6   a local pod's address → jump to its chain
 *     chain in-<hash>, eg-<hash>  the rules that apply to a pod in that
 *                     direction: those on single ports through one map of
 *                     protocol . port → rule chain (or a `q_` chain jumping
 *                     to the rules sharing that port), a jump to each of
 *                     the others, `drop` at the end; named by what it
 *                     holds, so pods the same rules apply to share one
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
 * grows with the number of pods a rule applies to. A new pod whose rules the
 * node already has is element changes only (`elementsOnly`); what no pod
 * uses any more stays until the enforcer collects it (`keepIdle`). Pod peers
 * are plain hash sets rather than interval sets because nftables (1.0.6)
 * reads back every interval set's elements before any transaction that
 * changes elements.
 *
 * The forward hook sees pod-to-pod traffic on one bridge too: the bridge
 * passes bridged IP through the IP hooks (nf_call_iptables, bridge.ts), after
 * prerouting's DNAT, so Service traffic is checked against the endpoint. The
 * node's own traffic to and from its pods goes through input and output, not
 * forward: it is never filtered here.
 */
import { createHash } from "node:crypto";
import { type AddressRanges, formatRange } from "../../policy/addresses.js";
import type {
  NamedTarget,
  NumericPort,
  PodPolicy,
  PodRule,
  PortName,
} from "../../policy/answers.js";
import type { PolicyModel } from "../../policy/model.js";
import type { Direction, Protocol } from "../../policy/types.js";

export const POLICY_TABLE = "cni-driver-policy";
const DENY_CHAIN = "deny";
export const DISPATCH_MAPS = ["egress4", "egress6", "ingress4", "ingress6"] as const;
export type DispatchMap = (typeof DISPATCH_MAPS)[number];

/** What a pod of this node gets. */
export type PodStanding =
  | { kind: "open" }
  /** Selected pod unknown: every forwarded packet to or from it is dropped. */
  | { kind: "deny" }
  | { kind: "policy"; policy: PodPolicy };

export interface LocalPodRules {
  ips: readonly string[];
  standing: PodStanding;
}

export interface SetSpec {
  type: string;
  interval: boolean;
  /** The elements in chunks: a chunk that is the same array as before is unchanged. */
  chunks: ReadonlyArray<readonly string[]>;
}

export interface Ruleset {
  sets: Map<string, SetSpec>;
  /** Chain name → its rules, in order (arrays kept from sync to sync while unchanged). */
  chains: Map<string, readonly string[]>;
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
        const shared = this.podChain(rules, direction);
        chain = shared.name;
        this.out.chains.set(chain, shared.lines);
      }
      for (const ip of pod.ips) {
        const map: DispatchMap = `${direction}${ip.includes(":") ? "6" : "4"}`;
        this.out.dispatch[map].set(ip, chain);
      }
    }
  }

  /**
   * The chain a pod's verdicts jump to in a direction: a jump to each of its
   * rules' chains, then `drop`, named by what it holds. Pods that the same
   * rules apply to (a Deployment's, mostly) share it, so a new pod under
   * rules the node already has is elements only: its verdicts and its
   * address in the peer sets. Kept with the pod's rule list (the model's,
   * unchanged until a policy changes), as the rules' own chains are.
   */
  private podChain(rules: readonly PodRule[], direction: Direction): PodChain {
    let chain = podChains.get(rules);
    if (!chain) {
      chain = this.workOutPodChain(rules, direction);
      podChains.set(rules, chain);
    } else {
      // Known lines, but this ruleset still needs the chains (and sets) they jump to.
      for (const r of rules) this.ruleChain(r, direction);
    }
    for (const [name, lines] of chain.fanOuts) this.out.chains.set(name, lines);
    return chain;
  }

  /**
   * Rules whose ports are single numbers are reached through one verdict map
   * keyed by protocol and destination port, once a pod has PORT_MAP_MIN such
   * ports: a connection's first packet meets one lookup, not every rule in
   * turn (100 policies selecting a pod were 100 jumps). Rules with a range,
   * a whole protocol, any port or named egress ports are jumped to in turn.
   * A port several rules name leads to a `q_` chain that jumps to each. The
   * rule chains check the port again: harmless, and they stay shared.
   */
  private workOutPodChain(rules: readonly PodRule[], direction: Direction): PodChain {
    const byPort = new Map<string, Set<string>>();
    const direct = new Set<string>();
    for (const r of rules) {
      const name = this.ruleChain(r, direction);
      const keys = portKeys(r);
      if (!keys) direct.add(name);
      for (const key of keys ?? []) {
        const names = byPort.get(key) ?? new Set<string>();
        byPort.set(key, names.add(name));
      }
    }
    const fanOuts: Array<[string, readonly string[]]> = [];
    const entries: string[] = [];
    if (byPort.size < PORT_MAP_MIN) {
      for (const names of byPort.values()) for (const n of names) direct.add(n);
    } else {
      for (const key of [...byPort.keys()].sort()) {
        const names = [...(byPort.get(key) as Set<string>)].sort();
        let target = names[0] as string;
        if (names.length > 1) {
          const lines = names.map((n) => `jump ${n}`);
          target = `q_${hash(lines.join(";"))}`;
          fanOuts.push([target, lines]);
        }
        entries.push(`${key} : jump ${target}`);
      }
    }
    const lines = [
      ...(entries.length > 0 ? [`meta l4proto . th dport vmap { ${entries.join(", ")} }`] : []),
      ...[...direct].map((n) => `jump ${n}`),
      "drop",
    ];
    const name = `${direction === "ingress" ? "in" : "eg"}-${hash(lines.join(";"))}`;
    return { name, lines, fanOuts };
  }

  /** The rule's chain, written once per ruleset however many pods jump to it. */
  private ruleChain(rule: PodRule, direction: Direction): string {
    let shape = ruleShapes.get(rule);
    if (!shape) {
      shape = ruleShape(rule, direction);
      ruleShapes.set(rule, shape);
    }
    if (this.out.chains.has(shape.name)) return shape.name;
    this.out.chains.set(shape.name, shape.lines);
    if (shape.peers) this.peerChain(rule.id, shape.peers);
    if (shape.targets) this.targetChain(rule.id, rule.portNames, shape.targets);
    return shape.name;
  }

  /**
   * The rule's peer lookups, in a chain of their own that its port lines
   * jump to. nftables (1.0.6) reads back every element of a set that a rule
   * being added names: kept apart, a port edit rewrites lines that name no
   * set, and this chain changes only when the peers' kinds do.
   */
  private peerChain(ruleId: string, chain: RuleShape["peers"] & {}): void {
    if (this.out.chains.has(chain.name)) return;
    const h = hash(ruleId);
    const pods = this.model.hasPodPeers(ruleId) ? this.model.peerPodAddresses(ruleId) : undefined;
    const blocks = this.model.peerBlocks(ruleId);
    const lines: string[] = [];
    for (const family of [4, 6] as const) {
      const ip = family === 4 ? "ip" : "ip6";
      const type = family === 4 ? "ipv4_addr" : "ipv6_addr";
      // Kept even when empty: a pod joining later is an element, not a rule.
      if (pods) {
        const name = `p_${h}_${family}`;
        this.out.sets.set(name, { type, interval: false, chunks: pods[`v${family}`] });
        lines.push(`${ip} ${chain.field} @${name} accept`);
      }
      const ranges = blocks[`v${family}`];
      if (ranges.length > 0) {
        const name = `b_${h}_${family}`;
        this.out.sets.set(name, { type, interval: true, chunks: blockChunks(blocks, family) });
        lines.push(`${ip} ${chain.field} @${name} accept`);
      }
    }
    // Fixed for the rule's life (what kinds of peers it has does not change), so kept on its
    // shape: the same array from sync to sync, which diffCommands compares by identity first.
    chain.lines ??= lines;
    this.out.chains.set(chain.name, chain.lines);
  }

  /** An egress rule's named ports as resolved on its peers: a chain of its own, as peerChain. */
  private targetChain(ruleId: string, names: readonly PortName[], chain: TargetChain): void {
    if (this.out.chains.has(chain.name)) return;
    const chunks = this.model.namedTargetChunks(ruleId, names).map(targetElements);
    chain.sets.forEach((set, i) => {
      const family = i === 0 ? "v4" : "v6";
      this.out.sets.set(set, {
        type: `${family === "v4" ? "ipv4_addr" : "ipv6_addr"} . inet_proto . inet_service`,
        interval: false,
        chunks: chunks.map((c) => c[family]).filter((c) => c.length > 0),
      });
    });
    this.out.chains.set(chain.name, chain.lines);
  }
}

interface TargetChain {
  name: string;
  sets: [string, string];
  lines: readonly string[];
}

/** What a rule's chains are named and hold, fixed for the PodRule's life. */
interface RuleShape {
  name: string;
  lines: readonly string[];
  /** The peer chain its lines jump to, unless any peer is allowed. */
  peers?: { name: string; field: "saddr" | "daddr"; lines?: readonly string[] };
  /** An egress rule's named-port chain. */
  targets?: TargetChain;
}

/**
 * Kept per PodRule and pod rule list: the model hands out the same objects
 * until a policy changes, so a sync for a pod event works none of this out
 * again. Weak: a replaced rule's entries go with it.
 */
const ruleShapes = new WeakMap<PodRule, RuleShape>();
interface PodChain {
  name: string;
  lines: readonly string[];
  /** The `q_` chains its port map leads to, where several rules share a port. */
  fanOuts: ReadonlyArray<[string, readonly string[]]>;
}

/** How many single ports a pod's rules name before they are reached through a map. */
const PORT_MAP_MIN = 4;

/**
 * A rule's `protocol . port` keys when every port it names is one number;
 * undefined when it must be jumped to in turn (any port, a range, a whole
 * protocol, named egress ports). No ports at all (a name this pod lacks):
 * no key, and the rule is never reached, as it matches nothing.
 */
function portKeys(rule: PodRule): string[] | undefined {
  if (rule.ports === "any" || rule.portNames.length > 0) return undefined;
  const keys: string[] = [];
  for (const p of rule.ports) {
    if (p.port === undefined || p.endPort !== undefined) return undefined;
    keys.push(`${proto(p.protocol)} . ${p.port}`);
  }
  return keys;
}
const podChains = new WeakMap<readonly PodRule[], PodChain>();

function ruleShape(rule: PodRule, direction: Direction): RuleShape {
  const ports = portFragments(rule.ports);
  const name = `r_${hash(rule.perPod ? `${rule.id}|${ports.join(";")}` : rule.id)}`;
  const field = direction === "ingress" ? "saddr" : "daddr";
  const peers: RuleShape["peers"] = rule.anyPeer
    ? undefined
    : { name: `k_${hash(rule.id)}`, field };
  // The port first: a packet for another port leaves the line before any set lookup.
  const then = peers ? `jump ${peers.name}` : "accept";
  const lines = ports.map((port) => `${port ? `${port} ` : ""}${then}`);
  let targets: TargetChain | undefined;
  if (direction === "egress" && rule.portNames.length > 0) {
    const h = hash(`${rule.id}|${rule.portNames.map((n) => `${n.protocol}/${n.name}`).join(",")}`);
    targets = {
      name: `n_${h}`,
      sets: [`t_${h}_4`, `t_${h}_6`],
      lines: [4, 6].map(
        (f) => `${f === 4 ? "ip" : "ip6"} daddr . meta l4proto . th dport @t_${h}_${f} accept`,
      ),
    };
    lines.push(`jump ${targets.name}`);
  }
  return { name, lines, ...(peers ? { peers } : {}), ...(targets ? { targets } : {}) };
}

/** A rule's ipBlocks as one chunk per family, formatted once (they are fixed for the rule's life). */
const formattedBlocks = new WeakMap<AddressRanges, { v4: string[][]; v6: string[][] }>();
function blockChunks(blocks: AddressRanges, family: 4 | 6): ReadonlyArray<readonly string[]> {
  let out = formattedBlocks.get(blocks);
  if (!out) {
    out = {
      v4: [blocks.v4.map((r) => formatRange(r, 4))],
      v6: [blocks.v6.map((r) => formatRange(r, 6))],
    };
    formattedBlocks.set(blocks, out);
  }
  return out[`v${family}`];
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
