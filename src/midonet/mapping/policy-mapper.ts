/**
 * NetworkPolicy's share of the cluster mapping, kept up to date one event at a
 * time: the policy model fed with Pods, Namespaces and NetworkPolicies, and
 * the chains network-policy.ts maps from it held in the cluster's desired
 * state. What an event changes:
 *
 * - a policy: the filters of the pods of its namespace (selection and rules);
 * - a pod: its own filters, and the peer and named-port chains of rules it is
 *   (or was) a peer of;
 * - a namespace: the peer chains of rules selecting namespaces by label.
 *
 * An event re-reads only the rules it can concern (policy-rule-index.ts), and
 * re-maps a rule's shared chains only when what the model answers for it is a
 * new object (the model keeps an answer while its inputs stand), so an event
 * costs the rules it touches, not every rule of the cluster. A rule's chains
 * exist while some pod uses the rule.
 *
 * Whether a pod's port carries filters (`filtersOf`) is part of the pod's own
 * mapping (its Port); the events answer which pods that changed for, so that
 * the cluster mapper re-maps their ports.
 */
import type { AddressRanges } from "../../policy/addresses.js";
import type { NamedTarget, PodRule } from "../../policy/answers.js";
import {
  namespaceFromApi,
  networkPolicyFromApi,
  podFromApi,
  podPlacement,
} from "../../policy/from-api.js";
import { PolicyModel } from "../../policy/model.js";
import type { Direction, PolicyPod } from "../../policy/types.js";
import type { ResolvedConfig } from "./config.js";
import type { DesiredState } from "./desired-state.js";
import { appendChanges, noChanges, type ResourceChanges, sortChanges } from "./diff.js";
import { podPolicyOwner, policyRuleOwner } from "./model.js";
import { mapPodPolicy, mapPolicyRule, podPortFilters } from "./network-policy.js";
import { PolicyRuleIndex } from "./policy-rule-index.js";

/** What a rule's shared chains were last mapped from: the model's answers, by identity. */
interface RuleInputs {
  direction: Direction;
  rule: PodRule;
  peers: AddressRanges | undefined;
  targets: ReadonlyArray<readonly NamedTarget[]> | undefined;
}

export type PortFilters = { inboundFilterId?: string; outboundFilterId?: string };

/** An event's mapping changes, and the pods whose port filters it turned on or off. */
export interface PolicyChanges {
  changes: ResourceChanges;
  ports: string[];
}

const key = (namespace: string, name: string) => `${namespace}/${name}`;

export class PolicyMapper {
  readonly model = new PolicyModel();
  private readonly index = new PolicyRuleIndex();
  /** The pods the model holds, by key, and the keys of each namespace. */
  private readonly pods = new Map<string, PolicyPod>();
  private readonly podsByNamespace = new Map<string, Set<string>>();
  /** Each pod's rules (ids), and each rule's users and inputs. */
  private readonly podRules = new Map<string, string[]>();
  private readonly ruleUsers = new Map<string, number>();
  private readonly rules = new Map<string, RuleInputs>();
  /** Rules whose last user went during the current event. */
  private readonly unused = new Set<string>();
  /** Pods whose ports carry filters. */
  private readonly filtered = new Set<string>();
  /** Pods with no port (no node yet, or finished): peers, but nothing to filter. */
  private readonly portless = new Set<string>();

  constructor(
    private readonly state: DesiredState,
    private readonly config: ResolvedConfig,
  ) {}

  /** The filters the pod's port carries now. */
  filtersOf(namespace: string, name: string): PortFilters {
    const k = key(namespace, name);
    const pod = this.portless.has(k) ? undefined : this.pods.get(k);
    return pod ? podPortFilters(this.model, pod, this.config) : {};
  }

  /**
   * A first fill: everything into the model, then each pod's filters and the
   * rules they use mapped once (no event's checks, which a fill would repeat
   * for every pod).
   */
  load(
    namespaces: readonly unknown[],
    policies: readonly unknown[],
    pods: readonly unknown[],
  ): void {
    for (const o of namespaces) this.setNamespace(o);
    for (const o of policies) this.setPolicy(o);
    for (const o of pods) this.model.upsertPod(this.pods.get(this.setPod(o).key) as PolicyPod);
    for (const k of this.pods.keys()) this.remapPod(k, []);
    this.dropUnused();
  }

  /** A Pod from the API; finished ones keep no address (it is someone else's soon). */
  upsertPod(o: unknown): PolicyChanges {
    const { key: k, before } = this.setPod(o);
    const pod = this.pods.get(k) as PolicyPod;
    if (!this.model.upsertPod(pod)) return { changes: noChanges(), ports: [] };
    return this.remap([k], this.index.podCandidates(pod.namespace, before?.labels, pod.labels));
  }

  deletePod(namespace: string, name: string): PolicyChanges {
    const k = key(namespace, name);
    const before = this.pods.get(k);
    if (!before) return { changes: noChanges(), ports: [] };
    this.pods.delete(k);
    this.portless.delete(k);
    const inNs = this.podsByNamespace.get(namespace);
    inNs?.delete(k);
    if (inNs?.size === 0) this.podsByNamespace.delete(namespace);
    this.model.deletePod(namespace, name);
    return this.remap([k], this.index.podCandidates(namespace, before.labels, undefined));
  }

  upsertPolicy(o: unknown): PolicyChanges {
    const namespace = this.setPolicy(o);
    return this.remap(this.podsOf(namespace), []);
  }

  deletePolicy(namespace: string, name: string): PolicyChanges {
    this.model.deletePolicy(namespace, name);
    this.index.deletePolicy(namespace, name);
    return this.remap(this.podsOf(namespace), []);
  }

