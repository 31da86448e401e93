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
 * Chains are shared by content (network-policy.ts): a filter by every pod with
 * the same rules, a rule's peer chains by every rule with the same peers. Each
 * is counted by its users and goes with its last one. An event re-reads only
 * the rules it can concern (policy-rule-index.ts), and re-maps shared peer
 * chains only when what the model answers for them is a new object (the model
 * keeps an answer while its inputs stand), so an event costs the rules it
 * touches, not every rule of the cluster.
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
import { selectorMatches } from "../../policy/selector.js";
import type { Direction, NetworkPolicy, PolicyPod } from "../../policy/types.js";
import type { ResolvedConfig } from "./config.js";
import type { DesiredState } from "./desired-state.js";
import { appendChanges, noChanges, type ResourceChanges, sortChanges } from "./diff.js";
import { policyFilterOwner } from "./model.js";
import {
  filterChainId,
  filterContent,
  filterKeyOf,
  mapFilter,
  mapShare,
  needsShare,
  type PortFilters,
  ruleLabels,
  shareKey,
  shareOwner,
} from "./network-policy.js";
import { PolicyRuleIndex } from "./policy-rule-index.js";

/** Chains several rules share (network-policy.ts's share key), and what they were mapped from. */
interface Share {
  direction: Direction;
  /** The rules in use with this key, as last handed out: any one stands for all. */
  rules: Map<string, PodRule>;
  users: number;
  peers: AddressRanges | undefined;
  targets: ReadonlyArray<readonly NamedTarget[]> | undefined;
}

/** A filter in use: how many pods use it, and the rules and shares it jumps to (counted once each). */
interface FilterUse {
  pods: number;
  rules: string[];
  shares: string[];
}

/** An event's mapping changes, and the pods whose port filters it changed. */
export interface PolicyChanges {
  changes: ResourceChanges;
  ports: string[];
}

const key = (namespace: string, name: string) => `${namespace}/${name}`;

export class PolicyMapper {
  private readonly index = new PolicyRuleIndex();
  /** The pods the model holds, by key, and the keys of each namespace. */
  private readonly pods = new Map<string, PolicyPod>();
  private readonly podsByNamespace = new Map<string, Set<string>>();
  /** Pods with no port (no node yet, or finished): peers, but nothing to filter. */
  private readonly portless = new Set<string>();
  /** Each isolated pod's filter keys (ingress, egress). */
  private readonly podFilters = new Map<string, [string, string]>();
  /** Rules and shares are counted by the filters that use them, filters by their pods. */
  private readonly ruleUsers = new Map<string, number>();
  private readonly ruleShare = new Map<string, string>();
  private readonly shares = new Map<string, Share>();
  private readonly filterUses = new Map<string, FilterUse>();
  /** What lost a user since the last dropUnused: the only candidates it looks at. */
  private readonly unusedRules = new Set<string>();
  private readonly unusedShares = new Set<string>();
  private readonly unusedFilters = new Set<string>();
  /** A filter key per rule list the model handed out (pods selected alike share one list). */
  private readonly listFilterKeys = {
    ingress: new WeakMap<readonly PodRule[], string>(),
    egress: new WeakMap<readonly PodRule[], string>(),
  };
  /** The filters' keys by content and back, while some pod uses them. */
  private readonly filterKeys = new Map<string, string>();
  private readonly filterContents = new Map<string, string>();
  /**
   * Each rule object's line labels in a filter (ruleLabels), with the share they
   * were made for: the model hands one rule object to every pod it resolves
   * alike, so a filter's content is a join of these, not the chain ids digested
   * again for each pod.
   */
  private readonly labels = {
    ingress: new WeakMap<PodRule, { share: string | undefined; labels: readonly string[] }>(),
    egress: new WeakMap<PodRule, { share: string | undefined; labels: readonly string[] }>(),
  };
  /**
   * Each rule object's share key: one string for all its pods. A rule object
   * lives as long as its policy as it is (the model makes new ones when the
   * policy changes), so the key is never stale.
   */
  private readonly shareKeys = new WeakMap<PodRule, string>();

  /** `model`: one the caller fills itself (then only `mapPods` and `filtersOf` apply). */
  constructor(
    private readonly state: DesiredState,
    private readonly config: ResolvedConfig,
    readonly model: PolicyModel = new PolicyModel(),
  ) {}

  /** The filters the pod's port carries now: none while no policy isolates it. */
  filtersOf(namespace: string, name: string): PortFilters {
    const filters = this.podFilters.get(key(namespace, name));
    if (!filters) return {};
    return {
      inboundFilterId: filterChainId(this.config, filters[1]),
      outboundFilterId: filterChainId(this.config, filters[0]),
    };
  }

  /** Maps the filters of pods the model already holds (a model the caller filled). */
  mapPods(pods: Iterable<PolicyPod>): void {
    const keys: string[] = [];
    for (const pod of pods) {
      const k = key(pod.namespace, pod.name);
      this.pods.set(k, pod);
      keys.push(k);
    }
    for (const k of keys) this.remapPod(k, []);
    this.dropUnused();
  }

