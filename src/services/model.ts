/**
 * Services as data: a Service and its EndpointSlices -> the frontends of
 * each of its ports, per IP family, and the endpoints each frontend may send
 * to on this node, with kube-proxy's semantics (endpoints.ts). Pure: the
 * driver's Service proxy turns these plans into nftables.
 *
 * Read from the API objects: spec.type, clusterIPs, ports (name, protocol,
 * port, nodePort), externalIPs, status.loadBalancer.ingress[].ip,
 * loadBalancerSourceRanges, sessionAffinity (+ its timeout),
 * internal/externalTrafficPolicy and healthCheckNodePort; from EndpointSlices,
 * also the endpoints' topology hints. A headless Service (clusterIP None) and
 * an ExternalName one are not proxied, as kube-proxy does not proxy them.
 */
import { isObject, type JsonObject } from "../common/json.js";
import { cidrNetwork, formatCidr, ipFamily, parseCidr } from "../net/ip.js";
import {
  categorizeEndpoints,
  type NodeTopology,
  type ServiceEndpoint,
  type SliceView,
  slicePortEndpoints,
  type TrafficPolicy,
} from "./endpoints.js";

export type ServiceProtocol = "tcp" | "udp" | "sctp";

/** kube-proxy's default for sessionAffinityConfig.clientIP.timeoutSeconds (3 hours). */
const DEFAULT_AFFINITY_SECONDS = 10_800;

export interface ServicePortSpec {
  name: string;
  protocol: ServiceProtocol;
  port: number;
  nodePort?: number;
}

/** What of a Service the proxy reads. */
export interface ServiceSpec {
  namespace: string;
  name: string;
  clusterIps: string[];
  ports: ServicePortSpec[];
  externalIps: string[];
  loadBalancerIps: string[];
  /**
   * spec.loadBalancerSourceRanges, as networks ("10.0.0.0/8"); those that do not
   * parse are left out, as kube-proxy leaves them.
   */
  sourceRanges: string[];
  /** Seconds a client sticks to its endpoint; undefined: no affinity. */
  affinitySeconds?: number;
  internalLocal: boolean;
  externalLocal: boolean;
  healthCheckNodePort?: number;
}

/** One port of a Service in one IP family: its frontends and the endpoints they lead to. */
export interface PortPlan {
  /** namespace/name:port/protocol/family: unique, and stable across changes. */
  key: string;
  service: string;
  family: 4 | 6;
  protocol: ServiceProtocol;
  port: number;
  clusterIps: string[];
  nodePort?: number;
  /** externalIPs and load-balancer ingress IPs of this family. */
  externalIps: string[];
  /** The load-balancer ingress IPs among them. */
  loadBalancerIps: string[];
  /**
   * The sources the load-balancer IPs let in, of this family; empty: every
   * source (node ports and externalIPs never filter, as in kube-proxy).
   */
  sourceRanges: string[];
  /** The endpoints traffic from inside the cluster goes to (internalTrafficPolicy decides). */
  internal: ServiceEndpoint[];
  /** The endpoints traffic from outside goes to (externalTrafficPolicy decides). */
  external: ServiceEndpoint[];
  /** internalTrafficPolicy is Local: `internal` holds this node's endpoints only. */
  internalLocal: boolean;
  /** Off-node traffic to an external frontend is masqueraded (Cluster policy). */
  masqueradeExternal: boolean;
  /** No usable endpoint anywhere: every frontend rejects. */
  reject: boolean;
  affinitySeconds?: number;
}

const PROTOCOLS: Record<string, ServiceProtocol> = { TCP: "tcp", UDP: "udp", SCTP: "sctp" };

const str = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);
const objs = (v: unknown): JsonObject[] => (Array.isArray(v) ? v.filter(isObject) : []);
const family = (ip: string): 4 | 6 | undefined => (ip.includes("/") ? undefined : ipFamily(ip));

/** A source range as a network, spaces trimmed; undefined when it does not parse. */
function sourceRange(v: unknown): string | undefined {
  const cidr = typeof v === "string" ? parseCidr(v.trim()) : undefined;
  return cidr ? formatCidr(cidrNetwork(cidr)) : undefined;
}

