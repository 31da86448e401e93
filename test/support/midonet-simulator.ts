/**
 * An in-memory MidoNet REST API (the 5.x subset the controller uses),
 * served over real HTTP on 127.0.0.1. MidoNet itself cannot be installed here,
 * so this simulator answers the way the MidoNet cluster does, errors included:
 * 401 without a valid token, 404 for a missing object or referent, 409 for
 * duplicates and conflicts, 400 for validation, 406 for a wrong media type,
 * 201 + Location and no body on create, 204 on PUT and DELETE, Error-v1 bodies,
 * the cascades of deletes, rule positions, and MidoNet's known bugs (PUT of a
 * tunnel zone conflicting with its own name, PUT clearing an omitted portMac,
 * 500 on a duplicate MAC or ARP entry).
 *
 * MAC and ARP tables are MidoNet's state tables (DirectoryStateTable): besides
 * the persistent entries the API creates, the datapath LEARNS entries (a MAC
 * seen on a port, an IP seen with a MAC). The list GETs answer the table's
 * remoteSnapshot: one value per table key (the MAC, the IP), a learned value
 * over a persistent one. DELETE removes only the persistent entry and answers
 * 204 whether or not there was one, so a learned entry stays; GET of one entry
 * answers 200 when the persistent entry exists or the learned value equals it.
 *
 * Paths and media types are written out here literally instead of imported from
 * src/midonet/resources.ts: the simulator is the oracle the client is checked
 * against, and sharing the strings would hide a mistake in them.
 *
 * Test hooks: hosts to preload, a fault injector (answer a status, delay or hang,
 * for the next N calls or for a while, per method and path pattern), a call log,
 * snapshot() of every object, the datapath learning and forgetting MAC and ARP
 * entries (learnMac, learnArp, forgetMac, forgetArp), close().
 */
import { randomBytes, randomUUID } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { isIPv4 } from "node:net";
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

// ---------------------------------------------------------------------------
// Public surface
// ---------------------------------------------------------------------------

export interface SimulatedHost {
  id: string;
  name: string;
}

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

export interface FaultSpec {
  /** Only this method (any when omitted). */
  method?: string;
  /** Path relative to the API base: a RegExp, or a string where `*` matches anything. Any when omitted. */
  path?: string | RegExp;
  /** Answer this status with an Error-v1 body (default 500, unless hang or delayMs is set). */
  status?: number;
  /** Never answer (the connection stays open until the client gives up or close()). */
  hang?: boolean;
  /** Answer normally, but only after this long. */
  delayMs?: number;
  /** Only for the next N matching calls. */
  times?: number;
  /** Only for this long from now. */
  forMs?: number;
}

export interface FaultHandle {
  /** Calls the fault has shaped so far. */
  readonly hits: number;
  remove(): void;
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

export async function startMidonetSimulator(
  options: MidonetSimulatorOptions = {},
): Promise<MidonetSimulator> {
  const sim = new MidonetSimulator(options);
  await sim.listen();
  return sim;
}

// ---------------------------------------------------------------------------
// Media types (literal, see the header comment)
// ---------------------------------------------------------------------------

const mt = (name: string, v: number) => `application/vnd.org.midonet.${name}-v${v}+json`;
const cmt = (name: string, v: number) =>
  `application/vnd.org.midonet.collection.${name}-v${v}+json`;

const MT = {
  application: [mt("Application", 5)],
  token: [mt("Token", 1)],
  error: mt("Error", 1),
  tunnelZone: [mt("TunnelZone", 1)],
  tunnelZones: [cmt("TunnelZone", 1)],
  tunnelZoneHost: [mt("TunnelZoneHost", 1)],
  tunnelZoneHosts: [cmt("TunnelZoneHost", 1)],
  router: [mt("Router", 3)],
  routers: [cmt("Router", 3)],
  bridge: [mt("Bridge", 4), mt("Bridge", 5)],
  bridges: [cmt("Bridge", 4), cmt("Bridge", 5)],
  port: [mt("Port", 3), mt("Port", 4)],
  ports: [cmt("Port", 3), cmt("Port", 4)],
  portLink: [mt("PortLink", 1)],
  route: [mt("Route", 1)],
  routes: [cmt("Route", 1)],
  chain: [mt("Chain", 1)],
  chains: [cmt("Chain", 1)],
  rule: [mt("Rule", 2)],
  rules: [cmt("Rule", 2)],
  host: [mt("Host", 3)],
  hosts: [cmt("Host", 3)],
  hostInterfacePort: [mt("HostInterfacePort", 1)],
  hostInterfacePorts: [cmt("HostInterfacePort", 1)],
  macPort: [mt("MacPort", 2)],
  macPorts: [cmt("MacPort", 2)],
  ip4Mac: [mt("IP4Mac", 1)],
  ip4Macs: [cmt("IP4Mac", 1)],
};

function mediaList(header: string | undefined): string[] {
  if (!header) return [];
  return header
    .split(",")
    .map((s) => (s.split(";")[0] ?? "").trim().toLowerCase())
    .filter((s) => s.length > 0);
}

/** The produced type the Accept header selects (matched case-insensitively), or undefined. */
function negotiate(accept: string | undefined, produces: string[]): string | undefined {
  const wanted = mediaList(accept);
  if (wanted.length === 0) return produces[0];
  for (const w of wanted) {
    if (w === "*/*") return produces[0];
    const hit = w.endsWith("/*")
      ? produces.find((p) => p.toLowerCase().startsWith(w.slice(0, -1)))
      : produces.find((p) => p.toLowerCase() === w);
    if (hit) return hit;
  }
  return undefined;
}

// ---------------------------------------------------------------------------
// Errors and validation
// ---------------------------------------------------------------------------

class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

const badRequest = (m: string) => new ApiError(400, m);
const notFound = (m: string) => new ApiError(404, m);
const conflict = (m: string) => new ApiError(409, m);

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const MAC_RE = /^[0-9a-f]{2}(:[0-9a-f]{2}){5}$/i;

function randomMac(): string {
  // Locally administered, unicast: what MidoNet's MAC.random() hands out.
  const b = randomBytes(5);
  return ["02", ...Array.from(b, (x) => x.toString(16).padStart(2, "0"))].join(":");
}

/**
 * A request body checked the way MidoNet's JSON binding does: a field the
 * resource does not have is a 400 (a typo such as nwDstAdress would otherwise
 * silently drop a match condition); read-only fields are accepted and ignored.
 * null stands for "not set".
 */
class Body {
  private constructor(
    private readonly kind: string,
    private readonly obj: Record<string, unknown>,
  ) {}

  static parse(
    kind: string,
    raw: unknown,
    writable: readonly string[],
    readOnly: readonly string[] = [],
  ): Body {
    if (typeof raw !== "object" || raw === null || Array.isArray(raw)) {
      throw badRequest(`${kind}: the body must be a JSON object`);
    }
    const obj = raw as Record<string, unknown>;
    for (const key of Object.keys(obj)) {
      if (!writable.includes(key) && !readOnly.includes(key)) {
        throw badRequest(`${kind}: unrecognized field "${key}"`);
      }
    }
    const writableOnly: Record<string, unknown> = {};
    for (const key of writable) if (key in obj) writableOnly[key] = obj[key];
    return new Body(kind, writableOnly);
  }

  has(key: string): boolean {
    return this.obj[key] !== undefined && this.obj[key] !== null;
  }

  raw(key: string): unknown {
    return this.obj[key];
  }

  private fail(key: string, what: string): never {
    throw badRequest(`${this.kind}.${key}: ${what}`);
  }

  uuid(key: string, required = false): string | null {
    if (!this.has(key)) return required ? this.fail(key, "may not be null") : null;
    const v = this.obj[key];
    if (typeof v !== "string" || !UUID_RE.test(v)) this.fail(key, "is not a valid UUID");
    return v.toLowerCase();
  }

  str(key: string, required = false): string | null {
    if (!this.has(key)) return required ? this.fail(key, "may not be null") : null;
    const v = this.obj[key];
    if (typeof v !== "string") this.fail(key, "must be a string");
    return v;
  }

  oneOf<T extends string>(key: string, values: readonly T[], required = false): T | null {
    const v = this.str(key, required);
    if (v === null) return null;
    if (!(values as readonly string[]).includes(v)) {
      this.fail(key, `must be one of ${values.join(", ")}`);
    }
    return v as T;
  }

  int(key: string, min: number, max: number, required = false): number | null {
    if (!this.has(key)) return required ? this.fail(key, "may not be null") : null;
    const v = this.obj[key];
    if (typeof v !== "number" || !Number.isInteger(v)) this.fail(key, "must be an integer");
    if (v < min || v > max) this.fail(key, `must be between ${min} and ${max}`);
    return v;
  }

