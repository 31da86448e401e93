/**
 * The MidoNet API simulator against MidoNet's REST API (5.x) as the cluster
 * answers it (see test/support/midonet-simulator.ts), driven over real
 * HTTP on 127.0.0.1 with raw requests (no client), so every status, header and
 * body is the simulator's own.
 */
import http from "node:http";
import { expect } from "chai";
import { cidrNetwork, formatIp, type ParsedCidr, parseCidr } from "../../src/net/ip.js";
import { formatTokenExpiry } from "../support/midonet-simulator/session.js";
import { type MidonetSimulator, startMidonetSimulator } from "../support/midonet-simulator.js";

const mt = (name: string, v: number) => `application/vnd.org.midonet.${name}-v${v}+json`;
const cmt = (name: string, v: number) =>
  `application/vnd.org.midonet.collection.${name}-v${v}+json`;

const HOST1 = "11111111-1111-4111-8111-111111111111";
const HOST2 = "22222222-2222-4222-8222-222222222222";
const MISSING = "99999999-9999-4999-8999-999999999999";

interface Answer {
  status: number;
  headers: Headers;
  text: string;
  body: unknown;
}

interface RequestOptions {
  body?: unknown;
  rawBody?: string;
  type?: string;
  accept?: string;
  token?: string | null;
  headers?: Record<string, string>;
  signal?: AbortSignal;
}

/** A router port's address fields (RouterPort.java) from "address/length". */
function routerPortAddress(cidr: string) {
  const [address = "", length = "32"] = cidr.split("/");
  const network = cidrNetwork(parseCidr(cidr) as ParsedCidr);
  return { networkAddress: formatIp(network), networkLength: Number(length), portAddress: address };
}

