/**
 * Which NetworkPolicy rules an event can change the peers of, so that a pod or
 * namespace event re-reads a few rules, not every rule of the cluster. Rules
 * are filed by their pod peers as written (many rules of a cluster share them:
 * the same selectors in many policies), each peer set under the namespaces it
 * reaches (the policy's own, or those its namespaceSelector matches now); a pod
 * event there concerns a peer set when the pod's labels, before or after,
 * match one of its podSelectors. A rule whose named egress ports resolve on
 * any pod (no peers, or an ipBlock) is "wide": every pod event concerns it.
 * ipBlocks alone never depend on pods.
 *
 * Rule ids are the policy model's: "<namespace>/<policy>/<direction>/<index>".
 */
import { selectorMatches } from "../../policy/selector.js";
import type { NetworkPolicy, PolicyPeer, PolicyRule } from "../../policy/types.js";

/** One set of pod peers as written, the rules that have it, and where it reaches. */
interface PeerSet {
  policyNamespace: string;
  podPeers: PolicyPeer[];
  namespaces: string[];
  rules: Set<string>;
  /** Some peer selects namespaces by label: a namespace's labels move it. */
  bySelector: boolean;
}

export class PolicyRuleIndex {
  private readonly policies = new Map<string, NetworkPolicy>();
  private readonly namespaceLabels = new Map<string, Record<string, string>>();
  /** Each filed rule's peer set key. */
  private readonly ruleSet = new Map<string, string>();
  private readonly sets = new Map<string, PeerSet>();
  private readonly byNamespace = new Map<string, Set<string>>();
  private readonly wide = new Set<string>();

  setPolicy(policy: NetworkPolicy): void {
    this.policies.set(`${policy.namespace}/${policy.name}`, policy);
  }

  deletePolicy(namespace: string, name: string): void {
    this.policies.delete(`${namespace}/${name}`);
  }

  /** Files a rule (again: its policy may have changed). */
  add(ruleId: string): void {
    this.remove(ruleId);
    const [namespace, name, direction, index] = ruleId.split("/") as [
      string,
      string,
      string,
      string,
    ];
    const policy = this.policies.get(`${namespace}/${name}`);
    const rule: PolicyRule | undefined = (
      direction === "egress" ? policy?.egress : policy?.ingress
    )?.[Number(index)];
    if (!rule) return;
    const peers = rule.peers ?? [];
    const podPeers = peers.filter((p) => !p.ipBlock);
    const namedPorts = (rule.ports ?? []).some((p) => typeof p.port === "string");
    if (
      direction === "egress" &&
      namedPorts &&
      (peers.length === 0 || podPeers.length < peers.length)
    )
      this.wide.add(ruleId);
    if (podPeers.length === 0) return;
    // A peer without namespaceSelector means the policy's namespace: part of the key.
    const key = JSON.stringify(
      podPeers.map((p) => (p.namespaceSelector ? p : { ...p, namespace })),
    );
    this.ruleSet.set(ruleId, key);
    const set = this.sets.get(key);
    if (set) {
      set.rules.add(ruleId);
      return;
    }
    const bySelector = podPeers.some((p) => p.namespaceSelector);
    const created: PeerSet = {
      policyNamespace: namespace,
      podPeers,
      namespaces: [],
      rules: new Set([ruleId]),
      bySelector,
    };
    this.sets.set(key, created);
    this.file(key, created);
  }

  remove(ruleId: string): void {
    this.wide.delete(ruleId);
    const key = this.ruleSet.get(ruleId);
    if (key === undefined) return;
    this.ruleSet.delete(ruleId);
    const set = this.sets.get(key) as PeerSet;
    set.rules.delete(ruleId);
    if (set.rules.size > 0) return;
    this.unfile(key, set);
    this.sets.delete(key);
  }

  /** A namespace's labels, new or changed (undefined: deleted); the rules whose reach moved. */
  setNamespace(name: string, labels: Record<string, string> | undefined): string[] {
    if (labels) this.namespaceLabels.set(name, labels);
    else this.namespaceLabels.delete(name);
    const moved: string[] = [];
    for (const [key, set] of this.sets) {
      if (!set.bySelector) continue;
      const before = set.namespaces.includes(name);
      this.unfile(key, set);
      this.file(key, set);
      if (before !== set.namespaces.includes(name)) moved.push(...set.rules);
    }
    return moved;
  }

  /** The filed rules a pod of `namespace` may be a peer or target of, with either set of labels. */
  podCandidates(
    namespace: string,
    before: Record<string, string> | undefined,
    after: Record<string, string> | undefined,
  ): string[] {
    const out = new Set(this.wide);
    for (const key of this.byNamespace.get(namespace) ?? []) {
      const set = this.sets.get(key) as PeerSet;
      const concerned = set.podPeers.some(
        (p) =>
          this.peerReaches(p, set.policyNamespace, namespace) &&
          ((before && selectorMatches(p.podSelector, before)) ||
            (after && selectorMatches(p.podSelector, after))),
      );
      if (concerned) for (const id of set.rules) out.add(id);
    }
    return [...out];
  }

  private file(key: string, set: PeerSet): void {
    set.namespaces = this.reach(set.policyNamespace, set.podPeers);
    for (const ns of set.namespaces) {
      let keys = this.byNamespace.get(ns);
      if (!keys) {
        keys = new Set();
        this.byNamespace.set(ns, keys);
      }
      keys.add(key);
    }
  }

  private unfile(key: string, set: PeerSet): void {
    for (const ns of set.namespaces) {
      const keys = this.byNamespace.get(ns);
      keys?.delete(key);
      if (keys?.size === 0) this.byNamespace.delete(ns);
    }
    set.namespaces = [];
  }

  private peerReaches(peer: PolicyPeer, policyNamespace: string, namespace: string): boolean {
    if (!peer.namespaceSelector) return namespace === policyNamespace;
    const labels = this.namespaceLabels.get(namespace);
    return labels !== undefined && selectorMatches(peer.namespaceSelector, labels);
  }

  private reach(policyNamespace: string, podPeers: PolicyPeer[]): string[] {
    const out = new Set<string>();
    for (const p of podPeers) {
      if (!p.namespaceSelector) out.add(policyNamespace);
      else
        for (const [ns, labels] of this.namespaceLabels)
          if (selectorMatches(p.namespaceSelector, labels)) out.add(ns);
    }
    return [...out];
  }
}
