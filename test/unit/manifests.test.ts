/**
 * The manifests as a cluster would take them: every object validated against
 * the Kubernetes OpenAPI schemas, and every rule of the DaemonSet's contract
 * (least-privilege RBAC, runs on every node before pod networking exists, host
 * paths shared with the shim and the runtime, probes, drain) checked here, not
 * by eye.
 *
 * Two checks make "valid": kubernetes-models (the v1.33 OpenAPI schemas compiled
 * to ajv validators: types, required fields, enums, formats such as quantity)
 * and a walk over the field lists that @kubernetes/client-node generated from the
 * same OpenAPI spec, because the schemas leave objects open while the apiserver
 * rejects unknown fields (kubectl's default --validate=strict): a misspelt
 * `mountPropogation` would otherwise pass here and fail `kubectl apply`.
 *
 * The rules read the raw files, so they never depend on kubectl; a separate test
 * renders `kubectl kustomize daemonset/` and checks it yields the same objects.
 */
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import * as k8s from "@kubernetes/client-node";
import { expect } from "chai";
import { DaemonSet, type IDaemonSet } from "kubernetes-models/apps/v1/DaemonSet";
import { Deployment, type IDeployment } from "kubernetes-models/apps/v1/Deployment";
import {
  ClusterRole,
  type IClusterRole,
} from "kubernetes-models/rbac.authorization.k8s.io/v1/ClusterRole";
import {
  ClusterRoleBinding,
  type IClusterRoleBinding,
} from "kubernetes-models/rbac.authorization.k8s.io/v1/ClusterRoleBinding";
import { type IRole, Role } from "kubernetes-models/rbac.authorization.k8s.io/v1/Role";
import {
  type IRoleBinding,
  RoleBinding,
} from "kubernetes-models/rbac.authorization.k8s.io/v1/RoleBinding";
import type { IContainer } from "kubernetes-models/v1";
import { ConfigMap, type IConfigMap } from "kubernetes-models/v1/ConfigMap";
import { ServiceAccount } from "kubernetes-models/v1/ServiceAccount";
import { isSeq, parseAllDocuments, parseDocument } from "yaml";
import { envName } from "../../src/common/flags.js";
import { isObject, type JsonObject } from "../../src/common/json.js";
import { MIDONET_PLUGIN_TYPE } from "../../src/driver/builtin/midonet/config.js";
import { createMidonetPlugin } from "../../src/driver/builtin/midonet/plugin.js";
import { loadDriverConfig } from "../../src/driver/config/network-config.js";
import { DEFAULT_INSTALLED_PLUGINS } from "../../src/driver/lifecycle/host-install.js";
import { SERVE_FLAGS } from "../../src/driver/lifecycle/serve-flags.js";
import { CONTROLLER_FLAGS } from "../../src/midonet/controller/main.js";
import { iproute2Plumbing } from "../../src/plumbing/iproute2.js";
import { requireCommand } from "../support/requirements.js";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const NAMESPACE = "kube-system";
const NAME = "cni-driver";

interface Manifest {
  /** Where it came from: `daemonset/rbac.yaml#1`. */
  source: string;
  doc: JsonObject;
}

/** Every non-empty YAML document of `text`; duplicate keys and syntax errors throw. */
function parseManifests(text: string, file: string): Manifest[] {
  const out: Manifest[] = [];
  parseAllDocuments(text).forEach((d, i) => {
    const err = d.errors[0];
    if (err) throw new Error(`${file} document ${i}: ${err.message}`);
    const doc: unknown = d.toJS();
    if (doc === null || doc === undefined) return;
    if (!isObject(doc)) throw new Error(`${file} document ${i}: not a mapping`);
    out.push({ source: `${file}#${i}`, doc });
  });
  return out;
}

const readRepoFile = (path: string): string => readFileSync(`${ROOT}${path}`, "utf8");

const MANIFEST_FILES = [
  "daemonset/rbac.yaml",
  "daemonset/daemonset.yaml",
  "daemonset/midonet-controller-rbac.yaml",
  "daemonset/midonet-controller.yaml",
  "configmap/cni-driver-config.yaml",
];
const RAW: Manifest[] = MANIFEST_FILES.flatMap((f) => parseManifests(readRepoFile(f), f));

const idOf = (doc: JsonObject): string => {
  const meta = isObject(doc.metadata) ? doc.metadata : {};
  return `${String(doc.kind)} ${String(meta.name)}`;
};

/** The one object of that kind and name among `manifests`, typed as its kind. */
function find<T>(manifests: readonly Manifest[], kind: string, name: string): T {
  const hits = manifests.filter((m) => idOf(m.doc) === `${kind} ${name}`);
  if (hits.length !== 1) throw new Error(`expected one ${kind} ${name}, found ${hits.length}`);
  return (hits[0] as Manifest).doc as T;
}

// Schemas ---------------------------------------------------------------------

interface KindSchema {
  /** kubernetes-models: throws a ValidationError listing ajv's errors. */
  validate(doc: unknown): void;
  /** The @kubernetes/client-node model whose field list is the kind's known fields. */
  fields: string;
}

const model =
  <T>(M: new (data: T) => { validate(): void }) =>
  (doc: unknown): void =>
    new M(doc as T).validate();

