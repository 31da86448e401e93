/**
 * The MidoNet REST resources we use, typed exactly as their JSON travels
 * (field names and shapes of the MidoNet cluster's REST DTOs, 5.x API), with the
 * media type of each and the paths to create, address and list them.
 *
 * Pure data and string functions: no I/O. The client (api.ts) and the mapping
 * both build on this; the test simulator deliberately does not (it is the
 * independent oracle that would catch a wrong path or media type here).
 *
 * Read-only fields (filled by the server, ignored when sent) are marked as such;
 * the server renders an unset optional reference as JSON null, hence `| null`.
 */

/** A UUID in canonical lower-case string form. */
export type Uuid = string;

// ---------------------------------------------------------------------------
// Media types
// ---------------------------------------------------------------------------

function mediaType(name: string, version: number): string {
  return `application/vnd.org.midonet.${name}-v${version}+json`;
}

function collectionMediaType(name: string, version: number): string {
  return `application/vnd.org.midonet.collection.${name}-v${version}+json`;
}

export type ResourceKind =
  | "TunnelZone"
  | "TunnelZoneHost"
  | "Router"
  | "Bridge"
  | "Port"
  | "PortLink"
  | "Route"
  | "Chain"
  | "Rule"
  | "Host"
  | "HostInterfacePort"
  | "MacPort"
  | "IP4Mac";

/** The media type version we speak for each resource (the API also accepts Bridge-v5, Port-v4). */
const MEDIA_TYPE_VERSION: Readonly<Record<ResourceKind, number>> = {
  TunnelZone: 1,
  TunnelZoneHost: 1,
  Router: 3,
  Bridge: 4,
  Port: 3,
  PortLink: 1,
  Route: 1,
  Chain: 1,
  Rule: 2,
  Host: 3,
  HostInterfacePort: 1,
  MacPort: 2,
  IP4Mac: 1,
};

export const MEDIA_TYPES: Readonly<Record<ResourceKind, string>> = Object.fromEntries(
  Object.entries(MEDIA_TYPE_VERSION).map(([k, v]) => [k, mediaType(k, v)]),
) as Record<ResourceKind, string>;

export const COLLECTION_MEDIA_TYPES: Readonly<Record<ResourceKind, string>> = Object.fromEntries(
  Object.entries(MEDIA_TYPE_VERSION).map(([k, v]) => [k, collectionMediaType(k, v)]),
) as Record<ResourceKind, string>;

export const APPLICATION_MEDIA_TYPE = mediaType("Application", 5);
export const TOKEN_MEDIA_TYPE = mediaType("Token", 1);

// ---------------------------------------------------------------------------
// Resources
// ---------------------------------------------------------------------------

/** GET / : where everything lives (only the fields we read are typed). */
export interface Application {
  uri: string;
  version: string;
  bridges?: string;
  chains?: string;
  hosts?: string;
  routers?: string;
  tunnelZones?: string;
  [field: string]: unknown;
}

/** POST /login answer (Token-v1). `expires` is a date string. */
export interface Token {
  key: string;
  expires: string;
}

/** Error-v1: every 4xx/5xx answer carries one. */
export interface ErrorBody {
  code: number;
  message: string;
  /** A validation failure's reasons (its message says only "Validation error(s) found"). */
  violations?: Array<{ property: string; message: string }>;
}

export type TunnelZoneType = "gre" | "vxlan" | "vtep";

export interface TunnelZone {
  /** Omitted on create: the server picks a random UUID. */
  id?: Uuid;
  name: string;
  type: TunnelZoneType;
  /** read-only */
  uri?: string;
}

/** Membership of a host in a tunnel zone: POST /tunnel_zones/{tz}/hosts. */
export interface TunnelZoneHost {
  hostId: Uuid;
  ipAddress: string;
  /** read-only: from the path */
  tunnelZoneId?: Uuid;
  uri?: string;
}

/**
 * Fields Router and Bridge share. A PUT replaces the object with its body, so
 * one that omits a field clears it: the controller sets only name, tenantId
 * and the filters, and carries the rest back as read (an operator's settings).
 */
export interface Device {
  id?: Uuid;
  tenantId?: string | null;
  name?: string | null;
  inboundFilterId?: Uuid | null;
  outboundFilterId?: Uuid | null;
  /** An operator's; an omitted one is true again after a PUT. */
  adminStateUp?: boolean;
  inboundMirrorIds?: Uuid[] | null;
  outboundMirrorIds?: Uuid[] | null;
  qosPolicyId?: Uuid | null;
  /** read-only */
  uri?: string;
}

