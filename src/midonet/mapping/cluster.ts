/**
 * The mapping of a whole cluster, kept up to date one event at a time.
 *
 * `mapCluster` translates every object at once; a ClusterMapper then takes
 * watch events (upsert/delete of a Node, Pod, Service, EndpointSlice, and of the
 * Namespaces and NetworkPolicies NetworkPolicy needs) and
 * answers each with the resources that changed. It holds what crosses objects:
 * a pod's binding needs its node's MidoNet host, so a node whose host changes
 * re-maps the pods on it; a Service's rules need all of its EndpointSlices, so
 * a slice event re-maps its Service. Pure: no I/O, no clock, no randomness.
 */
import { type MappingConfig, type ResolvedConfig, resolveConfig } from "./config.js";
import { DesiredState } from "./desired-state.js";
import {
  appendChanges,
  mergeChanges,
  noChanges,
  type ResourceChanges,
  sortChanges,
} from "./diff.js";
import { mapGlobal } from "./global.js";
import {
  type EndpointSlice,
  type Node,
  namespacedName,
  type Pod,
  type Service,
  sliceServiceKey,
} from "./k8s.js";
import {
  type MappingWarning,
  nodeOwner,
  type ObjectMapping,
  podOwner,
  serviceOwner,
} from "./model.js";
import { mapNode, nodeHostId } from "./node.js";
import { mapPod, type PodNodeInfo } from "./pod.js";
import { type PolicyChanges, PolicyMapper } from "./policy-mapper.js";
import { mapService } from "./service.js";

export interface ClusterInput {
  nodes?: readonly Node[];
  namespaces?: readonly unknown[];
  networkPolicies?: readonly unknown[];
  pods?: readonly Pod[];
  services?: readonly Service[];
  endpointSlices?: readonly EndpointSlice[];
}

function sameNodeInfo(a: PodNodeInfo | undefined, b: PodNodeInfo | undefined): boolean {
  return a?.hostId === b?.hostId && a?.membershipKey === b?.membershipKey;
}

function nodeInfo(node: Node, mapping: ObjectMapping): PodNodeInfo {
  const info: PodNodeInfo = {};
  const bridge = mapping.resources.find((r) => r.kind === "Bridge");
  if (bridge) info.bridgeId = bridge.key;
  const hostId = nodeHostId(node);
  if (hostId) info.hostId = hostId;
  const membership = mapping.resources.find((r) => r.kind === "TunnelZoneHost");
  if (membership) info.membershipKey = membership.key;
  return info;
}

export class ClusterMapper {
  readonly config: ResolvedConfig;
  readonly state = new DesiredState();
  /** NetworkPolicy as port filters: its model and chains (policy-mapper.ts). */
  readonly policy: PolicyMapper;
  private readonly nodes = new Map<string, PodNodeInfo>();
  /** node name → pod key → pod: the pods to re-map when their node's host changes. */
  private readonly podsByNode = new Map<string, Map<string, Pod>>();
  private readonly podNode = new Map<string, string>();
  private readonly services = new Map<string, Service>();
  private readonly slices = new Map<string, EndpointSlice>();
  /** service key → slice keys */
  private readonly slicesByService = new Map<string, Set<string>>();
  private readonly nodeOf = (name: string): PodNodeInfo | undefined => this.nodes.get(name);

  /** How many node and service keys the indexes hold: bounded by the live ones (tests of that). */
  get indexedKeys(): { podsByNode: number; slicesByService: number } {
    return { podsByNode: this.podsByNode.size, slicesByService: this.slicesByService.size };
  }

  constructor(config: MappingConfig | ResolvedConfig) {
    this.config = resolveConfig(config);
    this.state.load([mapGlobal(this.config)]);
    this.policy = new PolicyMapper(this.state, this.config);
  }

  /** Every object's warnings, by owner. */
  warnings(): MappingWarning[] {
    return this.state.warnings();
  }

