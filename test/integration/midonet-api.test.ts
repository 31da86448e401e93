/**
 * The MidoNet REST client against the API simulator on 127.0.0.1: results that
 * a reconciler treats as success, login on 401, retries with backoff on 5xx,
 * timeouts and network errors, no retry on 4xx, errors naming call and object.
 */
import { expect } from "chai";
import {
  type AttemptInfo,
  MidonetApiError,
  MidonetClient,
  type MidonetClientOptions,
} from "../../src/midonet/api.js";
import {
  COLLECTION_MEDIA_TYPES,
  MEDIA_TYPES,
  type MidonetObject,
  type RouterPort,
} from "../../src/midonet/resources.js";
import { type MidonetSimulator, startMidonetSimulator } from "../support/midonet-simulator.js";

const HOST = "11111111-1111-4111-8111-111111111111";
const id = (n: number) => `00000000-0000-4000-8000-${String(n).padStart(12, "0")}`;
const TZ = id(1);
const ROUTER = id(2);
const BRIDGE = id(3);
const ROUTER_PORT = id(4);
const BRIDGE_PORT = id(5);
const NODE_PORT = id(6);
const ROUTE = id(7);
const CHAIN = id(8);
const SVC_CHAIN = id(9);
const JUMP_RULE = id(10);
const SNAT_RULE = id(11);
const MISSING = id(999);

/** A small node topology covering every kind, in creation order. */
const TOPOLOGY: MidonetObject[] = [
  { kind: "TunnelZone", body: { id: TZ, name: "DefaultTunnelZone", type: "vxlan" } },
  { kind: "TunnelZoneHost", parentId: TZ, body: { hostId: HOST, ipAddress: "192.168.1.10" } },
  { kind: "Router", body: { id: ROUTER, name: "ClusterRouter", tenantId: "midonetkube" } },
  { kind: "Chain", body: { id: CHAIN, name: "KUBE-NODE-node1", tenantId: "midonetkube" } },
  { kind: "Chain", body: { id: SVC_CHAIN, name: "KUBE-SERVICES", tenantId: "midonetkube" } },
  { kind: "Bridge", body: { id: BRIDGE, name: "node1", inboundFilterId: SVC_CHAIN } },
  {
    kind: "Port",
    parentId: ROUTER,
    body: {
      id: ROUTER_PORT,
      type: "Router",
      networkAddress: "10.1.0.0",
      networkLength: 24,
      portAddress: "10.1.0.1",
      portMac: "ac:ca:ba:aa:bb:cc",
    },
  },
  { kind: "Port", parentId: BRIDGE, body: { id: BRIDGE_PORT, type: "Bridge" } },
  {
    kind: "Port",
    parentId: BRIDGE,
    body: { id: NODE_PORT, type: "Bridge", outboundFilterId: CHAIN },
  },
  { kind: "PortLink", parentId: BRIDGE_PORT, body: { peerId: ROUTER_PORT } },
  {
    kind: "Route",
    parentId: ROUTER,
    body: {
      id: ROUTE,
      type: "Normal",
      srcNetworkAddr: "0.0.0.0",
      srcNetworkLength: 0,
      dstNetworkAddr: "10.1.0.0",
      dstNetworkLength: 24,
      nextHopPort: ROUTER_PORT,
      weight: 100,
    },
  },
  { kind: "Rule", parentId: SVC_CHAIN, body: { id: JUMP_RULE, type: "jump", jumpChainId: CHAIN } },
  {
    kind: "Rule",
    parentId: CHAIN,
    body: {
      id: SNAT_RULE,
      type: "snat",
      dlType: 2048,
      nwSrcAddress: "10.1.0.2",
      nwSrcLength: 32,
      flowAction: "continue",
      natTargets: [
        { addressFrom: "10.1.0.1", addressTo: "10.1.0.1", portFrom: 30000, portTo: 60000 },
      ],
    },
  },
  {
    kind: "HostInterfacePort",
    parentId: HOST,
    body: { hostId: HOST, portId: NODE_PORT, interfaceName: "midokube-mido" },
  },
  { kind: "MacPort", parentId: BRIDGE, body: { macAddr: "ee:ee:ee:00:00:01", portId: NODE_PORT } },
  { kind: "IP4Mac", parentId: BRIDGE, body: { ip: "10.1.0.2", mac: "ee:ee:ee:00:00:01" } },
];

