/**
 * The RPC surface of the driver, apart from what gets configured (Antrea's
 * cniserver split): each handler validates, takes the attachment lock, picks the
 * network from the live config, runs the executor and answers with a CNI result
 * or a CNI error. Transport (gRPC on node:http2) lives in server.ts; the
 * conversions between the proto's messages and the driver's values, in
 * src/wire/convert.ts.
 */
import { performance } from "node:perf_hooks";
import type pino from "pino";
import { type CniArgPair, podIdentityFromArgs } from "../../cni/args.js";
import type { NetworkConfigList } from "../../cni/conflist.js";
import { CniError, ErrorCode } from "../../cni/errors.js";
import type { AnyResult } from "../../cni/types.js";
import { requireVerbSupported, SUPPORTED_VERSIONS } from "../../cni/versions.js";
import { logCall } from "../../common/logger.js";
import {
  fromWireAttachments,
  fromWireError,
  NotReadyError,
  toPodResponse,
  toWireActiveConfig,
  toWireConfigError,
  toWireError,
} from "../../wire/convert.js";
import {
  API_VERSION,
  type CniStatusRequest,
  type CniStatusResponse,
  type ErrorOnlyResponse,
  type GarbageCollectRequest,
  type GarbageCollectResponse,
  type PodRequest,
  type PodResponse,
  type WireCniError,
} from "../../wire/types.js";
import type { ChainExecutor } from "../chain/executor.js";
import { type AttachmentLocks, attachmentKey } from "../chain/locks.js";
import type { ConfigSource } from "../config/config-source.js";
import type { Metrics } from "../metrics.js";
import { HostNetnsGuard } from "./host-netns-guard.js";
import { requireApiVersion, resolvePodRequest } from "./pod-request.js";

/**
 * What the service needs of each part, no more: the seams through which its
 * tests hand it fakes (an executor that records its calls, a config that is
 * just a value).
 */
export interface ServiceDeps {
  config: Pick<ConfigSource, "current" | "lastError">;
  executor: Pick<ChainExecutor, "add" | "del" | "check" | "gc" | "status">;
  locks: AttachmentLocks;
  metrics: Pick<Metrics, "recordCall">;
  logger: pino.Logger;
  driverVersion: string;
  /** Why the driver cannot serve ADD now (empty when it can): config, start-up replay, shutdown. */
  notReadyReasons: () => string[];
  /** Live attachments the driver knows of (kept by the caller from the cache). */
  attachments: AttachmentIndex;
  /** Told of pods set up, torn down or failed, after the answer: never on the CNI path. */
  podObserver?: PodNetworkObserver;
  /** Which namespaces are never a pod's; default: the driver's own and PID 1's. */
  hostNetns?: HostNetnsGuard;
}

/** One attachment, as a PodNetworkObserver hears of it. */
export interface PodAttachmentInfo {
  /** The Kubernetes pod, when the runtime named one (podman's containers have none). */
  pod: { namespace?: string; name?: string; uid?: string };
  containerId: string;
  ifName: string;
  network: string;
}

/**
 * The attachment as observers see it, for a teardown the driver did on its own
 * (GC, a replayed queued DEL): the pod from the CNI_ARGS it was set up or queued with.
 */
export function attachmentInfoFromArgs(
  network: string,
  containerId: string,
  ifName: string,
  cniArgs: readonly CniArgPair[],
): PodAttachmentInfo {
  const { namespace, name, uid } = podIdentityFromArgs(cniArgs);
  return {
    pod: {
      ...(namespace ? { namespace } : {}),
      ...(name ? { name } : {}),
      ...(uid ? { uid } : {}),
    },
    containerId,
    ifName,
    network,
  };
}

/**
 * What happens to pods, for those who act on it outside the RPC (the Kubernetes
 * side: kube/pod-hooks.ts). Called once the answer is on its way; must return
 * at once and never throw (a throw is logged and ignored).
 */
export interface PodNetworkObserver {
  attached(a: PodAttachmentInfo, result: AnyResult): void;
  detached(a: PodAttachmentInfo): void;
  /** `step`: where SetUpPod failed, e.g. "running the plugin chain". */
  setUpFailed(a: PodAttachmentInfo, step: string, error: CniError): void;
}