/** apiVersion + kind → schema. A kind not listed here is an error, not a pass. */
const KINDS: Readonly<Record<string, KindSchema>> = {
  "v1 ServiceAccount": { validate: model(ServiceAccount), fields: "V1ServiceAccount" },
  "v1 ConfigMap": { validate: model(ConfigMap), fields: "V1ConfigMap" },
  "rbac.authorization.k8s.io/v1 ClusterRole": {
    validate: model(ClusterRole),
    fields: "V1ClusterRole",
  },
  "rbac.authorization.k8s.io/v1 ClusterRoleBinding": {
    validate: model(ClusterRoleBinding),
    fields: "V1ClusterRoleBinding",
  },
  "rbac.authorization.k8s.io/v1 Role": { validate: model(Role), fields: "V1Role" },
  "rbac.authorization.k8s.io/v1 RoleBinding": {
    validate: model(RoleBinding),
    fields: "V1RoleBinding",
  },
  "apps/v1 DaemonSet": { validate: model(DaemonSet), fields: "V1DaemonSet" },
  "apps/v1 Deployment": { validate: model(Deployment), fields: "V1Deployment" },
};

interface FieldInfo {
  baseName: string;
  type: string;
}

const CLIENT_MODELS = k8s as unknown as Record<
  string,
  { getAttributeTypeMap?: () => readonly FieldInfo[] } | undefined
>;

function fieldsOf(type: string): readonly FieldInfo[] | undefined {
  return CLIENT_MODELS[type]?.getAttributeTypeMap?.();
}

/**
 * Fields the API does not know, as JSON pointers. `type` is the client model's
 * type string: a model name, `Array<T>`, `{ [key: string]: T; }`, or a scalar
 * (string, number, IntOrString, …), which the schema check covers.
 */
function unknownFields(value: unknown, type: string, path: string): string[] {
  const array = /^Array<(.+)>$/.exec(type)?.[1];
  if (array !== undefined) {
    return Array.isArray(value)
      ? value.flatMap((v, i) => unknownFields(v, array, `${path}/${i}`))
      : [];
  }
  const map = /^\{ \[key: string\]: (.+); \}$/.exec(type)?.[1];
  if (map !== undefined) {
    return isObject(value)
      ? Object.entries(value).flatMap(([k, v]) => unknownFields(v, map, `${path}/${k}`))
      : [];
  }
  const fields = fieldsOf(type);
  if (fields === undefined || !isObject(value)) return [];
  const known = new Map(fields.map((f) => [f.baseName, f.type]));
  return Object.entries(value).flatMap(([k, v]) => {
    const t = known.get(k);
    return t === undefined
      ? [`${path}/${k} is not a field of ${type}`]
      : unknownFields(v, t, `${path}/${k}`);
  });
}

/** Everything the apiserver would refuse in `doc`; empty when it is valid. */
function schemaErrors(doc: JsonObject): string[] {
  const key = `${String(doc.apiVersion)} ${String(doc.kind)}`;
  const kind = KINDS[key];
  if (!kind) return [`no schema for ${key}`];
  const errors: string[] = [];
  try {
    kind.validate(doc);
  } catch (err) {
    const detail = (err as { errors?: { instancePath: string; message?: string }[] }).errors;
    if (detail) errors.push(...detail.map((e) => `${e.instancePath} ${e.message ?? "invalid"}`));
    else errors.push((err as Error).message);
  }
  if (!fieldsOf(kind.fields))
    throw new Error(`@kubernetes/client-node has no model ${kind.fields}`);
  errors.push(...unknownFields(doc, kind.fields, ""));
  return errors;
}

const EXPECTED_OBJECTS = [
  "ServiceAccount cni-driver",
  "ClusterRole cni-driver",
  "ClusterRoleBinding cni-driver",
  "DaemonSet cni-driver",
  "ConfigMap cni-driver-config",
  "ServiceAccount cni-driver-midonet-controller",
  "ClusterRole cni-driver-midonet-controller",
  "ClusterRoleBinding cni-driver-midonet-controller",
  "Role cni-driver-midonet-controller",
  "RoleBinding cni-driver-midonet-controller",
  "Deployment cni-driver-midonet-controller",
];

const rawDaemonSet = (): IDaemonSet => structuredClone(find<IDaemonSet>(RAW, "DaemonSet", NAME));