describe("MidoNet API client", () => {
  let sim: MidonetSimulator;

  beforeEach(async () => {
    sim = await startMidonetSimulator({
      hosts: [{ id: HOST, name: "node1" }],
      user: "kube",
      password: "secret",
      project: "midonetkube",
    });
  });

  afterEach(async () => {
    await sim.close();
  });

  function client(o: Partial<MidonetClientOptions> = {}): MidonetClient {
    return new MidonetClient({
      baseUrl: sim.baseUrl,
      user: "kube",
      password: "secret",
      project: "midonetkube",
      timeoutMs: 2_000,
      retries: 3,
      backoffMs: 5,
      ...o,
    });
  }

  async function rejection(p: Promise<unknown>): Promise<MidonetApiError> {
    try {
      await p;
    } catch (err) {
      expect(err).to.be.instanceOf(MidonetApiError);
      return err as MidonetApiError;
    }
    expect.fail("expected a MidonetApiError");
  }

  const callsTo = (method: string, path: string) =>
    sim.calls.filter((c) => c.method === method && c.path === path);

  it("creates, reads and deletes every kind through the generic operations", async () => {
    const c = client();
    for (const obj of TOPOLOGY) {
      expect(await c.create(obj), `${obj.kind} ${JSON.stringify(obj.body)}`).to.equal("created");
    }
    for (const obj of TOPOLOGY) {
      const got = await c.get(obj);
      expect(got, obj.kind).to.not.equal(undefined);
      // What we sent comes back (the server adds read-only fields).
      expect(got).to.deep.include(obj.body);
    }
    for (const obj of [...TOPOLOGY].reverse()) {
      expect(await c.delete(obj), obj.kind).to.equal(true);
      expect(await c.get(obj), obj.kind).to.equal(undefined);
    }
  });

  it("answers 'exists' to re-creating every kind, MidoNet's 500 for MAC/ARP duplicates included", async () => {
    const c = client();
    for (const obj of TOPOLOGY) await c.create(obj);
    sim.clearCalls();
    for (const obj of TOPOLOGY) {
      expect(await c.create(obj), obj.kind).to.equal("exists");
    }
    // No retries spent on a duplicate: one POST per object.
    expect(sim.calls.filter((x) => x.method === "POST")).to.have.length(TOPOLOGY.length);
  });

  it("get of a missing object is undefined, delete of a missing object is false", async () => {
    const c = client();
    expect(await c.bridges.get(MISSING)).to.equal(undefined);
    expect(await c.bridges.delete(MISSING)).to.equal(false);
    expect(await c.rules.get(MISSING)).to.equal(undefined);
    expect(await c.macTable.get(MISSING, "ee:ee:ee:00:00:01", MISSING)).to.equal(undefined);
    expect(await c.portLinks.delete(MISSING)).to.equal(false);
  });

  it("sends the vendor media type as Content-Type on writes and as Accept on reads", async () => {
    const c = client();
    for (const obj of TOPOLOGY) await c.create(obj);
    for (const obj of TOPOLOGY) await c.get(obj);
    const byPath = (method: string) =>
      sim.calls.filter((x) => x.method === method && x.status < 300);
    expect(
      byPath("POST")
        .filter((x) => x.path !== "/login")
        .map((x) => x.contentType),
    ).to.deep.equal(TOPOLOGY.map((o) => MEDIA_TYPES[o.kind]));
    // PortLink is read from its port.
    expect(byPath("GET").map((x) => x.accept)).to.deep.equal(
      TOPOLOGY.map((o) => MEDIA_TYPES[o.kind === "PortLink" ? "Port" : o.kind]),
    );
    await c.rules.list(CHAIN);
    expect(sim.calls.at(-1)?.accept).to.equal(COLLECTION_MEDIA_TYPES.Rule);
  });

  it("logs in on the first 401 and retries the call once", async () => {
    const c = client();
    expect(await c.bridges.list()).to.deep.equal([]);
    expect(sim.calls.map((x) => [x.method, x.path, x.status])).to.deep.equal([
      ["GET", "/bridges", 401],
      ["POST", "/login", 200],
      ["GET", "/bridges", 200],
    ]);
    await c.bridges.list();
    expect(callsTo("POST", "/login")).to.have.length(1); // the token is kept
  });

  it("logs in again when the token expires, and a burst of 401s shares one login", async () => {
    const c = client();
    await c.login();
    sim.expireTokens();
    sim.clearCalls();
    const results = await Promise.all([1, 2, 3, 4].map(() => c.chains.list()));
    expect(results).to.deep.equal([[], [], [], []]);
    expect(callsTo("POST", "/login")).to.have.length(1);
  });

  it("a refused login fails the call with 401, naming the call, without looping", async () => {
    const c = client({ password: "wrong" });
    const err = await rejection(c.bridges.get(BRIDGE));
    expect(err.status).to.equal(401);
    expect(err.method).to.equal("GET");
    expect(err.path).to.equal(`/bridges/${BRIDGE}`);
    expect(err.message).to.contain(`GET /bridges/${BRIDGE} (Bridge ${BRIDGE})`);
    expect(err.message).to.contain("login failed");
    expect(callsTo("POST", "/login")).to.have.length(1);
  });

  it("without credentials a 401 is final and no login is tried", async () => {
    const c = new MidonetClient({
      baseUrl: sim.baseUrl,
      timeoutMs: 1000,
      retries: 2,
      backoffMs: 1,
    });
    const err = await rejection(c.chains.list());
    expect(err.status).to.equal(401);
    expect(sim.calls.map((x) => x.path)).to.deep.equal(["/chains"]);
  });

  it("retries injected 500s with backoff, then succeeds", async () => {
    const attempts: AttemptInfo[] = [];
    const c = client({ onAttempt: (a) => attempts.push(a) });
    await c.login();
    const fault = sim.injectFault({ method: "POST", path: "/routers", status: 500, times: 2 });
    expect(await c.routers.create({ id: ROUTER, name: "r" })).to.equal("created");
    expect(fault.hits).to.equal(2);
    expect(callsTo("POST", "/routers").map((x) => x.status)).to.deep.equal([500, 500, 201]);
    expect(
      attempts.filter((a) => a.path === "/routers").map((a) => [a.attempt, a.status]),
    ).to.deep.equal([
      [1, 500],
      [2, 500],
      [3, 201],
    ]);
  });

  it("gives up after the configured retries with an error naming the call, object and server message", async () => {
    const c = client({ retries: 2 });
    await c.login();
    sim.injectFault({ path: "/bridges/*", status: 503 });
    const err = await rejection(c.bridges.update({ id: BRIDGE, name: "b" }));
    expect(err).to.include({ method: "PUT", path: `/bridges/${BRIDGE}`, status: 503, code: 503 });
    expect(err.kind).to.equal("Bridge");
    expect(err.objectId).to.equal(BRIDGE);
    expect(err.attempts).to.equal(3);
    expect(err.retryable).to.equal(true);
    expect(err.message).to.equal(
      `MidoNet PUT /bridges/${BRIDGE} (Bridge ${BRIDGE}): 503 injected fault after 3 attempts`,
    );
    expect(callsTo("PUT", `/bridges/${BRIDGE}`)).to.have.length(3);
  });

  it("does not retry a 400, and the error says which rule and why", async () => {
    const c = client();
    await c.chains.create({ id: CHAIN, name: "c" });
    sim.clearCalls();
    const err = await rejection(
      c.rules.create(CHAIN, { id: SNAT_RULE, type: "snat", natTargets: [] }),
    );
    expect(err.status).to.equal(400);
    expect(err.retryable).to.equal(false);
    expect(err.message).to.match(
      new RegExp(`^MidoNet POST /chains/${CHAIN}/rules \\(Rule ${SNAT_RULE}\\): 400 .*flowAction`),
    );
    expect(sim.calls.map((x) => [x.method, x.status])).to.deep.equal([["POST", 400]]);
  });

  it("a validation failure: MidoNet's reason is in its violations, and the error names them", async () => {
    const c = client();
    const chain = id(40);
    await c.chains.create({ id: chain, name: "v" });
    sim.clearCalls();
    const rule = {
      id: SNAT_RULE,
      type: "accept" as const,
      nwDstAddress: "10.0.0.0",
      nwDstLength: 33,
    };
    // MidoNet's answer (ResponseUtils) says only "Validation error(s) found"; the reason is in
    // its violations, which the client adds to the message it reports.
    const err = await rejection(c.rules.create(chain, rule));
    expect(err).to.include({ status: 400, code: 400, attempts: 1 });
    expect(err.serverMessage).to.equal(
      "Validation error(s) found: nwDstLength must be less than or equal to 32",
    );
    expect(err.message).to.include("nwDstLength must be less than or equal to 32");
  });

  it("does not retry a 404 for a missing referent; the error carries status and code", async () => {
    const c = client();
    await c.login();
    sim.clearCalls();
    const err = await rejection(
      c.ports.createOnBridge(MISSING, { id: BRIDGE_PORT, type: "Bridge" }),
    );
    expect(err).to.include({ status: 404, code: 404, reason: "http", attempts: 1 });
    expect(err.serverMessage).to.contain(MISSING);
    expect(sim.writes()).to.have.length(1);
  });

  it("times out a hanging call and retries it", async () => {
    const c = client({ timeoutMs: 150, retries: 2 });
    await c.login();
    sim.injectFault({ path: "/chains", hang: true, times: 1 });
    const started = Date.now();
    expect(await c.chains.list()).to.deep.equal([]);
    expect(Date.now() - started).to.be.at.least(140);
    expect(callsTo("GET", "/chains").map((x) => x.status)).to.deep.equal([0, 200]);
  });

  it("reports a call that keeps hanging as a timeout after every attempt", async () => {
    const c = client({ timeoutMs: 100, retries: 1 });
    await c.login();
    sim.injectFault({ path: "/chains/*", hang: true });
    const err = await rejection(c.chains.get(CHAIN));
    expect(err).to.include({ status: 0, reason: "timeout", attempts: 2, retryable: true });
    expect(err.message).to.equal(
      `MidoNet GET /chains/${CHAIN} (Chain ${CHAIN}): timed out after 2 attempts`,
    );
  });

  it("retries network errors with exponential backoff, then reports them", async () => {
    const closed = await startMidonetSimulator();
    const url = closed.baseUrl;
    await closed.close();
    const attempts: AttemptInfo[] = [];
    const times: number[] = [];
    const c = new MidonetClient({
      baseUrl: url,
      timeoutMs: 1000,
      retries: 3,
      backoffMs: 40,
      random: () => 0, // the common backoff's lowest jitter (0.8×): delays 32, 64, 128 ms
      onAttempt: (a) => {
        attempts.push(a);
        times.push(performance.now());
      },
    });
    const err = await rejection(c.hosts.list());
    expect(err).to.include({ status: 0, reason: "network", attempts: 4 });
    expect(err.message).to.match(/^MidoNet GET \/hosts \(Host\): network error: .*ECONNREFUSED/);
    expect(attempts.map((a) => a.status)).to.deep.equal([0, 0, 0, 0]);
    const gaps = times.slice(1).map((t, i) => t - (times[i] as number));
    expect(gaps[0]).to.be.at.least(30);
    expect(gaps[1]).to.be.at.least(62);
    expect(gaps[2]).to.be.at.least(126);
  });

  it("stops at once when its signal aborts, without further retries", async () => {
    const ac = new AbortController();
    const c = client({ signal: ac.signal, timeoutMs: 5000, retries: 5 });
    await c.login();
    sim.injectFault({ path: "/routers", hang: true });
    setTimeout(() => ac.abort(), 50);
    const err = await rejection(c.routers.list());
    expect(err.reason).to.equal("aborted");
    expect(callsTo("GET", "/routers")).to.have.length(1);
  });

  it("updates: a router port PUT keeps portMac only when sent (MidoNet clears an omitted one)", async () => {
    const c = client();
    await c.routers.create({ id: ROUTER, name: "r" });
    const port: RouterPort = {
      id: ROUTER_PORT,
      type: "Router",
      networkAddress: "10.1.0.0",
      networkLength: 24,
      portAddress: "10.1.0.1",
      portMac: "ac:ca:ba:aa:bb:cc",
    };
    await c.ports.createOnRouter(ROUTER, port);
    await c.ports.update({ ...port, id: ROUTER_PORT });
    expect(((await c.ports.get(ROUTER_PORT)) as RouterPort).portMac).to.equal("ac:ca:ba:aa:bb:cc");
    const { portMac: _sent, ...withoutMac } = port;
    await c.ports.update({ ...withoutMac, id: ROUTER_PORT });
    expect(((await c.ports.get(ROUTER_PORT)) as RouterPort).portMac).to.equal(null);
    const err = await rejection(c.ports.update({ id: MISSING, type: "Bridge" }));
    expect(err.status).to.equal(404);
  });

  it("a tunnel zone PUT keeping its name is a 409 error (MidoNet bug), a rename succeeds", async () => {
    const c = client();
    await c.tunnelZones.create({ id: TZ, name: "tz", type: "vxlan" });
    const err = await rejection(c.tunnelZones.update({ id: TZ, name: "tz", type: "vxlan" }));
    expect(err.status).to.equal(409);
    await c.tunnelZones.update({ id: TZ, name: "tz2", type: "vxlan" });
    expect((await c.tunnelZones.get(TZ))?.name).to.equal("tz2");
  });

  it("typed views: lists, links, rule positions, hosts by name, the application", async () => {
    const c = client();
    for (const obj of TOPOLOGY) await c.create(obj);
    expect(await c.portLinks.get(BRIDGE_PORT)).to.deep.equal({
      portId: BRIDGE_PORT,
      peerId: ROUTER_PORT,
    });
    expect(await c.portLinks.get(NODE_PORT)).to.equal(undefined);
    expect((await c.ports.listOnBridge(BRIDGE)).map((p) => p.id)).to.deep.equal([
      BRIDGE_PORT,
      NODE_PORT,
    ]);
    const routes = await c.routes.list(ROUTER);
    expect(routes.map((r) => r.type).sort()).to.deep.equal(["Local", "Normal"]);
    await c.rules.create(SVC_CHAIN, { id: id(20), type: "accept", position: 2 });
    expect((await c.rules.list(SVC_CHAIN)).map((r) => [r.id, r.position])).to.deep.equal([
      [JUMP_RULE, 1],
      [id(20), 2],
    ]);
    expect((await c.hosts.findByName("node1"))?.id).to.equal(HOST);
    expect(await c.hosts.findByName("node9")).to.equal(undefined);
    expect(await c.tunnelZoneHosts.list(TZ)).to.have.length(1);
    expect(await c.hostInterfacePorts.list(HOST)).to.have.length(1);
    expect(await c.macTable.list(BRIDGE)).to.have.length(1);
    expect(await c.arpTable.get(BRIDGE, "10.1.0.2", "ee:ee:ee:00:00:01")).to.include({
      ip: "10.1.0.2",
    });
    expect((await c.application()).hosts).to.equal(`${sim.baseUrl}/hosts`);
  });

  it("cascades seen through the client: deleting a chain makes its rules and the jump to it gone", async () => {
    const c = client();
    for (const obj of TOPOLOGY) await c.create(obj);
    expect(await c.chains.delete(CHAIN)).to.equal(true);
    expect(await c.rules.get(SNAT_RULE)).to.equal(undefined);
    expect(await c.rules.get(JUMP_RULE)).to.equal(undefined);
    expect(await c.rules.delete(JUMP_RULE)).to.equal(false); // already gone: success for a reconciler
    expect((await c.ports.get(NODE_PORT))?.outboundFilterId).to.equal(null);
  });
});
