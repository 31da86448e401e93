/**
 * The driver's metrics, through prom-client. The names, label names and buckets are
 * what dashboards query: change none of them lightly.
 */

import { ErrorCode } from "../cni/errors.js";
import {
  Counter,
  DURATION_BUCKETS,
  Gauge,
  Histogram,
  observableSeconds,
  Registry,
  withProcessMetrics,
} from "../common/prometheus.js";
import type { ClusterNetworkMetrics, ClusterNetworkOutcome } from "./cluster-network/reconciler.js";
import type { AnnotationWriteOutcome, PodAnnotationMetrics } from "./kube/pod-annotations.js";
import type { PodEventMetrics, PodEventOutcome } from "./kube/pod-events.js";
import type { NodeConnectivityMetrics, NodeLinkOutcome } from "./midonet-node/node-connectivity.js";
import type { NetworkPolicyMetrics } from "./network-policy/enforcer.js";
import type { ServiceProxyMetrics } from "./services/proxy.js";

/**
 * A counter by outcome, every known outcome present from the start (at 0) so that
 * rate() and absent-series alerts work before the first write.
 */
function outcomeCounter<T extends string>(
  registry: Registry,
  name: string,
  help: string,
  known: readonly T[],
): Counter<"outcome"> {
  const c = new Counter({ name, help, labelNames: ["outcome"], registers: [registry] });
  for (const outcome of known) c.inc({ outcome }, 0);
  return c;
}

