/**
 * The MidoNet controller: Kubernetes objects in, MidoNet topology out.
 *
 *   informers (Nodes, Pods, Services, EndpointSlices,
 *              Namespaces, NetworkPolicies)           ── every replica
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
import { CoordinationV1Api, CoreV1Api, type KubeConfig } from "@kubernetes/client-node";
import type { Logger } from "pino";
import type { BackoffPolicy } from "../../common/backoff.js";
import { messageOf } from "../../common/errors.js";
import { type HealthServer, startHealthServer } from "../../common/health.js";
import { MidonetClient } from "../api.js";
import { ClusterMapper } from "../mapping/cluster.js";
import type { MappingConfig } from "../mapping/config.js";
import type { ResourceChanges } from "../mapping/diff.js";
import { Reconciler } from "../reconciler.js";
import { ClusterInformers } from "./informers.js";
import { type LeaderElectionOptions, LeaderElector } from "./leader.js";
import { Leadership } from "./leadership.js";
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

/** The controller of one replica: informers always, the Lease's work while it holds it. */
class MidonetController implements RunningMidonetController {
  readonly logger: Logger;
  readonly metrics: ControllerMetrics;
  private readonly mapper: ClusterMapper;
  private readonly core: CoreV1Api;
  private readonly informers: ClusterInformers;
  private readonly retry: BackoffPolicy;
  private readonly electorOptions: LeaderElectionOptions;
  private elector: LeaderElector;
  private leadership: Leadership | undefined;
  private health: HealthServer | undefined;
  private stopping = false;
  /** Leader loops and annotators still winding down. */
  private readonly loops = new Set<Promise<void>>();

  constructor(private readonly o: MidonetControllerOptions) {
    this.logger = o.logger;
    this.mapper = new ClusterMapper(o.mapping);
    this.metrics = new ControllerMetrics(() => ({
      desired: this.mapper.state.size,
      pending: this.leadership?.reconciler.pending ?? 0,
      held: this.leadership?.reconciler.heldBack ?? 0,
      converged: this.leadership?.converged ?? false,
    }));
    this.core = o.kubeConfig.makeApiClient(CoreV1Api);
    this.retry = { baseMs: o.backoffMs ?? 500, maxMs: o.maxBackoffMs ?? 60_000 };
    this.informers = new ClusterInformers({
      kubeConfig: o.kubeConfig,
      mapper: this.mapper,
      feed: (what, change) => this.feed(what, change),
      nodeEvent: (name, deleted) => {
        if (deleted) this.leadership?.annotator.nodeDeleted(name);
        else this.leadership?.annotator.nodeChanged(name);
      },
      onError: (name) =>
        this.metrics.inc("midonet_controller_kube_errors_total", { op: `watch-${name}` }),
      logger: this.logger,
    });
    this.electorOptions = {
      api: o.kubeConfig.makeApiClient(CoordinationV1Api),
      namespace: o.lease.namespace,
      name: o.lease.name,
      identity: o.lease.identity,
      leaseDurationMs: o.lease.durationMs,
      renewPeriodMs: o.lease.renewPeriodMs,
      renewDeadlineMs: o.lease.renewDeadlineMs,
      logger: this.logger,
      onError: () => this.metrics.inc("midonet_controller_kube_errors_total", { op: "lease" }),
      onStartedLeading: () => this.startedLeading(),
      onStoppedLeading: () => this.stoppedLeading(),
    };
    this.elector = new LeaderElector(this.electorOptions);
  }

  /** The bound health address ("" when disabled or not started). */
  get healthAddress(): string {
    return this.health?.address ?? "";
  }

  /** Serves health, starts the informers, then stands for the Lease. */
  async start(): Promise<void> {
    await this.serveHealth();
    this.informers.start();
    void this.informers.whenSynced().then(() => {
      if (this.stopping) return;
      this.metrics.set("midonet_controller_ready", {}, 1);
      this.logger.info({ desired: this.mapper.state.size }, "informers synced");
    });
    this.elector.start();
    this.logger.info(
      {
        identity: this.o.lease.identity,
        lease: `${this.o.lease.namespace}/${this.o.lease.name}`,
        midonet: this.o.midonet.baseUrl,
        tenant: this.mapper.config.tenant,
        health: this.healthAddress,
      },
      "midonet controller started",
    );
  }

  status(): ControllerStatus {
    const l = this.leadership;
    return {
      leader: l !== undefined,
      synced: this.informers.synced,
      converged: l?.converged ?? false,
      desired: this.mapper.state.size,
      pending: l?.reconciler.pending ?? 0,
      held: l?.reconciler.heldBack ?? 0,
    };
  }

