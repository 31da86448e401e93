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
import { socketPathProblem } from "../../cni/socket-path.js";
import { type FlagSpec, type FlagValues, UsageError } from "../../common/flags.js";
import { dialUnixSocket, startHealthServer } from "../../common/health.js";
import { createLogger, type LogLevel } from "../../common/logger.js";
import { plumbingBackend } from "../../plumbing/backend.js";
import { flockAddon } from "../builtin/host-local/file-lock.js";
import { createHostLocalPlugin, HOST_LOCAL_TYPE } from "../builtin/host-local/plugin.js";
import {
  BridgeCache,
  createMidonetPlugin,
  MIDONET_PLUGIN_TYPE,
} from "../builtin/midonet-plugin.js";
import { ChainExecutor } from "../chain/executor.js";
import { AttachmentLocks } from "../chain/locks.js";
import { spawnBackend } from "../chain/plugin-process.js";
import { type BuiltinPlugin, createPluginRunner } from "../chain/plugin-runner.js";
import { ResultCache } from "../chain/result-cache.js";
import { ClusterNetwork } from "../cluster-network/reconciler.js";
import { ConfigSource } from "../config/config-source.js";
import { KubeIntegration, kubeSettingsFrom } from "../kube/integration.js";
import { Metrics } from "../metrics.js";
import { NodeConnectivity } from "../midonet-node/node-connectivity.js";
import {
  type ConnectionLimits,
  DEFAULT_CONNECTION_LIMITS,
  startGrpcServer,
} from "../rpc/server.js";
import { AttachmentIndex, DriverService } from "../rpc/service.js";
import { BridgeGatewayPruner } from "./bridge-gateways.js";
import { HOST_CONFLIST_NAME, installHostConflist, type ShimTarget } from "./host-install.js";
import { recoverAtStart, replayDeletionQueue } from "./recovery.js";

export const SERVE_FLAGS: readonly FlagSpec[] = [
  { name: "socket", default: "/run/cni-driver/driver.sock", help: "the gRPC unix socket" },
  { name: "config-dir", default: "/etc/cni-driver", help: "the mounted ConfigMap directory" },
  { name: "state-dir", default: "/var/lib/cni-driver", help: "driver state: the deletion queue" },
  {
    name: "cache-dir",
    default: "/var/lib/cni-driver",
    help: "the result cache (libcni format, under results/)",
  },
  {
    name: "cni-bin-dir",
    default: "/opt/cni/bin:/usr/lib/cni",
    help: "where delegated plugins are found (colon-separated)",
  },
  {
    name: "host-local-data-dir",
    default: "/var/lib/cni/networks",
    help: "host-local's dataDir for networks that set none",
  },
  {
    name: "host-local",
    default: "in-process",
    help: 'how host-local runs: "in-process" (host-local\'s allocator on its lease files and lock, no exec) or "exec" (the binary from the bin dirs)',
  },
  {
    name: "pod-cidr",
    help: "the node's pod CIDR(s), comma-separated (fills usePodCidr / usePodCidrIPv6); when given, wins over the Node's spec.podCIDRs",
  },
  {
    name: "node-name",
    help: "this node's name (else $NODE_NAME): its Node's spec.podCIDRs fill usePodCidr when the API is there",
  },
  {
    name: "kubeconfig",
    help: "the Kubernetes API's kubeconfig (else in-cluster when KUBERNETES_SERVICE_HOST is set, else no API)",
  },
  {
    name: "configmap",
    help: "NAMESPACE/NAME: also follow this ConfigMap through the API (the mounted --config-dir is the fallback)",
  },
  {
    name: "health-addr",
    default: "127.0.0.1:9767",
    help: 'health and metrics HTTP address ("" disables)',
  },
  { name: "log-level", default: "info", help: "trace|debug|info|warn|error|fatal|silent" },
  {
    name: "plugin-timeout",
    default: "60",
    help: "seconds a delegated plugin may run before it is killed",
  },
  { name: "max-concurrent", default: "64", help: "calls running at once across attachments" },
  {
    name: "drain-timeout",
    default: "20",
    help: "seconds to let in-flight calls finish on SIGTERM",
  },
  {
    name: "node-link-resync",
    default: "60",
    help: "seconds between re-applications of the midonet datapath's node link and the kernel datapath's routes to other nodes and masquerade (0 disables, else at least 1)",
  },
  {
    name: "deletion-queue-rescan",
    default: "10",
    help: "seconds between looks at the deletion queue the shim fills when it cannot hand us a DEL (0: only at start and on config loads, else at least 1)",
  },
  {
    name: "host-cni-conf-dir",
    help: 'write 10-cni-driver.conflist here once ready ("" = do not)',
  },
  {
    name: "max-connections",
    default: String(DEFAULT_CONNECTION_LIMITS.maxConnections),
    help: "connections to the socket open at once; one more is closed at once, and logged",
  },
  {
    name: "connection-preface-timeout",
    default: String(DEFAULT_CONNECTION_LIMITS.prefaceTimeoutMs / 1000),
    help: "seconds a new connection has to start HTTP/2 before it is closed",
  },
  {
    name: "connection-idle-timeout",
    default: String(DEFAULT_CONNECTION_LIMITS.idleTimeoutMs / 1000),
    help: "seconds a connection may stay open with no call in flight",
  },
];