/** Deliberately broken copies: each must fail, at that path, proving the validator is live. */
const BROKEN: { what: string; make: () => JsonObject; at: string }[] = [
  {
    what: 'hostNetwork: "yes" (a string, not a boolean)',
    make: () => {
      const ds = rawDaemonSet() as unknown as { spec: { template: { spec: JsonObject } } };
      ds.spec.template.spec.hostNetwork = "yes";
      return ds as unknown as JsonObject;
    },
    at: "/spec/template/spec/hostNetwork",
  },
  {
    what: "an unknown field in a container (securityContxt)",
    make: () => {
      const ds = rawDaemonSet();
      const c = ds.spec?.template.spec?.containers[0] as unknown as JsonObject;
      c.securityContxt = { privileged: false };
      return ds as unknown as JsonObject;
    },
    at: "/spec/template/spec/containers/0/securityContxt",
  },
  {
    what: "an unknown field in a volume mount (mountPropogation)",
    make: () => {
      const ds = rawDaemonSet();
      const m = ds.spec?.template.spec?.containers[0]?.volumeMounts?.[0] as unknown as JsonObject;
      m.mountPropogation = "HostToContainer";
      return ds as unknown as JsonObject;
    },
    at: "/spec/template/spec/containers/0/volumeMounts/0/mountPropogation",
  },
  {
    what: "a mountPropagation outside its enum",
    make: () => {
      const ds = rawDaemonSet();
      const m = ds.spec?.template.spec?.containers[0]?.volumeMounts?.[0] as unknown as JsonObject;
      m.mountPropagation = "HostToContainr";
      return ds as unknown as JsonObject;
    },
    at: "/spec/template/spec/containers/0/volumeMounts/0/mountPropagation",
  },
  {
    what: "an updateStrategy type outside its enum",
    make: () => {
      const ds = rawDaemonSet() as unknown as { spec: { updateStrategy: JsonObject } };
      ds.spec.updateStrategy = { type: "Rolling" };
      return ds as unknown as JsonObject;
    },
    at: "/spec/updateStrategy/type",
  },
  {
    what: "a memory limit that is not a quantity",
    make: () => {
      const ds = rawDaemonSet();
      const c = ds.spec?.template.spec?.containers[0] as IContainer;
      c.resources = { limits: { memory: "lots" } };
      return ds as unknown as JsonObject;
    },
    at: "/spec/template/spec/containers/0/resources/limits/memory",
  },
  {
    what: "a container without its required name",
    make: () => {
      const ds = rawDaemonSet();
      const c = ds.spec?.template.spec?.containers[0] as Partial<IContainer>;
      delete c.name;
      return ds as unknown as JsonObject;
    },
    at: "/spec/template/spec/containers/0",
  },
  {
    what: "a ClusterRole rule whose verbs are a string, not a list",
    make: () => {
      const role = structuredClone(find<JsonObject>(RAW, "ClusterRole", NAME));
      (role.rules as JsonObject[])[0] = { apiGroups: [""], resources: ["nodes"], verbs: "get" };
      return role;
    },
    at: "/rules/0/verbs",
  },
  {
    what: "a misspelt field in a binding subject (namepsace)",
    make: () => {
      const b = structuredClone(find<JsonObject>(RAW, "ClusterRoleBinding", NAME));
      b.subjects = [{ kind: "ServiceAccount", name: NAME, namepsace: NAMESPACE }];
      return b;
    },
    at: "/subjects/0/namepsace",
  },
  {
    what: "a ConfigMap value that is not a string",
    make: () => {
      const cm = structuredClone(find<JsonObject>(RAW, "ConfigMap", "cni-driver-config"));
      cm.data = { "driver.json": 1 };
      return cm;
    },
    at: "/data/driver.json",
  },
  {
    what: "a DaemonSet at a removed apiVersion (apps/v1beta2)",
    make: () => ({ ...(rawDaemonSet() as unknown as JsonObject), apiVersion: "apps/v1beta2" }),
    at: "no schema for apps/v1beta2 DaemonSet",
  },
];

// The DaemonSet's parts -----------------------------------------------------------

const DS = find<IDaemonSet>(RAW, "DaemonSet", NAME);
const POD = DS.spec?.template.spec;

function container(name: string, init = false): IContainer {
  const list = (init ? POD?.initContainers : POD?.containers) ?? [];
  const c = list.find((x) => x.name === name);
  if (!c) throw new Error(`no ${init ? "init container" : "container"} ${name}`);
  return c;
}

const DRIVER = container(NAME);
const INSTALLER = container("install-cni", true);

function env(name: string): string | undefined {
  return DRIVER.env?.find((e) => e.name === name)?.value;
}

/** The effective value of a `serve` flag: its env twin in the DaemonSet, else its default. */
function serveFlag(flag: string): string | undefined {
  const spec = SERVE_FLAGS.find((f) => f.name === flag);
  if (!spec) throw new Error(`serve has no flag --${flag}`);
  return env(envName(flag)) ?? spec.default;
}

function volumeByHostPath(path: string): string | undefined {
  return POD?.volumes?.find((v) => v.hostPath?.path === path)?.name;
}

const mountOf = (c: IContainer, volume: string | undefined) =>
  c.volumeMounts?.find((m) => m.name === volume);

const isUnder = (path: string, dir: string): boolean => path === dir || path.startsWith(`${dir}/`);

/**
 * The host paths the driver shares with the node. Those shared with processes
 * on the host (the shim dials the socket and replays teardowns from the state
 * dir; host-local's leases; the runtime's netns mounts) are mounted at the same
 * path, so a path written by one side means the same file to the other.
 */
const HOST_PATHS: {
  hostPath: string;
  mountPath: string;
  env: string[];
  propagation?: string;
}[] = [
  { hostPath: "/run/cni-driver", mountPath: "/run/cni-driver", env: ["CNI_DRIVER_SOCKET"] },
  { hostPath: "/opt/cni/bin", mountPath: "/host/opt/cni/bin", env: ["CNI_DRIVER_CNI_BIN_DIR"] },
  {
    hostPath: "/etc/cni/net.d",
    mountPath: "/host/etc/cni/net.d",
    env: ["CNI_DRIVER_HOST_CNI_CONF_DIR"],
  },
  { hostPath: "/var/lib/cni", mountPath: "/var/lib/cni", env: ["CNI_DRIVER_HOST_LOCAL_DATA_DIR"] },
  {
    hostPath: "/var/lib/cni-driver",
    mountPath: "/var/lib/cni-driver",
    env: ["CNI_DRIVER_STATE_DIR", "CNI_DRIVER_CACHE_DIR"],
  },
  // A netns the runtime mounts after we started must show up in our mount namespace.
  { hostPath: "/run/netns", mountPath: "/run/netns", env: [], propagation: "HostToContainer" },
];

/**
 * The capabilities each container adds (after dropping ALL), and a word the
 * comment above each one in daemonset.yaml must contain: the manifest says why.
 */
