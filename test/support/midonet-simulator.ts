/**
 * An in-memory MidoNet REST API (the 5.x subset the controller uses), served
 * over real HTTP on 127.0.0.1. MidoNet itself cannot be installed here, so this
 * simulator answers the way the MidoNet cluster does for every call the
 * controller and its client make, errors included: 401 without a valid token,
 * 404 for a missing object or referent, 409 for duplicates and conflicts, 400
 * for validation, 406 for a wrong media type, 201 + Location and no body on
 * create, 204 on PUT and DELETE, Error-v1 bodies, the cascades of deletes, rule
 * positions, unknown body fields ignored, a GET without Accept refused (406), a
 * PUT replacing the whole object (what its body omits is cleared, routes left
 * alone), and MidoNet's known bugs (PUT of a tunnel zone conflicting with its
 * own name, 500 on a duplicate MAC or ARP entry).
 *
 * The routes and their handlers, one module per resource kind, are in
 * midonet-simulator/; this file is the HTTP server and the test hooks: hosts
 * to preload, a fault injector, a call log, snapshot() of every object, the
 * datapath learning and forgetting MAC and ARP entries, close().
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { isIPv4 } from "node:net";
import { messageOf } from "../../src/common/errors.js";
import type {
  Bridge,
  Chain,
  Host,
  HostInterfacePort,
  IP4Mac,
  MacPort,
  Port,
  Route,
  Router,
  Rule,
  TunnelZone,
  TunnelZoneHost,
} from "../../src/midonet/resources.js";
import { ApiError, badRequest, notFound } from "./midonet-simulator/body.js";
import { chainRoutes } from "./midonet-simulator/chain-handlers.js";
import { deviceRoutes } from "./midonet-simulator/device-handlers.js";
import { type FaultHandle, type FaultSpec, Faults } from "./midonet-simulator/faults.js";
import { hostRoutes } from "./midonet-simulator/host-handlers.js";
import { MT, mediaList, negotiate } from "./midonet-simulator/media-types.js";
import { portRoutes } from "./midonet-simulator/port-handlers.js";
import { rootRoutes } from "./midonet-simulator/root-handlers.js";
import { type Reply, type RouteDef, RouteTable } from "./midonet-simulator/route-table.js";
import { routerRouteRoutes } from "./midonet-simulator/router-route-handlers.js";
import { Session } from "./midonet-simulator/session.js";
import {
  renderArp,
  renderChain,
  renderDevice,
  renderHost,
  renderMac,
  renderPort,
  renderRoute,
  renderTunnelZone,
  type SimulatedHost,
  SimulatorState,
} from "./midonet-simulator/state.js";
import { stateTableRoutes } from "./midonet-simulator/state-table-handlers.js";
import { tunnelZoneRoutes } from "./midonet-simulator/tunnel-zone-handlers.js";

export type { FaultHandle, FaultSpec, SimulatedHost };

export interface MidonetSimulatorOptions {
  /** MidoNet hosts (agents) already registered. */
  hosts?: SimulatedHost[];
  /** Credentials POST /login accepts; default admin / admin, project admin. */
  user?: string;
  password?: string;
  project?: string;
  /** Lifetime of a token; default one hour. */
  tokenTtlMs?: number;
}

export interface CallRecord {
  method: string;
  /** Relative to the API base, without query. */
  path: string;
  /** 0 when the call was left hanging. */
  status: number;
  accept?: string;
  contentType?: string;
  /** Whether the call carried a valid X-Auth-Token. */
  authenticated: boolean;
  /** Set when an injected fault shaped the answer. */
  fault?: "status" | "delay" | "hang";
  /** A create's answer: the created object's path, relative to the API base. */
  location?: string;
}

