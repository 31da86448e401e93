/**
 * The MidoNet controller's metrics, through prom-client, as the driver's are. A
 * handful of families known in advance; labels are kinds, operations and statuses,
 * never object ids. The names and label names are what dashboards query.
 */

import {
  Counter,
  DURATION_BUCKETS,
  Gauge,
  Histogram,
  observableSeconds,
  Registry,
  withProcessMetrics,
} from "../../common/prometheus.js";
import type { AttemptInfo, MidonetApiError } from "../api.js";
import type { ReconcilerObserver, WriteOp } from "../reconciler.js";
import type { ResourceKind } from "../resources.js";

/** What an error is reported as: its HTTP status, or why no answer came. */
export function errorCode(err: unknown): string {
  const e = err as Partial<MidonetApiError> & { code?: unknown };
  if (typeof e?.status === "number" && e.status > 0) return String(e.status);
  if (typeof e?.reason === "string") return e.reason;
  if (typeof e?.code === "number") return String(e.code);
  return "error";
}

/** The controller's state the live gauges read at each scrape. */
interface ControllerGauges {
  /** MidoNet resources the cluster maps to. */
  desired: number;
  /** Leader only (0 otherwise): resources waiting for a write, a retry or a dependency. */
  pending: number;
  /** Leader only: resources held back until a dependency is mapped. */
  held: number;
  /** Leader only: MidoNet holds the desired state. */
  converged: boolean;
}

type Labels = Record<string, string>;

type Family =
  | { kind: "counter"; help: string; labelNames: readonly string[] }
  | { kind: "gauge"; help: string; labelNames: readonly string[] }
  /** Read from the controller's state at each scrape. */
  | { kind: "live"; help: string; read: (g: ControllerGauges) => number };

/** Every family, in the order a scrape lists them. */
const FAMILIES = {
  midonet_controller_leader: {
    kind: "gauge",
    help: "1 while this replica holds the lease.",
    labelNames: [],
  },
  midonet_controller_leader_transitions_total: {
    kind: "counter",
    help: "Times this replica started or stopped leading.",
    labelNames: ["to"],
  },
  midonet_controller_ready: {
    kind: "gauge",
    help: "1 when the informers have synced.",
    labelNames: [],
  },
  midonet_controller_converged: {
    kind: "live",
    help: "1 when MidoNet holds the desired state (leader only).",
    read: (g) => (g.converged ? 1 : 0),
  },
  midonet_controller_desired_resources: {
    kind: "live",
    help: "MidoNet resources the cluster maps to.",
    read: (g) => g.desired,
  },
  midonet_controller_pending_resources: {
    kind: "live",
    help: "Resources waiting for a write, a retry or a dependency.",
    read: (g) => g.pending,
  },
  midonet_controller_held_resources: {
    kind: "live",
    help: "Resources held back until a dependency is mapped (a pod on an unmapped node).",
    read: (g) => g.held,
  },
  midonet_controller_mapping_warnings: {
    kind: "gauge",
    help: "Objects the mapping could not fully translate, by warning code.",
    labelNames: ["code"],
  },
  midonet_controller_writes_total: {
    kind: "counter",
    help: "MidoNet writes done, by op and kind.",
    labelNames: ["op", "kind"],
  },
  midonet_controller_errors_total: {
    kind: "counter",
    help: "Failed MidoNet operations (each retried with backoff), by op, kind and status.",
    labelNames: ["op", "kind", "code"],
  },
  midonet_controller_drift_total: {
    kind: "counter",
    help: "Objects found differing in a way left alone, by kind.",
    labelNames: ["kind"],
  },
  midonet_controller_resyncs_total: {
    kind: "counter",
    help: "Full reads of MidoNet, by outcome.",
    labelNames: ["outcome"],
  },
  midonet_controller_api_requests_total: {
    kind: "counter",
    help: "MidoNet REST attempts, by method and status (0: no answer).",
    labelNames: ["method", "code"],
  },
  midonet_controller_node_annotations_total: {
    kind: "counter",
    help: "Node annotation patches, by outcome.",
    labelNames: ["outcome"],
  },
  midonet_controller_kube_errors_total: {
    kind: "counter",
    help: "Failed Kubernetes API operations, by operation.",
    labelNames: ["op", "code"],
  },
} as const satisfies Record<string, Family>;

type Families = typeof FAMILIES;
type NameOf<K extends Family["kind"]> = {
  [N in keyof Families]: Families[N]["kind"] extends K ? N : never;
}[keyof Families];

export class ControllerMetrics implements ReconcilerObserver {
  private readonly counters = new Map<string, Counter>();
  private readonly gauges = new Map<string, Gauge>();
  private readonly apiDurations: Histogram<"method">;
  private readonly exposed: Registry;

  /** `live` is read at each scrape, for the gauges that follow the controller's state. */
  constructor(live: () => ControllerGauges) {
    const own = new Registry();
    const registers = [own];
    for (const [name, f] of Object.entries(FAMILIES) as [string, Family][]) {
      if (f.kind === "counter") {
        this.counters.set(
          name,
          new Counter({ name, help: f.help, labelNames: f.labelNames, registers }),
        );
      } else if (f.kind === "gauge") {
        this.gauges.set(
          name,
          new Gauge({ name, help: f.help, labelNames: f.labelNames, registers }),
        );
      } else {
        const read = f.read;
        new Gauge({
          name,
          help: f.help,
          registers,
          collect() {
            this.set(read(live()));
          },
        });
      }
    }
    this.apiDurations = new Histogram({
      name: "midonet_controller_api_request_duration_seconds",
      help: "Latency of MidoNet REST attempts, by method.",
      labelNames: ["method"],
      buckets: [...DURATION_BUCKETS],
      registers,
    });
    this.exposed = withProcessMetrics(own);
  }

  inc(name: NameOf<"counter">, labels: Labels = {}, by = 1): void {
    (this.counters.get(name) as Counter).inc(labels, by);
  }

  set(name: NameOf<"gauge">, labels: Labels, value: number): void {
    (this.gauges.get(name) as Gauge).set(labels, value);
  }

  /** Replaces every series of a gauge family (a gauge by label that may lose labels). */
  replace(name: NameOf<"gauge">, values: Iterable<[Labels, number]>): void {
    const gauge = this.gauges.get(name) as Gauge;
    gauge.reset();
    for (const [labels, value] of values) gauge.set(labels, value);
  }

  // ReconcilerObserver
  write(op: WriteOp, kind: ResourceKind): void {
    this.inc("midonet_controller_writes_total", { op, kind });
  }

  failure(op: WriteOp | "read", kind: ResourceKind | undefined, error: unknown): void {
    this.inc("midonet_controller_errors_total", {
      op,
      kind: kind ?? "",
      code: errorCode(error),
    });
  }

  drift(kind: ResourceKind): void {
    this.inc("midonet_controller_drift_total", { kind });
  }

  /** The MidoNet client's onAttempt hook. */
  apiAttempt(a: AttemptInfo): void {
    this.inc("midonet_controller_api_requests_total", {
      method: a.method,
      code: String(a.status),
    });
    this.apiDurations.observe({ method: a.method }, observableSeconds(a.durationMs / 1000));
  }

  /** The text exposition (format 0.0.4) of the controller's series and the process's. */
  render(): Promise<string> {
    return this.exposed.metrics();
  }
}
