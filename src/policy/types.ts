/**
 * NetworkPolicy's inputs as the policy model reads them: the parts of
 * networking.k8s.io/v1 NetworkPolicy, Pod and Namespace that decide who may
 * talk to whom. Plain data; the API's JSON maps onto it in from-api.ts.
 */

export type Protocol = "TCP" | "UDP" | "SCTP";

export interface LabelSelectorRequirement {
  key: string;
  operator: "In" | "NotIn" | "Exists" | "DoesNotExist";
  values?: string[];
}

/** metav1.LabelSelector: both parts must match; an empty selector matches everything. */
export interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: LabelSelectorRequirement[];
}

export interface IpBlock {
  cidr: string;
  except?: string[];
}

/** One `from`/`to` entry: pod and namespace selectors (AND when both), or an ipBlock. */
export interface PolicyPeer {
  podSelector?: LabelSelector;
  namespaceSelector?: LabelSelector;
  ipBlock?: IpBlock;
}

/** One `ports` entry: a number or a container port's name; `endPort` makes a range. */
export interface PolicyPort {
  protocol?: Protocol;
  port?: number | string;
  endPort?: number;
}

/** An ingress or egress rule: `peers` is `from` or `to`; absent or empty means everyone. */
export interface PolicyRule {
  peers?: PolicyPeer[];
  ports?: PolicyPort[];
}

export interface NetworkPolicy {
  namespace: string;
  name: string;
  podSelector: LabelSelector;
  /** As written; undefined: the implicit value (Ingress, plus Egress when there are egress rules). */
  policyTypes?: Array<"Ingress" | "Egress">;
  ingress?: PolicyRule[];
  egress?: PolicyRule[];
}

export interface NamedPort {
  name: string;
  protocol: Protocol;
  port: number;
}

export interface PolicyPod {
  namespace: string;
  name: string;
  labels: Record<string, string>;
  /** The pod's addresses (status.podIPs, or what SetUpPod handed out on this node). */
  ips: string[];
  /** The containers' named ports. */
  namedPorts: NamedPort[];
  /** A hostNetwork pod is never selected and is no pod peer: it has the node's address. */
  hostNetwork: boolean;
}

export interface PolicyNamespace {
  name: string;
  labels: Record<string, string>;
}

export type Direction = "ingress" | "egress";

export const podKey = (namespace: string, name: string): string => `${namespace}/${name}`;