export interface SimulatorSnapshot {
  tunnelZones: TunnelZone[];
  tunnelZoneHosts: TunnelZoneHost[];
  hosts: Host[];
  routers: Router[];
  bridges: Bridge[];
  ports: Port[];
  routes: Route[];
  chains: Chain[];
  rules: Rule[];
  hostInterfacePorts: HostInterfacePort[];
  /** Persistent entries only (what the API created); learned ones are the datapath's. */
  macTable: (MacPort & { bridgeId: string })[];
  arpTable: (IP4Mac & { bridgeId: string })[];
}

export const SIMULATOR_BASE_PATH = "/midonet-api";

const ROUTES: RouteDef[] = [
  ...rootRoutes,
  ...tunnelZoneRoutes,
  ...hostRoutes,
  ...deviceRoutes,
  ...portRoutes,
  ...routerRouteRoutes,
  ...chainRoutes,
  ...stateTableRoutes,
];

export async function startMidonetSimulator(
  options: MidonetSimulatorOptions = {},
): Promise<MidonetSimulator> {
  const sim = new MidonetSimulator(options);
  await sim.listen();
  return sim;
}

export class MidonetSimulator {
  /** e.g. http://127.0.0.1:40123/midonet-api */
  baseUrl = "";
  /** Every answered (or hung) call, in the order answered. */
  readonly calls: CallRecord[] = [];

  private readonly server: http.Server;
  private readonly state: SimulatorState;
  private readonly table = new RouteTable(ROUTES);
  private readonly faults = new Faults();
  private readonly timers = new Set<NodeJS.Timeout>();

  constructor(options: MidonetSimulatorOptions = {}) {
    this.state = new SimulatorState(
      new Session({
        user: options.user ?? "admin",
        password: options.password ?? "admin",
        project: options.project ?? "admin",
        tokenTtlMs: options.tokenTtlMs ?? 3_600_000,
      }),
    );
    for (const h of options.hosts ?? []) this.addHost(h);
    this.server = http.createServer((req, res) => {
      this.serve(req, res).catch((err: unknown) => {
        if (!res.headersSent) {
          const text = JSON.stringify({ code: 500, message: String(err) });
          res.writeHead(500, { "Content-Type": MT.error }).end(text);
        }
      });
    });
  }

  /** Starts listening on 127.0.0.1, on a free port. */
  async listen(): Promise<void> {
    await new Promise<void>((resolve, reject) => {
      this.server.once("error", reject);
      this.server.listen(0, "127.0.0.1", () => resolve());
    });
    const { port } = this.server.address() as AddressInfo;
    this.baseUrl = `http://127.0.0.1:${port}${SIMULATOR_BASE_PATH}`;
    this.state.baseUrl = this.baseUrl;
  }

  /** Stops the server, dropping hung and kept-alive connections. */
  async close(): Promise<void> {
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    await new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }

  // -- test hooks -----------------------------------------------------------

  addHost(host: SimulatedHost): void {
    const id = host.id.toLowerCase();
    this.state.hosts.set(id, { id, name: host.name });
  }

  /** A valid token, as POST /login would hand out. */
  issueToken(): string {
    return this.state.session.issue().key;
  }

  /** Invalidates every token: the next authenticated call gets 401. */
  expireTokens(): void {
    this.state.session.expireAll();
  }

  injectFault(spec: FaultSpec): FaultHandle {
    return this.faults.add(spec);
  }

  clearFaults(): void {
    this.faults.clear();
  }

  clearCalls(): void {
    this.calls.length = 0;
  }

  /** Calls that changed something (POST, PUT, DELETE), login excluded. */
  writes(): CallRecord[] {
    return this.calls.filter((c) => c.method !== "GET" && c.path !== "/login");
  }

  /** The datapath learns `mac` on `portId`, a port of that bridge (it replaces what it learned of that MAC). */
  learnMac(bridgeId: string, mac: string, portId: string): void {
    const bridge = bridgeId.toLowerCase();
    const port = this.state.ports.get(portId.toLowerCase());
    if (!this.state.bridges.has(bridge) || port?.type !== "Bridge" || port.deviceId !== bridge) {
      throw new Error(`learnMac: ${portId} is not a port of bridge ${bridgeId}`);
    }
    learn(this.state.learnedMacs, bridge, mac.toLowerCase(), port.id);
  }

