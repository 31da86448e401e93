/**
 * NetworkPolicy as data: the cluster's pods, namespaces and policies in, and
 * for any pod what it may receive and send out. Pure; events cost little
 * (an index update and a version bump), and the answers are worked out when
 * asked for (`podPolicy`, `peerAddresses`, `namedTargets`) and kept until
 * what they read changes.
 *
 * The semantics are networking.k8s.io/v1's:
 * - a policy selects the pods of its own namespace its podSelector matches
 *   (empty: all); hostNetwork pods are never selected;
 * - policyTypes, when absent, are Ingress, plus Egress when there are egress rules;
 * - a pod selected by some policy in a direction is isolated in it: only what
 *   some rule of some such policy allows passes (policies add up);
 * - a peer with podSelector only means pods of the policy's namespace; with
 *   namespaceSelector only, every pod of the matching namespaces; with both,
 *   pods matching the podSelector in those namespaces; an ipBlock means its
 *   CIDR less its excepts; peers of one rule are OR'd; no peers: anyone;
 * - ports: a number, a range up to endPort, or a name resolved against the
 *   destination pod's container ports (for ingress the selected pod itself,
 *   for egress each peer pod); no ports: every port; a name nobody has
 *   matches nothing.
 */
import { type AddressRanges, addressRanges, rangesContain } from "./addresses.js";
import type { AddressChunks, NamedTarget, PodPolicy, PortName } from "./answers.js";
import { PodPolicies, type PolicyState } from "./pod-policies.js";
import { PortLists, portMatches, samePod, targetsOf } from "./pods.js";
import { policyProblem } from "./problems.js";
import { type MemberBucket, type MemberCache, memberPods, type RuleState } from "./rules.js";
import { selectorMatches } from "./selector.js";
import type {
  Direction,
  LabelSelector,
  NetworkPolicy,
  PolicyNamespace,
  PolicyPeer,
  PolicyPod,
  Protocol,
} from "./types.js";
import { podKey } from "./types.js";

/** A policy the model cannot apply as written, and why. */
interface PolicyProblem {
  policy: string;
  reason: string;
}

export class PolicyModel {
  /** By namespace, then by name: one index (150,000 pods: keys of their own would cost 15 MiB more). */
  private readonly podsByNamespace = new Map<string, Map<string, PolicyPod>>();
  private readonly portLists = new PortLists();
  private readonly namespaces = new Map<string, Record<string, string>>();
  private readonly policies = new Map<string, PolicyState>();
  private readonly policiesByNamespace = new Map<string, Set<string>>();
  private readonly rules = new Map<string, RuleState>();
  /**
   * Peers are worked out when asked for, not on every event: with 150,000
   * pods and 10,000 policies a node asks about the few rules that apply to
   * its own pods. A pod event bumps its namespace's version, a namespace event
   * the namespaces' version; a rule's peers are kept while the versions it
   * read are unchanged.
   */
  private readonly namespaceVersions = new Map<string, number>();
  private namespacesVersion = 0;
  private podsVersion = 0;
  /**
   * The namespace of each pod event, the latest last: event `podsVersion`
   * is `touched[podsVersion - touchedBase - 1]`. A rule read at an earlier
   * version looks at the namespaces touched since instead of comparing the
   * version of each namespace it reads (thousands, for a namespaceSelector).
   */
  private touched: string[] = [];
  private touchedBase = 0;
  /** Bumped whenever a rule's members change: see MemberCache.generation. */
  private generations = 0;
  /** What the policies of a namespace come to for its pods, kept until they change. */
  private readonly podPolicies = new PodPolicies(this.policies, this.policiesByNamespace);
  private readonly rangeCache = new Map<string, { generation: number; ranges: AddressRanges }>();
  private readonly targetCache = new Map<
    string,
    {
      names: string;
      /** The model's versions at the last answer (`out`). */
      namespacesVersion: number;
      podsVersion: number;
      byNamespace: Map<string, { version: string; targets: NamedTarget[] }>;
      out: NamedTarget[][];
    }
  >();
  private readonly selectedNamespaces = new WeakMap<
    LabelSelector,
    { version: number; names: string[]; set: Set<string> }
  >();

