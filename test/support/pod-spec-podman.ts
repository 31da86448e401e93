/**
 * A container of a Kubernetes pod spec, run with podman the way kubelet would run
 * it: the manifests rendered by `kubectl kustomize`, their pod spec turned into
 * `podman run` flags here rather than restated by hand in a test. What it reads:
 * hostNetwork, the container's command and args, env (values, `$(VAR)`
 * references, fieldRef and optional secretKeyRef values given by the caller),
 * volumeMounts of hostPath and configMap volumes (read-only, HostToContainer
 * propagation), the securityContext (runAsUser, runAsNonRoot, capabilities,
 * allowPrivilegeEscalation, readOnlyRootFilesystem, privileged) and resource
 * limits. Anything else in the spec that would change how the container runs is
 * refused, so a manifest change the test cannot follow fails it loudly.
 */
import { execFileSync } from "node:child_process";
import { parseAllDocuments } from "yaml";
import { REPO_ROOT } from "./driver-harness.js";

export interface K8sEnvVar {
  name: string;
  value?: string;
  valueFrom?: {
    fieldRef?: { fieldPath: string };
    secretKeyRef?: { name: string; key: string; optional?: boolean };
  };
}

export interface K8sSecurityContext {
  runAsUser?: number;
  runAsNonRoot?: boolean;
  allowPrivilegeEscalation?: boolean;
  readOnlyRootFilesystem?: boolean;
  privileged?: boolean;
  capabilities?: { add?: string[]; drop?: string[] };
  seccompProfile?: { type: string };
}

export interface K8sVolumeMount {
  name: string;
  mountPath: string;
  readOnly?: boolean;
  mountPropagation?: string;
}

export interface K8sContainer {
  name: string;
  image: string;
  command?: string[];
  args?: string[];
  env?: K8sEnvVar[];
  volumeMounts?: K8sVolumeMount[];
  securityContext?: K8sSecurityContext;
  resources?: { limits?: { cpu?: string; memory?: string } };
  readinessProbe?: { httpGet?: { host?: string; path: string; port: number | string } };
  livenessProbe?: { httpGet?: { host?: string; path: string; port: number | string } };
  [key: string]: unknown;
}

export interface K8sVolume {
  name: string;
  hostPath?: { path: string; type?: string };
  configMap?: { name: string };
  [key: string]: unknown;
}

export interface K8sPodSpec {
  hostNetwork?: boolean;
  securityContext?: K8sSecurityContext;
  terminationGracePeriodSeconds?: number;
  initContainers?: K8sContainer[];
  containers: K8sContainer[];
  volumes?: K8sVolume[];
  [key: string]: unknown;
}

export interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string };
  spec?: { template?: { spec: K8sPodSpec } };
  data?: Record<string, string>;
}

/** `kubectl kustomize <dir>` of the repository, parsed: every object it renders. */
export function renderManifests(dir = "daemonset"): K8sObject[] {
  const text = execFileSync("kubectl", ["kustomize", dir], {
    cwd: REPO_ROOT,
    encoding: "utf8",
    timeout: 60_000,
    // kubectl's deprecation notes (the `bases` field) are not the test's output.
    stdio: ["ignore", "pipe", "pipe"],
  });
  return parseAllDocuments(text).map((d) => d.toJS() as K8sObject);
}

/** The one object of `kind` named `name` among `objects`; throws when it is not there. */
export function findObject(objects: K8sObject[], kind: string, name: string): K8sObject {
  const found = objects.find((o) => o.kind === kind && o.metadata.name === name);
  if (!found) throw new Error(`the rendered manifests have no ${kind} ${name}`);
  return found;
}

/** The pod template's spec of a DaemonSet or Deployment. */
export function podSpecOf(workload: K8sObject): K8sPodSpec {
  const spec = workload.spec?.template?.spec;
  if (!spec) throw new Error(`${workload.kind} ${workload.metadata.name} has no pod template`);
  return spec;
}

