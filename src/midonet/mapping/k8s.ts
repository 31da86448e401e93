/**
 * The parts of Kubernetes objects the MidoNet mapping reads: small structural
 * subsets of core/v1 Node, Pod, Service and discovery.k8s.io/v1 EndpointSlice,
 * so objects from any client (or plain JSON) fit without conversion. Every
 * field is optional the way the API server may omit it.
 */

/** The label an EndpointSlice names its Service with. */
export const LABEL_SERVICE_NAME = "kubernetes.io/service-name";

export interface ObjectMeta {
  name: string;
  namespace?: string;
  annotations?: Readonly<Record<string, string>> | null;
  labels?: Readonly<Record<string, string>> | null;
}

export interface NodeAddress {
  /** "InternalIP", "ExternalIP", "Hostname", "InternalDNS", "ExternalDNS" */
  type: string;
  address: string;
}

export interface Node {
  metadata: ObjectMeta;
  spec?: {
    podCIDR?: string | null;
    /** Dual-stack: at most one CIDR per family; podCIDRs[0] equals podCIDR. */
    podCIDRs?: readonly string[] | null;
  } | null;
  status?: {
    addresses?: readonly NodeAddress[] | null;
  } | null;
}

export interface Pod {
  metadata: ObjectMeta & { namespace: string };
  spec?: {
    nodeName?: string | null;
    hostNetwork?: boolean | null;
  } | null;
  status?: {
    /** "Pending", "Running", "Succeeded", "Failed", "Unknown" */
    phase?: string | null;
    podIP?: string | null;
    podIPs?: readonly { ip: string }[] | null;
  } | null;
}

export interface ServicePort {
  /** Required when a Service has more than one port; "" otherwise. */
  name?: string | null;
  /** "TCP" (the API's default), "UDP", "SCTP" */
  protocol?: string | null;
  port: number;
}

export interface Service {
  metadata: ObjectMeta & { namespace: string };
  spec?: {
    /** "ClusterIP" (default), "NodePort", "LoadBalancer", "ExternalName" */
    type?: string | null;
    /** "" or "None" (headless) mean no virtual IP. */
    clusterIP?: string | null;
    /** Dual-stack: one per family, clusterIPs[0] equals clusterIP. */
    clusterIPs?: readonly string[] | null;
    ports?: readonly ServicePort[] | null;
  } | null;
}

export interface EndpointConditions {
  /** null or absent means ready, as the EndpointSlice API documents. */
  ready?: boolean | null;
  serving?: boolean | null;
  terminating?: boolean | null;
}

export interface Endpoint {
  addresses: readonly string[];
  conditions?: EndpointConditions | null;
  nodeName?: string | null;
}

export interface EndpointPort {
  name?: string | null;
  protocol?: string | null;
  port?: number | null;
}

export interface EndpointSlice {
  metadata: ObjectMeta & { namespace: string };
  /** "IPv4", "IPv6", "FQDN" */
  addressType: string;
  endpoints?: readonly Endpoint[] | null;
  ports?: readonly EndpointPort[] | null;
}

/** "<namespace>/<name>", the key Kubernetes caches use. */
export function namespacedName(meta: { namespace?: string; name: string }): string {
  return meta.namespace ? `${meta.namespace}/${meta.name}` : meta.name;
}

/** The Service an EndpointSlice belongs to, as "<namespace>/<name>"; undefined without the label. */
export function sliceServiceKey(slice: EndpointSlice): string | undefined {
  const name = slice.metadata.labels?.[LABEL_SERVICE_NAME];
  return name ? `${slice.metadata.namespace}/${name}` : undefined;
}
