/**
 * The MidoNet controller: Kubernetes objects in, MidoNet topology out.
 *
 *   informers (Nodes, Pods, Services, EndpointSlices)  ── every replica
 *        │ add / update / delete
 *        ▼
 *   ClusterMapper (pure): the desired state, and the keys each event changed
 *        │ changes                                      ── the leader only:
 *        ▼
 *   Reconciler ── MidoNet REST        NodeAnnotator ── Node annotations
 *
 * Every replica keeps its informers and its mapping warm, so a new leader
 * starts from a full desired state. Only the holder of the Lease writes: on
 * becoming leader it reads everything of ours from MidoNet (resync), makes the
 * difference, then follows events; a periodic resync repairs drift. On losing
 * the Lease every write stops at once: the MidoNet client's calls in flight are
 * aborted and the reconciler is dropped (a later leadership starts from a fresh
 * read, never from what this one believed).
 *
 * Pods follow their node: a node whose MidoNet host changes re-maps the pods on
 * it (ClusterMapper), so their bindings move with it.
 */
import { setTimeout as sleep } from "node:timers/promises";
import {
  CoordinationV1Api,
  CoreV1Api,
  DiscoveryV1Api,
  type KubeConfig,
  type KubernetesObject,
  type V1EndpointSlice,
  type V1Node,
  type V1Pod,
  type V1Service,
} from "@kubernetes/client-node";
import type { Logger } from "pino";
import { type HealthServer, startHealthServer } from "../../common/health.js";
import { MidonetClient } from "../api.js";
import { ClusterMapper } from "../mapping/cluster.js";
import type { MappingConfig } from "../mapping/config.js";
import type { ResourceChanges } from "../mapping/diff.js";
import type { EndpointSlice, Node, Pod, Service } from "../mapping/k8s.js";
import { Reconciler } from "../reconciler.js";
import { type InformerHandlers, ResilientInformer } from "./informers.js";
import { type LeaderElectionOptions, LeaderElector } from "./leader.js";
import { ControllerMetrics, errorCode } from "./metrics.js";
import { NodeAnnotator } from "./node-annotations.js";

export interface MidonetControllerOptions {
  kubeConfig: KubeConfig;
  midonet: {
    baseUrl: string;
    user?: string | undefined;
    password?: string | undefined;
    project?: string | undefined;
    /** Per attempt. Default 10 s. */
    timeoutMs?: number;
    /** Client-level retries of one call before the reconciler's own backoff. Default 2. */
    retries?: number;
  };
  mapping: MappingConfig;
  lease: {
    namespace: string;
    name: string;
    identity: string;
    durationMs: number;
    renewPeriodMs: number;
    renewDeadlineMs: number;
  };
  /** "host:port" for /livez, /readyz, /metrics; "" disables. */
  healthAddr: string;
  /** Full read of MidoNet this often while leading (drift repair); 0: only at the start. */
  resyncPeriodMs: number;
  /** How often to look for MidoNet hosts of nodes that have none yet. */
  hostRefreshMs: number;
  /** Retry backoff of failed MidoNet writes: first delay and cap. */
  backoffMs?: number;
  maxBackoffMs?: number;
  logger: Logger;
}

export interface ControllerStatus {
  leader: boolean;
  /** Every informer has its first list. */
  synced: boolean;
  /** Leader only: MidoNet holds the desired state (a first resync done, nothing due). */
  converged: boolean;
  desired: number;
  pending: number;
  held: number;
}

export interface RunningMidonetController {
  readonly logger: Logger;
  readonly metrics: ControllerMetrics;
  /** The bound health address ("" when disabled). */
  readonly healthAddress: string;
  status(): ControllerStatus;
  /** Stops writing (releasing the Lease), then watching; resolves when all is quiet. */
  stop(): Promise<void>;
}

/** Wakes a waiting loop; a wake that comes while nobody waits is kept for the next wait. */
class Wakeup {
  private pending = false;
  private resolve: (() => void) | undefined;

  notify(): void {
    this.pending = true;
    this.resolve?.();
  }

