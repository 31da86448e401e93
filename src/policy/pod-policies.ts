/**
 * What the policies of a namespace come to for each of its pods (the model's
 * podPolicy), kept until a policy there changes. Policies are grouped by
 * podSelector: a pod is matched against each selector once, however many
 * policies share it, and pods matched by the same selectors with the same
 * named ports get one answer, which names that selection.
 */
import type { PodPolicy } from "./answers.js";
import { podPortsKey, podRule, type RuleState } from "./rules.js";
import { selectorMatches } from "./selector.js";
import type { LabelSelector, NetworkPolicy, PolicyPod } from "./types.js";

/** A policy as the model holds it. */
export interface PolicyState {
  key: string;
  policy: NetworkPolicy;
  /** Its podSelector as JSON: the name of its group (SelectorGroup). */
  selectorText: string;
  ingress: RuleState[] | undefined;
  egress: RuleState[] | undefined;
}

/** What podPolicy kept for a pod: its answer, and which selectors matched it (see there). */
interface KeptPodPolicy {
  version: number;
  policy: PodPolicy;
  /** The namespace's selectors then (NamespacePolicies.signature). */
  signature: string;
  /** The pod's selection then (selectionOf). */
  selection: string | undefined;
}

/** A namespace's policies at one policy version: see namespacePolicies. */
interface NamespacePolicies {
  version: number;
  groups: SelectorGroup[];
  /** The groups' selectors, in order: while they stay, so does which of them match a pod. */
  signature: string;
  bySelection: Map<string, PodPolicy>;
}

/** A namespace's policies that share one podSelector, in key order. */
interface SelectorGroup {
  selector: LabelSelector | undefined;
  /** The selector as JSON: the group's name in a pod's selection. */
  text: string;
  keys: string[];
}

export class PodPolicies {
  /** Bumped by every policy event; the stamp of each namespace's last one. */
  private stamp = 0;
  /**
   * Each namespace's policy version (absent: none): what was kept for a pod
   * of it is worked out again after a policy event there, not elsewhere.
   */
  private readonly versions = new Map<string, number>();
  /**
   * Per namespace with policies, at its version: its selector groups, and one
   * PodPolicy per selection.
   */
  private readonly namespacePolicies = new Map<string, NamespacePolicies>();
  private readonly kept = new WeakMap<PolicyPod, KeptPodPolicy>();

  /** The model's policies, by key and by namespace (read, never written, here). */
  constructor(
    private readonly policies: ReadonlyMap<string, PolicyState>,
    private readonly byNamespace: ReadonlyMap<string, ReadonlySet<string>>,
  ) {}

  /** A policy of `namespace` came, changed or went. */
  changed(namespace: string): void {
    // Version 0 is "no policy" again: what pods kept then is right again, and nothing is kept.
    if ((this.byNamespace.get(namespace)?.size ?? 0) === 0) this.versions.delete(namespace);
    else this.versions.set(namespace, ++this.stamp);
  }

  /**
   * What `pod` may receive and send, by the policies of its namespace that
   * select it. Kept per pod object (an upsert makes a new one) until a policy
   * changes: a sync asks it of every pod of the node.
   */
  of(pod: PolicyPod): PodPolicy {
    const version = this.versions.get(pod.namespace) ?? 0;
    const cached = this.kept.get(pod);
    if (cached?.version === version) return cached.policy;
    if (pod.hostNetwork) return {};
    const ns = this.namespacePoliciesOf(pod.namespace);
    // A policy event that kept the namespace's selectors (a port, a peer changed) keeps
    // which of them match the pod: only its answer is looked up again.
    const selection =
      cached?.signature === ns.signature ? cached.selection : this.selectionOf(pod, ns);
    const policy = selection === undefined ? {} : this.policyFor(pod, ns, selection);
    // The answer's own selection: one string for all its pods, not one each.
    this.kept.set(pod, {
      version,
      policy,
      signature: ns.signature,
      selection: policy.selection,
    });
    return policy;
  }

  /** A namespace's policies as namespacePolicies keeps them, made again after a policy event. */
  private namespacePoliciesOf(namespace: string) {
    const version = this.versions.get(namespace) ?? 0;
    const cached = this.namespacePolicies.get(namespace);
    if (cached?.version === version) return cached;
    const keys = [...(this.byNamespace.get(namespace) ?? [])].sort();
    const bySelector = new Map<string, SelectorGroup>();
    for (const key of keys) {
      const state = this.policies.get(key) as PolicyState;
      const text = state.selectorText;
      const group = bySelector.get(text) ?? { selector: state.policy.podSelector, text, keys: [] };
      bySelector.set(text, group);
      group.keys.push(key);
    }
    const groups = [...bySelector.values()];
    const signature = groups.map((g) => g.text).join("\n");
    const fresh: NamespacePolicies = {
      version,
      groups,
      // The same string as before when the selectors are the same: compared per pod.
      signature: cached?.signature === signature ? cached.signature : signature,
      bySelection: new Map(),
    };
    // Only namespaces with policies are kept: one a CI run made and deleted leaves nothing.
    if (keys.length > 0) this.namespacePolicies.set(namespace, fresh);
    else this.namespacePolicies.delete(namespace);
    return fresh;
  }

  /** Which of the namespace's selector groups match the pod, with its named ports, as a key; undefined: none. */
  private selectionOf(pod: PolicyPod, ns: NamespacePolicies): string | undefined {
    const matched = ns.groups.filter((g) => selectorMatches(g.selector, pod.labels));
    if (matched.length === 0) return undefined;
    return [pod.namespace, podPortsKey(pod), ...matched.map((g) => g.text)].join("\n");
  }

  /** The rules of the policies of `selection`, one answer for every pod of it. */
  private policyFor(pod: PolicyPod, ns: NamespacePolicies, selection: string): PodPolicy {
    const known = ns.bySelection.get(selection);
    if (known) return known;
    const texts = new Set(selection.split("\n").slice(2));
    const matched = ns.groups.filter((g) => texts.has(g.text));
    // The policies in key order, as one group alone has them.
    const selected =
      matched.length === 1
        ? (matched[0] as SelectorGroup).keys
        : matched.flatMap((g) => g.keys).sort();
    const portsKey = podPortsKey(pod);
    const out: PodPolicy = { selection };
    for (const key of selected) {
      const state = this.policies.get(key) as PolicyState;
      if (state.ingress) {
        out.ingress ??= [];
        for (const r of state.ingress) out.ingress.push(podRule(r, "ingress", pod, portsKey));
      }
      if (state.egress) {
        out.egress ??= [];
        for (const r of state.egress) out.egress.push(podRule(r, "egress", pod, portsKey));
      }
    }
    ns.bySelection.set(selection, out);
    return out;
  }
}
