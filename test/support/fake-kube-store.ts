/**
 * The object store of the fake Kubernetes API server (fake-kube-apiserver.ts),
 * in etcd's place: the objects of every resource by key, one global revision
 * counter (every write takes the next resourceVersion; an update that changes
 * nothing keeps it and records nothing, as etcd's no-op update), the per
 * resource history of changes a watch replays, its compaction (what the
 * history forgot, older watches and continue tokens get 410), the key order a
 * paged list walks, and the ClusterIP allocator Service defaulting draws on.
 *
 * Every committed change goes to `onCommit`, which the server points at its
 * watches; the store itself knows nothing of HTTP or watchers.
 */
import { randomUUID } from "node:crypto";
import { deepEqual, metaOf, nowSeconds } from "./fake-kube-json.js";
import type { ClusterIPAllocator, ResourceDef } from "./fake-kube-resources.js";
import { normalize, PRIMARY_DEF, RESOURCES } from "./fake-kube-resources.js";
import type { FakeResource, KubeObject } from "./fake-kube-types.js";

export type WatchType = "ADDED" | "MODIFIED" | "DELETED";

export interface HistoryEntry {
  rv: number;
  type: WatchType;
  /** The object after the change (for DELETED: its last state at the deletion's revision). */
  object: KubeObject;
  /** The object before the change. */
  prev?: KubeObject;
}

/** An object's key within its resource, `namespace/name` (`/name` when cluster-scoped), as etcd orders them. */
export function keyOf(namespace: string | undefined, name: string): string {
  return `${namespace ?? ""}/${name}`;
}

export class FakeKubeStore implements ClusterIPAllocator {
  private currentRevision = 0;
  private nextClusterIP = 10;
  private readonly objects = new Map<FakeResource, Map<string, KubeObject>>();
  private readonly history = new Map<FakeResource, HistoryEntry[]>();
  /** Per resource: the highest revision whose events are gone; older watches get 410. */
  private readonly compactedThrough = new Map<FakeResource, number>();
  /** Per resource: its keys and objects in etcd key order, until the next write (a paged list reads them once a page). */
  private readonly inKeyOrder = new Map<FakeResource, { keys: string[]; objects: KubeObject[] }>();

  /**
   * @param historyLimit watch events kept per resource before the oldest are compacted
   * @param onCommit told of every change, after it is stored and recorded
   */
  constructor(
    private readonly historyLimit: number,
    private readonly onCommit: (storage: FakeResource, entry: HistoryEntry) => void,
  ) {
    for (const def of RESOURCES) {
      this.objects.set(def.storage, new Map());
      this.history.set(def.storage, []);
      this.compactedThrough.set(def.storage, 0);
    }
  }

  /** The global revision: the resourceVersion of the latest write. */
  get revision(): number {
    return this.currentRevision;
  }

  /** The stored object itself (not a copy), or undefined. */
  find(storage: FakeResource, namespace: string | undefined, name: string): KubeObject | undefined {
    return this.objects.get(storage)!.get(keyOf(namespace, name));
  }

  /** The stored objects of a resource, in etcd key order (not copies). */
  sorted(resource: FakeResource): readonly KubeObject[] {
    return this.keyOrder(resource).objects;
  }

  /** The keys and stored objects of a resource, in etcd key order. */
  keyOrder(resource: FakeResource): { keys: string[]; objects: KubeObject[] } {
    let order = this.inKeyOrder.get(resource);
    if (!order) {
      const entries = [...this.objects.get(resource)!.entries()].sort(([a], [b]) =>
        a < b ? -1 : a > b ? 1 : 0,
      );
      order = { keys: entries.map(([k]) => k), objects: entries.map(([, o]) => o) };
      this.inKeyOrder.set(resource, order);
    }
    return order;
  }

  /** The changes to a resource still in its history, oldest first. */
  historyOf(storage: FakeResource): readonly HistoryEntry[] {
    return this.history.get(storage)!;
  }

  /** The highest revision of a resource whose changes the history forgot. */
  compactedThroughOf(storage: FakeResource): number {
    return this.compactedThrough.get(storage)!;
  }

  /** Forgets all history, as an etcd compaction does. */
  compact(): void {
    for (const def of RESOURCES) {
      this.history.set(def.storage, []);
      this.compactedThrough.set(def.storage, this.currentRevision);
    }
  }

  /** Next ClusterIP for a Service created without one. */
  allocateClusterIP(): string {
    const n = this.nextClusterIP++;
    return `10.96.${Math.floor(n / 256)}.${n % 256}`;
  }