  // --- inputs ---

  /**
   * Adds or replaces a pod; answers false when the model already had it as
   * it is (an event about its annotations, its conditions, a resync): then
   * nothing changes, its policy worked out included.
   */
  upsertPod(pod: PolicyPod): boolean {
    const inNs = this.podsByNamespace.get(pod.namespace) ?? new Map<string, PolicyPod>();
    this.podsByNamespace.set(pod.namespace, inNs);
    const old = inNs.get(pod.name);
    if (old && samePod(old, pod)) return false;
    const namedPorts = this.portLists.share(pod.namedPorts);
    if (old) this.portLists.release(old.namedPorts);
    inNs.set(pod.name, namedPorts === pod.namedPorts ? pod : { ...pod, namedPorts });
    this.touchNamespace(pod.namespace);
    return true;
  }

  deletePod(namespace: string, name: string): void {
    const inNs = this.podsByNamespace.get(namespace);
    const old = inNs?.get(name);
    if (!old) return;
    inNs?.delete(name);
    this.portLists.release(old.namedPorts);
    this.touchNamespace(namespace);
  }

  upsertNamespace(ns: PolicyNamespace): void {
    this.namespaces.set(ns.name, ns.labels);
    this.namespacesVersion++;
  }

  deleteNamespace(name: string): void {
    if (this.namespaces.delete(name)) this.namespacesVersion++;
  }

  /**
   * Adds or replaces a policy; answers why it cannot be applied as written, or
   * undefined. One that cannot still isolates the pods it selects.
   */
  upsertPolicy(policy: NetworkPolicy): PolicyProblem | undefined {
    const key = podKey(policy.namespace, policy.name);
    this.deletePolicy(policy.namespace, policy.name);
    const problem = policyProblem(policy);
    // An empty list reads as an absent one, as the API server's defaulting has it.
    const types = (policy.policyTypes?.length ? policy.policyTypes : undefined) ?? [
      "Ingress",
      ...((policy.egress?.length ?? 0) > 0 ? (["Egress"] as const) : []),
    ];
    // One that cannot be applied still isolates what it selects, allowing nothing of its own:
    // failing closed keeps a typo from opening pods its author meant to protect.
    const rules = (direction: Direction) => (problem ? [] : this.rulesOf(policy, direction));
    const state: PolicyState = {
      key,
      policy,
      selectorText: JSON.stringify(policy.podSelector ?? {}),
      ingress: types.includes("Ingress") ? rules("ingress") : undefined,
      egress: types.includes("Egress") ? rules("egress") : undefined,
    };
    this.policies.set(key, state);
    const inNs = this.policiesByNamespace.get(policy.namespace) ?? new Set<string>();
    this.policiesByNamespace.set(policy.namespace, inNs);
    inNs.add(key);
    this.podPolicies.changed(policy.namespace);
    return problem ? { policy: key, reason: problem } : undefined;
  }

  deletePolicy(namespace: string, name: string): void {
    const key = podKey(namespace, name);
    const state = this.policies.get(key);
    if (!state) return;
    for (const r of [...(state.ingress ?? []), ...(state.egress ?? [])]) {
      this.rules.delete(r.id);
      this.rangeCache.delete(r.id);
      this.targetCache.delete(r.id);
    }
    this.policies.delete(key);
    const inNs = this.policiesByNamespace.get(namespace);
    inNs?.delete(key);
    if (inNs?.size === 0) this.policiesByNamespace.delete(namespace);
    this.podPolicies.changed(namespace);
  }

  // --- questions ---

  pod(namespace: string, name: string): PolicyPod | undefined {
    return this.podsByNamespace.get(namespace)?.get(name);
  }

  /** A policy as the model holds it. */
  policy(namespace: string, name: string): NetworkPolicy | undefined {
    return this.policies.get(podKey(namespace, name))?.policy;
  }

  /** Whether any policy exists in the namespace (a pod there whose labels are unknown may be isolated). */
  hasPolicies(namespace: string): boolean {
    return (this.policiesByNamespace.get(namespace)?.size ?? 0) > 0;
  }

