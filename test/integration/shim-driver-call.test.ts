/**
 * The shim's gRPC client (its own HTTP/2 client and the hand codec) against a
 * grpc-js server loaded from proto/cni_driver.proto exactly as the driver loads
 * it, on a unix socket: answers come back decoded, and every transport failure
 * becomes the CNI error the .proto's header prescribes (UNAVAILABLE and
 * DEADLINE_EXCEEDED → 11, UNIMPLEMENTED → 1, anything else → 999 with the status
 * as details).
 */
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import http2 from "node:http2";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { expect } from "chai";
import {
  answerError,
  callDriver,
  callDriverRetrying,
} from "../../src/remote-plugin-shim/driver-call.js";
import { runShim } from "../../src/remote-plugin-shim/shim.js";
import { DELETION_QUEUE_DIR } from "../../src/wire/deletion-record.js";
import { transportCniError } from "../../src/wire/grpc-status.js";
import { PROTO_LOADER_OPTIONS, protoPath } from "../../src/wire/proto-path.js";
import { NOT_READY_DETAILS, type PodRequest, type PodResponse } from "../../src/wire/types.js";

const POD_REQUEST: PodRequest = {
  api_version: 1,
  pod: null,
  container_id: "c0ffee",
  netns: "/run/netns/x",
  ifname: "eth0",
  network: "",
  cni_version: "1.0.0",
  cni_args: [{ key: "IgnoreUnknown", value: "1" }],
  capabilities: null,
  stdin_config: Buffer.from('{"cniVersion":"1.0.0","name":"n"}'),
};

type Handlers = Partial<Record<string, grpc.handleUnaryCall<unknown, unknown>>>;