/** The proxy's view of a Service object; undefined for those kube-proxy does not proxy. */
export function serviceFromApi(o: unknown): ServiceSpec | undefined {
  if (!isObject(o)) return undefined;
  const meta = isObject(o.metadata) ? o.metadata : {};
  const spec = isObject(o.spec) ? o.spec : {};
  const type = str(spec.type) ?? "ClusterIP";
  if (type === "ExternalName") return undefined;
  const clusterIps = (
    Array.isArray(spec.clusterIPs) ? spec.clusterIPs : spec.clusterIP ? [spec.clusterIP] : []
  ).filter((ip): ip is string => typeof ip === "string" && family(ip) !== undefined);
  if (clusterIps.length === 0) return undefined;
  const ports: ServicePortSpec[] = [];
  for (const p of objs(spec.ports)) {
    const protocol = PROTOCOLS[str(p.protocol) ?? "TCP"];
    if (!protocol || typeof p.port !== "number") continue;
    const nodePort =
      (type === "NodePort" || type === "LoadBalancer") && typeof p.nodePort === "number"
        ? p.nodePort
        : undefined;
    ports.push({
      name: str(p.name) ?? "",
      protocol,
      port: p.port,
      ...(nodePort ? { nodePort } : {}),
    });
  }
  const status = isObject(o.status) ? o.status : {};
  const lb = isObject(status.loadBalancer) ? status.loadBalancer : {};
  const ips = (v: unknown) =>
    (Array.isArray(v) ? v : []).filter(
      (ip): ip is string => typeof ip === "string" && family(ip) !== undefined,
    );
  const affinity = str(spec.sessionAffinity) === "ClientIP";
  const timeout = (spec.sessionAffinityConfig as { clientIP?: { timeoutSeconds?: unknown } })
    ?.clientIP?.timeoutSeconds;
  const hc = spec.healthCheckNodePort;
  return {
    namespace: str(meta.namespace) ?? "",
    name: str(meta.name) ?? "",
    clusterIps,
    ports,
    externalIps: ips(spec.externalIPs),
    // ipMode Proxy: the load balancer proxies and sends to node ports itself (KEP-1860).
    loadBalancerIps:
      type === "LoadBalancer"
        ? ips(
            objs(lb.ingress)
              .filter((i) => i.ipMode !== "Proxy")
              .map((i) => i.ip),
          )
        : [],
    sourceRanges: (Array.isArray(spec.loadBalancerSourceRanges)
      ? spec.loadBalancerSourceRanges
      : []
    ).flatMap((r) => sourceRange(r) ?? []),
    ...(affinity
      ? { affinitySeconds: typeof timeout === "number" ? timeout : DEFAULT_AFFINITY_SECONDS }
      : {}),
    internalLocal: str(spec.internalTrafficPolicy) === "Local",
    externalLocal: str(spec.externalTrafficPolicy) === "Local",
    ...(typeof hc === "number" && hc > 0 ? { healthCheckNodePort: hc } : {}),
  };
}

const pick = (o: unknown, keys: readonly string[]): JsonObject => {
  const out: JsonObject = {};
  if (!isObject(o)) return out;
  for (const k of keys) if (o[k] !== undefined) out[k] = o[k];
  return out;
};

/**
 * What of a Service `serviceFromApi` reads, for a watch to keep instead of
 * the whole object (managedFields, annotations and the rest dropped at once).
 */
export function slimService(o: unknown): JsonObject {
  const obj = isObject(o) ? o : {};
  const spec = pick(obj.spec, [
    "type",
    "clusterIP",
    "clusterIPs",
    "externalIPs",
    "sessionAffinity",
    "sessionAffinityConfig",
    "internalTrafficPolicy",
    "externalTrafficPolicy",
    "healthCheckNodePort",
    "loadBalancerSourceRanges",
  ]);
  spec.ports = objs(isObject(obj.spec) ? obj.spec.ports : undefined).map((p) =>
    pick(p, ["name", "protocol", "port", "nodePort"]),
  );
  const lb =
    isObject(obj.status) && isObject(obj.status.loadBalancer) ? obj.status.loadBalancer : {};
  return {
    metadata: pick(obj.metadata, ["namespace", "name", "resourceVersion"]),
    spec,
    status: { loadBalancer: { ingress: objs(lb.ingress).map((i) => pick(i, ["ip", "ipMode"])) } },
  };
}