export interface DriverOptions {
  socket: string;
  configDir: string;
  stateDir: string;
  cacheDir: string;
  binDirs: string[];
  hostLocalDataDir: string;
  /** `--host-local`: host-local in-process on its files (the default), or the binary exec'd. */
  hostLocal?: HostLocalMode;
  podCidrs: { v4?: string; v6?: string };
  nodeName?: string;
  /** `--kubeconfig`; undefined: in-cluster when in a pod, else no API. */
  kubeconfig?: string;
  /** `--configmap` NAMESPACE/NAME. */
  configMap?: string;
  healthAddr: string;
  logLevel: LogLevel;
  pluginTimeoutMs: number;
  maxConcurrent: number;
  drainTimeoutMs: number;
  /** Between re-applications of the node link; 0: only on config loads. */
  nodeLinkResyncMs?: number;
  /** Where to write the host conflist once ready; undefined: do not. */
  hostCniConfDir?: string;
  /** Between replays of the deletion queue; 0: only at start and on config loads. */
  deletionQueueRescanMs?: number;
  /** The socket's connection limits; default DEFAULT_CONNECTION_LIMITS. */
  connectionLimits?: ConnectionLimits;
}

export function driverOptionsFromFlags(v: FlagValues): DriverOptions {
  const str = (k: string) => (typeof v[k] === "string" ? (v[k] as string) : "");
  const num = (k: string) => {
    const n = Number(str(k));
    if (!Number.isFinite(n) || n <= 0)
      throw new Error(`--${k} must be a positive number, not ${JSON.stringify(str(k))}`);
    return n;
  };
  const podCidrs: { v4?: string; v6?: string } = {};
  for (const c of str("pod-cidr")
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean)) {
    if (c.includes(":")) podCidrs.v6 = c;
    else podCidrs.v4 = c;
  }
  const tooLong = socketPathProblem(str("socket"));
  if (tooLong) throw new UsageError(`--socket: ${tooLong}`);
  return {
    socket: str("socket"),
    configDir: str("config-dir"),
    stateDir: str("state-dir"),
    cacheDir: str("cache-dir"),
    binDirs: str("cni-bin-dir").split(":").filter(Boolean),
    hostLocalDataDir: str("host-local-data-dir"),
    hostLocal: hostLocalMode(str("host-local")),
    podCidrs,
    nodeName: str("node-name") || undefined,
    kubeconfig: str("kubeconfig") || undefined,
    configMap: str("configmap") || undefined,
    healthAddr: str("health-addr"),
    logLevel: str("log-level") as LogLevel,
    pluginTimeoutMs: num("plugin-timeout") * 1000,
    maxConcurrent: Math.floor(num("max-concurrent")),
    drainTimeoutMs: num("drain-timeout") * 1000,
    nodeLinkResyncMs: periodSeconds("node-link-resync", str("node-link-resync")) * 1000,
    hostCniConfDir: str("host-cni-conf-dir") || undefined,
    deletionQueueRescanMs:
      periodSeconds("deletion-queue-rescan", str("deletion-queue-rescan")) * 1000,
    connectionLimits: {
      maxConnections: Math.floor(num("max-connections")),
      prefaceTimeoutMs: num("connection-preface-timeout") * 1000,
      idleTimeoutMs: num("connection-idle-timeout") * 1000,
    },
  };
}