async function startServer(socket: string, handlers: Handlers): Promise<grpc.Server> {
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

describe("shim driver-call over HTTP/2 (integration: a grpc-js server)", function () {
  this.timeout(20_000);
  let dir: string;
  let socket: string;
  let server: grpc.Server | undefined;
  let received: unknown[];

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "cni-driver-shim-call-"));
    socket = join(dir, "driver.sock");
    received = [];
  });

  afterEach(() => {
    server?.forceShutdown();
    server = undefined;
    rmSync(dir, { recursive: true, force: true });
  });

  it("sends the request the server decodes, and decodes the server's answer", async () => {
    const answer: PodResponse = {
      error: null,
      cni_version: "1.0.0",
      result_json: '{"cniVersion":"1.0.0"}',
      result: {
        interfaces: [
          {
            name: "eth0",
            mac: "0a:58:0a:01:00:05",
            sandbox: "/run/netns/x",
            mtu: 0,
            socket_path: "",
            pci_id: "",
          },
        ],
        ips: [{ address: "10.1.0.5/24", gateway: "10.1.0.1", interface: 0 }],
        routes: [],
        dns: null,
      },
    };
    server = await startServer(socket, {
      SetUpPod: (call, cb) => {
        received.push(call.request);
        cb(null, answer);
      },
    });
    const res = await callDriver(socket, "SetUpPod", POD_REQUEST, { timeoutMs: 5000 });
    expect(res.transportError).to.equal(undefined);
    expect(res.response).to.deep.equal(answer);
    expect(received).to.deep.equal([POD_REQUEST]);
  });

  it("reads a CNI error in the answer as the driver's own (gRPC status OK)", async () => {
    server = await startServer(socket, {
      TearDownPod: (_call, cb) => cb(null, { error: { code: 7, msg: "no network", details: "d" } }),
    });
    const res = await callDriver(socket, "TearDownPod", POD_REQUEST, { timeoutMs: 5000 });
    expect(res.transportError).to.equal(undefined);
    const err = answerError(res);
    expect([err?.code, err?.message, err?.details]).to.deep.equal([7, "no network", "d"]);
  });

  const statusCases: Array<[string, grpc.status, number]> = [
    ["UNAVAILABLE", grpc.status.UNAVAILABLE, 11],
    ["DEADLINE_EXCEEDED", grpc.status.DEADLINE_EXCEEDED, 11],
    ["UNIMPLEMENTED", grpc.status.UNIMPLEMENTED, 1],
    ["INTERNAL", grpc.status.INTERNAL, 999],
    ["PERMISSION_DENIED", grpc.status.PERMISSION_DENIED, 999],
  ];
  for (const [name, status, code] of statusCases) {
    it(`maps gRPC status ${name} to CNI code ${code}, keeping the status and message`, async () => {
      server = await startServer(socket, {
        CniStatus: (_call, cb) => cb({ code: status, details: "it went wrong: 100% é" }),
      });
      const res = await callDriver(
        socket,
        "CniStatus",
        { api_version: 1, network: "", cni_version: "" },
        { timeoutMs: 5000 },
      );
      expect(res.response).to.equal(undefined);
      expect(res.transportError?.code).to.equal(code);
      expect(res.transportError?.message).to.equal(
        `cni-driver at ${socket}: ${name}: it went wrong: 100% é`,
      );
      expect(res.transportError?.details).to.equal(`gRPC status ${name}`);
    });
  }

  it("a method the server does not serve is UNIMPLEMENTED: code 1", async () => {
    server = await startServer(socket, {});
    const res = await callDriver(
      socket,
      "GarbageCollect",
      { api_version: 1, networks: [], cni_version: "" },
      { timeoutMs: 5000 },
    );
    expect(res.transportError?.code).to.equal(1);
    expect(res.transportError?.message).to.match(/UNIMPLEMENTED/);
  });

  it("a server that does not answer in time: DEADLINE_EXCEEDED, code 11, after the deadline", async () => {
    server = await startServer(socket, { CheckPod: () => {} });
    const t = Date.now();
    const res = await callDriver(socket, "CheckPod", POD_REQUEST, { timeoutMs: 300 });
    expect(Date.now() - t).to.be.within(250, 3000);
    expect(res.transportError?.code).to.equal(11);
    expect(res.transportError?.message).to.match(/DEADLINE_EXCEEDED/);
  });

  for (const [what, prepare] of [
    ["no socket file", () => {}],
    ["a regular file", () => writeFileSync(socket, "")],
  ] as const) {
    it(`${what} at the socket path: UNAVAILABLE, code 11, naming the socket, at once`, async () => {
      prepare();
      const t = Date.now();
      const res = await callDriver(socket, "SetUpPod", POD_REQUEST, { timeoutMs: 5000 });
      expect(Date.now() - t).to.be.below(1000);
      expect(res.transportError?.code).to.equal(11);
      expect(res.transportError?.message).to.include(`cni-driver at ${socket}: UNAVAILABLE:`);
    });
  }

  it("a process that holds the socket but never speaks HTTP/2: unavailable after the connect timeout", async () => {
    const silent = net.createServer(() => {});
    await new Promise<void>((r) => silent.listen(socket, () => r()));
    try {
      const t = Date.now();
      const res = await callDriver(socket, "TearDownPod", POD_REQUEST, {
        timeoutMs: 10_000,
        connectTimeoutMs: 300,
      });
      expect(Date.now() - t).to.be.within(250, 3000);
      expect(res.transportError?.code).to.equal(11);
      expect(res.transportError?.message).to.match(/UNAVAILABLE: .*HTTP\/2 session within 300 ms/);
    } finally {
      silent.close();
    }
  });

  it("an HTTP/2 server that is not gRPC: its HTTP status mapped (404 → UNIMPLEMENTED → code 1)", async () => {
    const plain = http2.createServer((_req, res) => {
      res.statusCode = 404;
      res.end("not here");
    });
    await new Promise<void>((r) => plain.listen(socket, () => r()));
    try {
      const res = await callDriver(socket, "SetUpPod", POD_REQUEST, { timeoutMs: 5000 });
      expect(res.transportError?.code).to.equal(1);
      expect(res.transportError?.message).to.match(/UNIMPLEMENTED: HTTP status 404/);
    } finally {
      plain.close();
    }
  });

  it("retries while the answer is code 11, until a driver answers", async () => {
    let calls = 0;
    // Not ready for the first two calls, as a driver still replaying its deletion queue.
    server = await startServer(socket, {
      SetUpPod: (_call, cb) => {
        calls++;
        if (calls <= 2)
          cb(null, {
            error: { code: 11, msg: "cni-driver is not ready", details: NOT_READY_DETAILS },
          });
        else cb(null, { error: null, cni_version: "1.0.0", result_json: "{}", result: null });
      },
    });
    const { answer, attempts } = await callDriverRetrying(socket, "SetUpPod", POD_REQUEST, {
      timeoutMs: 5000,
    });
    expect(answerError(answer)).to.equal(undefined);
    expect(attempts).to.equal(3);
  });

  it("retries a socket that appears late, and gives up at the deadline", async () => {
    setTimeout(() => {
      startServer(socket, {
        CheckPod: (_call, cb) => cb(null, { error: null }),
      }).then((s) => {
        server = s;
      });
    }, 400);
    const late = await callDriverRetrying(socket, "CheckPod", POD_REQUEST, { timeoutMs: 5000 });
    expect(answerError(late.answer)).to.equal(undefined);
    expect(late.attempts).to.be.above(1);

    const gone = join(dir, "never.sock");
    const t = Date.now();
    const never = await callDriverRetrying(gone, "CheckPod", POD_REQUEST, { timeoutMs: 700 });
    expect(Date.now() - t).to.be.within(600, 2000);
    expect(answerError(never.answer)?.code).to.equal(11);
    expect(never.attempts).to.be.above(2);
  });

  it("transportCniError names the status of a code gRPC does not define by its number", () => {
    expect(transportCniError(99, "m", "/s").message).to.equal("cni-driver at /s: 99: m");
  });

  describe("DEL: queued only when the driver cannot take it", () => {
    const delEnv = {
      CNI_COMMAND: "DEL",
      CNI_CONTAINERID: "c0ffee",
      CNI_NETNS: "/run/netns/cni-driver-test-absent",
      CNI_IFNAME: "eth0",
      CNI_PATH: "/opt/cni/bin",
    };
    const del = (timeoutSeconds = 5) =>
      runShim(delEnv, async () =>
        Buffer.from(
          JSON.stringify({
            cniVersion: "1.0.0",
            name: "n",
            type: "cni-driver-shim",
            socket,
            stateDir: join(dir, "state"),
            timeoutSeconds,
          }),
        ),
      );
    const queued = () => {
      try {
        return readdirSync(join(dir, "state", DELETION_QUEUE_DIR));
      } catch {
        return [];
      }
    };

    it("the driver's not-ready answer: exit 0, the teardown queued", async () => {
      server = await startServer(socket, {
        TearDownPod: (_call, cb) =>
          cb(null, {
            error: { code: 11, msg: "cni-driver is not ready: x", details: NOT_READY_DETAILS },
          }),
      });
      const out = await del();
      expect(out).to.deep.equal({ stdout: "", exitCode: 0 });
      expect(queued()).to.deep.equal(["_default-c0ffee-eth0.json"]);
    });

    it("any other code 11 from a driver that answered (a chained plugin timed out): the DEL fails with it, nothing queued", async () => {
      server = await startServer(socket, {
        TearDownPod: (_call, cb) =>
          cb(null, {
            error: {
              code: 11,
              msg: "portmap: DEL timed out after 60000 ms; plugin killed",
              details: "",
            },
          }),
      });
      const out = await del();
      expect(out.exitCode).to.equal(1);
      expect(JSON.parse(out.stdout)).to.deep.include({
        code: 11,
        msg: "portmap: DEL timed out after 60000 ms; plugin killed",
      });
      expect(queued()).to.deep.equal([]);
    });

    it("a driver that does not answer within timeoutSeconds: exit 0, the teardown queued", async () => {
      server = await startServer(socket, { TearDownPod: () => {} });
      const out = await del(0.5);
      expect(out).to.deep.equal({ stdout: "", exitCode: 0 });
      expect(queued()).to.deep.equal(["_default-c0ffee-eth0.json"]);
    });
  });
});
