/**
 * One unary gRPC call to a server on a unix socket, over a minimal HTTP/2 client
 * written on node:net (gRPC over HTTP/2: a POST to /<package>.<Service>/<Method>,
 * content-type application/grpc, each message behind a 5-byte prefix — a
 * compression flag and a big-endian length — and the status in the trailers, or
 * in the headers of a trailers-only answer). A gRPC library costs the shim
 * 50–100 ms at every exec, and node:http2 alone (which loads tls, crypto and
 * http with it) ~18 ms; node:net is most of what this costs.
 *
 * The client opens one connection for one stream (id 1) and speaks just enough
 * HTTP/2 (RFC 9113) for it: the preface, its SETTINGS (no push; the largest
 * receive windows, so the server is never held up and no WINDOW_UPDATE is ever
 * owed), the request as HEADERS (+ CONTINUATION) and DATA frames within the
 * server's flow-control windows, ACKs for the server's SETTINGS and PINGs; it
 * reads HEADERS, CONTINUATION, DATA, RST_STREAM, GOAWAY and WINDOW_UPDATE, skips
 * PRIORITY and frame types it does not know, and treats anything else as the
 * connection error it is. Header blocks go through hpack.ts.
 *
 * Failures come back as gRPC statuses, whatever their source (socket, HTTP/2,
 * server), so the caller maps one thing to CNI errors.
 */
import { connect } from "node:net";
import { GrpcStatus } from "../wire/grpc-status.js";
import { encodeHeaderBlock, type HeaderField, HpackDecoder } from "./hpack.js";

export interface UnaryCall {
  socketPath: string;
  /** The HTTP/2 path, e.g. "/cnidriver.v1.CNIDriver/SetUpPod". */
  path: string;
  /** The serialized request message. */
  request: Uint8Array;
  /** The call's deadline from now; also sent to the server as grpc-timeout. */
  timeoutMs: number;
  /**
   * How long the server may take to open the HTTP/2 session (its SETTINGS frame).
   * A process that holds the socket but does not answer (stopped, wedged) counts as
   * unavailable after this, rather than after the whole deadline.
   */
  connectTimeoutMs?: number;
  /** The largest response body accepted; 4 MiB by default (grpc-js's default limit). */
  maxResponseBytes?: number;
}

export type UnaryOutcome =
  | { ok: true; response: Uint8Array }
  | {
      ok: false;
      status: number;
      message: string;
      /** Whether the server's HTTP/2 session was up: the request may have reached it. */
      connected: boolean;
    };

const DEFAULT_MAX_RESPONSE = 4 * 1024 * 1024;

const PREFACE = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const FRAME_HEADER_BYTES = 9;

/** Frame types (RFC 9113 §6). */
const DATA = 0x0;
const HEADERS = 0x1;
const RST_STREAM = 0x3;
const SETTINGS = 0x4;
const PUSH_PROMISE = 0x5;
const PING = 0x6;
const GOAWAY = 0x7;
const WINDOW_UPDATE = 0x8;
const CONTINUATION = 0x9;

/** Frame flags. */
const END_STREAM = 0x1;
const ACK = 0x1;
const END_HEADERS = 0x4;
const PADDED = 0x8;
const PRIORITY_FLAG = 0x20;

/** SETTINGS parameters (RFC 9113 §6.5.2). */
const SETTINGS_ENABLE_PUSH = 0x2;
const SETTINGS_INITIAL_WINDOW_SIZE = 0x4;

/** Error codes of RST_STREAM and GOAWAY (RFC 9113 §7). */
const Http2ErrorCode = { NO_ERROR: 0, REFUSED_STREAM: 0x7, CANCEL: 0x8 } as const;

/** Our one stream: the first a client opens. */
const STREAM = 1;
/**
 * SETTINGS_MAX_FRAME_SIZE's default, which we keep: the largest frame we accept,
 * and the largest we send (no server may ask for less).
 */
