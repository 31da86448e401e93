/**
 * The driver and the Kubernetes API, wired: all of it optional. Without an API
 * (no `--kubeconfig`, not in a pod) none of this exists and the driver runs
 * standalone; with one:
 *
 * - the Node's `spec.podCIDRs` fill `usePodCidr` / `usePodCidrIPv6`
 *   (kube/node-pod-cidrs.ts), unless `--pod-cidr` is given, which wins; until
 *   the Node has one, the driver is not ready and says why;
 * - after ADD, the pod is annotated `midonet.org/mac-address`, removed on DEL
 *   of the attachment that set it (kube/pod-annotations.ts,
 *   kube/annotation-owners.ts: who set it is seeded from the result cache at
 *   start, before the first DEL is served);
 * - `--configmap NAMESPACE/NAME` follows the ConfigMap through the API, the
 *   mount being the fallback (kube/configmap-mirror.ts);
 * - a failed SetUpPod leaves a Warning Event on the Pod (kube/pod-events.ts).
 *
 * The API client loads in the background (`start()` does not wait for it):
 * the socket serves, DELs go through and ADDs that need nothing from the API
 * are answered while it loads, and while the API server is away. Nothing on
 * the CNI path waits on the API.
 */
import { join } from "node:path";
import type pino from "pino";
import type { BackoffPolicy } from "../../common/backoff.js";
import { ANNOTATION_MAC_ADDRESS } from "../../midonet/node-contract.js";
import type { ListedAttachment } from "../chain/result-cache.js";
import type { PodCidrs } from "../config/pod-cidr.js";
import type { PodAttachmentInfo, PodNetworkObserver } from "../rpc/service.js";
import { AnnotationOwners, annotationOwnersFromCache } from "./annotation-owners.js";
import {
  connectKubeApi,
  describeKubeConfigSource,
  type KubeApi,
  type KubeConfigSource,
  kubeConfigSource,
} from "./api.js";
import { ConfigMapMirror, type ConfigMapRef, parseConfigMapRef } from "./configmap-mirror.js";
import { NodePodCidrs } from "./node-pod-cidrs.js";
import {
  ANNOTATED_IF_NAME,
  type PodAnnotationMetrics,
  PodAnnotationQueue,
  podInterfaceMac,
} from "./pod-annotations.js";
import { type PodEventMetrics, PodEventRecorder } from "./pod-events.js";

/** The API copy of the `--configmap` ConfigMap, under `--state-dir`. */
// Exported for its tests only (integration/driver-kube.test.ts).
export const CONFIGMAP_COPY_DIR = "configmap-api";

export interface KubeSettings {
  source: KubeConfigSource;
  /** This node; without it the Node is not followed and Events name no host. */
  nodeName?: string;
  configMap?: ConfigMapRef;
  /** `--pod-cidr` was given: it wins, the Node is not followed. */
  podCidrGiven: boolean;
  /** `--config-dir`, the mounted ConfigMap (the fallback). */
  mountDir: string;
  stateDir: string;
  /** Tuning for tests; the defaults suit a node. */
  tuning?: {
    requestTimeoutMs?: number;
    watchBackoff?: BackoffPolicy;
    annotationBackoff?: BackoffPolicy;
    annotationAttempts?: number;
  };
}

/**
 * The settings from the serve flags, or undefined when there is no API. The
 * node name falls back to `NODE_NAME` (the downward API's usual name).
 * Throws on a malformed `--configmap`, and on `--configmap` without an API.
 */
export function kubeSettingsFrom(
  f: {
    kubeconfig?: string;
    nodeName?: string;
    configMap?: string;
    podCidrGiven: boolean;
    configDir: string;
    stateDir: string;
  },
  env: NodeJS.ProcessEnv = process.env,
): KubeSettings | undefined {
  const configMap = f.configMap ? parseConfigMapRef(f.configMap) : undefined;
  const source = kubeConfigSource(f.kubeconfig, env);
  if (!source) {
    if (configMap)
      throw new Error(
        "--configmap needs the Kubernetes API: give --kubeconfig, or run in a pod (KUBERNETES_SERVICE_HOST)",
      );
    return undefined;
  }
  return {
    source,
    nodeName: f.nodeName || env.NODE_NAME || undefined,
    configMap,
    podCidrGiven: f.podCidrGiven,
    mountDir: f.configDir,
    stateDir: f.stateDir,
  };
}

