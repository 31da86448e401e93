/**
 * The built shim's transport, exec'd as a runtime execs it, against servers that
 * do what a driver (or something else on its socket) may do: a grpc-js server
 * loaded from proto/cni_driver.proto exactly as the driver loads it, Node's own
 * HTTP/2 server, and raw sockets that break the protocol. Each answer must be the
 * CNI answer the proto's header prescribes: the driver's CNI error unchanged;
 * UNAVAILABLE and DEADLINE_EXCEEDED → 11, UNIMPLEMENTED → 1, any other status →
 * 999 with the status as details; an answer with fields of a later contract read as
 * if they were not there; and DEL queued only when the driver cannot take it.
 */
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import http2 from "node:http2";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { expect } from "chai";
import { DELETION_QUEUE_DIR } from "../../src/wire/deletion-record.js";
import { PROTO_LOADER_OPTIONS, protoPath } from "../../src/wire/proto-path.js";
import { NOT_READY_DETAILS, type PodRequest } from "../../src/wire/types.js";
import {
  encodeWithUnknownFields,
  lengthDelimited,
  unknownFields,
  wireType,
} from "../support/proto-unknown-fields.js";
import { ensureShimBuilt } from "../support/runtimes.js";
import { execShim, type ShimRun } from "../support/shim-exec.js";

type Handlers = Partial<Record<string, grpc.handleUnaryCall<unknown, unknown>>>;

async function startGrpcServer(socket: string, handlers: Handlers): Promise<grpc.Server> {
  const def = protoLoader.loadSync(protoPath(), PROTO_LOADER_OPTIONS);
  const pkg = grpc.loadPackageDefinition(def) as unknown as {
    cnidriver: { v1: { CNIDriver: grpc.ServiceClientConstructor } };
  };
  const server = new grpc.Server();
  server.addService(
    pkg.cnidriver.v1.CNIDriver.service,
    handlers as grpc.UntypedServiceImplementation,
  );
  await new Promise<void>((resolve, reject) =>
    server.bindAsync(`unix:${socket}`, grpc.ServerCredentials.createInsecure(), (err) =>
      err ? reject(err) : resolve(),
    ),
  );
  return server;
}

function expectCniError(r: ShimRun, code: number, msg?: RegExp): void {
  expect(r.status, `exit status; stdout ${r.stdout} stderr ${r.stderr}`).to.equal(1);
  expect(r.json?.code, r.stdout).to.equal(code);
  if (msg) expect(String(r.json?.msg), r.stdout).to.match(msg);
  expect(r.stderr).to.equal("");
}

