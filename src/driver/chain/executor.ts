/**
 * The chain executor: libcni's list semantics (AddNetworkList, DelNetworkList,
 * CheckNetworkList, GCNetworkList, GetStatusNetworkList), re-implemented over a
 * RunPlugin that runs built-in plugins in-process and execs the rest.
 *
 * One deliberate difference from libcni: an ADD that fails part-way undoes what
 * it did (DEL of the plugins that ran, newest first) before the error goes back,
 * so no address or link is left waiting for a DEL the runtime may never send.
 */
import type { CniArgPair } from "../../cni/args.js";
import { formatCniArgs } from "../../cni/args.js";
import { type NetworkConfigList, parseNetworkConfigList } from "../../cni/conflist.js";
import { CniError, ErrorCode } from "../../cni/errors.js";
import { buildGcStdin, type GcAttachment, staleAttachments } from "../../cni/gc.js";
import { buildPluginStdin, buildStatusStdin } from "../../cni/plugin-config.js";
import { convertResult } from "../../cni/result-convert.js";
import { parseResult } from "../../cni/result-read.js";
import type { AnyResult } from "../../cni/types.js";
import { type CniVersion, requireVerbSupported, versionAtLeast } from "../../cni/versions.js";
import { toleratedCheckFailure } from "./plugin-bugs.js";
import type { RunPlugin } from "./plugin-runner.js";
import type { ResultCache } from "./result-cache.js";

/** What libcni calls the RuntimeConf: one attachment's arguments. */
export interface AttachmentArgs {
  containerId: string;
  netns: string;
  ifName: string;
  cniArgs: CniArgPair[];
  capabilityArgs: Record<string, unknown>;
  /** `args` of the runtime's config (e.g. args.cni.ips), passed to every plugin. */
  extraArgs?: Record<string, unknown>;
}

export interface ValidAttachment {
  containerId: string;
  ifName: string;
}

/** An attachment GC tore down, with the CNI_ARGS it was set up with (its pod, for observers). */
export interface RemovedAttachment extends ValidAttachment {
  cniArgs: readonly CniArgPair[];
}

export interface ExecutorLogger {
  warn(obj: object, msg: string): void;
  debug?(obj: object, msg: string): void;
}

export class ChainExecutor {
  /**
   * `isBuiltin`: whether a plugin type runs in-process (the driver's own, which
   * can be asked CHECK at any network version); default: none does.
   */
  constructor(
    private readonly cache: ResultCache,
    private readonly runPlugin: RunPlugin,
    private readonly log?: ExecutorLogger,
    private readonly isBuiltin: (type: string) => boolean = () => false,
  ) {}

