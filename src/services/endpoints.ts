/**
 * Which endpoints of a Service port a node sends traffic to, with
 * kube-proxy's semantics (pkg/proxy/topology.go CategorizeEndpoints, KEP-1669
 * for terminating endpoints), so that a node proxying Services itself picks
 * exactly what kube-proxy would have picked:
 *
 * - usable endpoints are the ready ones; when none is, the serving and
 *   terminating ones (a rolling update's last pods keep their connections'
 *   peers reachable). The fallback is decided apart for Cluster and Local;
 * - Cluster policy uses the usable endpoints of the whole cluster, Local
 *   policy those on this node. A Service uses Local endpoints when its
 *   internalTrafficPolicy is Local, or it is reachable from outside (a node
 *   port, external or load-balancer IPs) and its externalTrafficPolicy is
 *   Local; it uses Cluster endpoints otherwise;
 * - `hasAny` says whether any usable endpoint exists anywhere: a Service
 *   with none is rejected (ICMP unreachable, TCP reset), not dropped, while
 *   one whose endpoints are all on other nodes under Local policy is dropped
 *   on this node, as kube-proxy does.
 *
 * - topology (trafficDistribution PreferSameZone / PreferSameNode, the
 *   topology-mode annotation): the EndpointSlice controller writes hints, and
 *   Cluster endpoints are narrowed to those hinted for this node when every
 *   ready endpoint has a node hint and one names this node, else to those
 *   hinted for this node's zone when every ready endpoint has a zone hint and
 *   one names the zone; otherwise hints play no part (topologyModeFromHints,
 *   with the PreferSameTrafficDistribution gate on, its default since 1.34).
 *
 * Pure and free of the Kubernetes object shapes: the caller hands over each
 * endpoint with its address, resolved port and conditions (`slicePortEndpoints`
 * does that for EndpointSlices).
 */

/** One endpoint of one Service port, as the EndpointSlice API describes it. */
export interface ServiceEndpoint {
  ip: string;
  port: number;
  /** The endpoint's node; undefined when the slice does not say. */
  nodeName?: string;
  ready: boolean;
  serving: boolean;
  terminating: boolean;
  /** hints.forZones: the zones that should use this endpoint. */
  zoneHints?: readonly string[];
  /** hints.forNodes: the nodes that should use this endpoint. */
  nodeHints?: readonly string[];
}

/** Where this node is, for topology hints. */
export interface NodeTopology {
  name: string;
  /** Its Node's topology.kubernetes.io/zone label; undefined without. */
  zone?: string;
}

/** What of a Service decides the endpoints its port uses. */
export interface TrafficPolicy {
  /** spec.internalTrafficPolicy is Local. */
  internalLocal: boolean;
  /** spec.externalTrafficPolicy is Local (with a way in from outside: else it plays no part). */
  externalLocal: boolean;
  /** A node port, externalIPs or status.loadBalancer.ingress IPs. */
  externallyAccessible: boolean;
}

interface CategorizedEndpoints {
  /** The Cluster-policy endpoints; undefined when the Service never uses Cluster policy. */
  cluster?: ServiceEndpoint[];
  /** The Local-policy endpoints on this node; undefined when the Service never uses Local policy. */
  local?: ServiceEndpoint[];
  /** Every endpoint this node may send to: the union of the two. */
  allReachable: ServiceEndpoint[];
  /** Whether any usable endpoint exists anywhere in the cluster. */
  hasAny: boolean;
}

const usesClusterEndpoints = (p: TrafficPolicy): boolean =>
  !p.internalLocal || (p.externallyAccessible && !p.externalLocal);

const usesLocalEndpoints = (p: TrafficPolicy): boolean =>
  p.internalLocal || (p.externallyAccessible && p.externalLocal);

const servingTerminating = (ep: ServiceEndpoint) => ep.serving && ep.terminating;

type TopologyMode = "" | "PreferSameNode" | "PreferSameZone";

/** Which hints narrow the Cluster endpoints on this node, if any (kube-proxy's topologyModeFromHints). */
function topologyMode(endpoints: readonly ServiceEndpoint[], node: NodeTopology): TopologyMode {
  let allNodeHints = true;
  let forNode = false;
  let allZoneHints = true;
  let forZone = false;
  for (const ep of endpoints) {
    if (!ep.ready) continue;
    if (!ep.nodeHints?.length) allNodeHints = false;
    else if (ep.nodeHints.includes(node.name)) forNode = true;
    if (!ep.zoneHints?.length) allZoneHints = false;
    else if (node.zone !== undefined && ep.zoneHints.includes(node.zone)) forZone = true;
  }
  if (allNodeHints && forNode) return "PreferSameNode";
  if (allZoneHints && forZone) return "PreferSameZone";
  return "";
}

function availableForTopology(ep: ServiceEndpoint, mode: TopologyMode, node: NodeTopology) {
  if (mode === "PreferSameNode") return ep.nodeHints?.includes(node.name) ?? false;
  if (mode === "PreferSameZone") return ep.zoneHints?.includes(node.zone ?? "") ?? false;
  return true;
}

