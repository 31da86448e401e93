/**
 * `cni-driver serve`: wires the config source, the executor, the gRPC server and
 * the health endpoint together, recovers state at start, and shuts down cleanly.
 *
 * Ready means: a valid config is loaded, start-up recovery is done, we are not
 * shutting down, (with the Kubernetes API) the Node has given us a pod CIDR,
 * and (with the MidoNet datapath) the node link is set up (node-connectivity.ts).
 * Until then SetUpPod answers code 11 and STATUS code 50.
 *
 * The Kubernetes API is optional (kube/integration.ts): without `--kubeconfig`
 * or an in-cluster service account the driver runs standalone, and its client
 * library is never even loaded.
 */
import { readFileSync } from "node:fs";
import type pino from "pino";
import { dialUnixSocket, type HealthServer, startHealthServer } from "../../common/health.js";
import { createLogger } from "../../common/logger.js";
import { createHostLocalPlugin, HOST_LOCAL_TYPE } from "../builtin/host-local/plugin.js";
import { BridgeCache } from "../builtin/midonet/bridge-cache.js";
import { MIDONET_PLUGIN_TYPE } from "../builtin/midonet/config.js";
import { createMidonetPlugin } from "../builtin/midonet/plugin.js";
import { ChainExecutor } from "../chain/executor.js";
import { AttachmentLocks } from "../chain/locks.js";
import { type BuiltinPlugin, createPluginRunner } from "../chain/plugin-runner.js";
import { ResultCache } from "../chain/result-cache.js";
import { ClusterNetwork } from "../cluster-network/reconciler.js";
import { ConfigSource } from "../config/config-source.js";
import { KubeIntegration, type KubeSettings, kubeSettingsFrom } from "../kube/integration.js";
import { Metrics } from "../metrics.js";
import { NodeConnectivity } from "../midonet-node/node-connectivity.js";
import {
  localPodsFromCache,
  NetworkPolicyEnforcer,
  type PodPolicyHook,
} from "../network-policy/enforcer.js";
import { type GrpcServerHandle, startGrpcServer } from "../rpc/server.js";
import { AttachmentIndex, DriverService } from "../rpc/service.js";
import { BridgeSteering } from "../services/bridge-steering.js";
import { ServiceProxy } from "../services/proxy.js";
import { type Backends, chooseBackends } from "./backends.js";
import { BridgeGatewayPruner } from "./bridge-gateways.js";
import { gateHostConflist } from "./host-conflist-gate.js";
import { type RecoveryDeps, recoverAtStart, replayDeletionQueue } from "./recovery.js";
import type { DriverOptions } from "./serve-flags.js";

/** After the abort at shutdown: the kill grace of a plugin (SIGTERM, then SIGKILL at 2 s), and a margin. */
const PLUGIN_KILL_WAIT_MS = 3000;

/** The package's version: package.json is three folders up from the sources, four from dist/. */
export function driverVersion(): string {
  for (const up of ["../../../package.json", "../../../../package.json"]) {
    try {
      const pkg = JSON.parse(readFileSync(new URL(up, import.meta.url), "utf8")) as {
        name?: string;
        version?: string;
      };
      if (pkg.name === "cni-driver") return pkg.version ?? "0.0.0";
    } catch {
      // not this level
    }
  }
  return "0.0.0";
}

export interface RunningDriver {
  service: DriverService;
  healthAddress: string;
  logger: pino.Logger;
  /** Not ready, drain in-flight calls (bounded), stop everything. */
  stop(): Promise<void>;
}

export async function startDriver(
  opts: DriverOptions,
  logger = createLogger({ level: opts.logLevel, name: "cni-driver" }),
): Promise<RunningDriver> {
  // Chosen once, before any pod, and handed to what uses them.
  const backends = await chooseBackends(opts.hostLocal ?? "in-process", logger);
  const driver = new Driver(opts, logger, backends);
  await driver.start();
  return driver;
}