  /**
   * ADD: plugins in order, each given the previous result; the cache is written
   * only on success. An attachment already set up (its cache entry is there) is
   * answered from the cache: the runtime is asking again, e.g. the shim retrying
   * after the driver died between writing the cache and answering. Running the
   * chain again would fail (host-local: "duplicate allocation") and the undo of
   * that failure would tear the live attachment down. The same container id and
   * interface in another netns is refused: DEL comes first.
   *
   * `answerVersion`, the version the caller wants its answer in, is tried on the
   * result before the attachment is kept: a result it cannot carry (0.1.0/0.2.0
   * hold only IP addresses) fails the ADD whole, undone, rather than leaving up
   * an attachment whose caller heard only of an error.
   */
  async add(
    list: NetworkConfigList,
    att: AttachmentArgs,
    answerVersion?: CniVersion,
  ): Promise<AnyResult> {
    const existing = await this.cache.read(list.name, att.containerId, att.ifName, {
      discardUnusable: false,
    });
    if (existing?.result !== undefined) {
      if (existing.netns && existing.netns !== att.netns) {
        throw new CniError(
          ErrorCode.Internal,
          `container ${att.containerId} interface ${att.ifName} is already set up on network ${list.name} in netns ${existing.netns}; DEL it before setting it up in ${att.netns}`,
        );
      }
      const cached = this.cachedResultIn(existing.result, list, att, false);
      if (cached) {
        this.log?.warn(
          { network: list.name, containerId: att.containerId, ifName: att.ifName },
          "ADD of an attachment already set up: answered from its cache entry",
        );
        // Refused with the same clear error as a first ADD; the attachment stays,
        // since an earlier ADD set it up and was answered.
        if (answerVersion !== undefined && answerVersion !== list.cniVersion)
          requireAnswerable(list, cached, answerVersion);
        return cached;
      }
    }
    let result: AnyResult | undefined;
    let ran = 0;
    try {
      for (let i = 0; i < list.plugins.length; i++) {
        ran = i + 1;
        const out = await this.invoke(list, i, "ADD", att, result);
        if (out === undefined) {
          throw new CniError(
            ErrorCode.DecodingFailure,
            `plugin ${describe(list, i)} printed no result on ADD`,
          );
        }
        result = convertResult(parseResult(out, list.cniVersion), list.cniVersion);
      }
      if (!result)
        throw new CniError(ErrorCode.InvalidNetworkConfig, `network ${list.name} has no plugins`);
      if (answerVersion !== undefined && answerVersion !== list.cniVersion)
        requireAnswerable(list, result, answerVersion);
      await this.cache.write({
        containerId: att.containerId,
        config: list.bytes,
        ifName: att.ifName,
        networkName: list.name,
        netns: att.netns,
        cniArgs: att.cniArgs,
        capabilityArgs: att.capabilityArgs,
        result,
      });
      return result;
    } catch (err) {
      const cause = CniError.from(err);
      const undo = await this.undo(list, att, ran, result);
      throw undo.length === 0
        ? cause
        : new CniError(
            cause.code,
            cause.message,
            [cause.details, `undo: ${undo.join("; ")}`].filter(Boolean).join("; "),
          );
    }
  }

  /** Tears down the plugins that ran, newest first; returns the errors (the original failure wins). */
  private async undo(
    list: NetworkConfigList,
    att: AttachmentArgs,
    ran: number,
    lastGood: AnyResult | undefined,
  ): Promise<string[]> {
    const errors: string[] = [];
    const prev = versionAtLeast(list.cniVersion, "0.4.0") ? lastGood : undefined;
    for (let i = ran - 1; i >= 0; i--) {
      try {
        await this.invoke(list, i, "DEL", att, prev);
      } catch (err) {
        errors.push(`${describe(list, i)}: ${CniError.from(err).message}`);
      }
    }
    if (errors.length > 0)
      this.log?.warn(
        { network: list.name, containerId: att.containerId, errors },
        "undo after failed ADD left errors",
      );
    return errors;
  }

  /**
   * DEL: plugins in reverse, each given the cached result (≥ 0.4.0). The cached
   * config wins over `current`: an attachment is torn down as it was set up, even
   * after the ConfigMap changed. The cache goes only once every plugin succeeded.
   */
  async del(
    current: NetworkConfigList | undefined,
    networkName: string,
    att: AttachmentArgs,
  ): Promise<void> {
    const cached = await this.cache.read(networkName, att.containerId, att.ifName);
    let list = current;
    const hasConfig = !!cached?.config && cached.config.length > 0;
    if (cached?.config && hasConfig) {
      try {
        list = parseNetworkConfigList(cached.config);
      } catch (err) {
        this.log?.warn(
          { network: networkName, containerId: att.containerId, err: String(err) },
          "cached config unreadable; using the current one",
        );
      }
    }
    if (!list) {
      if (!cached) return; // Nothing was set up that we know of, and no config to run: nothing to do.
      throw new CniError(
        ErrorCode.InvalidNetworkConfig,
        `network ${networkName} is not configured and its cache entry for ${att.containerId}/${att.ifName} ${hasConfig ? "holds a config that cannot be read" : "holds no config (an older cache format)"}`,
      );
    }
    const prev = versionAtLeast(list.cniVersion, "0.4.0")
      ? this.cachedResultIn(cached?.result, list, att, true)
      : undefined;
    // A DEL that carries no capability args (a direct TearDownPod, a replayed queued
    // deletion) runs with those the ADD was given, from the cache: portmap's DEL, for
    // one, removes nothing unless it is handed the port mappings again.
    const delAtt =
      Object.keys(att.capabilityArgs).length === 0 && cached?.capabilityArgs
        ? { ...att, capabilityArgs: cached.capabilityArgs }
        : att;
    for (let i = list.plugins.length - 1; i >= 0; i--) {
      await this.invoke(list, i, "DEL", delAtt, prev, cached?.result);
    }
    await this.cache.remove(networkName, att.containerId, att.ifName);
  }

