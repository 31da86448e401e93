/**
 * What the mapping needs besides the Kubernetes objects, and the ids of the
 * cluster-wide resources every object refers to (computed once).
 */
import { idForKey, subId, TRANSLATION_VERSION } from "../ids.js";
import type { TunnelZoneType } from "../resources.js";

export interface MappingConfig {
  /** MidoNet tenant of every device and chain; part of every id ("midonetkube" in the original). */
  tenant: string;
  /** Translation version in the ids; "4" keeps the original integration's ids. */
  version?: string;
  /** Type of the default tunnel zone. Default "vxlan". */
  tunnelZoneType?: TunnelZoneType;
  /** Source ports SNAT rules allocate from. Default 30000-60000, as the original. */
  snatPorts?: { from: number; to: number };
  /** Pod network CIDRs (all families): node routes towards them go via the gateway. */
  clusterCidrs?: readonly string[];
  /** Service CIDRs (all families): node routes towards them go via the gateway. */
  serviceCidrs?: readonly string[];
  /**
   * MTU of the node's interfaces into MidoNet (the network's configured MTU).
   * MidoNet ports have no MTU of their own: it travels in the node plumbing data.
   * Undefined: the link keeps the kernel's default.
   */
  mtu?: number;
}

/** The config with defaults applied and the global ids computed. */
export interface ResolvedConfig {
  readonly tenant: string;
  readonly version: string;
  readonly tunnelZoneType: TunnelZoneType;
  readonly snatPorts: { readonly from: number; readonly to: number };
  readonly clusterCidrs: readonly string[];
  readonly serviceCidrs: readonly string[];
  readonly mtu?: number;
  readonly ids: GlobalIds;
}

export interface GlobalIds {
  /** IDForKey("midonet-global", "chain"): the base of every global id, and KUBE-MAIN's id. */
  readonly base: string;
  readonly mainChain: string;
  readonly preChain: string;
  readonly servicesChain: string;
  readonly clusterRouter: string;
  readonly defaultTunnelZone: string;
  readonly jumpToPre: string;
  readonly jumpToServices: string;
  readonly reverseSnat: string;
  readonly reverseDnat: string;
}

export function globalIds(tenant: string, version: string = TRANSLATION_VERSION): GlobalIds {
  const base = idForKey(tenant, "midonet-global", "chain", version);
  return {
    base,
    mainChain: base,
    preChain: subId(base, "Pre Chain"),
    servicesChain: subId(base, "Services Chain"),
    clusterRouter: subId(base, "Cluster Router"),
    defaultTunnelZone: subId(base, "Default Tunnel Zone"),
    jumpToPre: subId(base, "Jump To Pre"),
    jumpToServices: subId(base, "Jump To Services"),
    reverseSnat: subId(base, "Reverse SNAT"),
    reverseDnat: subId(base, "Reverse DNAT"),
  };
}

export function resolveConfig(config: MappingConfig | ResolvedConfig): ResolvedConfig {
  if ("ids" in config) return config;
  const version = config.version ?? TRANSLATION_VERSION;
  const resolved: ResolvedConfig = {
    tenant: config.tenant,
    version,
    tunnelZoneType: config.tunnelZoneType ?? "vxlan",
    snatPorts: config.snatPorts ?? { from: 30000, to: 60000 },
    clusterCidrs: config.clusterCidrs ?? [],
    serviceCidrs: config.serviceCidrs ?? [],
    ids: globalIds(config.tenant, version),
  };
  return config.mtu === undefined ? resolved : { ...resolved, mtu: config.mtu };
}
