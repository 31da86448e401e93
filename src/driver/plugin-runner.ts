/**
 * How the executor runs one plugin of a chain: built-in types in-process, every
 * other type exec'd from the bin dirs with the CNI env protocol. Both see the same
 * invocation, so the chain logic does not care which is which.
 */
import type { CniCommand } from "../cni/env.js";
import { execPlugin } from "./plugin-exec.js";

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
}

export interface PluginRunnerOptions {
  binDirs: readonly string[];
  timeoutMs: number;
  builtins: ReadonlyMap<string, BuiltinPlugin>;
  /** Aborted when the driver gives up waiting on its calls at shutdown: every plugin still running is killed. */
  signal?: AbortSignal;
}

export function createPluginRunner(opts: PluginRunnerOptions): RunPlugin {
  // Plugins get the driver's environment as libcni passes os.Environ(); read once,
  // since reading process.env goes through a native accessor per variable, every exec.
  const baseEnv = { ...process.env };
  const exec: RunPlugin = (inv) =>
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
      ...(opts.signal ? { signal: opts.signal } : {}),
    });
  const runner: RunPlugin = (inv) => {
    const builtin = opts.builtins.get(inv.type);
    return builtin ? builtin.run(inv, runner) : exec(inv);
  };
  return runner;
}
