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
  type PortFilters,
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

/** What one pod uses: rule ids, share keys, and its filter keys (ingress, egress) when isolated. */
interface PodUses {
  rules: string[];
  shares: string[];
  filters: [string, string] | undefined;
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
  private readonly uses = new Map<string, PodUses>();
  private readonly ruleUsers = new Map<string, number>();
  private readonly ruleShare = new Map<string, string>();
  private readonly shares = new Map<string, Share>();
  private readonly filterUsers = new Map<string, number>();
  /** The filters' keys by content and back, while some pod uses them. */
  private readonly filterKeys = new Map<string, string>();
  private readonly filterContents = new Map<string, string>();
  /** Each rule's share key, kept while its policy object is the same: one string for all its pods. */
  private readonly shareKeys = new Map<
    string,
    { policy: NetworkPolicy | undefined; key: string }
  >();

  /** `model`: one the caller fills itself (then only `mapPods` and `filtersOf` apply). */
  constructor(
    private readonly state: DesiredState,
    private readonly config: ResolvedConfig,
    readonly model: PolicyModel = new PolicyModel(),
  ) {}

  /** The filters the pod's port carries now: none while no policy isolates it. */
  filtersOf(namespace: string, name: string): PortFilters {
    const filters = this.uses.get(key(namespace, name))?.filters;
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

  /** One pod's filters: the rules, shares and filters it uses counted in or out, new ones mapped. */
  private remapPod(k: string, ports: string[]): ResourceChanges {
    const pod = this.portless.has(k) ? undefined : this.pods.get(k);
    const policy = pod ? this.model.podPolicy(pod) : {};
    const isolated = policy.ingress !== undefined || policy.egress !== undefined;
    const changes = noChanges();
    const now: PodUses = { rules: [], shares: [], filters: undefined };
    const shareOf = (rule: PodRule, direction: Direction): string => {
      const sk = this.shareKeyOf(rule, direction);
      appendChanges(changes, this.useShare(sk, rule, direction));
      now.shares.push(sk);
      return sk;
    };
    for (const direction of ["ingress", "egress"] as const)
      for (const rule of policy[direction] ?? []) now.rules.push(rule.id);
    if (isolated) {
      const keys = (["ingress", "egress"] as const).map((direction) => {
        const rules = policy[direction];
        const fk = this.filterKeyOf(
          filterContent(this.config, rules, direction, (r) => shareOf(r, direction)),
        );
        if (!this.filterUsers.has(fk))
          appendChanges(
            changes,
            this.state.apply(
              mapFilter(this.config, fk, rules, direction, (r) => this.shareKeyOf(r, direction)),
            ),
          );
        return fk;
      });
      now.filters = [keys[0] as string, keys[1] as string];
    }
    const before = this.uses.get(k);
    for (const id of now.rules) this.countRule(id, 1);
    for (const sk of now.shares) this.countShare(sk, 1);
    for (const fk of now.filters ?? []) count(this.filterUsers, fk, 1);
    for (const id of before?.rules ?? []) this.countRule(id, -1);
    for (const sk of before?.shares ?? []) this.countShare(sk, -1);
    for (const fk of before?.filters ?? []) count(this.filterUsers, fk, -1);
    if (before?.filters?.join("\n") !== now.filters?.join("\n")) ports.push(k);
    if (now.rules.length > 0 || now.filters) this.uses.set(k, now);
    else this.uses.delete(k);
    return changes;
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
    const [namespace, name] = rule.id.split("/") as [string, string];
    const policy = this.model.policy(namespace, name);
    const known = this.shareKeys.get(rule.id);
    if (known && known.policy === policy) return known.key;
    const key = shareKey(this.model, rule, direction);
    this.shareKeys.set(rule.id, { policy, key });
    return key;
  }

  /** The share `sk` with `rule` among its rules; its chains mapped when it is new. */
  private useShare(sk: string, rule: PodRule, direction: Direction): ResourceChanges {
    const previous = this.ruleShare.get(rule.id);
    if (previous !== undefined && previous !== sk) this.shares.get(previous)?.rules.delete(rule.id);
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
  }

  private countShare(sk: string, by: number): void {
    const share = this.shares.get(sk);
    if (share) share.users += by;
  }

  /** Whatever no pod uses any more: rules out of the index, shares and filters out of the state. */
  private dropUnused(): ResourceChanges {
    const changes = noChanges();
    for (const [id, n] of this.ruleUsers) if (n <= 0) this.ruleUsers.delete(id);
    for (const [id, sk] of this.ruleShare) {
      if (this.ruleUsers.has(id)) continue;
      this.ruleShare.delete(id);
      this.shareKeys.delete(id);
      this.index.remove(id);
      this.shares.get(sk)?.rules.delete(id);
    }
    for (const [sk, share] of this.shares) {
      if (share.users > 0 && share.rules.size > 0) continue;
      this.shares.delete(sk);
      appendChanges(changes, this.state.remove(shareOwner(sk)));
    }
    for (const fk of this.droppedFilters())
      appendChanges(changes, this.state.remove(policyFilterOwner(fk)));
    return changes;
  }

  /** Filters whose last user went: forgotten, their keys answered. */
  private droppedFilters(): string[] {
    const gone: string[] = [];
    for (const [fk, n] of this.filterUsers) if (n <= 0) gone.push(fk);
    for (const fk of gone) {
      this.filterUsers.delete(fk);
      this.filterKeys.delete(this.filterContents.get(fk) as string);
      this.filterContents.delete(fk);
    }
    return gone;
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