export type HostLocalMode = "exec" | "in-process";

function hostLocalMode(v: string): HostLocalMode {
  if (v !== "exec" && v !== "in-process")
    throw new Error(`--host-local must be "exec" or "in-process", not ${JSON.stringify(v)}`);
  return v;
}

/** A period flag: 0 (off), or at least a second so the work cannot turn into a busy loop. */
function periodSeconds(flag: string, v: string): number {
  const n = Number(v);
  if (v.trim() === "" || !Number.isFinite(n) || n < 0 || (n > 0 && n < 1))
    throw new Error(`--${flag} must be 0 or at least 1 (seconds), not ${JSON.stringify(v)}`);
  return n;
}

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

/** How host-local runs here, and why; in-process needs the flock addon. */
function hostLocalBackend(opts: DriverOptions): {
  name: HostLocalMode;
  reason: string;
  fallback: boolean;
} {
  if ((opts.hostLocal ?? "in-process") === "exec")
    return { name: "exec", reason: "--host-local exec", fallback: false };
  const flock = flockAddon();
  if ("reason" in flock)
    return {
      name: "exec",
      reason: `in-process host-local unavailable: ${flock.reason}`,
      fallback: true,
    };
  return { name: "in-process", reason: `--host-local in-process (${flock.path})`, fallback: false };
}