  upsertNode(node: Node): ResourceChanges {
    const name = node.metadata.name;
    const mapping = mapNode(node, this.config);
    const changes = this.state.apply(mapping);
    const info = nodeInfo(node, mapping);
    const before = this.nodes.get(name);
    this.nodes.set(name, info);
    return sameNodeInfo(before, info) ? changes : mergeChanges(changes, this.remapPodsOf(name));
  }

  deleteNode(name: string): ResourceChanges {
    const changes = this.state.remove(nodeOwner(name));
    if (!this.nodes.delete(name)) return changes;
    return mergeChanges(changes, this.remapPodsOf(name));
  }

  upsertPod(pod: Pod): ResourceChanges {
    const key = namespacedName(pod.metadata);
    const nodeName = pod.spec?.nodeName ?? "";
    const previousNode = this.podNode.get(key);
    if (previousNode !== undefined && previousNode !== nodeName) {
      this.forgetPodOnNode(previousNode, key);
    }
    if (nodeName) this.filePodOnNode(nodeName, key, pod);
    else this.podNode.delete(key);
    const policy = this.policy.upsertPod(pod);
    return mergeChanges(policy.changes, this.state.apply(this.mapPodNow(pod)));
  }

  deletePod(namespace: string, name: string): ResourceChanges {
    const key = `${namespace}/${name}`;
    const nodeName = this.podNode.get(key);
    if (nodeName !== undefined) {
      this.forgetPodOnNode(nodeName, key);
      this.podNode.delete(key);
    }
    const changes = this.state.remove(podOwner(namespace, name));
    return mergeChanges(changes, this.policy.deletePod(namespace, name).changes);
  }

  upsertNetworkPolicy(policy: unknown): ResourceChanges {
    return this.withPorts(this.policy.upsertPolicy(policy));
  }

  deleteNetworkPolicy(namespace: string, name: string): ResourceChanges {
    return this.withPorts(this.policy.deletePolicy(namespace, name));
  }

  upsertNamespace(namespace: unknown): ResourceChanges {
    return this.withPorts(this.policy.upsertNamespace(namespace));
  }

  deleteNamespace(name: string): ResourceChanges {
    return this.withPorts(this.policy.deleteNamespace(name));
  }

  /** A policy event's changes, with the ports whose filters it turned on or off re-mapped. */
  private withPorts(p: PolicyChanges): ResourceChanges {
    for (const key of p.ports) {
      const nodeName = this.podNode.get(key);
      const pod = nodeName === undefined ? undefined : this.podsByNode.get(nodeName)?.get(key);
      if (pod) appendChanges(p.changes, this.state.apply(this.mapPodNow(pod)));
    }
    return sortChanges(p.changes);
  }

  /** The pod's mapping with its node and its port filters as they are now. */
  private mapPodNow(pod: Pod): ObjectMapping {
    const { namespace, name } = pod.metadata;
    return mapPod(pod, this.config, this.nodeOf, this.policy.filtersOf(namespace, name));
  }

  upsertService(service: Service): ResourceChanges {
    const key = namespacedName(service.metadata);
    this.services.set(key, service);
    return this.state.apply(mapService(service, this.slicesOf(key), this.config));
  }

  deleteService(namespace: string, name: string): ResourceChanges {
    this.services.delete(`${namespace}/${name}`);
    return this.state.remove(serviceOwner(namespace, name));
  }

  upsertEndpointSlice(slice: EndpointSlice): ResourceChanges {
    const key = namespacedName(slice.metadata);
    const before = this.slices.get(key);
    const oldService = before && sliceServiceKey(before);
    const newService = sliceServiceKey(slice);
    this.slices.set(key, slice);
    if (oldService && oldService !== newService) this.forgetSliceOfService(oldService, key);
    if (newService) {
      let set = this.slicesByService.get(newService);
      if (!set) {
        set = new Set();
        this.slicesByService.set(newService, set);
      }
      set.add(key);
    }
    const changes = noChanges();
    if (oldService && oldService !== newService)
      mergeChanges(changes, this.remapService(oldService));
    if (newService) mergeChanges(changes, this.remapService(newService));
    return changes;
  }

