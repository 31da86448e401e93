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
 * the driver's forever. Watches restart by themselves after any error, with
 * backoff: client-node's ListWatch re-watches after a clean end or a 410, but
 * after any other error it only reports and stays down. A watch that does not
 * get going within 30 s is restarted too, and a healthy one is renewed every
 * 5–10 minutes.
 */
import type { ApiException, KubeConfig, KubernetesObject } from "@kubernetes/client-node";
import type pino from "pino";
import { type BackoffPolicy, backoffDelay } from "../../common/backoff.js";
import { callDeadline } from "../../common/kube-call-deadline.js";

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

export interface ConnectOptions {
  logger: pino.Logger;
  /** Bound on every non-watch call, ms (default 10 s). */
  requestTimeoutMs?: number;
  /** Between watch restarts after errors (default 200 ms doubling to 10 s). */
  watchBackoff?: BackoffPolicy;
}

const DEFAULT_WATCH_BACKOFF: BackoffPolicy = { baseMs: 200, maxMs: 10_000 };

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
  private readonly watches = new Set<SingleObjectWatch>();
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
    let path: string;
    let list: () => Promise<{ items: KubernetesObject[]; metadata?: { resourceVersion?: string } }>;
    if (resource === "nodes") {
      path = "/api/v1/nodes";
      list = () => this.core.listNode({ fieldSelector }, this.callOptions());
    } else {
      const namespace = ref.namespace ?? "default";
      path = `/api/v1/namespaces/${encodeURIComponent(namespace)}/configmaps`;
      list = () =>
        this.core.listNamespacedConfigMap({ namespace, fieldSelector }, this.callOptions());
    }
    const w = new SingleObjectWatch({
      start: () => {
        const lw = new this.k8s.ListWatch<KubernetesObject>(
          path,
          new this.k8s.Watch(this.kc),
          list,
          false,
          undefined,
          fieldSelector,
        );
        return lw;
      },
      ref:
        resource === "nodes"
          ? { name: ref.name }
          : { namespace: ref.namespace ?? "default", name: ref.name },
      handlers,
      backoff: this.opts.watchBackoff ?? DEFAULT_WATCH_BACKOFF,
    });
    return this.track(w);
  }

  watchNodes(handlers: CollectionWatchHandlers): ObjectWatch {
    const w = new CollectionWatch(
      {
        start: () =>
          new this.k8s.ListWatch<KubernetesObject>(
            "/api/v1/nodes",
            new this.k8s.Watch(this.kc),
            () => this.core.listNode({}, this.callOptions()),
            false,
          ),
        backoff: this.opts.watchBackoff ?? DEFAULT_WATCH_BACKOFF,
      },
      handlers,
    );
    return this.track(w);
  }

  /** Starts a watch and hands out its view; close() stops it. */
  private track(w: SingleObjectWatch): ObjectWatch {
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

/** What one ListWatch does for SingleObjectWatch: started once, stopped once. */
interface ListWatchLike {
  start(): Promise<void>;
  stop(): Promise<void>;
  on(verb: "add" | "update" | "delete", cb: (obj: KubernetesObject) => void): void;
  on(verb: "error", cb: (err: unknown) => void): void;
  get(name: string, namespace?: string): KubernetesObject | undefined;
  list(): readonly KubernetesObject[];
}

/** A list and watch that has not got going by then is given up and restarted. */
const SYNC_TIMEOUT_MS = 30_000;
/**
 * A healthy watch is replaced after 5–10 min, as client-go's reflector bounds
 * its watches (timeoutSeconds): a connection that died without a FIN or RST
 * would otherwise go unnoticed for as long as TCP keepalive takes.
 */
const REFRESH_MS = { min: 300_000, max: 600_000 };

/**
 * One object followed through a ListWatch, restarted after errors. Each
 * (re)start is a fresh ListWatch (so a fresh list): callbacks of a replaced
 * one — the AbortError its stop() reports among them — are ignored by round.
 */
class SingleObjectWatch {
  private round = 0;
  private current: ListWatchLike | undefined;
  /** The backoff before a restart, or the planned refresh of a healthy watch. */
  private timer: NodeJS.Timeout | undefined;
  private syncTimer: NodeJS.Timeout | undefined;
  private attempt = 0;
  private stopped = false;
  private isSynced = false;
  private error: string | undefined;
  /** The resourceVersion last reported; null: reported absent; undefined: nothing yet. */
  private lastSeen: string | null | undefined;

  constructor(
    private readonly o: {
      start: () => ListWatchLike;
      ref: ObjectRef;
      handlers: ObjectWatchHandlers;
      backoff: BackoffPolicy;
    },
  ) {}

  get synced(): boolean {
    return this.isSynced;
  }

  get lastError(): string | undefined {
    return this.error;
  }

  start(): void {
    void this.run();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.round++;
    this.clearTimers();
    const lw = this.current;
    this.current = undefined;
    await lw?.stop();
  }

  private async run(): Promise<void> {
    if (this.stopped) return;
    const round = ++this.round;
    let failed = false;
    const lw = this.o.start();
    this.current = lw;
    // Whether this round's list is complete: a fresh ListWatch fills its cache
    // one "add" at a time while listing.
    let listed = false;
    const report = () => {
      if (round === this.round) this.deliver(lw, listed);
    };
    lw.on("add", report);
    lw.on("update", report);
    lw.on("delete", report);
    const failOnce = (err: unknown) => {
      if (round !== this.round || failed) return;
      failed = true;
      this.fail(err);
    };
    lw.on("error", failOnce);
    // A watch request the server accepts and never answers would hold start() forever.
    this.syncTimer = setTimeout(
      () => failOnce(new Error(`no answer from the API server in ${SYNC_TIMEOUT_MS / 1000} s`)),
      SYNC_TIMEOUT_MS,
    );
    this.syncTimer.unref();
    try {
      await lw.start();
    } catch (err) {
      failOnce(err);
      return;
    }
    if (round !== this.round || failed) return;
    clearTimeout(this.syncTimer);
    listed = true;
    this.isSynced = true;
    this.error = undefined;
    this.attempt = 0;
    report();
    this.o.handlers.onSynced?.();
    const refreshIn = REFRESH_MS.min + Math.random() * (REFRESH_MS.max - REFRESH_MS.min);
    this.timer = setTimeout(() => this.replace(), refreshIn);
    this.timer.unref();
  }

  /** The planned refresh: a new ListWatch at once; the object stays known meanwhile. */
  private replace(): void {
    this.timer = undefined;
    const lw = this.current;
    this.current = undefined;
    this.round++;
    void lw?.stop().catch(() => {});
    void this.run();
  }

  private fail(err: unknown): void {
    this.isSynced = false;
    this.error = describeError(err);
    this.clearTimers();
    const lw = this.current;
    this.current = undefined;
    this.round++;
    void lw?.stop().catch(() => {});
    this.o.handlers.onError?.(this.error);
    if (this.stopped) return;
    const delay = backoffDelay(this.o.backoff, this.attempt++);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.run();
    }, delay);
    this.timer.unref();
  }

  private clearTimers(): void {
    if (this.timer) clearTimeout(this.timer);
    if (this.syncTimer) clearTimeout(this.syncTimer);
    this.timer = undefined;
    this.syncTimer = undefined;
  }

  /** Hands the handlers what the ListWatch now knows (the one object followed). */
  protected deliver(lw: ListWatchLike, _listed: boolean): void {
    const obj = lw.get(this.o.ref.name, this.o.ref.namespace);
    const seen = obj ? (obj.metadata?.resourceVersion ?? "") : null;
    if (seen === this.lastSeen && seen !== "") return;
    this.lastSeen = seen;
    this.o.handlers.onObject(obj as KubeObjectView | undefined);
  }
}

