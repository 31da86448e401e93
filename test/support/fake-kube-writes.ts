/**
 * The write verbs of the fake Kubernetes API server (fake-kube-apiserver.ts) as
 * kube-apiserver's registry runs them: create (generateName, namespace checks,
 * the kind's defaults), update by PUT (create-on-update where the kind allows
 * it), PATCH as JSON merge patch only (the one type the product sends;
 * strategic merge and JSON patch get 415), delete with uid and resourceVersion
 * preconditions; optimistic concurrency on metadata.resourceVersion, the status
 * subresource's rules, and the body checks (media type, apiVersion and kind,
 * MicroTime fields with six fractional digits) with their real messages.
 *
 * Each verb takes a parsed Route and the raw body, commits through the store
 * and answers the object in the route's version; failures are StatusErrors.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { isObject } from "../../src/common/json.js";
import { getPath, metaOf, nowSeconds } from "./fake-kube-json.js";
import type { ResourceDef, Route } from "./fake-kube-resources.js";
import { apiVersionOf, PRIMARY_DEF, view } from "./fake-kube-resources.js";
import {
  alreadyExists,
  badRequest,
  conflict,
  invalid,
  notFound,
  unsupportedMediaType,
} from "./fake-kube-status.js";
import type { FakeKubeStore } from "./fake-kube-store.js";
import type { KubeObject } from "./fake-kube-types.js";

const MICRO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}(Z|[+-]\d{2}:\d{2})$/;

/** RFC 7386 JSON merge patch. */
function applyMergePatch(target: unknown, patch: unknown): unknown {
  if (!isObject(patch)) return structuredClone(patch);
  const out: Record<string, unknown> = isObject(target) ? { ...target } : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete out[key];
    else out[key] = applyMergePatch(out[key], value);
  }
  return out;
}

/**
 * The only patch type the driver and the controller send. Strategic merge and
 * JSON patch are answered 415, as kube-apiserver answers a patch type it does
 * not take for a resource, so a client that starts sending one fails here first.
 */
const MERGE_PATCH = "application/merge-patch+json";

function requireMergePatch(contentType: string): void {
  if (contentType !== MERGE_PATCH) throw unsupportedMediaType(MERGE_PATCH);
}

function applyMergePatchBody(current: KubeObject, raw: string): KubeObject {
  let patch: unknown;
  try {
    patch = JSON.parse(raw);
  } catch (e) {
    throw badRequest(`error decoding patch: ${(e as Error).message}`);
  }
  if (!isObject(patch)) throw badRequest("Invalid JSON Patch");
  return applyMergePatch(current, patch) as KubeObject;
}

/** The stored object a route names, or 404. */
export function mustFind(store: FakeKubeStore, route: Route): KubeObject {
  const obj = store.find(route.def.storage, route.namespace, route.name!);
  if (!obj) throw notFound(route.def, route.name!);
  return obj;
}

/** A namespaced body's namespace must be the URL's (or none); the object takes the URL's. */
function takeRouteNamespace(route: Route, obj: KubeObject): void {
  const meta = metaOf(obj);
  if (meta.namespace && meta.namespace !== route.namespace) {
    throw badRequest(
      "the namespace of the provided object does not match the namespace sent on the request",
    );
  }
  meta.namespace = route.namespace;
}

function requireNameOfUrl(obj: KubeObject, name: string | undefined): void {
  const meta = metaOf(obj);
  if (meta.name !== name) {
    throw badRequest(
      `the name of the object (${meta.name ?? ""}) does not match the name on the URL (${name})`,
    );
  }
}

export class FakeKubeWrites {
  constructor(private readonly store: FakeKubeStore) {}

  create(route: Route, contentType: string, body: string): KubeObject {
    const { def } = route;
    const obj = this.decode(def, contentType, body);
    const meta = metaOf(obj);
    if (def.namespaced) takeRouteNamespace(route, obj);
    else delete meta.namespace;
    if (!meta.name && meta.generateName)
      meta.name = meta.generateName + randomBytes(3).toString("hex").slice(0, 5);
    if (!meta.name) {
      throw invalid(def, "", [
        { field: "metadata.name", message: "Required value: name or generateName is required" },
      ]);
    }
    if (meta.resourceVersion)
      throw badRequest("resourceVersion should not be set on objects to be created");
    this.checkNamespace(def, meta.namespace);
    if (this.store.find(def.storage, meta.namespace, meta.name))
      throw alreadyExists(def, meta.name);
    const stored = obj;
    const sm = metaOf(stored);
    sm.uid = randomUUID();
    sm.creationTimestamp = nowSeconds();
    delete sm.deletionTimestamp;
    def.prepareForCreate?.(stored, this.store);
    return view(def, this.store.commitCreate(def, stored));
  }

  replace(route: Route, contentType: string, body: string): { status: number; body: unknown } {
    const { def, name } = route;
    const obj = this.decode(def, contentType, body);
    const meta = metaOf(obj);
    requireNameOfUrl(obj, name);
    if (def.namespaced) takeRouteNamespace(route, obj);
    const existing = this.store.find(def.storage, route.namespace, name!);
    if (!existing) {
      if (!def.allowCreateOnUpdate || route.subresource) throw notFound(def, name!);
      delete meta.resourceVersion;
      return { status: 201, body: this.create(route, "application/json", JSON.stringify(obj)) };
    }
    return { status: 200, body: this.update(route, existing, obj) };
  }

