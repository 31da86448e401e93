/**
 * The shim's HTTP/2 client (src/remote-plugin-shim/grpc-http2.ts) against Node's
 * own HTTP/2 server (nghttp2, as under grpc-js) doing what a gRPC server may do
 * and the grpc-js suite (shim-driver-call.test.ts) does not provoke: bodies far
 * beyond the flow-control windows both ways, small windows set by SETTINGS,
 * padded frames, header blocks split over CONTINUATION frames, an informational
 * answer first, PINGs, streams reset with each code; and raw servers that break
 * the protocol. Every failure must come back as a gRPC status, never a throw.
 */
import { mkdtempSync, rmSync } from "node:fs";
import http2 from "node:http2";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect } from "chai";
import { type UnaryOutcome, unaryCall } from "../../src/remote-plugin-shim/grpc-http2.js";
import { GrpcStatus } from "../../src/wire/grpc-status.js";

const PATH = "/cnidriver.v1.CNIDriver/SetUpPod";

function grpcFrame(message: Buffer): Buffer {
  const out = Buffer.alloc(5 + message.length);
  out.writeUInt32BE(message.length, 1);
  message.copy(out, 5);
  return out;
}

/** What a gRPC server answers: headers, the framed message, trailers. */
function answer(
  stream: http2.ServerHttp2Stream,
  message: Buffer,
  trailers: http2.OutgoingHttpHeaders = { "grpc-status": "0" },
): void {
  stream.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
  stream.on("wantTrailers", () => stream.sendTrailers(trailers));
  stream.end(grpcFrame(message));
}

/** The request body, unframed, once the client has sent all of it. */
function requestMessage(stream: http2.ServerHttp2Stream): Promise<Buffer> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    stream.on("data", (c: Buffer) => chunks.push(c));
    stream.on("end", () => resolve(Buffer.concat(chunks).subarray(5)));
  });
}

function pattern(size: number, seed: number): Buffer {
  const b = Buffer.alloc(size);
  for (let i = 0; i < size; i++) b[i] = (i * 31 + seed) & 0xff;
  return b;
}

function failure(o: UnaryOutcome): { status: number; message: string } {
  if (o.ok) throw new Error("expected a failure, got an answer");
  return { status: o.status, message: o.message };
}

