/**
 * `cni-driver midonet-controller`: flags (each with its CNI_DRIVER_* env twin,
 * as `serve` has), then the controller until SIGTERM or SIGINT.
 */
import { hostname } from "node:os";
import { KubeConfig } from "@kubernetes/client-node";
import {
  type FlagSpec,
  type FlagValues,
  parseFlags,
  UsageError,
  usage,
} from "../../common/flags.js";
import { createLogger, LOG_LEVELS, type LogLevel } from "../../common/logger.js";
import { exitAfterStop, untilStopSignal } from "../../common/stop-signal.js";
import type { TunnelZoneType } from "../resources.js";
import { type MidonetControllerOptions, startMidonetController } from "./controller.js";

export const CONTROLLER_FLAGS: readonly FlagSpec[] = [
  { name: "kubeconfig", help: "kubeconfig file (default: the in-cluster config)" },
  {
    name: "midonet-api",
    help: "MidoNet REST API base URL, e.g. http://midonet-api:8181/midonet-api (required)",
  },
  { name: "midonet-user", help: "MidoNet user for POST /login (a 401 is final without one)" },
  { name: "midonet-password", help: "MidoNet password (prefer the env twin, from a Secret)" },
  { name: "midonet-project", help: "MidoNet project (X-Auth-Project) at login" },
  { name: "midonet-timeout", default: "10", help: "seconds allowed to one MidoNet call" },
  {
    name: "tenant",
    default: "midonetkube",
    help: "MidoNet tenant of our devices; part of every id",
  },
  {
    name: "tunnel-zone-type",
    default: "vxlan",
    help: "type of the default tunnel zone: vxlan, gre",
  },
  {
    name: "health-addr",
    default: "127.0.0.1:9768",
    help: '/livez, /readyz, /metrics; "" disables',
  },
  {
    name: "lease-namespace",
    default: "kube-system",
    help: "namespace of the leader election Lease",
  },
  { name: "lease-name", default: "cni-driver-midonet-controller", help: "name of the Lease" },
  { name: "identity", help: "this replica in the Lease (default: $POD_NAME, else hostname_pid)" },
  { name: "lease-duration", default: "15", help: "seconds a Lease not renewed stays held" },
  { name: "lease-renew-period", default: "5", help: "seconds between renewals (and tries)" },
  {
    name: "lease-renew-deadline",
    default: "10",
    help: "seconds without a renewal after which the leader stops writing",
  },
  {
    name: "resync-period",
    default: "600",
    help: "seconds between full reads of MidoNet; 0: never",
  },
  { name: "host-refresh", default: "30", help: "seconds between looks for nodes' MidoNet hosts" },
  {
    name: "retry-backoff",
    default: "0.5",
    help: "seconds before the first retry of a failed write",
  },
  { name: "max-retry-backoff", default: "60", help: "cap on the retry backoff, seconds" },
  { name: "log-level", default: "info", help: `one of ${LOG_LEVELS.join(", ")}` },
];

function seconds(f: FlagValues, name: string, { positive = true } = {}): number {
  const text = String(f[name] ?? "");
  const n = Number(text);
  if (text === "" || !Number.isFinite(n) || n < 0 || (positive && n === 0)) {
    throw new UsageError(
      `--${name}: want ${positive ? "a positive" : "a"} number of seconds, got ${JSON.stringify(text)}`,
    );
  }
  return Math.round(n * 1000);
}

function text(f: FlagValues, name: string): string | undefined {
  const v = f[name];
  return typeof v === "string" && v !== "" ? v : undefined;
}

