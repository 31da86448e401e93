/**
 * The driver's whole use of the Kubernetes API, behind a small interface: follow
 * one object (its Node, its ConfigMap) or every Node, merge-patch a pod's or its Node's annotations, create
 * and patch Events. Nothing else in the driver touches `@kubernetes/client-node`.
 *
 * The client is imported here lazily, by `connectKubeApi`, and only when an API
 * is configured: loading it costs close to a second of CPU, which neither the
 * driver's start nor a standalone driver (no API at all) should pay. Every other
 * module names its types with `import type` only, which compiles to nothing.
 *
 * Where the API is: `--kubeconfig PATH` when given; else the in-cluster service
 * account when `KUBERNETES_SERVICE_HOST` is set (a pod); else there is none.
 *
 * Calls are bounded (`requestTimeoutMs`), so a hung API server holds nothing of
 * the driver's forever. Watches are the common list-watch (src/common/list-watch.ts):
 * they resume or relist by themselves, restart with backoff after any error, and
 * are bounded in how long they take to get going and how long one lasts.
 *
 * The collections followed cluster-wide (watchEach: every pod, namespace and
 * policy) are listed in pages of 500 and read as plain JSON, not through
 * client-node's typed deserialization: a large cluster's list is never whole
 * in memory, and each object is slimmed as its page arrives. Their cache keeps
 * each object's key and resourceVersion only.
 */
import type * as Http from "node:http";
import type * as Https from "node:https";
import type { ApiException, KubeConfig, KubernetesObject } from "@kubernetes/client-node";
import type pino from "pino";
import type { BackoffPolicy } from "../../common/backoff.js";
import { callDeadline } from "../../common/kube-call-deadline.js";
import { describeKubeError, statusMessage } from "../../common/kube-errors.js";
import type { ListAnswer, ListPage, ListWatchOptions } from "../../common/list-watch.js";
import { http, https } from "../../common/node-http.js";
import { DriverWatch, followCollection, followObject } from "./driver-watch.js";

type ClientModule = typeof import("@kubernetes/client-node");

/** Where the API server and the credentials come from. */
export type KubeConfigSource = { kind: "kubeconfig"; path: string } | { kind: "in-cluster" };

/** `--kubeconfig` wins; else in-cluster inside a pod; else no API (standalone). */
export function kubeConfigSource(
  kubeconfig: string | undefined,
  env: NodeJS.ProcessEnv = process.env,
): KubeConfigSource | undefined {
  if (kubeconfig) return { kind: "kubeconfig", path: kubeconfig };
  if (env.KUBERNETES_SERVICE_HOST) return { kind: "in-cluster" };
  return undefined;
}

export function describeKubeConfigSource(s: KubeConfigSource): string {
  return s.kind === "kubeconfig" ? `kubeconfig ${s.path}` : "in-cluster service account";
}

/** A failed call: `status` is the HTTP status (undefined: no answer — refused, reset, timed out). */
export class KubeApiError extends Error {
  constructor(
    message: string,
    readonly status?: number,
    /** The server's Retry-After, ms. */
    readonly retryAfterMs?: number,
  ) {
    super(message);
    this.name = "KubeApiError";
  }
}

/**
 * The 409 of a write whose uid precondition failed: the object of that name is
 * another one now (a pod deleted and recreated). Retrying cannot help.
 */
export function isUidMismatch(err: unknown): boolean {
  return (
    err instanceof KubeApiError &&
    err.status === 409 &&
    err.message.includes("Precondition failed: UID in precondition")
  );
}

/** The parts of an object the driver reads; the rest passes through untyped. */
export interface KubeObjectView {
  metadata?: { name?: string; namespace?: string; uid?: string; resourceVersion?: string };
  [key: string]: unknown;
}

export interface ObjectRef {
  /** Unset for a cluster-scoped object (a Node). */
  namespace?: string;
  name: string;
}

export interface ObjectWatchHandlers {
  /**
   * The object as now known, on every change and after each (re)list:
   * undefined when it does not exist. Called only when that changes
   * (by resourceVersion), so a re-list of an unchanged object is silent.
   */
  onObject(obj: KubeObjectView | undefined): void;
  /** The watch failed; it restarts by itself after a backoff. */
  onError?(message: string): void;
  /** The watch (re)listed successfully and is following changes. */
  onSynced?(): void;
}

export interface CollectionWatchHandlers {
  /**
   * Every object of the collection as now known, after each (re)list and on
   * every change; a re-list that changes nothing is silent. Never called
   * before the first list succeeded, so an empty list means there are none.
   */
  onList(objs: readonly KubeObjectView[]): void;
  /** The watch failed; it restarts by itself after a backoff. */
  onError?(message: string): void;
  /** The watch (re)listed successfully and is following changes. */
  onSynced?(): void;
}