/** The built-in plugins by type, and every one that has a part in start-up recovery. */
function builtinPlugins(
  opts: DriverOptions,
  backends: Backends,
  bridges: BridgeCache,
  podMtu: () => number | undefined,
  podPolicy: PodPolicyHook,
  steering: BridgeSteering,
  logger: pino.Logger,
): { builtins: Map<string, BuiltinPlugin>; recoverers: BuiltinPlugin[] } {
  const midonet = createMidonetPlugin({
    plumbing: backends.plumbing.plumbing,
    bridges,
    podMtu,
    podPolicy,
    hairpin: (bridge) => steering.settings(bridge).hairpin,
    onStaleHostEnd: (hostIfName, containerId) =>
      logger.warn(
        { hostIfName, containerId },
        "replaced a host veth an older sandbox of the same pod left",
      ),
  });
  const hostLocal = createHostLocalPlugin({ lockTimeoutMs: opts.pluginTimeoutMs });
  const builtins = new Map<string, BuiltinPlugin>([[MIDONET_PLUGIN_TYPE, midonet]]);
  if (backends.hostLocal.name === "in-process") builtins.set(HOST_LOCAL_TYPE, hostLocal);
  // host-local's leases are the same files whether it runs here or is exec'd.
  return { builtins, recoverers: [midonet, hostLocal] };
}