export class Metrics
  implements
    NodeConnectivityMetrics,
    ClusterNetworkMetrics,
    NetworkPolicyMetrics,
    ServiceProxyMetrics,
    PodAnnotationMetrics,
    PodEventMetrics
{
  /** This driver's series; what /metrics serves is `exposed`. */
  private readonly own = new Registry();
  private readonly calls = new Counter({
    name: "cni_driver_calls_total",
    help: "CNI calls served, by verb and outcome.",
    labelNames: ["verb", "outcome"],
    registers: [this.own],
  });
  private readonly errors = new Counter({
    name: "cni_driver_call_errors_total",
    help: "Failed CNI calls, by verb and CNI code.",
    labelNames: ["verb", "code"],
    registers: [this.own],
  });
  private readonly durations = new Histogram({
    name: "cni_driver_call_duration_seconds",
    help: "Latency of CNI calls, by verb.",
    labelNames: ["verb"],
    buckets: [...DURATION_BUCKETS],
    registers: [this.own],
  });
  private readonly attachments = new Gauge({
    name: "cni_driver_attachments",
    help: "Pod attachments the driver currently holds.",
    registers: [this.own],
  });
  private readonly reloads = new Counter({
    name: "cni_driver_config_reloads_total",
    help: "Network configuration reload attempts.",
    registers: [this.own],
  });
  private readonly reloadErrors = new Counter({
    name: "cni_driver_config_reload_errors_total",
    help: "Configuration reloads rejected; the last good configuration stays in use.",
    registers: [this.own],
  });
  private readonly generation = new Gauge({
    name: "cni_driver_config_generation",
    help: "Generation of the configuration in use.",
    registers: [this.own],
  });
  /** Whether the driver can serve ADD now; read at each scrape. */
  private isReady: () => boolean = () => false;
  private readonly ready: Gauge = new Gauge({
    name: "cni_driver_ready",
    help: "1 when the driver is ready to serve calls, else 0.",
    registers: [this.own],
    collect: (): void => this.ready.set(this.isReady() ? 1 : 0),
  });
  private readonly info = new Gauge({
    name: "cni_driver_info",
    help: "Always 1: the driver's version, its Node.js version and the ways its pod plumbing, plugin execs and host-local go.",
    labelNames: ["version", "node", "plumbing", "spawn", "host_local"],
    registers: [this.own],
  });
  private readonly nodeLinkReady = new Gauge({
    name: "cni_driver_node_link_ready",
    help: "1 when the node link the midonet datapath needs is in place, 0 when setting it up failed; absent when no network uses the midonet datapath.",
    registers: [this.own],
  });
  private readonly nodeLinkFailures = new Counter({
    name: "cni_driver_node_link_failures_total",
    help: "Failed applications of the node link (config loads, retries and resyncs).",
    registers: [this.own],
  });
  private readonly nodeLinkRepairs = new Counter({
    name: "cni_driver_node_link_repairs_total",
    help: "Resyncs that found the node link, its address or a route changed or missing, and put it back.",
    registers: [this.own],
  });
  private readonly clusterRoutes = new Gauge({
    name: "cni_driver_cluster_routes",
    help: "Routes to other nodes' pod CIDRs the kernel datapath keeps, by how (host-gw, vxlan).",
    labelNames: ["via"],
    registers: [this.own],
  });
  private readonly clusterUnrouted = new Gauge({
    name: "cni_driver_cluster_unrouted_nodes",
    help: "Other nodes (or families of theirs) whose pods are not routed to, each logged with the reason.",
    registers: [this.own],
  });
  private readonly clusterRuns = outcomeCounter<ClusterNetworkOutcome>(
    this.own,
    "cni_driver_cluster_network_applications_total",
    "Applications of the kernel datapath's cluster network (routes, VXLAN, masquerade) by outcome: ok, repaired (a resync put back what someone removed), failed.",
    ["ok", "repaired", "failed"],
  );
  private readonly policySyncs = outcomeCounter<"ok" | "failed">(
    this.own,
    "cni_driver_network_policy_syncs_total",
    "Writes of NetworkPolicy to the node's nftables by outcome: ok, failed (retried).",
    ["ok", "failed"],
  );
  private readonly policyChanges = new Counter({
    name: "cni_driver_network_policy_changes_total",
    help: "nftables commands NetworkPolicy syncs wrote (sets, chains, rules, verdicts each count).",
    registers: [this.own],
  });
  private readonly policyCuts = new Counter({
    name: "cni_driver_network_policy_connections_cut_total",
    help: "Tracked connections removed because the policies in force no longer allow them.",
    registers: [this.own],
  });
  private readonly serviceSyncs = outcomeCounter<"ok" | "failed">(
    this.own,
    "cni_driver_service_syncs_total",
    "Writes of Service rules to the node's nftables by outcome: ok, failed (retried).",
    ["ok", "failed"],
  );
  private readonly serviceSyncSeconds = new Histogram({
    name: "cni_driver_service_sync_duration_seconds",
    help: "Time from a Service or EndpointSlice change to its rules written, per sync.",
    buckets: [...DURATION_BUCKETS],
    registers: [this.own],
  });
  private readonly servicesProgrammed = new Gauge({
    name: "cni_driver_services",
    help: 'Services whose rules the driver keeps ("services": "driver").',
    registers: [this.own],
  });
  private readonly nodeAnnotationWrites = outcomeCounter<AnnotationWriteOutcome>(
    this.own,
    "cni_driver_node_annotation_writes_total",
    "Writes of the Node's midonet.org/mac-address annotation (set, or removed with the node link), by outcome: ok, retried (failed, tried again), dropped (given up until the next config load).",
    ["ok", "retried", "dropped"],
  );
  private readonly podAnnotationPatches = outcomeCounter<AnnotationWriteOutcome>(
    this.own,
    "cni_driver_pod_annotation_patches_total",
    "Pod annotation patches, by outcome: ok, retried (failed, tried again), dropped (given up), gone (the pod no longer exists).",
    ["ok", "retried", "dropped", "gone"],
  );
  private readonly podEvents = outcomeCounter<PodEventOutcome>(
    this.own,
    "cni_driver_pod_events_total",
    "Warning Events written on pods for failed SetUpPod, by outcome: created, updated (a repeat counted into an existing Event), failed (not retried).",
    ["created", "updated", "failed"],
  );
  private readonly exposed = withProcessMetrics(this.own);

  constructor() {
    this.nodeLinkReady.remove(); // absent, not 0, until a node link is planned
    this.clusterRoutes.set({ via: "host-gw" }, 0);
    this.clusterRoutes.set({ via: "vxlan" }, 0);
  }

  /** Counts one served call and observes its latency; failures are also counted by code. */
  recordCall(verb: string, outcome: "ok" | "error", durationSeconds: number, code?: number): void {
    this.calls.inc({ verb, outcome });
    this.durations.observe({ verb }, observableSeconds(durationSeconds));
    // An error without a CNI code is Go's catch-all, 999.
    if (outcome === "error") this.errors.inc({ verb, code: String(code ?? ErrorCode.Internal) });
  }

  setAttachments(n: number): void {
    this.attachments.set(n);
  }

  /** One config reload attempt: every attempt counts, a failed one also as an error. */
  configReloaded(ok: boolean): void {
    this.reloads.inc();
    if (!ok) this.reloadErrors.inc();
  }

  setConfigGeneration(n: number): void {
    this.generation.set(n);
  }

  /** cni_driver_ready follows `ready` at every scrape, not only when a probe asks. */
  readinessFrom(ready: () => boolean): void {
    this.isReady = ready;
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
    this.info.reset();
    this.info.set({ ...info }, 1);
  }

  /** One application of the node link (a config load, a retry or a resync). */
  nodeLinkApplied(outcome: NodeLinkOutcome): void {
    // An unlabelled gauge always has its one series; remove() takes it out.
    if (outcome === "none") this.nodeLinkReady.remove();
    else this.nodeLinkReady.set(outcome === "failed" ? 0 : 1);
    if (outcome === "failed") this.nodeLinkFailures.inc();
    if (outcome === "repaired") this.nodeLinkRepairs.inc();
  }

  /** One application of the cluster network; the counts when it worked. */
  clusterNetworkApplied(
    outcome: ClusterNetworkOutcome,
    state?: { hostGwRoutes: number; vxlanRoutes: number; unroutedNodes: number },
  ): void {
    this.clusterRuns.inc({ outcome });
    if (!state) return;
    this.clusterRoutes.set({ via: "host-gw" }, state.hostGwRoutes);
    this.clusterRoutes.set({ via: "vxlan" }, state.vxlanRoutes);
    this.clusterUnrouted.set(state.unroutedNodes);
  }

  /** One NetworkPolicy sync: how it ended, the commands it wrote. */
  networkPolicySynced(outcome: "ok" | "failed", changes: number): void {
    this.policySyncs.inc({ outcome });
    this.policyChanges.inc(changes);
  }

  /** One Service sync: how it ended, how many Services the table holds, how long it took. */
  servicesSynced(outcome: "ok" | "failed", services: number, ms: number): void {
    this.serviceSyncs.inc({ outcome });
    this.serviceSyncSeconds.observe(ms / 1000);
    this.servicesProgrammed.set(services);
  }

  /** Tracked connections cut after a sync, because the policies no longer allow them. */
  networkPolicyConnectionsCut(n: number): void {
    this.policyCuts.inc(n);
  }

  nodeAnnotationWritten(outcome: AnnotationWriteOutcome): void {
    this.nodeAnnotationWrites.inc({ outcome });
  }

  podAnnotationPatched(outcome: AnnotationWriteOutcome): void {
    this.podAnnotationPatches.inc({ outcome });
  }

  podEventWritten(outcome: PodEventOutcome): void {
    this.podEvents.inc({ outcome });
  }

  /** The text exposition (format 0.0.4) of this driver's series and the process's. */
  render(): Promise<string> {
    return this.exposed.metrics();
  }
}