/** Every object of a kind, event by event; never called before the first list. */
export interface ResourceEventHandlers {
  upsert(obj: KubeObjectView): void;
  /** Of `obj`, only metadata's namespace, name and resourceVersion are sure to be there. */
  remove(obj: KubeObjectView): void;
  /** The watch (re)listed successfully and is following changes. */
  onSynced?(): void;
  /** The watch failed; it restarts by itself after a backoff. */
  onError?(message: string): void;
}

/** The cluster-wide collections the driver follows object by object. */
export type FollowedCollection =
  | "pods"
  | "namespaces"
  | "networkpolicies"
  | "services"
  | "endpointslices";

export interface ObjectWatch {
  /** A list succeeded and no error came since: what `onObject` last said is current. */
  readonly synced: boolean;
  /** The last error, until the next successful list. */
  readonly lastError: string | undefined;
  stop(): Promise<void>;
}

/** A core/v1 Event as the driver writes it. */
export interface CoreEventBody {
  metadata: { generateName?: string; name?: string };
  involvedObject: {
    kind: string;
    apiVersion: string;
    namespace: string;
    name: string;
    uid?: string;
  };
  reason: string;
  message: string;
  type: "Normal" | "Warning";
  action?: string;
  source: { component: string; host?: string };
  reportingComponent: string;
  reportingInstance: string;
  firstTimestamp: Date;
  lastTimestamp: Date;
  count: number;
}

export interface KubeApi {
  /** Where it talks to, for the log. */
  readonly server: string;
  /** Follows one object of `resource` by name (a ListWatch with field selector metadata.name). */
  watchObject(
    resource: "nodes" | "configmaps",
    ref: ObjectRef,
    handlers: ObjectWatchHandlers,
  ): ObjectWatch;
  /** Follows every Node (a ListWatch on /api/v1/nodes). */
  watchNodes(handlers: CollectionWatchHandlers): ObjectWatch;
  /**
   * Follows every object of a collection cluster-wide, event by event; the
   * watch keeps only what `transform` leaves of each object.
   */
  watchEach(
    resource: FollowedCollection,
    handlers: ResourceEventHandlers,
    transform?: (obj: KubeObjectView) => KubeObjectView,
  ): ObjectWatch;
  /** A pod as the API server has it now (a GET); undefined when there is none. */
  readPod(ref: Required<ObjectRef>): Promise<KubeObjectView | undefined>;
  /** JSON merge patch of metadata.annotations: a string sets a key, null removes it. */
  /**
   * With `uid`, the patch carries it as a precondition (as kubelet's pod status
   * patches do): a pod of that name recreated since (another uid) refuses it
   * with 409 "Precondition failed: UID in precondition" (see isUidMismatch).
   */
  patchPodAnnotations(
    ref: Required<ObjectRef>,
    annotations: Record<string, string | null>,
    uid?: string,
  ): Promise<void>;
  /** JSON merge patch of a Node's metadata.annotations: a string sets a key, null removes it. */
  patchNodeAnnotations(name: string, annotations: Record<string, string | null>): Promise<void>;
  /** A Node's metadata.annotations as the API server has them now (a GET). */
  readNodeAnnotations(name: string): Promise<Record<string, string>>;
  /** Creates an Event; answers its name. */
  createEvent(namespace: string, body: CoreEventBody): Promise<string>;
  /** JSON merge patch of an Event (a series' count and lastTimestamp). */
  patchEvent(namespace: string, name: string, patch: Record<string, unknown>): Promise<void>;
  /** Stops every watch. */
  close(): Promise<void>;
}

interface ConnectOptions {
  logger: pino.Logger;
  /** Bound on every non-watch call, ms (default 10 s). */
  requestTimeoutMs?: number;
  /** Between watch restarts after errors (default 200 ms doubling to 10 s). */
  watchBackoff?: BackoffPolicy;
}

const DEFAULT_WATCH_BACKOFF: BackoffPolicy = { baseMs: 200, maxMs: 10_000 };

/** Objects a page of the collections followed cluster-wide (client-go's pager asks for as many). */
// Exported for its tests only (unit/kube-api-watch-each.test.ts).
export const LIST_PAGE_SIZE = 500;

/** The list path of each collection followed cluster-wide (its watch path too). */
const FOLLOWED_PATHS: Record<FollowedCollection, string> = {
  pods: "/api/v1/pods",
  namespaces: "/api/v1/namespaces",
  networkpolicies: "/apis/networking.k8s.io/v1/networkpolicies",
  services: "/api/v1/services",
  endpointslices: "/apis/discovery.k8s.io/v1/endpointslices",
};

