/**
 * The driver's gRPC server (src/driver/rpc/grpc-unary-server.ts) against real
 * clients over a unix socket: grpc-js with proto-loader, as an independent gRPC
 * implementation, and raw node:http2 for what a well-behaved client never sends.
 */
import { mkdtempSync, rmSync } from "node:fs";
import http2 from "node:http2";
import { connect, createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import { expect } from "chai";
import { type GrpcUnary, grpcServiceClient } from "../../src/driver/rpc/client.js";
import {
  parseTimeoutMs,
  percentEncode,
  UnaryGrpcServer,
  type UnaryHandler,
} from "../../src/driver/rpc/grpc-unary-server.js";
import { loadServiceCodecs } from "../../src/wire/codec.js";
import { GrpcStatus } from "../../src/wire/grpc-status.js";

const MAX = 64 * 1024;

describe("the driver's gRPC server", function () {
  this.timeout(20_000);
  let dir: string;
  let socketPath: string;
  let listener: Server;
  let server: UnaryGrpcServer;
  let client: grpc.Client & Record<string, GrpcUnary>;
  let handlers: Record<string, UnaryHandler>;
  let ended: number;

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), "cni-driver-grpc-"));
    socketPath = join(dir, "s.sock");
    ended = 0;
    handlers = {};
    const route =
      (name: string): UnaryHandler =>
      (req) => {
        const h = handlers[name];
        return h ? h(req) : Promise.reject(new Error(`no handler for ${name}`));
      };
    server = new UnaryGrpcServer(
      loadServiceCodecs(),
      Object.fromEntries(
        ["SetUpPod", "TearDownPod", "CheckPod", "CniStatus", "GarbageCollect"].map((n) => [
          n,
          route(n),
        ]),
      ),
      { maxMessageBytes: MAX, idleTimeoutMs: 60_000, onCallEnded: () => ended++ },
    );
    listener = createServer((socket) => server.inject(socket));
    await new Promise<void>((resolve) => listener.listen(socketPath, resolve));
    client = grpcServiceClient(socketPath, { "grpc.max_send_message_length": 4 * MAX });
  });

  afterEach(async () => {
    client.close();
    server.forceClose();
    await new Promise((resolve) => listener.close(resolve));
    rmSync(dir, { recursive: true, force: true });
  });

  const call = (method: string, req: unknown, timeoutMs = 10_000) =>
    new Promise<{ err: grpc.ServiceError | null; res: unknown }>((resolve) => {
      const fn = client[method] as GrpcUnary;
      fn.call(
        client,
        req,
        new grpc.Metadata(),
        { deadline: new Date(Date.now() + timeoutMs) },
        (err, res) => resolve({ err, res }),
      );
    });

  /** A raw HTTP/2 request; resolves with the response headers and trailers merged. */
  const raw = (headers: http2.OutgoingHttpHeaders, body: Buffer) =>
    new Promise<Record<string, unknown>>((resolve, reject) => {
      const session = http2.connect("http://localhost", {
        createConnection: () => connect(socketPath),
      });
      session.on("error", reject);
      const stream = session.request(headers);
      const seen: Record<string, unknown> = {};
      stream.on("response", (h) => Object.assign(seen, h));
      stream.on("trailers", (t) => Object.assign(seen, t));
      stream.on("data", () => {});
      stream.on("close", () => {
        session.close();
        resolve(seen);
      });
      if (!stream.writableEnded) stream.end(body); // a GET ends its side with the headers
    });

  const frame = (payload: Buffer, compressed = 0) => {
    const head = Buffer.alloc(5);
    head[0] = compressed;
    head.writeUInt32BE(payload.length, 1);
    return Buffer.concat([head, payload]);
  };

  it("answers a call with what the handler returned, the request decoded as proto-loader does", async () => {
    let seen: unknown;
    handlers.SetUpPod = async (req) => {
      seen = req;
      return { cni_version: "1.0.0", result_json: '{"ok":true}', error: null, result: null };
    };
    const { err, res } = await call("SetUpPod", {
      container_id: "abc",
      ifname: "eth0",
      cni_args: [{ key: "K", value: "V" }],
      stdin_config: Buffer.from("{}"),
    });
    expect(err).to.equal(null);
    expect(res).to.include({ cni_version: "1.0.0", result_json: '{"ok":true}' });
    // keepCase, defaults: what grpc-js with proto-loader handed the service before.
    expect(seen).to.include({ container_id: "abc", ifname: "eth0", netns: "", network: "" });
    expect((seen as { cni_args: unknown }).cni_args).to.deep.equal([{ key: "K", value: "V" }]);
    expect(Buffer.from((seen as { stdin_config: Uint8Array }).stdin_config).toString()).to.equal(
      "{}",
    );
    expect(ended).to.equal(1);
  });

  it("turns a handler's failure into INTERNAL with its message, non-ASCII included", async () => {
    handlers.CheckPod = () => Promise.reject(new Error("broke on café ✓ 100%"));
    const { err } = await call("CheckPod", {});
    expect(err?.code).to.equal(grpc.status.INTERNAL);
    expect(err?.details).to.equal("Error: broke on café ✓ 100%");
    expect(ended).to.equal(1);
  });

  it("refuses a message over the bound with RESOURCE_EXHAUSTED, and serves the next call", async () => {
    handlers.SetUpPod = async () => ({ cni_version: "1.0.0" });
    const big = await call("SetUpPod", { container_id: "x".repeat(MAX + 10) });
    expect(big.err?.code).to.equal(grpc.status.RESOURCE_EXHAUSTED);
    const small = await call("SetUpPod", { container_id: "x" });
    expect(small.err).to.equal(null);
  });

  it("answers DEADLINE_EXCEEDED itself once the call's grpc-timeout passes", async () => {
    handlers.SetUpPod = () => new Promise(() => {}); // never answers
    const seen = await raw(
      {
        ":method": "POST",
        ":path": "/cnidriver.v1.CNIDriver/SetUpPod",
        "content-type": "application/grpc",
        te: "trailers",
        "grpc-timeout": "200m",
      },
      frame(Buffer.alloc(0)),
    );
    expect(seen["grpc-status"]).to.equal(String(GrpcStatus.DEADLINE_EXCEEDED));
  });

  it("answers UNIMPLEMENTED for a method the proto does not have, naming it", async () => {
    const seen = await raw(
      {
        ":method": "POST",
        ":path": "/cnidriver.v1.CNIDriver/Nope",
        "content-type": "application/grpc",
      },
      frame(Buffer.alloc(0)),
    );
    expect(seen["grpc-status"]).to.equal(String(GrpcStatus.UNIMPLEMENTED));
    expect(decodeURIComponent(String(seen["grpc-message"]))).to.contain(
      "/cnidriver.v1.CNIDriver/Nope",
    );
  });

  it("answers INTERNAL for a body that is not one message, or a compressed one", async () => {
    const headers = {
      ":method": "POST",
      ":path": "/cnidriver.v1.CNIDriver/CheckPod",
      "content-type": "application/grpc",
    };
    handlers.CheckPod = async () => ({});
    const two = await raw(headers, Buffer.concat([frame(Buffer.alloc(0)), frame(Buffer.alloc(0))]));
    expect(two["grpc-status"]).to.equal(String(GrpcStatus.INTERNAL));
    const none = await raw(headers, Buffer.alloc(0));
    expect(none["grpc-status"]).to.equal(String(GrpcStatus.INTERNAL));
    const zipped = await raw(headers, frame(Buffer.from([1, 2, 3]), 1));
    expect(zipped["grpc-status"]).to.equal(String(GrpcStatus.INTERNAL));
    const garbage = await raw(headers, frame(Buffer.from([0xff, 0xff, 0xff])));
    expect(garbage["grpc-status"]).to.equal(String(GrpcStatus.INTERNAL));
    expect(decodeURIComponent(String(garbage["grpc-message"]))).to.contain("deserializing");
  });

  it("answers plain HTTP 415 to a request that is not gRPC, and 405 to one that is not a POST", async () => {
    const json = await raw(
      {
        ":method": "POST",
        ":path": "/cnidriver.v1.CNIDriver/CheckPod",
        "content-type": "text/plain",
      },
      Buffer.from("hi"),
    );
    expect(json[":status"]).to.equal(415);
    const get = await raw({ ":method": "GET", ":path": "/" }, Buffer.alloc(0));
    expect(get[":status"]).to.equal(405);
  });

  it("close() lets a call in flight finish, then resolves", async () => {
    let release: () => void = () => {};
    handlers.CniStatus = () =>
      new Promise((resolve) => {
        release = () => resolve({ ready: true, driver_version: "x" });
      });
    const pending = call("CniStatus", {});
    await new Promise((r) => setTimeout(r, 100));
    let closed = false;
    const closing = server.close().then(() => {
      closed = true;
    });
    await new Promise((r) => setTimeout(r, 100));
    expect(closed, "closed while a call was in flight").to.equal(false);
    release();
    const { err, res } = await pending;
    expect(err).to.equal(null);
    expect(res).to.include({ ready: true, driver_version: "x" });
    await closing;
    expect(closed).to.equal(true);
  });

  it("reads grpc-timeout in every unit, and nothing else", () => {
    expect(parseTimeoutMs("5S")).to.equal(5000);
    expect(parseTimeoutMs("2M")).to.equal(120_000);
    expect(parseTimeoutMs("1H")).to.equal(3_600_000);
    expect(parseTimeoutMs("250m")).to.equal(250);
    expect(parseTimeoutMs("1500u")).to.equal(2);
    expect(parseTimeoutMs("1n")).to.equal(1);
    expect(parseTimeoutMs("123456789S")).to.equal(undefined);
    expect(parseTimeoutMs("5s")).to.equal(undefined);
    expect(parseTimeoutMs(undefined)).to.equal(undefined);
  });

  it("percent-encodes grpc-message as the protocol says", () => {
    expect(percentEncode("plain text: ok")).to.equal("plain text: ok");
    expect(percentEncode("100%")).to.equal("100%25");
    expect(percentEncode("é\n")).to.equal("%C3%A9%0A");
  });
});