const MAX_FRAME = 16_384;
const DEFAULT_WINDOW = 65_535;
const MAX_WINDOW = 2 ** 31 - 1;
/** Our bound on one header block (HEADERS + CONTINUATION), compressed. */
const MAX_HEADER_BLOCK = 64 * 1024;

function frame(type: number, flags: number, streamId: number, payload: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(FRAME_HEADER_BYTES + payload.length);
  out.writeUIntBE(payload.length, 0, 3);
  out[3] = type;
  out[4] = flags;
  out.writeUInt32BE(streamId, 5);
  out.set(payload, FRAME_HEADER_BYTES);
  return out;
}

function settingsPayload(settings: ReadonlyArray<readonly [number, number]>): Buffer {
  const out = Buffer.allocUnsafe(6 * settings.length);
  settings.forEach(([id, value], i) => {
    out.writeUInt16BE(id, 6 * i);
    out.writeUInt32BE(value, 6 * i + 2);
  });
  return out;
}

function uint31(value: number): Buffer {
  const out = Buffer.allocUnsafe(4);
  out.writeUInt32BE(value, 0);
  return out;
}

/** HEADERS then CONTINUATION frames as needed, END_HEADERS on the last. */
function headerFrames(block: Buffer, flags: number): Buffer[] {
  const frames: Buffer[] = [];
  for (let at = 0; at === 0 || at < block.length; at += MAX_FRAME) {
    const last = at + MAX_FRAME >= block.length;
    frames.push(
      frame(
        at === 0 ? HEADERS : CONTINUATION,
        (at === 0 ? flags : 0) | (last ? END_HEADERS : 0),
        STREAM,
        block.subarray(at, at + MAX_FRAME),
      ),
    );
  }
  return frames;
}

/** The payload of a frame that may be PADDED (DATA, HEADERS), without its padding. */
function unpad(flags: number, payload: Buffer, skip = 0): Buffer | undefined {
  if (!(flags & PADDED)) return payload.length < skip ? undefined : payload.subarray(skip);
  const padLength = payload[0] ?? 0;
  const end = payload.length - padLength;
  if (payload.length < 1 || end < 1 + skip) return undefined;
  return payload.subarray(1 + skip, end);
}

/** gRPC's mapping of HTTP statuses that are not 200 (grpc/doc/http-grpc-status-mapping.md). */
function statusFromHttp(httpStatus: number): number {
  switch (httpStatus) {
    case 400:
      return GrpcStatus.INTERNAL;
    case 401:
      return GrpcStatus.UNAUTHENTICATED;
    case 403:
      return GrpcStatus.PERMISSION_DENIED;
    case 404:
      return GrpcStatus.UNIMPLEMENTED;
    case 429:
    case 502:
    case 503:
    case 504:
      return GrpcStatus.UNAVAILABLE;
    default:
      return GrpcStatus.UNKNOWN;
  }
}

/** grpc-message is percent-encoded (gRPC over HTTP/2, "Status-Message"). */
function decodeGrpcMessage(value: string | undefined): string {
  if (value === undefined) return "";
  try {
    return decodeURIComponent(value);
  } catch {
    return value;
  }
}

function header(fields: readonly HeaderField[] | undefined, name: string): string | undefined {
  return fields?.find(([n]) => n === name)?.[1];
}

/** The single message of a unary response body, or why there is none. */
function unframe(body: Buffer): Uint8Array | string {
  if (body.length < 5) return "the response holds no message";
  if (body[0] !== 0) return "the response message is compressed, and none was accepted";
  const len = body.readUInt32BE(1);
  if (body.length !== 5 + len) return "the response is not exactly one message";
  return body.subarray(5);
}

function grpcFrame(message: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(5 + message.length);
  out[0] = 0;
  out.writeUInt32BE(message.length, 1);
  out.set(message, 5);
  return out;
}