/** A Service port's endpoints, split as kube-proxy splits them for the node `node`. */
export function categorizeEndpoints(
  endpoints: readonly ServiceEndpoint[],
  policy: TrafficPolicy,
  node: NodeTopology,
): CategorizedEndpoints {
  if (endpoints.length === 0) return { allReachable: [], hasAny: false };
  const isLocal = (ep: ServiceEndpoint) => ep.nodeName === node.name;
  let cluster: ServiceEndpoint[] | undefined;
  let hasAny = false;
  let mode: TopologyMode = "";
  if (usesClusterEndpoints(policy)) {
    mode = topologyMode(endpoints, node);
    cluster = endpoints.filter((ep) => ep.ready && availableForTopology(ep, mode, node));
    // No ready endpoint anywhere: the serving ones that are terminating.
    if (cluster.length === 0) cluster = endpoints.filter(servingTerminating);
    hasAny = cluster.length > 0;
  }
  if (!usesLocalEndpoints(policy)) return { cluster, allReachable: cluster ?? [], hasAny };

  let localReady = false;
  let localServingTerminating = false;
  for (const ep of endpoints) {
    const usable = ep.ready || servingTerminating(ep);
    hasAny ||= usable;
    if (isLocal(ep) && ep.ready) localReady = true;
    else if (isLocal(ep) && servingTerminating(ep)) localServingTerminating = true;
  }
  const local = localReady
    ? endpoints.filter((ep) => isLocal(ep) && ep.ready)
    : localServingTerminating
      ? endpoints.filter((ep) => isLocal(ep) && servingTerminating(ep))
      : [];
  if (!cluster) return { local, allReachable: local, hasAny };
  // Without topology, Cluster holds every ready endpoint: a superset of ready local ones.
  if (mode === "" && (localReady || local.length === 0))
    return { cluster, local, allReachable: cluster, hasAny };
  const all = new Map<string, ServiceEndpoint>();
  for (const ep of [...cluster, ...local]) all.set(endpointKey(ep), ep);
  return { cluster, local, allReachable: [...all.values()], hasAny };
}

const endpointKey = (ep: ServiceEndpoint) =>
  ep.ip.includes(":") ? `[${ep.ip}]:${ep.port}` : `${ep.ip}:${ep.port}`;

/** The parts of an EndpointSlice `slicePortEndpoints` reads. */
export interface SliceView {
  /** "IPv4", "IPv6" or "FQDN" (never proxied). */
  addressType: string;
  endpoints?: ReadonlyArray<{
    addresses: readonly string[];
    conditions?: {
      ready?: boolean | null;
      serving?: boolean | null;
      terminating?: boolean | null;
    } | null;
    nodeName?: string | null;
    hints?: {
      forZones?: ReadonlyArray<{ name?: string | null }> | null;
      forNodes?: ReadonlyArray<{ name?: string | null }> | null;
    } | null;
  }> | null;
  ports?: ReadonlyArray<{
    name?: string | null;
    protocol?: string | null;
    port?: number | null;
  }> | null;
}

/**
 * The endpoints of the Service port named `portName` (protocol `protocol`)
 * in one family, from all the Service's EndpointSlices: each slice's port of
 * that name gives the target port (a targetPort by name resolves per slice,
 * as the EndpointSlice controller wrote it). An endpoint listed by two
 * slices (during a slice's replacement) counts once. Conditions as the API
 * defines them: ready absent means ready, serving absent means as ready,
 * terminating absent means not terminating.
 */
export function slicePortEndpoints(
  slices: readonly SliceView[],
  portName: string,
  protocol: string,
  family: 4 | 6,
): ServiceEndpoint[] {
  const out = new Map<string, ServiceEndpoint>();
  for (const slice of slices) {
    if (slice.addressType !== (family === 4 ? "IPv4" : "IPv6")) continue;
    const port = (slice.ports ?? []).find(
      (p) => (p.name ?? "") === portName && (p.protocol ?? "TCP") === protocol,
    )?.port;
    if (typeof port !== "number" || port < 1 || port > 65535) continue;
    for (const ep of slice.endpoints ?? []) {
      const ready = ep.conditions?.ready ?? true;
      const zoneHints = hintNames(ep.hints?.forZones);
      const nodeHints = hintNames(ep.hints?.forNodes);
      const e: ServiceEndpoint = {
        ip: ep.addresses[0] ?? "",
        port,
        ...(ep.nodeName ? { nodeName: ep.nodeName } : {}),
        ready,
        serving: ep.conditions?.serving ?? ready,
        terminating: ep.conditions?.terminating ?? false,
        ...(zoneHints.length > 0 ? { zoneHints } : {}),
        ...(nodeHints.length > 0 ? { nodeHints } : {}),
      };
      // Only the first address counts: the API allows one per endpoint today.
      if (e.ip && !out.has(endpointKey(e))) out.set(endpointKey(e), e);
    }
  }
  return [...out.values()];
}

const hintNames = (list: ReadonlyArray<{ name?: string | null }> | null | undefined): string[] =>
  (list ?? []).flatMap((h) => (typeof h.name === "string" && h.name !== "" ? [h.name] : []));
