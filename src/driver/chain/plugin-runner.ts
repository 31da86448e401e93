/**
 * How the executor runs one plugin of a chain: built-in types in-process, every
 * other type exec'd from the bin dirs with the CNI env protocol. Both see the same
 * invocation, so the chain logic does not care which is which.
 */
import type pino from "pino";
import type { NetworkConfigList } from "../../cni/conflist.js";
import type { CniCommand } from "../../cni/env.js";
import { execPlugin } from "./plugin-exec.js";
import type { SpawnBackend } from "./plugin-process.js";

export interface PluginInvocation {
  type: string;
  command: CniCommand;
  containerId?: string;
  netns?: string;
  ifName?: string;
  /** CNI_ARGS text, "K=V;K=V". */
  cniArgs?: string;
  /** The plugin's stdin object: its own config with name, cniVersion, prevResult and runtimeConfig. */
  config: Record<string, unknown>;
  /**
   * DEL only, for built-in plugins: the attachment's cached result as the cache
   * holds it, whatever the network's version. libcni hands plugins no
   * prevResult below 0.4.0, but a built-in plugin still needs to know what it
   * made (the midonet plugin: its host end's MAC). Exec'd plugins never see it.
   */
  cachedResult?: unknown;
}

/** Runs a plugin; resolves to its parsed stdout (undefined when it printed nothing). */
export type RunPlugin = (inv: PluginInvocation) => Promise<unknown | undefined>;

export interface BuiltinPlugin {
  /** Validates the plugin's own config object at config load; throws CniError code 7 naming the key. */
  validate(conf: Record<string, unknown>): void;
  /** Runs a verb; `delegate` runs a delegated plugin (IPAM) with the same environment. */
  run(inv: PluginInvocation, delegate: RunPlugin): Promise<unknown | undefined>;
  /**
   * At start, before the driver is ready: undo what an ADD killed half-way
   * left behind (it left no cache entry), judged only from the networks and
   * the attachments the result cache holds, never from the Kubernetes API,
   * whose pod status lags the ADD.
   */
  recover?(view: RecoveryView): Promise<void>;
}

/** What a built-in plugin's recover() is told. */
export interface RecoveryView {
  networks: readonly NetworkConfigList[];
  /** Every attachment the result cache holds, with its cached result. */
  attachments: ReadonlyArray<{
    networkName: string;
    containerId: string;
    ifName: string;
    result?: Record<string, unknown>;
  }>;
  logger: pino.Logger;
}

interface PluginRunnerOptions {
  binDirs: readonly string[];
  timeoutMs: number;
  builtins: ReadonlyMap<string, BuiltinPlugin>;
  /** Aborted when the driver gives up waiting on its calls at shutdown: every plugin still running is killed. */
  signal?: AbortSignal;
  /** How plugins are started: the one the daemon chose at start (lifecycle/backends.ts). */
  spawn: SpawnBackend;
}

export function createPluginRunner(opts: PluginRunnerOptions): RunPlugin {
  // Plugins get the driver's environment as libcni passes os.Environ(); read once,
  // since reading process.env goes through a native accessor per variable, every exec.
  const baseEnv = { ...process.env };
  const shutdown = opts.signal ? abortFanOut(opts.signal) : undefined;
  const exec: RunPlugin = async (inv) => {
    const run = shutdown?.enter();
    try {
      return await execOne(inv, run?.signal);
    } finally {
      run?.leave();
    }
  };
  const execOne = (inv: PluginInvocation, signal: AbortSignal | undefined) =>
    execPlugin({
      type: inv.type,
      binDirs: opts.binDirs,
      command: inv.command,
      containerId: inv.containerId,
      netns: inv.netns,
      ifName: inv.ifName,
      cniArgs: inv.cniArgs,
      stdin: JSON.stringify(inv.config),
      timeoutMs: opts.timeoutMs,
      baseEnv,
      ...(signal ? { signal } : {}),
      spawn: opts.spawn,
    });
  const runner: RunPlugin = (inv) => {
    const builtin = opts.builtins.get(inv.type);
    return builtin ? builtin.run(inv, runner) : exec(inv);
  };
  return runner;
}

/**
 * One listener on the shutdown signal, whatever the number of plugins running:
 * each run gets a signal of its own, aborted from here. Every run adding its
 * listener to the shared signal would pile them up past Node's limit of 10
 * (a MaxListenersExceededWarning on stderr, in a log that is JSON lines only).
 */
function abortFanOut(shared: AbortSignal): {
  enter(): { signal: AbortSignal; leave(): void };
  /** Runs entered and not yet left. */
  size(): number;
} {
  const running = new Set<AbortController>();
  shared.addEventListener(
    "abort",
    () => {
      for (const c of running) c.abort(shared.reason);
    },
    { once: true },
  );
  return {
    enter() {
      const c = new AbortController();
      if (shared.aborted) c.abort(shared.reason);
      else running.add(c);
      return { signal: c.signal, leave: () => running.delete(c) };
    },
    size: () => running.size,
  };
}
