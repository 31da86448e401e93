/**
 * The types the fake Kubernetes API server (fake-kube-apiserver.ts) shows its
 * users: objects and their metadata, the stored collections, the request log,
 * fault specs, open watches and Status bodies. They live apart from the class
 * so that its parts (store, watch, HTTP) can name them without importing the
 * class; fake-kube-apiserver.ts re-exports every one, and tests import them
 * from there.
 */

export interface ObjectMeta {
  name?: string;
  generateName?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  [key: string]: unknown;
}

export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata?: ObjectMeta;
  [key: string]: unknown;
}

/** The stored collections. */
export type FakeResource =
  | "nodes"
  | "pods"
  | "configmaps"
  | "services"
  | "events"
  | "namespaces"
  | "endpointslices"
  | "leases"
  | "networkpolicies";

export interface RequestRecord {
  method: string;
  /** URL path without the query. */
  path: string;
  /** The raw query string, without "?". */
  query: string;
  watch: boolean;
  contentType?: string;
  /** Status of the answer (for a watch, of its headers). */
  status: number;
  /** Set when an injected fault produced the answer. */
  fault?: boolean;
}

export interface FaultSpec {
  /** Only this method (any when omitted). */
  method?: string;
  /** URL path (no query): a RegExp, or a string where `*` matches anything. */
  path: string | RegExp;
  /** Only watch requests (true) or only non-watch requests (false); both when omitted. */
  watch?: boolean;
  /** Only requests whose query carries this parameter (e.g. "continue": a list's later pages). */
  withParam?: string;
  /** The status to answer, with a Status body of the matching reason. */
  status: number;
  /** How many matching requests get the fault (default 1; Infinity for all). */
  times?: number;
  /** Status message (default: the real message for 409 on an object, else a generic one). */
  message?: string;
  /** Sets Retry-After and details.retryAfterSeconds (429, 500, 503 clients honour it). */
  retryAfterSeconds?: number;
}

export interface WatchInfo {
  path: string;
  resource: string;
  namespace?: string;
  resourceVersion?: string;
  labelSelector?: string;
  fieldSelector?: string;
  bookmarks: boolean;
}

export interface KubeStatus {
  kind: "Status";
  apiVersion: "v1";
  metadata: Record<string, never>;
  status: "Success" | "Failure";
  message?: string;
  reason?: string;
  details?: {
    name?: string;
    group?: string;
    kind?: string;
    uid?: string;
    causes?: { reason?: string; message?: string; field?: string }[];
    retryAfterSeconds?: number;
  };
  code: number;
}