/**
 * Loads client-node and the credentials. Throws when the kubeconfig cannot be
 * loaded; makes no request (the first watch or call is the first contact).
 */
export async function connectKubeApi(
  source: KubeConfigSource,
  opts: ConnectOptions,
): Promise<KubeApi> {
  const k8s: ClientModule = await import("@kubernetes/client-node");
  const kc = new k8s.KubeConfig();
  if (source.kind === "kubeconfig") kc.loadFromFile(source.path);
  else kc.loadFromCluster();
  const server = kc.getCurrentCluster()?.server;
  if (!server) throw new Error(`${describeKubeConfigSource(source)}: no current cluster`);
  return new ClientNodeApi(k8s, kc, server, opts);
}

class ClientNodeApi implements KubeApi {
  private readonly core: InstanceType<ClientModule["CoreV1Api"]>;
  private readonly watches = new Set<DriverWatch>();
  private readonly timeoutMs: number;

  constructor(
    private readonly k8s: ClientModule,
    private readonly kc: KubeConfig,
    readonly server: string,
    private readonly opts: ConnectOptions,
  ) {
    this.core = kc.makeApiClient(k8s.CoreV1Api);
    this.timeoutMs = opts.requestTimeoutMs ?? 10_000;
  }

  /** Per-call options: a deadline on the request, and the patch Content-Type when patching. */
  private callOptions(mergePatch = false) {
    const base = callDeadline(this.k8s.Observable, this.timeoutMs);
    return mergePatch
      ? this.k8s.setHeaderOptions("Content-Type", this.k8s.PatchStrategy.MergePatch, base)
      : base;
  }

  watchObject(
    resource: "nodes" | "configmaps",
    ref: ObjectRef,
    handlers: ObjectWatchHandlers,
  ): ObjectWatch {
    const fieldSelector = `metadata.name=${ref.name}`;
    if (resource === "nodes") {
      const options = this.listWatchOptions("/api/v1/nodes", fieldSelector, () =>
        this.core.listNode({ fieldSelector }, this.callOptions()),
      );
      return this.track(followObject(options, { name: ref.name }, handlers));
    }
    const namespace = ref.namespace ?? "default";
    const options = this.listWatchOptions(
      `/api/v1/namespaces/${encodeURIComponent(namespace)}/configmaps`,
      fieldSelector,
      () => this.core.listNamespacedConfigMap({ namespace, fieldSelector }, this.callOptions()),
    );
    return this.track(followObject(options, { namespace, name: ref.name }, handlers));
  }

  watchNodes(handlers: CollectionWatchHandlers): ObjectWatch {
    const options = this.listWatchOptions("/api/v1/nodes", undefined, () =>
      this.core.listNode({}, this.callOptions()),
    );
    return this.track(followCollection(options, handlers));
  }

  watchEach(
    resource: FollowedCollection,
    handlers: ResourceEventHandlers,
    transform?: (obj: KubeObjectView) => KubeObjectView,
  ): ObjectWatch {
    const path = FOLLOWED_PATHS[resource];
    const options: Omit<ListWatchOptions<KubeObjectView>, "handlers"> = {
      ...this.listWatchOptions(path, undefined, (page) =>
        listJson(this.kc, `${this.server}${path}`, page, this.timeoutMs),
      ),
      pageSize: LIST_PAGE_SIZE,
      keep: "versions",
      ...(transform ? { transform } : {}),
    };
    return this.track(
      new DriverWatch(options, handlers, () => {}, undefined, {
        add: handlers.upsert,
        update: handlers.upsert,
        delete: handlers.remove,
      }),
    );
  }

  async readPod(ref: Required<ObjectRef>): Promise<KubeObjectView | undefined> {
    try {
      return (await this.call(() =>
        this.core.readNamespacedPod(
          { name: ref.name, namespace: ref.namespace },
          this.callOptions(),
        ),
      )) as KubeObjectView;
    } catch (err) {
      if (err instanceof KubeApiError && err.status === 404) return undefined;
      throw err;
    }
  }

  private listWatchOptions(
    path: string,
    fieldSelector: string | undefined,
    list: (page?: ListPage) => Promise<ListAnswer<KubernetesObject | KubeObjectView>>,
  ): Omit<ListWatchOptions<KubeObjectView>, "handlers"> {
    return {
      path,
      ...(fieldSelector !== undefined ? { fieldSelector } : {}),
      list: list as () => Promise<ListAnswer<KubeObjectView>>,
      watch: new this.k8s.Watch(this.kc),
      backoff: this.opts.watchBackoff ?? DEFAULT_WATCH_BACKOFF,
    };
  }