  async stop(): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    this.metrics.set("midonet_controller_ready", {}, 0);
    await this.elector.stop();
    await Promise.all([...this.loops]);
    await this.informers.stop();
    await this.health?.close();
    this.logger.info("midonet controller stopped");
  }

  private async serveHealth(): Promise<void> {
    try {
      this.health = await startHealthServer(this.o.healthAddr, {
        live: async () => (this.stopping ? { ok: false, reason: "stopping" } : { ok: true }),
        ready: () => {
          const reasons = this.stopping ? ["stopping"] : [];
          for (const name of this.informers.notListed()) reasons.push(`${name} not listed yet`);
          return { ok: reasons.length === 0, reasons };
        },
        metrics: () => this.metrics.render(),
      });
    } catch (err) {
      throw new Error(`health server on ${this.o.healthAddr}: ${messageOf(err)}`);
    }
  }

  /** One mapping change: to the reconciler when leading (else the next leader's resync covers it). */
  private feed(what: string, change: () => ResourceChanges): void {
    let changes: ResourceChanges;
    try {
      changes = change();
    } catch (err) {
      // The mapping takes any input as data; an object it cannot even read is skipped.
      this.logger.error({ object: what, err: messageOf(err) }, "mapping failed");
      return;
    }
    this.leadership?.enqueue(changes);
  }

  private startedLeading(): void {
    const l = this.newLeadership();
    this.leadership = l;
    this.metrics.set("midonet_controller_leader", {}, 1);
    this.metrics.inc("midonet_controller_leader_transitions_total", { to: "leader" });
    const loop = l
      .run()
      .catch((err: unknown) => {
        // Nothing in run() is meant to throw; if it does, the Lease is given up so another replica leads.
        this.logger.error({ err: messageOf(err) }, "the leader loop failed; giving up the lease");
        if (!this.stopping) void this.restartElection();
      })
      .finally(() => this.loops.delete(loop));
    this.loops.add(loop);
  }

  private stoppedLeading(): void {
    const l = this.leadership;
    this.leadership = undefined;
    this.metrics.set("midonet_controller_leader", {}, 0);
    this.metrics.inc("midonet_controller_leader_transitions_total", { to: "follower" });
    if (!l) return;
    l.abort.abort();
    const stopped = l.annotator.stop().finally(() => this.loops.delete(stopped));
    this.loops.add(stopped);
  }

  /** A term's MidoNet client, annotator and reconciler, all stopped by its abort. */
  private newLeadership(): Leadership {
    const abort = new AbortController();
    const { midonet } = this.o;
    const client = new MidonetClient({
      baseUrl: midonet.baseUrl,
      user: midonet.user,
      password: midonet.password,
      project: midonet.project,
      timeoutMs: midonet.timeoutMs ?? 10_000,
      retries: midonet.retries ?? 2,
      signal: abort.signal,
      onAttempt: (a) => this.metrics.apiAttempt(a),
    });
    const annotator = new NodeAnnotator({
      core: this.core,
      midonet: client,
      defaultTunnelZone: this.mapper.config.ids.defaultTunnelZone,
      getNode: (name) => this.informers.nodes.get(name),
      listNodes: () => this.informers.nodes.list(),
      refreshMs: this.o.hostRefreshMs,
      logger: this.logger,
      onPatch: (outcome) =>
        this.metrics.inc("midonet_controller_node_annotations_total", { outcome }),
      onError: (what, err) =>
        this.metrics.inc("midonet_controller_kube_errors_total", {
          op: what === "patch" ? "patch-node" : "list-hosts",
          code: errorCode(err),
        }),
    });
    const reconciler = new Reconciler({
      client,
      state: this.mapper.state,
      config: this.mapper.config,
      logger: this.logger,
      observer: this.metrics,
      // Each node's joined zone, recorded on the Node through the annotator's patches.
      records: annotator,
      backoffMs: this.retry.baseMs,
      maxBackoffMs: this.retry.maxMs,
      signal: abort.signal,
    });
    return new Leadership({
      abort,
      reconciler,
      annotator,
      mapper: this.mapper,
      metrics: this.metrics,
      logger: this.logger,
      synced: () => this.informers.whenSynced(),
      resyncPeriodMs: this.o.resyncPeriodMs,
      retry: this.retry,
    });
  }

  private async restartElection(): Promise<void> {
    await this.elector.stop();
    if (this.stopping) return;
    this.elector = new LeaderElector(this.electorOptions);
    this.elector.start();
  }
}

export async function startMidonetController(
  o: MidonetControllerOptions,
): Promise<RunningMidonetController> {
  const controller = new MidonetController(o);
  await controller.start();
  return controller;
}