const CAPABILITIES: Record<string, Record<string, string>> = {
  "cni-driver": {
    NET_ADMIN: "netlink",
    NET_RAW: "raw sockets",
    SYS_ADMIN: "setns",
    DAC_OVERRIDE: "owned by uid 0",
  },
  "install-cni": { DAC_OVERRIDE: "owned by uid 0" },
};

/** The comment that documents each added capability: its own, or the one above its group. */
function capabilityComments(containerKind: "containers" | "initContainers", index: number) {
  const doc = parseDocument(readRepoFile("daemonset/daemonset.yaml"));
  const path = [
    "spec",
    "template",
    "spec",
    containerKind,
    index,
    "securityContext",
    "capabilities",
    "add",
  ];
  const seq = doc.getIn(path, true);
  if (!isSeq(seq)) throw new Error(`${path.join(".")} is not a YAML sequence`);
  const out = new Map<string, string>();
  let comment = seq.commentBefore ?? "";
  for (const item of seq.items) {
    const node = item as { value?: unknown; commentBefore?: string | null };
    comment = node.commentBefore ?? comment;
    out.set(String(node.value), comment.replace(/\s+/g, " ").trim());
  }
  return out;
}

/** The reference plugins `cni-driver install-cni` puts into the bin dir by default. */
const INSTALLED_PLUGINS = new Set(DEFAULT_INSTALLED_PLUGINS);

const PACKAGE_VERSION = (JSON.parse(readRepoFile("package.json")) as { version: string }).version;

