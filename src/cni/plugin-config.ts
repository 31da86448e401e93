/**
 * What one plugin of a list reads on stdin (cni-spec §2), built as libcni
 * builds it (api.go: buildOneConfig, InjectConf, injectRuntimeConfig): the
 * plugin's own object from the config, with the list's `name` and
 * `cniVersion` written over it, `prevResult` for chained calls, and
 * `runtimeConfig` holding the capability arguments the plugin asked for.
 */
import { findKeyIgnoringCase } from "./capabilities.js";
import type { NetworkConfigList, PluginConfig } from "./conflist.js";
import { CniError, ErrorCode } from "./errors.js";

interface PluginStdinInput {
  list: NetworkConfigList;
  pluginIndex: number;
  /** The previous plugin's result (ADD) or the cached result (CHECK, DEL), in the list's version. */
  prevResult?: object;
  /** The runtime's capability arguments (normalizeCapabilityArgs' output, or raw). */
  capabilityArgs?: Readonly<Record<string, unknown>>;
}

/** The plugin at `index`; an index outside the list is a caller's bug (code 999). */
export function pluginAt(list: NetworkConfigList, index: number): PluginConfig {
  const plugin = list.plugins[index];
  if (plugin === undefined) {
    throw new CniError(
      ErrorCode.Internal,
      `network ${JSON.stringify(list.name)} has no plugin ${index} (it has ${list.plugins.length})`,
    );
  }
  return plugin;
}

/**
 * libcni's InjectConf: a copy of the plugin's object with `values` set over
 * it. Keys already present keep their place; the copy shares nothing with the
 * parsed config.
 */
export function injectConf(
  raw: Readonly<Record<string, unknown>>,
  values: Readonly<Record<string, unknown>>,
): Record<string, unknown> {
  return { ...structuredClone(raw as Record<string, unknown>), ...values };
}

/**
 * libcni's injectRuntimeConfig: for each capability the plugin marks true,
 * the runtime's argument of that name (found ignoring case, since runtimes
 * and configs do not always agree on case), under the plugin's spelling.
 * Undefined when the plugin gets none of them.
 */
function runtimeConfigFor(
  plugin: PluginConfig,
  capabilityArgs: Readonly<Record<string, unknown>> | undefined,
): Record<string, unknown> | undefined {
  if (!capabilityArgs) return undefined;
  const rc: Record<string, unknown> = {};
  for (const [capability, enabled] of Object.entries(plugin.capabilities)) {
    if (!enabled) continue;
    const key = findKeyIgnoringCase(capabilityArgs, capability);
    if (key !== undefined && capabilityArgs[key] !== undefined) {
      rc[capability] = structuredClone(capabilityArgs[key]);
    }
  }
  return Object.keys(rc).length > 0 ? rc : undefined;
}

/**
 * The stdin of one plugin for ADD, CHECK or DEL, as JSON text.
 *
 * - `name` and `cniVersion` come from the list, whatever the plugin's object says.
 * - `prevResult` is set when given. When not given it is removed, where libcni
 *   would pass on one written in the config file: a plugin must never take a
 *   stale result from a file for the previous plugin's (the first plugin on
 *   ADD, and every plugin below 0.4.0 on DEL, get none).
 * - `runtimeConfig`: when the plugin gets at least one capability argument, it
 *   replaces any `runtimeConfig` written in the plugin's object, as libcni's
 *   injectRuntimeConfig does (it injects a fresh map, it does not merge);
 *   when it gets none, the object's own `runtimeConfig`, if any, is left as is.
 */
export function buildPluginStdin(input: PluginStdinInput): string {
  const { list, pluginIndex, prevResult, capabilityArgs } = input;
  const plugin = pluginAt(list, pluginIndex);
  const conf = injectConf(plugin.raw, { name: list.name, cniVersion: list.cniVersion });
  if (prevResult !== undefined) conf.prevResult = prevResult;
  else delete conf.prevResult;
  const rc = runtimeConfigFor(plugin, capabilityArgs);
  if (rc !== undefined) conf.runtimeConfig = rc;
  return JSON.stringify(conf);
}

/**
 * The stdin of one plugin for STATUS (1.1.0): libcni's GetStatusNetworkList
 * sends the plugin's own object with the list's `name` and `cniVersion`; no
 * prevResult, no runtimeConfig (there is no attachment).
 */
export function buildStatusStdin(list: NetworkConfigList, pluginIndex: number): string {
  const plugin = pluginAt(list, pluginIndex);
  return JSON.stringify(injectConf(plugin.raw, { name: list.name, cniVersion: list.cniVersion }));
}
