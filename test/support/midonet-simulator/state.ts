/**
 * What the simulated MidoNet cluster holds: its objects, how GET renders them,
 * and the cascades a DELETE sets off. MAC and ARP tables are MidoNet's state
 * tables: besides the persistent entries the API creates, the datapath learns
 * entries, kept apart here (see the MAC and ARP handlers for how they list).
 */
import { randomUUID } from "node:crypto";
import type {
  Bridge,
  Chain,
  Host,
  IP4Mac,
  MacPort,
  Port,
  Route,
  Rule,
  TunnelZone,
} from "../../../src/midonet/resources.js";
import { type Body, conflict, notFound, UUID_RE } from "./body.js";
import type { OperatorValues } from "./operator-fields.js";
import type { Session } from "./session.js";

export interface SimulatedHost {
  id: string;
  name: string;
}

export interface TunnelZoneRec {
  id: string;
  name: string;
  type: string;
  members: Map<string, string>; // hostId -> ipAddress
}

export interface DeviceRec {
  id: string;
  tenantId: string | null;
  name: string | null;
  inboundFilterId: string | null;
  outboundFilterId: string | null;
  /** What an operator may set and a PUT replaces (operator-fields.ts). */
  operator: OperatorValues;
}

export interface PortRec {
  id: string;
  type: "Bridge" | "Router";
  deviceId: string;
  inboundFilterId: string | null;
  outboundFilterId: string | null;
  peerId: string | null;
  hostId: string | null;
  interfaceName: string | null;
  /** Router ports: networkAddress/networkLength as sent, what MidoNet stores as port_subnet. */
  portSubnet: string | null;
  /** Router ports: the port's own address, stored apart from its subnet. */
  portAddress: string | null;
  portMac: string | null;
  /** What an operator may set and a PUT replaces (operator-fields.ts). */
  operator: OperatorValues;
}

export interface RouteRec {
  id: string;
  routerId: string;
  type: string;
  srcNetworkAddr: string;
  srcNetworkLength: number;
  dstNetworkAddr: string;
  dstNetworkLength: number;
  nextHopPort: string | null;
  nextHopGateway: string | null;
  weight: number;
}

export interface ChainRec {
  id: string;
  tenantId: string | null;
  name: string | null;
  ruleIds: string[];
}

export interface RuleRec {
  id: string;
  chainId: string;
  type: string;
  jumpChainId: string | null;
  /** Every other field, validated, as sent. */
  fields: Record<string, unknown>;
}

export interface BindingRec {
  hostId: string;
  portId: string;
  interfaceName: string;
}

export interface MacRec {
  macAddr: string;
  portId: string;
}

export interface ArpRec {
  ip: string;
  mac: string;
}

/** bridgeId -> key -> value */
type Tables<T> = Map<string, Map<string, T>>;

export class SimulatorState {
  /** e.g. http://127.0.0.1:40123/midonet-api, set once listening. */
  baseUrl = "";

  readonly hosts = new Map<string, SimulatedHost>();
  readonly tunnelZones = new Map<string, TunnelZoneRec>();
  readonly routers = new Map<string, DeviceRec>();
  readonly bridges = new Map<string, DeviceRec>();
  readonly ports = new Map<string, PortRec>();
  readonly routes = new Map<string, RouteRec>();
  readonly chains = new Map<string, ChainRec>();
  readonly rules = new Map<string, RuleRec>();
  readonly bindings = new Map<string, BindingRec>(); // portId -> binding
  readonly macTables: Tables<MacRec> = new Map(); // key: mac_portId
  readonly arpTables: Tables<ArpRec> = new Map(); // key: ip_mac
  // What the datapath learned: bridgeId -> MAC -> port, bridgeId -> IP -> MAC.
  readonly learnedMacs: Tables<string> = new Map();
  readonly learnedArps: Tables<string> = new Map();

  constructor(readonly session: Session) {}

  // -- lookups --------------------------------------------------------------

  /** A path id that is not a UUID names nothing: 404, as for a missing object. */
  static pathId(value: string | undefined, what: string): string {
    if (value === undefined || !UUID_RE.test(value)) throw notFound(`${what} ${value} not found`);
    return value.toLowerCase();
  }

  getOr404<T>(map: Map<string, T>, id: string | undefined, what: string): T {
    const rec = map.get(SimulatorState.pathId(id, what));
    if (!rec) throw notFound(`${what} ${id} not found`);
    return rec;
  }

  requireChain(id: string | null, field: string): void {
    if (id !== null && !this.chains.has(id)) throw notFound(`${field}: chain ${id} not found`);
  }

  /** The id a create asked for, or a random one; 409 if taken. */
  newId(body: Body, taken: (id: string) => boolean, what: string): string {
    const id = body.uuid("id") ?? randomUUID();
    if (taken(id)) throw conflict(`${what} ${id} already exists`);
    return id;
  }

  withUri<T extends object>(obj: T, path: string): T & { uri: string } {
    return { ...obj, uri: this.baseUrl + path };
  }

  // -- rendering (what GET answers) -----------------------------------------

  renderRule(r: RuleRec): Rule {
    const chain = this.chains.get(r.chainId);
    const position = chain ? chain.ruleIds.indexOf(r.id) + 1 : 0;
    return {
      id: r.id,
      chainId: r.chainId,
      type: r.type as Rule["type"],
      position,
      ...(r.jumpChainId !== null ? { jumpChainId: r.jumpChainId } : {}),
      ...structuredClone(r.fields),
    } as Rule;
  }

  // -- cascades -------------------------------------------------------------

