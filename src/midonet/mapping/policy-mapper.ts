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
 * A rule's shared chains are re-mapped only when what the model answers for
 * it is a new object (the model keeps an answer while its inputs stand), so an
 * event costs the rules it touches, not every rule of the cluster. A rule's
 * chains exist while some pod uses the rule.
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
  /** The pods the model holds, by key, and the keys of each namespace. */
  private readonly pods = new Map<string, PolicyPod>();
  private readonly podsByNamespace = new Map<string, Set<string>>();
  /** Each pod's rules (ids), and each rule's users and inputs. */
  private readonly podRules = new Map<string, string[]>();
  private readonly ruleUsers = new Map<string, number>();
  private readonly rules = new Map<string, RuleInputs>();
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

  /** A Pod from the API; finished ones keep no address (it is someone else's soon). */
  upsertPod(o: unknown): PolicyChanges {
    const pod = podFromApi(o);
    const placement = podPlacement(o);
    if (placement.finished) pod.ips = [];
    const k = key(pod.namespace, pod.name);
    if (placement.finished || !placement.nodeName) this.portless.add(k);
    else this.portless.delete(k);
    this.pods.set(k, pod);
    let inNs = this.podsByNamespace.get(pod.namespace);
    if (!inNs) {
      inNs = new Set();
      this.podsByNamespace.set(pod.namespace, inNs);
    }
    inNs.add(k);
    if (!this.model.upsertPod(pod)) return { changes: noChanges(), ports: [] };
    return this.remap([k]);
  }

  deletePod(namespace: string, name: string): PolicyChanges {
    const k = key(namespace, name);
    if (!this.pods.delete(k)) return { changes: noChanges(), ports: [] };
    this.portless.delete(k);
    const inNs = this.podsByNamespace.get(namespace);
    inNs?.delete(k);
    if (inNs?.size === 0) this.podsByNamespace.delete(namespace);
    this.model.deletePod(namespace, name);
    return this.remap([k]);
  }

  upsertPolicy(o: unknown): PolicyChanges {
    const policy = networkPolicyFromApi(o);
    this.model.upsertPolicy(policy);
    return this.remap(this.podsOf(policy.namespace));
  }

  deletePolicy(namespace: string, name: string): PolicyChanges {
    this.model.deletePolicy(namespace, name);
    return this.remap(this.podsOf(namespace));
  }

  upsertNamespace(o: unknown): PolicyChanges {
    this.model.upsertNamespace(namespaceFromApi(o));
    return this.remap([]);
  }

  deleteNamespace(name: string): PolicyChanges {
    this.model.deleteNamespace(name);
    return this.remap([]);
  }

  private podsOf(namespace: string): string[] {
    return [...(this.podsByNamespace.get(namespace) ?? [])];
  }

  /** Re-maps the filters of `podKeys`, then every used rule whose inputs are new. */
  private remap(podKeys: readonly string[]): PolicyChanges {
    const changes = noChanges();
    const ports: string[] = [];
    for (const k of podKeys) appendChanges(changes, this.remapPod(k, ports));
    for (const [id, inputs] of this.rules) {
      if (!this.ruleUsers.has(id)) {
        this.rules.delete(id);
        appendChanges(changes, this.state.remove(policyRuleOwner(id)));
        continue;
      }
      const now = this.inputsOf(inputs.rule, inputs.direction);
      if (sameInputs(inputs, now)) continue;
      this.rules.set(id, now);
      appendChanges(
        changes,
        this.state.apply(mapPolicyRule(this.model, now.rule, now.direction, this.config)),
      );
    }
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
        const known = this.rules.get(rule.id);
        // A policy rewritten under the same rule id: the pod's PodRule is a new object.
        if (known?.rule === rule) continue;
        const inputs = this.inputsOf(rule, direction);
        this.rules.set(rule.id, inputs);
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
    if (n > 0) this.ruleUsers.set(id, n);
    else this.ruleUsers.delete(id);
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
