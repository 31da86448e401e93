/**
 * What the mapping produces: desired MidoNet resources, each with the key it is
 * known by, the Kubernetes object it comes from, and the resources it needs.
 */
import {
  type IdentifiedKind,
  itemPath,
  type MidonetObject,
  type ResourceKind,
} from "../resources.js";

/**
 * One resource MidoNet should hold: a MidonetObject (kind, parentId, body: what
 * createPath/itemPath take) with what the mapping knows about it.
 *
 * `key` is the resource's id for kinds that have one (bridges, ports, rules …),
 * otherwise the item path that names it (`/ports/<id>/link`,
 * `/bridges/<id>/mac_table/<mac>_<port>` …): unique, stable, and what a GET or
 * DELETE needs.
 *
 * `dependsOn` lists the keys of resources that must exist before this one can be
 * created (its parent among them when the mapping manages the parent). It names
 * only resources the mapping itself produces: MidoNet hosts are registered by
 * their agents and a tunnel zone named by annotation is the operator's, so
 * neither appears. A key absent from the desired state (a pod whose node is not
 * mapped yet) means "not yet": a reconciler holds the dependent back.
 *
 * `order` (rules only) is the rule's sort key within its chain. A rule's
 * `position` depends on every rule in the chain, and KUBE-SERVICES holds the
 * rules of many Services, so positions are assigned where whole chains are
 * known (DesiredState): the rule whose `order` sorts first is position 1.
 */
export type DesiredResource = MidonetObject & {
  readonly key: string;
  /** The object the resource comes from: "Global" (the cluster-wide resources), "Node/<name>", "Pod/<ns>/<name>", "Service/<ns>/<name>", "NetworkPolicyFilter/<key>", "NetworkPolicyPeers/<digest>". */
  readonly owner: string;
  readonly dependsOn: readonly string[];
  readonly order?: string;
};

export type WarningCode =
  /** A Service or EndpointSlice port with a protocol MidoNet rules cannot match. */
  | "unknown-protocol"
  /** An IPv6 address or CIDR where MidoNet's REST API takes IPv4 only. */
  | "ipv6-not-mappable"
  /** An SCTP service: rules are in place, but MidoNet's NAT does not translate SCTP. */
  | "sctp-not-translated"
  /** A field that does not parse (CIDR, IP, MAC, host id). */
  | "invalid-value"
  /** A pod CIDR with no room for the gateway and the node address. */
  | "pod-cidr-too-small"
  /** A node without the MidoNet host id annotation: nothing can be bound yet. */
  | "no-host-id"
  /** A node with no IPv4 address to reach its host over the tunnel zone. */
  | "no-tunnel-endpoint"
  /** A pod on a node whose MidoNet host is not known yet: its port stays unbound. */
  | "node-host-unknown"
  /** A resource another object already produces. */
  | "duplicate-resource";

/** Something the mapping could not do, returned as data (the mapping never throws on input). */
export interface MappingWarning {
  readonly owner: string;
  readonly code: WarningCode;
  readonly message: string;
}

/** Why an object maps to nothing at all. */
export type SkipReason =
  | "no-node-name"
  | "host-network"
  | "finished"
  | "not-cluster-ip"
  | "headless"
  | "no-ipv4-cluster-ip";

/** Everything one Kubernetes object maps to. */
export interface ObjectMapping {
  readonly owner: string;
  /** In the mapping's own deterministic order. */
  readonly resources: readonly DesiredResource[];
  readonly warnings: readonly MappingWarning[];
  readonly skipped?: SkipReason;
}

const IDENTIFIED: ReadonlySet<ResourceKind> = new Set<IdentifiedKind>([
  "TunnelZone",
  "Router",
  "Bridge",
  "Port",
  "Route",
  "Chain",
  "Rule",
]);

/** The key of a MidoNet object: its id, or for kinds without one the path that names it. */
export function resourceKey(object: MidonetObject): string {
  if (IDENTIFIED.has(object.kind)) {
    const id = (object.body as { id?: string }).id;
    if (!id) throw new Error(`${object.kind} without an id`);
    return id;
  }
  return itemPath(object);
}

/**
 * Creation rank of each kind: every resource depends only on resources of a
 * lower rank (a bridge on its filter chain, a port on its device and filter, a
 * route on its next-hop port, a binding on its port and the host's tunnel zone
 * membership, a rule on its chain and jump target), so creating rank by rank
 * (and rules of a chain in position order) respects every dependency.
 */
export const CREATION_RANK: Readonly<Record<ResourceKind, number>> = {
  TunnelZone: 0,
  Router: 0,
  Chain: 0,
  Host: 0,
  Bridge: 1,
  TunnelZoneHost: 1,
  Port: 2,
  PortLink: 3,
  Route: 3,
  Rule: 3,
  HostInterfacePort: 3,
  MacPort: 3,
  IP4Mac: 3,
};

/** Owner names, one place for their form. */
export const GLOBAL_OWNER = "Global";
export const nodeOwner = (name: string): string => `Node/${name}`;
/** The node an owner names; undefined for the owners that are not nodes. */
export const ownerNode = (owner: string): string | undefined =>
  owner.startsWith("Node/") ? owner.slice("Node/".length) : undefined;
export const podOwner = (namespace: string, name: string): string => `Pod/${namespace}/${name}`;
export const serviceOwner = (namespace: string, name: string): string =>
  `Service/${namespace}/${name}`;
/** A NetworkPolicy filter chain, shared by the pods whose filters hold the same (network-policy.ts). */
export const policyFilterOwner = (filterKey: string): string => `NetworkPolicyFilter/${filterKey}`;
/** The peer and named-port chains of the rules with one share key (by its digest). */
export const policyShareOwner = (shareDigest: string): string =>
  `NetworkPolicyPeers/${shareDigest}`;

/** Collects one object's resources and warnings. */
export class MappingBuilder {
  readonly resources: DesiredResource[] = [];
  readonly warnings: MappingWarning[] = [];

  constructor(readonly owner: string) {}

  add(object: MidonetObject, dependsOn: readonly string[], order?: string): string {
    const key = resourceKey(object);
    // One object per resource, every one of the same shape: there are hundreds of thousands.
    const resource = {
      kind: object.kind,
      parentId: (object as { parentId?: string }).parentId,
      body: object.body,
      key,
      owner: this.owner,
      dependsOn,
      order,
    } as DesiredResource;
    this.resources.push(resource);
    return key;
  }

  /** Adds a resource an earlier mapping of this owner made, as it was (no object made again). */
  reuse(resource: DesiredResource): void {
    this.resources.push(resource);
  }

  warn(code: WarningCode, message: string): void {
    this.warnings.push({ owner: this.owner, code, message });
  }

  build(skipped?: SkipReason): ObjectMapping {
    return skipped === undefined
      ? { owner: this.owner, resources: this.resources, warnings: this.warnings }
      : { owner: this.owner, resources: this.resources, warnings: this.warnings, skipped };
  }
}
