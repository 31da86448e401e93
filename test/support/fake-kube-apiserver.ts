/**
 * An in-memory Kubernetes API server for the kinds the driver and the MidoNet
 * controller use, served over plain HTTP on 127.0.0.1. kube-apiserver cannot be
 * installed here, so this fake answers the way a real one does for those kinds,
 * errors included:
 *
 * - core/v1 nodes, pods, configmaps, services, events, namespaces;
 *   discovery.k8s.io/v1 endpointslices; coordination.k8s.io/v1 leases;
 *   networking.k8s.io/v1 networkpolicies.
 *   Namespaced, cluster-scoped and all-namespaces paths.
 * - list (label and field selectors, limit/continue with 410 Expired for a
 *   continue token older than the compacted history, list resourceVersion), watch
 *   (JSON lines from a resourceVersion, 410 Expired once history is compacted,
 *   bookmarks, the cacher's ADDED/DELETED when an object enters or leaves a
 *   selector), get, create, update, delete (with preconditions), the status
 *   subresource, and PATCH as JSON merge patch (the one type the product
 *   sends; strategic merge and JSON patch get 415), with optimistic concurrency
 *   on metadata.resourceVersion.
 * - one global resourceVersion counter (etcd's revision); an update that changes
 *   nothing keeps the resourceVersion and emits no event (etcd's no-op update).
 * - Status bodies with the real reasons and messages (`pods "x" not found`,
 *   `Operation cannot be fulfilled on leases.coordination.k8s.io "x": the object
 *   has been modified; ...`), 401 without the bearer token, MicroTime fields
 *   (Lease renewTime/acquireTime, Event eventTime) refused unless they carry six
 *   fractional digits, as metav1.MicroTime does.
 *
 * Test hooks: put()/remove() (write as a controller would, emitting watch
 * events), get()/list(), compact() (expire watch history), bookmark(),
 * endWatches() (as the server's watch timeout does), injectFault(), the request
 * log, openWatches(), kubeconfig(), close().
 *
 * Not modelled: discovery (/api, /apis), /version and the health endpoints
 * (404: the product never asks), server-side apply (415), deletecollection
 * (405), graceful pod deletion (a pod is gone at once, as with
 * gracePeriodSeconds=0), namespace finalization (a namespace is deleted at once,
 * without its objects), defaulting beyond pod/service/namespace status and a
 * Service's clusterIP, validation beyond names, namespaces and MicroTime.
 *
 * This file holds the class tests and benches use, its options and the test
 * hooks, and re-exports the public types; the work is done by parts, one job
 * each, which the class composes:
 *
 * - fake-kube-store.ts: objects, the global revision, watch history and its
 *   compaction, key order, ClusterIP allocation (etcd's part);
 * - fake-kube-watch.ts: open watches, replay, event delivery through
 *   selectors, bookmarks, 410 Expired;
 * - fake-kube-http.ts: listener, auth, routing to verbs, lists with paging,
 *   the request log, Status answers;
 * - fake-kube-writes.ts: create, update, merge patch, delete and their checks;
 * - fake-kube-faults.ts: injectFault();
 * - fake-kube-resources.ts (the kinds, versions and paths),
 *   fake-kube-selectors.ts, fake-kube-status.ts (errors), fake-kube-json.ts
 *   (shared helpers), fake-kube-types.ts (public types).
 */
import { randomBytes } from "node:crypto";
import { writeFileSync } from "node:fs";
import { FakeKubeFaults } from "./fake-kube-faults.js";
import { FakeKubeHttp } from "./fake-kube-http.js";
import { FakeKubeStore } from "./fake-kube-store.js";
import type {
  FakeResource,
  FaultSpec,
  KubeObject,
  RequestRecord,
  WatchInfo,
} from "./fake-kube-types.js";
import { FakeKubeWatches } from "./fake-kube-watch.js";
import { FakeKubeWrites } from "./fake-kube-writes.js";

export { parseLabelSelector } from "./fake-kube-selectors.js";
export type {
  FakeResource,
  FaultSpec,
  KubeObject,
  KubeStatus,
  ObjectMeta,
  RequestRecord,
  WatchInfo,
} from "./fake-kube-types.js";

export interface FakeKubeApiServerOptions {
  /** Bearer token the server requires (default: random). */
  token?: string;
  /** Refuse requests without the token with 401 (default true). */
  requireAuth?: boolean;
  /** Watch events kept per resource before the oldest are compacted (default 1000). */
  historyLimit?: number;
  /**
   * How a watch from a compacted resourceVersion is refused. "event" (default) is what
   * kube-apiserver's watch cache does: 200, one ERROR event carrying the 410 Expired
   * Status, end of stream. "status" answers HTTP 410 with the Status as the body.
   */
  expiredWatchAs?: "event" | "status";
  /** Namespaces that exist from the start (default: default, kube-system, kube-public, kube-node-lease). */
  namespaces?: string[];
}