export async function startDriver(
  opts: DriverOptions,
  logger = createLogger({ level: opts.logLevel, name: "cni-driver" }),
): Promise<RunningDriver> {
  // Chosen once, before any pod: rtnetlink in-process, or iproute2 execs without the addon.
  const plumbing = await plumbingBackend();
  logger[plumbing.fallback ? "warn" : "info"](
    { plumbing: plumbing.name, reason: plumbing.reason },
    `pod plumbing through ${plumbing.name}`,
  );
  // Likewise how plugins are exec'd: posix_spawn from the addon, or Node's fork.
  const spawning = spawnBackend();
  logger[spawning.fallback ? "warn" : "info"](
    { spawn: spawning.name, reason: spawning.reason },
    `plugins exec'd through ${spawning.name} spawn`,
  );
  // And host-local: in-process on the binary's files (the default) when the flock addon
  // is there; exec'd with --host-local exec or without the addon.
  const hostLocal = hostLocalBackend(opts);
  logger[hostLocal.fallback ? "warn" : "info"](
    { hostLocal: hostLocal.name, reason: hostLocal.reason },
    `host-local ${hostLocal.name === "exec" ? "exec'd" : "runs in-process"}`,
  );
  const metrics = new Metrics();
  metrics.setInfo({
    version: driverVersion(),
    node: process.version,
    plumbing: plumbing.name,
    spawn: spawning.name,
    host_local: hostLocal.name,
  });
  const bridges = new BridgeCache();
  const midonet = createMidonetPlugin({
    bridges,
    onStaleHostEnd: (hostIfName, containerId) =>
      logger.warn(
        { hostIfName, containerId },
        "replaced a host veth an older sandbox of the same pod left",
      ),
  });
  const builtins = new Map<string, BuiltinPlugin>([[MIDONET_PLUGIN_TYPE, midonet]]);
  if (hostLocal.name === "in-process") {
    builtins.set(HOST_LOCAL_TYPE, createHostLocalPlugin({ lockTimeoutMs: opts.pluginTimeoutMs }));
  }
  const kubeSettings = kubeSettingsFrom({
    kubeconfig: opts.kubeconfig,
    nodeName: opts.nodeName,
    configMap: opts.configMap,
    podCidrGiven: opts.podCidrs.v4 !== undefined || opts.podCidrs.v6 !== undefined,
    configDir: opts.configDir,
    stateDir: opts.stateDir,
  });
  // Its callbacks reach the ConfigSource only after start(), below.
  const kube: KubeIntegration | undefined = kubeSettings
    ? new KubeIntegration(kubeSettings, {
        logger,
        setPodCidrs: (c): Promise<void> => config.setPodCidrs(c),
        reloadConfig: (): Promise<void> => config.reload(),
        metrics,
      })
    : undefined;
  const config: ConfigSource = new ConfigSource({
    resolveDir: kube?.resolveConfigDir,
    dir: opts.configDir,
    binDirs: opts.binDirs,
    podCidrs: opts.podCidrs,
    hostLocalDataDir: opts.hostLocalDataDir,
    builtins: new Map(
      [...builtins].map(([k, b]) => [k, (c: Record<string, unknown>) => b.validate(c)]),
    ),
    logger,
  });
  config.on("reload", (cfg) => {
    metrics.configReloaded(true);
    metrics.setConfigGeneration(cfg.generation);
    logger.info(
      { generation: cfg.generation, networks: [...cfg.networks.keys()], hash: cfg.contentHash },
      "config loaded",
    );
  });
  // The MidoNet datapath's node link follows every load (a pod CIDR change is one),
  // and is re-applied every --node-link-resync seconds in between.
  const nodeLink = new NodeConnectivity({
    logger,
    api: kube?.api.catch(() => undefined),
    nodeName: kubeSettings?.nodeName,
    resyncMs: opts.nodeLinkResyncMs ?? 60_000,
    metrics,
  });
  config.on("reload", (cfg) => nodeLink.apply(cfg));
  // The kernel datapath across nodes: routes to every Node's pods, masquerade
  // (cluster-network/). Follows every load and every Node change.
  const clusterNetwork = new ClusterNetwork({
    logger,
    api: kube?.api.catch(() => undefined),
    nodeName: kubeSettings?.nodeName,
    localPodCidrs: () => opts.podCidrs,
    resyncMs: opts.nodeLinkResyncMs ?? 60_000,
    metrics,
  });
  config.on("reload", (cfg) => clusterNetwork.apply(cfg));
  config.on("error", (e) => {
    metrics.configReloaded(false);
    logger.error(
      { source: e.source, err: e.message },
      "config rejected; keeping the last good config",
    );
  });

  const cache = new ResultCache(opts.cacheDir);
  // Aborted once the drain at shutdown has timed out: plugins still running then
  // would hold the process past --drain-timeout (up to --plugin-timeout).
  const shutdownAbort = new AbortController();
  const runPlugin = createPluginRunner({
    binDirs: opts.binDirs,
    timeoutMs: opts.pluginTimeoutMs,
    builtins,
    signal: shutdownAbort.signal,
  });
  const executor = new ChainExecutor(cache, runPlugin, logger, (type) => builtins.has(type));
  const locks = new AttachmentLocks({ maxConcurrent: opts.maxConcurrent });
  const attachments = new AttachmentIndex((n) => metrics.setAttachments(n));
  // Gateways of ranges no config or attachment uses any more leave the bridges.
  const gateways = new BridgeGatewayPruner({ config, cache, locks, bridges, logger });
  config.on("reload", () => gateways.configLoaded());

  let recovered = false;
  let shuttingDown = false;
  /** Each says why the driver cannot serve ADD now, or nothing. */
  const readinessChecks: Array<() => string[]> = [
    () => (shuttingDown ? ["shutting down"] : []),
    () =>
      config.current()
        ? []
        : [`no valid network configuration: ${config.lastError()?.message ?? "not loaded yet"}`],
    () => (recovered ? [] : ["start-up recovery in progress"]),
  ];
  // The Node's pod CIDR matters only to a config that could not load without it: one
  // that loaded (with it, or with subnets of its own) serves ADD whatever the API does.
  if (kube) readinessChecks.push(() => (config.current() ? [] : kube.notReadyReasons()));
  readinessChecks.push(() => nodeLink.notReadyReasons(config.current()));
  const notReadyReasons = (): string[] => readinessChecks.flatMap((check) => check());

  const service = new DriverService({
    config,
    executor,
    locks,
    metrics,
    logger,
    driverVersion: driverVersion(),
    notReadyReasons,
    attachments,
    podObserver: gateways.observer(kube?.observer),
  });

  await kube?.start();
  clusterNetwork.start();
  // Before serving: a DEL right after a restart must know which sandbox set its pod's annotation.
  await kube?.seedAnnotationOwners(cache);
  await config.start();
  const grpcServer = await startGrpcServer(opts.socket, service, {
    logger,
    limits: opts.connectionLimits ?? DEFAULT_CONNECTION_LIMITS,
  });
  const health = await startHealthServer(opts.healthAddr, {
    live: () => dialUnixSocket(opts.socket, 1000),
    ready: () => {
      const reasons = notReadyReasons();
      metrics.setReady(reasons.length === 0);
      return { ok: reasons.length === 0, reasons };
    },
    metrics: () => metrics.render(),
  });

  // Serving starts before recovery ends so that DELs are never refused; ADDs wait on readiness.
  const recoveryDeps = {
    cache,
    executor,
    config,
    locks,
    attachments,
    stateDir: opts.stateDir,
    logger,
    podObserver: kube?.observer,
  };
  await recoverAtStart(recoveryDeps);
  recovered = true;
  // A shim that found us without a config queued its DELs; a config arriving
  // later makes them replayable without waiting for our next restart. A record
  // can also land while we run: a shim whose connect failed just before we
  // listened, or one that gave up waiting on a slow DEL. So the queue is looked
  // at every --deletion-queue-rescan seconds too; a replayed DEL is idempotent.
  let replaying: Promise<unknown> = Promise.resolve();
  const replayQueue = (): void => {
    replaying = replaying
      .then(() => replayDeletionQueue(recoveryDeps))
      .catch((err) => logger.error({ err: String(err) }, "replaying the deletion queue failed"));
  };
  config.on("reload", replayQueue);
  const rescanMs = opts.deletionQueueRescanMs ?? 10_000;
  const rescan = rescanMs > 0 ? setInterval(replayQueue, rescanMs) : undefined;
  rescan?.unref();
  metrics.setReady(notReadyReasons().length === 0);
  logger.info(
    { socket: opts.socket, health: health.address, attachments: attachments.size },
    "cni-driver serving",
  );
  const hostConflist = opts.hostCniConfDir
    ? gateHostConflist(
        opts.hostCniConfDir,
        { socket: opts.socket, stateDir: opts.stateDir },
        notReadyReasons,
        config,
        logger,
      )
    : undefined;

  return {
    service,
    healthAddress: health.address,
    logger,
    async stop() {
      shuttingDown = true;
      if (rescan) clearInterval(rescan);
      // The host conflist stays: the shim's DEL path needs it while we are away.
      hostConflist?.stop();
      metrics.setReady(false);
      const closing = grpcServer.close();
      const drained = await locks.drain(opts.drainTimeoutMs);
      if (!drained) {
        // Their calls end as canceled (code 11); what they set up is what a crash
        // leaves, which the runtime's DEL or our next start's recovery releases.
        logger.warn(
          { inFlight: locks.inFlight },
          "drain timed out; killing the plugins still running",
        );
        shutdownAbort.abort();
        await locks.drain(PLUGIN_KILL_WAIT_MS);
      }
      const timer = setTimeout(() => grpcServer.forceClose(), 1000);
      await closing;
      clearTimeout(timer);
      await health.close();
      nodeLink.stop();
      await clusterNetwork.stop();
      await kube?.stop();
      await config.close();
    },
  };
}

/**
 * Readiness gating: the host conflist appears only once the driver can serve
 * (AWS #330, Cilium #16602), and is rewritten when it would change. Checked on
 * every config event and once a second until written.
 */
function gateHostConflist(
  dir: string,
  shim: ShimTarget,
  notReadyReasons: () => string[],
  config: ConfigSource,
  logger: pino.Logger,
): { stop(): void } {
  let writing = false;
  const attempt = () => {
    if (writing || notReadyReasons().length > 0) return;
    writing = true;
    installHostConflist(dir, shim)
      .then((written) => {
        if (written) logger.info({ dir, file: HOST_CONFLIST_NAME }, "host conflist written");
      })
      .catch((err) => logger.error({ dir, err: String(err) }, "writing the host conflist failed"))
      .finally(() => {
        writing = false;
      });
  };
  const timer = setInterval(attempt, 1000);
  timer.unref();
  config.on("reload", attempt);
  attempt();
  return {
    stop() {
      clearInterval(timer);
      config.off("reload", attempt);
    },
  };
}