  deleteEndpointSlice(namespace: string, name: string): ResourceChanges {
    const key = `${namespace}/${name}`;
    const before = this.slices.get(key);
    if (!before) return noChanges();
    this.slices.delete(key);
    const service = sliceServiceKey(before);
    if (!service) return noChanges();
    this.forgetSliceOfService(service, key);
    return this.remapService(service);
  }

  // The indexes lose a key's entry when it empties: a cluster that churns node
  // and namespace names (spot nodes, a namespace per CI run) must not grow them.
  private forgetPodOnNode(nodeName: string, podKey: string): void {
    const pods = this.podsByNode.get(nodeName);
    pods?.delete(podKey);
    if (pods?.size === 0) this.podsByNode.delete(nodeName);
  }

  private forgetSliceOfService(serviceKey: string, sliceKey: string): void {
    const slices = this.slicesByService.get(serviceKey);
    slices?.delete(sliceKey);
    if (slices?.size === 0) this.slicesByService.delete(serviceKey);
  }

  /** Bulk fill of a fresh mapper (mapCluster): maps everything, computes no changes. */
  load(input: ClusterInput): void {
    const mappings: ObjectMapping[] = [];
    for (const node of input.nodes ?? []) {
      const mapping = mapNode(node, this.config);
      this.nodes.set(node.metadata.name, nodeInfo(node, mapping));
      mappings.push(mapping);
    }
    for (const slice of input.endpointSlices ?? []) {
      const key = namespacedName(slice.metadata);
      this.slices.set(key, slice);
      const service = sliceServiceKey(slice);
      if (!service) continue;
      let set = this.slicesByService.get(service);
      if (!set) {
        set = new Set();
        this.slicesByService.set(service, set);
      }
      set.add(key);
    }
    for (const service of input.services ?? []) {
      const key = namespacedName(service.metadata);
      this.services.set(key, service);
      mappings.push(mapService(service, this.slicesOf(key), this.config));
    }
    // NetworkPolicy goes through the policy mapper's own events: its chains are in
    // the state before the pods' ports name them.
    this.policy.load(input.namespaces ?? [], input.networkPolicies ?? [], input.pods ?? []);
    for (const pod of input.pods ?? []) {
      const key = namespacedName(pod.metadata);
      const nodeName = pod.spec?.nodeName;
      if (nodeName) this.filePodOnNode(nodeName, key, pod);
      mappings.push(this.mapPodNow(pod));
    }
    this.state.load(mappings);
  }

  /** Files the pod under its node, so that a node's change remaps exactly its pods. */
  private filePodOnNode(nodeName: string, key: string, pod: Pod): void {
    const pods = this.podsByNode.get(nodeName) ?? new Map<string, Pod>();
    this.podsByNode.set(nodeName, pods);
    pods.set(key, pod);
    this.podNode.set(key, nodeName);
  }

  private slicesOf(serviceKey: string): EndpointSlice[] {
    const keys = this.slicesByService.get(serviceKey);
    if (!keys) return [];
    const out: EndpointSlice[] = [];
    for (const k of [...keys].sort()) {
      const slice = this.slices.get(k);
      if (slice) out.push(slice);
    }
    return out;
  }

  private remapService(serviceKey: string): ResourceChanges {
    const service = this.services.get(serviceKey);
    if (!service) return noChanges();
    return this.state.apply(mapService(service, this.slicesOf(serviceKey), this.config));
  }

  private remapPodsOf(nodeName: string): ResourceChanges {
    const changes = noChanges();
    for (const pod of this.podsByNode.get(nodeName)?.values() ?? []) {
      appendChanges(changes, this.state.apply(this.mapPodNow(pod)));
    }
    return sortChanges(changes);
  }
}

/** The full translation of a cluster, ready for events. */
export function mapCluster(
  input: ClusterInput,
  config: MappingConfig | ResolvedConfig,
): ClusterMapper {
  const mapper = new ClusterMapper(config);
  mapper.load(input);
  return mapper;
}
