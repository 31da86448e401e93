/**
 * The health check node ports of `externalTrafficPolicy: Local` Services,
 * answered as kube-proxy answers them (pkg/proxy/healthcheck): any GET gets
 * 200 while this node has a local endpoint of the Service, 503 otherwise, with
 * `{"service": {"namespace", "name"}, "localEndpoints": N,
 * "serviceProxyHealthy": true}`. A load balancer sends its traffic only to the
 * nodes that answer 200.
 */
import type * as Http from "node:http";
import type pino from "pino";
import { http } from "../../common/node-http.js";

interface Listener {
  server: Http.Server;
  service: { namespace: string; name: string };
  localEndpoints: number;
}

export class HealthCheckPorts {
  private readonly byPort = new Map<number, Listener>();

  constructor(private readonly log: pino.Logger) {}

  /** What every port should answer now; ports not named stop listening. */
  update(
    wanted: ReadonlyMap<number, { namespace: string; name: string; localEndpoints: number }>,
  ): void {
    for (const [port, l] of this.byPort)
      if (!wanted.has(port)) {
        l.server.close();
        this.byPort.delete(port);
      }
    for (const [port, w] of wanted) {
      const l = this.byPort.get(port);
      if (l) {
        l.service = { namespace: w.namespace, name: w.name };
        l.localEndpoints = w.localEndpoints;
        continue;
      }
      this.listen(port, w);
    }
  }

  private listen(port: number, w: { namespace: string; name: string; localEndpoints: number }) {
    const l: Listener = {
      service: { namespace: w.namespace, name: w.name },
      localEndpoints: w.localEndpoints,
      server: http.createServer((_req, res) => {
        res.writeHead(l.localEndpoints > 0 ? 200 : 503, {
          "Content-Type": "application/json",
          "X-Content-Type-Options": "nosniff",
          "X-Load-Balancing-Endpoint-Weight": String(l.localEndpoints),
        });
        res.end(
          JSON.stringify({
            service: l.service,
            localEndpoints: l.localEndpoints,
            serviceProxyHealthy: true,
          }),
        );
      }),
    };
    l.server.on("error", (err) =>
      this.log.error(
        { port, service: `${w.namespace}/${w.name}`, err: err.message },
        "cannot answer the Service's health check node port",
      ),
    );
    l.server.listen(port);
    this.byPort.set(port, l);
  }

  close(): void {
    for (const l of this.byPort.values()) l.server.close();
    this.byPort.clear();
  }
}
