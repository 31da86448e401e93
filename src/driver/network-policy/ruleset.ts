/**
 * NetworkPolicy on this node as nftables, and the change from one ruleset to
 * the next as one transaction that touches only what changed. Pure: the
 * model and the node's pods in, text out.
 *
 *   table inet cni-driver-policy
 *     chain forward   hook forward: established/related accept; then the
 *                     source pod's egress chain (by saddr), then the
 *                     destination pod's ingress chain (by daddr)
 *     map egress4/6, ingress4/6   a local pod's address → jump to its chain
 *     chain in-<veth>, eg-<veth>  one per isolated pod and direction: a line
 *                     per allowed (peers, ports), `return` when it matches,
 *                     `drop` at the end
 *     set p_<rule>_4/6           a rule's peers: pods' addresses and ipBlocks
 *                     (excepts cut out), shared by every pod the rule applies to
 *     set t_<rule>_4/6           an egress rule's named ports resolved on
 *                     each destination pod: address . protocol . port
 *     chain deny      a pod whose labels are not known yet (see enforcer.ts)
 *
 * The forward hook sees pod-to-pod traffic on one bridge too: the bridge
 * passes bridged IP through the IP hooks (nf_call_iptables, bridge.ts), after
 * prerouting's DNAT, so Service traffic is checked against the endpoint. The
 * node's own traffic to and from its pods goes through input and output, not
 * forward: it is never filtered here.
 */
import { createHash } from "node:crypto";
import { type AddressRanges, formatRange } from "../../policy/addresses.js";
import type { NumericPort, PodPolicy, PodRule, PolicyModel, PortName } from "../../policy/model.js";
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
  elements: string[];
}

export interface Ruleset {
  sets: Map<string, SetSpec>;
  /** Chain name → its rules, in order. */
  chains: Map<string, string[]>;
  dispatch: Record<DispatchMap, Map<string, string>>;
}

const proto = (p: Protocol) => p.toLowerCase();
const hash = (id: string) => createHash("sha1").update(id).digest("hex").slice(0, 16);
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
  return [...byProtocol].map(([protocol, list]) =>
    list === "all"
      ? `meta l4proto ${proto(protocol)}`
      : `meta l4proto ${proto(protocol)} th dport { ${[...new Set(list)].join(", ")} }`,
  );
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

  /** Each rule's peer sets, by family, once worked out. */
  private readonly peerFamilies = new Map<string, Array<{ family: 4 | 6; name: string }>>();

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
        this.out.chains.set(chain, [...rules.flatMap((r) => this.lines(r, direction)), "drop"]);
      }
      for (const ip of pod.ips) {
        const map: DispatchMap = `${direction}${ip.includes(":") ? "6" : "4"}`;
        this.out.dispatch[map].set(ip, chain);
      }
    }
  }

  private lines(rule: PodRule, direction: Direction): string[] {
    const field = direction === "ingress" ? "saddr" : "daddr";
    const peers = rule.anyPeer ? [""] : this.peerFragments(rule.id, field);
    const lines: string[] = [];
    for (const peer of peers) {
      for (const port of portFragments(rule.ports)) {
        lines.push(`${[peer, port].filter(Boolean).join(" ")} return`);
      }
    }
    if (direction === "egress" && rule.portNames.length > 0)
      lines.push(...this.targetLines(rule.id, rule.portNames));
    return lines;
  }

  /** The rule's peer sets, one per family that has addresses; worked out once per ruleset. */
  private peerFragments(ruleId: string, field: "saddr" | "daddr"): string[] {
    let families = this.peerFamilies.get(ruleId);
    if (!families) {
      const ranges: AddressRanges = this.model.peerAddresses(ruleId);
      families = [];
      for (const family of [4, 6] as const) {
        const list = family === 4 ? ranges.v4 : ranges.v6;
        if (list.length === 0) continue;
        const name = `p_${hash(ruleId)}_${family}`;
        this.out.sets.set(name, {
          type: family === 4 ? "ipv4_addr" : "ipv6_addr",
          interval: true,
          elements: list.map((r) => formatRange(r, family)),
        });
        families.push({ family, name });
      }
      this.peerFamilies.set(ruleId, families);
    }
    return families.map(({ family, name }) => `${family === 4 ? "ip" : "ip6"} ${field} @${name}`);
  }

  private targetLines(ruleId: string, names: readonly PortName[]): string[] {
    const targets = this.model.namedTargets(ruleId, names);
    const out: string[] = [];
    for (const family of [4, 6] as const) {
      const mine = targets.filter((t) => t.ip.includes(":") === (family === 6));
      if (mine.length === 0) continue;
      const name = `t_${hash(`${ruleId}|${names.map((n) => `${n.protocol}/${n.name}`).join(",")}`)}_${family}`;
      if (!this.out.sets.has(name))
        this.out.sets.set(name, {
          type: `${family === 4 ? "ipv4_addr" : "ipv6_addr"} . inet_proto . inet_service`,
          interval: false,
          elements: [...new Set(mine.map((t) => `${t.ip} . ${proto(t.protocol)} . ${t.port}`))],
        });
      out.push(`${family === 4 ? "ip" : "ip6"} daddr . meta l4proto . th dport @${name} return`);
    }
    return out;
  }
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
const elementsOf = (s: SetSpec) => `{ ${s.elements.join(", ")} }`;
const mapType = (m: DispatchMap) => (m.endsWith("4") ? "ipv4_addr" : "ipv6_addr");
const verdicts = (m: Map<string, string>) =>
  `{ ${[...m].map(([ip, chain]) => `${ip} : jump ${chain}`).join(", ")} }`;