  patch(route: Route, contentType: string, body: string): KubeObject {
    const { def, name } = route;
    requireMergePatch(contentType);
    const existing = mustFind(this.store, route);
    const current = view(def, existing);
    const patched = applyMergePatchBody(current, body);
    const meta = metaOf(patched);
    requireNameOfUrl(patched, name);
    // A patch that sets metadata.uid is a precondition too (kubelet patches pod
    // status so): the registry refuses an object whose uid is not the stored one.
    if (meta.uid !== undefined && meta.uid !== current.metadata?.uid) {
      throw conflict(
        def,
        name!,
        `StorageError: invalid object, Code: 4, Key: /registry/${def.resource}/${route.namespace ? `${route.namespace}/` : ""}${name}, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in precondition: ${meta.uid}, UID in object meta: ${current.metadata?.uid ?? ""}`,
      );
    }
    // A patch that sets metadata.resourceVersion is a precondition, as on PUT.
    if (
      meta.resourceVersion !== undefined &&
      meta.resourceVersion !== current.metadata?.resourceVersion
    ) {
      throw conflict(def, name!);
    }
    this.checkMicroTimes(def, patched);
    return this.update(route, existing, patched);
  }

  delete(route: Route, body: string): unknown {
    const { def, name } = route;
    const existing = mustFind(this.store, route);
    let options: unknown = {};
    if (body.trim() !== "") {
      try {
        options = JSON.parse(body);
      } catch {
        throw badRequest('DeleteOptions in version "v1" cannot be handled as a DeleteOptions');
      }
    }
    const pre = isObject(options) && isObject(options.preconditions) ? options.preconditions : {};
    const meta = metaOf(existing);
    if (typeof pre.uid === "string" && pre.uid !== meta.uid) {
      throw conflict(
        def,
        name!,
        `Precondition failed: UID in precondition: ${pre.uid}, UID in object meta: ${meta.uid}`,
      );
    }
    if (typeof pre.resourceVersion === "string" && pre.resourceVersion !== meta.resourceVersion) {
      throw conflict(
        def,
        name!,
        `Precondition failed: ResourceVersion in precondition: ${pre.resourceVersion}, ResourceVersion in object meta: ${meta.resourceVersion}`,
      );
    }
    const gone = this.store.commitDelete(def, existing);
    if (def.returnDeletedObject) return view(def, gone);
    // What the registry's finalizeDelete answers: a Success Status without a code.
    return {
      kind: "Status",
      apiVersion: "v1",
      metadata: {},
      status: "Success",
      details: {
        name,
        ...(def.group ? { group: def.group } : {}),
        kind: def.resource,
        uid: meta.uid,
      },
    };
  }

  /** The update both PUT and PATCH end in: optimistic concurrency, system fields, status rules. */
  private update(route: Route, existing: KubeObject, incoming: KubeObject): KubeObject {
    const { def } = route;
    const rv = incoming.metadata?.resourceVersion;
    if (rv !== undefined && rv !== "" && rv !== existing.metadata?.resourceVersion) {
      throw conflict(def, route.name!);
    }
    let next = incoming;
    const old = metaOf(existing);
    if (def.statusSubresource) {
      if (route.subresource === "status") {
        // The status endpoint changes status only (ResetObjectMetaForStatus, spec kept).
        next = { ...structuredClone(existing), status: next.status };
      } else if (existing.status !== undefined) {
        next.status = structuredClone(existing.status);
      } else delete next.status;
    }
    const meta = metaOf(next);
    meta.uid = old.uid;
    meta.creationTimestamp = old.creationTimestamp;
    meta.name = old.name;
    if (def.namespaced) meta.namespace = old.namespace;
    if (old.deletionTimestamp) meta.deletionTimestamp = old.deletionTimestamp;
    return view(def, this.store.commitUpdate(def, existing, next));
  }

  /** Parses a create/update body in the route's version and checks kind and apiVersion. */
  private decode(def: ResourceDef, contentType: string, body: string): KubeObject {
    if (contentType !== "" && contentType !== "application/json") {
      throw unsupportedMediaType(
        "application/json, application/yaml, application/vnd.kubernetes.protobuf",
      );
    }
    const cannotHandle = `${def.kind} in version "${def.version}" cannot be handled as a ${def.kind}`;
    let obj: unknown;
    try {
      obj = JSON.parse(body);
    } catch (e) {
      throw badRequest(`${cannotHandle}: ${(e as Error).message}`);
    }
    if (!isObject(obj)) {
      throw badRequest(
        `${cannotHandle}: json: cannot unmarshal ${Array.isArray(obj) ? "array" : typeof obj} into Go value of type struct`,
      );
    }
    if (obj.apiVersion !== undefined && obj.apiVersion !== apiVersionOf(def)) {
      throw badRequest(
        `the API version in the data (${String(obj.apiVersion)}) does not match the expected API version (${apiVersionOf(def)})`,
      );
    }
    if (obj.kind !== undefined && obj.kind !== def.kind) {
      throw badRequest(
        `${cannotHandle}: the kind in the data (${String(obj.kind)}) does not match the expected kind (${def.kind})`,
      );
    }
    this.checkMicroTimes(def, obj as KubeObject);
    return obj as KubeObject;
  }

  /** metav1.MicroTime parses with layout RFC3339Micro: exactly six fractional digits. */
  private checkMicroTimes(def: ResourceDef, obj: KubeObject): void {
    for (const path of def.microTimeFields) {
      const v = getPath(obj, path);
      if (typeof v === "string" && !MICRO_TIME.test(v)) {
        throw badRequest(
          `${def.kind} in version "${def.version}" cannot be handled as a ${def.kind}: parsing time "${v}" as "2006-01-02T15:04:05.000000Z07:00": cannot parse "${v.slice(19)}" as ".000000"`,
        );
      }
    }
  }

  private checkNamespace(def: ResourceDef, namespace: string | undefined): void {
    if (!def.namespaced || namespace === undefined) return;
    if (!this.store.find("namespaces", undefined, namespace)) {
      throw notFound(PRIMARY_DEF.get("namespaces")!, namespace);
    }
  }
}
