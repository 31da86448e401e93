/**
 * `cni-driver serve`'s flags (each with its env twin) and the options they
 * become; every check of a flag's value is here, so a bad flag stops the
 * driver before anything starts.
 */
import { DEFAULT_SOCKET, DEFAULT_STATE_DIR, socketPathProblem } from "../../cni/socket-path.js";
import { type FlagSpec, type FlagValues, UsageError } from "../../common/flags.js";
import type { LogLevel } from "../../common/logger.js";
import { type ConnectionLimits, DEFAULT_CONNECTION_LIMITS } from "../rpc/connection-gate.js";
import type { HostLocalMode } from "./backends.js";

export const SERVE_FLAGS: readonly FlagSpec[] = [
  { name: "socket", default: DEFAULT_SOCKET, help: "the gRPC unix socket" },
  { name: "config-dir", default: "/etc/cni-driver", help: "the mounted ConfigMap directory" },
  { name: "state-dir", default: DEFAULT_STATE_DIR, help: "driver state: the deletion queue" },
  {
    name: "cache-dir",
    default: DEFAULT_STATE_DIR,
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