  bool(key: string): boolean | null {
    if (!this.has(key)) return null;
    const v = this.obj[key];
    if (typeof v !== "boolean") this.fail(key, "must be a boolean");
    return v;
  }

  ipv4(key: string, required = false): string | null {
    const v = this.str(key, required);
    if (v !== null && !isIPv4(v)) this.fail(key, "is an invalid IP format");
    return v;
  }

  mac(key: string, required = false): string | null {
    const v = this.str(key, required);
    if (v !== null && !MAC_RE.test(v)) this.fail(key, "is an invalid MAC format");
    return v === null ? null : v.toLowerCase();
  }

  uuidList(key: string): string[] | null {
    if (!this.has(key)) return null;
    const v = this.obj[key];
    if (!Array.isArray(v) || v.some((x) => typeof x !== "string" || !UUID_RE.test(x))) {
      this.fail(key, "must be a list of UUIDs");
    }
    return (v as string[]).map((x) => x.toLowerCase());
  }
}

function validCidr(s: unknown): s is string {
  if (typeof s !== "string") return false;
  const [addr, len, extra] = s.split("/");
  if (extra !== undefined || addr === undefined || len === undefined) return false;
  const n = Number(len);
  return isIPv4(addr) && /^\d{1,2}$/.test(len) && n >= 0 && n <= 32;
}

// ---------------------------------------------------------------------------
// State
// ---------------------------------------------------------------------------

interface TunnelZoneRec {
  id: string;
  name: string;
  type: string;
  members: Map<string, string>; // hostId -> ipAddress
}

interface DeviceRec {
  id: string;
  tenantId: string | null;
  name: string | null;
  inboundFilterId: string | null;
  outboundFilterId: string | null;
  adminStateUp: boolean;
}

interface PortRec {
  id: string;
  type: "Bridge" | "Router";
  deviceId: string;
  inboundFilterId: string | null;
  outboundFilterId: string | null;
  adminStateUp: boolean;
  peerId: string | null;
  hostId: string | null;
  interfaceName: string | null;
  vlanId: number | null;
  portSubnet: string[];
  portMac: string | null;
}

interface RouteRec {
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

interface ChainRec {
  id: string;
  tenantId: string | null;
  name: string | null;
  ruleIds: string[];
}

interface RuleRec {
  id: string;
  chainId: string;
  type: string;
  jumpChainId: string | null;
  /** Every other field, validated, as sent. */
  fields: Record<string, unknown>;
}

interface BindingRec {
  hostId: string;
  portId: string;
  interfaceName: string;
}

interface MacRec {
  macAddr: string;
  portId: string;
}

interface ArpRec {
  ip: string;
  mac: string;
}

// ---------------------------------------------------------------------------
// Routing
// ---------------------------------------------------------------------------

type Method = "GET" | "POST" | "PUT" | "DELETE";

interface Ctx {
  params: Record<string, string>;
  body: unknown;
  headers: http.IncomingHttpHeaders;
}

interface Reply {
  status: number;
  body?: unknown;
  location?: string;
}

interface Endpoint {
  /** Content-Type a POST or PUT must carry. */
  consumes?: string[];
  /** Media types a GET can answer with (Accept selects one). */
  produces?: string[];
  handle: (ctx: Ctx) => Reply;
}

interface RouteDef {
  pattern: string[];
  methods: Partial<Record<Method, Endpoint>>;
}

interface ActiveFault {
  spec: FaultSpec;
  pathRe: RegExp | undefined;
  remaining: number | undefined;
  until: number | undefined;
  hits: number;
  removed: boolean;
}

function globToRegExp(glob: string): RegExp {
  const escaped = glob.replace(/[.+?^${}()|[\]\\]/g, "\\$&").replaceAll("*", ".*");
  return new RegExp(`^${escaped}$`);
}

const RULE_TYPES = [
  "accept",
  "drop",
  "reject",
  "return",
  "jump",
  "dnat",
  "snat",
  "rev_dnat",
  "rev_snat",
] as const;
const NAT_RULE_TYPES = ["dnat", "snat", "rev_dnat", "rev_snat"];
const FORWARD_NAT_RULE_TYPES = ["dnat", "snat"];
const CONDITION_FIELDS = [
  "condInvert",
  "matchForwardFlow",
  "matchReturnFlow",
  "inPorts",
  "invInPorts",
  "outPorts",
  "invOutPorts",
  "dlType",
  "invDlType",
  "dlSrc",
  "invDlSrc",
  "dlDst",
  "invDlDst",
  "nwTos",
  "invNwTos",
  "nwProto",
  "invNwProto",
  "nwSrcAddress",
  "nwSrcLength",
  "invNwSrc",
  "nwDstAddress",
  "nwDstLength",
  "invNwDst",
  "tpSrc",
  "invTpSrc",
  "tpDst",
  "invTpDst",
];
const ROUTE_TYPES = ["Normal", "BlackHole", "Reject", "Local"] as const;
const TUNNEL_ZONE_TYPES = ["gre", "vxlan", "vtep"] as const;

// ---------------------------------------------------------------------------
// The simulator
// ---------------------------------------------------------------------------

export class MidonetSimulator {
  /** e.g. http://127.0.0.1:40123/midonet-api */
  baseUrl = "";
  /** Every answered (or hung) call, in the order answered. */
  readonly calls: CallRecord[] = [];

  private readonly server: http.Server;
  private readonly user: string;
  private readonly password: string;
  private readonly project: string;
  private readonly tokenTtlMs: number;
  private readonly tokens = new Map<string, number>(); // key -> expiry (ms)
  private readonly faults: ActiveFault[] = [];
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly routes: RouteDef[];

  private readonly hosts = new Map<string, SimulatedHost>();
  private readonly tunnelZones = new Map<string, TunnelZoneRec>();
  private readonly routers = new Map<string, DeviceRec>();
  private readonly bridges = new Map<string, DeviceRec>();
  private readonly ports = new Map<string, PortRec>();
  private readonly routeRecs = new Map<string, RouteRec>();
  private readonly chains = new Map<string, ChainRec>();
  private readonly rules = new Map<string, RuleRec>();
  private readonly bindings = new Map<string, BindingRec>(); // portId -> binding
  private readonly macTables = new Map<string, Map<string, MacRec>>(); // bridgeId -> key -> entry
  private readonly arpTables = new Map<string, Map<string, ArpRec>>();
  // What the datapath learned: bridgeId -> MAC -> port, bridgeId -> IP -> MAC.
  private readonly learnedMacs = new Map<string, Map<string, string>>();
  private readonly learnedArps = new Map<string, Map<string, string>>();

