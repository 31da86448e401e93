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
 */
import { randomBytes, randomUUID } from "node:crypto";
import { writeFileSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { isObject } from "../../src/common/json.js";

// ---------------------------------------------------------------------------
// Public surface
// ---------------------------------------------------------------------------

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

export async function startFakeKubeApiServer(
  options: FakeKubeApiServerOptions = {},
): Promise<FakeKubeApiServer> {
  const server = new FakeKubeApiServer(options);
  await server.listen();
  return server;
}

// ---------------------------------------------------------------------------
// Resources
// ---------------------------------------------------------------------------

interface ResourceDef {
  group: string;
  version: string;
  resource: string;
  kind: string;
  namespaced: boolean;
  storage: FakeResource;
  /** Has /status: the main endpoint keeps the stored status, /status changes only status. */
  statusSubresource: boolean;
  /** DELETE answers the deleted object instead of a Status (registry ReturnDeletedObject). */
  returnDeletedObject: boolean;
  /** PUT of a missing object creates it (strategy AllowCreateOnUpdate). */
  allowCreateOnUpdate: boolean;
  /** Field selector labels beyond metadata.name and metadata.namespace, as the stored field they read. */
  fieldLabels: Record<string, string>;
  /** metav1.MicroTime fields, as paths in this version's form. */
  microTimeFields: string[][];
  prepareForCreate?(obj: KubeObject, server: FakeKubeApiServer): void;
}

function fieldTable(
  labels: string[],
  aliases: Record<string, string> = {},
): Record<string, string> {
  const table: Record<string, string> = {};
  for (const label of labels) table[label] = label;
  return { ...table, ...aliases };
}

const POD_FIELDS = fieldTable([
  "spec.nodeName",
  "spec.restartPolicy",
  "spec.schedulerName",
  "spec.serviceAccountName",
  "spec.hostNetwork",
  "status.phase",
  "status.podIP",
  "status.nominatedNodeName",
]);

const CORE_EVENT_FIELDS = fieldTable(
  [
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "type",
  ],
  { source: "source.component" },
);

// Field values that read "false" when unset (Go booleans).
const BOOLEAN_FIELDS = new Set(["spec.hostNetwork", "spec.unschedulable"]);

function coreDef(
  resource: string,
  kind: string,
  extra: Partial<ResourceDef> & { namespaced: boolean },
): ResourceDef {
  return {
    group: "",
    version: "v1",
    resource,
    kind,
    storage: resource as FakeResource,
    statusSubresource: false,
    returnDeletedObject: false,
    allowCreateOnUpdate: false,
    fieldLabels: {},
    microTimeFields: [],
    ...extra,
  };
}

const RESOURCES: ResourceDef[] = [
  coreDef("nodes", "Node", {
    namespaced: false,
    statusSubresource: true,
    fieldLabels: fieldTable(["spec.unschedulable"]),
  }),
  coreDef("pods", "Pod", {
    namespaced: true,
    statusSubresource: true,
    returnDeletedObject: true,
    fieldLabels: POD_FIELDS,
    prepareForCreate(obj) {
      // podStrategy.PrepareForCreate: status is the server's, a new pod is Pending.
      obj.status = { phase: "Pending" };
    },
  }),
  coreDef("configmaps", "ConfigMap", { namespaced: true }),
  coreDef("services", "Service", {
    namespaced: true,
    statusSubresource: true,
    returnDeletedObject: true,
    fieldLabels: fieldTable(["spec.clusterIP", "spec.type"]),
    prepareForCreate(obj, server) {
      obj.status = { loadBalancer: {} };
      const spec = (isObject(obj.spec) ? obj.spec : {}) as Record<string, unknown>;
      spec.type ??= "ClusterIP";
      if (spec.type !== "ExternalName" && (spec.clusterIP === undefined || spec.clusterIP === "")) {
        spec.clusterIP = server.allocateClusterIP();
        spec.clusterIPs = [spec.clusterIP];
      }
      obj.spec = spec;
    },
  }),
  coreDef("events", "Event", {
    namespaced: true,
    allowCreateOnUpdate: true,
    fieldLabels: CORE_EVENT_FIELDS,
    microTimeFields: [["eventTime"], ["series", "lastObservedTime"]],
  }),
  coreDef("namespaces", "Namespace", {
    namespaced: false,
    statusSubresource: true,
    returnDeletedObject: true,
    fieldLabels: fieldTable(["status.phase"]),
    prepareForCreate(obj) {
      obj.spec = { finalizers: ["kubernetes"] };
      obj.status = { phase: "Active" };
    },
  }),
  {
    ...coreDef("endpointslices", "EndpointSlice", { namespaced: true }),
    group: "discovery.k8s.io",
  },
  {
    ...coreDef("leases", "Lease", {
      namespaced: true,
      microTimeFields: [
        ["spec", "acquireTime"],
        ["spec", "renewTime"],
      ],
    }),
    group: "coordination.k8s.io",
  },
  {
    ...coreDef("networkpolicies", "NetworkPolicy", { namespaced: true }),
    group: "networking.k8s.io",
  },
];

const PRIMARY_DEF = new Map<FakeResource, ResourceDef>();
for (const def of RESOURCES) PRIMARY_DEF.set(def.storage, def);

function apiVersionOf(def: ResourceDef): string {
  return def.group === "" ? def.version : `${def.group}/${def.version}`;
}

/** `pods`, `leases.coordination.k8s.io`: how the real messages name a resource. */
function qualifiedResource(def: ResourceDef): string {
  return def.group === "" ? def.resource : `${def.resource}.${def.group}`;
}

// ---------------------------------------------------------------------------
// Status errors
// ---------------------------------------------------------------------------

const REASONS: Record<number, string> = {
  400: "BadRequest",
  401: "Unauthorized",
  403: "Forbidden",
  404: "NotFound",
  405: "MethodNotAllowed",
  406: "NotAcceptable",
  409: "Conflict",
  410: "Expired",
  413: "RequestEntityTooLarge",
  415: "UnsupportedMediaType",
  422: "Invalid",
  429: "TooManyRequests",
  500: "InternalError",
  503: "ServiceUnavailable",
  504: "Timeout",
};

class StatusError extends Error {
  constructor(readonly status: KubeStatus) {
    super(status.message);
  }
}

function failure(
  code: number,
  message: string,
  reason = REASONS[code] ?? "Unknown",
  details?: KubeStatus["details"],
): KubeStatus {
  const status: KubeStatus = {
    kind: "Status",
    apiVersion: "v1",
    metadata: {},
    status: "Failure",
    message,
    reason,
    code,
  };
  if (details) status.details = details;
  return status;
}

/** The index of the first of the sorted `keys` after `key`. */
function firstAfter(keys: readonly string[], key: string): number {
  let lo = 0;
  let hi = keys.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (keys[mid]! <= key) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** kube-apiserver's answer to a continue token whose revision etcd compacted. */
function expiredContinue(): KubeStatus {
  return failure(
    410,
    "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.",
    "Expired",
  );
}

function objectDetails(def: ResourceDef, name: string): KubeStatus["details"] {
  return def.group === ""
    ? { name, kind: def.resource }
    : { name, group: def.group, kind: def.resource };
}

function notFound(def: ResourceDef, name: string): StatusError {
  return new StatusError(
    failure(
      404,
      `${qualifiedResource(def)} "${name}" not found`,
      "NotFound",
      objectDetails(def, name),
    ),
  );
}

function alreadyExists(def: ResourceDef, name: string): StatusError {
  return new StatusError(
    failure(
      409,
      `${qualifiedResource(def)} "${name}" already exists`,
      "AlreadyExists",
      objectDetails(def, name),
    ),
  );
}

const OPTIMISTIC_LOCK_MESSAGE =
  "the object has been modified; please apply your changes to the latest version and try again";

function conflict(def: ResourceDef, name: string, why = OPTIMISTIC_LOCK_MESSAGE): StatusError {
  return new StatusError(
    failure(
      409,
      `Operation cannot be fulfilled on ${qualifiedResource(def)} "${name}": ${why}`,
      "Conflict",
      objectDetails(def, name),
    ),
  );
}

function badRequest(message: string): StatusError {
  return new StatusError(failure(400, message, "BadRequest"));
}

function invalid(
  def: ResourceDef,
  name: string,
  causes: { field: string; message: string }[],
): StatusError {
  const text = causes.map((c) => `${c.field}: ${c.message}`).join(", ");
  return new StatusError(
    failure(422, `${def.kind} "${name}" is invalid: ${text}`, "Invalid", {
      name,
      ...(def.group ? { group: def.group } : {}),
      kind: def.kind,
      causes: causes.map((c) => ({
        reason: "FieldValueRequired",
        message: c.message,
        field: c.field,
      })),
    }),
  );
}

// ---------------------------------------------------------------------------
// JSON helpers
// ---------------------------------------------------------------------------

function deepEqual(a: unknown, b: unknown): boolean {
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

function getPath(obj: unknown, path: string[]): unknown {
  let cur = obj;
  for (const key of path) {
    if (!isObject(cur)) return undefined;
    cur = cur[key];
  }
  return cur;
}

function metaOf(obj: KubeObject): ObjectMeta {
  if (!isObject(obj.metadata)) obj.metadata = {};
  return obj.metadata as ObjectMeta;
}

function nowSeconds(): string {
  return new Date().toISOString().replace(/\.\d{3}Z$/, "Z");
}

/** Go's strconv.ParseBool for true. */
function isTrue(v: string | null): boolean {
  return v !== null && ["1", "t", "T", "true", "TRUE", "True"].includes(v);
}

// ---------------------------------------------------------------------------
// Selectors
// ---------------------------------------------------------------------------

type LabelRequirement =
  | { op: "=" | "!="; key: string; value: string }
  | { op: "in" | "notin"; key: string; values: string[] }
  | { op: "exists" | "!exists"; key: string };

/** Splits on commas outside parentheses. */
function splitTopLevel(selector: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < selector.length; i++) {
    const c = selector[i];
    if (c === "(") depth++;
    else if (c === ")") depth--;
    else if (c === "," && depth === 0) {
      parts.push(selector.slice(start, i));
      start = i + 1;
    }
  }
  parts.push(selector.slice(start));
  return parts.map((p) => p.trim()).filter((p) => p !== "");
}

const LABEL_KEY = /^([a-zA-Z0-9.\-_/]+)$/;

export function parseLabelSelector(selector: string): LabelRequirement[] {
  return splitTopLevel(selector).map((part) => {
    let m = /^(\S+?)\s+(in|notin)\s*\(([^)]*)\)$/.exec(part);
    if (m) {
      const values = m[3]!.split(",").map((v) => v.trim());
      return { op: m[2] as "in" | "notin", key: m[1]!, values };
    }
    m = /^([^=!\s]+)\s*(==|=|!=)\s*(\S*)$/.exec(part);
    if (m) return { op: m[2] === "!=" ? "!=" : "=", key: m[1]!, value: m[3]! };
    m = /^!\s*(\S+)$/.exec(part);
    if (m && LABEL_KEY.test(m[1]!)) return { op: "!exists", key: m[1]! };
    if (LABEL_KEY.test(part)) return { op: "exists", key: part };
    throw badRequest(
      `unable to parse requirement: found '${part}', expected: !, identifier, or 'end of string'`,
    );
  });
}

function requirementHolds(r: LabelRequirement, labels: Record<string, string>): boolean {
  const has = Object.hasOwn(labels, r.key);
  const value = labels[r.key];
  if (r.op === "=") return has && value === r.value;
  if (r.op === "!=") return !has || value !== r.value;
  if (r.op === "in") return has && r.values.includes(value!);
  if (r.op === "notin") return !has || !r.values.includes(value!);
  return r.op === "exists" ? has : !has;
}

function labelsMatch(
  reqs: LabelRequirement[],
  labels: Record<string, string> | undefined,
): boolean {
  return reqs.every((r) => requirementHolds(r, labels ?? {}));
}

interface FieldRequirement {
  field: string;
  op: "=" | "!=";
  value: string;
}

function parseFieldSelector(def: ResourceDef, selector: string): FieldRequirement[] {
  return splitTopLevel(selector).map((part) => {
    const m = /^([^=!]+?)\s*(==|=|!=)\s*(.*)$/.exec(part);
    if (!m) throw badRequest(`invalid selector: '${selector}'; can't understand '${part}'`);
    const label = m[1]!;
    const field =
      label === "metadata.name" || label === "metadata.namespace" ? label : def.fieldLabels[label];
    if (field === undefined) throw badRequest(`field label not supported: ${label}`);
    return { field, op: m[2] === "!=" ? "!=" : "=", value: m[3]! };
  });
}

function fieldValue(stored: KubeObject, field: string): string {
  const v = getPath(stored, field.split("."));
  if (v === undefined || v === null) return BOOLEAN_FIELDS.has(field) ? "false" : "";
  return String(v);
}

function fieldsMatch(reqs: FieldRequirement[], stored: KubeObject): boolean {
  return reqs.every((r) => (fieldValue(stored, r.field) === r.value) === (r.op === "="));
}

// ---------------------------------------------------------------------------
// Patches
// ---------------------------------------------------------------------------

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
  if (contentType !== MERGE_PATCH) {
    throw new StatusError(
      failure(
        415,
        `the body of the request was in an unknown format - accepted media types include: ${MERGE_PATCH}`,
        "UnsupportedMediaType",
      ),
    );
  }
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

// ---------------------------------------------------------------------------
// Watches
// ---------------------------------------------------------------------------

type WatchType = "ADDED" | "MODIFIED" | "DELETED";

interface HistoryEntry {
  rv: number;
  type: WatchType;
  /** The object after the change (for DELETED: its last state at the deletion's revision). */
  object: KubeObject;
  /** The object before the change. */
  prev?: KubeObject;
}

interface Watcher {
  def: ResourceDef;
  info: WatchInfo;
  namespace?: string;
  labels: LabelRequirement[];
  fields: FieldRequirement[];
  res: http.ServerResponse;
  timer?: NodeJS.Timeout;
}

// ---------------------------------------------------------------------------
// The server
// ---------------------------------------------------------------------------

interface Route {
  def: ResourceDef;
  namespace?: string;
  name?: string;
  subresource?: string;
}

const DEFAULT_NAMESPACES = ["default", "kube-system", "kube-public", "kube-node-lease"];
const MICRO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}(Z|[+-]\d{2}:\d{2})$/;