const FORWARD_CHAIN = [
  "type filter hook forward priority filter; policy accept;",
  "ct state established,related accept",
  // Neighbour discovery between pods on one bridge is no connection a policy speaks of.
  "icmpv6 type { nd-router-solicit, nd-router-advert, nd-neighbor-solicit, nd-neighbor-advert } accept",
  "ip saddr vmap @egress4",
  "ip6 saddr vmap @egress6",
  "ip daddr vmap @ingress4",
  "ip6 daddr vmap @ingress6",
];

/** The whole table, replacing whatever is there (the first apply, and after a failed one). */
export function fullScript(r: Ruleset): string {
  const lines = [`table ${T}`, `delete table ${T}`, `table ${T} {`];
  for (const [name, s] of r.sets) {
    lines.push(
      `  set ${name} { ${setDecl(s)}${s.elements.length ? ` elements = ${elementsOf(s)}` : ""} }`,
    );
  }
  for (const [name, rules] of r.chains) {
    lines.push(`  chain ${name} {`, ...rules.map((l) => `    ${l}`), "  }");
  }
  for (const m of DISPATCH_MAPS) {
    const els = r.dispatch[m].size ? ` elements = ${verdicts(r.dispatch[m])}` : "";
    lines.push(`  map ${m} { type ${mapType(m)} : verdict;${els} }`);
  }
  lines.push("  chain forward {", ...FORWARD_CHAIN.map((l) => `    ${l}`), "  }", "}");
  return `${lines.join("\n")}\n`;
}

const sameList = (a: readonly string[], b: readonly string[]) =>
  a.length === b.length && a.every((x, i) => x === b[i]);

/**
 * The commands that turn `prev` into `next`, touching only what differs; ""
 * when nothing does. Order matters within the transaction: sets exist before
 * rules name them, chains before verdicts jump to them, and what goes is
 * unreferenced before it is deleted.
 */
export function diffScript(prev: Ruleset, next: Ruleset): string {
  const out: string[] = [];
  for (const [name, s] of next.sets) {
    const old = prev.sets.get(name);
    if (old && old.type === s.type && sameList(old.elements, s.elements)) continue;
    if (!old) out.push(`add set ${T} ${name} { ${setDecl(s)} }`);
    else out.push(`flush set ${T} ${name}`);
    if (s.elements.length) out.push(`add element ${T} ${name} ${elementsOf(s)}`);
  }
  for (const [name, rules] of next.chains) {
    const old = prev.chains.get(name);
    if (old && sameList(old, rules)) continue;
    if (!old) out.push(`add chain ${T} ${name}`);
    else out.push(`flush chain ${T} ${name}`);
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
    if (gone.size) out.push(`delete element ${T} ${m} { ${[...gone.keys()].join(", ")} }`);
    if (added.size) out.push(`add element ${T} ${m} ${verdicts(added)}`);
  }
  for (const name of prev.chains.keys()) {
    if (!next.chains.has(name)) out.push(`flush chain ${T} ${name}`, `delete chain ${T} ${name}`);
  }
  for (const name of prev.sets.keys()) {
    if (!next.sets.has(name)) out.push(`delete set ${T} ${name}`);
  }
  return out.length ? `${out.join("\n")}\n` : "";
}

/** What a change touched, for the log and the metrics. */
export function countChanges(script: string): number {
  return script ? script.split("\n").filter(Boolean).length : 0;
}