/** What makes the connection unusable (RFC 9113 §5.4.1), when a frame does. */
type Problem = string | undefined;

/** Makes one unary call; never rejects. */
export function unaryCall(call: UnaryCall): Promise<UnaryOutcome> {
  return new Promise((resolve) => {
    let settled = false;
    let connected = false;
    const socket = connect(call.socketPath);

    const settle = (outcome: UnaryOutcome): void => {
      if (settled) return;
      settled = true;
      clearTimeout(deadline);
      clearTimeout(connectTimer);
      if (outcome.ok) socket.end();
      else socket.destroy();
      resolve(outcome);
    };
    const fail = (status: number, message: string): void =>
      settle({ ok: false, status, message, connected });
    /** Whatever breaks the connection (RFC 9113 §5.4.1): the server is not usable. */
    const connectionError = (what: string): void =>
      fail(GrpcStatus.UNAVAILABLE, `HTTP/2 protocol error: ${what}`);

    const deadline = setTimeout(
      () => fail(GrpcStatus.DEADLINE_EXCEEDED, `no answer within ${call.timeoutMs} ms`),
      call.timeoutMs,
    );
    const connectTimer =
      call.connectTimeoutMs === undefined
        ? undefined
        : setTimeout(() => {
            if (!connected) {
              fail(
                GrpcStatus.UNAVAILABLE,
                `the server did not open an HTTP/2 session within ${call.connectTimeoutMs} ms`,
              );
            }
          }, call.connectTimeoutMs);

    // --- The request: everything up to the flow-control windows goes in one write.
    const body = grpcFrame(call.request);
    let bodySent = 0;
    /** What the server lets us send: on the connection, and on the stream. */
    let connectionWindow = DEFAULT_WINDOW;
    let streamWindow = DEFAULT_WINDOW;
    let serverInitialWindow = DEFAULT_WINDOW;

    const dataFrames = (): Buffer[] => {
      const frames: Buffer[] = [];
      while (bodySent < body.length) {
        const n = Math.min(body.length - bodySent, MAX_FRAME, connectionWindow, streamWindow);
        if (n <= 0) break;
        const last = bodySent + n === body.length;
        frames.push(
          frame(DATA, last ? END_STREAM : 0, STREAM, body.subarray(bodySent, bodySent + n)),
        );
        bodySent += n;
        connectionWindow -= n;
        streamWindow -= n;
      }
      return frames;
    };

    const requestHeaders: HeaderField[] = [
      [":method", "POST"],
      [":scheme", "http"],
      [":path", call.path],
      [":authority", "localhost"],
      ["content-type", "application/grpc"],
      ["te", "trailers"],
      ["grpc-timeout", `${Math.max(1, Math.min(99_999_999, Math.ceil(call.timeoutMs)))}m`],
      ["grpc-accept-encoding", "identity"],
      ["user-agent", "cni-driver-shim"],
    ];
    socket.write(
      Buffer.concat([
        Buffer.from(PREFACE, "latin1"),
        frame(
          SETTINGS,
          0,
          0,
          settingsPayload([
            [SETTINGS_ENABLE_PUSH, 0],
            [SETTINGS_INITIAL_WINDOW_SIZE, MAX_WINDOW],
          ]),
        ),
        frame(WINDOW_UPDATE, 0, 0, uint31(MAX_WINDOW - DEFAULT_WINDOW)),
        ...headerFrames(encodeHeaderBlock(requestHeaders), 0),
        ...dataFrames(),
      ]),
    );
    const sendMore = (): void => {
      const frames = dataFrames();
      if (frames.length > 0) socket.write(Buffer.concat(frames));
    };

    // --- The response.
    const hpack = new HpackDecoder();
    let headers: HeaderField[] | undefined;
    let trailers: HeaderField[] | undefined;
    const chunks: Buffer[] = [];
    let size = 0;
    const max = call.maxResponseBytes ?? DEFAULT_MAX_RESPONSE;
    /** A header block still waiting for its CONTINUATION frames. */
    let block: { parts: Buffer[]; size: number; endStream: boolean } | undefined;

    /** The stream is over: the answer is in what came. */
    const finish = (): void => {
      const httpStatus = Number(header(headers, ":status"));
      const statusText = header(trailers, "grpc-status") ?? header(headers, "grpc-status");
      const message = decodeGrpcMessage(
        header(trailers, "grpc-message") ?? header(headers, "grpc-message"),
      );
      if (statusText === undefined) {
        if (httpStatus !== 200) {
          fail(statusFromHttp(httpStatus), `HTTP status ${httpStatus}`);
        } else fail(GrpcStatus.UNKNOWN, "the server sent no grpc-status");
        return;
      }
      const status = Number(statusText);
      if (status !== GrpcStatus.OK) {
        fail(Number.isInteger(status) ? status : GrpcStatus.UNKNOWN, message);
        return;
      }
      const response = unframe(Buffer.concat(chunks));
      if (typeof response === "string") fail(GrpcStatus.INTERNAL, response);
      else settle({ ok: true, response });
    };

    const onHeaderBlock = (fragment: Buffer, endStream: boolean): Problem => {
      let fields: HeaderField[];
      try {
        fields = hpack.decode(fragment);
      } catch (err) {
        return `an unreadable header block (${(err as Error).message})`;
      }
      if (!headers) {
        // An informational (1xx) answer comes before the real one.
        if (header(fields, ":status")?.startsWith("1") && !endStream) return;
        headers = fields;
      } else if (!endStream) {
        return "a second header block that does not end the stream";
      } else trailers = fields;
      if (endStream) finish();
    };

    /** A RST_STREAM on our stream. */
    const onReset = (code: number): void => {
      if (headers) {
        if (code === Http2ErrorCode.NO_ERROR) finish();
        else fail(GrpcStatus.UNAVAILABLE, `the stream was reset (HTTP/2 error code ${code})`);
      } else if (code === Http2ErrorCode.REFUSED_STREAM) {
        // The call never started.
        fail(GrpcStatus.UNAVAILABLE, "the server refused the stream");
      } else if (code === Http2ErrorCode.CANCEL) {
        fail(GrpcStatus.CANCELLED, "the server cancelled the call");
      } else fail(GrpcStatus.UNAVAILABLE, `the stream closed without an answer (RST code ${code})`);
    };

    const onSettings = (flags: number, payload: Buffer): Problem => {
      if (flags & ACK) return;
      if (payload.length % 6 !== 0) return "a SETTINGS frame of a bad size";
      for (let at = 0; at < payload.length; at += 6) {
        if (payload.readUInt16BE(at) !== SETTINGS_INITIAL_WINDOW_SIZE) continue;
        const value = payload.readUInt32BE(at + 2);
        if (value > MAX_WINDOW) return "SETTINGS_INITIAL_WINDOW_SIZE too large";
        // The change applies to the window of a stream already open (§6.9.2).
        streamWindow += value - serverInitialWindow;
        serverInitialWindow = value;
      }
      connected = true;
      socket.write(frame(SETTINGS, ACK, 0, Buffer.alloc(0)));
      sendMore();
    };

    const onWindowUpdate = (streamId: number, payload: Buffer): Problem => {
      if (payload.length !== 4) return "a WINDOW_UPDATE frame of a bad size";
      const increment = payload.readUInt32BE(0) & 0x7fffffff;
      if (increment === 0) return "a WINDOW_UPDATE of 0";
      if (streamId === 0) connectionWindow += increment;
      else if (streamId === STREAM) streamWindow += increment;
      if (connectionWindow > MAX_WINDOW || streamWindow > MAX_WINDOW) {
        return "a flow-control window above 2^31-1";
      }
      sendMore();
    };

    /** One whole frame, in the order the server sent it. */
    const onFrame = (type: number, flags: number, streamId: number, payload: Buffer): Problem => {
      if (block && type !== CONTINUATION) {
        return "a header block interrupted by another frame";
      }
      switch (type) {
        case DATA: {
          if (streamId !== STREAM || !headers) return "DATA out of place";
          const data = unpad(flags, payload);
          if (!data) return "bad padding";
          size += data.length;
          if (size > max + 5) {
            fail(GrpcStatus.RESOURCE_EXHAUSTED, `the response is larger than ${max} bytes`);
            return;
          }
          chunks.push(data);
          if (flags & END_STREAM) finish();
          return;
        }
        case HEADERS: {
          if (streamId !== STREAM) return "HEADERS on a stream we did not open";
          const fragment = unpad(flags, payload, flags & PRIORITY_FLAG ? 5 : 0);
          if (!fragment) return "bad padding";
          const endStream = (flags & END_STREAM) !== 0;
          if (flags & END_HEADERS) return onHeaderBlock(fragment, endStream);
          block = { parts: [fragment], size: fragment.length, endStream };
          return;
        }
        case CONTINUATION: {
          if (!block || streamId !== STREAM) return "CONTINUATION out of place";
          block.parts.push(payload);
          block.size += payload.length;
          if (block.size > MAX_HEADER_BLOCK) return "a header block too large";
          if (flags & END_HEADERS) {
            const done = block;
            block = undefined;
            return onHeaderBlock(Buffer.concat(done.parts), done.endStream);
          }
          return;
        }
        case RST_STREAM:
          if (payload.length !== 4) return "a RST_STREAM frame of a bad size";
          if (streamId === STREAM) onReset(payload.readUInt32BE(0));
          return;
        case SETTINGS:
          if (streamId !== 0) return "SETTINGS on a stream";
          return onSettings(flags, payload);
        case PING:
          if (streamId !== 0 || payload.length !== 8) return "a bad PING";
          if (!(flags & ACK)) socket.write(frame(PING, ACK, 0, payload));
          return;
        case GOAWAY: {
          if (payload.length < 8) return "a GOAWAY frame of a bad size";
          // Streams up to the last id may still be answered; ours is 1.
          const lastStreamId = payload.readUInt32BE(0) & 0x7fffffff;
          if (lastStreamId < STREAM) {
            fail(
              GrpcStatus.UNAVAILABLE,
              `the server closed the connection before the call (GOAWAY, HTTP/2 error code ${payload.readUInt32BE(4)})`,
            );
          }
          return;
        }
        case WINDOW_UPDATE:
          return onWindowUpdate(streamId, payload);
        case PUSH_PROMISE:
          return "PUSH_PROMISE, which our SETTINGS disabled";
        default:
          // PRIORITY, and frame types this client does not know: ignored (§4.1, §5.5).
          return;
      }
    };

    let pending: Buffer = Buffer.alloc(0);
    socket.on("data", (chunk: Buffer) => {
      pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
      while (!settled && pending.length >= FRAME_HEADER_BYTES) {
        const length = pending.readUIntBE(0, 3);
        if (length > MAX_FRAME) return connectionError(`a frame of ${length} bytes`);
        if (pending.length < FRAME_HEADER_BYTES + length) return;
        const payload = pending.subarray(FRAME_HEADER_BYTES, FRAME_HEADER_BYTES + length);
        const type = pending[3] as number;
        const flags = pending[4] as number;
        const streamId = pending.readUInt32BE(5) & 0x7fffffff;
        pending = pending.subarray(FRAME_HEADER_BYTES + length);
        const problem = onFrame(type, flags, streamId, payload);
        if (problem !== undefined) connectionError(problem);
      }
    });
    socket.on("error", (err: Error) => fail(GrpcStatus.UNAVAILABLE, err.message));
    socket.on("close", () =>
      fail(GrpcStatus.UNAVAILABLE, "the connection closed before the server answered"),
    );
  });
}