interface ActiveFault extends FaultSpec {
  remaining: number;
}

export class FakeKubeApiServer {
  readonly token: string;
  private readonly requireAuth: boolean;
  private readonly historyLimit: number;
  private readonly expiredWatchAs: "event" | "status";
  private readonly server: http.Server;
  private port = 0;
  private revision = 0;
  private nextClusterIP = 10;
  private readonly objects = new Map<FakeResource, Map<string, KubeObject>>();
  private readonly history = new Map<FakeResource, HistoryEntry[]>();
  /** Per resource: the highest revision whose events are gone; older watches get 410. */
  private readonly compactedThrough = new Map<FakeResource, number>();
  /** Per resource: its keys and objects in etcd key order, until the next write (a paged list reads them once a page). */
  private readonly inKeyOrder = new Map<FakeResource, { keys: string[]; objects: KubeObject[] }>();
  private readonly watchers = new Set<Watcher>();
  private readonly faults: ActiveFault[] = [];
  private readonly log: RequestRecord[] = [];

  constructor(options: FakeKubeApiServerOptions = {}) {
    this.token = options.token ?? randomBytes(16).toString("hex");
    this.requireAuth = options.requireAuth ?? true;
    this.historyLimit = options.historyLimit ?? 1000;
    this.expiredWatchAs = options.expiredWatchAs ?? "event";
    for (const def of RESOURCES) {
      this.objects.set(def.storage, new Map());
      this.history.set(def.storage, []);
      this.compactedThrough.set(def.storage, 0);
    }
    for (const ns of options.namespaces ?? DEFAULT_NAMESPACES) {
      this.put("namespaces", {
        metadata: { name: ns },
        spec: { finalizers: ["kubernetes"] },
        status: { phase: "Active" },
      });
    }
    this.server = http.createServer((req, res) => {
      this.handle(req, res).catch((e: unknown) => {
        if (!res.headersSent)
          this.send(req, res, 500, failure(500, `Internal error occurred: ${String(e)}`));
        else res.destroy();
      });
    });
  }