describe("cni-driver-shim: its transport against real and broken servers (integration)", function () {
  this.timeout(30_000);
  let shim: string;
  let dir: string;
  let socket: string;
  const closers: Array<() => void> = [];

  before(function () {
    this.timeout(300_000);
    shim = ensureShimBuilt();
  });

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "cni-driver-shim-transport-"));
    socket = join(dir, "driver.sock");
  });

  afterEach(() => {
    for (const close of closers.splice(0)) close();
    rmSync(dir, { recursive: true, force: true });
  });

  const conf = (cniVersion: string, extra: Record<string, unknown> = {}): string =>
    JSON.stringify({
      cniVersion,
      name: "pods",
      type: "cni-driver-shim",
      socket,
      stateDir: join(dir, "state"),
      timeoutSeconds: 5,
      ...extra,
    });

  function env(command: string): Record<string, string> {
    const base: Record<string, string> = { CNI_COMMAND: command, CNI_PATH: "/opt/cni/bin" };
    if (command === "GC" || command === "STATUS") return base;
    return {
      ...base,
      CNI_CONTAINERID: "c0ffee",
      CNI_NETNS: "/run/netns/cni-driver-test-absent",
      CNI_IFNAME: "eth0",
      CNI_ARGS: "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0",
    };
  }

  const run = (command: string, stdin: string) => execShim(shim, env(command), stdin);

  async function grpcServer(handlers: Handlers): Promise<void> {
    const server = await startGrpcServer(socket, handlers);
    closers.push(() => server.forceShutdown());
  }

  async function h2Server(
    onStream: (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders) => void,
  ): Promise<void> {
    const server = http2.createServer();
    const sessions = new Set<http2.ServerHttp2Session>();
    server.on("session", (s) => {
      sessions.add(s);
      s.on("error", () => {});
    });
    server.on("stream", (stream, headers) => {
      stream.on("error", () => {});
      onStream(stream, headers);
    });
    await new Promise<void>((r) => server.listen(socket, () => r()));
    closers.push(() => {
      for (const s of sessions) s.destroy();
      server.close();
    });
  }

  async function rawServer(onConnection: (conn: net.Socket) => void): Promise<void> {
    const conns = new Set<net.Socket>();
    const server = net.createServer((conn) => {
      conns.add(conn);
      conn.on("error", () => {});
      onConnection(conn);
    });
    await new Promise<void>((r) => server.listen(socket, () => r()));
    closers.push(() => {
      for (const c of conns) c.destroy();
      server.close();
    });
  }

  const queued = (): string[] => {
    try {
      return readdirSync(join(dir, "state", DELETION_QUEUE_DIR));
    } catch {
      return [];
    }
  };

  it("ADD: the request the driver decodes is the runtime's, and the result is printed as answered", async () => {
    const received: PodRequest[] = [];
    const result = '{"cniVersion":"1.0.0","ips":[{"address":"10.1.0.5/24"}]}';
    await grpcServer({
      SetUpPod: (call, cb) => {
        received.push(call.request as PodRequest);
        cb(null, { error: null, cni_version: "1.0.0", result_json: result, result: null });
      },
    });
    const stdin = conf("1.0.0", { network: "blue", runtimeConfig: { portMappings: [] } });
    const r = await run("ADD", stdin);
    expect(r.status, r.stdout).to.equal(0);
    expect(r.stdout).to.equal(`${result}\n`);
    expect(received).to.have.length(1);
    const req = received[0] as PodRequest;
    expect({ ...req, stdin_config: Buffer.from(req.stdin_config).toString() }).to.deep.equal({
      api_version: 1,
      pod: null,
      container_id: "c0ffee",
      netns: "/run/netns/cni-driver-test-absent",
      ifname: "eth0",
      network: "blue",
      cni_version: "1.0.0",
      cni_args: [
        { key: "IgnoreUnknown", value: "1" },
        { key: "K8S_POD_NAMESPACE", value: "default" },
        { key: "K8S_POD_NAME", value: "web-0" },
      ],
      capabilities: null,
      stdin_config: stdin,
    });
  });

  it("a configuration of 1 MiB reaches the driver byte for byte, and a 3 MB result comes back whole", async () => {
    let got = Buffer.alloc(0);
    const big = "x".repeat(3 * 1024 * 1024);
    const result = JSON.stringify({ cniVersion: "1.1.0", big });
    await grpcServer({
      SetUpPod: (call, cb) => {
        got = Buffer.from((call.request as PodRequest).stdin_config);
        cb(null, { error: null, cni_version: "1.1.0", result_json: result, result: null });
      },
    });
    const head = conf("1.1.0", { pad: "" });
    const stdin = head.replace('"pad":""', `"pad":"${"p".repeat(1024 * 1024 - head.length)}"`);
    expect(Buffer.byteLength(stdin)).to.equal(1024 * 1024);
    const r = await run("ADD", stdin);
    expect(r.status, r.stdout.slice(0, 300)).to.equal(0);
    expect(got.toString()).to.equal(stdin);
    expect(r.stdout).to.equal(`${result}\n`);
  });

  it("passes the driver's CNI error through unchanged, in the config's version", async () => {
    await grpcServer({
      CheckPod: (_call, cb) => cb(null, { error: { code: 7, msg: "no network", details: "d" } }),
    });
    const r = await run("CHECK", conf("0.4.0"));
    expect(r.status).to.equal(1);
    expect(r.json).to.deep.equal({ cniVersion: "0.4.0", code: 7, msg: "no network", details: "d" });
  });

  it("refuses a result in another version than the config's (code 1), and one that is not JSON (999)", async () => {
    let answer = '{"cniVersion":"0.4.0"}';
    await grpcServer({
      SetUpPod: (_call, cb) =>
        cb(null, { error: null, cni_version: "1.0.0", result_json: answer, result: null }),
    });
    expectCniError(await run("ADD", conf("1.0.0")), 1, /answered ADD in CNI version "0.4.0"/);
    answer = "{not json";
    expectCniError(await run("ADD", conf("1.0.0")), 999, /result that is not JSON/);
  });

  const statusCases: Array<[string, grpc.status, number]> = [
    ["UNAVAILABLE", grpc.status.UNAVAILABLE, 11],
    ["DEADLINE_EXCEEDED", grpc.status.DEADLINE_EXCEEDED, 11],
    ["UNIMPLEMENTED", grpc.status.UNIMPLEMENTED, 1],
    ["INTERNAL", grpc.status.INTERNAL, 999],
    ["PERMISSION_DENIED", grpc.status.PERMISSION_DENIED, 999],
  ];
  for (const [name, status, code] of statusCases) {
    it(`gRPC status ${name} is CNI code ${code}, naming the status and keeping its message`, async () => {
      await grpcServer({
        GarbageCollect: (_call, cb) => cb({ code: status, details: "it went 100% wrong" }),
      });
      const r = await run("GC", conf("1.1.0"));
      expectCniError(r, code, new RegExp(`^cni-driver at ${socket}: ${name}: it went 100% wrong$`));
      expect(r.json?.details).to.equal(`gRPC status ${name}`);
    });
  }

  it("a method the driver does not serve is UNIMPLEMENTED: code 1", async () => {
    await grpcServer({ SetUpPod: (_call, cb) => cb(null, {}) });
    expectCniError(await run("GC", conf("1.1.0")), 1, /UNIMPLEMENTED/);
  });

  describe("an answer carrying fields of a later contract", () => {
    /** Answers every call with `payload` as its message, as a gRPC server does. */
    async function answerWith(payload: Buffer): Promise<void> {
      await h2Server((stream) => {
        stream.on("data", () => {});
        stream.on("end", () => {
          const head = Buffer.alloc(5);
          head.writeUInt32BE(payload.length, 1);
          stream.respond(
            { ":status": 200, "content-type": "application/grpc" },
            { waitForTrailers: true },
          );
          stream.on("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
          stream.end(Buffer.concat([head, payload]));
        });
      });
    }

    it("ADD: the result printed as answered, the unknown fields skipped", async () => {
      const result = '{"cniVersion":"1.0.0","ips":[{"address":"10.1.0.5/24"}]}';
      await answerWith(
        encodeWithUnknownFields(wireType("PodResponse"), {
          cni_version: "1.0.0",
          result_json: result,
        }),
      );
      const r = await run("ADD", conf("1.0.0"));
      expect(r.status, r.stdout).to.equal(0);
      expect(r.stdout).to.equal(`${result}\n`);
    });

    it("CHECK: the CNI error read from a nested message with unknown fields of its own", async () => {
      const error = encodeWithUnknownFields(wireType("CniError"), {
        code: 7,
        msg: "no network",
        details: "d",
      });
      await answerWith(Buffer.concat([lengthDelimited(1, error), unknownFields()]));
      const r = await run("CHECK", conf("0.4.0"));
      expect(r.status).to.equal(1);
      expect(r.json).to.deep.equal({
        cniVersion: "0.4.0",
        code: 7,
        msg: "no network",
        details: "d",
      });
    });
  });

  it("GC reports every error the driver met", async () => {
    await grpcServer({
      GarbageCollect: (_call, cb) =>
        cb(null, {
          error: { code: 5, msg: "first", details: "d1" },
          errors: [
            { code: 5, msg: "first", details: "d1" },
            { code: 7, msg: "second", details: "" },
            { code: 999, msg: "third", details: "" },
          ],
          removed_attachments: 0,
        }),
    });
    const r = await run("GC", conf("1.1.0"));
    expectCniError(r, 5, /^first \(and 2 more errors\)$/);
    expect(r.json?.details).to.equal("d1; 7: second; 999: third");
  });

  it("a driver that does not answer in time: DEADLINE_EXCEEDED, code 11", async () => {
    await grpcServer({ GarbageCollect: () => {} });
    expectCniError(
      await run("GC", conf("1.1.0", { timeoutSeconds: 0.5 })),
      11,
      /DEADLINE_EXCEEDED/,
    );
  });

  describe("DEL is queued only when the driver cannot take it", () => {
    it("the driver's not-ready answer: exit 0, the teardown queued", async () => {
      await grpcServer({
        TearDownPod: (_call, cb) =>
          cb(null, {
            error: { code: 11, msg: "not ready", details: NOT_READY_DETAILS, not_ready: true },
          }),
      });
      const r = await run("DEL", conf("1.0.0"));
      expect([r.status, r.stdout]).to.deep.equal([0, ""]);
      expect(queued()).to.deep.equal(["_default-c0ffee-eth0.json"]);
    });

    it("code 11 with the not-ready wording but not the driver's not_ready flag: the DEL fails, nothing queued", async () => {
      await grpcServer({
        TearDownPod: (_call, cb) =>
          cb(null, { error: { code: 11, msg: "not ready", details: NOT_READY_DETAILS } }),
      });
      expectCniError(await run("DEL", conf("1.0.0")), 11, /^not ready$/);
      expect(queued()).to.deep.equal([]);
    });

    it("any other code 11 from a driver that answered (a chained plugin timed out): the DEL fails with it, nothing queued", async () => {
      const msg = "portmap: DEL timed out after 60000 ms; plugin killed";
      await grpcServer({
        TearDownPod: (_call, cb) => cb(null, { error: { code: 11, msg, details: "" } }),
      });
      const r = await run("DEL", conf("1.0.0"));
      expectCniError(r, 11);
      expect(r.json?.msg).to.equal(msg);
      expect(queued()).to.deep.equal([]);
    });

    it("a driver that does not answer within timeoutSeconds: exit 0, the teardown queued", async () => {
      await grpcServer({ TearDownPod: () => {} });
      const r = await run("DEL", conf("1.0.0", { timeoutSeconds: 0.5 }));
      expect([r.status, r.stdout]).to.deep.equal([0, ""]);
      expect(queued()).to.deep.equal(["_default-c0ffee-eth0.json"]);
    });
  });

  it("sends what a gRPC server expects: POST, the method's path, content-type, te, a timeout", async () => {
    let seen: http2.IncomingHttpHeaders = {};
    await h2Server((stream, headers) => {
      seen = headers;
      stream.respond(
        { ":status": 200, "content-type": "application/grpc", "grpc-status": "0" },
        {
          endStream: true,
        },
      );
    });
    await run("STATUS", conf("1.1.0"));
    expect(seen[":method"]).to.equal("POST");
    expect(seen[":path"]).to.equal("/cnidriver.v1.CNIDriver/CniStatus");
    expect(seen["content-type"]).to.equal("application/grpc");
    expect(seen.te).to.equal("trailers");
    expect(String(seen["grpc-timeout"])).to.match(/^\d+m$/);
  });

  it("an HTTP/2 server that is not gRPC: its HTTP status mapped (404 → UNIMPLEMENTED → code 1)", async () => {
    await h2Server((stream) => stream.respond({ ":status": 404 }, { endStream: true }));
    expectCniError(await run("GC", conf("1.1.0")), 1, /UNIMPLEMENTED: HTTP status 404/);
  });

  it("a trailers-only answer carries the status, its message percent-decoded", async () => {
    await h2Server((stream) =>
      stream.respond(
        {
          ":status": 200,
          "content-type": "application/grpc",
          "grpc-status": "14",
          "grpc-message": "draining%3A%20try%20later",
        },
        { endStream: true },
      ),
    );
    expectCniError(await run("GC", conf("1.1.0")), 11, /UNAVAILABLE: draining: try later$/);
  });

  it("a stream refused before any answer: UNAVAILABLE, code 11", async () => {
    await h2Server((stream) => stream.close(http2.constants.NGHTTP2_REFUSED_STREAM));
    expectCniError(await run("GC", conf("1.1.0")), 11, /refused/);
  });

  it("an HTTP/1.1 answer on the socket: an HTTP/2 protocol error, code 11", async () => {
    await rawServer((c) =>
      c.once("data", () => c.end("HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n")),
    );
    expectCniError(await run("GC", conf("1.1.0")), 11, /UNAVAILABLE/);
  });

  it("a connection closed at once: UNAVAILABLE, code 11", async () => {
    await rawServer((c) => c.destroy());
    expectCniError(await run("GC", conf("1.1.0")), 11, /UNAVAILABLE/);
  });

  it("a process that holds the socket and never speaks: the call is connected, and gets its own deadline", async () => {
    let connections = 0;
    await rawServer(() => {
      connections++;
    });
    const add = await run("ADD", conf("1.0.0", { timeoutSeconds: 1 }));
    expectCniError(
      add,
      11,
      /DEADLINE_EXCEEDED: no answer within \d+ ms.*gave up after 1 attempt in 1 s/,
    );
    expect(connections, "one connection: a connected call is not retried").to.equal(1);
    const del = await run("DEL", conf("1.0.0", { timeoutSeconds: 1 }));
    expect([del.status, del.stdout]).to.deep.equal([0, ""]);
    expect(queued()).to.deep.equal(["_default-c0ffee-eth0.json"]);
  });
});