  constructor(options: MidonetSimulatorOptions = {}) {
    this.user = options.user ?? "admin";
    this.password = options.password ?? "admin";
    this.project = options.project ?? "admin";
    this.tokenTtlMs = options.tokenTtlMs ?? 3_600_000;
    for (const h of options.hosts ?? []) this.addHost(h);
    this.routes = this.buildRoutes();
    this.server = http.createServer((req, res) => {
      this.serve(req, res).catch((err: unknown) => {
        if (!res.headersSent) this.sendError(res, 500, String(err));
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
    this.hosts.set(host.id.toLowerCase(), { id: host.id.toLowerCase(), name: host.name });
  }

  /** A valid token, as POST /login would hand out. */
  issueToken(): string {
    const key = randomBytes(16).toString("hex");
    this.tokens.set(key, Date.now() + this.tokenTtlMs);
    return key;
  }

  /** Invalidates every token: the next authenticated call gets 401. */
  expireTokens(): void {
    this.tokens.clear();
  }

  injectFault(spec: FaultSpec): FaultHandle {
    const fault: ActiveFault = {
      spec,
      pathRe:
        spec.path === undefined
          ? undefined
          : typeof spec.path === "string"
            ? globToRegExp(spec.path)
            : spec.path,
      remaining: spec.times,
      until: spec.forMs === undefined ? undefined : Date.now() + spec.forMs,
      hits: 0,
      removed: false,
    };
    this.faults.push(fault);
    return {
      get hits() {
        return fault.hits;
      },
      remove: () => {
        fault.removed = true;
      },
    };
  }

  clearFaults(): void {
    for (const f of this.faults) f.removed = true;
    this.faults.length = 0;
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
    const port = this.ports.get(portId.toLowerCase());
    if (!this.bridges.has(bridge) || port?.type !== "Bridge" || port.deviceId !== bridge) {
      throw new Error(`learnMac: ${portId} is not a port of bridge ${bridgeId}`);
    }
    learn(this.learnedMacs, bridge, mac.toLowerCase(), port.id);
  }

  /** The datapath learns that `ip` is at `mac` on that bridge. */
  learnArp(bridgeId: string, ip: string, mac: string): void {
    const bridge = bridgeId.toLowerCase();
    if (!this.bridges.has(bridge)) throw new Error(`learnArp: no bridge ${bridgeId}`);
    if (!isIPv4(ip)) throw new Error(`learnArp: ${ip} is not an IPv4 address`);
    learn(this.learnedArps, bridge, ip, mac.toLowerCase());
  }

  /** What the datapath learned of `mac` ages out. */
  forgetMac(bridgeId: string, mac: string): void {
    this.learnedMacs.get(bridgeId.toLowerCase())?.delete(mac.toLowerCase());
  }

  forgetArp(bridgeId: string, ip: string): void {
    this.learnedArps.get(bridgeId.toLowerCase())?.delete(ip);
  }

  /** Every object, as GET would render it (without uri). */
  snapshot(): SimulatorSnapshot {
    const tunnelZoneHosts: TunnelZoneHost[] = [];
    for (const tz of this.tunnelZones.values()) {
      for (const [hostId, ipAddress] of tz.members) {
        tunnelZoneHosts.push({ tunnelZoneId: tz.id, hostId, ipAddress });
      }
    }
    const macTable: (MacPort & { bridgeId: string })[] = [];
    for (const [bridgeId, table] of this.macTables) {
      for (const e of table.values()) macTable.push({ bridgeId, ...this.renderMac(e) });
    }
    const arpTable: (IP4Mac & { bridgeId: string })[] = [];
    for (const [bridgeId, table] of this.arpTables) {
      for (const e of table.values()) arpTable.push({ bridgeId, ...this.renderArp(e) });
    }
    return structuredClone({
      tunnelZones: [...this.tunnelZones.values()].map((r) => this.renderTunnelZone(r)),
      tunnelZoneHosts,
      hosts: [...this.hosts.values()].map((h) => this.renderHost(h)),
      routers: [...this.routers.values()].map((r) => this.renderDevice(r)),
      bridges: [...this.bridges.values()].map((r) => this.renderDevice(r)),
      ports: [...this.ports.values()].map((r) => this.renderPort(r)),
      routes: [...this.routeRecs.values()].map((r) => this.renderRoute(r)),
      chains: [...this.chains.values()].map((r) => this.renderChain(r)),
      rules: [...this.rules.values()].map((r) => this.renderRule(r)),
      hostInterfacePorts: [...this.bindings.values()].map((b) => ({ ...b })),
      macTable,
      arpTable,
    });
  }

  // -- HTTP plumbing --------------------------------------------------------

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
    record.authenticated = this.tokenValid(req.headers["x-auth-token"]);

    const fault = rel === undefined ? undefined : this.takeFault(method, rel);
    if (fault?.hang) {
      record.fault = "hang";
      this.calls.push(record);
      return; // never answered; close() drops the connection
    }
    if (fault?.delayMs !== undefined) {
      record.fault = "delay";
      await new Promise<void>((resolve) => {
        const t = setTimeout(() => {
          this.timers.delete(t);
          resolve();
        }, fault.delayMs);
        this.timers.add(t);
      });
    }
    if (fault && !fault.hang && (fault.status !== undefined || fault.delayMs === undefined)) {
      record.fault = "status";
      const status = fault.status ?? 500;
      this.finish(res, record, status, { code: status, message: "injected fault" }, MT.error);
      return;
    }

    let reply: Reply;
    let replyType: string | undefined;
    try {
      if (rel === undefined) throw notFound(`no such resource: ${url.pathname}`);
      const isLogin = rel === "/login";
      if (!isLogin && !record.authenticated) {
        throw new ApiError(401, "Authentication error: missing or invalid X-Auth-Token");
      }
      const { endpoint, params } = this.match(method, rel);
      if (endpoint.consumes) {
        const ct = mediaList(req.headers["content-type"])[0];
        if (ct === undefined || !endpoint.consumes.some((c) => c.toLowerCase() === ct)) {
          throw new ApiError(
            406,
            `unsupported Content-Type ${req.headers["content-type"] ?? "(none)"}; expected ${endpoint.consumes.join(" or ")}`,
          );
        }
      }
      if (endpoint.produces) {
        replyType = negotiate(req.headers.accept, endpoint.produces);
        if (replyType === undefined) {
          throw new ApiError(
            406,
            `cannot produce ${req.headers.accept}; available: ${endpoint.produces.join(", ")}`,
          );
        }
      }
      let body: unknown;
      if (endpoint.consumes) {
        try {
          body = JSON.parse(rawBody);
        } catch {
          throw badRequest("the body is not valid JSON");
        }
      }
      reply = endpoint.handle({ params, body, headers: req.headers });
    } catch (err) {
      const status = err instanceof ApiError ? err.status : 500;
      const message = err instanceof Error ? err.message : String(err);
      this.finish(res, record, status, { code: status, message }, MT.error);
      return;
    }
    if (reply.location !== undefined) {
      res.setHeader("Location", this.baseUrl + reply.location);
      record.location = reply.location;
    }
    this.finish(res, record, reply.status, reply.body, replyType);
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

  private sendError(res: http.ServerResponse, status: number, message: string): void {
    const text = JSON.stringify({ code: status, message });
    res.writeHead(status, { "Content-Type": MT.error }).end(text);
  }

  private tokenValid(header: string | string[] | undefined): boolean {
    if (typeof header !== "string") return false;
    const expiry = this.tokens.get(header);
    return expiry !== undefined && expiry > Date.now();
  }

  private takeFault(method: string, path: string): FaultSpec | undefined {
    const now = Date.now();
    for (const f of this.faults) {
      if (f.removed) continue;
      if (f.until !== undefined && now > f.until) continue;
      if (f.remaining !== undefined && f.remaining <= 0) continue;
      if (f.spec.method !== undefined && f.spec.method.toUpperCase() !== method) continue;
      if (f.pathRe !== undefined && !f.pathRe.test(path)) continue;
      if (f.remaining !== undefined) f.remaining--;
      f.hits++;
      return f.spec;
    }
    return undefined;
  }

  private match(
    method: string,
    path: string,
  ): { endpoint: Endpoint; params: Record<string, string> } {
    const segs = path.split("/").filter((s) => s.length > 0);
    for (const route of this.routes) {
      if (route.pattern.length !== segs.length) continue;
      const params: Record<string, string> = {};
      let ok = true;
      for (let i = 0; i < segs.length; i++) {
        const p = route.pattern[i] as string;
        const s = segs[i] as string;
        if (p.startsWith(":")) {
          try {
            params[p.slice(1)] = decodeURIComponent(s);
          } catch {
            ok = false;
          }
        } else if (p !== s) ok = false;
        if (!ok) break;
      }
      if (!ok) continue;
      const endpoint = route.methods[method as Method];
      if (!endpoint) {
        throw new ApiError(405, `${method} is not allowed on ${path}`);
      }
      return { endpoint, params };
    }
    throw notFound(`no such resource: ${path}`);
  }

  // -- lookups --------------------------------------------------------------

  /** A path id that is not a UUID names nothing: 404, as for a missing object. */
  private static pathId(value: string | undefined, what: string): string {
    if (value === undefined || !UUID_RE.test(value)) throw notFound(`${what} ${value} not found`);
    return value.toLowerCase();
  }

  private getOr404<T>(map: Map<string, T>, id: string | undefined, what: string): T {
    const key = MidonetSimulator.pathId(id, what);
    const rec = map.get(key);
    if (!rec) throw notFound(`${what} ${id} not found`);
    return rec;
  }

  private requireChain(id: string | null, field: string): void {
    if (id !== null && !this.chains.has(id)) throw notFound(`${field}: chain ${id} not found`);
  }

  // -- rendering (what GET answers) -----------------------------------------

  private renderTunnelZone(r: TunnelZoneRec): TunnelZone {
    return { id: r.id, name: r.name, type: r.type as TunnelZone["type"] };
  }

  private renderHost(h: SimulatedHost): Host {
    return { id: h.id, name: h.name, alive: true };
  }

  private renderDevice(r: DeviceRec): Bridge {
    return {
      id: r.id,
      tenantId: r.tenantId,
      name: r.name,
      inboundFilterId: r.inboundFilterId,
      outboundFilterId: r.outboundFilterId,
      adminStateUp: r.adminStateUp,
    };
  }

  private renderPort(r: PortRec): Port {
    const common = {
      id: r.id,
      deviceId: r.deviceId,
      inboundFilterId: r.inboundFilterId,
      outboundFilterId: r.outboundFilterId,
      adminStateUp: r.adminStateUp,
      peerId: r.peerId,
      hostId: r.hostId,
      interfaceName: r.interfaceName,
    };
    if (r.type === "Bridge") return { ...common, type: "Bridge", vlanId: r.vlanId };
    const first = r.portSubnet[0]?.split("/");
    return {
      ...common,
      type: "Router",
      portSubnet: [...r.portSubnet],
      portMac: r.portMac,
      portAddress: first?.[0] ?? null,
      networkAddress: first ? networkOf(first[0] as string, Number(first[1])) : null,
      networkLength: first ? Number(first[1]) : null,
    };
  }

  private renderRoute(r: RouteRec): Route {
    return {
      id: r.id,
      routerId: r.routerId,
      type: r.type as Route["type"],
      srcNetworkAddr: r.srcNetworkAddr,
      srcNetworkLength: r.srcNetworkLength,
      dstNetworkAddr: r.dstNetworkAddr,
      dstNetworkLength: r.dstNetworkLength,
      nextHopPort: r.nextHopPort,
      nextHopGateway: r.nextHopGateway,
      weight: r.weight,
      learned: false,
    };
  }

  private renderChain(r: ChainRec): Chain {
    return { id: r.id, tenantId: r.tenantId, name: r.name };
  }

  private renderRule(r: RuleRec): Rule {
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

  private renderMac(e: MacRec): MacPort {
    return { macAddr: e.macAddr, portId: e.portId, vlanId: 0 };
  }

  private renderArp(e: ArpRec): IP4Mac {
    return { ip: e.ip, mac: e.mac };
  }

  private withUri<T extends object>(obj: T, path: string): T & { uri: string } {
    return { ...obj, uri: this.baseUrl + path };
  }

  // -- cascades -------------------------------------------------------------

  /** A port goes: routes through it, its peer's link, its host binding. */
  private deletePort(id: string): void {
    const port = this.ports.get(id);
    if (!port) return;
    for (const route of [...this.routeRecs.values()]) {
      if (route.nextHopPort === id) this.routeRecs.delete(route.id);
    }
    if (port.peerId !== null) {
      const peer = this.ports.get(port.peerId);
      if (peer) peer.peerId = null;
    }
    this.bindings.delete(id);
    this.ports.delete(id);
    // The datapath forgets what it learned on a port that went.
    for (const learned of this.learnedMacs.values()) {
      for (const [mac, portId] of learned) if (portId === id) learned.delete(mac);
    }
  }

  private deleteBridge(id: string): void {
    for (const port of [...this.ports.values()]) {
      if (port.type === "Bridge" && port.deviceId === id) this.deletePort(port.id);
    }
    this.macTables.delete(id);
    this.arpTables.delete(id);
    this.learnedMacs.delete(id);
    this.learnedArps.delete(id);
    this.bridges.delete(id);
  }

  private deleteRouter(id: string): void {
    for (const port of [...this.ports.values()]) {
      if (port.type === "Router" && port.deviceId === id) this.deletePort(port.id);
    }
    for (const route of [...this.routeRecs.values()]) {
      if (route.routerId === id) this.routeRecs.delete(route.id);
    }
    this.routers.delete(id);
  }

  private deleteRule(id: string): void {
    const rule = this.rules.get(id);
    if (!rule) return;
    const chain = this.chains.get(rule.chainId);
    if (chain) chain.ruleIds = chain.ruleIds.filter((r) => r !== id);
    this.rules.delete(id);
  }

  /** A chain goes: its rules, every jump to it, every filter reference to it. */
  private deleteChain(id: string): void {
    const chain = this.chains.get(id);
    if (!chain) return;
    for (const ruleId of chain.ruleIds) this.rules.delete(ruleId);
    this.chains.delete(id);
    for (const rule of [...this.rules.values()]) {
      if (rule.type === "jump" && rule.jumpChainId === id) this.deleteRule(rule.id);
    }
    const holders: { inboundFilterId: string | null; outboundFilterId: string | null }[] = [
      ...this.bridges.values(),
      ...this.routers.values(),
      ...this.ports.values(),
    ];
    for (const h of holders) {
      if (h.inboundFilterId === id) h.inboundFilterId = null;
      if (h.outboundFilterId === id) h.outboundFilterId = null;
    }
  }

  /** Every router port address has a Local /32 route to it through the port. */
  private addLocalRoutes(port: PortRec): void {
    for (const cidr of port.portSubnet) {
      const id = randomUUID();
      this.routeRecs.set(id, {
        id,
        routerId: port.deviceId,
        type: "Local",
        srcNetworkAddr: "0.0.0.0",
        srcNetworkLength: 0,
        dstNetworkAddr: cidr.split("/")[0] as string,
        dstNetworkLength: 32,
        nextHopPort: port.id,
        nextHopGateway: null,
        weight: 0,
      });
    }
  }

  private dropLocalRoutes(port: PortRec): void {
    for (const route of [...this.routeRecs.values()]) {
      if (route.type === "Local" && route.nextHopPort === port.id) this.routeRecs.delete(route.id);
    }
  }

  // -- resource handlers ----------------------------------------------------

  private newId(body: Body, taken: (id: string) => boolean, what: string): string {
    const id = body.uuid("id") ?? randomUUID();
    if (taken(id)) throw conflict(`${what} ${id} already exists`);
    return id;
  }

  private parseDevice(kind: string, raw: unknown): { body: Body; fields: Omit<DeviceRec, "id"> } {
    const body = Body.parse(
      kind,
      raw,
      ["id", "tenantId", "name", "inboundFilterId", "outboundFilterId", "adminStateUp"],
      ["uri", "ports", "routes", "peerPorts", "inboundFilter", "outboundFilter"],
    );
    const fields = {
      tenantId: body.str("tenantId"),
      name: body.str("name"),
      inboundFilterId: body.uuid("inboundFilterId"),
      outboundFilterId: body.uuid("outboundFilterId"),
      adminStateUp: body.bool("adminStateUp") ?? true,
    };
    this.requireChain(fields.inboundFilterId, "inboundFilterId");
    this.requireChain(fields.outboundFilterId, "outboundFilterId");
    return { body, fields };
  }

  private deviceEndpoints(
    kind: "Router" | "Bridge",
    collection: string,
    map: Map<string, DeviceRec>,
    one: string[],
    many: string[],
    remove: (id: string) => void,
  ): RouteDef[] {
    return [
      {
        pattern: [collection],
        methods: {
          GET: {
            produces: many,
            handle: () => ({
              status: 200,
              body: [...map.values()].map((r) =>
                this.withUri(this.renderDevice(r), `/${collection}/${r.id}`),
              ),
            }),
          },
          POST: {
            consumes: one,
            handle: ({ body: raw }) => {
              const { body, fields } = this.parseDevice(kind, raw);
              const id = this.newId(body, (i) => map.has(i), kind);
              map.set(id, { id, ...fields });
              return { status: 201, location: `/${collection}/${id}` };
            },
          },
        },
      },
      {
        pattern: [collection, ":id"],
        methods: {
          GET: {
            produces: one,
            handle: ({ params }) => {
              const rec = this.getOr404(map, params.id, kind);
              return {
                status: 200,
                body: this.withUri(this.renderDevice(rec), `/${collection}/${rec.id}`),
              };
            },
          },
          PUT: {
            consumes: one,
            handle: ({ params, body: raw }) => {
              const rec = this.getOr404(map, params.id, kind);
              const { fields } = this.parseDevice(kind, raw);
              Object.assign(rec, fields);
              return { status: 204 };
            },
          },
          DELETE: {
            handle: ({ params }) => {
              const rec = this.getOr404(map, params.id, kind);
              remove(rec.id);
              return { status: 204 };
            },
          },
        },
      },
    ];
  }

  private parsePort(
    raw: unknown,
    type: "Bridge" | "Router",
    existing?: PortRec,
  ): { rec: PortRec; body: Body } {
    const common = ["id", "type", "inboundFilterId", "outboundFilterId", "adminStateUp"];
    const readOnly = ["uri", "deviceId", "peerId", "hostId", "interfaceName", "device", "peer"];
    const writable =
      type === "Router"
        ? [...common, "portSubnet", "portMac", "networkAddress", "networkLength", "portAddress"]
        : [...common, "vlanId"];
    const body = Body.parse(`${type}Port`, raw, writable, readOnly);
    const sentType = body.str("type", true);
    if (sentType !== type) {
      throw badRequest(`Port.type: expected ${type}, got ${sentType}`);
    }
    const rec: PortRec = {
      id: existing?.id ?? "",
      type,
      deviceId: existing?.deviceId ?? "",
      inboundFilterId: body.uuid("inboundFilterId"),
      outboundFilterId: body.uuid("outboundFilterId"),
      adminStateUp: body.bool("adminStateUp") ?? true,
      peerId: existing?.peerId ?? null,
      hostId: existing?.hostId ?? null,
      interfaceName: existing?.interfaceName ?? null,
      vlanId: type === "Bridge" ? body.int("vlanId", 0, 4095) : null,
      portSubnet: existing?.portSubnet ?? [],
      // PUT replaces portMac with what was sent, null when omitted: MidoNet does that.
      portMac: type === "Router" ? body.mac("portMac") : null,
    };
    this.requireChain(rec.inboundFilterId, "inboundFilterId");
    this.requireChain(rec.outboundFilterId, "outboundFilterId");
    if (type === "Router") {
      if (body.has("portSubnet")) {
        const subnets = body.raw("portSubnet");
        if (!Array.isArray(subnets) || !subnets.every(validCidr)) {
          throw badRequest('RouterPort.portSubnet: must be a list of CIDRs such as "10.0.0.1/24"');
        }
        rec.portSubnet = subnets as string[];
      } else if (body.has("portAddress") || body.has("networkAddress")) {
        // The pre-5.4 form: one address, its network and prefix length.
        const address = body.ipv4("portAddress", true) as string;
        body.ipv4("networkAddress", true);
        const length = body.int("networkLength", 0, 32, true) as number;
        rec.portSubnet = [`${address}/${length}`];
      }
      if (existing === undefined && rec.portSubnet.length === 0) {
        throw badRequest("RouterPort.portSubnet: a router port needs an address");
      }
    }
    return { rec, body };
  }

  private portCreate(type: "Bridge" | "Router", deviceId: string, raw: unknown): Reply {
    const { rec, body } = this.parsePort(raw, type);
    rec.id = this.newId(body, (i) => this.ports.has(i), "Port");
    rec.deviceId = deviceId;
    if (type === "Router" && rec.portMac === null) rec.portMac = randomMac();
    this.ports.set(rec.id, rec);
    if (type === "Router") this.addLocalRoutes(rec);
    return { status: 201, location: `/ports/${rec.id}` };
  }

  private portsOf(type: "Bridge" | "Router", deviceId: string): Port[] {
    return [...this.ports.values()]
      .filter((p) => p.type === type && p.deviceId === deviceId)
      .map((p) => this.withUri(this.renderPort(p), `/ports/${p.id}`));
  }

  private parseRoute(raw: unknown, routerId: string): Omit<RouteRec, "id"> & { body: Body } {
    const body = Body.parse(
      "Route",
      raw,
      [
        "id",
        "type",
        "srcNetworkAddr",
        "srcNetworkLength",
        "dstNetworkAddr",
        "dstNetworkLength",
        "nextHopPort",
        "nextHopGateway",
        "weight",
      ],
      ["uri", "routerId", "router", "learned", "attributes"],
    );
    const type = body.oneOf("type", ROUTE_TYPES, true) as string;
    const route = {
      body,
      routerId,
      type,
      srcNetworkAddr: body.ipv4("srcNetworkAddr", true) as string,
      srcNetworkLength: body.int("srcNetworkLength", 0, 32) ?? 0,
      dstNetworkAddr: body.ipv4("dstNetworkAddr", true) as string,
      dstNetworkLength: body.int("dstNetworkLength", 0, 32) ?? 0,
      nextHopPort: body.uuid("nextHopPort"),
      nextHopGateway: body.ipv4("nextHopGateway"),
      weight: body.int("weight", 0, 2 ** 31 - 1) ?? 0,
    };
    if (type === "Normal" && route.nextHopPort === null) {
      throw badRequest("Route.nextHopPort: a Normal route needs a next hop port");
    }
    if (route.nextHopPort !== null) {
      const port = this.ports.get(route.nextHopPort);
      if (port?.type !== "Router" || port.deviceId !== routerId) {
        throw badRequest(
          `Route.nextHopPort: ${route.nextHopPort} is not a port of router ${routerId}`,
        );
      }
    }
    return route;
  }

  private parseRule(raw: unknown, chain: ChainRec): { rec: RuleRec; position: number } {
    const type = (raw as { type?: unknown } | null)?.type;
    if (typeof type !== "string" || !(RULE_TYPES as readonly string[]).includes(type)) {
      throw badRequest(`Rule.type: must be one of ${RULE_TYPES.join(", ")}`);
    }
    const writable = ["id", "type", "position", ...CONDITION_FIELDS];
    if (type === "jump") writable.push("jumpChainId", "jumpChainName");
    if (NAT_RULE_TYPES.includes(type)) writable.push("flowAction");
    if (FORWARD_NAT_RULE_TYPES.includes(type)) writable.push("natTargets");
    const body = Body.parse(`Rule(${type})`, raw, writable, ["uri", "chainId"]);

    const fields: Record<string, unknown> = {};
    for (const key of CONDITION_FIELDS.filter((k) => k === "condInvert" || k.startsWith("inv"))) {
      const v = body.bool(key);
      if (v !== null) fields[key] = v;
    }
    for (const key of ["matchForwardFlow", "matchReturnFlow"]) {
      const v = body.bool(key);
      if (v !== null) fields[key] = v;
    }
    const put = (key: string, v: unknown) => {
      if (v !== null && v !== undefined) fields[key] = v;
    };
    put("inPorts", body.uuidList("inPorts"));
    put("outPorts", body.uuidList("outPorts"));
    put("dlType", body.int("dlType", 0x0600, 0xffff));
    put("dlSrc", body.mac("dlSrc"));
    put("dlDst", body.mac("dlDst"));
    put("nwTos", body.int("nwTos", 0, 255));
    put("nwProto", body.int("nwProto", 0, 255));
    put("nwSrcAddress", body.ipv4("nwSrcAddress"));
    put("nwSrcLength", body.int("nwSrcLength", 0, 32));
    put("nwDstAddress", body.ipv4("nwDstAddress"));
    put("nwDstLength", body.int("nwDstLength", 0, 32));
    for (const key of ["tpSrc", "tpDst"]) {
      if (!body.has(key)) continue;
      const r = body.raw(key) as { start?: unknown; end?: unknown };
      const range = Body.parse(`Rule.${key}`, r, ["start", "end"]);
      const start = range.int("start", 0, 65535, true) as number;
      const end = range.int("end", 0, 65535, true) as number;
      if (start > end) throw badRequest(`Rule.${key}: start ${start} is after end ${end}`);
      fields[key] = { start, end };
    }

    let jumpChainId: string | null = null;
    if (type === "jump") {
      jumpChainId = body.uuid("jumpChainId");
      if (jumpChainId === null) throw badRequest("Rule.jumpChainId: a jump rule needs a chain");
      if (!this.chains.has(jumpChainId)) {
        throw notFound(`Rule.jumpChainId: chain ${jumpChainId} not found`);
      }
      put("jumpChainName", body.str("jumpChainName"));
    }
    if (NAT_RULE_TYPES.includes(type)) {
      const flowAction = body.oneOf("flowAction", ["accept", "continue", "return"] as const);
      if (flowAction === null) throw badRequest(`Rule.flowAction: a ${type} rule needs one`);
      fields.flowAction = flowAction;
    }
    if (FORWARD_NAT_RULE_TYPES.includes(type)) {
      const targets = body.raw("natTargets");
      if (!Array.isArray(targets) || targets.length === 0) {
        throw badRequest(`Rule.natTargets: a ${type} rule needs at least one target`);
      }
      fields.natTargets = targets.map((t) => {
        const target = Body.parse("Rule.natTargets", t, [
          "addressFrom",
          "addressTo",
          "portFrom",
          "portTo",
        ]);
        return {
          addressFrom: target.ipv4("addressFrom", true),
          addressTo: target.ipv4("addressTo", true),
          portFrom: target.int("portFrom", 0, 65535) ?? 0,
          portTo: target.int("portTo", 0, 65535) ?? 0,
        };
      });
    }

    const position = body.int("position", 1, 2 ** 31 - 1) ?? 1;
    if (position > chain.ruleIds.length + 1) {
      throw badRequest(
        `Rule.position: ${position} is out of range; chain ${chain.id} has ${chain.ruleIds.length} rules`,
      );
    }
    const id = this.newId(body, (i) => this.rules.has(i), "Rule");
    return { rec: { id, chainId: chain.id, type, jumpChainId, fields }, position };
  }

  private macKey(mac: string, portId: string): string {
    return `${mac}_${portId}`;
  }

  private arpKey(ip: string, mac: string): string {
    return `${ip}_${mac}`;
  }

  /** "aa-bb-cc-dd-ee-ff" → "aa:bb:cc:dd:ee:ff", or undefined. */
  private static macFromPath(s: string): string | undefined {
    const mac = s.replaceAll("-", ":").toLowerCase();
    return MAC_RE.test(mac) ? mac : undefined;
  }

  private buildRoutes(): RouteDef[] {
    const ok = (body: unknown): Reply => ({ status: 200, body });
    const created = (location: string): Reply => ({ status: 201, location });
    const noContent: Reply = { status: 204 };

    return [
      // -- application and login --
      {
        pattern: [],
        methods: {
          GET: {
            produces: MT.application,
            handle: () => {
              const b = this.baseUrl;
              return ok({
                uri: `${b}/`,
                version: "5",
                bridges: `${b}/bridges`,
                chains: `${b}/chains`,
                hosts: `${b}/hosts`,
                routers: `${b}/routers`,
                tunnelZones: `${b}/tunnel_zones`,
                bridgeTemplate: `${b}/bridges/{id}`,
                chainTemplate: `${b}/chains/{id}`,
                hostTemplate: `${b}/hosts/{id}`,
                portTemplate: `${b}/ports/{id}`,
                routeTemplate: `${b}/routes/{id}`,
                routerTemplate: `${b}/routers/{id}`,
                ruleTemplate: `${b}/rules/{id}`,
                tunnelZoneTemplate: `${b}/tunnel_zones/{id}`,
              });
            },
          },
        },
      },
      {
        pattern: ["login"],
        methods: {
          POST: {
            produces: MT.token,
            handle: ({ headers }) => {
              const auth = headers.authorization ?? "";
              const m = /^Basic\s+(.+)$/i.exec(auth);
              const decoded = m ? Buffer.from(m[1] as string, "base64").toString("utf8") : "";
              const sep = decoded.indexOf(":");
              const user = sep < 0 ? "" : decoded.slice(0, sep);
              const password = sep < 0 ? "" : decoded.slice(sep + 1);
              const project = headers["x-auth-project"];
              if (user !== this.user || password !== this.password || project !== this.project) {
                throw new ApiError(401, "Authentication error: invalid credentials");
              }
              const key = this.issueToken();
              const expires = new Date(this.tokens.get(key) as number).toISOString();
              return ok({ key, expires });
            },
          },
        },
      },

      // -- tunnel zones --
      {
        pattern: ["tunnel_zones"],
        methods: {
          GET: {
            produces: MT.tunnelZones,
            handle: () =>
              ok(
                [...this.tunnelZones.values()].map((r) =>
                  this.withUri(this.renderTunnelZone(r), `/tunnel_zones/${r.id}`),
                ),
              ),
          },
          POST: {
            consumes: MT.tunnelZone,
            handle: ({ body: raw }) => {
              const body = Body.parse("TunnelZone", raw, ["id", "name", "type"], ["uri", "hosts"]);
              const name = body.str("name", true) as string;
              if (name.length < 1 || name.length > 255) {
                throw badRequest("TunnelZone.name: size must be between 1 and 255");
              }
              const type = body.oneOf("type", TUNNEL_ZONE_TYPES, true) as string;
              const id = this.newId(body, (i) => this.tunnelZones.has(i), "TunnelZone");
              if ([...this.tunnelZones.values()].some((z) => z.name === name)) {
                throw conflict(`a tunnel zone named ${name} already exists`);
              }
              this.tunnelZones.set(id, { id, name, type, members: new Map() });
              return created(`/tunnel_zones/${id}`);
            },
          },
        },
      },
      {
        pattern: ["tunnel_zones", ":id"],
        methods: {
          GET: {
            produces: MT.tunnelZone,
            handle: ({ params }) => {
              const r = this.getOr404(this.tunnelZones, params.id, "TunnelZone");
              return ok(this.withUri(this.renderTunnelZone(r), `/tunnel_zones/${r.id}`));
            },
          },
          PUT: {
            consumes: MT.tunnelZone,
            handle: ({ params, body: raw }) => {
              const r = this.getOr404(this.tunnelZones, params.id, "TunnelZone");
              const body = Body.parse("TunnelZone", raw, ["id", "name", "type"], ["uri", "hosts"]);
              const name = body.str("name", true) as string;
              const type = body.oneOf("type", TUNNEL_ZONE_TYPES, true) as string;
              // MidoNet checks name uniqueness against every zone, the one being
              // updated included: a PUT that keeps the name is a 409.
              if ([...this.tunnelZones.values()].some((z) => z.name === name)) {
                throw conflict(`a tunnel zone named ${name} already exists`);
              }
              r.name = name;
              r.type = type;
              return noContent;
            },
          },
          DELETE: {
            handle: ({ params }) => {
              const r = this.getOr404(this.tunnelZones, params.id, "TunnelZone");
              this.tunnelZones.delete(r.id);
              return noContent;
            },
          },
        },
      },
      {
        pattern: ["tunnel_zones", ":id", "hosts"],
        methods: {
          GET: {
            produces: MT.tunnelZoneHosts,
            handle: ({ params }) => {
              const tz = this.getOr404(this.tunnelZones, params.id, "TunnelZone");
              return ok(
                [...tz.members].map(([hostId, ipAddress]) =>
                  this.withUri(
                    { tunnelZoneId: tz.id, hostId, ipAddress },
                    `/tunnel_zones/${tz.id}/hosts/${hostId}`,
                  ),
                ),
              );
            },
          },
          POST: {
            consumes: MT.tunnelZoneHost,
            handle: ({ params, body: raw }) => {
              const tz = this.getOr404(this.tunnelZones, params.id, "TunnelZone");
              const body = Body.parse(
                "TunnelZoneHost",
                raw,
                ["hostId", "ipAddress"],
                ["tunnelZoneId", "uri", "host"],
              );
              const hostId = body.uuid("hostId", true) as string;
              const ipAddress = body.ipv4("ipAddress", true) as string;
              if (!this.hosts.has(hostId))
                throw notFound(`TunnelZoneHost.hostId: host ${hostId} not found`);
              if (tz.members.has(hostId)) {
                throw conflict(`host ${hostId} is already a member of tunnel zone ${tz.id}`);
              }
              tz.members.set(hostId, ipAddress);
              return created(`/tunnel_zones/${tz.id}/hosts/${hostId}`);
            },
          },
        },
      },
      {
        pattern: ["tunnel_zones", ":id", "hosts", ":hostId"],
        methods: {
          GET: {
            produces: MT.tunnelZoneHost,
            handle: ({ params }) => {
              const tz = this.getOr404(this.tunnelZones, params.id, "TunnelZone");
              const hostId = MidonetSimulator.pathId(params.hostId, "TunnelZoneHost");
              const ip = tz.members.get(hostId);
              if (ip === undefined) throw notFound(`host ${hostId} is not in tunnel zone ${tz.id}`);
              return ok(
                this.withUri(
                  { tunnelZoneId: tz.id, hostId, ipAddress: ip },
                  `/tunnel_zones/${tz.id}/hosts/${hostId}`,
                ),
              );
            },
          },
          DELETE: {
            handle: ({ params }) => {
              const tz = this.getOr404(this.tunnelZones, params.id, "TunnelZone");
              const hostId = MidonetSimulator.pathId(params.hostId, "TunnelZoneHost");
              if (!tz.members.delete(hostId)) {
                throw notFound(`host ${hostId} is not in tunnel zone ${tz.id}`);
              }
              return noContent;
            },
          },
        },
      },

      // -- routers and bridges --
      ...this.deviceEndpoints("Router", "routers", this.routers, MT.router, MT.routers, (id) =>
        this.deleteRouter(id),
      ),
      ...this.deviceEndpoints("Bridge", "bridges", this.bridges, MT.bridge, MT.bridges, (id) =>
        this.deleteBridge(id),
      ),

      // -- ports --
      {
        pattern: ["bridges", ":id", "ports"],
        methods: {
          GET: {
            produces: MT.ports,
            handle: ({ params }) => {
              const b = this.getOr404(this.bridges, params.id, "Bridge");
              return ok(this.portsOf("Bridge", b.id));
            },
          },
          POST: {
            consumes: MT.port,
            handle: ({ params, body }) => {
              const b = this.getOr404(this.bridges, params.id, "Bridge");
              return this.portCreate("Bridge", b.id, body);
            },
          },
        },
      },
      {
        pattern: ["routers", ":id", "ports"],
        methods: {
          GET: {
            produces: MT.ports,
            handle: ({ params }) => {
              const r = this.getOr404(this.routers, params.id, "Router");
              return ok(this.portsOf("Router", r.id));
            },
          },
          POST: {
            consumes: MT.port,
            handle: ({ params, body }) => {
              const r = this.getOr404(this.routers, params.id, "Router");
              return this.portCreate("Router", r.id, body);
            },
          },
        },
      },
      {
        pattern: ["ports"],
        methods: {
          GET: {
            produces: MT.ports,
            handle: () =>
              ok(
                [...this.ports.values()].map((p) =>
                  this.withUri(this.renderPort(p), `/ports/${p.id}`),
                ),
              ),
          },
        },
      },
      {
        pattern: ["ports", ":id"],
        methods: {
          GET: {
            produces: MT.port,
            handle: ({ params }) => {
              const p = this.getOr404(this.ports, params.id, "Port");
              return ok(this.withUri(this.renderPort(p), `/ports/${p.id}`));
            },
          },
          PUT: {
            consumes: MT.port,
            handle: ({ params, body }) => {
              const p = this.getOr404(this.ports, params.id, "Port");
              const { rec: next } = this.parsePort(body, p.type, p);
              const addressesChanged = next.portSubnet.join() !== p.portSubnet.join();
              if (addressesChanged) this.dropLocalRoutes(p);
              Object.assign(p, next);
              if (addressesChanged) this.addLocalRoutes(p);
              return noContent;
            },
          },
          DELETE: {
            handle: ({ params }) => {
              const p = this.getOr404(this.ports, params.id, "Port");
              this.deletePort(p.id);
              return noContent;
            },
          },
        },
      },
      {
        pattern: ["ports", ":id", "link"],
        methods: {
          POST: {
            consumes: MT.portLink,
            handle: ({ params, body: raw }) => {
              const p = this.getOr404(this.ports, params.id, "Port");
              const body = Body.parse(
                "PortLink",
                raw,
                ["peerId"],
                ["portId", "uri", "port", "peer"],
              );
              const peerId = body.uuid("peerId", true) as string;
              const peer = this.ports.get(peerId);
              if (!peer) throw notFound(`PortLink.peerId: port ${peerId} not found`);
              if (peer.id === p.id) throw badRequest("PortLink: a port cannot be linked to itself");
              if (p.peerId !== null)
                throw conflict(`port ${p.id} is already linked to ${p.peerId}`);
              if (peer.peerId !== null) {
                throw conflict(`port ${peer.id} is already linked to ${peer.peerId}`);
              }
              p.peerId = peer.id;
              peer.peerId = p.id;
              return created(`/ports/${p.id}/link`);
            },
          },
          DELETE: {
            handle: ({ params }) => {
              const p = this.getOr404(this.ports, params.id, "Port");
              if (p.peerId !== null) {
                const peer = this.ports.get(p.peerId);
                if (peer) peer.peerId = null;
                p.peerId = null;
              }
              return noContent;
            },
          },
        },
      },

      // -- routes --
      {
        pattern: ["routers", ":id", "routes"],
        methods: {
          GET: {
            produces: MT.routes,
            handle: ({ params }) => {
              const r = this.getOr404(this.routers, params.id, "Router");
              return ok(
                [...this.routeRecs.values()]
                  .filter((x) => x.routerId === r.id)
                  .map((x) => this.withUri(this.renderRoute(x), `/routes/${x.id}`)),
              );
            },
          },
          POST: {
            consumes: MT.route,
            handle: ({ params, body: raw }) => {
              const r = this.getOr404(this.routers, params.id, "Router");
              const { body, ...route } = this.parseRoute(raw, r.id);
              const id = this.newId(body, (i) => this.routeRecs.has(i), "Route");
              this.routeRecs.set(id, { id, ...route });
              return created(`/routes/${id}`);
            },
          },
        },
      },
      {
        pattern: ["routes", ":id"],
        methods: {
          GET: {
            produces: MT.route,
            handle: ({ params }) => {
              const x = this.getOr404(this.routeRecs, params.id, "Route");
              return ok(this.withUri(this.renderRoute(x), `/routes/${x.id}`));
            },
          },
          DELETE: {
            handle: ({ params }) => {
              const x = this.getOr404(this.routeRecs, params.id, "Route");
              this.routeRecs.delete(x.id);
              return noContent;
            },
          },
        },
      },

      // -- chains and rules --
      {
        pattern: ["chains"],
        methods: {
          GET: {
            produces: MT.chains,
            handle: () =>
              ok(
                [...this.chains.values()].map((c) =>
                  this.withUri(this.renderChain(c), `/chains/${c.id}`),
                ),
              ),
          },
          POST: {
            consumes: MT.chain,
            handle: ({ body: raw }) => {
              const body = Body.parse("Chain", raw, ["id", "tenantId", "name"], ["uri", "rules"]);
              const tenantId = body.str("tenantId");
              const name = body.str("name");
              const id = this.newId(body, (i) => this.chains.has(i), "Chain");
              this.chains.set(id, { id, tenantId, name, ruleIds: [] });
              return created(`/chains/${id}`);
            },
          },
        },
      },
      {
        pattern: ["chains", ":id"],
        methods: {
          GET: {
            produces: MT.chain,
            handle: ({ params }) => {
              const c = this.getOr404(this.chains, params.id, "Chain");
              return ok(this.withUri(this.renderChain(c), `/chains/${c.id}`));
            },
          },
          DELETE: {
            handle: ({ params }) => {
              const c = this.getOr404(this.chains, params.id, "Chain");
              this.deleteChain(c.id);
              return noContent;
            },
          },
        },
      },
      {
        pattern: ["chains", ":id", "rules"],
        methods: {
          GET: {
            produces: MT.rules,
            handle: ({ params }) => {
              const c = this.getOr404(this.chains, params.id, "Chain");
              return ok(
                c.ruleIds.map((id) =>
                  this.withUri(this.renderRule(this.rules.get(id) as RuleRec), `/rules/${id}`),
                ),
              );
            },
          },
          POST: {
            consumes: MT.rule,
            handle: ({ params, body }) => {
              const c = this.getOr404(this.chains, params.id, "Chain");
              const { rec, position } = this.parseRule(body, c);
              this.rules.set(rec.id, rec);
              c.ruleIds.splice(position - 1, 0, rec.id);
              return created(`/rules/${rec.id}`);
            },
          },
        },
      },
      {
        pattern: ["rules", ":id"],
        methods: {
          GET: {
            produces: MT.rule,
            handle: ({ params }) => {
              const r = this.getOr404(this.rules, params.id, "Rule");
              return ok(this.withUri(this.renderRule(r), `/rules/${r.id}`));
            },
          },
          DELETE: {
            handle: ({ params }) => {
              const r = this.getOr404(this.rules, params.id, "Rule");
              this.deleteRule(r.id);
              return noContent;
            },
          },
        },
      },

      // -- hosts and bindings --
      {
        pattern: ["hosts"],
        methods: {
          GET: {
            produces: MT.hosts,
            handle: () =>
              ok(
                [...this.hosts.values()].map((h) =>
                  this.withUri(this.renderHost(h), `/hosts/${h.id}`),
                ),
              ),
          },
        },
      },
      {
        pattern: ["hosts", ":id"],
        methods: {
          GET: {
            produces: MT.host,
            handle: ({ params }) => {
              const h = this.getOr404(this.hosts, params.id, "Host");
              return ok(this.withUri(this.renderHost(h), `/hosts/${h.id}`));
            },
          },
        },
      },
      {
        pattern: ["hosts", ":id", "ports"],
        methods: {
          GET: {
            produces: MT.hostInterfacePorts,
            handle: ({ params }) => {
              const h = this.getOr404(this.hosts, params.id, "Host");
              return ok(
                [...this.bindings.values()]
                  .filter((b) => b.hostId === h.id)
                  .map((b) => this.withUri({ ...b }, `/hosts/${h.id}/ports/${b.portId}`)),
              );
            },
          },
          POST: {
            consumes: MT.hostInterfacePort,
            handle: ({ params, body: raw }) => {
              const h = this.getOr404(this.hosts, params.id, "Host");
              const body = Body.parse(
                "HostInterfacePort",
                raw,
                ["hostId", "portId", "interfaceName"],
                ["uri", "host", "port"],
              );
              // The host comes from the path; a hostId in the body is ignored, as MidoNet does.
              body.uuid("hostId");
              const portId = body.uuid("portId", true) as string;
              const interfaceName = body.str("interfaceName", true) as string;
              if (interfaceName.length === 0) {
                throw badRequest("HostInterfacePort.interfaceName: may not be empty");
              }
              const port = this.ports.get(portId);
              if (!port) throw notFound(`HostInterfacePort.portId: port ${portId} not found`);
              if (![...this.tunnelZones.values()].some((z) => z.members.has(h.id))) {
                throw conflict(`host ${h.id} is not a member of any tunnel zone`);
              }
              const bound = this.bindings.get(portId);
              if (bound) {
                throw conflict(
                  `port ${portId} is already bound to ${bound.interfaceName} on host ${bound.hostId}`,
                );
              }
              for (const b of this.bindings.values()) {
                if (b.hostId === h.id && b.interfaceName === interfaceName) {
                  throw conflict(
                    `interface ${interfaceName} on host ${h.id} is already bound to port ${b.portId}`,
                  );
                }
              }
              this.bindings.set(portId, { hostId: h.id, portId, interfaceName });
              port.hostId = h.id;
              port.interfaceName = interfaceName;
              return created(`/hosts/${h.id}/ports/${portId}`);
            },
          },
        },
      },
      {
        pattern: ["hosts", ":id", "ports", ":portId"],
        methods: {
          GET: {
            produces: MT.hostInterfacePort,
            handle: ({ params }) => {
              const h = this.getOr404(this.hosts, params.id, "Host");
              const portId = MidonetSimulator.pathId(params.portId, "HostInterfacePort");
              const b = this.bindings.get(portId);
              if (!b || b.hostId !== h.id) {
                throw notFound(`port ${portId} is not bound on host ${h.id}`);
              }
              return ok(this.withUri({ ...b }, `/hosts/${h.id}/ports/${portId}`));
            },
          },
          DELETE: {
            handle: ({ params }) => {
              const h = this.getOr404(this.hosts, params.id, "Host");
              const portId = MidonetSimulator.pathId(params.portId, "HostInterfacePort");
              const b = this.bindings.get(portId);
              if (!b || b.hostId !== h.id) {
                throw notFound(`port ${portId} is not bound on host ${h.id}`);
              }
              this.bindings.delete(portId);
              const port = this.ports.get(portId);
              if (port) {
                port.hostId = null;
                port.interfaceName = null;
              }
              return noContent;
            },
          },
        },
      },

      // -- MAC and ARP tables --
      {
        pattern: ["bridges", ":id", "mac_table"],
        methods: {
          GET: {
            produces: MT.macPorts,
            handle: ({ params }) => {
              const b = this.getOr404(this.bridges, params.id, "Bridge");
              const persistent = [...(this.macTables.get(b.id)?.values() ?? [])].map(
                (e): [string, string] => [e.macAddr, e.portId],
              );
              const listed = remoteSnapshot(persistent, this.learnedMacs.get(b.id));
              return ok(
                [...listed].map(([macAddr, portId]) =>
                  this.withUri(
                    this.renderMac({ macAddr, portId }),
                    `/bridges/${b.id}/mac_table/${macAddr.replaceAll(":", "-")}_${portId}`,
                  ),
                ),
              );
            },
          },
          POST: {
            consumes: MT.macPort,
            handle: ({ params, body: raw }) => {
              const b = this.getOr404(this.bridges, params.id, "Bridge");
              const body = Body.parse(
                "MacPort",
                raw,
                ["macAddr", "portId"],
                ["vlanId", "uri", "bridgeId"],
              );
              const macAddr = body.mac("macAddr", true) as string;
              const portId = body.uuid("portId", true) as string;
              const port = this.ports.get(portId);
              if (!port) throw notFound(`MacPort.portId: port ${portId} not found`);
              if (port.type !== "Bridge" || port.deviceId !== b.id) {
                throw badRequest(`MacPort.portId: port ${portId} is not on bridge ${b.id}`);
              }
              const table = this.macTables.get(b.id) ?? new Map<string, MacRec>();
              const key = this.macKey(macAddr, portId);
              if (table.has(key)) {
                // MidoNet answers a duplicate entry with an unhandled error (its
                // persistent node exists); an entry only learned does not count.
                throw new ApiError(500, `entry ${key} already exists in the MAC table`);
              }
              table.set(key, { macAddr, portId });
              this.macTables.set(b.id, table);
              return created(
                `/bridges/${b.id}/mac_table/${macAddr.replaceAll(":", "-")}_${portId}`,
              );
            },
          },
        },
      },
      {
        pattern: ["bridges", ":id", "mac_table", ":pair"],
        methods: {
          GET: {
            produces: MT.macPort,
            handle: ({ params }) => {
              const { b, key, mac, portId } = this.macEntryFromPath(params);
              const held =
                this.macTables.get(b.id)?.has(key) ||
                this.learnedMacs.get(b.id)?.get(mac) === portId;
              if (!held) throw notFound(`MAC table entry ${params.pair} not found`);
              return ok(
                this.withUri(
                  this.renderMac({ macAddr: mac, portId }),
                  `/bridges/${b.id}/mac_table/${params.pair}`,
                ),
              );
            },
          },
          DELETE: {
            handle: ({ params }) => {
              // Only the persistent entry goes, and 204 either way (removePersistent).
              const { b, key } = this.macEntryFromPath(params);
              this.macTables.get(b.id)?.delete(key);
              return noContent;
            },
          },
        },
      },
      {
        pattern: ["bridges", ":id", "arp_table"],
        methods: {
          GET: {
            produces: MT.ip4Macs,
            handle: ({ params }) => {
              const b = this.getOr404(this.bridges, params.id, "Bridge");
              const persistent = [...(this.arpTables.get(b.id)?.values() ?? [])].map(
                (e): [string, string] => [e.ip, e.mac],
              );
              const listed = remoteSnapshot(persistent, this.learnedArps.get(b.id));
              return ok(
                [...listed].map(([ip, mac]) =>
                  this.withUri(
                    this.renderArp({ ip, mac }),
                    `/bridges/${b.id}/arp_table/${ip}_${mac.replaceAll(":", "-")}`,
                  ),
                ),
              );
            },
          },
          POST: {
            consumes: MT.ip4Mac,
            handle: ({ params, body: raw }) => {
              const b = this.getOr404(this.bridges, params.id, "Bridge");
              const body = Body.parse("IP4Mac", raw, ["ip", "mac"], ["uri"]);
              const ip = body.ipv4("ip", true) as string;
              const mac = body.mac("mac", true) as string;
              const table = this.arpTables.get(b.id) ?? new Map<string, ArpRec>();
              const key = this.arpKey(ip, mac);
              if (table.has(key)) {
                throw new ApiError(500, `entry ${key} already exists in the ARP table`);
              }
              table.set(key, { ip, mac });
              this.arpTables.set(b.id, table);
              return created(`/bridges/${b.id}/arp_table/${ip}_${mac.replaceAll(":", "-")}`);
            },
          },
        },
      },
      {
        pattern: ["bridges", ":id", "arp_table", ":pair"],
        methods: {
          GET: {
            produces: MT.ip4Mac,
            handle: ({ params }) => {
              const { b, key, ip, mac } = this.arpEntryFromPath(params);
              const held =
                this.arpTables.get(b.id)?.has(key) || this.learnedArps.get(b.id)?.get(ip) === mac;
              if (!held) throw notFound(`ARP table entry ${params.pair} not found`);
              return ok(
                this.withUri(
                  this.renderArp({ ip, mac }),
                  `/bridges/${b.id}/arp_table/${params.pair}`,
                ),
              );
            },
          },
          DELETE: {
            handle: ({ params }) => {
              // Only the persistent entry goes, and 204 either way (removePersistent).
              const { b, key } = this.arpEntryFromPath(params);
              this.arpTables.get(b.id)?.delete(key);
              return noContent;
            },
          },
        },
      },
    ];
  }

  private macEntryFromPath(params: Record<string, string>): {
    b: DeviceRec;
    key: string;
    mac: string;
    portId: string;
  } {
    const b = this.getOr404(this.bridges, params.id, "Bridge");
    const pair = params.pair ?? "";
    const sep = pair.indexOf("_");
    const mac = MidonetSimulator.macFromPath(pair.slice(0, Math.max(sep, 0)));
    const portId = pair.slice(sep + 1);
    if (sep < 0 || mac === undefined || !UUID_RE.test(portId)) {
      throw badRequest(`${pair} is not a MAC-port pair such as aa-bb-cc-dd-ee-ff_<port id>`);
    }
    const port = portId.toLowerCase();
    return { b, key: this.macKey(mac, port), mac, portId: port };
  }

  private arpEntryFromPath(params: Record<string, string>): {
    b: DeviceRec;
    key: string;
    ip: string;
    mac: string;
  } {
    const b = this.getOr404(this.bridges, params.id, "Bridge");
    const pair = params.pair ?? "";
    const sep = pair.indexOf("_");
    const ip = pair.slice(0, Math.max(sep, 0));
    const mac = MidonetSimulator.macFromPath(pair.slice(sep + 1));
    if (sep < 0 || !isIPv4(ip) || mac === undefined) {
      throw badRequest(`${pair} is not an IP-MAC pair such as 10.0.0.1_aa-bb-cc-dd-ee-ff`);
    }
    return { b, key: this.arpKey(ip, mac), ip, mac };
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

/**
 * A state table as MidoNet lists it (DirectoryStateTable.remoteSnapshot): one
 * value per key, a learned value over a persistent one, and of several
 * persistent ones the first.
 */
function remoteSnapshot(
  persistent: Iterable<[string, string]>,
  learned: ReadonlyMap<string, string> | undefined,
): Map<string, string> {
  const out = new Map<string, string>();
  for (const [key, value] of persistent) if (!out.has(key)) out.set(key, value);
  for (const [key, value] of learned ?? []) out.set(key, value);
  return out;
}

function networkOf(address: string, length: number): string {
  const n = address.split(".").reduce((acc, o) => acc * 256 + Number(o), 0);
  const mask = length === 0 ? 0 : (0xffffffff << (32 - length)) >>> 0;
  const net = (n & mask) >>> 0;
  return [24, 16, 8, 0].map((s) => (net >>> s) & 0xff).join(".");
}

async function readBody(req: http.IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}