  /** @internal started by startFakeKubeApiServer */
  async listen(): Promise<void> {
    await new Promise<void>((resolve, reject) => {
      this.server.once("error", reject);
      this.server.listen(0, "127.0.0.1", () => resolve());
    });
    this.port = (this.server.address() as AddressInfo).port;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
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
    return String(this.revision);
  }

  /**
   * Creates or replaces an object as the cluster's own controllers would (no
   * validation, no optimistic concurrency, no namespace check), in the stored form
   * (core/v1 for events). Fills uid, creationTimestamp and resourceVersion, emits
   * ADDED or MODIFIED (nothing when the object is unchanged). Returns a copy.
   */
  put(resource: FakeResource, obj: KubeObject): KubeObject {
    const def = PRIMARY_DEF.get(resource)!;
    const next = structuredClone(obj);
    const meta = metaOf(next);
    if (!meta.name) throw new Error(`put(${resource}): metadata.name is required`);
    if (def.namespaced) meta.namespace ??= "default";
    else delete meta.namespace;
    const key = this.keyOf(meta.namespace, meta.name);
    const existing = this.objects.get(resource)!.get(key);
    if (existing) {
      const old = metaOf(existing);
      meta.uid ??= old.uid;
      meta.creationTimestamp ??= old.creationTimestamp;
      return structuredClone(this.commitUpdate(def, existing, next));
    }
    return structuredClone(this.commitCreate(def, next));
  }

