/**
 * The socket's connection limits, on a listener of our own (each connection
 * holds a descriptor and an HTTP/2 session): at most `maxConnections` open
 * (one more is closed at once, and logged); one that has not sent the HTTP/2
 * preface within `prefaceTimeoutMs` is closed. Admitted connections go to
 * gRPC's connection injector.
 */
import type { Socket } from "node:net";
import type pino from "pino";

export interface ConnectionLimits {
  /** Connections open at once; one more is closed as soon as it is accepted. */
  maxConnections: number;
  /** A connection that has not sent the 24 bytes of the HTTP/2 preface by then is closed. */
  prefaceTimeoutMs: number;
  /** A connection with no call in flight for this long is closed. */
  idleTimeoutMs: number;
}

export const DEFAULT_CONNECTION_LIMITS: ConnectionLimits = {
  maxConnections: 256,
  prefaceTimeoutMs: 5_000,
  idleTimeoutMs: 120_000,
};

/** "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n": what an HTTP/2 client sends first. */
const HTTP2_PREFACE_BYTES = 24;
/** Refusals past the first are counted and logged at most this often, so a flood is a few lines. */
const REFUSAL_LOG_INTERVAL_MS = 10_000;

export class ConnectionGate {
  readonly open = new Set<Socket>();
  private refused = 0;
  private lastRefusalLog = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly limits: ConnectionLimits,
    private readonly logger: pino.Logger,
    private readonly inject: (socket: Socket) => void,
  ) {}

  admit(socket: Socket): void {
    socket.on("error", () => {}); // a peer gone mid-way; the session (if any) sees it too
    if (this.open.size >= this.limits.maxConnections) {
      socket.destroy();
      this.logRefusal();
      return;
    }
    this.open.add(socket);
    const preface = setTimeout(() => {
      if (socket.bytesRead < HTTP2_PREFACE_BYTES) socket.destroy();
    }, this.limits.prefaceTimeoutMs);
    preface.unref();
    socket.once("close", () => {
      clearTimeout(preface);
      this.open.delete(socket);
    });
    this.inject(socket);
  }

  private logRefusal(): void {
    this.refused++;
    const now = Date.now();
    if (now - this.lastRefusalLog < REFUSAL_LOG_INTERVAL_MS) return;
    this.logger.warn(
      { maxConnections: this.limits.maxConnections, open: this.open.size, refused: this.refused },
      `refused a connection: ${this.open.size} connections are open, the bound (--max-connections); ${this.refused} refused since the last such line`,
    );
    this.lastRefusalLog = now;
    this.refused = 0;
  }
}
