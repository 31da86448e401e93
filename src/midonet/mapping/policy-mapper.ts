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
 * Chains are shared (network-policy.ts): a filter by every pod selected alike
 * (mapped again in place when their policies change), a rule's peer chains by
 * every rule with the same peers. A filter is counted by its pods, a rule and a
 * share by the filters using them; each goes with its last user. An event re-reads only
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
import type { NamedTarget, PodPolicy, PodRule } from "../../policy/answers.js";
import {
  namespaceFromApi,
  networkPolicyFromApi,
  podFromApi,
  podPlacement,
} from "../../policy/from-api.js";
import { PolicyModel } from "../../policy/model.js";
import { PodLabelIndex } from "../../policy/pod-label-index.js";
import { selectorMatches } from "../../policy/selector.js";
import type { Direction, NetworkPolicy, PolicyPod } from "../../policy/types.js";
import { subId } from "../ids.js";
import type { ResolvedConfig } from "./config.js";
import type { DesiredState } from "./desired-state.js";
import { appendChanges, noChanges, type ResourceChanges, sortChanges } from "./diff.js";
import { type DesiredResource, policyFilterOwner } from "./model.js";
import {
  filterChainId,
  filterKeyOf,
  mapFilter,
  mapShare,
  needsShare,
  type PortFilters,
  type ShareChains,
  shareChains,
  shareKey,
  shareOwner,
} from "./network-policy.js";
import { PolicyRuleIndex } from "./policy-rule-index.js";

/** Chains several rules share (network-policy.ts's share key), and what they were mapped from. */
interface Share {
  direction: Direction;
  /** Its chains' ids, digested once. */
  chains: ShareChains;
  /** The rules its chains' last mapping made, by what they match (mapShare's `kept`). */
  made: Map<string, DesiredResource>;
  /** The rules in use with this key, as last handed out: any one stands for all. */
  rules: Map<string, PodRule>;
  users: number;
  peers: AddressRanges | undefined;
  targets: ReadonlyArray<readonly NamedTarget[]> | undefined;
}

/** A filter in use: how many pods use it, and the rules and shares it jumps to (counted once each). */
interface FilterUse {
  /** Its chain's id (filterChainId), digested once. */
  chainId: string;
  pods: number;
  /** The rule list it was last mapped from: the same list (object) again changes nothing. */
  list: readonly PodRule[] | undefined;
  /** Its rules' ids by label, as last mapped: a remap digests only new labels. */
  ruleIds: Map<string, string>;
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
  private readonly podsByLabel = new PodLabelIndex();
  /** Pods with no port (no node yet, or finished): peers, but nothing to filter. */
  private readonly portless = new Set<string>();
  /** Each isolated pod's filter keys (ingress, egress). */
  private readonly podFilters = new Map<string, [string, string]>();
  /** Rules and shares are counted by the filters that use them, filters by their pods. */
  private readonly ruleUsers = new Map<string, number>();
  private readonly ruleShare = new Map<string, string>();
  private readonly shares = new Map<string, Share>();
  private readonly filterUses = new Map<string, FilterUse>();
  /** The filter keys of each answer the model gave (pods selected alike share one): digested once. */
  private readonly policyFilterKeys = new WeakMap<PodPolicy, Partial<Record<Direction, string>>>();
  /** What lost a user since the last dropUnused: the only candidates it looks at. */
  private readonly unusedRules = new Set<string>();
  private readonly unusedShares = new Set<string>();
  private readonly unusedFilters = new Set<string>();
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
    const chainId = (fk: string) =>
      this.filterUses.get(fk)?.chainId ?? filterChainId(this.config, fk);
    return { inboundFilterId: chainId(filters[1]), outboundFilterId: chainId(filters[0]) };
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
    this.podsByLabel.remove(namespace, k, before.labels);
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
    const out = new Set<string>();
    for (const policy of policies) {
      if (!policy) continue;
      for (const k of this.podsByLabel.candidates(namespace, policy.podSelector)) {
        const pod = this.pods.get(k);
        if (pod && selectorMatches(policy.podSelector, pod.labels)) out.add(k);
      }
    }
    return [...out];
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
    if (before) this.podsByLabel.remove(before.namespace, k, before.labels);
    this.podsByLabel.add(pod.namespace, k, pod.labels);
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
    const made = new Map<string, DesiredResource>();
    const mapping = mapShare(this.model, rule, share.direction, sk, this.config, share.made, made);
    share.made = made;
    return this.state.apply(mapping);
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
      ? [this.useFilter(policy, "ingress", changes), this.useFilter(policy, "egress", changes)]
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
   * The key of the pod's filter in `direction`, its chain mapped (with the
   * shares it jumps to) when no pod uses it yet, or mapped again in place when
   * its selection's rules are a new list (a policy of it changed): the rules
   * and shares counted in for the new list, out for the old.
   */
  private useFilter(policy: PodPolicy, direction: Direction, changes: ResourceChanges): string {
    const rules = policy[direction];
    const keys = this.policyFilterKeys.get(policy) ?? {};
    this.policyFilterKeys.set(policy, keys);
    const fk = keys[direction] ?? filterKeyOf(direction, rules, policy.selection);
    keys[direction] = fk;
    const use = this.filterUses.get(fk);
    if (use && use.list === rules) return fk;
    const next: FilterUse = {
      chainId: use?.chainId ?? filterChainId(this.config, fk),
      pods: use?.pods ?? 0,
      list: rules,
      ruleIds: new Map(),
      rules: [],
      shares: [],
    };
    for (const rule of rules ?? []) {
      next.rules.push(rule.id);
      this.countRule(rule.id, 1);
      const sk = this.shareIfAny(rule, direction);
      if (sk === undefined) continue;
      appendChanges(changes, this.useShare(sk, rule, direction));
      next.shares.push(sk);
      this.countShare(sk, 1);
    }
    for (const id of use?.rules ?? []) this.countRule(id, -1);
    for (const sk of use?.shares ?? []) this.countShare(sk, -1);
    this.filterUses.set(fk, next);
    appendChanges(
      changes,
      this.state.apply(
        mapFilter(
          this.config,
          fk,
          rules,
          direction,
          (r) => (this.shares.get(this.shareKeyOf(r, direction)) as Share).chains,
          (chain, label) => {
            const id = use?.ruleIds.get(label) ?? subId(chain, label);
            next.ruleIds.set(label, id);
            return id;
          },
        ),
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
    const made = new Map<string, DesiredResource>();
    this.shares.set(sk, {
      direction,
      chains: shareChains(this.config, sk),
      made,
      rules: new Map([[rule.id, rule]]),
      users: 0,
      peers: rule.anyPeer ? undefined : this.model.peerAddresses(rule.id),
      targets: this.targetsOf(rule, direction),
    });
    return this.state.apply(
      mapShare(this.model, rule, direction, sk, this.config, undefined, made),
    );
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