  /**
   * What `pod` may receive and send, by the policies of its namespace that
   * select it. Kept per pod object (an upsert makes a new one) until a policy
   * changes: a sync asks it of every pod of the node.
   */
  podPolicy(pod: PolicyPod): PodPolicy {
    return this.podPolicies.of(pod);
  }

  /** The addresses a rule's peers come to (pods and ipBlocks); empty for an any-peer rule. */
  peerAddresses(ruleId: string): AddressRanges {
    const rule = this.rules.get(ruleId);
    if (!rule?.peers) return { v4: [], v6: [] };
    const members = this.members(rule);
    const cached = this.rangeCache.get(ruleId);
    if (cached?.generation === members.generation) return cached.ranges;
    const ranges = addressRanges(
      memberPods(members).flatMap((p) => p.ips),
      rule.blocks,
    );
    this.rangeCache.set(ruleId, { generation: members.generation, ranges });
    return ranges;
  }

  /**
   * A rule's pod peers' addresses, a chunk per namespace: between two calls,
   * only the chunks of namespaces whose member pods changed are new arrays,
   * so a caller keeping the last answer finds what changed without comparing
   * every address. Empty for a rule without pod peers.
   */
  peerPodAddresses(ruleId: string): AddressChunks {
    const rule = this.rules.get(ruleId);
    if (!rule?.podPeers) return { v4: [], v6: [] };
    const members = this.members(rule);
    // The same answer while the members are: a sync for an unrelated event makes no new arrays.
    if (rule.chunks?.generation === members.generation) return rule.chunks.chunks;
    const v4: string[][] = [];
    const v6: string[][] = [];
    for (const bucket of members.byNamespace.values()) {
      if (!bucket.v4 || !bucket.v6) {
        const all = bucket.pods.flatMap((p) => p.ips);
        bucket.v4 = all.filter((ip) => !ip.includes(":"));
        bucket.v6 = all.filter((ip) => ip.includes(":"));
      }
      if (bucket.v4.length) v4.push(bucket.v4);
      if (bucket.v6.length) v6.push(bucket.v6);
    }
    rule.chunks = { generation: members.generation, chunks: { v4, v6 } };
    return rule.chunks.chunks;
  }

  /** A rule's ipBlocks less their excepts; fixed for the rule's life. */
  peerBlocks(ruleId: string): AddressRanges {
    const rule = this.rules.get(ruleId);
    if (!rule) return { v4: [], v6: [] };
    rule.blockRanges ??= addressRanges([], rule.blocks);
    return rule.blockRanges;
  }

  /** Whether the rule has pod peers (a podSelector or namespaceSelector peer). */
  hasPodPeers(ruleId: string): boolean {
    return this.rules.get(ruleId)?.podPeers ?? false;
  }

  /**
   * The destinations an egress rule's named ports resolve to: each peer pod
   * (or, for a rule without peers, every pod; for ipBlocks, the pods inside)
   * that has a container port of that name and protocol.
   */
  namedTargets(ruleId: string, names: readonly PortName[]): NamedTarget[] {
    return this.namedTargetChunks(ruleId, names).flat();
  }