  /** Starts a watch and hands out its view; close() stops it. */
  private track(w: DriverWatch): ObjectWatch {
    this.watches.add(w);
    w.start();
    return {
      get synced() {
        return w.synced;
      },
      get lastError() {
        return w.lastError;
      },
      stop: async () => {
        this.watches.delete(w);
        await w.stop();
      },
    };
  }

  async patchPodAnnotations(
    ref: Required<ObjectRef>,
    annotations: Record<string, string | null>,
    uid?: string,
  ): Promise<void> {
    const metadata = uid ? { uid, annotations } : { annotations };
    await this.call(() =>
      this.core.patchNamespacedPod(
        { name: ref.name, namespace: ref.namespace, body: { metadata } },
        this.callOptions(true),
      ),
    );
  }

  async patchNodeAnnotations(
    name: string,
    annotations: Record<string, string | null>,
  ): Promise<void> {
    await this.call(() =>
      this.core.patchNode({ name, body: { metadata: { annotations } } }, this.callOptions(true)),
    );
  }

  async readNodeAnnotations(name: string): Promise<Record<string, string>> {
    const node = await this.call(() => this.core.readNode({ name }, this.callOptions()));
    return node.metadata?.annotations ?? {};
  }

  async createEvent(namespace: string, body: CoreEventBody): Promise<string> {
    const created = await this.call(() =>
      this.core.createNamespacedEvent(
        // The generated type wants every optional field spelled; the server fills them.
        { namespace, body: { ...body, metadata: { ...body.metadata, namespace } } as never },
        this.callOptions(),
      ),
    );
    return created.metadata?.name ?? "";
  }

  async patchEvent(namespace: string, name: string, patch: Record<string, unknown>): Promise<void> {
    await this.call(() =>
      this.core.patchNamespacedEvent({ name, namespace, body: patch }, this.callOptions(true)),
    );
  }

  async close(): Promise<void> {
    const all = [...this.watches];
    this.watches.clear();
    await Promise.all(all.map((w) => w.stop()));
  }

  private async call<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      throw toKubeApiError(err, this.k8s);
    }
  }
}

/**
 * One list (a page of it with `page`) as plain JSON: a GET through the
 * KubeConfig's credentials, TLS and proxy (client-node's applyToHTTPSOptions,
 * as its own Watch uses), without client-node's typed deserialization, which
 * builds a second copy of every object. Bounded by `timeoutMs`.
 */
async function listJson(
  kc: KubeConfig,
  url: string,
  page: ListPage | undefined,
  timeoutMs: number,
): Promise<ListAnswer<KubeObjectView>> {
  const target = new URL(url);
  if (page) {
    target.searchParams.set("limit", String(page.limit));
    if (page.continue) target.searchParams.set("continue", page.continue);
  }
  const options: Https.RequestOptions = { method: "GET", headers: { Accept: "application/json" } };
  await kc.applyToHTTPSOptions(options);
  const transport = target.protocol === "http:" ? http : https;
  const { status, headers, body } = await new Promise<{
    status: number;
    headers: Http.IncomingHttpHeaders;
    body: string;
  }>((resolve, reject) => {
    const req = transport.request(
      target,
      { ...options, signal: AbortSignal.timeout(timeoutMs) },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (chunk: Buffer) => chunks.push(chunk));
        res.on("error", reject);
        res.on("end", () =>
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body: Buffer.concat(chunks).toString("utf8"),
          }),
        );
      },
    );
    req.on("error", reject);
    req.end();
  });
  if (status !== 200)
    throw new KubeApiError(
      `HTTP ${status}: ${statusMessage(body) ?? "no message"}`,
      status,
      retryAfterMs(headers["retry-after"]),
    );
  return JSON.parse(body) as ListAnswer<KubeObjectView>;
}

/** A client-node failure as a KubeApiError: the status, the server's message, Retry-After. */
function toKubeApiError(err: unknown, k8s: ClientModule): KubeApiError {
  if (err instanceof k8s.ApiException) {
    const e = err as ApiException<unknown>;
    return new KubeApiError(
      `HTTP ${e.code}: ${statusMessage(e.body) ?? "no message"}`,
      e.code,
      retryAfterMs(e.headers?.["retry-after"]),
    );
  }
  return new KubeApiError(describeKubeError(err));
}

/** A Retry-After header (seconds) in ms; undefined when absent or not a positive number. */
function retryAfterMs(header: unknown): number | undefined {
  const seconds = Number(header);
  return Number.isFinite(seconds) && seconds > 0 ? seconds * 1000 : undefined;
}