/**
 * Which attachments exist, by network/container/ifname: counted for CniStatus
 * and metrics, and asked which network a DEL or CHECK that names none means.
 */
export class AttachmentIndex {
  private readonly keys = new Set<string>();
  /** containerId + ifName → the networks it is attached to, oldest first. */
  private readonly networks = new Map<string, string[]>();
  constructor(private readonly onChange: (n: number) => void = () => {}) {}
  add(network: string, containerId: string, ifName: string): void {
    const key = `${network}\u0000${containerId}\u0000${ifName}`;
    if (!this.keys.has(key)) {
      this.keys.add(key);
      const at = `${containerId}\u0000${ifName}`;
      this.networks.set(at, [...(this.networks.get(at) ?? []), network]);
    }
    this.onChange(this.keys.size);
  }
  remove(network: string, containerId: string, ifName: string): void {
    if (this.keys.delete(`${network}\u0000${containerId}\u0000${ifName}`)) {
      const at = `${containerId}\u0000${ifName}`;
      const left = (this.networks.get(at) ?? []).filter((n) => n !== network);
      if (left.length > 0) this.networks.set(at, left);
      else this.networks.delete(at);
    }
    this.onChange(this.keys.size);
  }
  get size(): number {
    return this.keys.size;
  }

  /**
   * The network a DEL or CHECK that names none is about. A runtime going
   * through the host conflist never names one, and the default may have
   * changed since the ADD (driver.json's defaultNetwork, or a new conflist that
   * sorts first): the attachment's own network then, as libcni's runtime would
   * pass the network it set up. The default when the attachment is on it, or
   * on no network the driver knows of; else the network it was set up on last.
   */
  networkFor(containerId: string, ifName: string, defaultNetwork?: string): string | undefined {
    const on = this.networks.get(`${containerId}\u0000${ifName}`) ?? [];
    if (defaultNetwork !== undefined && (on.length === 0 || on.includes(defaultNetwork)))
      return defaultNetwork;
    return on.at(-1) ?? defaultNetwork;
  }
}

/** The network a call went to, for its log line. */
interface CallNetwork {
  network?: string;
}

export class DriverService {
  private readonly hostNetns: HostNetnsGuard;
  constructor(private readonly d: ServiceDeps) {
    this.hostNetns = d.hostNetns ?? new HostNetnsGuard();
  }

  async setUpPod(req: PodRequest): Promise<PodResponse> {
    let version = req.cni_version || "";
    let step = "validating the request";
    let info: PodAttachmentInfo = {
      pod: { ...(req.pod ?? {}) },
      containerId: req.container_id,
      ifName: req.ifname,
      network: req.network,
    };
    return this.observe<PodResponse>(
      "ADD",
      req,
      async (call) => {
        const r = resolvePodRequest(req, "ADD");
        info = { ...info, pod: r.pod, network: r.network };
        await this.hostNetns.refuse("ADD", r.attachment.netns);
        step = "choosing the network";
        const list = this.network(r.network);
        info.network = list.name;
        call.network = list.name;
        version = r.cniVersion ?? list.cniVersion;
        step = "waiting for the driver to be ready";
        this.requireReady();
        step = "running the plugin chain";
        // Indexed under the lock: a DEL that names no network, waiting on it, reads the index.
        const result = await this.d.locks.run(
          attachmentKey(r.attachment.containerId, r.attachment.ifName),
          async () => {
            const added = await this.d.executor.add(
              list,
              r.attachment,
              r.cniVersion ?? list.cniVersion,
            );
            this.d.attachments.add(list.name, r.attachment.containerId, r.attachment.ifName);
            return added;
          },
        );
        step = "converting the result";
        const response = toPodResponse(result, r.cniVersion ?? list.cniVersion);
        this.tell((o) => o.attached(info, result));
        return response;
      },
      (error) => {
        this.tell((o) => o.setUpFailed(info, step, fromWireError(error)));
        return { error, cni_version: version || "", result_json: "", result: null };
      },
    );
  }