/**
 * Every object of a collection, through the same restarts: the handlers get
 * the whole list on each change and after each (re)list, never a partial one.
 */
class CollectionWatch extends SingleObjectWatch {
  private lastVersions: string | undefined;
  /** The delivery waiting for the current burst of events to end, and its ListWatch. */
  private pending: NodeJS.Immediate | undefined;
  private pendingLw: ListWatchLike | undefined;

  constructor(
    o: Omit<ConstructorParameters<typeof SingleObjectWatch>[0], "handlers" | "ref">,
    private readonly listHandlers: CollectionWatchHandlers,
  ) {
    super({
      ...o,
      ref: { name: "" },
      handlers: {
        onObject: () => {},
        onError: listHandlers.onError,
        onSynced: listHandlers.onSynced,
      },
    });
  }

  protected override deliver(lw: ListWatchLike, listed: boolean): void {
    // A partial list would read as Nodes deleted.
    if (!listed) return;
    // Each event would hand over (and the handler digest) the whole list:
    // thousands of Nodes appearing at once would cost the square of their
    // number. One delivery per burst: after the events already read are in.
    this.pendingLw = lw;
    this.pending ??= setImmediate(() => {
      this.pending = undefined;
      if (this.pendingLw) this.deliverNow(this.pendingLw);
    });
  }

  override async stop(): Promise<void> {
    if (this.pending) clearImmediate(this.pending);
    this.pending = undefined;
    this.pendingLw = undefined;
    await super.stop();
  }

  private deliverNow(lw: ListWatchLike): void {
    const all = lw.list();
    const versions = all.map((o) => `${o.metadata?.name}@${o.metadata?.resourceVersion}`).join(",");
    if (versions === this.lastVersions) return;
    this.lastVersions = versions;
    this.listHandlers.onList(all as readonly KubeObjectView[]);
  }
}

/** A client-node failure as a KubeApiError: the status, the server's message, Retry-After. */
function toKubeApiError(err: unknown, k8s: ClientModule): KubeApiError {
  if (err instanceof k8s.ApiException) {
    const e = err as ApiException<unknown>;
    const retryAfter = Number(e.headers?.["retry-after"]);
    return new KubeApiError(
      `HTTP ${e.code}: ${statusMessage(e.body) ?? "no message"}`,
      e.code,
      Number.isFinite(retryAfter) && retryAfter > 0 ? retryAfter * 1000 : undefined,
    );
  }
  return new KubeApiError(describeError(err));
}

/** The `message` of a Status body (client-node hands it over as the raw string). */
function statusMessage(body: unknown): string | undefined {
  let b = body;
  if (typeof b === "string") {
    try {
      b = JSON.parse(b);
    } catch {
      return body === "" ? undefined : (body as string).slice(0, 200);
    }
  }
  const m = (b as { message?: unknown } | null)?.message;
  return typeof m === "string" ? m : undefined;
}

/** One line for any failure: a watch's HTTP status, a socket error's code, a timeout. */
export function describeError(err: unknown): string {
  if (err instanceof KubeApiError) return err.message;
  const e = err as { statusCode?: number; code?: unknown; name?: string; message?: string } | null;
  if (e && typeof e.statusCode === "number")
    return `HTTP ${e.statusCode}: ${e.message ?? ""}`.trim();
  if (e && typeof e.code === "number" && typeof e.message === "string") {
    // An ApiException that reached here untranslated (a watch's list).
    return `HTTP ${e.code}: ${statusMessage((e as { body?: unknown }).body) ?? "no message"}`;
  }
  if (e?.name === "AbortError") return "request timed out or aborted";
  const code = typeof e?.code === "string" ? ` (${e.code})` : "";
  return `${e?.message ?? String(err)}${code}`;
}