  /**
   * `namedTargets` in chunks, one a namespace: as with `peerPodAddresses`, a
   * chunk that is the same array as before has not changed, and only the
   * namespaces whose pods (or labels) changed are read again.
   */
  namedTargetChunks(ruleId: string, names: readonly PortName[]): ReadonlyArray<NamedTarget[]> {
    const rule = this.rules.get(ruleId);
    if (!rule || names.length === 0) return [];
    const key = names.map((n) => `${n.protocol}/${n.name}`).join(",");
    let cache = this.targetCache.get(ruleId);
    if (cache?.names !== key) {
      cache = {
        names: key,
        namespacesVersion: -1,
        podsVersion: -1,
        byNamespace: new Map(),
        out: [],
      };
      this.targetCache.set(ruleId, cache);
    }
    if (
      cache.namespacesVersion === this.namespacesVersion &&
      cache.podsVersion === this.podsVersion
    )
      return cache.out;
    const members = rule.podPeers ? this.members(rule).byNamespace : undefined;
    const blocks = rule.blocks.length > 0 ? this.peerBlocks(ruleId) : undefined;
    // Without peers every pod is one; with an ipBlock, any pod inside it.
    const wide = !rule.peers || blocks !== undefined;
    const namespaces = wide ? [...this.podsByNamespace.keys()] : [...(members?.keys() ?? [])];
    // Since the last answer, with the same namespaces: only those pod events touched are read again.
    const touched =
      cache.namespacesVersion === this.namespacesVersion
        ? this.touchedSince(cache.podsVersion)
        : undefined;
    const next = new Map<string, { version: string; targets: NamedTarget[] }>();
    const out: NamedTarget[][] = [];
    for (const ns of namespaces) {
      let entry = cache.byNamespace.get(ns);
      const version = entry && touched && !touched.has(ns) ? entry.version : this.versionOf(ns);
      if (entry?.version !== version) {
        const candidates = new Set<PolicyPod>(members?.get(ns)?.pods ?? []);
        for (const p of this.podsByNamespace.get(ns)?.values() ?? []) {
          if (!rule.peers || (blocks && p.ips.some((ip) => rangesContain(blocks, ip))))
            candidates.add(p);
        }
        entry = { version, targets: targetsOf(candidates, names) };
      }
      next.set(ns, entry);
      if (entry.targets.length > 0) out.push(entry.targets);
    }
    Object.assign(cache, {
      namespacesVersion: this.namespacesVersion,
      podsVersion: this.podsVersion,
      byNamespace: next,
      out,
    });
    return out;
  }

  /**
   * Whether `pod` may, in `direction`, exchange a connection's first packet
   * with `peerIp` to destination port `port`: the question a policy change
   * asks of every tracked connection, so that those no longer allowed are cut.
   */
  allows(
    pod: PolicyPod,
    direction: Direction,
    peerIp: string,
    protocol: Protocol,
    port: number,
  ): boolean {
    return this.allowedBy(this.podPolicy(pod), direction, peerIp, protocol, port);
  }

  /** `allows`, for a pod whose policy is already worked out. */
  allowedBy(
    policy: PodPolicy,
    direction: Direction,
    peerIp: string,
    protocol: Protocol,
    port: number,
  ): boolean {
    const rules = policy[direction];
    if (!rules) return true;
    return rules.some((r) => {
      if (!r.anyPeer && !rangesContain(this.peerAddresses(r.id), peerIp)) return false;
      if (r.ports === "any") return true;
      if (r.ports.some((p) => portMatches(p, protocol, port))) return true;
      return this.namedTargets(r.id, r.portNames).some(
        (t) => t.ip === peerIp && t.protocol === protocol && t.port === port,
      );
    });
  }

  // --- insides ---

  private touchNamespace(namespace: string): void {
    this.namespaceVersions.set(namespace, (this.namespaceVersions.get(namespace) ?? 0) + 1);
    this.podsVersion++;
    this.touched.push(namespace);
    // Bounded: a rule read before the oldest kept event compares every namespace it reads.
    if (this.touched.length > 65_536) {
      this.touchedBase += 32_768;
      this.touched = this.touched.slice(32_768);
    }
  }

  /** The namespaces pod events touched since `podsVersion`; undefined when the log no longer reaches back. */
  private touchedSince(podsVersion: number): Set<string> | undefined {
    const since = podsVersion - this.touchedBase;
    return since >= 0 ? new Set(this.touched.slice(since)) : undefined;
  }

  private rulesOf(policy: NetworkPolicy, direction: Direction): RuleState[] {
    const key = podKey(policy.namespace, policy.name);
    return (policy[direction] ?? []).map((r, i) => {
      const peers = r.peers && r.peers.length > 0 ? r.peers : undefined;
      const state: RuleState = {
        id: `${key}/${direction}/${i}`,
        namespace: policy.namespace,
        peers,
        ports: r.ports && r.ports.length > 0 ? r.ports : undefined,
        blocks: (peers ?? []).flatMap((p) => (p.ipBlock ? [p.ipBlock] : [])),
        podPeers: (peers ?? []).some((p) => !p.ipBlock),
      };
      this.rules.set(state.id, state);
      return state;
    });
  }