  async tearDownPod(req: PodRequest): Promise<ErrorOnlyResponse> {
    return this.observe<ErrorOnlyResponse>(
      "DEL",
      req,
      async (call) => {
        const r = resolvePodRequest(req, "DEL");
        const { containerId, ifName } = r.attachment;
        // No ADD was let into the host's namespace, so nothing of a pod's is there: a DEL
        // naming it runs as if the netns were gone, and never removes the node's own links.
        const host = await this.hostNetns.which(r.attachment.netns);
        if (host) {
          this.d.logger.warn(
            { containerId, ifName, netns: r.attachment.netns, is: host.what },
            "DEL names the host's network namespace: tearing down as if the netns were gone",
          );
          r.attachment.netns = "";
        }
        // The network is chosen under the lock: an ADD of this attachment in flight has indexed its own by then.
        const name = await this.d.locks.run(attachmentKey(containerId, ifName), async () => {
          const cfg = this.d.config.current();
          const network = r.network || this.networkOfAttachment(containerId, ifName);
          call.network = network || undefined;
          if (!network)
            throw new NotReadyError([
              "no valid network configuration loaded, and the request names no network",
            ]);
          // A network gone from the config is still torn down from its cached config.
          await this.d.executor.del(cfg?.networks.get(network), network, r.attachment);
          this.d.attachments.remove(network, containerId, ifName);
          return network;
        });
        this.tell((o) =>
          o.detached({
            pod: r.pod,
            containerId: r.attachment.containerId,
            ifName: r.attachment.ifName,
            network: name,
          }),
        );
        return { error: null };
      },
      (error) => ({ error }),
    );
  }

  async checkPod(req: PodRequest): Promise<ErrorOnlyResponse> {
    return this.observe<ErrorOnlyResponse>(
      "CHECK",
      req,
      async (call) => {
        const r = resolvePodRequest(req, "CHECK");
        if (r.cniVersion) requireVerbSupported("CHECK", r.cniVersion);
        await this.hostNetns.refuse("CHECK", r.attachment.netns);
        const { containerId, ifName } = r.attachment;
        await this.d.locks.run(attachmentKey(containerId, ifName), () => {
          const list = this.network(r.network || this.networkOfAttachment(containerId, ifName));
          call.network = list.name;
          return this.d.executor.check(list, r.attachment, r.cniVersion);
        });
        return { error: null };
      },
      (error) => ({ error }),
    );
  }

  async cniStatus(req: CniStatusRequest): Promise<CniStatusResponse> {
    const cfg = this.d.config.current();
    const lastError = this.d.config.lastError();
    const base: CniStatusResponse = {
      error: null,
      ready: false,
      not_ready_reasons: [],
      config: cfg ? toWireActiveConfig(cfg) : null,
      last_config_error: lastError ? toWireConfigError(lastError) : null,
      supported_cni_versions: [...SUPPORTED_VERSIONS],
      driver_version: this.d.driverVersion,
      attachments: this.d.attachments.size,
      api_version: API_VERSION,
    };
    return this.observe<CniStatusResponse>(
      "STATUS",
      undefined,
      async (call) => {
        requireApiVersion(req.api_version);
        const reasons = this.d.notReadyReasons();
        base.not_ready_reasons = reasons;
        base.ready = reasons.length === 0;
        if (!base.ready) {
          throw new CniError(
            ErrorCode.PluginNotAvailable,
            `cni-driver cannot serve ADD: ${reasons.join("; ")}`,
          );
        }
        const list = this.network(req.network);
        call.network = list.name;
        await this.d.executor.status(list).catch((err) => {
          const e = CniError.from(err);
          // A plugin's own STATUS answer (50/51) passes through; anything else means "cannot serve".
          throw e.code === 50 || e.code === 51
            ? e
            : new CniError(ErrorCode.PluginNotAvailable, e.message, e.details);
        });
        return base;
      },
      (error) => ({ ...base, error }),
    );
  }