  upsertNamespace(o: unknown): PolicyChanges {
    return this.remap([], this.setNamespace(o));
  }

  deleteNamespace(name: string): PolicyChanges {
    this.model.deleteNamespace(name);
    return this.remap([], this.index.setNamespace(name, undefined));
  }

  /** The pod into the mapper's own indexes (the caller feeds the model); its key and what it was. */
  private setPod(o: unknown): { key: string; before: PolicyPod | undefined } {
    const pod = podFromApi(o);
    const placement = podPlacement(o);
    if (placement.finished) pod.ips = [];
    const k = key(pod.namespace, pod.name);
    if (placement.finished || !placement.nodeName) this.portless.add(k);
    else this.portless.delete(k);
    const before = this.pods.get(k);
    this.pods.set(k, pod);
    let inNs = this.podsByNamespace.get(pod.namespace);
    if (!inNs) {
      inNs = new Set();
      this.podsByNamespace.set(pod.namespace, inNs);
    }
    inNs.add(k);
    return { key: k, before };
  }

  /** The policy into the model and the index; its namespace. */
  private setPolicy(o: unknown): string {
    const policy = networkPolicyFromApi(o);
    this.model.upsertPolicy(policy);
    this.index.setPolicy(policy);
    return policy.namespace;
  }

  /** The namespace into the model and the index; the rules whose reach moved. */
  private setNamespace(o: unknown): string[] {
    const ns = namespaceFromApi(o);
    this.model.upsertNamespace(ns);
    return this.index.setNamespace(ns.name, ns.labels);
  }

  private podsOf(namespace: string): string[] {
    return [...(this.podsByNamespace.get(namespace) ?? [])];
  }

  /** Re-maps the filters of `podKeys`, then those of `ruleIds` in use whose inputs are new. */
  private remap(podKeys: readonly string[], ruleIds: readonly string[]): PolicyChanges {
    const changes = noChanges();
    const ports: string[] = [];
    for (const k of podKeys) appendChanges(changes, this.remapPod(k, ports));
    for (const id of ruleIds) {
      const inputs = this.rules.get(id);
      if (!inputs) continue;
      const now = this.inputsOf(inputs.rule, inputs.direction);
      if (sameInputs(inputs, now)) continue;
      this.rules.set(id, now);
      appendChanges(
        changes,
        this.state.apply(mapPolicyRule(this.model, now.rule, now.direction, this.config)),
      );
    }
    appendChanges(changes, this.dropUnused());
    return { changes: sortChanges(changes), ports };
  }

  /** One pod's filters; its rules counted in or out, new rules mapped. */
  private remapPod(k: string, ports: string[]): ResourceChanges {
    const pod = this.portless.has(k) ? undefined : this.pods.get(k);
    const [namespace, name] = k.split("/") as [string, string];
    const policy = pod ? this.model.podPolicy(pod) : {};
    const isolated = policy.ingress !== undefined || policy.egress !== undefined;
    if (isolated !== this.filtered.has(k)) {
      if (isolated) this.filtered.add(k);
      else this.filtered.delete(k);
      ports.push(k);
    }
    const changes = noChanges();
    const used: string[] = [];
    for (const direction of ["ingress", "egress"] as const)
      for (const rule of policy[direction] ?? []) {
        used.push(rule.id);
        // A policy rewritten under the same rule id: the pod's PodRule is a new object.
        // A rule whose ports resolve per pod has one per pod: its chains, the same.
        const known = this.rules.get(rule.id);
        if (known?.rule === rule) continue;
        if (known && rule.perPod && sameInputs(known, this.inputsOf(rule, direction))) continue;
        this.rules.set(rule.id, this.inputsOf(rule, direction));
        this.index.add(rule.id);
        appendChanges(
          changes,
          this.state.apply(mapPolicyRule(this.model, rule, direction, this.config)),
        );
      }
    for (const id of this.podRules.get(k) ?? []) this.count(id, -1);
    for (const id of used) this.count(id, 1);
    if (used.length > 0) this.podRules.set(k, used);
    else this.podRules.delete(k);
    appendChanges(
      changes,
      pod && isolated
        ? this.state.apply(mapPodPolicy(this.model, pod, this.config))
        : this.state.remove(podPolicyOwner(namespace, name)),
    );
    return changes;
  }

  private count(id: string, by: number): void {
    const n = (this.ruleUsers.get(id) ?? 0) + by;
    if (n > 0) {
      this.ruleUsers.set(id, n);
      this.unused.delete(id);
    } else {
      this.ruleUsers.delete(id);
      this.unused.add(id);
    }
  }

  /** The chains of rules no pod uses any more. */
  private dropUnused(): ResourceChanges {
    const changes = noChanges();
    for (const id of this.unused) {
      this.rules.delete(id);
      this.index.remove(id);
      appendChanges(changes, this.state.remove(policyRuleOwner(id)));
    }
    this.unused.clear();
    return changes;
  }

  private inputsOf(rule: PodRule, direction: Direction): RuleInputs {
    return {
      direction,
      rule,
      peers: rule.anyPeer ? undefined : this.model.peerAddresses(rule.id),
      targets:
        direction === "egress" && rule.portNames.length > 0
          ? this.model.namedTargetChunks(rule.id, rule.portNames)
          : undefined,
    };
  }
}

function sameInputs(a: RuleInputs, b: RuleInputs): boolean {
  if (a.peers !== b.peers) return false;
  if (a.targets === b.targets) return true;
  if (!a.targets || !b.targets || a.targets.length !== b.targets.length) return false;
  return a.targets.every((chunk, i) => chunk === b.targets?.[i]);
}