export async function startFakeKubeApiServer(
  options: FakeKubeApiServerOptions = {},
): Promise<FakeKubeApiServer> {
  const server = new FakeKubeApiServer(options);
  await server.listen();
  return server;
}

const DEFAULT_NAMESPACES = ["default", "kube-system", "kube-public", "kube-node-lease"];

export class FakeKubeApiServer {
  readonly token: string;
  private readonly store: FakeKubeStore;
  private readonly watches: FakeKubeWatches;
  private readonly faults = new FakeKubeFaults();
  private readonly http: FakeKubeHttp;

  constructor(options: FakeKubeApiServerOptions = {}) {
    this.token = options.token ?? randomBytes(16).toString("hex");
    this.store = new FakeKubeStore(options.historyLimit ?? 1000, (storage, entry) =>
      this.watches.publish(storage, entry),
    );
    this.watches = new FakeKubeWatches(this.store, options.expiredWatchAs ?? "event");
    for (const ns of options.namespaces ?? DEFAULT_NAMESPACES) {
      this.put("namespaces", {
        metadata: { name: ns },
        spec: { finalizers: ["kubernetes"] },
        status: { phase: "Active" },
      });
    }
    this.http = new FakeKubeHttp({
      token: this.token,
      requireAuth: options.requireAuth ?? true,
      store: this.store,
      watches: this.watches,
      writes: new FakeKubeWrites(this.store),
      faults: this.faults,
    });
  }

  /** @internal started by startFakeKubeApiServer */
  async listen(): Promise<void> {
    await this.http.listen();
  }

  get url(): string {
    return this.http.url;
  }

  /**
   * A kubeconfig for this server (plain http, so `insecure-skip-tls-verify: true`,
   * which @kubernetes/client-node 1.x requires to talk http; and the bearer token).
   * Written to `file` when given.
   */
  kubeconfig(file?: string, namespace = "default"): string {
    const yaml = [
      "apiVersion: v1",
      "kind: Config",
      "clusters:",
      "  - name: fake",
      "    cluster:",
      `      server: ${this.url}`,
      "      insecure-skip-tls-verify: true",
      "users:",
      "  - name: fake",
      "    user:",
      `      token: ${this.token}`,
      "contexts:",
      "  - name: fake",
      "    context:",
      "      cluster: fake",
      "      user: fake",
      `      namespace: ${namespace}`,
      "current-context: fake",
      "",
    ].join("\n");
    if (file !== undefined) writeFileSync(file, yaml, { mode: 0o600 });
    return yaml;
  }

  /** The current resourceVersion (the global revision). */
  resourceVersion(): string {
    return String(this.store.revision);
  }

  /**
   * Creates or replaces an object as the cluster's own controllers would (no
   * validation, no optimistic concurrency, no namespace check), in the stored form
   * (core/v1 for events). Fills uid, creationTimestamp and resourceVersion, emits
   * ADDED or MODIFIED (nothing when the object is unchanged). Returns a copy.
   */
  put(resource: FakeResource, obj: KubeObject): KubeObject {
    return this.store.put(resource, obj);
  }

  /** Deletes an object (emits DELETED); returns its last state, or undefined if absent. */
  remove(
    resource: FakeResource,
    namespace: string | undefined,
    name: string,
  ): KubeObject | undefined {
    return this.store.remove(resource, namespace, name);
  }

  /** A copy of a stored object. */
  get(resource: FakeResource, namespace: string | undefined, name: string): KubeObject | undefined {
    return this.store.get(resource, namespace, name);
  }

  /** Copies of the stored objects of a resource, in etcd key order; one namespace when given. */
  list(resource: FakeResource, namespace?: string): KubeObject[] {
    return this.store.list(resource, namespace);
  }

  /**
   * Forgets all watch history, as an etcd compaction does: a watch from any
   * older revision gets 410, and so does the continue token of a list begun before.
   */
  compact(): void {
    this.store.compact();
  }

  /** Sends a BOOKMARK at the current revision to every watch that asked for bookmarks. */
  bookmark(): void {
    this.watches.bookmark();
  }

  /** Ends every open watch cleanly, as the server's watch timeout does; clients re-watch. */
  endWatches(): void {
    this.watches.endAll();
  }

  openWatches(): WatchInfo[] {
    return this.watches.open();
  }

  /** The next `times` requests matching `spec` answer `spec.status`. */
  injectFault(spec: FaultSpec): void {
    this.faults.inject(spec);
  }

  clearFaults(): void {
    this.faults.clear();
  }

  /** Every request so far, in order of arrival. */
  get requests(): readonly RequestRecord[] {
    return this.http.log;
  }

  clearRequests(): void {
    this.http.log.length = 0;
  }

  async close(): Promise<void> {
    this.endWatches();
    await this.http.close();
  }

  /** @internal next ClusterIP for a Service created without one. */
  allocateClusterIP(): string {
    return this.store.allocateClusterIP();
  }
}