/** The container (or init container) `name` of a pod spec. */
export function containerOf(spec: K8sPodSpec, name: string): K8sContainer {
  const c = [...(spec.initContainers ?? []), ...spec.containers].find((x) => x.name === name);
  if (!c) throw new Error(`the pod spec has no container ${name}`);
  return c;
}

export interface PodRunContext {
  /** The image to run in place of the manifest's (the one built here). */
  image: string;
  /** podman's name for the container. */
  name: string;
  /** Where a hostPath volume's path is on this "node" (kubelet creates it per its type). */
  hostPath: (path: string, type: string | undefined) => string;
  /** The directory of each configMap volume, by ConfigMap name (kubelet's layout). */
  configMaps: Record<string, string>;
  /** Downward API values by fieldPath (spec.nodeName, metadata.name, …). */
  fieldRefs: Record<string, string>;
  /** The Secrets' values by `<secret>/<key>`; an optional key missing here is left unset. */
  secrets?: Record<string, string>;
  /**
   * What the test changes of the manifest's env, each said where it is used: a
   * value replaces the manifest's (or adds a variable), undefined removes it.
   */
  envOverrides?: Record<string, string | undefined>;
  /** Extra `-v` mounts the test adds (e.g. a kubeconfig). */
  extraVolumes?: string[];
}

/** Kubernetes' `$(VAR)` expansion against the variables defined before (`$$` escapes). */
function expandEnvRefs(value: string, defined: Map<string, string>): string {
  return value.replace(/\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)/g, (m, name: string | undefined) => {
    if (m === "$$") return "$";
    return name !== undefined && defined.has(name) ? (defined.get(name) as string) : m;
  });
}

/** The container's environment as kubelet would set it, with the test's overrides. */
export function containerEnv(c: K8sContainer, ctx: PodRunContext): Map<string, string> {
  const env = new Map<string, string>();
  for (const v of c.env ?? []) {
    if (v.value !== undefined) {
      env.set(v.name, expandEnvRefs(v.value, env));
    } else if (v.valueFrom?.fieldRef) {
      const value = ctx.fieldRefs[v.valueFrom.fieldRef.fieldPath];
      if (value === undefined)
        throw new Error(`env ${v.name}: no value for fieldRef ${v.valueFrom.fieldRef.fieldPath}`);
      env.set(v.name, value);
    } else if (v.valueFrom?.secretKeyRef) {
      const ref = v.valueFrom.secretKeyRef;
      const value = ctx.secrets?.[`${ref.name}/${ref.key}`];
      if (value !== undefined) env.set(v.name, value);
      else if (!ref.optional)
        throw new Error(`env ${v.name}: secret ${ref.name}/${ref.key} missing`);
    } else {
      env.set(v.name, "");
    }
  }
  for (const [name, value] of Object.entries(ctx.envOverrides ?? {})) {
    if (value === undefined) env.delete(name);
    else env.set(name, value);
  }
  return env;
}

/** A Kubernetes memory quantity in bytes (Ki, Mi, Gi, or plain). */
function memoryBytes(q: string): number {
  const m = /^(\d+)(Ki|Mi|Gi)?$/.exec(q);
  if (!m) throw new Error(`memory limit ${q}: not understood`);
  const unit = { Ki: 1024, Mi: 1024 ** 2, Gi: 1024 ** 3 }[m[2] ?? ""] ?? 1;
  return Number(m[1]) * unit;
}

/** A Kubernetes CPU quantity in CPUs ("1", "200m"). */
function cpus(q: string): number {
  return q.endsWith("m") ? Number(q.slice(0, -1)) / 1000 : Number(q);
}

const UNSUPPORTED_CONTAINER_KEYS = ["workingDir", "stdin", "tty", "envFrom", "volumeDevices"];
const UNSUPPORTED_POD_KEYS = ["hostPID", "hostIPC", "shareProcessNamespace"];

/**
 * The `podman run` arguments (after `run`) for container `c` of pod spec `spec`:
 * flags, the image, then the manifest's args. The entrypoint is the manifest's
 * `command`, as kubelet replaces the image's with it.
 */
