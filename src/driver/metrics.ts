/**
 * The driver's metrics: a small fixed registry rendered in the Prometheus text
 * exposition format 0.0.4. The set of series is known in advance, so a general client
 * library would only add weight to a daemon that runs on every node.
 */

import { ErrorCode } from "../cni/errors.js";
import {
  DURATION_BUCKETS,
  escapeHelp,
  escapeLabelValue,
  formatValue,
} from "../common/prometheus.js";
import type { ClusterNetworkMetrics, ClusterNetworkOutcome } from "./cluster-network/reconciler.js";
import type { AnnotationWriteOutcome, PodAnnotationMetrics } from "./kube/pod-annotations.js";
import type { PodEventMetrics, PodEventOutcome } from "./kube/pod-events.js";
import type { NodeConnectivityMetrics, NodeLinkOutcome } from "./midonet-node/node-connectivity.js";

type Labels = Readonly<Record<string, string>>;

interface HistogramSeries {
  /** Cumulative: counts[i] is the number of observations <= DURATION_BUCKETS[i]. */
  counts: number[];
  sum: number;
  count: number;
}

function renderLabels(labels: Labels): string {
  const parts = Object.entries(labels).map(([k, v]) => `${k}="${escapeLabelValue(v)}"`);
  return parts.length === 0 ? "" : `{${parts.join(",")}}`;
}

/** A map key for a label set; NUL cannot appear in a verb or a code. */
function keyOf(values: readonly string[]): string {
  return values.join("\u0000");
}

