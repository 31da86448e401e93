/**
 * The kinds the fake Kubernetes API server (fake-kube-apiserver.ts) serves, as
 * kube-apiserver's registry describes them: group, version, kind, scope, the
 * status subresource, what DELETE answers, the field selector labels, the
 * MicroTime fields and the defaults a create fills in. Also how an object looks
 * in a version (stored form, wire form) and which URL path names which
 * resource. Everything here is a table or a pure function of one, so the
 * store, the watches and the HTTP layer read the same description.
 */
import { isObject } from "../../src/common/json.js";
import type { FakeResource, KubeObject } from "./fake-kube-types.js";

/** What a kind's defaulting may ask of the cluster. */
export interface ClusterIPAllocator {
  allocateClusterIP(): string;
}

export interface ResourceDef {
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
  prepareForCreate?(obj: KubeObject, cluster: ClusterIPAllocator): void;
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

export const RESOURCES: ResourceDef[] = [
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
    prepareForCreate(obj, cluster) {
      obj.status = { loadBalancer: {} };
      const spec = (isObject(obj.spec) ? obj.spec : {}) as Record<string, unknown>;
      spec.type ??= "ClusterIP";
      if (spec.type !== "ExternalName" && (spec.clusterIP === undefined || spec.clusterIP === "")) {
        spec.clusterIP = cluster.allocateClusterIP();
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

export const PRIMARY_DEF = new Map<FakeResource, ResourceDef>();
for (const def of RESOURCES) PRIMARY_DEF.set(def.storage, def);

export function apiVersionOf(def: ResourceDef): string {
  return def.group === "" ? def.version : `${def.group}/${def.version}`;
}

/** `pods`, `leases.coordination.k8s.io`: how the real messages name a resource. */
export function qualifiedResource(def: ResourceDef): string {
  return def.group === "" ? def.resource : `${def.resource}.${def.group}`;
}

/** `obj` with the apiVersion and kind of `def`, first. */
function inVersion(def: ResourceDef, obj: KubeObject): KubeObject {
  const { apiVersion: _a, kind: _k, metadata, ...rest } = obj;
  return { apiVersion: apiVersionOf(def), kind: def.kind, metadata, ...rest };
}

/** Stored form: apiVersion and kind of the storage's primary version first. */
export function normalize(def: ResourceDef, obj: KubeObject): KubeObject {
  return inVersion(PRIMARY_DEF.get(def.storage)!, obj);
}

/** An object as the given API version shows it (a copy), apiVersion and kind first. */
export function view(def: ResourceDef, stored: KubeObject): KubeObject {
  return inVersion(def, structuredClone(stored));
}

// ---------------------------------------------------------------------------
// Paths
// ---------------------------------------------------------------------------

export interface Route {
  def: ResourceDef;
  namespace?: string;
  name?: string;
  subresource?: string;
}

/** The resource, namespace, name and subresource a URL path names; undefined for any other path. */
export function routeOf(path: string): Route | undefined {
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
