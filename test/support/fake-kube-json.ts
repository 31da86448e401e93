/**
 * Small object and value helpers the parts of the fake Kubernetes API server
 * (fake-kube-apiserver.ts) share: deep equality (an update that changes
 * nothing is a no-op), reading a field by path (field selectors, MicroTime
 * checks), an object's metadata, a timestamp in the API's second precision,
 * and Go's ParseBool for query flags. Kept apart so that store, watch and HTTP
 * layer each take them from one place.
 */
import { isObject } from "../../src/common/json.js";
import type { KubeObject, ObjectMeta } from "./fake-kube-types.js";

export function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a)) {
    return Array.isArray(b) && a.length === b.length && a.every((v, i) => deepEqual(v, b[i]));
  }
  if (isObject(a) && isObject(b)) {
    const ka = Object.keys(a).filter((k) => a[k] !== undefined);
    const kb = Object.keys(b).filter((k) => b[k] !== undefined);
    return ka.length === kb.length && ka.every((k) => deepEqual(a[k], b[k]));
  }
  return false;
}

export function getPath(obj: unknown, path: string[]): unknown {
  let cur = obj;
  for (const key of path) {
    if (!isObject(cur)) return undefined;
    cur = cur[key];
  }
  return cur;
}

export function metaOf(obj: KubeObject): ObjectMeta {
  if (!isObject(obj.metadata)) obj.metadata = {};
  return obj.metadata as ObjectMeta;
}

export function nowSeconds(): string {
  return new Date().toISOString().replace(/\.\d{3}Z$/, "Z");
}

/** Go's strconv.ParseBool for true. */
export function isTrue(v: string | null): boolean {
  return v !== null && ["1", "t", "T", "true", "TRUE", "True"].includes(v);
}