  /**
   * CHECK: needs ≥ 0.4.0 and a cached result; plugins in order.
   *
   * A network below 0.4.0 has no CHECK, but a caller whose own version has it
   * (`callerVersion`: CRI-O CHECKs right after every ADD, through a host
   * conflist at 1.0.0) is answered for what the driver itself set up: its
   * built-in plugins are checked against the cached result, and the exec'd
   * plugins, which refuse CHECK at the network's version, are skipped.
   */
  async check(
    list: NetworkConfigList,
    att: AttachmentArgs,
    callerVersion?: CniVersion,
  ): Promise<void> {
    const ownOnly =
      !versionAtLeast(list.cniVersion, "0.4.0") &&
      callerVersion !== undefined &&
      versionAtLeast(callerVersion, "0.4.0");
    if (!ownOnly) requireVerbSupported("CHECK", list.cniVersion);
    if (list.disableCheck) return;
    // libcni's CHECK fails on a cache it cannot use and keeps it; only DEL removes one.
    const cached = await this.cache.read(list.name, att.containerId, att.ifName, {
      discardUnusable: false,
    });
    const prev = this.cachedResultIn(cached?.result, list, att, false);
    if (!prev) {
      throw new CniError(
        ErrorCode.UnknownContainer,
        `could not retrieve cached result for network "${list.name}", container ${att.containerId}, interface ${att.ifName}`,
      );
    }
    const skipped: string[] = [];
    for (let i = 0; i < list.plugins.length; i++) {
      const type = list.plugins[i]?.type ?? "";
      if (ownOnly && !this.isBuiltin(type)) {
        skipped.push(type);
        continue;
      }
      try {
        // Below 0.4.0 no stdin carries a prevResult: a built-in plugin gets the cached one aside.
        if (ownOnly) await this.invoke(list, i, "CHECK", att, undefined, prev);
        else await this.invoke(list, i, "CHECK", att, prev);
      } catch (err) {
        const excuse = toleratedCheckFailure(type, CniError.from(err), prev);
        if (excuse === undefined) throw err;
        this.log?.warn(
          { network: list.name, containerId: att.containerId, plugin: type },
          `CHECK passed despite ${type}: ${excuse}`,
        );
      }
    }
    if (skipped.length > 0)
      this.log?.debug?.(
        { network: list.name, containerId: att.containerId, cniVersion: list.cniVersion, skipped },
        "CHECK of a network below 0.4.0: the driver's own plugins checked, the others cannot be asked",
      );
  }

  /**
   * GC: every cached attachment of this network that is not valid gets a full DEL
   * (from its cached netns, args and capability args); then, from 1.1.0, GC to each
   * plugin. Keeps going after errors and returns them all.
   */
  async gc(
    list: NetworkConfigList,
    valid: readonly ValidAttachment[],
  ): Promise<{ removed: number; removedAttachments: RemovedAttachment[]; errors: CniError[] }> {
    if (list.disableGC) return { removed: 0, removedAttachments: [], errors: [] };
    const validSet: GcAttachment[] = valid.map((v) => ({
      containerID: v.containerId,
      ifname: v.ifName,
    }));
    const errors: CniError[] = [];
    const removedAttachments: RemovedAttachment[] = [];
    for (const entry of staleAttachments(await this.cache.list(), list.name, validSet)) {
      try {
        await this.del(list, list.name, {
          containerId: entry.containerId,
          netns: entry.netns ?? "",
          ifName: entry.ifName,
          cniArgs: entry.cniArgs ?? [],
          capabilityArgs: entry.capabilityArgs ?? {},
        });
        removedAttachments.push({
          containerId: entry.containerId,
          ifName: entry.ifName,
          cniArgs: entry.cniArgs ?? [],
        });
      } catch (err) {
        const e = CniError.from(err);
        errors.push(
          new CniError(
            e.code,
            `failed to delete stale attachment ${entry.containerId} ${entry.ifName}: ${e.message}`,
            e.details,
          ),
        );
      }
    }
    if (versionAtLeast(list.cniVersion, "1.1.0")) {
      for (let i = 0; i < list.plugins.length; i++) {
        const plugin = list.plugins[i]!;
        try {
          await this.runPlugin({
            type: plugin.type,
            command: "GC",
            config: JSON.parse(buildGcStdin(list, i, validSet)) as Record<string, unknown>,
          });
        } catch (err) {
          const e = CniError.from(err);
          errors.push(
            new CniError(
              e.code,
              `failed to GC plugin ${describe(list, i)}: ${e.message}`,
              e.details,
            ),
          );
        }
      }
    }
    return { removed: removedAttachments.length, removedAttachments, errors };
  }

