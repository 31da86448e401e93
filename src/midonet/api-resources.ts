/**
 * The MidoNet client's typed views, one per resource (client.bridges,
 * client.ports, …): which path, kind and object id each call is for. Apart
 * from the transport (api-transport.ts), which makes the calls: a view only
 * names them, so adding a resource touches nothing about HTTP, retries or login.
 */
import type { CreateResult, MidonetTransport } from "./api-transport.js";
import {
  arpEntryPath,
  arpTablePath,
  type BridgePort,
  bridgePortsPath,
  chainRulesPath,
  type Host,
  type HostInterfacePort,
  hostInterfacePortPath,
  hostInterfacePortsPath,
  hostPath,
  hostsPath,
  type IP4Mac,
  type MacPort,
  type MidonetObject,
  macEntryPath,
  macTablePath,
  type Port,
  type PortLink,
  portLinkPath,
  portPath,
  type Route,
  type RouterPort,
  type Rule,
  routePath,
  routerPortsPath,
  routerRoutesPath,
  rulePath,
  type TunnelZoneHost,
  tunnelZoneHostPath,
  tunnelZoneHostsPath,
  type UpdatableKind,
  type Uuid,
} from "./resources.js";

export interface RootResourceApi<T> {
  create(body: T): Promise<CreateResult>;
  get(id: Uuid): Promise<T | undefined>;
  delete(id: Uuid): Promise<boolean>;
  list(): Promise<T[]>;
}

export interface UpdatableRootResourceApi<T> extends RootResourceApi<T> {
  /** PUT: replaces the writable fields (omitted ones are cleared). */
  update(body: T & { id: Uuid }): Promise<void>;
}

export interface TunnelZoneHostApi {
  create(tunnelZoneId: Uuid, body: TunnelZoneHost): Promise<CreateResult>;
  get(tunnelZoneId: Uuid, hostId: Uuid): Promise<TunnelZoneHost | undefined>;
  delete(tunnelZoneId: Uuid, hostId: Uuid): Promise<boolean>;
  list(tunnelZoneId: Uuid): Promise<TunnelZoneHost[]>;
}

export interface PortApi {
  createOnBridge(bridgeId: Uuid, body: BridgePort): Promise<CreateResult>;
  createOnRouter(routerId: Uuid, body: RouterPort): Promise<CreateResult>;
  get(id: Uuid): Promise<Port | undefined>;
  /** A router port must carry portMac: MidoNet clears an omitted one. */
  update(body: Port & { id: Uuid }): Promise<void>;
  delete(id: Uuid): Promise<boolean>;
  listOnBridge(bridgeId: Uuid): Promise<BridgePort[]>;
  listOnRouter(routerId: Uuid): Promise<RouterPort[]>;
}

export interface PortLinkApi {
  create(portId: Uuid, peerId: Uuid): Promise<CreateResult>;
  /** The link, read from the port (the API has no GET for links); undefined if unlinked. */
  get(portId: Uuid): Promise<PortLink | undefined>;
  delete(portId: Uuid): Promise<boolean>;
}

export interface ChildResourceApi<T> {
  create(parentId: Uuid, body: T): Promise<CreateResult>;
  get(id: Uuid): Promise<T | undefined>;
  delete(id: Uuid): Promise<boolean>;
  list(parentId: Uuid): Promise<T[]>;
}

export interface HostApi {
  get(id: Uuid): Promise<Host | undefined>;
  list(): Promise<Host[]>;
  findByName(name: string): Promise<Host | undefined>;
}

export interface HostInterfacePortApi {
  create(body: HostInterfacePort): Promise<CreateResult>;
  get(hostId: Uuid, portId: Uuid): Promise<HostInterfacePort | undefined>;
  delete(hostId: Uuid, portId: Uuid): Promise<boolean>;
  list(hostId: Uuid): Promise<HostInterfacePort[]>;
}

export interface MacTableApi {
  create(bridgeId: Uuid, body: MacPort): Promise<CreateResult>;
  get(bridgeId: Uuid, macAddr: string, portId: Uuid): Promise<MacPort | undefined>;
  delete(bridgeId: Uuid, macAddr: string, portId: Uuid): Promise<boolean>;
  list(bridgeId: Uuid): Promise<MacPort[]>;
}

export interface ArpTableApi {
  create(bridgeId: Uuid, body: IP4Mac): Promise<CreateResult>;
  get(bridgeId: Uuid, ip: string, mac: string): Promise<IP4Mac | undefined>;
  delete(bridgeId: Uuid, ip: string, mac: string): Promise<boolean>;
  list(bridgeId: Uuid): Promise<IP4Mac[]>;
}

type RootKind = "TunnelZone" | "Router" | "Bridge" | "Chain";

/** A top-level resource (POST to its collection, GET, DELETE and list by id). */
export function rootApi<T>(
  t: MidonetTransport,
  kind: RootKind,
  collection: () => string,
  item: (id: Uuid) => string,
): RootResourceApi<T> {
  return {
    create: (body: T) => t.create({ kind, body } as MidonetObject),
    get: (id: Uuid) => t.getAt<T>(kind, item(id), id),
    delete: (id: Uuid) => t.deleteAt(kind, item(id), id),
    list: () => t.listAt<T>(kind, collection()),
  };
}

