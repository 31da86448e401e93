/**
 * The MidoNet controller's metrics, in the Prometheus text format the driver's
 * /metrics speaks (same content type, escaping and value spelling: reused from
 * the driver's registry). A handful of series known in advance; labels are
 * kinds, operations and statuses, never object ids.
 */

import { DURATION_BUCKETS, escapeLabelValue, formatValue } from "../../common/prometheus.js";
import type { AttemptInfo, MidonetApiError } from "../api.js";
import type { ReconcilerObserver, WriteOp } from "../reconciler.js";
import type { ResourceKind } from "../resources.js";

type Labels = Readonly<Record<string, string>>;

interface Family {
  name: string;
  type: "counter" | "gauge";
  help: string;
  series: Map<string, { labels: Labels; value: number }>;
}

function renderLabels(labels: Labels): string {
  const parts = Object.entries(labels).map(([k, v]) => `${k}="${escapeLabelValue(v)}"`);
  return parts.length === 0 ? "" : `{${parts.join(",")}}`;
}

const keyOf = (labels: Labels): string =>
  Object.entries(labels)
    .map(([k, v]) => `${k}\u0000${v}`)
    .join("\u0001");

/** What an error is reported as: its HTTP status, or why no answer came. */
export function errorCode(err: unknown): string {
  const e = err as Partial<MidonetApiError> & { code?: unknown };
  if (typeof e?.status === "number" && e.status > 0) return String(e.status);
  if (typeof e?.reason === "string") return e.reason;
  if (typeof e?.code === "number") return String(e.code);
  return "error";
}

export class ControllerMetrics implements ReconcilerObserver {
  private readonly families = new Map<string, Family>();
  private readonly apiDurations = new Map<
    string,
    { method: string; counts: number[]; sum: number; count: number }
  >();

  constructor() {
    const declare = (name: string, type: Family["type"], help: string) =>
      this.families.set(name, { name, type, help, series: new Map() });
    declare("midonet_controller_leader", "gauge", "1 while this replica holds the lease.");
    declare(
      "midonet_controller_leader_transitions_total",
      "counter",
      "Times this replica started or stopped leading.",
    );
    declare("midonet_controller_ready", "gauge", "1 when the informers have synced.");
    declare(
      "midonet_controller_converged",
      "gauge",
      "1 when MidoNet holds the desired state (leader only).",
    );
    declare(
      "midonet_controller_desired_resources",
      "gauge",
      "MidoNet resources the cluster maps to.",
    );
    declare(
      "midonet_controller_pending_resources",
      "gauge",
      "Resources waiting for a write, a retry or a dependency.",
    );
    declare(
      "midonet_controller_held_resources",
      "gauge",
      "Resources held back until a dependency is mapped (a pod on an unmapped node).",
    );
    declare(
      "midonet_controller_mapping_warnings",
      "gauge",
      "Objects the mapping could not fully translate, by warning code.",
    );
    declare("midonet_controller_writes_total", "counter", "MidoNet writes done, by op and kind.");
    declare(
      "midonet_controller_errors_total",
      "counter",
      "Failed MidoNet operations (each retried with backoff), by op, kind and status.",
    );
    declare(
      "midonet_controller_drift_total",
      "counter",
      "Objects found differing in a way left alone, by kind.",
    );
    declare("midonet_controller_resyncs_total", "counter", "Full reads of MidoNet, by outcome.");
    declare(
      "midonet_controller_api_requests_total",
      "counter",
      "MidoNet REST attempts, by method and status (0: no answer).",
    );
    declare(
      "midonet_controller_node_annotations_total",
      "counter",
      "Node annotation patches, by outcome.",
    );
    declare(
      "midonet_controller_kube_errors_total",
      "counter",
      "Failed Kubernetes API operations, by operation.",
    );
    this.set("midonet_controller_leader", {}, 0);
    this.set("midonet_controller_ready", {}, 0);
    this.set("midonet_controller_converged", {}, 0);
  }

  inc(name: string, labels: Labels = {}, by = 1): void {
    const family = this.family(name);
    const key = keyOf(labels);
    const s = family.series.get(key) ?? { labels, value: 0 };
    s.value += by;
    family.series.set(key, s);
  }

  set(name: string, labels: Labels, value: number): void {
    this.family(name).series.set(keyOf(labels), { labels, value });
  }

  /** Replaces every series of a gauge family (a gauge by label that may lose labels). */
  replace(name: string, values: Iterable<[Labels, number]>): void {
    const family = this.family(name);
    family.series.clear();
    for (const [labels, value] of values) family.series.set(keyOf(labels), { labels, value });
  }

  /** The value of one series (tests, status). */
  value(name: string, labels: Labels = {}): number {
    return this.family(name).series.get(keyOf(labels))?.value ?? 0;
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
    const seconds = Math.max(0, a.durationMs / 1000);
    const h = this.apiDurations.get(a.method) ?? {
      method: a.method,
      counts: DURATION_BUCKETS.map(() => 0),
      sum: 0,
      count: 0,
    };
    DURATION_BUCKETS.forEach((le, i) => {
      if (seconds <= le) h.counts[i] = (h.counts[i] ?? 0) + 1;
    });
    h.sum += seconds;
    h.count += 1;
    this.apiDurations.set(a.method, h);
  }

  render(): string {
    const out: string[] = [];
    for (const f of this.families.values()) {
      out.push(`# HELP ${f.name} ${f.help}`, `# TYPE ${f.name} ${f.type}`);
      const series = [...f.series.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
      for (const [, s] of series)
        out.push(`${f.name}${renderLabels(s.labels)} ${formatValue(s.value)}`);
    }
    const hist = "midonet_controller_api_request_duration_seconds";
    out.push(
      `# HELP ${hist} Latency of MidoNet REST attempts, by method.`,
      `# TYPE ${hist} histogram`,
    );
    for (const h of [...this.apiDurations.values()].sort((a, b) =>
      a.method < b.method ? -1 : 1,
    )) {
      DURATION_BUCKETS.forEach((le, i) => {
        out.push(
          `${hist}_bucket${renderLabels({ method: h.method, le: formatValue(le) })} ${h.counts[i] ?? 0}`,
        );
      });
      out.push(`${hist}_bucket${renderLabels({ method: h.method, le: "+Inf" })} ${h.count}`);
      out.push(`${hist}_sum${renderLabels({ method: h.method })} ${formatValue(h.sum)}`);
      out.push(`${hist}_count${renderLabels({ method: h.method })} ${h.count}`);
    }
    return `${out.join("\n")}\n`;
  }

  private family(name: string): Family {
    const f = this.families.get(name);
    if (!f) throw new Error(`unknown metric ${name}`);
    return f;
  }
}