  /**
   * A first fill: everything into the model, then each pod's filters and the
   * chains they use mapped once (no event's checks, which a fill would repeat
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
    const policy = networkPolicyFromApi(o);
    const before = this.model.policy(policy.namespace, policy.name);
    this.model.upsertPolicy(policy);
    this.index.setPolicy(policy);
    return this.remap(this.selectedBy(policy.namespace, [before, policy]), []);
  }

  deletePolicy(namespace: string, name: string): PolicyChanges {
    const before = this.model.policy(namespace, name);
    this.model.deletePolicy(namespace, name);
    this.index.deletePolicy(namespace, name);
    return this.remap(this.selectedBy(namespace, [before]), []);
  }

  /** The pods of `namespace` any of `policies` selects: the only ones a policy event changes. */
  private selectedBy(namespace: string, policies: Array<NetworkPolicy | undefined>): string[] {
    const selectors = policies.flatMap((p) => (p ? [p.podSelector] : []));
    return this.podsOf(namespace).filter((k) => {
      const pod = this.pods.get(k);
      return pod !== undefined && selectors.some((s) => selectorMatches(s, pod.labels));
    });
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

  /** The policy into the model and the index. */
  private setPolicy(o: unknown): void {
    const policy = networkPolicyFromApi(o);
    this.model.upsertPolicy(policy);
    this.index.setPolicy(policy);
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

  /** Re-maps the filters of `podKeys`, then the shared chains of `ruleIds` whose inputs are new. */
  private remap(podKeys: readonly string[], ruleIds: readonly string[]): PolicyChanges {
    const changes = noChanges();
    const ports: string[] = [];
    for (const k of podKeys) appendChanges(changes, this.remapPod(k, ports));
    const shareKeys = new Set<string>();
    for (const id of ruleIds) {
      const sk = this.ruleShare.get(id);
      if (sk !== undefined) shareKeys.add(sk);
    }
    for (const sk of shareKeys) appendChanges(changes, this.refreshShare(sk));
    appendChanges(changes, this.dropUnused());
    return { changes: sortChanges(changes), ports };
  }

  /** A share's chains again when what the model answers for it is new. */
  private refreshShare(sk: string): ResourceChanges {
    const share = this.shares.get(sk);
    const rule = share?.rules.values().next().value;
    if (!share || !rule) return noChanges();
    const peers = rule.anyPeer ? undefined : this.model.peerAddresses(rule.id);
    const targets = this.targetsOf(rule, share.direction);
    if (peers === share.peers && sameTargets(targets, share.targets)) return noChanges();
    share.peers = peers;
    share.targets = targets;
    return this.state.apply(mapShare(this.model, rule, share.direction, sk, this.config));
  }

  private targetsOf(rule: PodRule, direction: Direction) {
    return direction === "egress" && rule.portNames.length > 0
      ? this.model.namedTargetChunks(rule.id, rule.portNames)
      : undefined;
  }

  /** One pod's filters: found (or mapped, with the chains they jump to) and counted in, the old ones out. */
  private remapPod(k: string, ports: string[]): ResourceChanges {
    const pod = this.portless.has(k) ? undefined : this.pods.get(k);
    const policy = pod ? this.model.podPolicy(pod) : {};
    const isolated = policy.ingress !== undefined || policy.egress !== undefined;
    const changes = noChanges();
    const now: [string, string] | undefined = isolated
      ? [
          this.useFilter(policy.ingress, "ingress", changes),
          this.useFilter(policy.egress, "egress", changes),
        ]
      : undefined;
    const before = this.podFilters.get(k);
    if (before?.[0] === now?.[0] && before?.[1] === now?.[1]) return changes;
    for (const fk of now ?? []) this.countFilter(fk, 1);
    for (const fk of before ?? []) this.countFilter(fk, -1);
    if (now) this.podFilters.set(k, now);
    else this.podFilters.delete(k);
    ports.push(k);
    return changes;
  }

  /**
   * The key of the filter for `rules` in `direction`; mapped, with the shares it
   * jumps to, when no pod uses it yet. Worked out once per rule list.
   */
  private useFilter(
    rules: readonly PodRule[] | undefined,
    direction: Direction,
    changes: ResourceChanges,
  ): string {
    const known = rules && this.listFilterKeys[direction].get(rules);
    const fk =
      known ??
      this.filterKeyOf(
        filterContent(rules, direction, (r) =>
          this.labelsOf(r, direction, this.shareIfAny(r, direction)),
        ),
      );
    if (rules && !known) this.listFilterKeys[direction].set(rules, fk);
    if (this.filterUses.has(fk)) return fk;
    const use: FilterUse = { pods: 0, rules: [], shares: [] };
    for (const rule of rules ?? []) {
      use.rules.push(rule.id);
      this.countRule(rule.id, 1);
      const sk = this.shareIfAny(rule, direction);
      if (sk === undefined) continue;
      appendChanges(changes, this.useShare(sk, rule, direction));
      use.shares.push(sk);
      this.countShare(sk, 1);
    }
    this.filterUses.set(fk, use);
    appendChanges(
      changes,
      this.state.apply(
        mapFilter(this.config, fk, rules, direction, (r) => this.shareKeyOf(r, direction)),
      ),
    );
    return fk;
  }

  private shareIfAny(rule: PodRule, direction: Direction): string | undefined {
    return needsShare(rule, direction) ? this.shareKeyOf(rule, direction) : undefined;
  }

  private countFilter(fk: string, by: number): void {
    const use = this.filterUses.get(fk);
    if (!use) return;
    use.pods += by;
    if (use.pods <= 0) this.unusedFilters.add(fk);
  }

  private labelsOf(rule: PodRule, direction: Direction, share: string | undefined) {
    const known = this.labels[direction].get(rule);
    if (known && known.share === share) return known.labels;
    const labels = ruleLabels(this.config, rule, direction, share);
    this.labels[direction].set(rule, { share, labels });
    return labels;
  }

  /** A filter's key, digested once per content while some pod uses it. */
  private filterKeyOf(content: string): string {
    let fk = this.filterKeys.get(content);
    if (fk === undefined) {
      fk = filterKeyOf(content);
      this.filterKeys.set(content, fk);
      this.filterContents.set(fk, content);
    }
    return fk;
  }

  private shareKeyOf(rule: PodRule, direction: Direction): string {
    const known = this.shareKeys.get(rule);
    if (known !== undefined) return known;
    const key = shareKey(this.model, rule, direction);
    this.shareKeys.set(rule, key);
    return key;
  }

  /** The share `sk` with `rule` among its rules; its chains mapped when it is new. */
  private useShare(sk: string, rule: PodRule, direction: Direction): ResourceChanges {
    const previous = this.ruleShare.get(rule.id);
    if (previous !== undefined && previous !== sk) {
      this.shares.get(previous)?.rules.delete(rule.id);
      this.unusedShares.add(previous);
    }
    if (previous !== sk) {
      this.ruleShare.set(rule.id, sk);
      this.index.add(rule.id);
    }
    const share = this.shares.get(sk);
    if (share) {
      share.rules.set(rule.id, rule);
      return noChanges();
    }
    this.shares.set(sk, {
      direction,
      rules: new Map([[rule.id, rule]]),
      users: 0,
      peers: rule.anyPeer ? undefined : this.model.peerAddresses(rule.id),
      targets: this.targetsOf(rule, direction),
    });
    return this.state.apply(mapShare(this.model, rule, direction, sk, this.config));
  }

  private countRule(id: string, by: number): void {
    count(this.ruleUsers, id, by);
    if (by < 0) this.unusedRules.add(id);
  }

  private countShare(sk: string, by: number): void {
    const share = this.shares.get(sk);
    if (!share) return;
    share.users += by;
    if (by < 0) this.unusedShares.add(sk);
  }

  /**
   * Whatever lost its last user since the last call: filters out of the state
   * (their rules and shares counted out), rules out of the index, shares out
   * of the state. Only what lost a user is looked at, not every rule.
   */
  private dropUnused(): ResourceChanges {
    const changes = noChanges();
    for (const fk of this.unusedFilters) {
      const use = this.filterUses.get(fk);
      if (!use || use.pods > 0) continue;
      this.filterUses.delete(fk);
      this.filterKeys.delete(this.filterContents.get(fk) as string);
      this.filterContents.delete(fk);
      for (const id of use.rules) this.countRule(id, -1);
      for (const sk of use.shares) this.countShare(sk, -1);
      appendChanges(changes, this.state.remove(policyFilterOwner(fk)));
    }
    this.unusedFilters.clear();
    for (const id of this.unusedRules) {
      if ((this.ruleUsers.get(id) ?? 0) > 0) continue;
      this.ruleUsers.delete(id);
      const sk = this.ruleShare.get(id);
      if (sk === undefined) continue;
      this.ruleShare.delete(id);
      this.index.remove(id);
      this.shares.get(sk)?.rules.delete(id);
      this.unusedShares.add(sk);
    }
    this.unusedRules.clear();
    for (const sk of this.unusedShares) {
      const share = this.shares.get(sk);
      if (!share || (share.users > 0 && share.rules.size > 0)) continue;
      this.shares.delete(sk);
      appendChanges(changes, this.state.remove(shareOwner(sk)));
    }
    this.unusedShares.clear();
    return changes;
  }
}

function count(map: Map<string, number>, k: string, by: number): void {
  map.set(k, (map.get(k) ?? 0) + by);
}

function sameTargets(
  a: ReadonlyArray<readonly NamedTarget[]> | undefined,
  b: ReadonlyArray<readonly NamedTarget[]> | undefined,
): boolean {
  if (a === b) return true;
  if (!a || !b || a.length !== b.length) return false;
  return a.every((chunk, i) => chunk === b[i]);
}