export interface Router extends Device {
  loadBalancerId?: Uuid | null;
  localRedirectChainId?: Uuid | null;
  forwardChainId?: Uuid | null;
  asNumber?: number;
}

export interface Bridge extends Device {}

type PortType = "Bridge" | "Router";

/** A PUT replaces the port with its body, as for a Device (see there). */
interface PortBase {
  id?: Uuid;
  type: PortType;
  inboundFilterId?: Uuid | null;
  outboundFilterId?: Uuid | null;
  adminStateUp?: boolean;
  vifId?: Uuid | null;
  inboundMirrorIds?: Uuid[] | null;
  outboundMirrorIds?: Uuid[] | null;
  /** read-only: the bridge or router the port is on */
  deviceId?: Uuid;
  /** read-only: set by POST /ports/{id}/link */
  peerId?: Uuid | null;
  /** read-only: set by a host-interface-port binding */
  hostId?: Uuid | null;
  /** read-only: set by a host-interface-port binding */
  interfaceName?: string | null;
  uri?: string;
}

export interface BridgePort extends PortBase {
  type: "Bridge";
  vlanId?: number | null;
}

export interface RouterPort extends PortBase {
  type: "Router";
  /**
   * The network the port is on ("10.1.0.0" and 24) and the port's own address
   * in it ("10.1.0.1"), all three required on create and on PUT (RouterPort.java:
   * @NotNull). The server adds a Local /32 route to portAddress when it creates
   * the port, and leaves routes alone on a PUT. (MidoNet keeps them as a
   * `portSubnet` list internally; that field is not part of the JSON.)
   */
  networkAddress?: string | null;
  networkLength?: number | null;
  portAddress?: string | null;
  /**
   * Omitted on create: a random MAC. Omitted on PUT: CLEARED (a MidoNet bug),
   * so an update must always carry it.
   */
  portMac?: string | null;
}

export type Port = BridgePort | RouterPort;

/** POST /ports/{portId}/link {peerId}: an interior link between two ports. */
export interface PortLink {
  peerId: Uuid;
  /** read-only: from the path */
  portId?: Uuid;
  uri?: string;
}

export type RouteType = "Normal" | "BlackHole" | "Reject" | "Local";

export interface Route {
  id?: Uuid;
  type: RouteType;
  srcNetworkAddr: string;
  srcNetworkLength: number;
  dstNetworkAddr: string;
  dstNetworkLength: number;
  /** Required for Normal routes: a port of the same router. */
  nextHopPort?: Uuid | null;
  nextHopGateway?: string | null;
  /** ≥ 0; lower wins. */
  weight?: number;
  /** read-only */
  routerId?: Uuid;
  learned?: boolean;
  uri?: string;
}

export interface Chain {
  id?: Uuid;
  tenantId?: string | null;
  name?: string | null;
  /** read-only */
  uri?: string;
}

export type RuleType =
  | "accept"
  | "drop"
  | "reject"
  | "return"
  | "jump"
  | "dnat"
  | "snat"
  | "rev_dnat"
  | "rev_snat";

/** What a NAT rule does with the packet once translated. */
export type FlowAction = "accept" | "continue" | "return";

/** An inclusive range, as tpSrc/tpDst carry it. */
export interface PortRange {
  start: number;
  end: number;
}

export interface NatTarget {
  addressFrom: string;
  addressTo: string;
  portFrom: number;
  portTo: number;
}

/** The match part of a rule (Condition in the MidoNet model). Absent = match anything. */
export interface RuleConditions {
  condInvert?: boolean;
  matchForwardFlow?: boolean;
  matchReturnFlow?: boolean;
  inPorts?: Uuid[] | null;
  invInPorts?: boolean;
  outPorts?: Uuid[] | null;
  invOutPorts?: boolean;
  /** EtherType, e.g. 2048 for IPv4 */
  dlType?: number | null;
  invDlType?: boolean;
  dlSrc?: string | null;
  invDlSrc?: boolean;
  dlDst?: string | null;
  invDlDst?: boolean;
  nwTos?: number | null;
  invNwTos?: boolean;
  /** IP protocol, e.g. 6 TCP, 17 UDP */
  nwProto?: number | null;
  invNwProto?: boolean;
  nwSrcAddress?: string | null;
  nwSrcLength?: number;
  invNwSrc?: boolean;
  nwDstAddress?: string | null;
  nwDstLength?: number;
  invNwDst?: boolean;
  tpSrc?: PortRange | null;
  invTpSrc?: boolean;
  tpDst?: PortRange | null;
  invTpDst?: boolean;
}