  /** The namespaces whose pods a peer may pick; kept per selector until a namespace changes. */
  private peerNamespaces(peer: PolicyPeer, policyNamespace: string): string[] {
    const selector = peer.namespaceSelector;
    if (!selector) return [policyNamespace];
    return this.selectedBy(selector).names;
  }

  private selectedBy(selector: LabelSelector): { names: string[]; set: Set<string> } {
    const cached = this.selectedNamespaces.get(selector);
    if (cached?.version === this.namespacesVersion) return cached;
    const names = [...this.namespaces]
      .filter(([, labels]) => selectorMatches(selector, labels))
      .map(([name]) => name);
    const entry = { version: this.namespacesVersion, names, set: new Set(names) };
    this.selectedNamespaces.set(selector, entry);
    return entry;
  }

  /** The rule's pod peers, worked out again only for the namespaces that changed. */
  private members(rule: RuleState): MemberCache {
    const m = rule.members;
    if (m?.namespacesVersion === this.namespacesVersion) {
      if (m.podsVersion === this.podsVersion) return m;
      const touched =
        this.podsVersion - m.podsVersion <= m.byNamespace.size
          ? this.touchedSince(m.podsVersion)
          : undefined;
      if (touched) {
        // The namespaces read are the same; only pod events since matter.
        const changed = [...touched].filter((ns) => m.byNamespace.has(ns));
        for (const ns of changed) m.byNamespace.set(ns, this.bucket(rule, ns));
        if (changed.length > 0) m.generation = ++this.generations;
        m.podsVersion = this.podsVersion;
        return m;
      }
    }
    const podPeers = (rule.peers ?? []).filter((p) => !p.ipBlock);
    const namespaces = this.readNamespaces(podPeers, rule.namespace);
    // Only the namespaces that changed are read again: a pod event costs its namespace's pods.
    const before = m?.byNamespace;
    const byNamespace = new Map<string, MemberBucket>();
    let replaced = before?.size !== namespaces.length;
    for (const ns of namespaces) {
      const kept = before?.get(ns);
      if (kept?.version === this.versionOf(ns)) byNamespace.set(ns, kept);
      else {
        byNamespace.set(ns, this.bucket(rule, ns));
        replaced = true;
      }
    }
    rule.members = {
      namespacesVersion: this.namespacesVersion,
      podsVersion: this.podsVersion,
      generation: replaced || !m ? ++this.generations : m.generation,
      byNamespace,
    };
    return rule.members;
  }

  private versionOf(ns: string): string {
    return `${this.namespacesVersion}.${this.namespaceVersions.get(ns) ?? 0}`;
  }

  /** The rule's pod peers in one namespace, as the model has them now. */
  private bucket(rule: RuleState, ns: string): MemberBucket {
    const peers = (rule.peers ?? []).filter(
      (p) =>
        !p.ipBlock &&
        (p.namespaceSelector
          ? this.selectedBy(p.namespaceSelector).set.has(ns)
          : ns === rule.namespace),
    );
    const pods: PolicyPod[] = [];
    for (const pod of this.podsByNamespace.get(ns)?.values() ?? []) {
      if (!pod.hostNetwork && peers.some((p) => selectorMatches(p.podSelector, pod.labels)))
        pods.push(pod);
    }
    return { version: this.versionOf(ns), pods };
  }

  /** Every namespace the rule's pod peers read, in a stable order. */
  private readNamespaces(podPeers: PolicyPeer[], policyNamespace: string): string[] {
    if (podPeers.length === 1)
      return this.peerNamespaces(podPeers[0] as PolicyPeer, policyNamespace);
    const all = new Set<string>();
    for (const peer of podPeers)
      for (const ns of this.peerNamespaces(peer, policyNamespace)) all.add(ns);
    return [...all].sort();
  }
}