describe("shim HTTP/2 client (integration: Node's HTTP/2 server and raw sockets)", function () {
  this.timeout(20_000);
  let dir: string;
  let socket: string;
  const closers: Array<() => void> = [];

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "cni-driver-shim-h2-"));
    socket = join(dir, "server.sock");
  });

  afterEach(() => {
    for (const close of closers.splice(0)) close();
    rmSync(dir, { recursive: true, force: true });
  });

  async function h2Server(
    onStream: (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders) => void,
    options: http2.ServerOptions = {},
  ): Promise<http2.Http2Server> {
    const server = http2.createServer(options);
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
    return server;
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

  const call = (request: Buffer, extra: { timeoutMs?: number; maxResponseBytes?: number } = {}) =>
    unaryCall({ socketPath: socket, path: PATH, request, timeoutMs: 5000, ...extra });

  it("sends the gRPC request a server expects: POST, path, content-type, te, timeout", async () => {
    let seen: http2.IncomingHttpHeaders | undefined;
    await h2Server((stream, headers) => {
      seen = headers;
      void requestMessage(stream).then((m) => answer(stream, m));
    });
    const out = await call(Buffer.from("hello"), { timeoutMs: 1500 });
    expect(out).to.deep.equal({ ok: true, response: Buffer.from("hello") });
    expect(seen).to.deep.include({
      ":method": "POST",
      ":scheme": "http",
      ":path": PATH,
      ":authority": "localhost",
      "content-type": "application/grpc",
      te: "trailers",
      "grpc-timeout": "1500m",
      "grpc-accept-encoding": "identity",
      "user-agent": "cni-driver-shim",
    });
  });

  it("a request header block larger than one frame goes out as HEADERS + CONTINUATION", async () => {
    const path = `/x/${"a".repeat(40_000)}`;
    let seen: unknown;
    await h2Server(
      (stream, headers) => {
        seen = headers[":path"];
        answer(stream, Buffer.from("ok"));
      },
      { settings: { maxHeaderListSize: 128 * 1024 } },
    );
    const out = await unaryCall({
      socketPath: socket,
      path,
      request: Buffer.from("x"),
      timeoutMs: 5000,
    });
    expect(out).to.deep.equal({ ok: true, response: Buffer.from("ok") });
    expect(seen).to.equal(path);
  });

  for (const [what, options] of [
    ["default windows", {}],
    ["a 1000-byte initial window from SETTINGS", { settings: { initialWindowSize: 1000 } }],
    ["padded frames", { paddingStrategy: http2.constants.PADDING_STRATEGY_MAX }],
  ] as const) {
    it(`a 1.5 MB request and a 3 MB answer, byte for byte (${what})`, async () => {
      const request = pattern(1_500_000, 1);
      const response = pattern(3_000_000, 7);
      let received: Buffer | undefined;
      await h2Server((stream) => {
        void requestMessage(stream).then((m) => {
          received = m;
          answer(stream, response);
        });
      }, options);
      const out = await call(request, { timeoutMs: 15_000 });
      expect(received?.equals(request), "the server got the request whole").to.equal(true);
      expect(out.ok).to.equal(true);
      if (out.ok) expect(Buffer.from(out.response).equals(response)).to.equal(true);
    });
  }

  it("an answer larger than maxResponseBytes: RESOURCE_EXHAUSTED", async () => {
    await h2Server((stream) => answer(stream, pattern(100_000, 3)));
    const out = failure(await call(Buffer.from("x"), { maxResponseBytes: 50_000 }));
    expect(out).to.deep.equal({
      status: GrpcStatus.RESOURCE_EXHAUSTED,
      message: "the response is larger than 50000 bytes",
    });
  });

  it("trailers split over CONTINUATION frames (a 30 kB grpc-message)", async () => {
    const long = "é".repeat(5000);
    await h2Server((stream) =>
      answer(stream, Buffer.alloc(0), {
        "grpc-status": String(GrpcStatus.FAILED_PRECONDITION),
        "grpc-message": encodeURIComponent(long),
      }),
    );
    expect(failure(await call(Buffer.from("x")))).to.deep.equal({
      status: GrpcStatus.FAILED_PRECONDITION,
      message: long,
    });
  });

  it("a trailers-only answer carries the status in its headers", async () => {
    await h2Server((stream) =>
      stream.respond(
        {
          ":status": 200,
          "content-type": "application/grpc",
          "grpc-status": String(GrpcStatus.UNIMPLEMENTED),
          "grpc-message": "no%20such%20method",
        },
        { endStream: true },
      ),
    );
    expect(failure(await call(Buffer.from("x")))).to.deep.equal({
      status: GrpcStatus.UNIMPLEMENTED,
      message: "no such method",
    });
  });

  it("an informational (1xx) answer before the real one is skipped", async () => {
    await h2Server((stream) => {
      stream.additionalHeaders({ ":status": 103, link: "</x>" });
      answer(stream, Buffer.from("after 103"));
    });
    expect(await call(Buffer.from("x"))).to.deep.equal({
      ok: true,
      response: Buffer.from("after 103"),
    });
  });

  it("answers the server's PING while the call is pending", async () => {
    let pinged: Promise<boolean> | undefined;
    await h2Server((stream) => {
      pinged = new Promise((resolve) =>
        stream.session?.ping((err) => {
          resolve(!err);
          answer(stream, Buffer.from("pong"));
        }),
      );
    });
    expect(await call(Buffer.from("x"))).to.deep.equal({ ok: true, response: Buffer.from("pong") });
    expect(await pinged).to.equal(true);
  });

  const resets: Array<[string, number, number, RegExp]> = [
    ["REFUSED_STREAM", http2.constants.NGHTTP2_REFUSED_STREAM, GrpcStatus.UNAVAILABLE, /refused/],
    ["CANCEL", http2.constants.NGHTTP2_CANCEL, GrpcStatus.CANCELLED, /cancelled/],
    [
      "INTERNAL_ERROR",
      http2.constants.NGHTTP2_INTERNAL_ERROR,
      GrpcStatus.UNAVAILABLE,
      /without an answer \(RST code 2\)/,
    ],
  ];
  for (const [name, code, status, msg] of resets) {
    it(`a stream reset with ${name} before any answer: status ${status}`, async () => {
      await h2Server((stream) => stream.close(code));
      const out = failure(await call(Buffer.from("x")));
      expect(out.status).to.equal(status);
      expect(out.message).to.match(msg);
    });
  }

  /** One HTTP/2 frame, written by hand. */
  function rawFrame(type: number, flags: number, streamId: number, payload: Buffer): Buffer {
    const head = Buffer.alloc(9);
    head.writeUIntBE(payload.length, 0, 3);
    head[3] = type;
    head[4] = flags;
    head.writeUInt32BE(streamId, 5);
    return Buffer.concat([head, payload]);
  }
  const hex = (s: string): Buffer => Buffer.from(s, "hex");
  /** An empty SETTINGS frame, as a server's first. */
  const SETTINGS = rawFrame(0x4, 0, 0, Buffer.alloc(0));

  const broken: Array<[string, (conn: net.Socket) => void, RegExp]> = [
    [
      "a stream reset after the headers",
      (c) =>
        c.write(
          Buffer.concat([
            SETTINGS,
            rawFrame(0x1, 0x4, 1, hex("88")),
            rawFrame(0x3, 0, 1, hex("00000002")),
          ]),
        ),
      /^the stream was reset \(HTTP\/2 error code 2\)$/,
    ],
    [
      "a GOAWAY that leaves our stream out",
      (c) => c.write(Buffer.concat([SETTINGS, rawFrame(0x7, 0, 0, hex("000000000000000b"))])),
      /before the call \(GOAWAY, HTTP\/2 error code 11\)/,
    ],
    [
      "an HTTP/1.1 answer",
      (c) => c.end("HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n"),
      /HTTP\/2 protocol error: a frame of \d+ bytes/,
    ],
    [
      "a frame larger than 16384 bytes",
      (c) => c.write(Buffer.concat([SETTINGS, rawFrame(0x0, 0, 1, Buffer.alloc(16_385))])),
      /HTTP\/2 protocol error: a frame of 16385 bytes/,
    ],
    [
      "DATA before any headers",
      (c) => c.write(Buffer.concat([SETTINGS, rawFrame(0x0, 0x1, 1, hex("ff"))])),
      /HTTP\/2 protocol error: DATA out of place/,
    ],
    [
      "a header block that does not decode",
      (c) => c.write(Buffer.concat([SETTINGS, rawFrame(0x1, 0x5, 1, hex("be"))])),
      /HTTP\/2 protocol error: an unreadable header block \(index 62 is in neither table\)/,
    ],
    [
      "a header block interrupted by another frame",
      (c) => c.write(Buffer.concat([SETTINGS, rawFrame(0x1, 0, 1, hex("88")), SETTINGS])),
      /HTTP\/2 protocol error: a header block interrupted/,
    ],
    [
      "a PUSH_PROMISE",
      (c) => c.write(Buffer.concat([SETTINGS, rawFrame(0x5, 0x4, 1, hex("00000002"))])),
      /HTTP\/2 protocol error: PUSH_PROMISE/,
    ],
    [
      "a WINDOW_UPDATE of 0",
      (c) => c.write(Buffer.concat([SETTINGS, rawFrame(0x8, 0, 0, hex("00000000"))])),
      /HTTP\/2 protocol error: a WINDOW_UPDATE of 0/,
    ],
    [
      "a connection closed after SETTINGS",
      (c) => c.end(SETTINGS),
      /the connection closed before the server answered|EPIPE|ECONNRESET/,
    ],
  ];
  for (const [what, behave, msg] of broken) {
    it(`${what}: UNAVAILABLE, at once`, async () => {
      await rawServer((conn) => conn.once("data", () => behave(conn)));
      const t = Date.now();
      const out = failure(await call(Buffer.from("x")));
      expect(Date.now() - t).to.be.below(2000);
      expect(out.status).to.equal(GrpcStatus.UNAVAILABLE);
      expect(out.message).to.match(msg);
    });
  }

  it("unknown frame types and PRIORITY frames are skipped", async () => {
    // A trailers-only answer: :status 200 (indexed), grpc-status 5 (a literal).
    const block = Buffer.concat([hex("000b"), Buffer.from("grpc-status"), hex("0135")]);
    await rawServer((conn) =>
      conn.once("data", () =>
        conn.write(
          Buffer.concat([
            SETTINGS,
            rawFrame(0x42, 0, 1, Buffer.from("abc")),
            rawFrame(0x2, 0, 1, hex("0000000010")),
            rawFrame(0x1, 0x5, 1, Buffer.concat([hex("88"), block])),
          ]),
        ),
      ),
    );
    expect(failure(await call(Buffer.from("x")))).to.deep.equal({
      status: GrpcStatus.NOT_FOUND,
      message: "",
    });
  });
});