export interface Rule extends RuleConditions {
  id?: Uuid;
  type: RuleType;
  /** 1-based; omitted = 1, the head of the chain; more than size+1 is a 400. GET reports it. */
  position?: number;
  /** type jump: the target chain (required) */
  jumpChainId?: Uuid | null;
  jumpChainName?: string | null;
  /** required for dnat, snat, rev_dnat, rev_snat */
  flowAction?: FlowAction | null;
  /** required (non-empty) for dnat and snat */
  natTargets?: NatTarget[] | null;
  /** read-only */
  chainId?: Uuid;
  uri?: string;
}

/** Hosts are registered by the MidoNet agents: read only through the API. */
export interface Host {
  id: Uuid;
  name: string;
  alive?: boolean;
  uri?: string;
}

/** Binding of a virtual port to a host's interface: POST /hosts/{hostId}/ports. */
export interface HostInterfacePort {
  hostId: Uuid;
  portId: Uuid;
  interfaceName: string;
  uri?: string;
}

/** Bridge MAC table entry: POST /bridges/{id}/mac_table. */
export interface MacPort {
  /** "aa:bb:cc:dd:ee:ff" */
  macAddr: string;
  portId: Uuid;
  /** read-only */
  vlanId?: number | null;
  uri?: string;
}

/** Bridge ARP table entry: POST /bridges/{id}/arp_table. */
export interface IP4Mac {
  ip: string;
  mac: string;
  uri?: string;
}

// ---------------------------------------------------------------------------
// Paths (relative to the API base, e.g. http://host:8181/midonet-api)
// ---------------------------------------------------------------------------

function seg(value: string): string {
  return encodeURIComponent(value);
}

/** "aa:bb:cc:dd:ee:ff" → "aa-bb-cc-dd-ee-ff", as MAC and ARP entry paths carry it. */
function macToPathSegment(mac: string): string {
  return mac.replaceAll(":", "-");
}

export const loginPath = (): string => "/login";

export const tunnelZonesPath = (): string => "/tunnel_zones";
export const tunnelZonePath = (id: Uuid): string => `/tunnel_zones/${seg(id)}`;
export const tunnelZoneHostsPath = (tunnelZoneId: Uuid): string =>
  `/tunnel_zones/${seg(tunnelZoneId)}/hosts`;
export const tunnelZoneHostPath = (tunnelZoneId: Uuid, hostId: Uuid): string =>
  `/tunnel_zones/${seg(tunnelZoneId)}/hosts/${seg(hostId)}`;

export const routersPath = (): string => "/routers";
export const routerPath = (id: Uuid): string => `/routers/${seg(id)}`;
export const routerPortsPath = (routerId: Uuid): string => `/routers/${seg(routerId)}/ports`;
export const routerRoutesPath = (routerId: Uuid): string => `/routers/${seg(routerId)}/routes`;

export const bridgesPath = (): string => "/bridges";
export const bridgePath = (id: Uuid): string => `/bridges/${seg(id)}`;
export const bridgePortsPath = (bridgeId: Uuid): string => `/bridges/${seg(bridgeId)}/ports`;

export const portPath = (id: Uuid): string => `/ports/${seg(id)}`;
export const portLinkPath = (portId: Uuid): string => `/ports/${seg(portId)}/link`;

export const routePath = (id: Uuid): string => `/routes/${seg(id)}`;

export const chainsPath = (): string => "/chains";
export const chainPath = (id: Uuid): string => `/chains/${seg(id)}`;
export const chainRulesPath = (chainId: Uuid): string => `/chains/${seg(chainId)}/rules`;
export const rulePath = (id: Uuid): string => `/rules/${seg(id)}`;

export const hostsPath = (): string => "/hosts";
export const hostPath = (id: Uuid): string => `/hosts/${seg(id)}`;
export const hostInterfacePortsPath = (hostId: Uuid): string => `/hosts/${seg(hostId)}/ports`;
export const hostInterfacePortPath = (hostId: Uuid, portId: Uuid): string =>
  `/hosts/${seg(hostId)}/ports/${seg(portId)}`;

export const macTablePath = (bridgeId: Uuid): string => `/bridges/${seg(bridgeId)}/mac_table`;
export const macEntryPath = (bridgeId: Uuid, macAddr: string, portId: Uuid): string =>
  `/bridges/${seg(bridgeId)}/mac_table/${seg(`${macToPathSegment(macAddr)}_${portId}`)}`;
export const arpTablePath = (bridgeId: Uuid): string => `/bridges/${seg(bridgeId)}/arp_table`;
export const arpEntryPath = (bridgeId: Uuid, ip: string, mac: string): string =>
  `/bridges/${seg(bridgeId)}/arp_table/${seg(`${ip}_${macToPathSegment(mac)}`)}`;