  /** A port goes: routes through it, its peer's link, its host binding, what was learned on it. */
  deletePort(id: string): void {
    const port = this.ports.get(id);
    if (!port) return;
    for (const route of [...this.routes.values()]) {
      if (route.nextHopPort === id) this.routes.delete(route.id);
    }
    if (port.peerId !== null) {
      const peer = this.ports.get(port.peerId);
      if (peer) peer.peerId = null;
    }
    this.bindings.delete(id);
    this.ports.delete(id);
    for (const learned of this.learnedMacs.values()) {
      for (const [mac, portId] of learned) if (portId === id) learned.delete(mac);
    }
  }

  deleteBridge(id: string): void {
    for (const port of [...this.ports.values()]) {
      if (port.type === "Bridge" && port.deviceId === id) this.deletePort(port.id);
    }
    for (const tables of [this.macTables, this.arpTables, this.learnedMacs, this.learnedArps]) {
      tables.delete(id);
    }
    this.bridges.delete(id);
  }

  deleteRouter(id: string): void {
    for (const port of [...this.ports.values()]) {
      if (port.type === "Router" && port.deviceId === id) this.deletePort(port.id);
    }
    for (const route of [...this.routes.values()]) {
      if (route.routerId === id) this.routes.delete(route.id);
    }
    this.routers.delete(id);
  }

  deleteRule(id: string): void {
    const rule = this.rules.get(id);
    if (!rule) return;
    const chain = this.chains.get(rule.chainId);
    if (chain) chain.ruleIds = chain.ruleIds.filter((r) => r !== id);
    this.rules.delete(id);
  }

  /** A chain goes: its rules, every jump to it, every filter reference to it. */
  deleteChain(id: string): void {
    const chain = this.chains.get(id);
    if (!chain) return;
    for (const ruleId of chain.ruleIds) this.rules.delete(ruleId);
    this.chains.delete(id);
    for (const rule of [...this.rules.values()]) {
      if (rule.type === "jump" && rule.jumpChainId === id) this.deleteRule(rule.id);
    }
    for (const h of [...this.bridges.values(), ...this.routers.values(), ...this.ports.values()]) {
      if (h.inboundFilterId === id) h.inboundFilterId = null;
      if (h.outboundFilterId === id) h.outboundFilterId = null;
    }
  }

  /**
   * The Local route RouterPortResource.createFilter creates with a new router
   * port (midonet-cluster/src/main/scala/org/midonet/cluster/services/
   * rest_api/resources/PortResource.scala): one, whatever the number of
   * subnets, `new Route("0.0.0.0", 0, port.portAddress, 32, NextHop.Local,
   * port.id, null, 0, null, false)`, i.e. from anywhere to the port's own
   * address /32, next hop the port, no gateway, weight 0, not learned. (The
   * older, Future-based PortResource.scala at commit 0171b54 passed gateway
   * "255.255.255.255"; the transaction-based one at 90d21a1 passes null.) Its
   * routerId is null in storage; RouteResource.scala's GET and the router's
   * route list fill it in from the next hop port, so it is set here.
   */
  addLocalRoute(port: PortRec): void {
    const portAddress = port.portAddress;
    if (portAddress === null) return;
    const id = randomUUID();
    this.routes.set(id, {
      id,
      routerId: port.deviceId,
      type: "Local",
      srcNetworkAddr: "0.0.0.0",
      srcNetworkLength: 0,
      dstNetworkAddr: portAddress,
      dstNetworkLength: 32,
      nextHopPort: port.id,
      nextHopGateway: null,
      weight: 0,
    });
  }
}

// -- rendering that needs no other object ------------------------------------

export function renderTunnelZone(r: TunnelZoneRec): TunnelZone {
  return { id: r.id, name: r.name, type: r.type as TunnelZone["type"] };
}

export function renderHost(h: SimulatedHost): Host {
  return { id: h.id, name: h.name, alive: true };
}

export function renderDevice(r: DeviceRec): Bridge {
  return {
    id: r.id,
    tenantId: r.tenantId,
    name: r.name,
    inboundFilterId: r.inboundFilterId,
    outboundFilterId: r.outboundFilterId,
    ...structuredClone(r.operator),
  };
}

export function renderPort(r: PortRec): Port {
  const common = {
    id: r.id,
    deviceId: r.deviceId,
    inboundFilterId: r.inboundFilterId,
    outboundFilterId: r.outboundFilterId,
    ...structuredClone(r.operator),
    peerId: r.peerId,
    hostId: r.hostId,
    interfaceName: r.interfaceName,
  };
  if (r.type === "Bridge") return { ...common, type: "Bridge", vlanId: null };
  // RouterPort.java's afterFromProto: networkAddress/networkLength from the stored subnet.
  const [networkAddress, networkLength] = r.portSubnet?.split("/") ?? [null, null];
  return {
    ...common,
    type: "Router",
    portMac: r.portMac,
    portAddress: r.portAddress,
    networkAddress: networkAddress ?? null,
    networkLength: networkLength == null ? null : Number(networkLength),
  };
}

export function renderRoute(r: RouteRec): Route {
  const { id, routerId, type, nextHopPort, nextHopGateway, weight } = r;
  return {
    id,
    routerId,
    type: type as Route["type"],
    srcNetworkAddr: r.srcNetworkAddr,
    srcNetworkLength: r.srcNetworkLength,
    dstNetworkAddr: r.dstNetworkAddr,
    dstNetworkLength: r.dstNetworkLength,
    nextHopPort,
    nextHopGateway,
    weight,
    learned: false,
  };
}

export function renderChain(r: ChainRec): Chain {
  return { id: r.id, tenantId: r.tenantId, name: r.name };
}

export function renderMac(e: MacRec): MacPort {
  return { macAddr: e.macAddr, portId: e.portId, vlanId: 0 };
}

export function renderArp(e: ArpRec): IP4Mac {
  return { ip: e.ip, mac: e.mac };
}