  /** Deletes an object (emits DELETED); returns its last state, or undefined if absent. */
  remove(
    resource: FakeResource,
    namespace: string | undefined,
    name: string,
  ): KubeObject | undefined {
    const def = PRIMARY_DEF.get(resource)!;
    const existing = this.objects
      .get(resource)!
      .get(this.keyOf(def.namespaced ? (namespace ?? "default") : undefined, name));
    return existing ? structuredClone(this.commitDelete(def, existing)) : undefined;
  }

  /** A copy of a stored object. */
  get(resource: FakeResource, namespace: string | undefined, name: string): KubeObject | undefined {
    const def = PRIMARY_DEF.get(resource)!;
    const obj = this.objects
      .get(resource)!
      .get(this.keyOf(def.namespaced ? (namespace ?? "default") : undefined, name));
    return obj ? structuredClone(obj) : undefined;
  }

  /** Copies of the stored objects of a resource, in etcd key order; one namespace when given. */
  list(resource: FakeResource, namespace?: string): KubeObject[] {
    return this.sorted(resource)
      .filter((o) => namespace === undefined || o.metadata?.namespace === namespace)
      .map((o) => structuredClone(o));
  }

  /**
   * Forgets all watch history, as an etcd compaction does: a watch from any
   * older revision gets 410, and so does the continue token of a list begun before.
   */
  compact(): void {
    for (const def of RESOURCES) {
      this.history.set(def.storage, []);
      this.compactedThrough.set(def.storage, this.revision);
    }
  }

  /** Sends a BOOKMARK at the current revision to every watch that asked for bookmarks. */
  bookmark(): void {
    for (const w of this.watchers) {
      if (!w.info.bookmarks) continue;
      this.writeEvent(w, "BOOKMARK", {
        apiVersion: apiVersionOf(w.def),
        kind: w.def.kind,
        metadata: { resourceVersion: this.resourceVersion() },
      });
    }
  }

  /** Ends every open watch cleanly, as the server's watch timeout does; clients re-watch. */
  endWatches(): void {
    for (const w of [...this.watchers]) this.endWatch(w);
  }

  openWatches(): WatchInfo[] {
    return [...this.watchers].map((w) => ({ ...w.info }));
  }

  /** The next `times` requests matching `spec` answer `spec.status`. */
  injectFault(spec: FaultSpec): void {
    this.faults.push({ ...spec, remaining: spec.times ?? 1 });
  }

  clearFaults(): void {
    this.faults.length = 0;
  }

  /** Every request so far, in order of arrival. */
  get requests(): readonly RequestRecord[] {
    return this.log;
  }

  clearRequests(): void {
    this.log.length = 0;
  }

  async close(): Promise<void> {
    this.endWatches();
    await new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }

  /** @internal next ClusterIP for a Service created without one. */
  allocateClusterIP(): string {
    const n = this.nextClusterIP++;
    return `10.96.${Math.floor(n / 256)}.${n % 256}`;
  }

  // -------------------------------------------------------------------------
  // Storage and events
  // -------------------------------------------------------------------------

  private keyOf(namespace: string | undefined, name: string): string {
    return `${namespace ?? ""}/${name}`;
  }

  private sorted(resource: FakeResource): readonly KubeObject[] {
    return this.keyOrder(resource).objects;
  }

