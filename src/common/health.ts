/**
 * The health endpoint on `--health-addr`: `/livez`, `/readyz` and `/metrics` for the
 * kubelet's probes and for Prometheus. Plain node:http; GET and HEAD only.
 */

import type * as Http from "node:http";
import net from "node:net";
import { messageOf } from "./errors.js";
import { http } from "./node-http.js";
import { METRICS_CONTENT_TYPE } from "./prometheus.js";

// Exported for its tests only (integration/health.test.ts).
export interface HealthChecks {
  /** Liveness: the driver passes a function that dials its gRPC socket. */
  live: () => Promise<{ ok: boolean; reason?: string }>;
  /** Readiness: config loaded, plumbing ready, not shutting down. */
  ready: () => { ok: boolean; reasons: string[] };
  /** The Prometheus text exposition of the daemon's registry. */
  metrics: () => Promise<string>;
}

export interface HealthServer {
  /** The bound "host:port" (port 0 resolved); "" when the server is disabled. */
  address: string;
  /** Stops listening and drops open connections, keep-alive ones included. */
  close(): Promise<void>;
}

interface ListenAddr {
  /** undefined: every interface. */
  host: string | undefined;
  port: number;
}

/**
 * Parses `--health-addr`: "host:port", "[v6]:port", ":port" (every interface), or ""
 * (disabled: returns undefined). Throws on anything else, so a typo fails at start
 * rather than leaving the probes without an endpoint.
 */
// Exported for its tests only (integration/health.test.ts).
export function parseHealthAddr(addr: string): ListenAddr | undefined {
  if (addr === "") return undefined;
  const m = /^(?:\[([^\]]+)\]|([^:[\]]*)):(\d{1,5})$/.exec(addr);
  if (!m) throw new Error(`invalid health address ${JSON.stringify(addr)}: want host:port`);
  const port = Number(m[3]);
  if (port > 65535) throw new Error(`invalid health address ${JSON.stringify(addr)}: bad port`);
  const host = m[1] ?? m[2];
  return { host: host === "" ? undefined : host, port };
}

function formatAddress(host: string, port: number): string {
  return host.includes(":") ? `[${host}]:${port}` : `${host}:${port}`;
}

function send(
  res: Http.ServerResponse,
  status: number,
  body: string,
  contentType = "text/plain; charset=utf-8",
  extra: Record<string, string> = {},
): void {
  res.writeHead(status, {
    "Content-Type": contentType,
    "Content-Length": Buffer.byteLength(body),
    "Cache-Control": "no-store",
    ...extra,
  });
  // Node leaves the body out of a HEAD response by itself; the headers stay identical.
  res.end(body);
}

async function handle(
  checks: HealthChecks,
  req: Http.IncomingMessage,
  res: Http.ServerResponse,
): Promise<void> {
  const path = (req.url ?? "/").split("?", 1)[0];
  const known = path === "/livez" || path === "/readyz" || path === "/metrics";
  if (!known) return send(res, 404, "not found\n");
  if (req.method !== "GET" && req.method !== "HEAD") {
    return send(res, 405, "method not allowed\n", undefined, { Allow: "GET, HEAD" });
  }
  switch (path) {
    case "/livez": {
      const r = await checks.live();
      return r.ok ? send(res, 200, "ok\n") : send(res, 503, `${r.reason ?? "not live"}\n`);
    }
    case "/readyz": {
      const r = checks.ready();
      if (r.ok) return send(res, 200, "ok\n");
      const reasons = r.reasons.length > 0 ? r.reasons : ["not ready"];
      return send(res, 503, `${reasons.join("\n")}\n`);
    }
    default:
      return send(res, 200, await checks.metrics(), METRICS_CONTENT_TYPE);
  }
}

/** Starts the health server; with addr "" nothing listens and close() does nothing. */
export async function startHealthServer(addr: string, checks: HealthChecks): Promise<HealthServer> {
  const where = parseHealthAddr(addr);
  if (where === undefined) return { address: "", close: async () => {} };

  const server = http.createServer((req, res) => {
    handle(checks, req, res).catch((err: unknown) => {
      // A throwing check is a failing check, not a crashed daemon.
      const msg = messageOf(err);
      if (!res.headersSent) send(res, 503, `${msg}\n`);
      else res.destroy();
    });
  });
  // Probes are tiny; do not let a slow client hold a socket for long.
  server.headersTimeout = 5_000;
  server.requestTimeout = 10_000;

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen({ host: where.host, port: where.port }, () => {
      server.off("error", reject);
      resolve();
    });
  });

  const bound = server.address() as net.AddressInfo;
  return {
    address: formatAddress(bound.address, bound.port),
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((err) => (err ? reject(err) : resolve()));
        // Prometheus and kubelet keep connections alive; close() alone would wait on them.
        server.closeAllConnections();
      }),
  };
}

/**
 * Connects to a unix socket and hangs up at once. Liveness dials the socket rather
 * than asking the process, because a socket file deleted under a running daemon
 * leaves every runtime unable to reach it while the process itself looks healthy
 * (Kube-OVN #5836); a failed dial lets the kubelet restart the pod, which re-creates it.
 */
export function dialUnixSocket(
  path: string,
  timeoutMs: number,
): Promise<{ ok: boolean; reason?: string; errno?: string }> {
  return new Promise((resolve) => {
    let settled = false;
    const finish = (r: { ok: boolean; reason?: string; errno?: string }): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      sock.destroy();
      resolve(r);
    };
    const sock = net.createConnection({ path });
    const timer = setTimeout(
      () => finish({ ok: false, reason: `dial ${path}: timed out after ${timeoutMs} ms` }),
      timeoutMs,
    );
    sock.once("connect", () => finish({ ok: true }));
    sock.once("error", (err: NodeJS.ErrnoException) =>
      finish({
        ok: false,
        reason: `dial ${path}: ${err.code ?? err.message}`,
        ...(err.code ? { errno: err.code } : {}),
      }),
    );
  });
}