/** What of an EndpointSlice the proxy reads (endpoints.ts's SliceView and its owner), for a watch to keep. */
export function slimSlice(o: unknown): JsonObject {
  const obj = isObject(o) ? o : {};
  const meta = isObject(obj.metadata) ? obj.metadata : {};
  const labels = isObject(meta.labels) ? meta.labels : {};
  const owner = labels["kubernetes.io/service-name"];
  return {
    metadata: {
      ...pick(meta, ["namespace", "name", "resourceVersion"]),
      ...(typeof owner === "string" ? { labels: { "kubernetes.io/service-name": owner } } : {}),
    },
    addressType: obj.addressType,
    endpoints: objs(obj.endpoints).map((e) => ({
      // The first address only: the only one the API allows today, and the only one proxied.
      addresses: Array.isArray(e.addresses) ? e.addresses.slice(0, 1) : [],
      ...pick(e, ["conditions", "nodeName", "hints"]),
    })),
    ports: objs(obj.ports).map((p) => pick(p, ["name", "protocol", "port"])),
  };
}

/** The Service an EndpointSlice belongs to (its kubernetes.io/service-name label). */
export function sliceService(o: unknown): { namespace: string; name: string } | undefined {
  if (!isObject(o) || !isObject(o.metadata)) return undefined;
  const labels = isObject(o.metadata.labels) ? o.metadata.labels : {};
  const name = str(labels["kubernetes.io/service-name"]);
  const namespace = str(o.metadata.namespace);
  return name && namespace ? { namespace, name } : undefined;
}

/** Every port of a Service, in every family it has a cluster IP of, planned for node `node`. */
export function planService(
  svc: ServiceSpec,
  slices: readonly SliceView[],
  node: NodeTopology,
): PortPlan[] {
  const plans: PortPlan[] = [];
  const families = [...new Set(svc.clusterIps.map(family))] as Array<4 | 6>;
  const id = `${svc.namespace}/${svc.name}`;
  for (const port of svc.ports) {
    for (const fam of families) {
      const ofFamily = (ips: string[]) => ips.filter((ip) => family(ip) === fam);
      const loadBalancerIps = ofFamily(svc.loadBalancerIps);
      const externalIps = [...ofFamily(svc.externalIps), ...loadBalancerIps];
      const policy: TrafficPolicy = {
        internalLocal: svc.internalLocal,
        externalLocal: svc.externalLocal,
        externallyAccessible: port.nodePort !== undefined || externalIps.length > 0,
      };
      const eps = slicePortEndpoints(slices, port.name, port.protocol.toUpperCase(), fam);
      const cat = categorizeEndpoints(eps, policy, node);
      const internal = (svc.internalLocal ? cat.local : cat.cluster) ?? [];
      const external = policy.externalLocal ? (cat.local ?? []) : (cat.cluster ?? []);
      plans.push({
        key: `${id}:${port.port}/${port.protocol}/${fam}`,
        service: id,
        family: fam,
        protocol: port.protocol,
        port: port.port,
        clusterIps: svc.clusterIps.filter((ip) => family(ip) === fam),
        ...(port.nodePort ? { nodePort: port.nodePort } : {}),
        externalIps,
        loadBalancerIps,
        sourceRanges: svc.sourceRanges.filter((r) => ipFamily(r) === fam),
        internal,
        external: policy.externallyAccessible ? external : [],
        internalLocal: svc.internalLocal,
        masqueradeExternal: !svc.externalLocal,
        reject: !cat.hasAny,
        ...(svc.affinitySeconds !== undefined ? { affinitySeconds: svc.affinitySeconds } : {}),
      });
    }
  }
  return plans;
}

/** How many endpoints of a Service are on this node and usable: what its health check answers. */
export function localEndpointCount(plans: readonly PortPlan[], nodeName: string): number {
  const ips = new Set<string>();
  for (const p of plans) for (const ep of p.external) if (ep.nodeName === nodeName) ips.add(ep.ip);
  return ips.size;
}