describe("MidoNet API simulator", () => {
  let sim: MidonetSimulator;
  let token: string;

  beforeEach(async () => {
    sim = await startMidonetSimulator({
      hosts: [
        { id: HOST1, name: "node1" },
        { id: HOST2, name: "node2" },
      ],
    });
    token = sim.issueToken();
  });

  afterEach(async () => {
    await sim.close();
  });

  async function call(method: string, path: string, o: RequestOptions = {}): Promise<Answer> {
    const headers: Record<string, string> = { ...o.headers };
    const tok = o.token === undefined ? token : o.token;
    if (tok !== null) headers["X-Auth-Token"] = tok;
    if (o.type !== undefined) headers["Content-Type"] = o.type;
    if (o.accept !== undefined) headers.Accept = o.accept;
    const init: RequestInit = { method, headers };
    if (o.rawBody !== undefined) init.body = o.rawBody;
    else if (o.body !== undefined) init.body = JSON.stringify(o.body);
    if (o.signal) init.signal = o.signal;
    const res = await fetch(sim.baseUrl + path, init);
    const text = await res.text();
    let body: unknown;
    try {
      body = text ? JSON.parse(text) : undefined;
    } catch {
      body = text;
    }
    return { status: res.status, headers: res.headers, text, body };
  }

  const post = (path: string, type: string, body: unknown, o: RequestOptions = {}) =>
    call("POST", path, { ...o, type, body });
  const put = (path: string, type: string, body: unknown) => call("PUT", path, { type, body });
  const get = (path: string, accept?: string) =>
    call("GET", path, accept === undefined ? {} : { accept });
  const del = (path: string) => call("DELETE", path);

  /** POSTs, expects 201, returns the created id (last segment of Location). */
  async function create(path: string, type: string, body: unknown): Promise<string> {
    const res = await post(path, type, body);
    expect(res.status, `${path}: ${res.text}`).to.equal(201);
    const location = res.headers.get("location") ?? "";
    return location.slice(location.lastIndexOf("/") + 1);
  }

  const bridge = (body: object = {}) => create("/bridges", mt("Bridge", 4), { name: "b", ...body });
  const router = (body: object = {}) => create("/routers", mt("Router", 3), { name: "r", ...body });
  const chain = (name = "c") => create("/chains", mt("Chain", 1), { name });
  const bridgePort = (bridgeId: string, body: object = {}) =>
    create(`/bridges/${bridgeId}/ports`, mt("Port", 3), { type: "Bridge", ...body });
  const routerPort = (routerId: string, address = "10.1.0.1/24", body: object = {}) =>
    create(`/routers/${routerId}/ports`, mt("Port", 3), {
      type: "Router",
      ...routerPortAddress(address),
      ...body,
    });
  const rule = (chainId: string, body: object) =>
    create(`/chains/${chainId}/rules`, mt("Rule", 2), body);
  const tunnelZone = (name = "default") =>
    create("/tunnel_zones", mt("TunnelZone", 1), { name, type: "vxlan" });
  const join = (tz: string, hostId: string, ipAddress = "192.168.0.1") =>
    create(`/tunnel_zones/${tz}/hosts`, mt("TunnelZoneHost", 1), { hostId, ipAddress });
  const bind = (hostId: string, portId: string, interfaceName: string) =>
    post(`/hosts/${hostId}/ports`, mt("HostInterfacePort", 1), { portId, interfaceName });
  const link = (portId: string, peerId: string) =>
    post(`/ports/${portId}/link`, mt("PortLink", 1), { peerId });
  const getJson = async <T>(path: string): Promise<T> => {
    const res = await get(path);
    expect(res.status, `${path}: ${res.text}`).to.equal(200);
    return res.body as T;
  };
  const ruleIds = async (chainId: string) =>
    (await getJson<{ id: string; position: number }[]>(`/chains/${chainId}/rules`)).map(
      (r) => r.id,
    );

  function expectError(res: Answer, status: number, match?: RegExp): void {
    expect(res.status, res.text).to.equal(status);
    expect(res.headers.get("content-type")).to.equal(mt("Error", 1));
    const body = res.body as { code: number; message: string };
    expect(body.code).to.equal(status);
    expect(body.message).to.be.a("string").and.not.empty;
    if (match) expect(body.message).to.match(match);
  }

  describe("authentication", () => {
    it("answers 401 with an Error-v1 body without a token or with an unknown one", async () => {
      expectError(await call("GET", "/bridges", { token: null }), 401);
      expectError(await call("GET", "/bridges", { token: "not-a-token" }), 401);
      expectError(await call("GET", "/", { token: null }), 401);
    });

    it("logs in with Basic auth and X-Auth-Project, answering Token-v1 {key, expires}", async () => {
      const res = await call("POST", "/login", {
        token: null,
        accept: mt("Token", 1),
        headers: {
          Authorization: `Basic ${Buffer.from("admin:admin").toString("base64")}`,
          "X-Auth-Project": "admin",
        },
      });
      expect(res.status).to.equal(200);
      expect(res.headers.get("content-type")).to.equal(mt("Token", 1));
      const t = res.body as { key: string; expires: string };
      expect(t.key).to.be.a("string").and.not.empty;
      expect(t.expires).to.be.a("string").and.not.empty;
      expect((await call("GET", "/bridges", { token: t.key })).status).to.equal(200);
    });

    for (const [name, headers] of [
      [
        "a wrong password",
        { Authorization: `Basic ${btoa("admin:nope")}`, "X-Auth-Project": "admin" },
      ],
      [
        "a wrong project",
        { Authorization: `Basic ${btoa("admin:admin")}`, "X-Auth-Project": "other" },
      ],
      ["no Authorization header", { "X-Auth-Project": "admin" }],
      ["no project", { Authorization: `Basic ${btoa("admin:admin")}` }],
    ] as const) {
      it(`refuses a login with ${name} (401)`, async () => {
        expectError(await call("POST", "/login", { token: null, headers }), 401);
      });
    }

    it("answers 401 once tokens are expired", async () => {
      expect((await get("/bridges")).status).to.equal(200);
      sim.expireTokens();
      expectError(await get("/bridges"), 401);
    });

    it("lets tokens lapse after their lifetime", async () => {
      const shortLived = await startMidonetSimulator({ tokenTtlMs: 30 });
      try {
        const key = shortLived.issueToken();
        const url = `${shortLived.baseUrl}/bridges`;
        expect((await fetch(url, { headers: { "X-Auth-Token": key } })).status).to.equal(200);
        await new Promise((r) => setTimeout(r, 60));
        expect((await fetch(url, { headers: { "X-Auth-Token": key } })).status).to.equal(401);
      } finally {
        await shortLived.close();
      }
    });
  });

  describe("application and hosts", () => {
    it("GET / returns the Application object", async () => {
      const res = await get("/", mt("Application", 5));
      expect(res.status).to.equal(200);
      expect(res.headers.get("content-type")).to.equal(mt("Application", 5));
      const app = res.body as Record<string, string>;
      expect(app.uri).to.equal(`${sim.baseUrl}/`);
      expect(app.hosts).to.equal(`${sim.baseUrl}/hosts`);
      expect(app.bridgeTemplate).to.equal(`${sim.baseUrl}/bridges/{id}`);
    });

    it("GET /hosts lists the preloaded hosts as collection.Host-v3", async () => {
      const res = await get("/hosts", cmt("Host", 3));
      expect(res.status).to.equal(200);
      expect(res.headers.get("content-type")).to.equal(cmt("Host", 3));
      const hosts = res.body as { id: string; name: string }[];
      expect(hosts.map((h) => [h.id, h.name])).to.deep.equal([
        [HOST1, "node1"],
        [HOST2, "node2"],
      ]);
      sim.addHost({ id: MISSING, name: "node9" });
      expect(await getJson<unknown[]>("/hosts")).to.have.length(3);
    });

    it("hosts are read only (405)", async () => {
      expectError(await post("/hosts", mt("Host", 3), { id: MISSING, name: "x" }), 405);
    });
  });

  describe("media types", () => {
    it("matches Content-Type case-insensitively and ignores parameters", async () => {
      const res = await post(
        "/bridges",
        "APPLICATION/VND.ORG.MIDONET.BRIDGE-V4+JSON; charset=UTF-8",
        {
          name: "b",
        },
      );
      expect(res.status).to.equal(201);
    });

    for (const type of [mt("Bridge", 3), mt("Router", 3), "application/json", undefined]) {
      it(`answers 406 to a bridge POSTed as ${type ?? "(no Content-Type)"}`, async () => {
        const res =
          type === undefined
            ? await call("POST", "/bridges", { rawBody: '{"name":"b"}' })
            : await post("/bridges", type, { name: "b" });
        expectError(res, 406);
        expect(sim.snapshot().bridges).to.be.empty;
      });
    }

    for (const [accept, status] of [
      [mt("Bridge", 4), 200],
      [mt("bridge", 4).toUpperCase(), 200],
      [`text/plain, ${mt("Bridge", 4)};q=0.9`, 200],
      ["*/*", 200],
      [mt("Router", 3), 406],
      [cmt("Bridge", 4), 406],
      ["application/json", 406],
    ] as const) {
      it(`answers ${status} to GET /bridges/{id} with Accept ${accept}`, async () => {
        const id = await bridge();
        const res = await get(`/bridges/${id}`, accept);
        if (status === 200) {
          expect(res.status).to.equal(200);
          expect(res.headers.get("content-type")).to.equal(mt("Bridge", 4));
        } else expectError(res, 406);
      });
    }

    it("accepts Bridge-v5 and Port-v4 and answers in the version asked for", async () => {
      const b = await create("/bridges", mt("Bridge", 5), { name: "b5" });
      const p = await create(`/bridges/${b}/ports`, mt("Port", 4), { type: "Bridge" });
      const res = await get(`/bridges/${b}`, mt("Bridge", 5));
      expect(res.headers.get("content-type")).to.equal(mt("Bridge", 5));
      expect((await get(`/ports/${p}`, mt("Port", 4))).status).to.equal(200);
    });
  });

  describe("create, read, update, delete", () => {
    it("answers a create 201 with Location and no body; an omitted id gets a random UUID", async () => {
      const res = await post("/bridges", mt("Bridge", 4), { name: "b", tenantId: "t1" });
      expect(res.status).to.equal(201);
      expect(res.text).to.equal("");
      const location = res.headers.get("location") ?? "";
      expect(location).to.match(
        new RegExp(
          `^${sim.baseUrl}/bridges/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`,
        ),
      );
      const got = await fetch(location, { headers: { "X-Auth-Token": token } });
      const body = (await got.json()) as Record<string, unknown>;
      expect(body).to.include({ name: "b", tenantId: "t1", inboundFilterId: null });
      expect(body.uri).to.equal(location);
    });

    it("keeps an id given on create, and answers 409 to a duplicate id", async () => {
      const id = "3b0f3b0f-0000-4000-8000-000000000001";
      expect(await bridge({ id })).to.equal(id);
      expectError(await post("/bridges", mt("Bridge", 4), { id, name: "again" }), 409);
      expect(sim.snapshot().bridges).to.have.length(1);
    });

    it("answers PUT and DELETE 204 with no body", async () => {
      const id = await router();
      const putRes = await put(`/routers/${id}`, mt("Router", 3), { name: "renamed" });
      expect([putRes.status, putRes.text]).to.deep.equal([204, ""]);
      expect((await getJson<{ name: string }>(`/routers/${id}`)).name).to.equal("renamed");
      const delRes = await del(`/routers/${id}`);
      expect([delRes.status, delRes.text]).to.deep.equal([204, ""]);
      expectError(await get(`/routers/${id}`), 404);
    });

    it("a router or bridge PUT clears what its body does not carry (Router.java, Bridge.java update)", async () => {
      const c = await chain("forward");
      const lb = "44444444-4444-4444-8444-444444444444";
      const mirror = "33333333-3333-4333-8333-333333333333";
      const r = await router({
        adminStateUp: false,
        loadBalancerId: lb,
        forwardChainId: c,
        localRedirectChainId: c,
        outboundMirrorIds: [mirror],
        qosPolicyId: lb,
      });
      const b = await bridge({ inboundMirrorIds: [mirror], qosPolicyId: lb });
      expect(await getJson(`/routers/${r}`)).to.deep.include({
        adminStateUp: false,
        loadBalancerId: lb,
        forwardChainId: c,
        outboundMirrorIds: [mirror],
      });
      expect((await put(`/routers/${r}`, mt("Router", 3), { name: "r" })).status).to.equal(204);
      expect((await put(`/bridges/${b}`, mt("Bridge", 4), { name: "b" })).status).to.equal(204);
      expect(await getJson(`/routers/${r}`)).to.deep.include({
        adminStateUp: true,
        loadBalancerId: null,
        forwardChainId: null,
        localRedirectChainId: null,
        outboundMirrorIds: null,
        qosPolicyId: null,
      });
      expect(await getJson(`/bridges/${b}`)).to.deep.include({
        inboundMirrorIds: null,
        qosPolicyId: null,
      });
      expectError(await put(`/routers/${r}`, mt("Router", 3), { forwardChainId: MISSING }), 404);
    });

    for (const [method, path] of [
      ["GET", `/bridges/${MISSING}`],
      ["PUT", `/bridges/${MISSING}`],
      ["DELETE", `/bridges/${MISSING}`],
      ["GET", `/ports/${MISSING}`],
      ["DELETE", `/chains/${MISSING}`],
      ["GET", `/rules/${MISSING}`],
      ["DELETE", `/routes/${MISSING}`],
      ["GET", "/bridges/not-a-uuid"],
      ["GET", "/no_such_collection"],
    ] as const) {
      it(`answers 404 to ${method} ${path}`, async () => {
        const res =
          method === "PUT"
            ? await put(path, mt("Bridge", 4), { name: "x" })
            : await call(method, path);
        expectError(res, 404);
      });
    }

    for (const [name, o] of [
      ["malformed JSON", { rawBody: "{name:" }],
      ["a body that is not an object", { body: ["b"] }],
      ["an id that is not a UUID", { body: { id: "nope", name: "b" } }],
      ["a filter id that is not a UUID", { body: { inboundFilterId: 42 } }],
    ] as const) {
      it(`answers 400 to a bridge with ${name}`, async () => {
        expectError(await call("POST", "/bridges", { type: mt("Bridge", 4), ...o }), 400);
      });
    }

    it("ignores unknown fields, as MidoNet does (ObjectMapperProvider.java): a typo is dropped, not refused", async () => {
      const res = await post("/bridges", mt("Bridge", 4), {
        name: "b",
        nmae: "typo",
        inboundFilterId: null,
      });
      expect(res.status).to.equal(201);
      const c = await chain();
      const r = await rule(c, { type: "accept", nwDstAdress: "10.0.0.1", nwDstLength: 32 });
      const got = await getJson<Record<string, unknown>>(`/rules/${r}`);
      expect(got).to.not.have.property("nwDstAdress");
      expect(got).to.not.have.property("nwDstAddress");
    });

    it("ignores read-only fields sent back (uri, deviceId)", async () => {
      const b = await bridge();
      const got = await getJson<Record<string, unknown>>(`/bridges/${b}`);
      expect((await put(`/bridges/${b}`, mt("Bridge", 4), { ...got, name: "x" })).status).to.equal(
        204,
      );
    });

    it("answers 405 to a method the resource lacks (PUT on chains, rules, routes)", async () => {
      const c = await chain();
      const ru = await rule(c, { type: "accept" });
      const r = await router();
      const p = await routerPort(r);
      const rt = sim.snapshot().routes[0]?.id;
      expectError(await put(`/chains/${c}`, mt("Chain", 1), { name: "x" }), 405);
      expectError(await put(`/rules/${ru}`, mt("Rule", 2), { type: "drop" }), 405);
      expectError(await put(`/routes/${rt}`, mt("Route", 1), { type: "Local" }), 405);
      expectError(await call("GET", `/ports/${p}/link`), 405);
    });

    it("answers 404 to a bridge whose filter chain does not exist", async () => {
      expectError(await post("/bridges", mt("Bridge", 4), { inboundFilterId: MISSING }), 404);
    });
  });

  describe("tunnel zones", () => {
    it("answers 409 to a duplicate name and 400 to an unknown type", async () => {
      await tunnelZone("tz");
      expectError(
        await post("/tunnel_zones", mt("TunnelZone", 1), { name: "tz", type: "gre" }),
        409,
      );
      expectError(
        await post("/tunnel_zones", mt("TunnelZone", 1), { name: "other", type: "ipsec" }),
        400,
      );
    });

    it("answers 409 to a PUT that keeps the zone's own name (MidoNet bug), 204 to a new name", async () => {
      const tz = await tunnelZone("tz");
      const path = `/tunnel_zones/${tz}`;
      expectError(await put(path, mt("TunnelZone", 1), { name: "tz", type: "vxlan" }), 409);
      expect(
        (await put(path, mt("TunnelZone", 1), { name: "tz2", type: "vxlan" })).status,
      ).to.equal(204);
    });

    it("adds hosts: 409 if already a member, 404 for an unknown host or zone", async () => {
      const tz = await tunnelZone();
      expect(await join(tz, HOST1, "10.0.0.1")).to.equal(HOST1);
      const member = await getJson<Record<string, unknown>>(`/tunnel_zones/${tz}/hosts/${HOST1}`);
      expect(member).to.include({ tunnelZoneId: tz, hostId: HOST1, ipAddress: "10.0.0.1" });
      const type = mt("TunnelZoneHost", 1);
      expectError(
        await post(`/tunnel_zones/${tz}/hosts`, type, { hostId: HOST1, ipAddress: "10.0.0.2" }),
        409,
      );
      expectError(
        await post(`/tunnel_zones/${tz}/hosts`, type, { hostId: MISSING, ipAddress: "10.0.0.3" }),
        404,
      );
      expectError(
        await post(`/tunnel_zones/${MISSING}/hosts`, type, {
          hostId: HOST2,
          ipAddress: "10.0.0.3",
        }),
        404,
      );
      expectError(
        await post(`/tunnel_zones/${tz}/hosts`, type, { hostId: HOST2, ipAddress: "10.0.0" }),
        400,
      );
    });

    it("deleting a membership removes the host from the zone", async () => {
      const tz = await tunnelZone();
      await join(tz, HOST1);
      expect((await del(`/tunnel_zones/${tz}/hosts/${HOST1}`)).status).to.equal(204);
      expectError(await get(`/tunnel_zones/${tz}/hosts/${HOST1}`), 404);
      expect(await getJson<unknown[]>(`/tunnel_zones/${tz}/hosts`)).to.be.empty;
      expect(sim.snapshot().tunnelZoneHosts).to.be.empty;
    });
  });

  describe("ports and links", () => {
    it("a router port gets a Local /32 route to its address and a random MAC", async () => {
      const r = await router();
      const p = await routerPort(r, "10.1.0.1/24");
      const port = await getJson<Record<string, unknown>>(`/ports/${p}`);
      expect(port).to.include({
        type: "Router",
        deviceId: r,
        portAddress: "10.1.0.1",
        networkAddress: "10.1.0.0",
        networkLength: 24,
      });
      expect(port, "RouterPort.java: portSubnet is @JsonIgnore").not.to.have.property("portSubnet");
      expect(port.portMac).to.match(/^([0-9a-f]{2}:){5}[0-9a-f]{2}$/);
      const routes = await getJson<Record<string, unknown>[]>(`/routers/${r}/routes`);
      expect(routes).to.have.length(1);
      expect(routes[0]).to.include({
        type: "Local",
        dstNetworkAddr: "10.1.0.1",
        dstNetworkLength: 32,
        nextHopPort: p,
        routerId: r,
      });
    });

    it("keeps a given portMac, and a PUT without portMac clears it; a PUT without the addresses is refused", async () => {
      const r = await router();
      const p = await routerPort(r, "10.1.0.1/24", { portMac: "AC:CA:BA:01:02:03" });
      expect((await getJson<{ portMac: string }>(`/ports/${p}`)).portMac).to.equal(
        "ac:ca:ba:01:02:03",
      );
      const bare = await put(`/ports/${p}`, mt("Port", 3), { type: "Router" });
      expectError(bare, 400, /Validation error/);
      expect((bare.body as { violations: unknown }).violations).to.deep.equal([
        { property: "networkAddress", message: "may not be null" },
        { property: "portAddress", message: "may not be null" },
      ]);
      const body = { type: "Router", ...routerPortAddress("10.1.0.1/24") };
      expect((await put(`/ports/${p}`, mt("Port", 3), body)).status).to.equal(204);
      expect((await getJson<{ portMac: string | null }>(`/ports/${p}`)).portMac).to.equal(null);
    });

    it("a PUT with a new address leaves the routes alone: the old Local route stays, the new address gets none (PortResource.scala)", async () => {
      const r = await router();
      const p = await routerPort(r, "10.1.0.1/24");
      const res = await put(`/ports/${p}`, mt("Port", 3), {
        type: "Router",
        ...routerPortAddress("10.2.0.1/24"),
      });
      expect(res.status).to.equal(204);
      expect(await getJson(`/ports/${p}`)).to.deep.include(routerPortAddress("10.2.0.1/24"));
      const routes = await getJson<{ dstNetworkAddr: string }[]>(`/routers/${r}/routes`);
      expect(routes.map((x) => x.dstNetworkAddr)).to.deep.equal(["10.1.0.1"]);
    });

    it("a PUT clears the port fields it does not carry (Port.java update): mirrors, vifId, adminStateUp back to true", async () => {
      const b = await bridge();
      const mirror = "33333333-3333-4333-8333-333333333333";
      const p = await bridgePort(b, { adminStateUp: false, inboundMirrorIds: [mirror] });
      expect(await getJson(`/ports/${p}`)).to.deep.include({
        adminStateUp: false,
        inboundMirrorIds: [mirror],
      });
      expect((await put(`/ports/${p}`, mt("Port", 3), { type: "Bridge" })).status).to.equal(204);
      expect(await getJson(`/ports/${p}`)).to.deep.include({
        adminStateUp: true,
        inboundMirrorIds: null,
        vifId: null,
      });
    });

    it("validates ports as RouterPort.java does: wrong type for the device, no address, a bad address or length; portSubnet ignored", async () => {
      const b = await bridge();
      const r = await router();
      expectError(await post(`/bridges/${b}/ports`, mt("Port", 3), { type: "Router" }), 400);
      const violations = async (body: object) => {
        const res = await post(`/routers/${r}/ports`, mt("Port", 3), { type: "Router", ...body });
        expectError(res, 400, /Validation error/);
        return (res.body as { violations: unknown }).violations;
      };
      // The field the original Go client sent: not bound by the JSON, so no address at all.
      expect(await violations({ portSubnet: ["10.0.0.1/24"] })).to.deep.equal([
        { property: "networkAddress", message: "may not be null" },
        { property: "portAddress", message: "may not be null" },
      ]);
      expect(
        await violations({ ...routerPortAddress("10.0.0.1/24"), portAddress: "10.0.0.300" }),
      ).to.deep.equal([{ property: "portAddress", message: "is an invalid IP format" }]);
      expect(
        await violations({ ...routerPortAddress("10.0.0.1/24"), networkLength: 33 }),
      ).to.deep.equal([{ property: "networkLength", message: "must be less than or equal to 32" }]);
      expectError(await post(`/bridges/${MISSING}/ports`, mt("Port", 3), { type: "Bridge" }), 404);
    });

    it("links two ports both ways; 409 if either already has a peer, 404 if one is missing", async () => {
      const b = await bridge();
      const r = await router();
      const bp = await bridgePort(b);
      const rp = await routerPort(r);
      const other = await bridgePort(b);
      const res = await link(bp, rp);
      expect(res.status).to.equal(201);
      expect(res.headers.get("location")).to.equal(`${sim.baseUrl}/ports/${bp}/link`);
      expect((await getJson<{ peerId: string }>(`/ports/${bp}`)).peerId).to.equal(rp);
      expect((await getJson<{ peerId: string }>(`/ports/${rp}`)).peerId).to.equal(bp);
      expectError(await link(other, rp), 409);
      expectError(await link(bp, other), 409);
      expectError(await link(other, MISSING), 404);
      expectError(await link(MISSING, other), 404);
    });

    it("DELETE of a link clears both peers", async () => {
      const b = await bridge();
      const p1 = await bridgePort(b);
      const p2 = await bridgePort(b);
      await link(p1, p2);
      expect((await del(`/ports/${p1}/link`)).status).to.equal(204);
      expect((await getJson<{ peerId: string | null }>(`/ports/${p1}`)).peerId).to.equal(null);
      expect((await getJson<{ peerId: string | null }>(`/ports/${p2}`)).peerId).to.equal(null);
    });
  });

  describe("routes", () => {
    const route = (extra: object) => ({
      type: "Normal",
      srcNetworkAddr: "0.0.0.0",
      srcNetworkLength: 0,
      dstNetworkAddr: "10.2.0.0",
      dstNetworkLength: 16,
      weight: 100,
      ...extra,
    });

    it("creates a Normal route through a port of the same router", async () => {
      const r = await router();
      const p = await routerPort(r);
      const id = await create(
        `/routers/${r}/routes`,
        mt("Route", 1),
        route({ nextHopPort: p, nextHopGateway: "10.1.0.2" }),
      );
      expect(await getJson<Record<string, unknown>>(`/routes/${id}`)).to.include({
        routerId: r,
        nextHopPort: p,
        nextHopGateway: "10.1.0.2",
        dstNetworkAddr: "10.2.0.0",
        weight: 100,
      });
    });

    it("answers 400 to a Normal route whose next hop port is missing or on another router, and to bad fields", async () => {
      const r = await router();
      const other = await router();
      const otherPort = await routerPort(other);
      const b = await bridge();
      const bp = await bridgePort(b);
      const path = `/routers/${r}/routes`;
      const type = mt("Route", 1);
      for (const body of [
        route({}),
        route({ nextHopPort: MISSING }),
        route({ nextHopPort: otherPort }),
        route({ nextHopPort: bp }),
        route({ nextHopPort: otherPort, type: "Local" }),
        route({ type: "Blackhole" }),
        route({ type: "BlackHole", weight: -1 }),
        route({ type: "BlackHole", dstNetworkAddr: "10.2.0" }),
        route({ type: "BlackHole", dstNetworkLength: 33 }),
      ]) {
        expectError(await post(path, type, body), 400);
      }
      expect((await post(path, type, route({ type: "BlackHole" }))).status).to.equal(201);
      expectError(
        await post(`/routers/${MISSING}/routes`, type, route({ type: "BlackHole" })),
        404,
      );
    });
  });

  describe("rules", () => {
    const accept = (extra: object = {}) => ({ type: "accept", ...extra });

    it("puts a rule without position at the head, and GET reports position index+1", async () => {
      const c = await chain();
      const a = await rule(c, accept());
      const b = await rule(c, accept());
      const d = await rule(c, accept());
      expect(await ruleIds(c)).to.deep.equal([d, b, a]);
      const list = await getJson<{ position: number }[]>(`/chains/${c}/rules`);
      expect(list.map((r) => r.position)).to.deep.equal([1, 2, 3]);
      expect((await getJson<{ position: number }>(`/rules/${a}`)).position).to.equal(3);
    });

    it("inserts at a given position; size+1 appends; beyond that or below 1 is 400", async () => {
      const c = await chain();
      const a = await rule(c, accept({ position: 1 }));
      const z = await rule(c, accept({ position: 2 }));
      const m = await rule(c, accept({ position: 2 }));
      expect(await ruleIds(c)).to.deep.equal([a, m, z]);
      expectError(await post(`/chains/${c}/rules`, mt("Rule", 2), accept({ position: 5 })), 400);
      expectError(await post(`/chains/${c}/rules`, mt("Rule", 2), accept({ position: 0 })), 400);
      const last = await rule(c, accept({ position: 4 }));
      expect(await ruleIds(c)).to.deep.equal([a, m, z, last]);
    });

    it("deleting a rule moves the later ones up", async () => {
      const c = await chain();
      const a = await rule(c, accept({ position: 1 }));
      const b = await rule(c, accept({ position: 2 }));
      await del(`/rules/${a}`);
      expect((await getJson<{ position: number }>(`/rules/${b}`)).position).to.equal(1);
    });

    it("a jump needs jumpChainId (400) to an existing chain (404)", async () => {
      const c = await chain();
      expectError(
        await post(`/chains/${c}/rules`, mt("Rule", 2), { type: "jump" }),
        400,
        /jumpChainId/,
      );
      expectError(
        await post(`/chains/${c}/rules`, mt("Rule", 2), { type: "jump", jumpChainId: MISSING }),
        404,
      );
      const target = await chain("target");
      const j = await rule(c, { type: "jump", jumpChainId: target });
      expect((await getJson<{ jumpChainId: string }>(`/rules/${j}`)).jumpChainId).to.equal(target);
    });

    it("validates NAT rules: flowAction required, natTargets required for dnat/snat", async () => {
      const c = await chain();
      const path = `/chains/${c}/rules`;
      const type = mt("Rule", 2);
      const target = { addressFrom: "10.0.0.5", addressTo: "10.0.0.5", portFrom: 80, portTo: 80 };
      for (const body of [
        { type: "dnat", natTargets: [target] },
        { type: "dnat", flowAction: "accept" },
        { type: "snat", flowAction: "accept", natTargets: [] },
        { type: "rev_dnat", flowAction: "jump" },
        { type: "dnat", flowAction: "accept", natTargets: [{ addressFrom: "10.0.0.5" }] },
        { type: "forward" },
        { type: "accept", dlType: 10 },
        { type: "accept", tpDst: { start: 90, end: 80 } },
        { type: "accept", nwSrcAddress: "10.0.0.300" },
      ]) {
        expectError(await post(path, type, body), 400);
      }
      expectError(await post(`/chains/${MISSING}/rules`, type, { type: "accept" }), 404);
    });

    it("round-trips conditions, natTargets and flowAction", async () => {
      const c = await chain();
      const body = {
        type: "snat",
        flowAction: "continue",
        dlType: 2048,
        nwSrcAddress: "10.1.0.2",
        nwSrcLength: 32,
        nwProto: 6,
        tpDst: { start: 80, end: 80 },
        natTargets: [
          { addressFrom: "10.1.0.1", addressTo: "10.1.0.1", portFrom: 30000, portTo: 60000 },
        ],
      };
      const id = await rule(c, body);
      const got = await getJson<Record<string, unknown>>(`/rules/${id}`);
      expect(got).to.deep.include({ ...body, id, chainId: c, position: 1 });
    });
  });

  describe("host interface ports", () => {
    it("answers 409 while the host is in no tunnel zone, then binds the port", async () => {
      const b = await bridge();
      const p = await bridgePort(b);
      expectError(await bind(HOST1, p, "midoabc"), 409, /tunnel zone/);
      await join(await tunnelZone(), HOST1);
      const res = await bind(HOST1, p, "midoabc");
      expect(res.status).to.equal(201);
      expect(res.headers.get("location")).to.equal(`${sim.baseUrl}/hosts/${HOST1}/ports/${p}`);
      expect(await getJson<Record<string, unknown>>(`/ports/${p}`)).to.include({
        hostId: HOST1,
        interfaceName: "midoabc",
      });
      expect(await getJson<Record<string, unknown>>(`/hosts/${HOST1}/ports/${p}`)).to.include({
        hostId: HOST1,
        portId: p,
        interfaceName: "midoabc",
      });
    });

    it("answers 409 to a port already bound or an interface name taken, 404 to a missing host or port", async () => {
      const tz = await tunnelZone();
      await join(tz, HOST1, "10.0.0.1");
      await join(tz, HOST2, "10.0.0.2");
      const b = await bridge();
      const p1 = await bridgePort(b);
      const p2 = await bridgePort(b);
      expect((await bind(HOST1, p1, "if1")).status).to.equal(201);
      expectError(await bind(HOST2, p1, "if9"), 409, /already bound/);
      expectError(await bind(HOST1, p2, "if1"), 409, /if1/);
      expect((await bind(HOST2, p2, "if1")).status).to.equal(201); // same name, other host
      expectError(await bind(MISSING, p2, "if2"), 404);
      expectError(await bind(HOST1, MISSING, "if2"), 404);
      expectError(await bind(HOST1, p2, ""), 400);
    });

    it("deleting a binding frees the port", async () => {
      await join(await tunnelZone(), HOST1);
      const p = await bridgePort(await bridge());
      await bind(HOST1, p, "if1");
      expect((await del(`/hosts/${HOST1}/ports/${p}`)).status).to.equal(204);
      expect(await getJson<Record<string, unknown>>(`/ports/${p}`)).to.include({
        hostId: null,
        interfaceName: null,
      });
      // HostInterfacePortResource.scala's delete: the port unbound or not, 204 all the same.
      expect((await del(`/hosts/${HOST1}/ports/${p}`)).status).to.equal(204);
    });

    it("deleting a binding through another host's path unbinds the port wherever it is bound; only a missing port is a 404", async () => {
      await join(await tunnelZone(), HOST1);
      const p = await bridgePort(await bridge());
      await bind(HOST1, p, "if1");
      expect((await del(`/hosts/${HOST2}/ports/${p}`)).status).to.equal(204);
      expect(await getJson<Record<string, unknown>>(`/ports/${p}`)).to.include({
        hostId: null,
        interfaceName: null,
      });
      expect(await getJson<unknown[]>(`/hosts/${HOST1}/ports`)).to.be.empty;
      expectError(await del(`/hosts/${HOST1}/ports/33333333-3333-4333-8333-333333333333`), 404);
    });
  });

  describe("MAC and ARP tables", () => {
    it("MAC entries: created, read and deleted at aa-bb-cc-dd-ee-ff_<port>", async () => {
      const b = await bridge();
      const p = await bridgePort(b);
      const res = await post(`/bridges/${b}/mac_table`, mt("MacPort", 2), {
        macAddr: "AC:CA:BA:00:00:01",
        portId: p,
      });
      expect(res.status).to.equal(201);
      const path = `/bridges/${b}/mac_table/ac-ca-ba-00-00-01_${p}`;
      expect(res.headers.get("location")).to.equal(sim.baseUrl + path);
      expect(await getJson<Record<string, unknown>>(path)).to.include({
        macAddr: "ac:ca:ba:00:00:01",
        portId: p,
      });
      expect(await getJson<unknown[]>(`/bridges/${b}/mac_table`)).to.have.length(1);
      expect((await del(path)).status).to.equal(204);
      expectError(await get(path), 404);
    });

    it("MAC entry: 400 if the port is not on that bridge, 404 if it is missing, 500 on a duplicate", async () => {
      const b1 = await bridge();
      const b2 = await bridge();
      const p2 = await bridgePort(b2);
      const type = mt("MacPort", 2);
      expectError(
        await post(`/bridges/${b1}/mac_table`, type, { macAddr: "ac:ca:ba:00:00:01", portId: p2 }),
        400,
      );
      expectError(
        await post(`/bridges/${b1}/mac_table`, type, {
          macAddr: "ac:ca:ba:00:00:01",
          portId: MISSING,
        }),
        404,
      );
      expectError(
        await post(`/bridges/${b2}/mac_table`, type, { macAddr: "ac:ca:ba:00:01", portId: p2 }),
        400,
      );
      expect(
        (await post(`/bridges/${b2}/mac_table`, type, { macAddr: "ac:ca:ba:00:00:01", portId: p2 }))
          .status,
      ).to.equal(201);
      expectError(
        await post(`/bridges/${b2}/mac_table`, type, { macAddr: "ac:ca:ba:00:00:01", portId: p2 }),
        500,
      );
    });

    it("ARP entries: created, read and deleted at <ip>_aa-bb-…; 500 on a duplicate", async () => {
      const b = await bridge();
      const type = mt("IP4Mac", 1);
      const body = { ip: "10.1.0.2", mac: "ee:ee:ee:ee:ee:01" };
      const res = await post(`/bridges/${b}/arp_table`, type, body);
      expect(res.status).to.equal(201);
      const path = `/bridges/${b}/arp_table/10.1.0.2_ee-ee-ee-ee-ee-01`;
      expect(res.headers.get("location")).to.equal(sim.baseUrl + path);
      expect(await getJson<Record<string, unknown>>(path)).to.include(body);
      expectError(await post(`/bridges/${b}/arp_table`, type, body), 500);
      expectError(
        await post(`/bridges/${b}/arp_table`, type, { ip: "10.1.0", mac: body.mac }),
        400,
      );
      expect((await del(path)).status).to.equal(204);
      // MidoNet's DELETE removes the persistent entry if there is one: 204 either way.
      expect((await del(path)).status).to.equal(204);
      expectError(await get(path), 404);
    });

    it("learned MAC entries: listed one per MAC, over a persistent entry of that MAC; GET and DELETE of one entry as MidoNet answers them", async () => {
      const b = await bridge();
      const ours = await bridgePort(b);
      const other = await bridgePort(b);
      const type = mt("MacPort", 2);
      const mac = "ac:ca:ba:00:00:01";
      const path = (port: string) => `/bridges/${b}/mac_table/ac-ca-ba-00-00-01_${port}`;
      const listed = async () =>
        (await getJson<{ macAddr: string; portId: string }[]>(`/bridges/${b}/mac_table`)).map(
          (e) => `${e.macAddr} ${e.portId}`,
        );
      expect(
        (await post(`/bridges/${b}/mac_table`, type, { macAddr: mac, portId: ours })).status,
      ).to.equal(201);
      sim.learnMac(b, "AC:CA:BA:00:00:02", ours);
      expect((await listed()).sort()).to.deep.equal(
        [`${mac} ${ours}`, `ac:ca:ba:00:00:02 ${ours}`].sort(),
      );

      // The datapath learns the MAC on another port: that hides the persistent entry.
      sim.learnMac(b, mac, other);
      expect(await listed())
        .to.include(`${mac} ${other}`)
        .and.not.include(`${mac} ${ours}`);
      // GET of one entry: the persistent one (hidden) and the learned one both answer.
      expect((await get(path(ours))).status).to.equal(200);
      expect(await getJson<Record<string, unknown>>(path(other))).to.include({
        macAddr: mac,
        portId: other,
      });
      // POST of the persistent entry again: MidoNet's 500; of the learned one: made persistent.
      expectError(await post(`/bridges/${b}/mac_table`, type, { macAddr: mac, portId: ours }), 500);
      expect(
        (await post(`/bridges/${b}/mac_table`, type, { macAddr: mac, portId: other })).status,
      ).to.equal(201);
      expect((await del(path(other))).status).to.equal(204);

      // DELETE removes only the persistent entry: the learned one stays, listed and readable.
      expect((await del(path(ours))).status).to.equal(204);
      expectError(await get(path(ours)), 404);
      expect((await del(`/bridges/${b}/mac_table/ac-ca-ba-00-00-02_${ours}`)).status).to.equal(204);
      expect((await listed()).sort()).to.deep.equal(
        [`${mac} ${other}`, `ac:ca:ba:00:00:02 ${ours}`].sort(),
      );
      expect((await get(path(other))).status).to.equal(200);
      expect(sim.snapshot().macTable).to.deep.equal([]);

      // Learned entries age out, and go with their port.
      sim.forgetMac(b, mac);
      expectError(await get(path(other)), 404);
      expect((await del(`/ports/${ours}`)).status).to.equal(204);
      expect(await listed()).to.deep.equal([]);
    });

    it("learned ARP entries: listed one per IP, over persistent ones; GET and DELETE of one entry as MidoNet answers them", async () => {
      const b = await bridge();
      const type = mt("IP4Mac", 1);
      const listed = async () =>
        (await getJson<{ ip: string; mac: string }[]>(`/bridges/${b}/arp_table`)).map(
          (e) => `${e.ip} ${e.mac}`,
        );
      const path = (mac: string) => `/bridges/${b}/arp_table/10.1.0.2_${mac.replaceAll(":", "-")}`;
      const mine = "ee:ee:ee:ee:ee:01";
      const learned = "ee:ee:ee:ee:ee:02";
      expect(
        (await post(`/bridges/${b}/arp_table`, type, { ip: "10.1.0.2", mac: mine })).status,
      ).to.equal(201);
      // Of two persistent entries for one IP, the first is listed.
      expect(
        (await post(`/bridges/${b}/arp_table`, type, { ip: "10.1.0.2", mac: learned })).status,
      ).to.equal(201);
      expect(await listed()).to.deep.equal([`10.1.0.2 ${mine}`]);
      expect((await del(path(learned))).status).to.equal(204);

      sim.learnArp(b, "10.1.0.2", learned);
      expect(await listed()).to.deep.equal([`10.1.0.2 ${learned}`]);
      expect((await get(path(mine))).status).to.equal(200);
      expect((await get(path(learned))).status).to.equal(200);
      expectError(await get(path("ee:ee:ee:ee:ee:03")), 404);
      expectError(await post(`/bridges/${b}/arp_table`, type, { ip: "10.1.0.2", mac: mine }), 500);

      expect((await del(path(learned))).status).to.equal(204);
      expect(await listed()).to.deep.equal([`10.1.0.2 ${learned}`]);
      sim.forgetArp(b, "10.1.0.2");
      expect(await listed()).to.deep.equal([`10.1.0.2 ${mine}`]);
      expect(() => sim.learnArp("99999999-9999-4999-8999-999999999999", "10.1.0.9", mine)).to.throw(
        /no bridge/,
      );
    });
  });

  describe("cascades", () => {
    it("deleting a bridge deletes its ports, their bindings and links, and its MAC/ARP tables", async () => {
      await join(await tunnelZone(), HOST1);
      const b = await bridge();
      const r = await router();
      const bp = await bridgePort(b);
      const rp = await routerPort(r);
      await link(bp, rp);
      await bind(HOST1, await bridgePort(b), "if1");
      await post(`/bridges/${b}/mac_table`, mt("MacPort", 2), {
        macAddr: "ac:ca:ba:00:00:01",
        portId: bp,
      });
      await post(`/bridges/${b}/arp_table`, mt("IP4Mac", 1), {
        ip: "10.1.0.2",
        mac: "ac:ca:ba:00:00:01",
      });
      expect((await del(`/bridges/${b}`)).status).to.equal(204);
      const snap = sim.snapshot();
      expect(snap.ports.map((p) => p.id)).to.deep.equal([rp]);
      expect(snap.ports[0]?.peerId).to.equal(null);
      expect(snap.hostInterfacePorts).to.be.empty;
      expect(snap.macTable).to.be.empty;
      expect(snap.arpTable).to.be.empty;
    });

    it("deleting a router deletes its ports and all its routes", async () => {
      const r = await router();
      const keep = await router();
      const p = await routerPort(r);
      await routerPort(keep, "10.9.0.1/24");
      await create(`/routers/${r}/routes`, mt("Route", 1), {
        type: "BlackHole",
        srcNetworkAddr: "0.0.0.0",
        dstNetworkAddr: "10.3.0.0",
        dstNetworkLength: 16,
      });
      await del(`/routers/${r}`);
      const snap = sim.snapshot();
      expect(snap.ports.map((x) => x.id)).to.not.include(p);
      expect(snap.ports).to.have.length(1);
      expect(snap.routes.map((x) => x.routerId)).to.deep.equal([keep]);
    });

    it("deleting a port deletes routes through it, clears its peer's link and its binding", async () => {
      await join(await tunnelZone(), HOST1);
      const r = await router();
      const b = await bridge();
      const rp = await routerPort(r);
      const bp = await bridgePort(b);
      await link(rp, bp);
      await bind(HOST1, rp, "if1");
      await create(`/routers/${r}/routes`, mt("Route", 1), {
        type: "Normal",
        srcNetworkAddr: "0.0.0.0",
        dstNetworkAddr: "10.3.0.0",
        dstNetworkLength: 16,
        nextHopPort: rp,
      });
      expect(sim.snapshot().routes).to.have.length(2); // Local + Normal
      await del(`/ports/${rp}`);
      const snap = sim.snapshot();
      expect(snap.routes).to.be.empty;
      expect(snap.ports.find((p) => p.id === bp)?.peerId).to.equal(null);
      expect(snap.hostInterfacePorts).to.be.empty;
      expect(await getJson<unknown[]>(`/hosts/${HOST1}/ports`)).to.be.empty;
    });

    it("deleting a chain deletes its rules, jumps to it elsewhere, and filter references to it", async () => {
      const main = await chain("main");
      const target = await chain("target");
      const before = await rule(main, { type: "accept" });
      const jump = await rule(main, { type: "jump", jumpChainId: target, position: 1 });
      await rule(target, { type: "drop" });
      const b = await bridge({ inboundFilterId: target, outboundFilterId: main });
      const r = await router({ outboundFilterId: target });
      const p = await bridgePort(b, { inboundFilterId: target });
      expect(await ruleIds(main)).to.deep.equal([jump, before]);
      expect((await del(`/chains/${target}`)).status).to.equal(204);
      expect(await ruleIds(main)).to.deep.equal([before]);
      expect((await getJson<{ position: number }>(`/rules/${before}`)).position).to.equal(1);
      expectError(await get(`/rules/${jump}`), 404);
      expect(sim.snapshot().rules).to.have.length(1);
      expect(await getJson<Record<string, unknown>>(`/bridges/${b}`)).to.include({
        inboundFilterId: null,
        outboundFilterId: main,
      });
      expect((await getJson<Record<string, unknown>>(`/routers/${r}`)).outboundFilterId).to.equal(
        null,
      );
      expect((await getJson<Record<string, unknown>>(`/ports/${p}`)).inboundFilterId).to.equal(
        null,
      );
    });

    it("after its last membership is deleted, binding on the host is a 409 again", async () => {
      const tz = await tunnelZone();
      await join(tz, HOST1);
      const b = await bridge();
      expect((await bind(HOST1, await bridgePort(b), "if1")).status).to.equal(201);
      await del(`/tunnel_zones/${tz}/hosts/${HOST1}`);
      expectError(await bind(HOST1, await bridgePort(b), "if2"), 409);
    });
  });

  describe("as MidoNet's own source answers", () => {
    it("a GET without an Accept header is a 406 (MidonetResource.scala get and list)", async () => {
      // fetch always sends an Accept header: a bare node:http request sends none.
      const status = await new Promise<number>((resolve, reject) => {
        http
          .get(`${sim.baseUrl}/bridges`, { headers: { "X-Auth-Token": token } }, (res) => {
            res.resume();
            resolve(res.statusCode ?? 0);
          })
          .on("error", reject);
      });
      expect(status).to.equal(406);
      expect((await get("/bridges", cmt("Bridge", 4))).status).to.equal(200);
    });

    it("a router or bridge name longer than 255 characters is a validation error (Router.java, Bridge.java @Size)", async () => {
      const long = "n".repeat(256);
      for (const [path, type] of [
        ["/routers", mt("Router", 3)],
        ["/bridges", mt("Bridge", 4)],
      ] as const) {
        const res = await post(path, type, { name: long });
        expectError(res, 400, /Validation error/);
        expect((res.body as { violations: unknown }).violations).to.deep.equal([
          { property: "name", message: "size must be between 0 and 255" },
        ]);
      }
      expect((await post("/routers", mt("Router", 3), { name: "n".repeat(255) })).status).to.equal(
        201,
      );
    });

    it("tpSrc/tpDst outside 1-65535 or reversed is a validation error (Condition.java @ValidRange, RangeValidator.java)", async () => {
      const c = await chain();
      const path = `/chains/${c}/rules`;
      const message = "Port range not valid. Must be between 1 and 65535.";
      for (const [key, range] of [
        ["tpDst", { start: 0, end: 80 }],
        ["tpDst", { start: 0, end: 0 }],
        ["tpDst", { start: 1, end: 65536 }],
        ["tpDst", { start: 90, end: 80 }],
        ["tpSrc", { start: 0, end: 65535 }],
        ["tpSrc", { start: 70000, end: 70000 }],
      ] as const) {
        const res = await post(path, mt("Rule", 2), { type: "accept", [key]: range });
        expectError(res, 400, /Validation error/);
        expect((res.body as { violations: unknown }).violations).to.deep.equal([
          { property: key, message },
        ]);
      }
      const id = await rule(c, {
        type: "accept",
        tpSrc: { start: 1, end: 65535 },
        tpDst: { start: 65535, end: 65535 },
      });
      expect(await getJson(`/rules/${id}`)).to.deep.include({
        tpSrc: { start: 1, end: 65535 },
        tpDst: { start: 65535, end: 65535 },
      });
    });

    it("a rule with a taken id is a 409 even at a position out of range (RuleResource.scala creates first)", async () => {
      const c = await chain();
      const id = await rule(c, { type: "accept" });
      expectError(
        await post(`/chains/${c}/rules`, mt("Rule", 2), { id, type: "drop", position: 9 }),
        409,
      );
    });

    it("GET /hosts/{id} answers the host, 404 for an unknown one (HostResource.scala)", async () => {
      const res = await get(`/hosts/${HOST1}`, mt("Host", 3));
      expect(res.status).to.equal(200);
      expect(res.body).to.deep.include({ id: HOST1, name: "node1" });
      expectError(await get(`/hosts/${MISSING}`, mt("Host", 3)), 404);
    });
  });

  describe("as MidoNet's login, token and router port code answers", () => {
    const login = (authorization?: string) =>
      call("POST", "/login", {
        token: null,
        accept: mt("Token", 1),
        headers: {
          ...(authorization === undefined ? {} : { Authorization: authorization }),
          "X-Auth-Project": "admin",
        },
      });
    const basic = (credentials: string) => `Basic ${Buffer.from(credentials).toString("base64")}`;

    function expectLoginRefused(res: Answer, message: string): void {
      expectError(res, 401);
      expect((res.body as { message: string }).message).to.equal(message);
      expect(res.headers.get("www-authenticate")).to.equal('Basic  realm="BASIC_AUTH_REALM"');
    }

    it("decoded credentials that Java's split(\":\") does not cut in two are 401 'Authorization header is not valid' (LoginFilter.java)", async () => {
      for (const credentials of ["admin", "admin:", "admin::", "admin:ad:min", ":"]) {
        expectLoginRefused(await login(basic(credentials)), "Authorization header is not valid");
      }
      // split drops trailing empty strings: "admin:admin:" is the pair (admin, admin).
      expect((await login(basic("admin:admin:"))).status).to.equal(200);
    });

    it("a login without Authorization, or not Basic, is refused in LoginFilter.java's words", async () => {
      expectLoginRefused(await login(), "Authorization header is not set.");
      expectLoginRefused(await login("Bearer abc"), "Authorization header does not contain Basic.");
      expectLoginRefused(
        await login(basic("admin:nope")),
        "Authentication error: invalid credentials",
      );
    });

    it("the token's expires is Token.java's \"EEE, dd-MM-yyyy HH:mm:ss z\" in UTC, also sent as the sessionId cookie", async () => {
      expect(formatTokenExpiry(Date.UTC(2025, 1, 3, 14, 5, 9, 999))).to.equal(
        "Mon, 03-02-2025 14:05:09 UTC",
      );
      expect(formatTokenExpiry(Date.UTC(2025, 11, 25, 0, 0, 0))).to.equal(
        "Thu, 25-12-2025 00:00:00 UTC",
      );
      const before = Date.now();
      const res = await login(basic("admin:admin"));
      const after = Date.now();
      expect(res.status).to.equal(200);
      const t = res.body as { key: string; expires: string };
      const m =
        /^(Sun|Mon|Tue|Wed|Thu|Fri|Sat), (\d{2})-(\d{2})-(\d{4}) (\d{2}):(\d{2}):(\d{2}) UTC$/.exec(
          t.expires,
        );
      expect(m, t.expires).to.not.equal(null);
      const [, , dd, mm, yyyy, hh, mi, ss] = (m as RegExpExecArray).map(Number);
      const expiry = Date.UTC(yyyy as number, (mm as number) - 1, dd, hh, mi, ss);
      const ttl = 3_600_000; // the simulator's default token lifetime
      expect(expiry).to.be.within(Math.floor((before + ttl) / 1000) * 1000, after + ttl);
      expect(res.headers.get("set-cookie")).to.equal(`sessionId=${t.key}; Expires=${t.expires}`);
    });

    it("a new router port gets one Local route, to its portAddress only, with RouterPortResource's fields (PortResource.scala)", async () => {
      const r = await router();
      const p = await routerPort(r, "10.1.0.1/24", { portSubnet: ["10.3.0.1/24"] });
      expect((await getJson<{ portAddress: string }>(`/ports/${p}`)).portAddress).to.equal(
        "10.1.0.1",
      );
      const routes = await getJson<Record<string, unknown>[]>(`/routers/${r}/routes`);
      expect(routes).to.have.length(1);
      expect(routes[0]).to.deep.include({
        type: "Local",
        srcNetworkAddr: "0.0.0.0",
        srcNetworkLength: 0,
        dstNetworkAddr: "10.1.0.1",
        dstNetworkLength: 32,
        nextHopPort: p,
        nextHopGateway: null,
        weight: 0,
        learned: false,
        routerId: r,
      });
    });
  });

  describe("test hooks", () => {
    it("injects a status for the next N calls matching method and path, then answers normally", async () => {
      const fault = sim.injectFault({ method: "POST", path: "/bridges", status: 503, times: 2 });
      expectError(await post("/bridges", mt("Bridge", 4), { name: "b" }), 503);
      expect((await get("/bridges")).status).to.equal(200); // GET does not match
      expectError(await post("/bridges", mt("Bridge", 4), { name: "b" }), 503);
      expect((await post("/bridges", mt("Bridge", 4), { name: "b" })).status).to.equal(201);
      expect(fault.hits).to.equal(2);
      expect(sim.calls.map((c) => [c.method, c.path, c.status])).to.deep.equal([
        ["POST", "/bridges", 503],
        ["GET", "/bridges", 200],
        ["POST", "/bridges", 503],
        ["POST", "/bridges", 201],
      ]);
      expect(sim.snapshot().bridges).to.have.length(1);
    });

    it("a fault with forMs holds within its window and ends after it; a glob path matches nested paths; remove() ends one", async () => {
      const b = await bridge();
      // A window no test outlasts, then one already over: what a loaded machine does in between does not matter.
      const hour = sim.injectFault({ path: "/bridges/*", forMs: 3_600_000 });
      expectError(await get(`/bridges/${b}`), 500);
      expectError(await get(`/bridges/${b}/ports`), 500);
      expect((await get("/bridges")).status).to.equal(200);
      hour.remove();
      sim.injectFault({ path: "/bridges/*", forMs: 10 });
      await new Promise((r) => setTimeout(r, 20));
      expect((await get(`/bridges/${b}`)).status).to.equal(200);
      const forever = sim.injectFault({ path: /^\/routers/ });
      expectError(await get("/routers"), 500);
      forever.remove();
      expect((await get("/routers")).status).to.equal(200);
    });

    it("a hang fault never answers; the call is logged with status 0", async () => {
      sim.injectFault({ path: "/chains", hang: true, times: 1 });
      const err = await call("GET", "/chains", { signal: AbortSignal.timeout(150) }).catch(
        (e: unknown) => e,
      );
      expect((err as Error).name).to.equal("TimeoutError");
      expect(sim.calls.at(-1)).to.include({
        method: "GET",
        path: "/chains",
        status: 0,
        fault: "hang",
      });
      expect((await get("/chains")).status).to.equal(200);
    });

    it("a delay fault answers normally, late", async () => {
      sim.injectFault({ path: "/chains", delayMs: 100, times: 1 });
      const started = Date.now();
      expect((await get("/chains")).status).to.equal(200);
      expect(Date.now() - started).to.be.at.least(90);
      expect(sim.calls.at(-1)).to.include({ status: 200, fault: "delay" });
    });

    it("logs every call with its media types; writes() counts changes; snapshot() holds every kind", async () => {
      const tz = await tunnelZone();
      await join(tz, HOST1);
      const c = await chain();
      await rule(c, { type: "accept" });
      const b = await bridge();
      await get(`/bridges/${b}`, mt("Bridge", 4));
      const posts = sim.calls.filter((x) => x.method === "POST");
      expect(posts.map((x) => x.contentType)).to.deep.equal([
        mt("TunnelZone", 1),
        mt("TunnelZoneHost", 1),
        mt("Chain", 1),
        mt("Rule", 2),
        mt("Bridge", 4),
      ]);
      expect(sim.calls.at(-1)).to.include({ accept: mt("Bridge", 4), authenticated: true });
      expect(sim.writes()).to.have.length(5);
      const snap = sim.snapshot();
      expect(snap.tunnelZones).to.have.length(1);
      expect(snap.tunnelZoneHosts).to.deep.equal([
        { tunnelZoneId: tz, hostId: HOST1, ipAddress: "192.168.0.1" },
      ]);
      expect(snap.chains[0]).to.not.have.property("uri");
      expect(snap.rules[0]).to.include({ chainId: c, position: 1, type: "accept" });
      expect(snap.hosts).to.have.length(2);
      sim.clearCalls();
      expect(sim.calls).to.be.empty;
    });
  });
});