export interface KubeIntegrationDeps {
  logger: pino.Logger;
  /** The ConfigSource's setPodCidrs. */
  setPodCidrs: (c: PodCidrs) => Promise<void>;
  /** The ConfigSource's reload. */
  reloadConfig: () => Promise<void>;
  /** The Node's own IPs or zone changed (NodePodCidrs.nodeFacts). */
  nodeFactsChanged?: () => void;
  /** Counts the outcomes of annotation patches and Events (the driver's metrics). */
  metrics?: PodAnnotationMetrics & PodEventMetrics;
}

export class KubeIntegration {
  /** Settles once the client is loaded: undefined when it could not be. */
  readonly api: Promise<KubeApi | undefined>;
  readonly node: NodePodCidrs | undefined;
  readonly mirror: ConfigMapMirror | undefined;
  readonly annotations: PodAnnotationQueue;
  /** Which attachment set each pod's annotation (see seedAnnotationOwners). */
  readonly owners = new AnnotationOwners();
  readonly events: PodEventRecorder;
  readonly observer: PodNetworkObserver;
  private connect!: () => void;
  private started = false;
  private readonly log: pino.Logger;

  constructor(
    readonly settings: KubeSettings,
    deps: KubeIntegrationDeps,
  ) {
    this.log = deps.logger.child({ component: "kube" });
    const log = this.log;
    const tuning = settings.tuning ?? {};
    this.api = new Promise<void>((resolve) => {
      this.connect = resolve;
    }).then(() =>
      connectKubeApi(settings.source, {
        logger: deps.logger,
        requestTimeoutMs: tuning.requestTimeoutMs,
        watchBackoff: tuning.watchBackoff,
      }).then(
        (api) => {
          log.info(
            { server: api.server, via: describeKubeConfigSource(settings.source) },
            "Kubernetes API configured",
          );
          return api;
        },
        (err: unknown) => {
          log.error(
            { via: describeKubeConfigSource(settings.source), err: String(err) },
            "cannot use the Kubernetes API; running without it",
          );
          throw err;
        },
      ),
    );
    // Consumers see a failed connect as "no API"; the Node follower keeps the reason.
    const usable = this.api.catch(() => undefined);

    if (settings.podCidrGiven)
      log.info("--pod-cidr given: it wins over the Node's spec.podCIDRs, which are not followed");
    if (!settings.nodeName) {
      this.node = undefined;
      log.warn("no --node-name (or NODE_NAME): the Node's pod CIDRs cannot be followed");
    } else {
      this.node = new NodePodCidrs({
        nodeName: settings.nodeName,
        podCidrsGiven: settings.podCidrGiven,
        apply: deps.setPodCidrs,
        ...(deps.nodeFactsChanged ? { onNodeFacts: deps.nodeFactsChanged } : {}),
        logger: deps.logger,
        stateDir: settings.stateDir,
      });
    }
    this.mirror = settings.configMap
      ? new ConfigMapMirror({
          ref: settings.configMap,
          mountDir: settings.mountDir,
          copyDir: join(settings.stateDir, CONFIGMAP_COPY_DIR),
          api: usable,
          reload: deps.reloadConfig,
          logger: deps.logger,
        })
      : undefined;
    this.annotations = new PodAnnotationQueue({
      api: usable,
      logger: deps.logger,
      backoff: tuning.annotationBackoff,
      maxAttempts: tuning.annotationAttempts,
      metrics: deps.metrics,
    });
    this.events = new PodEventRecorder({
      api: usable,
      nodeName: settings.nodeName,
      logger: deps.logger,
      metrics: deps.metrics,
    });
    this.observer = podObserver(this.annotations, this.events, this.owners);
  }

  /** For the ConfigSource: the directory to read (set only with `--configmap`). */
  get resolveConfigDir(): (() => Promise<string>) | undefined {
    const mirror = this.mirror;
    return mirror ? () => mirror.configDir() : undefined;
  }

