/**
 * A typed client for the subset of MidoNet's REST API (5.x) that we use: the
 * resources, media types and paths in resources.ts. What everyone imports.
 *
 * It is two parts put together: the transport (api-transport.ts: HTTP,
 * timeouts, retries, login, media types, answers mapped to results and
 * errors) and the typed views over it, one per resource (api-resources.ts).
 */

import {
  type ArpTableApi,
  arpTableApi,
  type ChildResourceApi,
  type HostApi,
  type HostInterfacePortApi,
  hostApi,
  hostInterfacePortApi,
  type MacTableApi,
  macTableApi,
  type PortApi,
  type PortLinkApi,
  portApi,
  portLinkApi,
  type RootResourceApi,
  rootApi,
  routeApi,
  ruleApi,
  type TunnelZoneHostApi,
  tunnelZoneHostApi,
  type UpdatableRootResourceApi,
  updatableApi,
} from "./api-resources.js";
import { type CreateResult, type MidonetClientOptions, MidonetTransport } from "./api-transport.js";
import {
  type Application,
  type Bridge,
  bridgePath,
  bridgesPath,
  type Chain,
  chainPath,
  chainsPath,
  type MidonetObject,
  type Route,
  type Router,
  type Rule,
  routerPath,
  routersPath,
  type Token,
  type TunnelZone,
  tunnelZonePath,
  tunnelZonesPath,
  type UpdatableKind,
} from "./resources.js";

// The names the client's users import from here, wherever they are defined.
export type {
  ArpTableApi,
  ChildResourceApi,
  HostApi,
  HostInterfacePortApi,
  MacTableApi,
  PortApi,
  PortLinkApi,
  RootResourceApi,
  TunnelZoneHostApi,
  UpdatableRootResourceApi,
} from "./api-resources.js";
export {
  type AttemptInfo,
  type CreateResult,
  type FailureReason,
  type HttpMethod,
  MidonetApiError,
  type MidonetApiErrorInit,
  type MidonetClientOptions,
} from "./api-transport.js";

export class MidonetClient {
  readonly tunnelZones: UpdatableRootResourceApi<TunnelZone>;
  readonly tunnelZoneHosts: TunnelZoneHostApi;
  readonly routers: UpdatableRootResourceApi<Router>;
  readonly bridges: UpdatableRootResourceApi<Bridge>;
  readonly ports: PortApi;
  readonly portLinks: PortLinkApi;
  readonly routes: ChildResourceApi<Route>;
  readonly chains: RootResourceApi<Chain>;
  readonly rules: ChildResourceApi<Rule>;
  readonly hosts: HostApi;
  readonly hostInterfacePorts: HostInterfacePortApi;
  readonly macTable: MacTableApi;
  readonly arpTable: ArpTableApi;

  private readonly transport: MidonetTransport;

  constructor(options: MidonetClientOptions) {
    const t = new MidonetTransport(options);
    this.transport = t;
    this.tunnelZones = updatableApi<TunnelZone>(t, "TunnelZone", tunnelZonesPath, tunnelZonePath);
    this.routers = updatableApi<Router>(t, "Router", routersPath, routerPath);
    this.bridges = updatableApi<Bridge>(t, "Bridge", bridgesPath, bridgePath);
    this.chains = rootApi<Chain>(t, "Chain", chainsPath, chainPath);
    this.tunnelZoneHosts = tunnelZoneHostApi(t);
    this.ports = portApi(t);
    this.portLinks = portLinkApi(t);
    this.routes = routeApi(t);
    this.rules = ruleApi(t);
    this.hosts = hostApi(t);
    this.hostInterfacePorts = hostInterfacePortApi(t);
    this.macTable = macTableApi(t);
    this.arpTable = arpTableApi(t);
  }

  // -- generic operations on any object (the transport's) --------------------

  /** POST the object where it belongs. 409 (or MidoNet's 500 for a duplicate MAC/ARP entry) is "exists". */
  create(obj: MidonetObject): Promise<CreateResult> {
    return this.transport.create(obj);
  }

  /** GET the object as the server has it; undefined when it does not exist. */
  get<O extends MidonetObject>(obj: O): Promise<O["body"] | undefined> {
    return this.transport.get(obj);
  }

  /** PUT the object's writable fields. A missing object is an error (status 404). */
  update(obj: MidonetObject & { kind: UpdatableKind }): Promise<void> {
    return this.transport.update(obj);
  }

  /** DELETE the object; false when it was already gone. */
  delete(obj: MidonetObject): Promise<boolean> {
    return this.transport.delete(obj);
  }

  /** GET / : the Application object. */
  application(): Promise<Application> {
    return this.transport.application();
  }

  /** POST /login now; normally done on the first 401. */
  login(): Promise<Token> {
    return this.transport.login();
  }
}