  async wait(ms: number, signal: AbortSignal): Promise<void> {
    if (this.pending || signal.aborted) {
      this.pending = false;
      return;
    }
    await new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener("abort", done);
        this.resolve = undefined;
        resolve();
      };
      const timer = setTimeout(done, Math.max(0, Math.min(ms, 2 ** 31 - 1)));
      signal.addEventListener("abort", done, { once: true });
      this.resolve = done;
    });
    this.pending = false;
  }
}

interface Leadership {
  abort: AbortController;
  reconciler: Reconciler;
  annotator: NodeAnnotator;
  wakeup: Wakeup;
  resynced: boolean;
}

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

export async function startMidonetController(
  o: MidonetControllerOptions,
): Promise<RunningMidonetController> {
  const logger = o.logger;
  const metrics = new ControllerMetrics();
  const mapper = new ClusterMapper(o.mapping);
  const core = o.kubeConfig.makeApiClient(CoreV1Api);
  const discovery = o.kubeConfig.makeApiClient(DiscoveryV1Api);
  const coordination = o.kubeConfig.makeApiClient(CoordinationV1Api);
  const backoffMs = o.backoffMs ?? 500;
  const maxBackoffMs = o.maxBackoffMs ?? 60_000;
  let leadership: Leadership | undefined;
  let stopping = false;
  const loops = new Set<Promise<void>>();

  const refreshGauges = (): void => {
    metrics.set("midonet_controller_desired_resources", {}, mapper.state.size);
    metrics.set("midonet_controller_pending_resources", {}, leadership?.reconciler.pending ?? 0);
    metrics.set("midonet_controller_held_resources", {}, leadership?.reconciler.heldBack ?? 0);
    metrics.set(
      "midonet_controller_converged",
      {},
      leadership?.resynced && leadership.reconciler.converged ? 1 : 0,
    );
  };

  /** One mapping change: to the reconciler when leading (else the next leader's resync covers it). */
  const feed = (what: string, change: () => ResourceChanges): void => {
    let changes: ResourceChanges;
    try {
      changes = change();
    } catch (err) {
      // The mapping takes any input as data; an object it cannot even read is skipped.
      logger.error({ object: what, err: describe(err) }, "mapping failed");
      return;
    }
    if (!leadership) return;
    leadership.reconciler.enqueue(changes);
    leadership.wakeup.notify();
  };

  const nameOf = (obj: KubernetesObject) => obj.metadata?.name ?? "";
  const nsOf = (obj: KubernetesObject) => obj.metadata?.namespace ?? "";
  const informerOptions = (name: string) => ({
    kubeConfig: o.kubeConfig,
    name,
    logger,
    onError: () => metrics.inc("midonet_controller_kube_errors_total", { op: `watch-${name}` }),
  });

  /**
   * Add and update are one upsert; each change goes to feed() under
   * "Kind/namespace/name" (the namespaced kinds).
   */
  const namespacedHandlers = <T extends KubernetesObject>(
    kind: string,
    upsert: (obj: T) => ResourceChanges,
    remove: (namespace: string, name: string) => ResourceChanges,
  ): InformerHandlers<T> => {
    const key = (obj: T) => `${kind}/${nsOf(obj)}/${nameOf(obj)}`;
    const upserted = (obj: T) => feed(key(obj), () => upsert(obj));
    return {
      add: upserted,
      update: upserted,
      delete: (obj) => feed(key(obj), () => remove(nsOf(obj), nameOf(obj))),
    };
  };
  const nodeChanged = (n: V1Node): void => {
    feed(`Node/${nameOf(n)}`, () => mapper.upsertNode(n as Node));
    leadership?.annotator.nodeChanged(nameOf(n));
  };

  const nodes = new ResilientInformer<V1Node>({
    ...informerOptions("nodes"),
    path: "/api/v1/nodes",
    list: () => core.listNode(),
    handlers: {
      add: nodeChanged,
      update: nodeChanged,
      delete: (n) => {
        feed(`Node/${nameOf(n)}`, () => mapper.deleteNode(nameOf(n)));
        leadership?.annotator.nodeDeleted(nameOf(n));
      },
    },
  });
  const pods = new ResilientInformer<V1Pod>({
    ...informerOptions("pods"),
    path: "/api/v1/pods",
    list: () => core.listPodForAllNamespaces(),
    handlers: namespacedHandlers<V1Pod>(
      "Pod",
      (p) => mapper.upsertPod(p as Pod),
      (ns, name) => mapper.deletePod(ns, name),
    ),
  });
  const services = new ResilientInformer<V1Service>({
    ...informerOptions("services"),
    path: "/api/v1/services",
    list: () => core.listServiceForAllNamespaces(),
    handlers: namespacedHandlers<V1Service>(
      "Service",
      (s) => mapper.upsertService(s as Service),
      (ns, name) => mapper.deleteService(ns, name),
    ),
  });
  const slices = new ResilientInformer<V1EndpointSlice>({
    ...informerOptions("endpointslices"),
    path: "/apis/discovery.k8s.io/v1/endpointslices",
    list: () => discovery.listEndpointSliceForAllNamespaces(),
    handlers: namespacedHandlers<V1EndpointSlice>(
      "EndpointSlice",
      (s) => mapper.upsertEndpointSlice(s as EndpointSlice),
      (ns, name) => mapper.deleteEndpointSlice(ns, name),
    ),
  });
  const informers = [nodes, pods, services, slices] as ResilientInformer<KubernetesObject>[];
  const synced = () => informers.every((i) => i.synced);

  /** The leader's work: a full read, then events, retries and periodic resyncs, until aborted. */
  const lead = async (l: Leadership): Promise<void> => {
    const signal = l.abort.signal;
    const aborted = new Promise<void>((resolve) =>
      signal.addEventListener("abort", () => resolve(), { once: true }),
    );
    await Promise.race([Promise.all(informers.map((i) => i.whenSynced())), aborted]);
    if (signal.aborted) return;
    l.annotator.start();
    let lastResync = 0;
    let delay = backoffMs;
    const resync = async (): Promise<boolean> => {
      const report = await l.reconciler.resync();
      metrics.inc("midonet_controller_resyncs_total", { outcome: report.ok ? "ok" : "error" });
      return report.ok;
    };
    while (!signal.aborted && !(await resync())) {
      try {
        await sleep(delay, undefined, { signal });
      } catch {
        return;
      }
      delay = Math.min(maxBackoffMs, delay * 2);
    }
    if (signal.aborted) return;
    l.resynced = true;
    lastResync = Date.now();
    let wasConverged = false;
    while (!signal.aborted) {
      const report = await l.reconciler.flush();
      if (signal.aborted) break;
      refreshGauges();
      const warnings = new Map<string, number>();
      for (const w of mapper.warnings()) warnings.set(w.code, (warnings.get(w.code) ?? 0) + 1);
      metrics.replace(
        "midonet_controller_mapping_warnings",
        [...warnings].map(([code, n]) => [{ code }, n]),
      );
      const converged = l.reconciler.converged;
      if (converged && !wasConverged) {
        logger.info(
          { desired: mapper.state.size, held: report.held },
          "MidoNet holds the desired state",
        );
      }
      wasConverged = converged;
      const now = Date.now();
      const resyncAt =
        o.resyncPeriodMs > 0 ? lastResync + o.resyncPeriodMs : Number.POSITIVE_INFINITY;
      const due = l.reconciler.nextDue() ?? Number.POSITIVE_INFINITY;
      await l.wakeup.wait(Math.min(due, resyncAt) - now, signal);
      if (!signal.aborted && Date.now() >= resyncAt) {
        lastResync = Date.now();
        await resync();
      }
    }
  };

  const electorOptions: LeaderElectionOptions = {
    api: coordination,
    namespace: o.lease.namespace,
    name: o.lease.name,
    identity: o.lease.identity,
    leaseDurationMs: o.lease.durationMs,
    renewPeriodMs: o.lease.renewPeriodMs,
    renewDeadlineMs: o.lease.renewDeadlineMs,
    logger,
    onError: () => metrics.inc("midonet_controller_kube_errors_total", { op: "lease" }),
    onStartedLeading: () => {
      const abort = new AbortController();
      const client = new MidonetClient({
        baseUrl: o.midonet.baseUrl,
        user: o.midonet.user,
        password: o.midonet.password,
        project: o.midonet.project,
        timeoutMs: o.midonet.timeoutMs ?? 10_000,
        retries: o.midonet.retries ?? 2,
        signal: abort.signal,
        onAttempt: (a) => metrics.apiAttempt(a),
      });
      const annotator = new NodeAnnotator({
        core,
        midonet: client,
        defaultTunnelZone: mapper.config.ids.defaultTunnelZone,
        getNode: (name) => nodes.get(name),
        listNodes: () => nodes.list(),
        refreshMs: o.hostRefreshMs,
        logger,
        onPatch: (outcome) => metrics.inc("midonet_controller_node_annotations_total", { outcome }),
        onError: (what, err) =>
          metrics.inc("midonet_controller_kube_errors_total", {
            op: what === "patch" ? "patch-node" : "list-hosts",
            code: errorCode(err),
          }),
      });
      const l: Leadership = {
        abort,
        wakeup: new Wakeup(),
        resynced: false,
        reconciler: new Reconciler({
          client,
          state: mapper.state,
          config: mapper.config,
          logger,
          observer: metrics,
          // Each node's joined zone, recorded on the Node through the annotator's patches.
          records: annotator,
          backoffMs,
          maxBackoffMs,
          signal: abort.signal,
        }),
        annotator,
      };
      leadership = l;
      metrics.set("midonet_controller_leader", {}, 1);
      metrics.inc("midonet_controller_leader_transitions_total", { to: "leader" });
      const loop = lead(l)
        .catch((err: unknown) => {
          // Nothing in lead() is meant to throw; if it does, the Lease is given up so another replica leads.
          logger.error({ err: describe(err) }, "the leader loop failed; giving up the lease");
          if (!stopping) void restartElection();
        })
        .finally(() => loops.delete(loop));
      loops.add(loop);
    },
    onStoppedLeading: () => {
      const l = leadership;
      leadership = undefined;
      metrics.set("midonet_controller_leader", {}, 0);
      metrics.inc("midonet_controller_leader_transitions_total", { to: "follower" });
      if (!l) return;
      l.abort.abort();
      const stopped = l.annotator.stop().finally(() => loops.delete(stopped));
      loops.add(stopped);
      refreshGauges();
    },
  };
  let elector = new LeaderElector(electorOptions);
  const restartElection = async (): Promise<void> => {
    await elector.stop();
    if (stopping) return;
    elector = new LeaderElector(electorOptions);
    elector.start();
  };

  let health: HealthServer;
  try {
    health = await startHealthServer(o.healthAddr, {
      live: async () => (stopping ? { ok: false, reason: "stopping" } : { ok: true }),
      ready: () => {
        const reasons: string[] = [];
        if (stopping) reasons.push("stopping");
        for (const [name, i] of [
          ["nodes", nodes],
          ["pods", pods],
          ["services", services],
          ["endpointslices", slices],
        ] as const) {
          if (!i.synced) reasons.push(`${name} not listed yet`);
        }
        return { ok: reasons.length === 0, reasons };
      },
      metrics: () => {
        refreshGauges();
        return metrics.render();
      },
    });
  } catch (err) {
    throw new Error(`health server on ${o.healthAddr}: ${describe(err)}`);
  }

  for (const i of informers) {
    i.start().catch((err: unknown) =>
      logger.warn({ err: describe(err) }, "starting an informer failed"),
    );
  }
  void Promise.all(informers.map((i) => i.whenSynced())).then(() => {
    if (stopping) return;
    metrics.set("midonet_controller_ready", {}, 1);
    logger.info({ desired: mapper.state.size }, "informers synced");
  });
  elector.start();
  logger.info(
    {
      identity: o.lease.identity,
      lease: `${o.lease.namespace}/${o.lease.name}`,
      midonet: o.midonet.baseUrl,
      tenant: mapper.config.tenant,
      health: health.address,
    },
    "midonet controller started",
  );

  return {
    logger,
    metrics,
    healthAddress: health.address,
    status: () => ({
      leader: leadership !== undefined,
      synced: synced(),
      converged: leadership?.resynced === true && leadership.reconciler.converged,
      desired: mapper.state.size,
      pending: leadership?.reconciler.pending ?? 0,
      held: leadership?.reconciler.heldBack ?? 0,
    }),
    stop: async () => {
      if (stopping) return;
      stopping = true;
      metrics.set("midonet_controller_ready", {}, 0);
      await elector.stop();
      await Promise.all([...loops]);
      await Promise.all(informers.map((i) => i.stop()));
      await health.close();
      logger.info("midonet controller stopped");
    },
  };
}
