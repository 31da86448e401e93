import { spawn } from "node:child_process";
import { mkdtemp, rm, stat, unlink } from "node:fs/promises";
import http from "node:http";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect } from "chai";
import {
  dialUnixSocket,
  type HealthChecks,
  type HealthServer,
  parseHealthAddr,
  startHealthServer,
} from "../../src/common/health.js";
import { Metrics } from "../../src/driver/metrics.js";
import { parseExposition, value } from "../support/exposition.js";

interface Reply {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** One request on a fresh connection, so a test sees exactly what the server sends. */
function request(address: string, path: string, method = "GET"): Promise<Reply> {
  const [host, port] = [address.slice(0, address.lastIndexOf(":")), address.split(":").at(-1)];
  return new Promise((resolve, reject) => {
    const req = http.request({ host, port: Number(port), path, method, agent: false }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => {
        body += chunk;
      });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on("error", reject);
    req.end();
  });
}

function listenUnix(path: string): Promise<net.Server> {
  return new Promise((resolve, reject) => {
    const server = net.createServer((sock) => sock.destroy());
    server.once("error", reject);
    server.listen(path, () => resolve(server));
  });
}

function closeServer(server: net.Server): Promise<void> {
  return new Promise((resolve) => server.close(() => resolve()));
}

describe("driver/health (integration)", () => {
  let dir: string;
  let socketPath: string;
  let grpcLike: net.Server | undefined;
  let health: HealthServer | undefined;
  let ready: { ok: boolean; reasons: string[] };
  let metrics: Metrics;

  const checks = (): HealthChecks => ({
    live: () => dialUnixSocket(socketPath, 1000),
    ready: () => ready,
    metrics: () => metrics.render(),
  });

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "cni-driver-health-"));
    socketPath = join(dir, "driver.sock");
    ready = { ok: true, reasons: [] };
    metrics = new Metrics();
    grpcLike = undefined;
    health = undefined;
  });

  afterEach(async () => {
    await health?.close();
    if (grpcLike) await closeServer(grpcLike);
    await rm(dir, { recursive: true, force: true });
  });

  it("binds 127.0.0.1:0 and reports the port it got", async () => {
    health = await startHealthServer("127.0.0.1:0", checks());
    expect(health.address).to.match(/^127\.0\.0\.1:\d+$/);
    expect(health.address).to.not.equal("127.0.0.1:0");
  });

  it("/livez is 200 ok while the unix socket accepts connections", async () => {
    grpcLike = await listenUnix(socketPath);
    health = await startHealthServer("127.0.0.1:0", checks());
    const r = await request(health.address, "/livez");
    expect(r.status).to.equal(200);
    expect(r.body).to.equal("ok\n");
  });

  it("/livez is 503 once the socket file is unlinked under a running server", async () => {
    grpcLike = await listenUnix(socketPath);
    health = await startHealthServer("127.0.0.1:0", checks());
    expect((await request(health.address, "/livez")).status).to.equal(200);
    await unlink(socketPath);
    expect(grpcLike.listening, "the socket server still runs").to.equal(true);
    const r = await request(health.address, "/livez");
    expect(r.status).to.equal(503);
    expect(r.body).to.include(socketPath).and.include("ENOENT");
  });

  it("/livez is 503 when the check throws", async () => {
    health = await startHealthServer("127.0.0.1:0", {
      ...checks(),
      live: () => Promise.reject(new Error("boom")),
    });
    const r = await request(health.address, "/livez");
    expect(r.status).to.equal(503);
    expect(r.body).to.equal("boom\n");
  });

  it("/readyz is 200 when ready, 503 listing each reason on its own line", async () => {
    health = await startHealthServer("127.0.0.1:0", checks());
    const ok = await request(health.address, "/readyz");
    expect(ok.status).to.equal(200);
    expect(ok.body).to.equal("ok\n");

    ready = { ok: false, reasons: ["config not loaded", "plumbing not ready"] };
    const no = await request(health.address, "/readyz");
    expect(no.status).to.equal(503);
    expect(no.headers["content-type"]).to.equal("text/plain; charset=utf-8");
    expect(no.body.split("\n")).to.deep.equal(["config not loaded", "plumbing not ready", ""]);
  });

  it("/metrics serves the registry as text format 0.0.4", async () => {
    metrics.recordCall("ADD", "ok", 0.02);
    metrics.setAttachments(3);
    health = await startHealthServer("127.0.0.1:0", checks());
    const r = await request(health.address, "/metrics");
    expect(r.status).to.equal(200);
    expect(r.headers["content-type"]).to.equal("text/plain; version=0.0.4; charset=utf-8");
    expect(Number(r.headers["content-length"])).to.equal(Buffer.byteLength(r.body));
    expect(r.body).to.include('cni_driver_calls_total{verb="ADD",outcome="ok"} 1\n');
    const s = parseExposition(r.body);
    expect(value(s, "cni_driver_attachments")).to.equal(3);
    expect(value(s, "process_resident_memory_bytes")).to.be.greaterThan(0);
  });

  it("/metrics is 503 with the reason when the registry cannot be read", async () => {
    health = await startHealthServer("127.0.0.1:0", {
      ...checks(),
      metrics: () => Promise.reject(new Error("collect failed")),
    });
    const r = await request(health.address, "/metrics");
    expect(r.status).to.equal(503);
    expect(r.body).to.equal("collect failed\n");
  });

  it("ignores the query string", async () => {
    health = await startHealthServer("127.0.0.1:0", checks());
    expect((await request(health.address, "/readyz?verbose=1")).status).to.equal(200);
  });

  for (const path of ["/", "/healthz", "/metrics/x", "/livez/"]) {
    it(`answers 404 for ${path}`, async () => {
      health = await startHealthServer("127.0.0.1:0", checks());
      expect((await request(health.address, path)).status).to.equal(404);
    });
  }

  for (const method of ["POST", "PUT", "DELETE"]) {
    it(`answers 405 to ${method}, naming GET and HEAD`, async () => {
      health = await startHealthServer("127.0.0.1:0", checks());
      const r = await request(health.address, "/readyz", method);
      expect(r.status).to.equal(405);
      expect(r.headers.allow).to.equal("GET, HEAD");
    });
  }

  it("answers HEAD with the headers and no body", async () => {
    // A fixed text: the process's own series change from one scrape to the next.
    const text = "# HELP x_total h\n# TYPE x_total counter\nx_total 1\n";
    health = await startHealthServer("127.0.0.1:0", { ...checks(), metrics: async () => text });
    const r = await request(health.address, "/metrics", "HEAD");
    expect(r.status).to.equal(200);
    expect(r.headers["content-type"]).to.equal("text/plain; version=0.0.4; charset=utf-8");
    expect(Number(r.headers["content-length"])).to.equal(Buffer.byteLength(text));
    expect(r.body).to.equal("");
  });

  it("close() frees the port, even with a keep-alive connection open", async () => {
    health = await startHealthServer("127.0.0.1:0", checks());
    const address = health.address;
    const port = Number(address.split(":")[1]);
    const agent = new http.Agent({ keepAlive: true });
    await new Promise<void>((resolve, reject) => {
      http
        .get({ host: "127.0.0.1", port, path: "/livez", agent }, (res) => {
          res.resume();
          res.on("end", resolve);
        })
        .on("error", reject);
    });
    await health.close();
    health = undefined;
    agent.destroy();
    await request(address, "/readyz").then(
      () => expect.fail("server still answers"),
      (err: NodeJS.ErrnoException) => expect(err.code).to.equal("ECONNREFUSED"),
    );
    const again = net.createServer();
    await new Promise<void>((resolve, reject) => {
      again.once("error", reject);
      again.listen(port, "127.0.0.1", resolve);
    });
    await closeServer(again);
  });

  it("close() does not wait for a request stuck in a hung check", async () => {
    health = await startHealthServer("127.0.0.1:0", {
      ...checks(),
      live: () => new Promise(() => {}),
    });
    const pending = request(health.address, "/livez").catch((err: NodeJS.ErrnoException) => err);
    await new Promise((r) => setTimeout(r, 50));
    // The check never answers: a close() that waited for it would never return.
    await health.close();
    health = undefined;
    expect(((await pending) as NodeJS.ErrnoException).code).to.equal("ECONNRESET");
  });

  it("rejects when the address is already in use", async () => {
    health = await startHealthServer("127.0.0.1:0", checks());
    let err: unknown;
    try {
      await startHealthServer(health.address, checks());
    } catch (e) {
      err = e;
    }
    expect((err as NodeJS.ErrnoException | undefined)?.code).to.equal("EADDRINUSE");
  });

  it('is disabled by "": no address, close() is a no-op', async () => {
    const off = await startHealthServer("", checks());
    expect(off.address).to.equal("");
    await off.close();
  });

  describe("parseHealthAddr", () => {
    for (const [input, want] of [
      ["127.0.0.1:9090", { host: "127.0.0.1", port: 9090 }],
      [":9090", { host: undefined, port: 9090 }],
      ["localhost:0", { host: "localhost", port: 0 }],
      ["[::1]:8080", { host: "::1", port: 8080 }],
      ["", undefined],
    ] as const) {
      it(`reads ${JSON.stringify(input)}`, () => {
        expect(parseHealthAddr(input)).to.deep.equal(want);
      });
    }
    for (const input of ["9090", "127.0.0.1", "host:99999", "host:port", "::1:80", "a:1:2"]) {
      it(`rejects ${JSON.stringify(input)}`, () => {
        expect(() => parseHealthAddr(input)).to.throw(/invalid health address/);
      });
    }
  });

  describe("dialUnixSocket", () => {
    it("is ok against a listening socket and leaves no connection behind", async () => {
      grpcLike = await listenUnix(socketPath);
      expect(await dialUnixSocket(socketPath, 1000)).to.deep.equal({ ok: true });
      await new Promise((r) => setTimeout(r, 20));
      const count = await new Promise<number>((resolve, reject) =>
        grpcLike!.getConnections((err, n) => (err ? reject(err) : resolve(n))),
      );
      expect(count).to.equal(0);
    });

    it("fails with the path and the errno when nothing is there", async () => {
      const r = await dialUnixSocket(join(dir, "missing.sock"), 1000);
      expect(r.ok).to.equal(false);
      expect(r.reason).to.equal(`dial ${join(dir, "missing.sock")}: ENOENT`);
      expect(r.errno).to.equal("ENOENT");
    });

    it("fails on the stale socket file a killed daemon leaves", async () => {
      // A SIGKILLed listener never unlinks its socket: the file stays, nobody accepts.
      const script = `require("node:net").createServer().listen(${JSON.stringify(socketPath)}, () => process.kill(process.pid, "SIGKILL"))`;
      await new Promise<void>((resolve) => {
        spawn(process.execPath, ["-e", script], { stdio: "ignore" }).on("exit", () => resolve());
      });
      expect((await stat(socketPath)).isSocket(), "stale socket file present").to.equal(true);
      const r = await dialUnixSocket(socketPath, 1000);
      expect(r).to.deep.equal({
        ok: false,
        reason: `dial ${socketPath}: ECONNREFUSED`,
        errno: "ECONNREFUSED",
      });
    });
  });
});