  /** STATUS: nothing to ask below 1.1.0; otherwise each plugin in order, first error wins. */
  async status(list: NetworkConfigList): Promise<void> {
    if (!versionAtLeast(list.cniVersion, "1.1.0")) return;
    for (let i = 0; i < list.plugins.length; i++) {
      const plugin = list.plugins[i]!;
      await this.runPlugin({
        type: plugin.type,
        command: "STATUS",
        config: JSON.parse(buildStatusStdin(list, i)) as Record<string, unknown>,
      });
    }
  }

  /** The cached result in the list's version; undefined when there is none or it is unusable (removed if `removeUnusable`). */
  private cachedResultIn(
    raw: unknown,
    list: NetworkConfigList,
    att: AttachmentArgs,
    removeUnusable: boolean,
  ): AnyResult | undefined {
    if (raw === undefined || raw === null) return undefined;
    try {
      return convertResult(parseResult(raw, list.cniVersion), list.cniVersion);
    } catch (err) {
      // libcni's DEL deletes a cache it cannot use and goes on without it; its CHECK fails.
      this.log?.warn(
        { network: list.name, containerId: att.containerId, err: String(err) },
        removeUnusable ? "cached result unusable; removing it" : "cached result unusable",
      );
      if (removeUnusable) this.cache.remove(list.name, att.containerId, att.ifName).catch(() => {});
      return undefined;
    }
  }

  private async invoke(
    list: NetworkConfigList,
    index: number,
    command: "ADD" | "DEL" | "CHECK",
    att: AttachmentArgs,
    prevResult: AnyResult | undefined,
    cachedResult?: unknown,
  ): Promise<unknown> {
    const plugin = list.plugins[index]!;
    const config = JSON.parse(
      buildPluginStdin({
        list,
        pluginIndex: index,
        prevResult,
        capabilityArgs: att.capabilityArgs,
      }),
    ) as Record<string, unknown>;
    if (att.extraArgs && config.args === undefined) config.args = att.extraArgs;
    try {
      return await this.runPlugin({
        type: plugin.type,
        command,
        containerId: att.containerId,
        netns: att.netns,
        ifName: att.ifName,
        cniArgs: formatCniArgs(att.cniArgs),
        config,
        ...(cachedResult !== undefined ? { cachedResult } : {}),
      });
    } catch (err) {
      const e = CniError.from(err);
      // Name the step, keep the plugin's code (libcni: "plugin X failed (add): …").
      throw new CniError(
        e.code,
        `plugin ${describe(list, index)} failed (${command.toLowerCase()}): ${e.message}`,
        e.details,
      );
    }
  }
}

function describe(list: NetworkConfigList, index: number): string {
  const p = list.plugins[index];
  return `type="${p?.type}"${list.plugins.length > 1 ? ` (#${index + 1} of network "${list.name}")` : ` (network "${list.name}")`}`;
}

/** Throws, naming the network and the version, when the result cannot be given in `version`. */
function requireAnswerable(list: NetworkConfigList, result: AnyResult, version: CniVersion): void {
  try {
    convertResult(result, version);
  } catch (err) {
    const cause = CniError.from(err);
    throw new CniError(
      cause.code,
      `the result of network ${list.name} cannot be given in CNI ${version}: ${cause.message}`,
      cause.details,
    );
  }
}