export function podmanRunArgs(spec: K8sPodSpec, c: K8sContainer, ctx: PodRunContext): string[] {
  for (const k of UNSUPPORTED_CONTAINER_KEYS)
    if (c[k] !== undefined)
      throw new Error(`container ${c.name}: ${k} is not translated to podman`);
  for (const k of UNSUPPORTED_POD_KEYS)
    if (spec[k]) throw new Error(`pod spec: ${k} is not translated to podman`);
  const args = ["--name", ctx.name];
  if (!spec.hostNetwork)
    throw new Error("only host-network pods are translated (their own netns needs a CNI)");
  args.push("--network", "host");

  const sc: K8sSecurityContext = { ...spec.securityContext, ...c.securityContext };
  if (sc.runAsNonRoot && (sc.runAsUser ?? 0) === 0)
    throw new Error(`container ${c.name}: runAsNonRoot without a non-zero runAsUser`);
  if (sc.runAsUser !== undefined) args.push("--user", String(sc.runAsUser));
  if (sc.privileged) args.push("--privileged");
  for (const cap of sc.capabilities?.drop ?? []) args.push("--cap-drop", cap);
  for (const cap of sc.capabilities?.add ?? []) args.push("--cap-add", cap);
  if (sc.allowPrivilegeEscalation === false) args.push("--security-opt", "no-new-privileges");
  // kubelet's default is no seccomp filter unless the pod asks for one; podman's is a filter.
  if (!sc.seccompProfile || sc.seccompProfile.type === "Unconfined")
    args.push("--security-opt", "seccomp=unconfined");
  // kubelet makes the root read-only and mounts nothing writable over it of its own.
  if (sc.readOnlyRootFilesystem) args.push("--read-only", "--read-only-tmpfs=false");

  const limits = c.resources?.limits ?? {};
  if (limits.memory) args.push("--memory", String(memoryBytes(limits.memory)));
  if (limits.cpu) args.push("--cpus", String(cpus(limits.cpu)));

  for (const [name, value] of containerEnv(c, ctx)) args.push("--env", `${name}=${value}`);

  const volumes = new Map((spec.volumes ?? []).map((v) => [v.name, v]));
  for (const m of c.volumeMounts ?? []) {
    const v = volumes.get(m.name);
    if (!v) throw new Error(`container ${c.name}: volumeMount ${m.name} has no volume`);
    const opts: string[] = [];
    let source: string;
    if (v.hostPath) {
      source = ctx.hostPath(v.hostPath.path, v.hostPath.type);
    } else if (v.configMap) {
      const dir = ctx.configMaps[v.configMap.name];
      if (!dir) throw new Error(`volume ${v.name}: no directory for ConfigMap ${v.configMap.name}`);
      source = dir;
      // kubelet mounts ConfigMap volumes read-only whatever the mount says.
      opts.push("ro");
    } else {
      throw new Error(`volume ${v.name}: only hostPath and configMap volumes are translated`);
    }
    if (m.readOnly && !opts.includes("ro")) opts.push("ro");
    if (m.mountPropagation === "HostToContainer") opts.push("rslave");
    else if (m.mountPropagation === "Bidirectional") opts.push("rshared");
    args.push("--volume", `${source}:${m.mountPath}${opts.length ? `:${opts.join(",")}` : ""}`);
  }
  for (const extra of ctx.extraVolumes ?? []) args.push("--volume", extra);

  if (c.command) args.push("--entrypoint", JSON.stringify(c.command));
  args.push(ctx.image, ...(c.args ?? []));
  return args;
}

/** The httpGet of a probe as a URL, on `port` when given (the test's own port for it). */
export function probeUrl(probe: K8sContainer["readinessProbe"], port?: number): string {
  const get = probe?.httpGet;
  if (!get) throw new Error("the probe has no httpGet");
  return `http://${get.host ?? "127.0.0.1"}:${port ?? get.port}${get.path}`;
}