  async garbageCollect(req: GarbageCollectRequest): Promise<GarbageCollectResponse> {
    return this.observe<GarbageCollectResponse>(
      "GC",
      undefined,
      async (call) => {
        requireApiVersion(req.api_version);
        const errors: CniError[] = [];
        let removed = 0;
        // Every network named is resolved before any is collected: an unknown
        // one fails the call with nothing removed, rather than halfway through.
        const lists = req.networks.map((n) => this.network(n.network));
        call.network = lists.map((l) => l.name).join(",");
        await this.d.locks.exclusive(async () => {
          for (const [i, n] of req.networks.entries()) {
            const list = lists[i] as NetworkConfigList;
            const out = await this.d.executor.gc(list, fromWireAttachments(n.valid_attachments));
            removed += out.removed;
            errors.push(...out.errors);
            for (const gone of out.removedAttachments) {
              this.d.attachments.remove(list.name, gone.containerId, gone.ifName);
              const info = attachmentInfoFromArgs(
                list.name,
                gone.containerId,
                gone.ifName,
                gone.cniArgs,
              );
              this.tell((o) => o.detached(info));
            }
          }
        });
        const wire = errors.map(toWireError);
        return { error: wire[0] ?? null, errors: wire, removed_attachments: removed };
      },
      (error) => ({ error, errors: [error], removed_attachments: 0 }),
    );
  }

  /** For a call that names no network: the attachment's own (see AttachmentIndex.networkFor), "" when none is known. */
  private networkOfAttachment(containerId: string, ifName: string): string {
    const defaultNetwork = this.d.config.current()?.defaultNetwork;
    return this.d.attachments.networkFor(containerId, ifName, defaultNetwork) ?? "";
  }

  private network(name: string): NetworkConfigList {
    const cfg = this.d.config.current();
    if (!cfg) {
      throw new NotReadyError([
        this.d.config.lastError()?.message ?? "no network configuration loaded yet",
      ]);
    }
    const want = name || cfg.defaultNetwork;
    const list = cfg.networks.get(want);
    if (!list) {
      throw new CniError(
        ErrorCode.InvalidNetworkConfig,
        `no network named "${want}" in the driver's configuration (networks: ${[...cfg.networks.keys()].join(", ")})`,
      );
    }
    return list;
  }

  /**
   * Tells the observer, after the answer: setImmediate runs once the response
   * has been handed to the transport, so nothing an observer does (even
   * synchronously) delays it.
   */
  private tell(fn: (o: PodNetworkObserver) => void): void {
    const observer = this.d.podObserver;
    if (!observer) return;
    setImmediate(() => {
      try {
        fn(observer);
      } catch (err) {
        this.d.logger.error({ err: String(err) }, "pod observer failed");
      }
    });
  }

  private requireReady(): void {
    const reasons = this.d.notReadyReasons();
    if (reasons.length > 0) throw new NotReadyError(reasons);
  }

  /**
   * Times the call, logs one line and counts it, and turns any failure into the
   * response's CNI error. The line names the network the call went to, which
   * `fn` sets once it has chosen it (a request naming none gets the default, or
   * the network its attachment was set up on).
   */
  private async observe<T>(
    verb: string,
    req: PodRequest | undefined,
    fn: (call: CallNetwork) => Promise<T>,
    onError: (e: WireCniError) => T,
  ): Promise<T> {
    const start = performance.now();
    const call: CallNetwork = { network: req?.network || undefined };
    let error: CniError | undefined;
    let out: T;
    try {
      out = await fn(call);
      const wireErr = (out as { error?: WireCniError | null }).error;
      if (wireErr && wireErr.code !== 0) error = fromWireError(wireErr);
    } catch (err) {
      error = CniError.from(err);
      out = onError(toWireError(error));
    }
    const durationMs = performance.now() - start;
    this.d.metrics.recordCall(verb, error ? "error" : "ok", durationMs / 1000, error?.code);
    logCall(this.d.logger, {
      verb,
      containerId: req?.container_id || undefined,
      ifName: req?.ifname || undefined,
      network: call.network,
      durationMs,
      outcome: error ? "error" : "ok",
      code: error?.code,
      msg: error?.message,
    });
    return out;
  }
}