  private keyOrder(resource: FakeResource): { keys: string[]; objects: KubeObject[] } {
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

  private commitCreate(def: ResourceDef, obj: KubeObject): KubeObject {
    const meta = metaOf(obj);
    meta.uid ??= randomUUID();
    meta.creationTimestamp ??= nowSeconds();
    meta.resourceVersion = String(++this.revision);
    const stored = this.normalize(def, obj);
    this.objects.get(def.storage)!.set(this.keyOf(meta.namespace, meta.name!), stored);
    this.record(def.storage, { rv: this.revision, type: "ADDED", object: stored });
    return stored;
  }

  /** Stores `next` over `existing` unless nothing but the resourceVersion differs. */
  private commitUpdate(def: ResourceDef, existing: KubeObject, next: KubeObject): KubeObject {
    const candidate = this.normalize(def, next);
    metaOf(candidate).resourceVersion = existing.metadata?.resourceVersion;
    if (deepEqual(candidate, existing)) return existing;
    metaOf(candidate).resourceVersion = String(++this.revision);
    const meta = metaOf(candidate);
    this.objects.get(def.storage)!.set(this.keyOf(meta.namespace, meta.name!), candidate);
    this.record(def.storage, {
      rv: this.revision,
      type: "MODIFIED",
      object: candidate,
      prev: existing,
    });
    return candidate;
  }

  private commitDelete(def: ResourceDef, existing: KubeObject): KubeObject {
    const meta = metaOf(existing);
    this.objects.get(def.storage)!.delete(this.keyOf(meta.namespace, meta.name!));
    // The DELETED event carries the last state at the deletion's revision.
    const gone = structuredClone(existing);
    metaOf(gone).resourceVersion = String(++this.revision);
    this.record(def.storage, { rv: this.revision, type: "DELETED", object: gone, prev: existing });
    return gone;
  }

  /** Stored form: apiVersion and kind of the storage's primary version first. */
  private normalize(def: ResourceDef, obj: KubeObject): KubeObject {
    const primary = PRIMARY_DEF.get(def.storage)!;
    const { apiVersion: _a, kind: _k, metadata, ...rest } = obj;
    return { apiVersion: apiVersionOf(primary), kind: primary.kind, metadata, ...rest };
  }

  private record(storage: FakeResource, entry: HistoryEntry): void {
    this.inKeyOrder.delete(storage);
    const log = this.history.get(storage)!;
    log.push(entry);
    while (log.length > this.historyLimit) {
      const dropped = log.shift()!;
      this.compactedThrough.set(storage, dropped.rv);
    }
    for (const w of this.watchers) {
      if (w.def.storage === storage) this.deliver(w, entry);
    }
  }

  private matches(w: Watcher, stored: KubeObject): boolean {
    if (w.namespace !== undefined && stored.metadata?.namespace !== w.namespace) return false;
    return labelsMatch(w.labels, stored.metadata?.labels) && fieldsMatch(w.fields, stored);
  }

  /** The cacher's rule: an object entering the selector is ADDED, leaving it is DELETED. */
  private deliver(w: Watcher, entry: HistoryEntry): void {
    const now = entry.type !== "DELETED" && this.matches(w, entry.object);
    const before = entry.prev !== undefined && this.matches(w, entry.prev);
    if (now && !before) this.writeEvent(w, "ADDED", this.view(w.def, entry.object));
    else if (now && before) this.writeEvent(w, "MODIFIED", this.view(w.def, entry.object));
    else if (!now && before) {
      const last = structuredClone(entry.prev!);
      metaOf(last).resourceVersion = String(entry.rv);
      this.writeEvent(w, "DELETED", this.view(w.def, last));
    }
  }

  private writeEvent(w: Watcher, type: string, object: unknown): void {
    if (!w.res.writableEnded) w.res.write(`${JSON.stringify({ type, object })}\n`);
  }

  private endWatch(w: Watcher): void {
    this.watchers.delete(w);
    if (w.timer) clearTimeout(w.timer);
    if (!w.res.writableEnded) w.res.end();
  }

  /** An object as the given API version shows it, apiVersion and kind first. */
  private view(def: ResourceDef, stored: KubeObject): KubeObject {
    const converted = structuredClone(stored);
    const { apiVersion: _a, kind: _k, metadata, ...rest } = converted;
    return { apiVersion: apiVersionOf(def), kind: def.kind, metadata, ...rest };
  }

  // -------------------------------------------------------------------------
  // HTTP
  // -------------------------------------------------------------------------

  private send(
    req: http.IncomingMessage,
    res: http.ServerResponse,
    status: number,
    body: unknown,
    extra: Partial<RequestRecord> = {},
    headers: Record<string, string> = {},
  ): void {
    this.logRequest(req, status, extra);
    const text = typeof body === "string" ? body : JSON.stringify(body);
    res.writeHead(status, {
      "Content-Type": typeof body === "string" ? "text/plain; charset=utf-8" : "application/json",
      "Content-Length": Buffer.byteLength(text),
      ...headers,
    });
    res.end(text);
  }

  private logRequest(
    req: http.IncomingMessage,
    status: number,
    extra: Partial<RequestRecord> = {},
  ): void {
    const url = new URL(req.url ?? "/", "http://x");
    this.log.push({
      method: req.method ?? "",
      path: url.pathname,
      query: url.search.slice(1),
      watch: isTrue(url.searchParams.get("watch")),
      ...(req.headers["content-type"] ? { contentType: req.headers["content-type"] } : {}),
      status,
      ...extra,
    });
  }

  private async readBody(req: http.IncomingMessage): Promise<string> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks).toString("utf8");
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", "http://x");
    const method = req.method ?? "GET";
    const body = await this.readBody(req);
    const path = url.pathname.replace(/\/+$/, "") || "/";
    const query = url.searchParams;
    const watch = isTrue(query.get("watch"));