  commitCreate(def: ResourceDef, obj: KubeObject): KubeObject {
    const meta = metaOf(obj);
    meta.uid ??= randomUUID();
    meta.creationTimestamp ??= nowSeconds();
    meta.resourceVersion = String(++this.currentRevision);
    const stored = normalize(def, obj);
    this.objects.get(def.storage)!.set(keyOf(meta.namespace, meta.name!), stored);
    this.record(def.storage, "ADDED", stored);
    return stored;
  }

  /** Stores `next` over `existing` unless nothing but the resourceVersion differs. */
  commitUpdate(def: ResourceDef, existing: KubeObject, next: KubeObject): KubeObject {
    const candidate = normalize(def, next);
    metaOf(candidate).resourceVersion = existing.metadata?.resourceVersion;
    if (deepEqual(candidate, existing)) return existing;
    metaOf(candidate).resourceVersion = String(++this.currentRevision);
    const meta = metaOf(candidate);
    this.objects.get(def.storage)!.set(keyOf(meta.namespace, meta.name!), candidate);
    this.record(def.storage, "MODIFIED", candidate, existing);
    return candidate;
  }

  commitDelete(def: ResourceDef, existing: KubeObject): KubeObject {
    const meta = metaOf(existing);
    this.objects.get(def.storage)!.delete(keyOf(meta.namespace, meta.name!));
    // The DELETED event carries the last state at the deletion's revision.
    const gone = structuredClone(existing);
    metaOf(gone).resourceVersion = String(++this.currentRevision);
    this.record(def.storage, "DELETED", gone, existing);
    return gone;
  }

  /** Records a change at the current revision in the history and passes it to onCommit. */
  private record(
    storage: FakeResource,
    type: WatchType,
    object: KubeObject,
    prev?: KubeObject,
  ): void {
    const entry: HistoryEntry = {
      rv: this.currentRevision,
      type,
      object,
      ...(prev !== undefined ? { prev } : {}),
    };
    this.inKeyOrder.delete(storage);
    const log = this.history.get(storage)!;
    log.push(entry);
    while (log.length > this.historyLimit) {
      const dropped = log.shift()!;
      this.compactedThrough.set(storage, dropped.rv);
    }
    this.onCommit(storage, entry);
  }

  // -------------------------------------------------------------------------
  // The test hooks' writes and reads (FakeKubeApiServer.put/remove/get/list)
  // -------------------------------------------------------------------------

  /**
   * Creates or replaces an object as a controller would: no validation, no
   * optimistic concurrency, no namespace check. Returns a copy.
   */
  put(resource: FakeResource, obj: KubeObject): KubeObject {
    const def = PRIMARY_DEF.get(resource)!;
    const next = structuredClone(obj);
    const meta = metaOf(next);
    if (!meta.name) throw new Error(`put(${resource}): metadata.name is required`);
    if (def.namespaced) meta.namespace ??= "default";
    else delete meta.namespace;
    const existing = this.find(resource, meta.namespace, meta.name);
    if (existing) {
      const old = metaOf(existing);
      meta.uid ??= old.uid;
      meta.creationTimestamp ??= old.creationTimestamp;
      return structuredClone(this.commitUpdate(def, existing, next));
    }
    return structuredClone(this.commitCreate(def, next));
  }

  /** Deletes an object; returns its last state, or undefined if absent. */
  remove(
    resource: FakeResource,
    namespace: string | undefined,
    name: string,
  ): KubeObject | undefined {
    const existing = this.lookup(resource, namespace, name);
    return existing
      ? structuredClone(this.commitDelete(PRIMARY_DEF.get(resource)!, existing))
      : undefined;
  }

  /** A copy of a stored object. */
  get(resource: FakeResource, namespace: string | undefined, name: string): KubeObject | undefined {
    const obj = this.lookup(resource, namespace, name);
    return obj ? structuredClone(obj) : undefined;
  }

  /** Copies of the stored objects of a resource, in etcd key order; one namespace when given. */
  list(resource: FakeResource, namespace?: string): KubeObject[] {
    return this.sorted(resource)
      .filter((o) => namespace === undefined || o.metadata?.namespace === namespace)
      .map((o) => structuredClone(o));
  }

  /** The stored object a hook names: a namespaced one in "default" unless told. */
  private lookup(
    resource: FakeResource,
    namespace: string | undefined,
    name: string,
  ): KubeObject | undefined {
    const def = PRIMARY_DEF.get(resource)!;
    return this.find(resource, def.namespaced ? (namespace ?? "default") : undefined, name);
  }
}