// ---------------------------------------------------------------------------
// One object of any kind, with the parent its paths need
// ---------------------------------------------------------------------------

/**
 * A resource together with what addresses it. Lets code that handles a mixed
 * list (the reconciler) create, read and delete without a switch of its own.
 * `parentId` is the id the create path nests under: tunnel zone, bridge or
 * router (Port, by `body.type`), router (Route), chain (Rule), bridge (MAC and
 * ARP entries), the linked port (PortLink), the host (HostInterfacePort).
 */
export type MidonetObject =
  | { kind: "TunnelZone"; body: TunnelZone }
  | { kind: "TunnelZoneHost"; parentId: Uuid; body: TunnelZoneHost }
  | { kind: "Router"; body: Router }
  | { kind: "Bridge"; body: Bridge }
  | { kind: "Port"; parentId: Uuid; body: Port }
  | { kind: "PortLink"; parentId: Uuid; body: PortLink }
  | { kind: "Route"; parentId: Uuid; body: Route }
  | { kind: "Chain"; body: Chain }
  | { kind: "Rule"; parentId: Uuid; body: Rule }
  | { kind: "HostInterfacePort"; parentId: Uuid; body: HostInterfacePort }
  | { kind: "MacPort"; parentId: Uuid; body: MacPort }
  | { kind: "IP4Mac"; parentId: Uuid; body: IP4Mac };

/** Kinds addressed by their own `id` field (so it must be set to read, update or delete one). */
export type IdentifiedKind =
  | "TunnelZone"
  | "Router"
  | "Bridge"
  | "Port"
  | "Route"
  | "Chain"
  | "Rule";

/** Kinds that can be updated with PUT. */
export type UpdatableKind = "TunnelZone" | "Router" | "Bridge" | "Port";

function requireId(obj: MidonetObject): Uuid {
  const id = (obj.body as { id?: Uuid }).id;
  if (!id) throw new Error(`${obj.kind} has no id: its item path is unknown`);
  return id;
}

/** Where a POST creates the object. */
export function createPath(obj: MidonetObject): string {
  switch (obj.kind) {
    case "TunnelZone":
      return tunnelZonesPath();
    case "TunnelZoneHost":
      return tunnelZoneHostsPath(obj.parentId);
    case "Router":
      return routersPath();
    case "Bridge":
      return bridgesPath();
    case "Port":
      return obj.body.type === "Router"
        ? routerPortsPath(obj.parentId)
        : bridgePortsPath(obj.parentId);
    case "PortLink":
      return portLinkPath(obj.parentId);
    case "Route":
      return routerRoutesPath(obj.parentId);
    case "Chain":
      return chainsPath();
    case "Rule":
      return chainRulesPath(obj.parentId);
    case "HostInterfacePort":
      return hostInterfacePortsPath(obj.parentId);
    case "MacPort":
      return macTablePath(obj.parentId);
    case "IP4Mac":
      return arpTablePath(obj.parentId);
  }
}

/** Where GET, PUT and DELETE find the object once created. */
export function itemPath(obj: MidonetObject): string {
  switch (obj.kind) {
    case "TunnelZone":
      return tunnelZonePath(requireId(obj));
    case "TunnelZoneHost":
      return tunnelZoneHostPath(obj.parentId, obj.body.hostId);
    case "Router":
      return routerPath(requireId(obj));
    case "Bridge":
      return bridgePath(requireId(obj));
    case "Port":
      return portPath(requireId(obj));
    case "PortLink":
      return portLinkPath(obj.parentId);
    case "Route":
      return routePath(requireId(obj));
    case "Chain":
      return chainPath(requireId(obj));
    case "Rule":
      return rulePath(requireId(obj));
    case "HostInterfacePort":
      return hostInterfacePortPath(obj.parentId, obj.body.portId);
    case "MacPort":
      return macEntryPath(obj.parentId, obj.body.macAddr, obj.body.portId);
    case "IP4Mac":
      return arpEntryPath(obj.parentId, obj.body.ip, obj.body.mac);
  }
}

/** What names the object in logs and errors: its id, or the key its path carries. */
export function objectKey(obj: MidonetObject): string | undefined {
  switch (obj.kind) {
    case "TunnelZoneHost":
      return obj.body.hostId;
    case "PortLink":
      return `${obj.parentId}->${obj.body.peerId}`;
    case "HostInterfacePort":
      return obj.body.portId;
    case "MacPort":
      return `${obj.body.macAddr}_${obj.body.portId}`;
    case "IP4Mac":
      return `${obj.body.ip}_${obj.body.mac}`;
    default:
      return (obj.body as { id?: Uuid }).id;
  }
}