class Driver implements RunningDriver {
  readonly service: DriverService;
  healthAddress = "";
  private readonly metrics = new Metrics();
  private readonly kubeSettings: KubeSettings | undefined;
  private readonly kube: KubeIntegration | undefined;
  private readonly config: ConfigSource;
  private readonly nodeLink: NodeConnectivity;
  private readonly clusterNetwork: ClusterNetwork;
  private readonly networkPolicy: NetworkPolicyEnforcer;
  private readonly services: ServiceProxy;
  private readonly steering: BridgeSteering;
  private readonly locks: AttachmentLocks;
  private readonly recovery: RecoveryDeps;
  /** Aborted once the drain at shutdown has timed out: plugins still running then would hold the process past --drain-timeout. */
  private readonly shutdownAbort = new AbortController();
  private recovered = false;
  private shuttingDown = false;
  private grpcServer: GrpcServerHandle | undefined;
  private health: HealthServer | undefined;
  private rescan: NodeJS.Timeout | undefined;
  private hostConflist: { stop(): void } | undefined;
  private replaying: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly opts: DriverOptions,
    readonly logger: pino.Logger,
    backends: Backends,
  ) {
    this.metrics.setInfo({
      version: driverVersion(),
      node: process.version,
      plumbing: backends.plumbing.name,
      spawn: backends.spawn.name,
      host_local: backends.hostLocal.name,
    });
    const steering = new BridgeSteering(logger);
    this.steering = steering;
    const bridges = new BridgeCache(
      backends.plumbing.plumbing,
      (bridge) => steering.settings(bridge).netfilter,
    );
    const podPolicy: PodPolicyHook = {
      // The enforcer is made below, once the API is known.
      attach: (pod) => this.networkPolicy.attach(pod),
      detach: (hostIf) => this.networkPolicy.detach(hostIf),
    };
    const { builtins, recoverers } = builtinPlugins(
      opts,
      backends,
      bridges,
      // Asked at each ADD; the cluster network is made below.
      () => this.clusterNetwork.podMtu(),
      podPolicy,
      steering,
      logger,
    );
    this.kubeSettings = kubeSettingsFrom({
      kubeconfig: opts.kubeconfig,
      nodeName: opts.nodeName,
      configMap: opts.configMap,
      podCidrGiven: opts.podCidrs.v4 !== undefined || opts.podCidrs.v6 !== undefined,
      configDir: opts.configDir,
      stateDir: opts.stateDir,
    });
    this.kube = this.kubeSettings ? this.kubeIntegration(this.kubeSettings) : undefined;
    this.config = this.configSource(builtins);
    this.nodeLink = new NodeConnectivity(this.datapathFollowerOptions());
    this.clusterNetwork = new ClusterNetwork({
      ...this.datapathFollowerOptions(),
      localPodCidrs: () => opts.podCidrs,
    });
    this.networkPolicy = new NetworkPolicyEnforcer({
      logger,
      api: this.kube?.api.catch(() => undefined),
      metrics: this.metrics,
    });
    this.services = new ServiceProxy({
      logger,
      api: this.kube?.api.catch(() => undefined),
      nodeName: this.kubeSettings?.nodeName,
      localPodCidrs: () => this.config.podCidrsNow(),
      localNode: () => this.kube?.node?.nodeFacts() ?? {},
      metrics: this.metrics,
    });
    const cache = new ResultCache(opts.cacheDir);
    const executor = this.chainExecutor(cache, builtins, backends);
    this.locks = new AttachmentLocks({ maxConcurrent: opts.maxConcurrent });
    const attachments = new AttachmentIndex((n) => this.metrics.setAttachments(n));
    // Gateways of ranges no config or attachment uses any more leave the bridges.
    const gateways = new BridgeGatewayPruner({
      config: this.config,
      cache,
      locks: this.locks,
      bridges,
      logger,
    });
    this.config.on("reload", () => gateways.configLoaded());
    this.followConfig();
    this.metrics.readinessFrom(() => this.notReadyReasons().length === 0);
    this.service = new DriverService({
      config: this.config,
      executor,
      locks: this.locks,
      metrics: this.metrics,
      logger,
      driverVersion: driverVersion(),
      notReadyReasons: () => this.notReadyReasons(),
      attachments,
      podObserver: gateways.observer(this.kube?.observer),
    });
    this.recovery = {
      cache,
      executor,
      config: this.config,
      locks: this.locks,
      attachments,
      recoverers,
      stateDir: opts.stateDir,
      logger,
      podObserver: this.kube?.observer,
    };
  }

  /** Chains run with the built-in plugins in-process, every other type exec'd through the chosen spawn. */
  private chainExecutor(
    cache: ResultCache,
    builtins: ReadonlyMap<string, BuiltinPlugin>,
    backends: Backends,
  ): ChainExecutor {
    const runPlugin = createPluginRunner({
      binDirs: this.opts.binDirs,
      timeoutMs: this.opts.pluginTimeoutMs,
      builtins,
      signal: this.shutdownAbort.signal,
      spawn: backends.spawn,
    });
    return new ChainExecutor(cache, runPlugin, this.logger, (type) => builtins.has(type));
  }

  /** Its callbacks reach the ConfigSource only after start(). */
  private kubeIntegration(settings: KubeSettings): KubeIntegration {
    return new KubeIntegration(settings, {
      logger: this.logger,
      setPodCidrs: (c): Promise<void> => this.config.setPodCidrs(c),
      reloadConfig: (): Promise<void> => this.config.reload(),
      nodeFactsChanged: () => this.services.nodeChanged(),
      metrics: this.metrics,
    });
  }

  private configSource(builtins: ReadonlyMap<string, BuiltinPlugin>): ConfigSource {
    return new ConfigSource({
      resolveDir: this.kube?.resolveConfigDir,
      dir: this.opts.configDir,
      binDirs: this.opts.binDirs,
      podCidrs: this.opts.podCidrs,
      hostLocalDataDir: this.opts.hostLocalDataDir,
      builtins: new Map(
        [...builtins].map(([k, b]) => [k, (c: Record<string, unknown>) => b.validate(c)]),
      ),
      logger: this.logger,
    });
  }

  /** What the node link (MidoNet datapath) and the cluster network (kernel datapath) share. */
  private datapathFollowerOptions() {
    return {
      logger: this.logger,
      api: this.kube?.api.catch(() => undefined),
      nodeName: this.kubeSettings?.nodeName,
      resyncMs: this.opts.nodeLinkResyncMs ?? 60_000,
      metrics: this.metrics,
    };
  }

  /**
   * Every load is logged and counted, and followed by the node link and the
   * cluster network (re-applied every --node-link-resync seconds in between);
   * a rejected config keeps the last good one.
   */
  private followConfig(): void {
    this.config.on("reload", (cfg) => {
      this.metrics.configReloaded(true);
      this.metrics.setConfigGeneration(cfg.generation);
      this.logger.info(
        { generation: cfg.generation, networks: [...cfg.networks.keys()], hash: cfg.contentHash },
        "config loaded",
      );
    });
    this.config.on("reload", (cfg) => this.nodeLink.apply(cfg));
    this.config.on("reload", (cfg) => this.clusterNetwork.apply(cfg));
    this.config.on("reload", (cfg) => {
      this.networkPolicy
        .apply(cfg)
        .catch((err: unknown) =>
          this.logger.error({ err: String(err) }, "cannot switch NetworkPolicy on or off"),
        );
    });
    this.config.on("reload", (cfg) => void this.steering.apply(cfg));
    this.config.on("reload", (cfg) => {
      this.services.nodeChanged();
      this.services
        .apply(cfg)
        .catch((err: unknown) =>
          this.logger.error({ err: String(err) }, "cannot switch Service load-balancing on or off"),
        );
    });
    this.config.on("error", (e) => {
      this.metrics.configReloaded(false);
      this.logger.error(
        { source: e.source, err: e.message },
        "config rejected; keeping the last good config",
      );
    });
  }

  /** Why the driver cannot serve ADD now; empty when it can. */
  private notReadyReasons(): string[] {
    const reasons: string[] = [];
    if (this.shuttingDown) reasons.push("shutting down");
    const current = this.config.current();
    if (!current)
      reasons.push(
        `no valid network configuration: ${this.config.lastError()?.message ?? "not loaded yet"}`,
      );
    if (!this.recovered) reasons.push("start-up recovery in progress");
    // The Node's pod CIDR matters only to a config that could not load without it: one
    // that loaded (with it, or with subnets of its own) serves ADD whatever the API does.
    if (this.kube && !current) reasons.push(...this.kube.notReadyReasons());
    reasons.push(...this.nodeLink.notReadyReasons(current));
    return reasons;
  }

  async start(): Promise<void> {
    await this.kube?.start();
    this.clusterNetwork.start();
    // Before serving: a DEL right after a restart must know which sandbox set its pod's annotation.
    await this.kube?.seedAnnotationOwners(this.recovery.cache);
    // Before serving: a DEL right after a restart must find the pod it removes.
    this.networkPolicy.seed(localPodsFromCache(await this.recovery.cache.list().catch(() => [])));
    await this.config.start();
    await this.serve();
    // Serving starts before recovery ends so that DELs are never refused; ADDs wait on readiness.
    await recoverAtStart(this.recovery);
    this.recovered = true;
    this.replayQueueFromNowOn();
    this.logger.info(
      {
        socket: this.opts.socket,
        health: this.healthAddress,
        attachments: this.recovery.attachments.size,
      },
      "cni-driver serving",
    );
    if (this.opts.hostCniConfDir)
      this.hostConflist = gateHostConflist(
        this.opts.hostCniConfDir,
        { socket: this.opts.socket, stateDir: this.opts.stateDir },
        () => this.notReadyReasons(),
        this.config,
        this.logger,
      );
  }

  /** The socket, and the health and metrics endpoint. */
  private async serve(): Promise<void> {
    this.grpcServer = await startGrpcServer(this.opts.socket, this.service, {
      logger: this.logger,
      limits: this.opts.connectionLimits,
    });
    this.health = await startHealthServer(this.opts.healthAddr, {
      live: () => dialUnixSocket(this.opts.socket, 1000),
      ready: () => {
        const reasons = this.notReadyReasons();
        return { ok: reasons.length === 0, reasons };
      },
      metrics: () => this.metrics.render(),
    });
    this.healthAddress = this.health.address;
  }

  /**
   * A shim that found us without a config queued its DELs; a config arriving
   * later makes them replayable without waiting for our next restart. A record
   * can also land while we run: a shim whose connect failed just before we
   * listened, or one that gave up waiting on a slow DEL. So the queue is looked
   * at every --deletion-queue-rescan seconds too; a replayed DEL is idempotent.
   */
  private replayQueueFromNowOn(): void {
    const replay = (): void => {
      this.replaying = this.replaying
        .then(() => replayDeletionQueue(this.recovery))
        .catch((err) =>
          this.logger.error({ err: String(err) }, "replaying the deletion queue failed"),
        );
    };
    this.config.on("reload", replay);
    const rescanMs = this.opts.deletionQueueRescanMs ?? 10_000;
    this.rescan = rescanMs > 0 ? setInterval(replay, rescanMs) : undefined;
    this.rescan?.unref();
  }

  async stop(): Promise<void> {
    this.shuttingDown = true;
    if (this.rescan) clearInterval(this.rescan);
    // The host conflist stays: the shim's DEL path needs it while we are away.
    this.hostConflist?.stop();
    const closing = this.grpcServer?.close();
    await this.drain();
    const timer = setTimeout(() => this.grpcServer?.forceClose(), 1000);
    await closing;
    clearTimeout(timer);
    await this.health?.close();
    this.nodeLink.stop();
    await this.clusterNetwork.stop();
    await this.networkPolicy.stop();
    await this.services.stop();
    await this.kube?.stop();
    await this.config.close();
  }

  /**
   * In-flight calls get --drain-timeout to finish. Those still running then end
   * as canceled (code 11); what they set up is what a crash leaves, which the
   * runtime's DEL or our next start's recovery releases.
   */
  private async drain(): Promise<void> {
    if (await this.locks.drain(this.opts.drainTimeoutMs)) return;
    this.logger.warn(
      { inFlight: this.locks.inFlight },
      "drain timed out; killing the plugins still running",
    );
    this.shutdownAbort.abort();
    await this.locks.drain(PLUGIN_KILL_WAIT_MS);
  }
}