/** The controller's options from parsed flags (the logger aside); throws UsageError on a bad value. */
export function controllerOptionsFromFlags(
  f: FlagValues,
  env: NodeJS.ProcessEnv = process.env,
): Omit<MidonetControllerOptions, "logger" | "kubeConfig"> & {
  kubeconfig: string;
  logLevel: LogLevel;
} {
  const api = text(f, "midonet-api");
  if (!api)
    throw new UsageError(
      `--midonet-api is required\n${usage("midonet-controller", CONTROLLER_FLAGS)}`,
    );
  try {
    const url = new URL(api);
    if (url.protocol !== "http:" && url.protocol !== "https:") throw new Error("not http(s)");
  } catch {
    throw new UsageError(`--midonet-api: not an http(s) URL: ${JSON.stringify(api)}`);
  }
  const zoneType = text(f, "tunnel-zone-type") ?? "vxlan";
  if (!["vxlan", "gre"].includes(zoneType)) {
    throw new UsageError(`--tunnel-zone-type: want vxlan or gre, got ${JSON.stringify(zoneType)}`);
  }
  const tenant = text(f, "tenant") ?? "";
  if (tenant === "") throw new UsageError("--tenant may not be empty");
  const logLevel = (text(f, "log-level") ?? "info") as LogLevel;
  if (!LOG_LEVELS.includes(logLevel))
    throw new UsageError(`--log-level: unknown level ${logLevel}`);
  const durationMs = seconds(f, "lease-duration");
  const renewDeadlineMs = seconds(f, "lease-renew-deadline");
  const renewPeriodMs = seconds(f, "lease-renew-period");
  if (renewDeadlineMs >= durationMs) {
    throw new UsageError("--lease-renew-deadline must be shorter than --lease-duration");
  }
  if (renewPeriodMs >= renewDeadlineMs) {
    throw new UsageError("--lease-renew-period must be shorter than --lease-renew-deadline");
  }
  const identity = text(f, "identity") ?? (env.POD_NAME || `${hostname()}_${process.pid}`);
  const user = text(f, "midonet-user");
  const password = text(f, "midonet-password");
  // MidoNet's login splits "user:password" on every ':' and wants exactly two parts
  // (LoginFilter.java): these could never log in, so say so now rather than at each 401.
  if (user !== undefined && (!password || user.includes(":") || password.includes(":"))) {
    throw new UsageError(
      "--midonet-user needs a non-empty --midonet-password, and neither may hold a ':' that MidoNet's login would split on",
    );
  }
  return {
    kubeconfig: text(f, "kubeconfig") ?? "",
    logLevel,
    midonet: {
      baseUrl: api,
      user,
      password,
      project: text(f, "midonet-project"),
      timeoutMs: seconds(f, "midonet-timeout"),
    },
    mapping: { tenant, tunnelZoneType: zoneType as TunnelZoneType },
    lease: {
      namespace: text(f, "lease-namespace") ?? "kube-system",
      name: text(f, "lease-name") ?? "cni-driver-midonet-controller",
      identity,
      durationMs,
      renewPeriodMs,
      renewDeadlineMs,
    },
    healthAddr: typeof f["health-addr"] === "string" ? f["health-addr"] : "127.0.0.1:9768",
    resyncPeriodMs: seconds(f, "resync-period", { positive: false }),
    hostRefreshMs: seconds(f, "host-refresh"),
    backoffMs: seconds(f, "retry-backoff"),
    maxBackoffMs: seconds(f, "max-retry-backoff"),
  };
}

/** Runs the controller until SIGTERM or SIGINT; the exit code. */
export async function runMidonetController(argv: string[]): Promise<number> {
  const { kubeconfig, logLevel, ...options } = controllerOptionsFromFlags(
    parseFlags(CONTROLLER_FLAGS, argv),
  );
  const kubeConfig = new KubeConfig();
  if (kubeconfig) kubeConfig.loadFromFile(kubeconfig);
  else kubeConfig.loadFromCluster();
  const logger = createLogger({ level: logLevel, name: "midonet-controller" });
  const controller = await startMidonetController({ ...options, kubeConfig, logger });
  const signal = await untilStopSignal();
  logger.info({ signal }, "stopping: giving up the lease, then the watches");
  await controller.stop();
  exitAfterStop(0);
  return 0;
}