  /** The datapath learns that `ip` is at `mac` on that bridge. */
  learnArp(bridgeId: string, ip: string, mac: string): void {
    const bridge = bridgeId.toLowerCase();
    if (!this.state.bridges.has(bridge)) throw new Error(`learnArp: no bridge ${bridgeId}`);
    if (!isIPv4(ip)) throw new Error(`learnArp: ${ip} is not an IPv4 address`);
    learn(this.state.learnedArps, bridge, ip, mac.toLowerCase());
  }

  /** What the datapath learned of `mac` ages out. */
  forgetMac(bridgeId: string, mac: string): void {
    this.state.learnedMacs.get(bridgeId.toLowerCase())?.delete(mac.toLowerCase());
  }

  forgetArp(bridgeId: string, ip: string): void {
    this.state.learnedArps.get(bridgeId.toLowerCase())?.delete(ip);
  }

  /** Every object, as GET would render it (without uri). */
  snapshot(): SimulatorSnapshot {
    const s = this.state;
    const tunnelZoneHosts: TunnelZoneHost[] = [];
    for (const tz of s.tunnelZones.values()) {
      for (const [hostId, ipAddress] of tz.members) {
        tunnelZoneHosts.push({ tunnelZoneId: tz.id, hostId, ipAddress });
      }
    }
    const macTable = [...s.macTables].flatMap(([bridgeId, table]) =>
      [...table.values()].map((e) => ({ bridgeId, ...renderMac(e) })),
    );
    const arpTable = [...s.arpTables].flatMap(([bridgeId, table]) =>
      [...table.values()].map((e) => ({ bridgeId, ...renderArp(e) })),
    );
    return structuredClone({
      tunnelZones: [...s.tunnelZones.values()].map(renderTunnelZone),
      tunnelZoneHosts,
      hosts: [...s.hosts.values()].map(renderHost),
      routers: [...s.routers.values()].map(renderDevice),
      bridges: [...s.bridges.values()].map(renderDevice),
      ports: [...s.ports.values()].map(renderPort),
      routes: [...s.routes.values()].map(renderRoute),
      chains: [...s.chains.values()].map(renderChain),
      rules: [...s.rules.values()].map((r) => s.renderRule(r)),
      hostInterfacePorts: [...s.bindings.values()].map((b) => ({ ...b })),
      macTable,
      arpTable,
    });
  }

  // -- HTTP -----------------------------------------------------------------

  private async serve(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const method = (req.method ?? "GET").toUpperCase();
    const url = new URL(req.url ?? "/", "http://simulator");
    const rel = url.pathname.startsWith(SIMULATOR_BASE_PATH)
      ? url.pathname.slice(SIMULATOR_BASE_PATH.length) || "/"
      : undefined;
    const record: CallRecord = {
      method,
      path: rel ?? url.pathname,
      status: 0,
      authenticated: false,
    };
    if (req.headers.accept !== undefined) record.accept = req.headers.accept;
    if (req.headers["content-type"] !== undefined) {
      record.contentType = req.headers["content-type"];
    }
    const rawBody = await readBody(req);
    record.authenticated = this.state.session.valid(req.headers["x-auth-token"]);

    const fault = rel === undefined ? undefined : this.faults.take(method, rel);
    if (fault && (await this.applyFault(fault, res, record))) return;
    try {
      if (rel === undefined) throw notFound(`no such resource: ${url.pathname}`);
      const { reply, type } = this.dispatch(method, rel, req.headers, rawBody, record);
      if (reply.location !== undefined) {
        res.setHeader("Location", this.baseUrl + reply.location);
        record.location = reply.location;
      }
      for (const [name, value] of Object.entries(reply.headers ?? {})) res.setHeader(name, value);
      this.finish(res, record, reply.status, reply.body, type);
    } catch (err) {
      const status = err instanceof ApiError ? err.status : 500;
      const message = messageOf(err);
      const violations = err instanceof ApiError ? err.violations : undefined;
      if (err instanceof ApiError) {
        for (const [name, value] of Object.entries(err.headers ?? {})) res.setHeader(name, value);
      }
      this.finish(
        res,
        record,
        status,
        { code: status, message, ...(violations ? { violations } : {}) },
        MT.error,
      );
    }
  }

