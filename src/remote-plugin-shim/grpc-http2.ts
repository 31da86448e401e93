/**
 * One unary gRPC call over node:http2 to a server on a unix socket, framed by hand
 * (gRPC over HTTP/2: a POST to /<package>.<Service>/<Method>, content-type
 * application/grpc, each message behind a 5-byte prefix — a compression flag and a
 * big-endian length — and the status in the trailers, or in the headers of a
 * trailers-only answer). A gRPC library costs the shim 50–100 ms at every exec;
 * this costs a few.
 *
 * Failures come back as gRPC statuses, whatever their source (socket, HTTP/2,
 * server), so the caller maps one thing to CNI errors.
 */
import * as http2 from "node:http2";
import * as net from "node:net";
import { GrpcStatus } from "../wire/grpc-status.js";

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
function decodeGrpcMessage(value: unknown): string {
  if (typeof value !== "string") return "";
  try {
    return decodeURIComponent(value);
  } catch {
    return value;
  }
}

function header(h: http2.IncomingHttpHeaders | undefined, name: string): string | undefined {
  const v = h?.[name];
  return Array.isArray(v) ? v[0] : v;
}

/** The single message of a unary response body, or why there is none. */
function unframe(body: Buffer): Uint8Array | string {
  if (body.length < 5) return "the response holds no message";
  if (body[0] !== 0) return "the response message is compressed, and none was accepted";
  const len = body.readUInt32BE(1);
  if (body.length !== 5 + len) return "the response is not exactly one message";
  return body.subarray(5);
}

function frame(message: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(5 + message.length);
  out[0] = 0;
  out.writeUInt32BE(message.length, 1);
  out.set(message, 5);
  return out;
}

/** Makes one unary call; never rejects. */
export function unaryCall(call: UnaryCall): Promise<UnaryOutcome> {
  return new Promise((resolve) => {
    let settled = false;
    let connected = false;
    const session = http2.connect("http://localhost", {
      createConnection: () => net.connect(call.socketPath),
    });

    const settle = (outcome: UnaryOutcome): void => {
      if (settled) return;
      settled = true;
      clearTimeout(deadline);
      clearTimeout(connectTimer);
      if (outcome.ok) session.close();
      else session.destroy();
      resolve(outcome);
    };
    const fail = (status: number, message: string): void =>
      settle({ ok: false, status, message, connected });

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

    session.on("remoteSettings", () => {
      connected = true;
    });
    session.on("error", (err: NodeJS.ErrnoException) => fail(GrpcStatus.UNAVAILABLE, err.message));
    session.on("close", () => fail(GrpcStatus.UNAVAILABLE, "the connection closed"));

    const stream = session.request({
      ":method": "POST",
      ":path": call.path,
      "content-type": "application/grpc",
      te: "trailers",
      "grpc-timeout": `${Math.max(1, Math.min(99_999_999, Math.ceil(call.timeoutMs)))}m`,
      "grpc-accept-encoding": "identity",
      "user-agent": "cni-driver-shim",
    });

    let headers: http2.IncomingHttpHeaders | undefined;
    let trailers: http2.IncomingHttpHeaders | undefined;
    const chunks: Buffer[] = [];
    let size = 0;
    const max = call.maxResponseBytes ?? DEFAULT_MAX_RESPONSE;

    stream.on("response", (h) => {
      headers = h;
    });
    stream.on("trailers", (t) => {
      trailers = t;
    });
    stream.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > max + 5) {
        fail(GrpcStatus.RESOURCE_EXHAUSTED, `the response is larger than ${max} bytes`);
        return;
      }
      chunks.push(chunk);
    });
    // A stream cancelled because the connection failed carries that failure as its cause.
    stream.on("error", (err: Error) =>
      fail(GrpcStatus.UNAVAILABLE, err.cause instanceof Error ? err.cause.message : err.message),
    );
    stream.on("close", () => {
      if (settled) return;
      if (!headers) {
        // A connection that went away (or never came up) closes its streams with
        // CANCEL locally: that is an unavailable server, not a cancelled call.
        const rst = stream.rstCode;
        if (!connected || session.destroyed || session.closed)
          fail(GrpcStatus.UNAVAILABLE, "the connection closed before the server answered");
        // RST_STREAM from the server: REFUSED_STREAM means the call never started.
        else if (rst === http2.constants.NGHTTP2_REFUSED_STREAM)
          fail(GrpcStatus.UNAVAILABLE, "the server refused the stream");
        else if (rst === http2.constants.NGHTTP2_CANCEL)
          fail(GrpcStatus.CANCELLED, "the server cancelled the call");
        else fail(GrpcStatus.UNAVAILABLE, `the stream closed without an answer (RST code ${rst})`);
        return;
      }
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
    });

    stream.end(frame(call.request));
  });
}