  /**
   * Prepares the ConfigMap copy dir and starts loading the client; returns
   * without waiting for the API. Call before the ConfigSource's first load.
   */
  async start(): Promise<void> {
    await this.mirror?.start();
    this.node?.follow(this.api);
    this.started = true;
    this.connect();
  }

  /**
   * Learns from the result cache which attachment set each pod's annotation,
   * so that a DEL after a restart still spares the annotation of a newer
   * sandbox of the same pod. Call once at start, before the first DEL is
   * served. Writes nothing to the API. A cache that cannot be listed leaves
   * no owner known (a DEL then removes the annotation, as before); it is
   * logged, not fatal. Returns the number of pods with an owner.
   */
  async seedAnnotationOwners(cache: {
    list(): Promise<readonly ListedAttachment[]>;
  }): Promise<number> {
    let entries: readonly ListedAttachment[];
    try {
      entries = await cache.list();
    } catch (err) {
      this.log.warn(
        { err: String(err) },
        "cannot list the result cache: pod annotation owners unknown until the next ADD",
      );
      return this.owners.size;
    }
    this.owners.seed(annotationOwnersFromCache(entries));
    this.log.debug(
      { pods: this.owners.size },
      "pod annotation owners seeded from the result cache",
    );
    return this.owners.size;
  }

  /** Why the driver cannot serve ADD on the API's account (the Node without a pod CIDR). */
  notReadyReasons(): string[] {
    const r = this.node?.notReadyReason();
    return r ? [r] : [];
  }

  /**
   * Gives queued annotation and Event writes a short while to land (a DEL's
   * annotation removal, typically), then stops everything.
   */
  async stop(graceMs = 2000): Promise<void> {
    if (this.started) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        Promise.all([this.annotations.idle(), this.events.flush()]),
        new Promise((resolve) => {
          timer = setTimeout(resolve, graceMs);
        }),
      ]);
      clearTimeout(timer);
    }
    this.annotations.close();
    this.events.close();
    await this.node?.stop();
    await this.mirror?.stop();
    if (!this.started) return;
    const api = await this.api.catch(() => undefined);
    await api?.close();
  }
}

/**
 * The pod side of the service's observer. Pods without a namespace and name
 * (podman's containers) are none of the API's business. A DEL removes the
 * annotation only when the attachment it tears down is the one that set it:
 * a pod's sandbox recreated under a new container id may be set up before the
 * old one's DEL arrives.
 */
// Exported for its tests only (integration/kube-pod-annotations.test.ts, unit/pod-annotation-owners.test.ts).
export function podObserver(
  annotations: PodAnnotationQueue,
  events: PodEventRecorder,
  owners: AnnotationOwners = new AnnotationOwners(),
): PodNetworkObserver {
  const podOf = (a: PodAttachmentInfo) =>
    a.pod.namespace && a.pod.name
      ? { namespace: a.pod.namespace, name: a.pod.name, ...(a.pod.uid ? { uid: a.pod.uid } : {}) }
      : undefined;
  return {
    attached(a, result) {
      const pod = podOf(a);
      if (!pod || a.ifName !== ANNOTATED_IF_NAME) return;
      const mac = podInterfaceMac(result, a.ifName);
      if (!mac) return;
      owners.claim(pod, a);
      annotations.set(pod, ANNOTATION_MAC_ADDRESS, mac);
    },
    detached(a) {
      const pod = podOf(a);
      if (!pod || a.ifName !== ANNOTATED_IF_NAME) return;
      if (!owners.release(pod, a)) return;
      annotations.set(pod, ANNOTATION_MAC_ADDRESS, null);
    },
    setUpFailed(a, step, error) {
      const pod = podOf(a);
      if (!pod) return;
      events.setUpFailed({
        pod: { ...pod, ...(a.pod.uid ? { uid: a.pod.uid } : {}) },
        ifName: a.ifName,
        containerId: a.containerId,
        step,
        code: error.code,
        message: error.message,
      });
    },
  };
}