  /** Shapes the answer as the fault says; true when it answered (or hung) the call itself. */
  private async applyFault(
    fault: FaultSpec,
    res: http.ServerResponse,
    record: CallRecord,
  ): Promise<boolean> {
    if (fault.hang) {
      record.fault = "hang";
      this.calls.push(record);
      return true; // never answered; close() drops the connection
    }
    if (fault.delayMs !== undefined) {
      record.fault = "delay";
      await new Promise<void>((resolve) => {
        const t = setTimeout(() => {
          this.timers.delete(t);
          resolve();
        }, fault.delayMs);
        this.timers.add(t);
      });
      if (fault.status === undefined) return false;
    }
    record.fault = "status";
    const status = fault.status ?? 500;
    this.finish(res, record, status, { code: status, message: "injected fault" }, MT.error);
    return true;
  }

  /** Authentication, the route, media types, the body, then the handler. */
  private dispatch(
    method: string,
    path: string,
    headers: http.IncomingHttpHeaders,
    rawBody: string,
    record: CallRecord,
  ): { reply: Reply; type: string | undefined } {
    if (path !== "/login" && !record.authenticated) {
      throw new ApiError(401, "Authentication error: missing or invalid X-Auth-Token");
    }
    const { route, params } = this.table.match(method, path);
    let body: unknown;
    if (route.consumes) {
      const ct = mediaList(headers["content-type"])[0];
      if (ct === undefined || !route.consumes.some((c) => c.toLowerCase() === ct)) {
        throw new ApiError(
          406,
          `unsupported Content-Type ${headers["content-type"] ?? "(none)"}; expected ${route.consumes.join(" or ")}`,
        );
      }
    }
    // MidonetResource.scala's get and list answer 406 unless the Accept header names
    // a type they allow: a GET without one gets no default.
    const noAccept = method === "GET" && mediaList(headers.accept).length === 0;
    const type =
      route.produces && !noAccept ? negotiate(headers.accept, route.produces) : undefined;
    if (route.produces && type === undefined) {
      throw new ApiError(
        406,
        `cannot produce ${headers.accept}; available: ${route.produces.join(", ")}`,
      );
    }
    if (route.consumes) {
      try {
        body = JSON.parse(rawBody);
      } catch {
        throw badRequest("the body is not valid JSON");
      }
    }
    return { reply: route.handle(this.state, { params, body, headers }), type };
  }

  private finish(
    res: http.ServerResponse,
    record: CallRecord,
    status: number,
    body: unknown,
    type: string | undefined,
  ): void {
    record.status = status;
    this.calls.push(record);
    if (body === undefined) {
      res.writeHead(status, { "Content-Length": "0" });
      res.end();
      return;
    }
    const text = JSON.stringify(body);
    res.writeHead(status, {
      "Content-Type": type ?? "application/json",
      "Content-Length": String(Buffer.byteLength(text)),
    });
    res.end(text);
  }
}

/** Sets `key` → `value` in the bridge's table of learned entries. */
function learn(
  tables: Map<string, Map<string, string>>,
  bridgeId: string,
  key: string,
  value: string,
): void {
  const table = tables.get(bridgeId) ?? new Map<string, string>();
  table.set(key, value);
  tables.set(bridgeId, table);
}

async function readBody(req: http.IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}
