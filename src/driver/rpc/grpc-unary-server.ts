/**
 * gRPC's unary calls on Node's own HTTP/2 (node:http2), with the proto's codecs
 * (wire/codec.ts): one request message in, one response message or a status
 * out, as "gRPC over HTTP/2" (grpc/doc/PROTOCOL-HTTP2.md) has them. HTTP/2 and
 * HPACK are Node's (nghttp2); this is the five-byte message framing, the status
 * trailers, `grpc-timeout` and the idle GOAWAY.
 *
 * The driver serves five unary methods and nothing else of gRPC. grpc-js's
 * server with proto-loader held about 4 MiB more of an idle driver's memory
 * (bench/memory) for streaming, compression, channelz and reflection descriptors
 * it never used. Clients are unchanged: the shim (libnghttp2), grpc-js's client
 * (rpc/client.ts), any gRPC client.
 */
import http2 from "node:http2";
import type { Socket } from "node:net";
import { messageOf } from "../../common/errors.js";
import type { UnaryMethodCodec } from "../../wire/codec.js";
import { GrpcStatus } from "../../wire/grpc-status.js";

export type UnaryHandler = (request: unknown) => Promise<unknown>;

export interface UnaryServerOptions {
  /** The largest request message taken; a larger one is RESOURCE_EXHAUSTED. */
  maxMessageBytes: number;
  /** A connection with no call in flight this long is sent a GOAWAY and closed. */
  idleTimeoutMs: number;
  /** After each call is answered (or has failed). */
  onCallEnded?: () => void;
}

/** The length-prefixed message's header: a compressed flag and a 32-bit big-endian length. */
const FRAME_HEADER_BYTES = 5;
/** Node's bound on what one connection may buffer, in MB: above the largest message. */
const MAX_SESSION_MEMORY_MB = 64;

export class UnaryGrpcServer {
  private readonly h2: http2.Http2Server;
  private readonly sessions = new Set<http2.ServerHttp2Session>();
  private closing = false;
  private drained: (() => void) | undefined;

  constructor(
    private readonly codecs: ReadonlyMap<string, UnaryMethodCodec>,
    private readonly handlers: Readonly<Record<string, UnaryHandler>>,
    private readonly opts: UnaryServerOptions,
  ) {
    this.h2 = http2.createServer({ maxSessionMemory: MAX_SESSION_MEMORY_MB });
    this.h2.on("session", (session) => this.track(session));
    this.h2.on("stream", (stream, headers) => this.serve(stream, headers));
    this.h2.on("sessionError", () => {}); // a peer's protocol error ends its own session only
  }

  /** Serves a connection accepted elsewhere (the listener and its limits: connection-gate.ts). */
  inject(socket: Socket): void {
    this.h2.emit("connection", socket);
  }

  /** Takes no new call; resolves once every connection has ended, its calls answered. */
  close(): Promise<void> {
    this.closing = true;
    return new Promise((resolve) => {
      if (this.sessions.size === 0) return resolve();
      this.drained = resolve;
      for (const s of this.sessions) s.close();
    });
  }

  forceClose(): void {
    this.closing = true;
    for (const s of this.sessions) s.destroy();
  }

  private track(session: http2.ServerHttp2Session): void {
    this.sessions.add(session);
    session.on("error", () => {}); // a peer gone mid-way; its streams see it too
    let inFlight = 0;
    let idle: NodeJS.Timeout | undefined;
    const armIdle = () => {
      idle = setTimeout(() => session.close(), this.opts.idleTimeoutMs);
      idle.unref();
    };
    armIdle();
    session.on("stream", (stream) => {
      inFlight++;
      clearTimeout(idle);
      stream.once("close", () => {
        if (--inFlight === 0 && !session.closed) armIdle();
      });
    });
    session.once("close", () => {
      clearTimeout(idle);
      this.sessions.delete(session);
      if (this.sessions.size === 0) this.drained?.();
    });
    if (this.closing) session.close();
  }

  private serve(stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders): void {
    stream.on("error", () => {}); // a reset from the peer; nothing is left to answer
    if (headers[":method"] !== "POST") {
      plainHttp(stream, 405);
      return;
    }
    if (!headers["content-type"]?.startsWith("application/grpc")) {
      plainHttp(stream, 415);
      return;
    }
    const path = headers[":path"] ?? "";
    const codec = this.codecs.get(path);
    const handler = codec && this.handlers[codec.name];
    const call = new UnaryCall(stream, parseTimeoutMs(headers["grpc-timeout"]));
    if (!codec || !handler) {
      call.fail(GrpcStatus.UNIMPLEMENTED, `the driver does not serve the method ${path}`);
      return;
    }
    readMessage(stream, this.opts.maxMessageBytes, (status, message, bytes) => {
      if (bytes) this.run(call, codec, handler, bytes);
      else call.fail(status, message);
    });
  }

  private run(
    call: UnaryCall,
    codec: UnaryMethodCodec,
    handler: UnaryHandler,
    bytes: Uint8Array,
  ): void {
    let request: unknown;
    try {
      request = codec.decodeRequest(bytes);
    } catch (err) {
      call.fail(GrpcStatus.INTERNAL, `Error deserializing request: ${messageOf(err)}`);
      return;
    }
    handler(request)
      .then(
        (response) => {
          let payload: Uint8Array;
          try {
            payload = codec.encodeResponse(response);
          } catch (err) {
            call.fail(GrpcStatus.INTERNAL, `Error serializing response: ${messageOf(err)}`);
            return;
          }
          call.answer(payload);
        },
        (err: unknown) => call.fail(GrpcStatus.INTERNAL, String(err)),
      )
      .finally(() => this.opts.onCallEnded?.());
  }
}