/** A top-level resource that takes a PUT as well. */
export function updatableApi<T>(
  t: MidonetTransport,
  kind: RootKind & UpdatableKind,
  collection: () => string,
  item: (id: Uuid) => string,
): UpdatableRootResourceApi<T> {
  return {
    ...rootApi<T>(t, kind, collection, item),
    update: (body: T & { id: Uuid }) => t.putAt(kind, item(body.id), body.id, body),
  };
}

/**
 * Entries nested under a parent and addressed by it and `key` (a host in a
 * tunnel zone, a port binding on a host, a MAC or ARP table entry): created
 * and listed under the parent; the id an error names is the key's parts
 * joined by "_".
 */
function nestedApi<T, K extends string[]>(
  t: MidonetTransport,
  kind: "TunnelZoneHost" | "HostInterfacePort" | "MacPort" | "IP4Mac",
  collection: (parentId: Uuid) => string,
  item: (parentId: Uuid, ...key: K) => string,
) {
  return {
    create: (parentId: Uuid, body: T) => t.create({ kind, parentId, body } as MidonetObject),
    get: (parentId: Uuid, ...key: K) => t.getAt<T>(kind, item(parentId, ...key), key.join("_")),
    delete: (parentId: Uuid, ...key: K) => t.deleteAt(kind, item(parentId, ...key), key.join("_")),
    list: (parentId: Uuid) => t.listAt<T>(kind, collection(parentId)),
  };
}

export function tunnelZoneHostApi(t: MidonetTransport): TunnelZoneHostApi {
  return nestedApi<TunnelZoneHost, [Uuid]>(
    t,
    "TunnelZoneHost",
    tunnelZoneHostsPath,
    tunnelZoneHostPath,
  );
}

export function portApi(t: MidonetTransport): PortApi {
  return {
    createOnBridge: (bridgeId, body) => t.create({ kind: "Port", parentId: bridgeId, body }),
    createOnRouter: (routerId, body) => t.create({ kind: "Port", parentId: routerId, body }),
    get: (id) => t.getAt("Port", portPath(id), id),
    update: (body) => t.putAt("Port", portPath(body.id), body.id, body),
    delete: (id) => t.deleteAt("Port", portPath(id), id),
    listOnBridge: (bridgeId) => t.listAt("Port", bridgePortsPath(bridgeId)),
    listOnRouter: (routerId) => t.listAt("Port", routerPortsPath(routerId)),
  };
}

export function portLinkApi(t: MidonetTransport): PortLinkApi {
  return {
    create: (portId, peerId) => t.create({ kind: "PortLink", parentId: portId, body: { peerId } }),
    get: (portId) => t.get({ kind: "PortLink", parentId: portId, body: { peerId: "" } }),
    delete: (portId) => t.deleteAt("PortLink", portLinkPath(portId), portId),
  };
}

/** Objects under a parent (routes of a router, rules of a chain), addressed by their own id. */
function childApi<T>(
  t: MidonetTransport,
  kind: "Route" | "Rule",
  collection: (parentId: Uuid) => string,
  item: (id: Uuid) => string,
): ChildResourceApi<T> {
  return {
    create: (parentId, body) => t.create({ kind, parentId, body } as MidonetObject),
    get: (id) => t.getAt<T>(kind, item(id), id),
    delete: (id) => t.deleteAt(kind, item(id), id),
    list: (parentId) => t.listAt<T>(kind, collection(parentId)),
  };
}

export function routeApi(t: MidonetTransport): ChildResourceApi<Route> {
  return childApi<Route>(t, "Route", routerRoutesPath, routePath);
}

export function ruleApi(t: MidonetTransport): ChildResourceApi<Rule> {
  return childApi<Rule>(t, "Rule", chainRulesPath, rulePath);
}

export function hostApi(t: MidonetTransport): HostApi {
  const api: HostApi = {
    get: (id) => t.getAt("Host", hostPath(id), id),
    list: () => t.listAt("Host", hostsPath()),
    findByName: async (name) => (await api.list()).find((h) => h.name === name),
  };
  return api;
}

export function hostInterfacePortApi(t: MidonetTransport): HostInterfacePortApi {
  const api = nestedApi<HostInterfacePort, [Uuid]>(
    t,
    "HostInterfacePort",
    hostInterfacePortsPath,
    hostInterfacePortPath,
  );
  // A binding's parent is its host, which the body names.
  return { ...api, create: (body) => api.create(body.hostId, body) };
}

export function macTableApi(t: MidonetTransport): MacTableApi {
  return nestedApi<MacPort, [string, Uuid]>(t, "MacPort", macTablePath, macEntryPath);
}

export function arpTableApi(t: MidonetTransport): ArpTableApi {
  return nestedApi<IP4Mac, [string, string]>(t, "IP4Mac", arpTablePath, arpEntryPath);
}