    if (this.requireAuth && req.headers.authorization !== `Bearer ${this.token}`) {
      return this.send(req, res, 401, failure(401, "Unauthorized", "Unauthorized"));
    }

    const fault = this.takeFault(method, path, watch, query);
    if (fault) {
      const status = this.faultStatus(fault, path);
      const headers: Record<string, string> =
        fault.retryAfterSeconds !== undefined
          ? { "Retry-After": String(fault.retryAfterSeconds) }
          : {};
      return this.send(req, res, fault.status, status, { fault: true }, headers);
    }

    let route: Route | undefined;
    try {
      route = this.route(path);
      if (!route) return this.send(req, res, 404, "404 page not found");
      const contentType = (req.headers["content-type"] ?? "").split(";")[0]!.trim().toLowerCase();
      const result = this.dispatch(method, route, query, contentType, body, req, res);
      if (result === "watching") return;
      this.send(req, res, result.status, result.body);
    } catch (e) {
      if (e instanceof StatusError) return this.send(req, res, e.status.code, e.status);
      throw e;
    }
  }

  private takeFault(
    method: string,
    path: string,
    watch: boolean,
    query: URLSearchParams,
  ): ActiveFault | undefined {
    const idx = this.faults.findIndex(
      (f) =>
        f.remaining > 0 &&
        (f.method === undefined || f.method.toUpperCase() === method) &&
        (f.watch === undefined || f.watch === watch) &&
        (f.withParam === undefined || query.has(f.withParam)) &&
        (typeof f.path === "string"
          ? new RegExp(
              `^${f.path
                .split("*")
                .map((s) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"))
                .join(".*")}$`,
            ).test(path)
          : f.path.test(path)),
    );
    if (idx < 0) return undefined;
    const fault = this.faults[idx]!;
    fault.remaining--;
    if (fault.remaining <= 0) this.faults.splice(idx, 1);
    return fault;
  }

  private faultStatus(fault: FaultSpec, path: string): KubeStatus {
    const route = this.route(path);
    const retry =
      fault.retryAfterSeconds !== undefined ? { retryAfterSeconds: fault.retryAfterSeconds } : {};
    if (fault.status === 409 && route?.name && fault.message === undefined) {
      return conflict(route.def, route.name).status;
    }
    if (fault.status === 404 && route?.name && fault.message === undefined) {
      return notFound(route.def, route.name).status;
    }
    const message =
      fault.message ??
      (fault.status === 500
        ? "Internal error occurred: injected fault"
        : `injected fault (${fault.status})`);
    const details = route?.name ? { ...objectDetails(route.def, route.name), ...retry } : retry;
    return failure(
      fault.status,
      message,
      REASONS[fault.status] ?? "Unknown",
      Object.keys(details).length ? details : undefined,
    );
  }

  private route(path: string): Route | undefined {
    const segs = path
      .split("/")
      .filter((s) => s !== "")
      .map(decodeURIComponent);
    let group: string;
    let rest: string[];
    if (segs[0] === "api" && segs[1] === "v1") {
      group = "";
      rest = segs.slice(2);
    } else if (segs[0] === "apis" && segs.length >= 3 && segs[2] === "v1") {
      group = segs[1]!;
      rest = segs.slice(3);
    } else return undefined;
    const find = (resource: string | undefined) =>
      RESOURCES.find((d) => d.group === group && d.resource === resource);
    if (rest[0] === "namespaces" && rest.length >= 3 && find(rest[2])?.namespaced) {
      if (rest.length > 5) return undefined;
      return { def: find(rest[2])!, namespace: rest[1]!, name: rest[3], subresource: rest[4] };
    }
    const def = find(rest[0]);
    if (!def || rest.length > 3) return undefined;
    // A namespaced resource has no cluster-wide object paths, only the all-namespaces collection.
    if (def.namespaced && rest.length > 1) return undefined;
    return { def, name: rest[1], subresource: rest[2] };
  }

  private dispatch(
    method: string,
    route: Route,
    query: URLSearchParams,
    contentType: string,
    body: string,
    req: http.IncomingMessage,
    res: http.ServerResponse,
  ): { status: number; body: unknown } | "watching" {
    const { def, name, subresource } = route;
    const notAllowed = () =>
      new StatusError(
        failure(
          405,
          "the server does not allow this method on the requested resource",
          "MethodNotAllowed",
        ),
      );
    if (
      subresource !== undefined &&
      (subresource !== "status" || !def.statusSubresource || !name)
    ) {
      return { status: 404, body: "404 page not found" };
    }
    if (name === undefined) {
      if (method === "GET") {
        if (isTrue(query.get("watch"))) {
          this.startWatch(route, query, req, res);
          return "watching";
        }
        return { status: 200, body: this.listResponse(route, query) };
      }
      if (method === "POST") {
        if (def.namespaced && route.namespace === undefined) throw notAllowed();
        return { status: 201, body: this.create(route, contentType, body) };
      }
      throw notAllowed();
    }
    switch (method) {
      case "GET":
        if (isTrue(query.get("watch"))) {
          // Watching one object: the deprecated form of fieldSelector=metadata.name=<name>.
          const q = new URLSearchParams(query);
          const selector = q.get("fieldSelector");
          q.set(
            "fieldSelector",
            selector ? `${selector},metadata.name=${name}` : `metadata.name=${name}`,
          );
          this.startWatch({ def, namespace: route.namespace }, q, req, res);
          return "watching";
        }
        return { status: 200, body: this.view(def, this.mustGet(route)) };
      case "PUT":
        return this.replace(route, contentType, body);
      case "PATCH":
        return { status: 200, body: this.patch(route, contentType, body) };
      case "DELETE":
        if (subresource) throw notAllowed();
        return { status: 200, body: this.delete(route, body) };
      default:
        throw notAllowed();
    }
  }

  private findStored(route: Route): KubeObject | undefined {
    return this.objects.get(route.def.storage)!.get(this.keyOf(route.namespace, route.name!));
  }

  private mustGet(route: Route): KubeObject {
    const obj = this.findStored(route);
    if (!obj) throw notFound(route.def, route.name!);
    return obj;
  }

  private listResponse(route: Route, query: URLSearchParams): unknown {
    const { def } = route;
    const labels = parseLabelSelector(query.get("labelSelector") ?? "");
    const fields = parseFieldSelector(def, query.get("fieldSelector") ?? "");
    const matches = (o: KubeObject) =>
      (route.namespace === undefined || o.metadata?.namespace === route.namespace) &&
      labelsMatch(labels, o.metadata?.labels) &&
      fieldsMatch(fields, o);
    const { keys, objects } = this.keyOrder(def.storage);
    /** The revision the list began at: its continue tokens carry it from page to page. */
    let listRv = this.revision;
    let from = 0;
    const token = query.get("continue");
    if (token) {
      let start: string;
      try {
        ({ start, rv: listRv } = JSON.parse(Buffer.from(token, "base64url").toString("utf8")) as {
          start: string;
          rv: number;
        });
        if (typeof start !== "string" || typeof listRv !== "number") throw new Error();
      } catch {
        throw badRequest(
          "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
        );
      }
      // The revision the list began at is compacted away: its continuation cannot be consistent.
      if (listRv < this.compactedThrough.get(def.storage)!)
        throw new StatusError(expiredContinue());
      from = firstAfter(keys, start);
    }
    // Every page of a list names the revision the list began at.
    const metadata: Record<string, unknown> = { resourceVersion: String(listRv) };
    const limit = Number(query.get("limit") ?? "0");
    const items: KubeObject[] = [];
    let i = from;
    for (; i < objects.length && !(limit > 0 && items.length === limit); i++)
      if (matches(objects[i]!)) items.push(objects[i]!);
    // How many more (kube-apiserver counts them only for a list without selectors), or whether any.
    const counted = labels.length === 0 && fields.length === 0;
    let remaining = 0;
    if (counted && route.namespace === undefined) remaining = objects.length - i;
    else
      for (let j = i; j < objects.length; j++) {
        if (!matches(objects[j]!)) continue;
        remaining++;
        if (!counted) break;
      }
    if (remaining > 0) {
      const last = items.at(-1)!;
      metadata.continue = Buffer.from(
        JSON.stringify({
          rv: listRv,
          start: this.keyOf(last.metadata?.namespace, last.metadata!.name!),
        }),
      ).toString("base64url");
      if (labels.length === 0 && fields.length === 0) metadata.remainingItemCount = remaining;
    }
    // Items of a list carry no apiVersion/kind on the wire; the list does.
    return {
      kind: `${def.kind}List`,
      apiVersion: apiVersionOf(def),
      metadata,
      items: items.map((o) => {
        const { apiVersion: _a, kind: _k, ...rest } = this.view(def, o);
        return rest;
      }),
    };
  }

  private startWatch(
    route: Route,
    query: URLSearchParams,
    req: http.IncomingMessage,
    res: http.ServerResponse,
  ): void {
    const { def } = route;
    const labels = parseLabelSelector(query.get("labelSelector") ?? "");
    const fields = parseFieldSelector(def, query.get("fieldSelector") ?? "");
    const rvParam = query.get("resourceVersion") ?? "";
    let from: number | undefined;
    if (rvParam !== "" && rvParam !== "0") {
      if (!/^\d+$/.test(rvParam)) throw badRequest(`invalid resource version: ${rvParam}`);
      from = Number(rvParam);
    }
    const info: WatchInfo = {
      path: new URL(req.url ?? "/", "http://x").pathname,
      resource: qualifiedResource(def),
      ...(route.namespace !== undefined ? { namespace: route.namespace } : {}),
      ...(rvParam ? { resourceVersion: rvParam } : {}),
      ...(query.get("labelSelector") ? { labelSelector: query.get("labelSelector")! } : {}),
      ...(query.get("fieldSelector") ? { fieldSelector: query.get("fieldSelector")! } : {}),
      bookmarks: isTrue(query.get("allowWatchBookmarks")),
    };
    const compacted = this.compactedThrough.get(def.storage)!;
    if (from !== undefined && from < compacted) {
      const expired = failure(410, `too old resource version: ${from} (${compacted})`, "Expired");
      if (this.expiredWatchAs === "status") throw new StatusError(expired);
      this.logRequest(req, 200);
      res.writeHead(200, { "Content-Type": "application/json" });
      res.end(`${JSON.stringify({ type: "ERROR", object: expired })}\n`);
      return;
    }
    this.logRequest(req, 200);
    res.writeHead(200, { "Content-Type": "application/json", "Transfer-Encoding": "chunked" });
    res.flushHeaders();
    const w: Watcher = {
      def,
      info,
      labels,
      fields,
      res,
      ...(route.namespace !== undefined ? { namespace: route.namespace } : {}),
    };
    if (from === undefined) {
      // No resourceVersion: the current state as synthetic ADDED events, then changes.
      for (const o of this.sorted(def.storage))
        if (this.matches(w, o)) this.writeEvent(w, "ADDED", this.view(def, o));
    } else {
      for (const entry of this.history.get(def.storage)!)
        if (entry.rv > from) this.deliver(w, entry);
    }
    this.watchers.add(w);
    const timeout = Number(query.get("timeoutSeconds") ?? "0");
    if (timeout > 0) w.timer = setTimeout(() => this.endWatch(w), timeout * 1000);
    res.on("close", () => {
      this.watchers.delete(w);
      if (w.timer) clearTimeout(w.timer);
    });
  }

  /** Parses a create/update body in the route's version and checks kind and apiVersion. */
  private decode(def: ResourceDef, contentType: string, body: string): KubeObject {
    if (contentType !== "" && contentType !== "application/json") {
      throw new StatusError(
        failure(
          415,
          `the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf`,
          "UnsupportedMediaType",
        ),
      );
    }
    let obj: unknown;
    try {
      obj = JSON.parse(body);
    } catch (e) {
      throw badRequest(
        `${def.kind} in version "${def.version}" cannot be handled as a ${def.kind}: ${(e as Error).message}`,
      );
    }
    if (!isObject(obj)) {
      throw badRequest(
        `${def.kind} in version "${def.version}" cannot be handled as a ${def.kind}: json: cannot unmarshal ${Array.isArray(obj) ? "array" : typeof obj} into Go value of type struct`,
      );
    }
    if (obj.apiVersion !== undefined && obj.apiVersion !== apiVersionOf(def)) {
      throw badRequest(
        `the API version in the data (${String(obj.apiVersion)}) does not match the expected API version (${apiVersionOf(def)})`,
      );
    }
    if (obj.kind !== undefined && obj.kind !== def.kind) {
      throw badRequest(
        `${def.kind} in version "${def.version}" cannot be handled as a ${def.kind}: the kind in the data (${String(obj.kind)}) does not match the expected kind (${def.kind})`,
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
    if (!this.objects.get("namespaces")!.has(this.keyOf(undefined, namespace))) {
      throw notFound(PRIMARY_DEF.get("namespaces")!, namespace);
    }
  }

  private create(route: Route, contentType: string, body: string): KubeObject {
    const { def } = route;
    const obj = this.decode(def, contentType, body);
    const meta = metaOf(obj);
    if (def.namespaced) {
      if (meta.namespace && meta.namespace !== route.namespace) {
        throw badRequest(
          "the namespace of the provided object does not match the namespace sent on the request",
        );
      }
      meta.namespace = route.namespace;
    } else delete meta.namespace;
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
    if (this.findStored({ def, namespace: meta.namespace, name: meta.name }))
      throw alreadyExists(def, meta.name);
    const stored = obj;
    const sm = metaOf(stored);
    sm.uid = randomUUID();
    sm.creationTimestamp = nowSeconds();
    delete sm.deletionTimestamp;
    def.prepareForCreate?.(stored, this);
    return this.view(def, this.commitCreate(def, stored));
  }

  private replace(
    route: Route,
    contentType: string,
    body: string,
  ): { status: number; body: unknown } {
    const { def, name } = route;
    const obj = this.decode(def, contentType, body);
    const meta = metaOf(obj);
    if (meta.name !== name) {
      throw badRequest(
        `the name of the object (${meta.name ?? ""}) does not match the name on the URL (${name})`,
      );
    }
    if (def.namespaced) {
      if (meta.namespace && meta.namespace !== route.namespace) {
        throw badRequest(
          "the namespace of the provided object does not match the namespace sent on the request",
        );
      }
      meta.namespace = route.namespace;
    }
    const existing = this.findStored(route);
    if (!existing) {
      if (!def.allowCreateOnUpdate || route.subresource) throw notFound(def, name!);
      delete meta.resourceVersion;
      return { status: 201, body: this.create(route, "application/json", JSON.stringify(obj)) };
    }
    return { status: 200, body: this.update(route, existing, obj) };
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
    return this.view(def, this.commitUpdate(def, existing, next));
  }

  private patch(route: Route, contentType: string, body: string): KubeObject {
    const { def, name } = route;
    requireMergePatch(contentType);
    const existing = this.mustGet(route);
    const current = this.view(def, existing);
    const patched = applyMergePatchBody(current, body);
    const meta = metaOf(patched);
    if (meta.name !== name) {
      throw badRequest(
        `the name of the object (${meta.name ?? ""}) does not match the name on the URL (${name})`,
      );
    }
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

  private delete(route: Route, body: string): unknown {
    const { def, name } = route;
    const existing = this.mustGet(route);
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
    const gone = this.commitDelete(def, existing);
    if (def.returnDeletedObject) return this.view(def, gone);
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
}
