/**
 * Which NetworkPolicy rules an event can change the peers of, so that a pod or
 * namespace event re-reads a few rules, not every rule of the cluster. A rule
 * is filed under the namespaces its pod peers reach (its own namespace, or
 * those its namespaceSelector matches now); a pod event there concerns it when
 * the pod's labels, before or after, match the peer's podSelector. A rule
 * whose named egress ports resolve on any pod (no peers, or an ipBlock) is
 * "wide": every pod event concerns it. ipBlocks alone never depend on pods.
 *
 * Rule ids are the policy model's: "<namespace>/<policy>/<direction>/<index>".
 */
import { selectorMatches } from "../../policy/selector.js";
import type { NetworkPolicy, PolicyPeer, PolicyRule } from "../../policy/types.js";

interface Filed {
  policyNamespace: string;
  /** The rule's pod peers (no ipBlock). */
  podPeers: PolicyPeer[];
  namespaces: string[];
}

export class PolicyRuleIndex {
  private readonly policies = new Map<string, NetworkPolicy>();
  private readonly namespaceLabels = new Map<string, Record<string, string>>();
  private readonly filed = new Map<string, Filed>();
  private readonly byNamespace = new Map<string, Set<string>>();
  private readonly wide = new Set<string>();
  /** Rules with a namespaceSelector peer: a namespace's labels move them. */
  private readonly bySelector = new Set<string>();

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
    if (podPeers.some((p) => p.namespaceSelector)) this.bySelector.add(ruleId);
    const filed = {
      policyNamespace: namespace,
      podPeers,
      namespaces: this.reach(namespace, podPeers),
    };
    this.filed.set(ruleId, filed);
    for (const ns of filed.namespaces) {
      let set = this.byNamespace.get(ns);
      if (!set) {
        set = new Set();
        this.byNamespace.set(ns, set);
      }
      set.add(ruleId);
    }
  }

  remove(ruleId: string): void {
    const filed = this.filed.get(ruleId);
    if (!filed) return;
    this.filed.delete(ruleId);
    this.wide.delete(ruleId);
    this.bySelector.delete(ruleId);
    for (const ns of filed.namespaces) {
      const set = this.byNamespace.get(ns);
      set?.delete(ruleId);
      if (set?.size === 0) this.byNamespace.delete(ns);
    }
  }

  /** A namespace's labels, new or changed (undefined: deleted); the rules whose reach moved. */
  setNamespace(name: string, labels: Record<string, string> | undefined): string[] {
    if (labels) this.namespaceLabels.set(name, labels);
    else this.namespaceLabels.delete(name);
    const moved: string[] = [];
    for (const id of [...this.bySelector]) {
      const before = this.filed.get(id)?.namespaces.includes(name) ?? false;
      this.add(id);
      const after = this.filed.get(id)?.namespaces.includes(name) ?? false;
      if (before !== after) moved.push(id);
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
    for (const id of this.byNamespace.get(namespace) ?? []) {
      const filed = this.filed.get(id) as Filed;
      const concerned = filed.podPeers.some(
        (p) =>
          this.peerReaches(p, filed.policyNamespace, namespace) &&
          ((before && selectorMatches(p.podSelector, before)) ||
            (after && selectorMatches(p.podSelector, after))),
      );
      if (concerned) out.add(id);
    }
    return [...out];
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