/** Series of one family, rendered in key order so a scrape's output is stable. */
function sortedEntries<T>(m: Map<string, T>): [string, T][] {
  return [...m.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

/**
 * A counter per outcome, every known outcome present from the start (at 0) so
 * that rate() and absent-series alerts work before the first write.
 */
function outcomeCounters<T extends string>(known: readonly T[]): Map<T, number> {
  return new Map(known.map((o) => [o, 0]));
}

function count<T extends string>(m: Map<T, number>, outcome: T): void {
  m.set(outcome, (m.get(outcome) ?? 0) + 1);
}

export class Metrics
  implements NodeConnectivityMetrics, ClusterNetworkMetrics, PodAnnotationMetrics, PodEventMetrics
{
  private readonly calls = new Map<string, { labels: Labels; value: number }>();
  private readonly errors = new Map<string, { labels: Labels; value: number }>();
  private readonly durations = new Map<string, { labels: Labels; h: HistogramSeries }>();
  private attachments = 0;
  private reloads = 0;
  private reloadErrors = 0;
  private generation = 0;
  private ready = false;
  /** Undefined while no node link is planned (the series is then absent). */
  private nodeLinkReady: 0 | 1 | undefined;
  private nodeLinkFailures = 0;
  private nodeLinkRepairs = 0;
  private clusterRoutes = { "host-gw": 0, vxlan: 0 };
  private clusterUnrouted = 0;
  private readonly clusterRuns = outcomeCounters<ClusterNetworkOutcome>([
    "ok",
    "repaired",
    "failed",
  ]);
  private info: Labels | undefined;
  private readonly nodeAnnotationWrites = outcomeCounters<AnnotationWriteOutcome>([
    "ok",
    "retried",
    "dropped",
  ]);
  private readonly podAnnotationPatches = outcomeCounters<AnnotationWriteOutcome>([
    "ok",
    "retried",
    "dropped",
    "gone",
  ]);
  private readonly podEvents = outcomeCounters<PodEventOutcome>(["created", "updated", "failed"]);

  /** Counts one served call and observes its latency; failures are also counted by code. */
  recordCall(verb: string, outcome: "ok" | "error", durationSeconds: number, code?: number): void {
    const callKey = keyOf([verb, outcome]);
    const c = this.calls.get(callKey) ?? { labels: { verb, outcome }, value: 0 };
    c.value += 1;
    this.calls.set(callKey, c);

    // A clock step can yield a negative or NaN duration; it still counts, as zero.
    const d = Number.isFinite(durationSeconds) && durationSeconds > 0 ? durationSeconds : 0;
    const hKey = keyOf([verb]);
    const series = this.durations.get(hKey) ?? {
      labels: { verb },
      h: { counts: DURATION_BUCKETS.map(() => 0), sum: 0, count: 0 },
    };
    DURATION_BUCKETS.forEach((le, i) => {
      if (d <= le) series.h.counts[i] = (series.h.counts[i] ?? 0) + 1;
    });
    series.h.sum += d;
    series.h.count += 1;
    this.durations.set(hKey, series);

    if (outcome === "error") {
      // An error without a CNI code is Go's catch-all, 999.
      const codeLabel = String(code ?? ErrorCode.Internal);
      const eKey = keyOf([verb, codeLabel]);
      const e = this.errors.get(eKey) ?? { labels: { verb, code: codeLabel }, value: 0 };
      e.value += 1;
      this.errors.set(eKey, e);
    }
  }

  setAttachments(n: number): void {
    this.attachments = n;
  }

  /** One config reload attempt: every attempt counts, a failed one also as an error. */
  configReloaded(ok: boolean): void {
    this.reloads += 1;
    if (!ok) this.reloadErrors += 1;
  }

  setConfigGeneration(n: number): void {
    this.generation = n;
  }

  setReady(ready: boolean): void {
    this.ready = ready;
  }

  /**
   * What this driver runs with: its version, the Node it runs on, and which way
   * pod plumbing, plugin execs and host-local go ("netlink"/"iproute2",
   * "native"/"node", "exec"/"in-process"), so a node that fell back to the
   * slower way, or runs another Node than the image's, shows in a query, not
   * only in its log.
   */
  setInfo(info: {
    version: string;
    node: string;
    plumbing: string;
    spawn: string;
    host_local: string;
  }): void {
    this.info = { ...info };
  }

  /** One application of the node link (a config load, a retry or a resync). */
  nodeLinkApplied(outcome: NodeLinkOutcome): void {
    this.nodeLinkReady = outcome === "none" ? undefined : outcome === "failed" ? 0 : 1;
    if (outcome === "failed") this.nodeLinkFailures += 1;
    if (outcome === "repaired") this.nodeLinkRepairs += 1;
  }

  /** One application of the cluster network; the counts when it worked. */
  clusterNetworkApplied(
    outcome: ClusterNetworkOutcome,
    state?: { hostGwRoutes: number; vxlanRoutes: number; unroutedNodes: number },
  ): void {
    count(this.clusterRuns, outcome);
    if (!state) return;
    this.clusterRoutes = { "host-gw": state.hostGwRoutes, vxlan: state.vxlanRoutes };
    this.clusterUnrouted = state.unroutedNodes;
  }

  nodeAnnotationWritten(outcome: AnnotationWriteOutcome): void {
    count(this.nodeAnnotationWrites, outcome);
  }

  podAnnotationPatched(outcome: AnnotationWriteOutcome): void {
    count(this.podAnnotationPatches, outcome);
  }

  podEventWritten(outcome: PodEventOutcome): void {
    count(this.podEvents, outcome);
  }

  /** The whole registry in text format 0.0.4, ending with a newline. */
  render(): string {
    const out: string[] = [];
    const family = (name: string, type: string, help: string): void => {
      out.push(`# HELP ${name} ${escapeHelp(help)}`, `# TYPE ${name} ${type}`);
    };
    const sample = (name: string, labels: Labels, value: number): void => {
      out.push(`${name}${renderLabels(labels)} ${formatValue(value)}`);
    };

    family("cni_driver_calls_total", "counter", "CNI calls served, by verb and outcome.");
    for (const [, c] of sortedEntries(this.calls)) {
      sample("cni_driver_calls_total", c.labels, c.value);
    }

    family("cni_driver_call_errors_total", "counter", "Failed CNI calls, by verb and CNI code.");
    for (const [, e] of sortedEntries(this.errors)) {
      sample("cni_driver_call_errors_total", e.labels, e.value);
    }

    const hist = "cni_driver_call_duration_seconds";
    family(hist, "histogram", "Latency of CNI calls, by verb.");
    for (const [, { labels, h }] of sortedEntries(this.durations)) {
      DURATION_BUCKETS.forEach((le, i) => {
        sample(`${hist}_bucket`, { ...labels, le: formatValue(le) }, h.counts[i] ?? 0);
      });
      sample(`${hist}_bucket`, { ...labels, le: "+Inf" }, h.count);
      sample(`${hist}_sum`, labels, h.sum);
      sample(`${hist}_count`, labels, h.count);
    }

    family("cni_driver_attachments", "gauge", "Pod attachments the driver currently holds.");
    sample("cni_driver_attachments", {}, this.attachments);

    family("cni_driver_config_reloads_total", "counter", "Network configuration reload attempts.");
    sample("cni_driver_config_reloads_total", {}, this.reloads);

    family(
      "cni_driver_config_reload_errors_total",
      "counter",
      "Configuration reloads rejected; the last good configuration stays in use.",
    );
    sample("cni_driver_config_reload_errors_total", {}, this.reloadErrors);

    family("cni_driver_config_generation", "gauge", "Generation of the configuration in use.");
    sample("cni_driver_config_generation", {}, this.generation);

    family("cni_driver_ready", "gauge", "1 when the driver is ready to serve calls, else 0.");
    sample("cni_driver_ready", {}, this.ready ? 1 : 0);

    if (this.info) {
      family(
        "cni_driver_info",
        "gauge",
        "Always 1: the driver's version, its Node.js version and the ways its pod plumbing, plugin execs and host-local go.",
      );
      sample("cni_driver_info", this.info, 1);
    }

    family(
      "cni_driver_node_link_ready",
      "gauge",
      "1 when the node link the midonet datapath needs is in place, 0 when setting it up failed; absent when no network uses the midonet datapath.",
    );
    if (this.nodeLinkReady !== undefined)
      sample("cni_driver_node_link_ready", {}, this.nodeLinkReady);

    family(
      "cni_driver_node_link_failures_total",
      "counter",
      "Failed applications of the node link (config loads, retries and resyncs).",
    );
    sample("cni_driver_node_link_failures_total", {}, this.nodeLinkFailures);

    family(
      "cni_driver_node_link_repairs_total",
      "counter",
      "Resyncs that found the node link, its address or a route changed or missing, and put it back.",
    );
    sample("cni_driver_node_link_repairs_total", {}, this.nodeLinkRepairs);

    family(
      "cni_driver_cluster_routes",
      "gauge",
      "Routes to other nodes' pod CIDRs the kernel datapath keeps, by how (host-gw, vxlan).",
    );
    for (const [via, n] of Object.entries(this.clusterRoutes))
      sample("cni_driver_cluster_routes", { via }, n);

    family(
      "cni_driver_cluster_unrouted_nodes",
      "gauge",
      "Other nodes (or families of theirs) whose pods are not routed to, each logged with the reason.",
    );
    sample("cni_driver_cluster_unrouted_nodes", {}, this.clusterUnrouted);

    const outcomes = <T extends string>(name: string, help: string, m: Map<T, number>): void => {
      family(name, "counter", help);
      for (const [outcome, n] of m) sample(name, { outcome }, n);
    };
    outcomes(
      "cni_driver_cluster_network_applications_total",
      "Applications of the kernel datapath's cluster network (routes, VXLAN, masquerade) by outcome: ok, repaired (a resync put back what someone removed), failed.",
      this.clusterRuns,
    );
    outcomes(
      "cni_driver_node_annotation_writes_total",
      "Writes of the Node's midonet.org/mac-address annotation (set, or removed with the node link), by outcome: ok, retried (failed, tried again), dropped (given up until the next config load).",
      this.nodeAnnotationWrites,
    );
    outcomes(
      "cni_driver_pod_annotation_patches_total",
      "Pod annotation patches, by outcome: ok, retried (failed, tried again), dropped (given up), gone (the pod no longer exists).",
      this.podAnnotationPatches,
    );
    outcomes(
      "cni_driver_pod_events_total",
      "Warning Events written on pods for failed SetUpPod, by outcome: created, updated (a repeat counted into an existing Event), failed (not retried).",
      this.podEvents,
    );

    return `${out.join("\n")}\n`;
  }
}