/** One call's answer: given once, a response or a status; none after its deadline. */
class UnaryCall {
  private done = false;
  private readonly deadline: NodeJS.Timeout | undefined;

  constructor(
    private readonly stream: http2.ServerHttp2Stream,
    timeoutMs: number | undefined,
  ) {
    if (timeoutMs !== undefined)
      this.deadline = setTimeout(
        () => this.fail(GrpcStatus.DEADLINE_EXCEEDED, "Deadline exceeded"),
        timeoutMs,
      );
    stream.once("close", () => this.settle());
  }

  answer(payload: Uint8Array): void {
    if (!this.settle()) return;
    const frame = Buffer.allocUnsafe(FRAME_HEADER_BYTES + payload.length);
    frame[0] = 0;
    frame.writeUInt32BE(payload.length, 1);
    frame.set(payload, FRAME_HEADER_BYTES);
    this.stream.respond(
      { ":status": 200, "content-type": "application/grpc", "grpc-accept-encoding": "identity" },
      { waitForTrailers: true },
    );
    this.stream.once("wantTrailers", () =>
      this.stream.sendTrailers({ "grpc-status": String(GrpcStatus.OK), "grpc-message": "OK" }),
    );
    this.stream.end(frame);
  }

  /** A status other than OK, as a trailers-only response. */
  fail(status: number, message: string): void {
    if (!this.settle()) return;
    this.stream.respond(
      {
        ":status": 200,
        "content-type": "application/grpc",
        "grpc-status": String(status),
        "grpc-message": percentEncode(message),
      },
      { endStream: true },
    );
  }

  /** True the first time, while the stream can still be answered. */
  private settle(): boolean {
    if (this.done) return false;
    this.done = true;
    clearTimeout(this.deadline);
    return !this.stream.closed && !this.stream.destroyed && !this.stream.headersSent;
  }
}

/**
 * Reads the request's one message; `done` gets its bytes, or a status saying why
 * there are none (too large, compressed, not exactly one message).
 */
function readMessage(
  stream: http2.ServerHttp2Stream,
  maxBytes: number,
  done: (status: number, message: string, bytes?: Uint8Array) => void,
): void {
  const chunks: Buffer[] = [];
  let size = 0;
  let headChecked = false;
  let refused = false;
  // Once refused, the rest of the body is read and dropped: the answer is already on its way.
  const refuse = (status: number, message: string) => {
    refused = true;
    chunks.length = 0;
    done(status, message);
  };
  stream.on("data", (chunk: Buffer) => {
    if (refused) return;
    chunks.push(chunk);
    size += chunk.length;
    if (size > FRAME_HEADER_BYTES + maxBytes)
      return refuse(GrpcStatus.RESOURCE_EXHAUSTED, `a request body over ${maxBytes} bytes`);
    if (headChecked || size < FRAME_HEADER_BYTES) return;
    headChecked = true;
    const head = chunks.length === 1 ? chunk : Buffer.concat(chunks);
    const length = head.readUInt32BE(1);
    if (length > maxBytes)
      refuse(
        GrpcStatus.RESOURCE_EXHAUSTED,
        `Received message larger than max (${length} vs. ${maxBytes})`,
      );
    else if (head[0] !== 0)
      refuse(GrpcStatus.INTERNAL, "a compressed message, but no grpc-encoding was agreed");
  });
  stream.once("end", () => {
    if (refused) return;
    const body = Buffer.concat(chunks, size);
    if (body.length < FRAME_HEADER_BYTES)
      return done(GrpcStatus.INTERNAL, "the request carried no message");
    const length = body.readUInt32BE(1);
    if (body.length !== FRAME_HEADER_BYTES + length)
      return done(GrpcStatus.INTERNAL, "a unary request carries exactly one message");
    done(GrpcStatus.OK, "", body.subarray(FRAME_HEADER_BYTES));
  });
}

/** Not a gRPC request at all: a plain HTTP status, as the protocol asks. */
function plainHttp(stream: http2.ServerHttp2Stream, status: number): void {
  if (!stream.closed && !stream.headersSent)
    stream.respond({ ":status": status }, { endStream: true });
}

const TIMEOUT_UNIT_MS: Record<string, number> = {
  H: 3_600_000,
  M: 60_000,
  S: 1_000,
  m: 1,
  u: 0.001,
  n: 0.000_001,
};

/** `grpc-timeout` ("5S", "120000m", at most 8 digits and a unit) in ms; undefined without one. */
// Exported for its tests only (unit/grpc-unary-server.test.ts).
export function parseTimeoutMs(value: string | string[] | undefined): number | undefined {
  const m = typeof value === "string" ? /^(\d{1,8})([HMSmun])$/.exec(value) : null;
  if (!m) return undefined;
  return Math.ceil(Number(m[1]) * (TIMEOUT_UNIT_MS[m[2] as string] as number));
}

/** grpc-message: UTF-8, with every byte outside printable ASCII, and '%', as %XX. */
// Exported for its tests only (unit/grpc-unary-server.test.ts).
export function percentEncode(text: string): string {
  let out = "";
  for (const b of Buffer.from(text, "utf8"))
    out +=
      b >= 0x20 && b <= 0x7e && b !== 0x25
        ? String.fromCharCode(b)
        : `%${b.toString(16).toUpperCase().padStart(2, "0")}`;
  return out;
}