describe("manifests (daemonset/ and configmap/)", () => {
  describe("Kubernetes schemas", () => {
    it("the files hold exactly the driver's ServiceAccount, ClusterRole, binding, DaemonSet and ConfigMap, and the MidoNet controller's ServiceAccount, ClusterRole, Role, bindings and Deployment", () => {
      expect(RAW.map((m) => idOf(m.doc)).sort()).to.deep.equal([...EXPECTED_OBJECTS].sort());
    });

    for (const m of RAW) {
      it(`${m.source} ${idOf(m.doc)} validates (types, enums, formats, no unknown field)`, () => {
        expect(schemaErrors(m.doc)).to.deep.equal([]);
      });
    }

    for (const b of BROKEN) {
      it(`rejects a copy with ${b.what}`, () => {
        const errors = schemaErrors(b.make());
        expect(
          errors.some((e) => e.startsWith(b.at)),
          `errors: ${errors.join("; ")}`,
        ).to.equal(true);
      });
    }
  });

  describe("kustomize: kubectl apply -k daemonset/ installs everything", () => {
    it("daemonset/kustomization.yaml lists rbac.yaml, daemonset.yaml, the MidoNet controller's files and ../configmap in kube-system", () => {
      const [k] = parseManifests(
        readRepoFile("daemonset/kustomization.yaml"),
        "daemonset/kustomization.yaml",
      );
      expect(k?.doc.kind).to.equal("Kustomization");
      expect(k?.doc.namespace).to.equal(NAMESPACE);
      // ../configmap under `bases`, which the older kustomize built into Debian's kubectl reads too.
      expect([
        ...((k?.doc.resources ?? []) as string[]),
        ...((k?.doc.bases ?? []) as string[]),
      ]).to.have.members([
        "rbac.yaml",
        "daemonset.yaml",
        "midonet-controller-rbac.yaml",
        "midonet-controller.yaml",
        "../configmap",
      ]);
      const [c] = parseManifests(
        readRepoFile("configmap/kustomization.yaml"),
        "configmap/kustomization.yaml",
      );
      expect(c?.doc.kind).to.equal("Kustomization");
      expect(c?.doc.resources).to.deep.equal(["cni-driver-config.yaml"]);
    });

    it("kubectl kustomize daemonset/ renders the same objects, each valid, namespaced in kube-system", function () {
      requireCommand(this, "kubectl", "kubectl");
      const out = execFileSync("kubectl", ["kustomize", "daemonset/"], {
        cwd: ROOT,
        encoding: "utf8",
        stdio: ["ignore", "pipe", "pipe"],
      });
      const rendered = parseManifests(out, "kubectl kustomize daemonset/");
      expect(rendered.map((m) => idOf(m.doc)).sort()).to.deep.equal([...EXPECTED_OBJECTS].sort());
      for (const m of rendered) {
        expect(schemaErrors(m.doc), idOf(m.doc)).to.deep.equal([]);
        const raw = RAW.find((r) => idOf(r.doc) === idOf(m.doc));
        expect(m.doc, idOf(m.doc)).to.deep.equal(raw?.doc);
        const meta = m.doc.metadata as JsonObject;
        if (m.doc.kind !== "ClusterRole" && m.doc.kind !== "ClusterRoleBinding") {
          expect(meta.namespace, idOf(m.doc)).to.equal(NAMESPACE);
        }
      }
    });
  });

  describe('kustomize: overlays/without-kube-proxy sets "services": "driver"', () => {
    it("renders daemonset/'s objects unchanged but for driver.json, which is configmap/'s with services: driver, and loads", function () {
      requireCommand(this, "kubectl", "kubectl");
      const render = (dir: string) =>
        parseManifests(
          execFileSync("kubectl", ["kustomize", dir], {
            cwd: ROOT,
            encoding: "utf8",
            stdio: ["ignore", "pipe", "pipe"],
          }),
          `kubectl kustomize ${dir}`,
        );
      const base = render("daemonset/");
      const overlay = render("overlays/without-kube-proxy/");
      expect(overlay.map((m) => idOf(m.doc)).sort()).to.deep.equal(
        base.map((m) => idOf(m.doc)).sort(),
      );
      const driverJson = (ms: Manifest[]) =>
        JSON.parse(
          ((ms.find((m) => m.doc.kind === "ConfigMap")?.doc.data ?? {}) as Record<string, string>)[
            "driver.json"
          ] ?? "{}",
        );
      expect(driverJson(overlay)).to.deep.equal({ ...driverJson(base), services: "driver" });
      for (const m of overlay) {
        if (m.doc.kind === "ConfigMap") continue;
        expect(m.doc, idOf(m.doc)).to.deep.equal(
          base.find((b) => idOf(b.doc) === idOf(m.doc))?.doc,
        );
      }
      const cm = overlay.find((m) => m.doc.kind === "ConfigMap")?.doc.data as Record<
        string,
        string
      >;
      const builtin = createMidonetPlugin({ plumbing: iproute2Plumbing });
      const loaded = loadDriverConfig(
        new Map(Object.entries(cm).map(([k, v]) => [k, Buffer.from(v)])),
        {
          source: "overlays/without-kube-proxy",
          podCidrs: { v4: "10.244.3.0/24" },
          pluginExists: (t) => INSTALLED_PLUGINS.has(t),
          builtins: new Map([
            [MIDONET_PLUGIN_TYPE, (c: Record<string, unknown>) => builtin.validate(c)],
          ]),
        },
        1,
      );
      expect(loaded.settings.services).to.equal("driver");
    });
  });

  describe("RBAC: the least privilege the driver needs", () => {
    it("a ServiceAccount cni-driver in kube-system, used by the DaemonSet", () => {
      const sa = find<{ metadata: { namespace?: string } }>(RAW, "ServiceAccount", NAME);
      expect(sa.metadata.namespace).to.equal(NAMESPACE);
      expect(POD?.serviceAccountName).to.equal(NAME);
    });

    it("the ClusterRole grants exactly nodes get/list/watch/patch, pods get/list/watch/patch, namespaces, networkpolicies, services and endpointslices list/watch, configmaps get/list/watch, events create/patch", () => {
      const role = find<IClusterRole>(RAW, "ClusterRole", NAME);
      const granted = (role.rules ?? []).flatMap((r) => {
        expect(r.resourceNames, "resourceNames").to.equal(undefined);
        expect(r.nonResourceURLs, "nonResourceURLs").to.equal(undefined);
        return (r.apiGroups ?? []).flatMap((g) =>
          (r.resources ?? []).flatMap((res) => r.verbs.map((v) => `${g || "core"}/${res}: ${v}`)),
        );
      });
      expect(granted.sort()).to.deep.equal(
        [
          "core/nodes: get",
          "core/nodes: list",
          "core/nodes: watch",
          "core/nodes: patch",
          "core/pods: get",
          "core/pods: list",
          "core/pods: watch",
          "core/pods: patch",
          "core/namespaces: list",
          "core/namespaces: watch",
          "networking.k8s.io/networkpolicies: list",
          "networking.k8s.io/networkpolicies: watch",
          "core/services: list",
          "core/services: watch",
          "discovery.k8s.io/endpointslices: list",
          "discovery.k8s.io/endpointslices: watch",
          "core/configmaps: get",
          "core/configmaps: list",
          "core/configmaps: watch",
          "core/events: create",
          "core/events: patch",
          "events.k8s.io/events: create",
          "events.k8s.io/events: patch",
        ].sort(),
      );
      expect(role.aggregationRule).to.equal(undefined);
    });

    it('no "*" anywhere in any rule', () => {
      const role = find<IClusterRole>(RAW, "ClusterRole", NAME);
      const strings = JSON.stringify(role.rules).match(/"[^"]*"/g) ?? [];
      expect(strings.filter((s) => s.includes("*"))).to.deep.equal([]);
    });

    it("the ClusterRoleBinding ties the ClusterRole to the ServiceAccount in kube-system", () => {
      const b = find<IClusterRoleBinding>(RAW, "ClusterRoleBinding", NAME);
      expect(b.roleRef).to.deep.equal({
        apiGroup: "rbac.authorization.k8s.io",
        kind: "ClusterRole",
        name: NAME,
      });
      expect(b.subjects).to.deep.equal([
        { kind: "ServiceAccount", name: NAME, namespace: NAMESPACE },
      ]);
    });
  });

  describe("the DaemonSet", () => {
    it("is cni-driver in kube-system, its selector matching its pods", () => {
      expect(DS.metadata?.name).to.equal(NAME);
      expect(DS.metadata?.namespace).to.equal(NAMESPACE);
      const labels = DS.spec?.template.metadata?.labels ?? {};
      expect(DS.spec?.selector.matchLabels).to.not.be.empty;
      for (const [k, v] of Object.entries(DS.spec?.selector.matchLabels ?? {})) {
        expect(labels[k], k).to.equal(v);
      }
    });

    it("runs in the host network namespace (it provides pod networking)", () => {
      expect(POD?.hostNetwork).to.equal(true);
      // Without this a hostNetwork pod resolves with the node's resolv.conf only.
      expect(POD?.dnsPolicy).to.equal("ClusterFirstWithHostNet");
    });

    it("tolerates every taint (NotReady nodes too): operator Exists with no key and no effect", () => {
      const all = (POD?.tolerations ?? []).filter(
        (t) => t.operator === "Exists" && t.key === undefined && t.effect === undefined,
      );
      expect(all).to.have.length(1);
    });

    it("is system-node-critical", () => {
      expect(POD?.priorityClassName).to.equal("system-node-critical");
    });

    it("updates by RollingUpdate", () => {
      expect(DS.spec?.updateStrategy?.type).to.equal("RollingUpdate");
    });

    it("NODE_NAME comes from the downward API (spec.nodeName) and feeds --node-name", () => {
      const nodeName = DRIVER.env?.find((e) => e.name === "NODE_NAME");
      expect(nodeName?.value).to.equal(undefined);
      expect(nodeName?.valueFrom).to.deep.equal({ fieldRef: { fieldPath: "spec.nodeName" } });
      expect(env(envName("node-name"))).to.equal("$(NODE_NAME)");
    });

    it("every env var it sets is the twin of a real serve flag (NODE_NAME aside)", () => {
      const twins = new Set(SERVE_FLAGS.map((f) => envName(f.name)));
      const names = (DRIVER.env ?? []).map((e) => e.name).filter((n) => n !== "NODE_NAME");
      expect(names.filter((n) => !twins.has(n))).to.deep.equal([]);
      expect(new Set(names).size, "no env var twice").to.equal(names.length);
      expect(DRIVER.command).to.deep.equal(["cni-driver", "serve"]);
    });

    it("mounts the ConfigMap cni-driver-config read-only at /etc/cni-driver, the --config-dir", () => {
      const volume = POD?.volumes?.find((v) => v.configMap?.name === "cni-driver-config")?.name;
      const mount = mountOf(DRIVER, volume);
      expect(mount?.mountPath).to.equal("/etc/cni-driver");
      expect(mount?.readOnly).to.equal(true);
      // No subPath: kubelet updates a subPath mount never, and the driver reloads on edits.
      expect(mount?.subPath).to.equal(undefined);
      expect(serveFlag("config-dir")).to.equal("/etc/cni-driver");
    });

    for (const h of HOST_PATHS) {
      const extra = h.propagation ? `, mountPropagation ${h.propagation}` : "";
      const flags = h.env.length ? `, holding ${h.env.join(", ")}` : "";
      it(`mounts the host's ${h.hostPath} at ${h.mountPath}${extra}${flags}`, () => {
        const mount = mountOf(DRIVER, volumeByHostPath(h.hostPath));
        expect(mount?.mountPath).to.equal(h.mountPath);
        if (h.propagation) expect(mount?.mountPropagation).to.equal(h.propagation);
        for (const e of h.env) {
          const value = env(e);
          expect(value, e).to.be.a("string");
          // A list of dirs (the bin dirs) holds the mount among others.
          const dirs = e === "CNI_DRIVER_CNI_BIN_DIR" ? (value as string).split(":") : [value];
          expect(
            dirs.some((d) => isUnder(d as string, h.mountPath)),
            `${e}=${value}`,
          ).to.equal(true);
        }
      });
    }

    it("execs the plugins of its image first, then the host's bin dir", () => {
      expect(env("CNI_DRIVER_CNI_BIN_DIR")).to.equal("/usr/lib/cni:/host/opt/cni/bin");
    });

    for (const [name, caps] of Object.entries(CAPABILITIES)) {
      it(`${name}: drops ALL, adds exactly ${Object.keys(caps).join(", ")}, each with its reason in daemonset.yaml; not privileged`, () => {
        const init = name === INSTALLER.name;
        const c = container(name, init);
        const sc = c.securityContext;
        expect(sc?.privileged).to.not.equal(true);
        expect(sc?.allowPrivilegeEscalation).to.equal(false);
        expect(sc?.capabilities?.drop).to.deep.equal(["ALL"]);
        expect([...(sc?.capabilities?.add ?? [])].sort()).to.deep.equal(Object.keys(caps).sort());
        const list = init ? POD?.initContainers : POD?.containers;
        const comments = capabilityComments(
          init ? "initContainers" : "containers",
          list?.indexOf(c) ?? -1,
        );
        for (const [cap, why] of Object.entries(caps)) {
          expect(comments.get(cap), `the comment above ${cap}`).to.include(why);
        }
      });
    }

    it("an init container runs `cni-driver install-cni --bin-dir /host/opt/cni/bin` onto the host's /opt/cni/bin", () => {
      expect(INSTALLER.command).to.deep.equal([
        "cni-driver",
        "install-cni",
        "--bin-dir",
        "/host/opt/cni/bin",
      ]);
      expect(INSTALLER.args).to.equal(undefined);
      expect(mountOf(INSTALLER, volumeByHostPath("/opt/cni/bin"))?.mountPath).to.equal(
        "/host/opt/cni/bin",
      );
    });

    it("every container, the init container too, has cpu and memory requests and limits", () => {
      for (const c of [...(POD?.initContainers ?? []), ...(POD?.containers ?? [])]) {
        for (const kind of ["requests", "limits"] as const) {
          expect(Object.keys(c.resources?.[kind] ?? {}), `${c.name} ${kind}`).to.have.members([
            "cpu",
            "memory",
          ]);
        }
      }
    });

    it("liveness on /livez and readiness on /readyz, on the port and host of --health-addr", () => {
      const addr = serveFlag("health-addr") ?? "";
      const colon = addr.lastIndexOf(":");
      const host = addr.slice(0, colon);
      const port = Number(addr.slice(colon + 1));
      expect(port, `--health-addr ${addr}`).to.be.greaterThan(0);
      const portOf = (p: number | string | undefined) =>
        typeof p === "string" ? DRIVER.ports?.find((x) => x.name === p)?.containerPort : p;
      for (const [probe, path] of [
        [DRIVER.livenessProbe, "/livez"],
        [DRIVER.readinessProbe, "/readyz"],
      ] as const) {
        expect(probe?.httpGet?.path).to.equal(path);
        expect(portOf(probe?.httpGet?.port), path).to.equal(port);
        // An address bound to loopback answers only a probe sent to loopback.
        if (host !== "" && host !== "0.0.0.0") expect(probe?.httpGet?.host, path).to.equal(host);
      }
      expect(portOf("health"), "the named port health").to.equal(port);
    });

    it("the termination grace period covers the drain timeout plus 5 s", () => {
      const drain = Number(serveFlag("drain-timeout"));
      expect(drain).to.be.greaterThan(0);
      expect(POD?.terminationGracePeriodSeconds).to.be.greaterThan(drain + 5);
    });

    it(`both containers run the same image, tagged with the package version (${PACKAGE_VERSION})`, () => {
      expect(INSTALLER.image).to.equal(DRIVER.image);
      expect(DRIVER.image).to.match(new RegExp(`:${PACKAGE_VERSION.replace(/\./g, "\\.")}$`));
    });
  });

  describe("the ConfigMap", () => {
    const cm = find<IConfigMap>(RAW, "ConfigMap", "cni-driver-config");
    const files = new Map(Object.entries(cm.data ?? {}).map(([k, v]) => [k, Buffer.from(v)]));
    // Only its validate() is used: no plumbing is called.
    const builtin = createMidonetPlugin({ plumbing: iproute2Plumbing });
    const load = (pluginExists: (type: string) => boolean) =>
      loadDriverConfig(
        files,
        {
          source: "configmap/cni-driver-config.yaml",
          podCidrs: { v4: "10.244.3.0/24" },
          pluginExists,
          builtins: new Map([
            [MIDONET_PLUGIN_TYPE, (c: Record<string, unknown>) => builtin.validate(c)],
          ]),
          hostLocalDataDir: serveFlag("host-local-data-dir"),
        },
        1,
      );

    it("is cni-driver-config in kube-system", () => {
      expect(cm.metadata?.namespace).to.equal(NAMESPACE);
    });

    it("its networks load with the driver's own validator, usePodCidr filled from the node", () => {
      const cfg = load((t) => INSTALLED_PLUGINS.has(t));
      expect(cfg.defaultNetwork).to.equal("pod-network");
      const net = cfg.networks.get("pod-network");
      expect(net?.plugins.map((p) => p.type)).to.deep.equal(["midonet", "portmap"]);
      expect(JSON.stringify(net?.plugins[0]?.raw.ipam)).to.include('"subnet":"10.244.3.0/24"');
    });

    it("needs no plugin beyond what install-cni installs (the loader refuses a missing one)", () => {
      expect(() => load((t) => INSTALLED_PLUGINS.has(t) && t !== "portmap")).to.throw(
        /no such plugin/,
      );
    });
  });

  describe("the MidoNet controller (Deployment beside the DaemonSet)", () => {
    const CTL = "cni-driver-midonet-controller";
    const deployment = find<IDeployment>(RAW, "Deployment", CTL);
    const pod = deployment.spec?.template.spec;
    const ctl = pod?.containers[0] as IContainer;
    const ctlEnv = (name: string) => ctl.env?.find((e) => e.name === name);
    /** The effective value of a controller flag: its env twin in the Deployment, else its default. */
    const ctlFlag = (flag: string): string | undefined => {
      const spec = CONTROLLER_FLAGS.find((f) => f.name === flag);
      if (!spec) throw new Error(`midonet-controller has no flag --${flag}`);
      return ctlEnv(envName(flag))?.value ?? spec.default;
    };
    const grants = (rules: IClusterRole["rules"]) =>
      (rules ?? []).flatMap((r) => {
        expect(r.resourceNames, "resourceNames").to.equal(undefined);
        return (r.apiGroups ?? []).flatMap((g) =>
          (r.resources ?? []).flatMap((res) => r.verbs.map((v) => `${g || "core"}/${res}: ${v}`)),
        );
      });

    it("the ClusterRole grants exactly list/watch of what is mapped, and patch of nodes (their annotations)", () => {
      const role = find<IClusterRole>(RAW, "ClusterRole", CTL);
      expect(grants(role.rules).sort()).to.deep.equal(
        [
          "core/nodes: list",
          "core/nodes: watch",
          "core/nodes: patch",
          "core/pods: list",
          "core/pods: watch",
          "core/services: list",
          "core/services: watch",
          "core/namespaces: list",
          "core/namespaces: watch",
          "discovery.k8s.io/endpointslices: list",
          "discovery.k8s.io/endpointslices: watch",
          "networking.k8s.io/networkpolicies: list",
          "networking.k8s.io/networkpolicies: watch",
        ].sort(),
      );
      expect(JSON.stringify(role.rules)).to.not.include("*");
    });

    it("leases get/create/update through a Role in the namespace of --lease-namespace only", () => {
      const role = find<IRole>(RAW, "Role", CTL);
      expect(role.metadata?.namespace).to.equal(NAMESPACE);
      expect(ctlFlag("lease-namespace")).to.equal(NAMESPACE);
      expect(grants(role.rules).sort()).to.deep.equal(
        [
          "coordination.k8s.io/leases: create",
          "coordination.k8s.io/leases: get",
          "coordination.k8s.io/leases: update",
        ].sort(),
      );
    });

    it("both bindings tie their role to the controller's ServiceAccount, which the Deployment uses", () => {
      const sa = find<{ metadata: { namespace?: string } }>(RAW, "ServiceAccount", CTL);
      expect(sa.metadata.namespace).to.equal(NAMESPACE);
      expect(pod?.serviceAccountName).to.equal(CTL);
      const subjects = [{ kind: "ServiceAccount", name: CTL, namespace: NAMESPACE }];
      const cb = find<IClusterRoleBinding>(RAW, "ClusterRoleBinding", CTL);
      expect(cb.roleRef).to.deep.equal({
        apiGroup: "rbac.authorization.k8s.io",
        kind: "ClusterRole",
        name: CTL,
      });
      expect(cb.subjects).to.deep.equal(subjects);
      const rb = find<IRoleBinding>(RAW, "RoleBinding", CTL);
      expect(rb.metadata?.namespace).to.equal(NAMESPACE);
      expect(rb.roleRef).to.deep.equal({
        apiGroup: "rbac.authorization.k8s.io",
        kind: "Role",
        name: CTL,
      });
      expect(rb.subjects).to.deep.equal(subjects);
    });

    it("two replicas, never two on one node (host network, one health port), updated one at a time", () => {
      expect(deployment.metadata?.namespace).to.equal(NAMESPACE);
      expect(deployment.spec?.replicas).to.equal(2);
      const labels = deployment.spec?.template.metadata?.labels ?? {};
      for (const [k, v] of Object.entries(deployment.spec?.selector.matchLabels ?? {})) {
        expect(labels[k], k).to.equal(v);
      }
      const anti = pod?.affinity?.podAntiAffinity?.requiredDuringSchedulingIgnoredDuringExecution;
      expect(anti?.[0]?.topologyKey).to.equal("kubernetes.io/hostname");
      expect(anti?.[0]?.labelSelector?.matchLabels).to.deep.equal(
        deployment.spec?.selector.matchLabels,
      );
      expect(deployment.spec?.strategy?.rollingUpdate).to.deep.equal({
        maxSurge: 0,
        maxUnavailable: 1,
      });
    });

    it("runs on the host network with the node's resolver, and on NotReady nodes (it provides pod networking)", () => {
      expect(pod?.hostNetwork).to.equal(true);
      expect(pod?.dnsPolicy).to.equal("Default");
      expect(
        pod?.tolerations?.some(
          (t) => t.key === "node.kubernetes.io/not-ready" && t.operator === "Exists",
        ),
      ).to.equal(true);
      expect(pod?.priorityClassName).to.equal("system-cluster-critical");
    });

    it("runs `cni-driver midonet-controller`; every env var is the twin of one of its flags (POD_NAME aside)", () => {
      expect(ctl.command).to.deep.equal(["cni-driver", "midonet-controller"]);
      const twins = new Set(CONTROLLER_FLAGS.map((f) => envName(f.name)));
      const names = (ctl.env ?? []).map((e) => e.name).filter((n) => n !== "POD_NAME");
      expect(names.filter((n) => !twins.has(n))).to.deep.equal([]);
      expect(new Set(names).size, "no env var twice").to.equal(names.length);
      expect(ctlFlag("midonet-api")).to.match(/^https?:\/\//);
    });

    it("its Lease identity is the pod name (downward API)", () => {
      expect(ctlEnv("POD_NAME")?.valueFrom).to.deep.equal({
        fieldRef: { fieldPath: "metadata.name" },
      });
    });

    it("the MidoNet credentials come from a Secret, never a literal", () => {
      for (const flag of ["midonet-user", "midonet-password", "midonet-project"]) {
        const e = ctlEnv(envName(flag));
        expect(e?.value, flag).to.equal(undefined);
        expect(e?.valueFrom?.secretKeyRef?.name, flag).to.equal("midonet-credentials");
      }
    });

    it("liveness on /livez and readiness on /readyz, on the host and port of --health-addr (not the driver's)", () => {
      const addr = ctlFlag("health-addr") ?? "";
      const colon = addr.lastIndexOf(":");
      const host = addr.slice(0, colon);
      const port = Number(addr.slice(colon + 1));
      expect(port).to.be.greaterThan(0);
      expect(port).to.not.equal(Number((serveFlag("health-addr") ?? "").split(":").at(-1)));
      for (const [probe, path] of [
        [ctl.livenessProbe, "/livez"],
        [ctl.readinessProbe, "/readyz"],
      ] as const) {
        expect(probe?.httpGet?.path).to.equal(path);
        expect(probe?.httpGet?.port).to.equal(port);
        expect(probe?.httpGet?.host).to.equal(host);
      }
      expect(ctl.ports?.find((p) => p.name === "health")?.containerPort).to.equal(port);
    });

    it("no privilege: non-root, drops ALL, adds nothing, read-only root; requests and limits set", () => {
      const sc = ctl.securityContext;
      expect(sc?.runAsNonRoot).to.equal(true);
      expect(sc?.allowPrivilegeEscalation).to.equal(false);
      expect(sc?.readOnlyRootFilesystem).to.equal(true);
      expect(sc?.capabilities).to.deep.equal({ drop: ["ALL"] });
      for (const kind of ["requests", "limits"] as const) {
        expect(Object.keys(ctl.resources?.[kind] ?? {})).to.have.members(["cpu", "memory"]);
      }
    });

    it("runs the DaemonSet's image", () => {
      expect(ctl.image).to.equal(DRIVER.image);
    });
  });
});
