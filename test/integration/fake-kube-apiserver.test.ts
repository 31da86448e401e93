/**
 * The fake Kubernetes API server, driven through the real @kubernetes/client-node
 * 1.x the way the driver and the MidoNet controller use it: typed API clients,
 * Watch, makeInformer and ListWatch (with a field selector), patches with
 * per-call Content-Type, optimistic concurrency and the Status bodies a real
 * kube-apiserver answers.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  ApiException,
  CoordinationV1Api,
  CoreV1Api,
  DiscoveryV1Api,
  type Informer,
  KubeConfig,
  type KubernetesObject,
  ListWatch,
  makeInformer,
  NetworkingV1Api,
  PatchStrategy,
  setHeaderOptions,
  type V1ConfigMap,
  type V1EndpointSlice,
  type V1Lease,
  V1MicroTime,
  type V1Node,
  type V1Pod,
  Watch,
} from "@kubernetes/client-node";
import { expect } from "chai";
import {
  type FakeKubeApiServer,
  type FakeKubeApiServerOptions,
  type KubeStatus,
  startFakeKubeApiServer,
} from "../support/fake-kube-apiserver.js";

const NS = "default";
const mergePatch = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);
const strategicPatch = setHeaderOptions("Content-Type", PatchStrategy.StrategicMergePatch);
const OPTIMISTIC_LOCK =
  "the object has been modified; please apply your changes to the latest version and try again";

async function until<T>(
  probe: () => T | undefined | null | false,
  what: string,
  ms = 3000,
): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = probe();
    if (value !== undefined && value !== null && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** The HTTP code and the parsed Status body of a call that must fail. */
async function apiError(call: Promise<unknown>): Promise<{ code: number; status: KubeStatus }> {
  try {
    await call;
  } catch (e) {
    if (!(e instanceof ApiException)) throw e;
    const body = typeof e.body === "string" && e.body !== "" ? JSON.parse(e.body) : e.body;
    return { code: e.code, status: body as KubeStatus };
  }
  throw new Error("expected the call to fail");
}

/** Records an informer's callbacks as "add name", "update name", "delete name". */
function track<T extends KubernetesObject>(informer: Informer<T>) {
  const log: string[] = [];
  const errors: unknown[] = [];
  informer.on("add", (o) => log.push(`add ${o.metadata?.name}`));
  informer.on("update", (o) => log.push(`update ${o.metadata?.name}`));
  informer.on("delete", (o) => log.push(`delete ${o.metadata?.name}`));
  informer.on("error", (e) => errors.push(e));
  return { log, errors };
}

/** A raw Watch collecting (type, name, resourceVersion). */
async function collectWatch(
  kc: KubeConfig,
  path: string,
  params: Record<string, string | number | boolean | undefined>,
) {
  const events: { type: string; name?: string; rv?: string; object: KubernetesObject }[] = [];
  let done: unknown = "open";
  const controller = await new Watch(kc).watch(
    path,
    params,
    (type, object: KubernetesObject) =>
      events.push({
        type,
        name: object.metadata?.name,
        rv: object.metadata?.resourceVersion,
        object,
      }),
    (err) => {
      done = err;
    },
  );
  return { events, controller, done: () => done };
}

describe("fake kube-apiserver through @kubernetes/client-node", () => {
  let server: FakeKubeApiServer;
  let kc: KubeConfig;
  let core: CoreV1Api;
  const informers: Informer<KubernetesObject>[] = [];

  async function start(options: FakeKubeApiServerOptions = {}): Promise<void> {
    server = await startFakeKubeApiServer(options);
    kc = new KubeConfig();
    kc.loadFromString(server.kubeconfig());
    core = kc.makeApiClient(CoreV1Api);
  }

  function keep<I extends Informer<KubernetesObject>>(informer: I): I {
    informers.push(informer);
    return informer;
  }

  beforeEach(() => start());

  afterEach(async () => {
    for (const informer of informers.splice(0)) await informer.stop();
    await server.close();
  });

  describe("connection", () => {
    it("writes a kubeconfig client-node loads from file; without insecure-skip-tls-verify client-node refuses http", async () => {
      const dir = mkdtempSync(join(tmpdir(), "fake-kube-"));
      try {
        const file = join(dir, "kubeconfig");
        server.kubeconfig(file, "kube-system");
        const fromFile = new KubeConfig();
        fromFile.loadFromFile(file);
        expect(fromFile.getContextObject(fromFile.getCurrentContext())?.namespace).to.equal(
          "kube-system",
        );
        const ns = await fromFile.makeApiClient(CoreV1Api).readNamespace({ name: "kube-system" });
        expect(ns.status?.phase).to.equal("Active");

        const strict = new KubeConfig();
        strict.loadFromString(
          server.kubeconfig().replace("      insecure-skip-tls-verify: true\n", ""),
        );
        let refused: unknown;
        try {
          await strict.makeApiClient(CoreV1Api).listNode();
        } catch (e) {
          refused = e;
        }
        expect(String(refused)).to.contain(
          "HTTP protocol is not allowed when skipTLSVerify is not set or false",
        );
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });

    it("refuses a wrong bearer token with 401 Unauthorized", async () => {
      const other = new KubeConfig();
      other.loadFromString(server.kubeconfig().replace(server.token, "wrong"));
      const { code } = await apiError(other.makeApiClient(CoreV1Api).listNode());
      expect(code).to.equal(401);
      expect(server.requests.at(-1)?.status).to.equal(401);
    });
  });

  describe("create, get, list", () => {
    it("creates with 201, filling uid, creationTimestamp and resourceVersion; a second create is 409 AlreadyExists", async () => {
      const pod = await core.createNamespacedPod({
        namespace: NS,
        body: {
          metadata: { name: "p1" },
          spec: { containers: [{ name: "c", image: "busybox" }] },
          status: { phase: "Running" },
        },
      });
      expect(pod.metadata?.uid).to.match(/^[0-9a-f-]{36}$/);
      expect(pod.metadata?.creationTimestamp).to.be.instanceOf(Date);
      expect(pod.metadata?.resourceVersion).to.equal(server.resourceVersion());
      expect(pod.status?.phase, "a new pod's status is the server's").to.equal("Pending");
      expect(server.requests.at(-1)).to.include({ method: "POST", status: 201 });
      const read = await core.readNamespacedPod({ name: "p1", namespace: NS });
      expect(read.metadata?.uid).to.equal(pod.metadata?.uid);

      const { code, status } = await apiError(
        core.createNamespacedPod({
          namespace: NS,
          body: { metadata: { name: "p1" }, spec: { containers: [] } },
        }),
      );
      expect(code).to.equal(409);
      expect(status).to.deep.include({
        kind: "Status",
        status: "Failure",
        reason: "AlreadyExists",
        message: 'pods "p1" already exists',
        code: 409,
      });
      expect(status.details).to.deep.equal({ name: "p1", kind: "pods" });
    });

    const refusals: {
      what: string;
      call: (c: CoreV1Api) => Promise<unknown>;
      code: number;
      reason: string;
      message: string;
    }[] = [
      {
        what: "a missing object",
        call: (c) => c.readNamespacedPod({ name: "nope", namespace: NS }),
        code: 404,
        reason: "NotFound",
        message: 'pods "nope" not found',
      },
      {
        what: "a missing cluster-scoped object",
        call: (c) => c.readNode({ name: "node9" }),
        code: 404,
        reason: "NotFound",
        message: 'nodes "node9" not found',
      },
      {
        what: "a create in a namespace that does not exist",
        call: (c) =>
          c.createNamespacedConfigMap({ namespace: "nope", body: { metadata: { name: "c" } } }),
        code: 404,
        reason: "NotFound",
        message: 'namespaces "nope" not found',
      },
      {
        what: "a create carrying a resourceVersion",
        call: (c) =>
          c.createNamespacedConfigMap({
            namespace: NS,
            body: { metadata: { name: "c", resourceVersion: "5" } },
          }),
        code: 400,
        reason: "BadRequest",
        message: "resourceVersion should not be set on objects to be created",
      },
      {
        what: "a create without name or generateName",
        call: (c) => c.createNamespacedConfigMap({ namespace: NS, body: { metadata: {} } }),
        code: 422,
        reason: "Invalid",
        message:
          'ConfigMap "" is invalid: metadata.name: Required value: name or generateName is required',
      },
      {
        what: "an unsupported field selector",
        call: (c) => c.listPodForAllNamespaces({ fieldSelector: "spec.foo=x" }),
        code: 400,
        reason: "BadRequest",
        message: "field label not supported: spec.foo",
      },
    ];
    for (const r of refusals) {
      it(`refuses ${r.what} with ${r.code} ${r.reason}`, async () => {
        const { code, status } = await apiError(r.call(core));
        expect(code).to.equal(r.code);
        expect(status).to.deep.include({ reason: r.reason, message: r.message, code: r.code });
      });
    }

    it("names a grouped resource as <resource>.<group> in messages and details", async () => {
      const coordination = kc.makeApiClient(CoordinationV1Api);
      const { code, status } = await apiError(
        coordination.readNamespacedLease({ name: "x", namespace: NS }),
      );
      expect(code).to.equal(404);
      expect(status.message).to.equal('leases.coordination.k8s.io "x" not found');
      expect(status.details).to.deep.equal({
        name: "x",
        group: "coordination.k8s.io",
        kind: "leases",
      });
    });

    it("counts resourceVersion globally across kinds, as etcd's revision", async () => {
      const before = Number(server.resourceVersion());
      const cm = await core.createNamespacedConfigMap({
        namespace: NS,
        body: { metadata: { name: "c" } },
      });
      const node = await core.createNode({ body: { metadata: { name: "node1" } } });
      const lease = await kc
        .makeApiClient(CoordinationV1Api)
        .createNamespacedLease({ namespace: NS, body: { metadata: { name: "l" } } });
      expect([cm, node, lease].map((o) => Number(o.metadata?.resourceVersion))).to.deep.equal([
        before + 1,
        before + 2,
        before + 3,
      ]);
      expect(
        (await core.listNamespacedConfigMap({ namespace: NS })).metadata?.resourceVersion,
      ).to.equal(String(before + 3));
    });

    it("generates a name from generateName", async () => {
      const cm = await core.createNamespacedConfigMap({
        namespace: NS,
        body: { metadata: { generateName: "cfg-" } },
      });
      expect(cm.metadata?.name).to.match(/^cfg-[0-9a-f]{5}$/);
    });

    const labelCases: [string, string[]][] = [
      ["role=worker", ["n1", "n2"]],
      ["role==worker", ["n1", "n2"]],
      ["role!=worker", ["n3", "n4"]],
      ["role in (worker,edge)", ["n1", "n2", "n3"]],
      ["role notin (worker)", ["n3", "n4"]],
      ["zone", ["n1", "n3"]],
      ["!zone", ["n2", "n4"]],
      ["role=worker,zone=a", ["n1"]],
      ["", ["n1", "n2", "n3", "n4"]],
    ];
    for (const [selector, names] of labelCases) {
      it(`lists nodes by label selector "${selector}"`, async () => {
        server.put("nodes", { metadata: { name: "n1", labels: { role: "worker", zone: "a" } } });
        server.put("nodes", { metadata: { name: "n2", labels: { role: "worker" } } });
        server.put("nodes", { metadata: { name: "n3", labels: { role: "edge", zone: "b" } } });
        server.put("nodes", { metadata: { name: "n4" } });
        const list = await core.listNode(selector ? { labelSelector: selector } : {});
        expect(list.items.map((n) => n.metadata?.name)).to.deep.equal(names);
      });
    }

    it("lists pods across namespaces or in one, by field selector metadata.name, metadata.namespace, spec.nodeName", async () => {
      server.put("pods", { metadata: { name: "a", namespace: NS }, spec: { nodeName: "node1" } });
      server.put("pods", { metadata: { name: "b", namespace: NS }, spec: { nodeName: "node2" } });
      server.put("pods", {
        metadata: { name: "c", namespace: "kube-system" },
        spec: { nodeName: "node1" },
      });
      server.put("pods", { metadata: { name: "d", namespace: "kube-system" }, spec: {} });
      const names = async (fieldSelector?: string) =>
        (await core.listPodForAllNamespaces(fieldSelector ? { fieldSelector } : {})).items.map(
          (p) => `${p.metadata?.namespace}/${p.metadata?.name}`,
        );
      expect(await names()).to.deep.equal([
        "default/a",
        "default/b",
        "kube-system/c",
        "kube-system/d",
      ]);
      expect(await names("spec.nodeName=node1")).to.deep.equal(["default/a", "kube-system/c"]);
      expect(await names("spec.nodeName!=node1")).to.deep.equal(["default/b", "kube-system/d"]);
      expect(await names("spec.nodeName=")).to.deep.equal(["kube-system/d"]);
      expect(await names("metadata.name=c")).to.deep.equal(["kube-system/c"]);
      expect(await names("metadata.namespace=default,spec.nodeName=node2")).to.deep.equal([
        "default/b",
      ]);
      const inNs = await core.listNamespacedPod({
        namespace: "kube-system",
        fieldSelector: "spec.nodeName=node1",
      });
      expect(inNs.items.map((p) => p.metadata?.name)).to.deep.equal(["c"]);
      expect(inNs.items[0]?.kind, "list items carry no kind on the wire").to.equal(undefined);
    });

    it("pages a list with limit and continue", async () => {
      for (const name of ["c1", "c2", "c3", "c4", "c5"])
        server.put("configmaps", { metadata: { name, namespace: NS } });
      const seen: string[] = [];
      let token: string | undefined;
      let pages = 0;
      do {
        const page = await core.listNamespacedConfigMap({
          namespace: NS,
          limit: 2,
          ...(token ? { _continue: token } : {}),
        });
        seen.push(...page.items.map((c) => c.metadata!.name!));
        token = page.metadata?._continue;
        pages++;
      } while (token);
      expect(seen).to.deep.equal(["c1", "c2", "c3", "c4", "c5"]);
      expect(pages).to.equal(3);
    });

    it("names the list's first revision on every page; a continue token from before a compaction gets 410 Expired", async () => {
      for (const name of ["c1", "c2", "c3", "c4", "c5"])
        server.put("configmaps", { metadata: { name, namespace: NS } });
      const first = await core.listNamespacedConfigMap({ namespace: NS, limit: 2 });
      server.put("configmaps", { metadata: { name: "c6", namespace: NS } });
      const second = await core.listNamespacedConfigMap({
        namespace: NS,
        limit: 2,
        _continue: first.metadata?._continue,
      });
      expect(second.metadata?.resourceVersion).to.equal(first.metadata?.resourceVersion);
      expect(second.metadata?.remainingItemCount).to.equal(2);
      server.compact();
      const { code, status } = await apiError(
        core.listNamespacedConfigMap({
          namespace: NS,
          limit: 2,
          _continue: second.metadata?._continue,
        }),
      );
      expect(code).to.equal(410);
      expect(status.reason).to.equal("Expired");
      expect(status.message).to.match(/continue parameter is too old/);
    });
  });

  describe("update and delete", () => {
    it("refuses a PUT with a stale resourceVersion with 409 Conflict; a re-read and retry succeeds", async () => {
      const created = await core.createNamespacedConfigMap({
        namespace: NS,
        body: { metadata: { name: "cfg" }, data: { a: "1" } },
      });
      // Another writer gets there first.
      server.put("configmaps", { metadata: { name: "cfg", namespace: NS }, data: { a: "2" } });
      const stale = { ...created, data: { a: "3" } };
      const { code, status } = await apiError(
        core.replaceNamespacedConfigMap({ name: "cfg", namespace: NS, body: stale }),
      );
      expect(code).to.equal(409);
      expect(status).to.deep.include({
        reason: "Conflict",
        message: `Operation cannot be fulfilled on configmaps "cfg": ${OPTIMISTIC_LOCK}`,
      });
      expect(status.details).to.deep.equal({ name: "cfg", kind: "configmaps" });

      let attempts = 0;
      for (;;) {
        attempts++;
        const current = await core.readNamespacedConfigMap({ name: "cfg", namespace: NS });
        current.data = { ...current.data, b: "x" };
        try {
          const replaced = await core.replaceNamespacedConfigMap({
            name: "cfg",
            namespace: NS,
            body: current,
          });
          expect(replaced.data).to.deep.equal({ a: "2", b: "x" });
          break;
        } catch (e) {
          if (!(e instanceof ApiException) || e.code !== 409 || attempts > 3) throw e;
        }
      }
      expect(attempts).to.equal(1);
    });

    it("keeps the resourceVersion and emits nothing when an update changes nothing", async () => {
      const cm = await core.createNamespacedConfigMap({
        namespace: NS,
        body: { metadata: { name: "cfg" }, data: { a: "1" } },
      });
      const w = await collectWatch(kc, `/api/v1/namespaces/${NS}/configmaps`, {
        resourceVersion: server.resourceVersion(),
      });
      const same = await core.replaceNamespacedConfigMap({ name: "cfg", namespace: NS, body: cm });
      expect(same.metadata?.resourceVersion).to.equal(cm.metadata?.resourceVersion);
      await core.patchNamespacedConfigMap(
        { name: "cfg", namespace: NS, body: { data: { a: "1" } } },
        mergePatch,
      );
      server.put("configmaps", { metadata: { name: "marker", namespace: NS } });
      await until(() => w.events.length > 0, "the marker event");
      expect(w.events.map((e) => `${e.type} ${e.name}`)).to.deep.equal(["ADDED marker"]);
      w.controller.abort();
    });

    it("refuses a PUT whose body names another object with 400", async () => {
      const cm = await core.createNamespacedConfigMap({
        namespace: NS,
        body: { metadata: { name: "cfg" } },
      });
      const { code, status } = await apiError(
        core.replaceNamespacedConfigMap({
          name: "cfg",
          namespace: NS,
          body: { ...cm, metadata: { ...cm.metadata, name: "other" } },
        }),
      );
      expect(code).to.equal(400);
      expect(status.message).to.equal(
        "the name of the object (other) does not match the name on the URL (cfg)",
      );
    });

    it("answers DELETE with the object for pods and a Success Status for configmaps; 404 when gone; 409 on a stale precondition", async () => {
      server.put("pods", { metadata: { name: "p1", namespace: NS }, spec: { nodeName: "node1" } });
      const pod = await core.deleteNamespacedPod({ name: "p1", namespace: NS });
      expect(pod.kind).to.equal("Pod");
      expect(pod.metadata?.name).to.equal("p1");

      const cm = await core.createNamespacedConfigMap({
        namespace: NS,
        body: { metadata: { name: "cfg" } },
      });
      const stale = await apiError(
        core.deleteNamespacedConfigMap({
          name: "cfg",
          namespace: NS,
          body: { preconditions: { resourceVersion: "1" } },
        }),
      );
      expect(stale.code).to.equal(409);
      expect(stale.status.message).to.equal(
        `Operation cannot be fulfilled on configmaps "cfg": Precondition failed: ResourceVersion in precondition: 1, ResourceVersion in object meta: ${cm.metadata?.resourceVersion}`,
      );
      const status = await core.deleteNamespacedConfigMap({
        name: "cfg",
        namespace: NS,
        body: { preconditions: { resourceVersion: cm.metadata?.resourceVersion } },
      });
      expect(status).to.deep.include({ kind: "Status", status: "Success" });
      expect(status.details).to.deep.include({
        name: "cfg",
        kind: "configmaps",
        uid: cm.metadata?.uid,
      });
      const gone = await apiError(core.deleteNamespacedConfigMap({ name: "cfg", namespace: NS }));
      expect(gone.code).to.equal(404);
      expect(server.get("configmaps", NS, "cfg")).to.equal(undefined);
    });

    it("keeps status on the main endpoint and changes only status through /status", async () => {
      await core.createNode({
        body: {
          metadata: { name: "node1", labels: { a: "1" } },
          spec: { podCIDR: "10.1.0.0/24", podCIDRs: ["10.1.0.0/24", "fd00:1::/64"] },
          status: { addresses: [{ type: "InternalIP", address: "192.168.1.10" }] },
        },
      });
      const node = await core.readNode({ name: "node1" });
      expect(node.spec?.podCIDRs).to.deep.equal(["10.1.0.0/24", "fd00:1::/64"]);
      node.metadata!.labels = { a: "2" };
      node.status = { addresses: [{ type: "InternalIP", address: "10.0.0.1" }] };
      const replaced = await core.replaceNode({ name: "node1", body: node });
      expect(replaced.metadata?.labels).to.deep.equal({ a: "2" });
      expect(replaced.status?.addresses?.[0]?.address).to.equal("192.168.1.10");

      const patched = await core.patchNodeStatus(
        {
          name: "node1",
          body: {
            metadata: { labels: { a: "3" } },
            status: { addresses: [{ type: "ExternalIP", address: "203.0.113.5" }] },
          },
        },
        mergePatch,
      );
      expect(patched.metadata?.labels).to.deep.equal({ a: "2" });
      // A merge patch replaces a list whole.
      expect(patched.status?.addresses?.map((a) => `${a.type}=${a.address}`)).to.deep.equal([
        "ExternalIP=203.0.113.5",
      ]);
    });
  });

  describe("patch", () => {
    beforeEach(() => {
      server.put("pods", {
        metadata: {
          name: "p1",
          namespace: NS,
          labels: { app: "web", tier: "front" },
          annotations: { keep: "yes" },
        },
        spec: { nodeName: "node1", containers: [{ name: "c", image: "busybox" }] },
      });
    });

    it("merge-patches an annotation with setHeaderOptions('Content-Type', PatchStrategy.MergePatch) and removes it with null", async () => {
      const mac = "0a:58:0a:01:00:05";
      const added = await core.patchNamespacedPod(
        {
          name: "p1",
          namespace: NS,
          body: { metadata: { annotations: { "midonet.org/mac-address": mac } } },
        },
        mergePatch,
      );
      expect(added.metadata?.annotations).to.deep.equal({
        keep: "yes",
        "midonet.org/mac-address": mac,
      });
      expect(server.requests.at(-1)).to.include({
        method: "PATCH",
        contentType: "application/merge-patch+json",
        status: 200,
      });

      const removed = await core.patchNamespacedPod(
        {
          name: "p1",
          namespace: NS,
          body: { metadata: { annotations: { "midonet.org/mac-address": null } } },
        },
        mergePatch,
      );
      expect(removed.metadata?.annotations).to.deep.equal({ keep: "yes" });
      expect(Number(removed.metadata?.resourceVersion)).to.be.greaterThan(
        Number(added.metadata?.resourceVersion),
      );
    });

    it("answers 415 to JSON Patch (client-node's default) and strategic merge patch, changing nothing", async () => {
      const before = await core.readNamespacedPod({ name: "p1", namespace: NS });
      const jsonDefault = await apiError(
        core.patchNamespacedPod({
          name: "p1",
          namespace: NS,
          body: [{ op: "add", path: "/metadata/labels/x", value: "1" }],
        }),
      );
      expect(server.requests.at(-1)?.contentType).to.equal("application/json-patch+json");
      const strategic = await apiError(
        core.patchNamespacedPod(
          { name: "p1", namespace: NS, body: { metadata: { labels: { x: "1" } } } },
          strategicPatch,
        ),
      );
      expect(server.requests.at(-1)?.contentType).to.equal(
        "application/strategic-merge-patch+json",
      );
      for (const { code, status } of [jsonDefault, strategic]) {
        expect(code).to.equal(415);
        expect(status.reason).to.equal("UnsupportedMediaType");
        expect(status.message).to.equal(
          "the body of the request was in an unknown format - accepted media types include: application/merge-patch+json",
        );
      }
      const after = await core.readNamespacedPod({ name: "p1", namespace: NS });
      expect(after.metadata?.labels).to.deep.equal({ app: "web", tier: "front" });
      expect(after.metadata?.resourceVersion).to.equal(before.metadata?.resourceVersion);
    });

    it("treats metadata.resourceVersion in a patch as a precondition: 409 when stale, applied when current", async () => {
      const current = await core.readNamespacedPod({ name: "p1", namespace: NS });
      server.put("pods", {
        ...server.get("pods", NS, "p1"),
        spec: { nodeName: "node1", containers: [{ name: "c", image: "busybox:2" }] },
      });
      const { code, status } = await apiError(
        core.patchNamespacedPod(
          {
            name: "p1",
            namespace: NS,
            body: {
              metadata: {
                resourceVersion: current.metadata?.resourceVersion,
                annotations: { x: "1" },
              },
            },
          },
          mergePatch,
        ),
      );
      expect(code).to.equal(409);
      expect(status.message).to.equal(
        `Operation cannot be fulfilled on pods "p1": ${OPTIMISTIC_LOCK}`,
      );
      const fresh = await core.readNamespacedPod({ name: "p1", namespace: NS });
      const ok = await core.patchNamespacedPod(
        {
          name: "p1",
          namespace: NS,
          body: {
            metadata: { resourceVersion: fresh.metadata?.resourceVersion, annotations: { x: "1" } },
          },
        },
        mergePatch,
      );
      expect(ok.metadata?.annotations?.x).to.equal("1");
    });

    it("patches a pod's status through /status only", async () => {
      const pod = await core.patchNamespacedPodStatus(
        {
          name: "p1",
          namespace: NS,
          body: { status: { phase: "Running", podIP: "10.1.0.5" }, spec: { nodeName: "other" } },
        },
        mergePatch,
      );
      expect(pod.status).to.deep.include({ phase: "Running", podIP: "10.1.0.5" });
      expect(pod.spec?.nodeName).to.equal("node1");
      const byIp = await core.listPodForAllNamespaces({ fieldSelector: "status.podIP=10.1.0.5" });
      expect(byIp.items.map((p) => p.metadata?.name)).to.deep.equal(["p1"]);
    });
  });

  describe("leases (leader election)", () => {
    it("create, get, replace with resourceVersion conflicts between two candidates", async () => {
      const coordination = kc.makeApiClient(CoordinationV1Api);
      const lease = (holder: string): V1Lease => ({
        metadata: { name: "midonet-controller", namespace: "kube-system" },
        spec: {
          holderIdentity: holder,
          leaseDurationSeconds: 15,
          acquireTime: new V1MicroTime(),
          renewTime: new V1MicroTime(),
          leaseTransitions: 0,
        },
      });
      const a = await coordination.createNamespacedLease({
        namespace: "kube-system",
        body: lease("a"),
      });
      const lost = await apiError(
        coordination.createNamespacedLease({ namespace: "kube-system", body: lease("b") }),
      );
      expect(lost.code).to.equal(409);
      expect(lost.status.message).to.equal(
        'leases.coordination.k8s.io "midonet-controller" already exists',
      );

      // b observes the lease, a renews, b's takeover with the observed version loses.
      const observedByB = await coordination.readNamespacedLease({
        name: "midonet-controller",
        namespace: "kube-system",
      });
      expect(observedByB.spec?.holderIdentity).to.equal("a");
      expect(observedByB.spec?.renewTime).to.match(/\.\d{6}Z$/);
      a.spec!.renewTime = new V1MicroTime();
      const renewed = await coordination.replaceNamespacedLease({
        name: "midonet-controller",
        namespace: "kube-system",
        body: a,
      });
      expect(Number(renewed.metadata?.resourceVersion)).to.be.greaterThan(
        Number(a.metadata?.resourceVersion),
      );
      observedByB.spec = {
        ...observedByB.spec,
        holderIdentity: "b",
        leaseTransitions: 1,
        renewTime: new V1MicroTime(),
      };
      const takeover = await apiError(
        coordination.replaceNamespacedLease({
          name: "midonet-controller",
          namespace: "kube-system",
          body: observedByB,
        }),
      );
      expect(takeover.code).to.equal(409);
      expect(takeover.status).to.deep.include({
        reason: "Conflict",
        message: `Operation cannot be fulfilled on leases.coordination.k8s.io "midonet-controller": ${OPTIMISTIC_LOCK}`,
      });
      expect(takeover.status.details).to.deep.equal({
        name: "midonet-controller",
        group: "coordination.k8s.io",
        kind: "leases",
      });
      // a keeps renewing on the version it got back.
      renewed.spec!.renewTime = new V1MicroTime();
      const again = await coordination.replaceNamespacedLease({
        name: "midonet-controller",
        namespace: "kube-system",
        body: renewed,
      });
      expect(again.spec?.holderIdentity).to.equal("a");
    });

    it("refuses renewTime without six fractional digits, as metav1.MicroTime does", async () => {
      const coordination = kc.makeApiClient(CoordinationV1Api);
      const { code, status } = await apiError(
        coordination.createNamespacedLease({
          namespace: NS,
          body: {
            metadata: { name: "l" },
            spec: { holderIdentity: "a", renewTime: new Date("2024-01-01T00:00:00.123Z") },
          },
        }),
      );
      expect(code).to.equal(400);
      expect(status.message).to.equal(
        'Lease in version "v1" cannot be handled as a Lease: parsing time "2024-01-01T00:00:00.123Z" as "2006-01-02T15:04:05.000000Z07:00": cannot parse ".123Z" as ".000000"',
      );
    });
  });

  describe("events", () => {
    it("creates core/v1 Events on a pod and lists them by involvedObject and by type and source", async () => {
      const pod = server.put("pods", {
        metadata: { name: "p1", namespace: NS },
        spec: { nodeName: "node1" },
      });
      const involved = {
        kind: "Pod",
        apiVersion: "v1",
        namespace: NS,
        name: "p1",
        uid: pod.metadata?.uid,
      };
      const now = new Date();
      const created = await core.createNamespacedEvent({
        namespace: NS,
        body: {
          metadata: { generateName: "p1." },
          involvedObject: involved,
          reason: "NetworkSetUpFailed",
          message: "host-local: no IP addresses available",
          type: "Warning",
          source: { component: "cni-driver", host: "node1" },
          firstTimestamp: now,
          lastTimestamp: now,
          count: 1,
        },
      });
      expect(created.metadata?.name).to.match(/^p1\./);
      server.put("events", {
        metadata: { name: "other", namespace: NS },
        involvedObject: { kind: "Pod", name: "p2", namespace: NS },
      });

      const forPod = await core.listNamespacedEvent({
        namespace: NS,
        fieldSelector: "involvedObject.name=p1",
      });
      expect(
        forPod.items.map((e) => [e.reason, e.message, e.source?.component ?? e.reportingComponent]),
      ).to.deep.equal([
        ["NetworkSetUpFailed", "host-local: no IP addresses available", "cni-driver"],
      ]);
      const warnings = await core.listEventForAllNamespaces({
        fieldSelector: "type=Warning,source=cni-driver",
      });
      expect(warnings.items.map((e) => e.reason)).to.deep.equal(["NetworkSetUpFailed"]);
    });
  });

  describe("watch", () => {
    it("delivers ADDED, MODIFIED, DELETED in order from a list's resourceVersion; DELETED carries the deletion's revision", async () => {
      const list = await core.listNamespacedConfigMap({ namespace: NS });
      const w = await collectWatch(kc, `/api/v1/namespaces/${NS}/configmaps`, {
        resourceVersion: list.metadata?.resourceVersion,
      });
      await core.createNamespacedConfigMap({
        namespace: NS,
        body: { metadata: { name: "cfg" }, data: { a: "1" } },
      });
      await core.patchNamespacedConfigMap(
        { name: "cfg", namespace: NS, body: { data: { a: "2" } } },
        mergePatch,
      );
      server.put("configmaps", { metadata: { name: "elsewhere", namespace: "kube-system" } });
      await core.deleteNamespacedConfigMap({ name: "cfg", namespace: NS });
      await until(() => w.events.length >= 3, "three events");
      expect(w.events.map((e) => `${e.type} ${e.name}`)).to.deep.equal([
        "ADDED cfg",
        "MODIFIED cfg",
        "DELETED cfg",
      ]);
      const rvs = w.events.map((e) => Number(e.rv));
      expect(rvs[1]).to.be.greaterThan(rvs[0]!);
      expect(rvs[2]).to.equal(Number(server.resourceVersion()));
      expect((w.events[1]!.object as V1ConfigMap).data).to.deep.equal({ a: "2" });
      expect(w.events[0]?.object.kind).to.equal("ConfigMap");
      w.controller.abort();
    });

    it("replays history after an older resourceVersion, and starts with synthetic ADDED without one", async () => {
      const first = server.put("nodes", { metadata: { name: "n1" } });
      server.put("nodes", { metadata: { name: "n2" } });
      server.put("nodes", { metadata: { name: "n1", labels: { a: "1" } } });
      const replay = await collectWatch(kc, "/api/v1/nodes", {
        resourceVersion: first.metadata?.resourceVersion,
      });
      const fresh = await collectWatch(kc, "/api/v1/nodes", {});
      await until(() => replay.events.length >= 2 && fresh.events.length >= 2, "the replays");
      expect(replay.events.map((e) => `${e.type} ${e.name}`)).to.deep.equal([
        "ADDED n2",
        "MODIFIED n1",
      ]);
      expect(fresh.events.map((e) => `${e.type} ${e.name}`)).to.deep.equal([
        "ADDED n1",
        "ADDED n2",
      ]);
      replay.controller.abort();
      fresh.controller.abort();
    });

    it("answers a watch from a compacted resourceVersion with an ERROR event carrying 410 Expired, then ends it", async () => {
      const old = server.put("nodes", { metadata: { name: "n1" } }).metadata?.resourceVersion;
      server.put("nodes", { metadata: { name: "n2" } });
      server.compact();
      const w = await collectWatch(kc, "/api/v1/nodes", { resourceVersion: old });
      await until(() => w.done() !== "open", "the end of the watch");
      expect(w.events).to.have.length(1);
      expect(w.events[0]?.type).to.equal("ERROR");
      expect(w.events[0]?.object).to.deep.include({ kind: "Status", code: 410, reason: "Expired" });
      expect((w.events[0]!.object as unknown as KubeStatus).message).to.equal(
        `too old resource version: ${old} (${server.resourceVersion()})`,
      );
    });

    it("answers HTTP 410 instead when configured, which Watch reports as done(err) with statusCode 410", async () => {
      await server.close();
      await start({ expiredWatchAs: "status", historyLimit: 2 });
      const old = server.put("nodes", { metadata: { name: "n1" } }).metadata?.resourceVersion;
      for (const name of ["n2", "n3", "n4"]) server.put("nodes", { metadata: { name } });
      const w = await collectWatch(kc, "/api/v1/nodes", { resourceVersion: old });
      const err = await until(
        () => w.done() !== "open" && (w.done() as { statusCode?: number }),
        "done",
      );
      expect(err.statusCode).to.equal(410);
      expect(server.requests.at(-1)).to.include({ watch: true, status: 410 });
    });

    it("sends bookmarks to watches that allow them", async () => {
      const w = await collectWatch(kc, "/api/v1/pods", {
        allowWatchBookmarks: true,
        resourceVersion: server.resourceVersion(),
      });
      server.put("configmaps", { metadata: { name: "c", namespace: NS } });
      server.bookmark();
      await until(() => w.events.length > 0, "a bookmark");
      expect(w.events[0]).to.include({ type: "BOOKMARK", rv: server.resourceVersion() });
      w.controller.abort();
    });

    it("networkpolicies (networking.k8s.io/v1) list and watch across namespaces and in one; pods and namespaces cluster-wide, as policy enforcement reads them", async () => {
      const networking = kc.makeApiClient(NetworkingV1Api);
      for (const ns of ["x", "y"])
        server.put("namespaces", {
          metadata: { name: ns, labels: { ns, "kubernetes.io/metadata.name": ns } },
        });
      server.put("pods", {
        metadata: { name: "a", namespace: "x", labels: { pod: "a" } },
        spec: { nodeName: "node1" },
      });
      server.put("networkpolicies", {
        metadata: { name: "deny", namespace: "x" },
        spec: { podSelector: {}, policyTypes: ["Ingress"] },
      });
      const list = await networking.listNetworkPolicyForAllNamespaces();
      expect(list).to.include({ kind: "NetworkPolicyList", apiVersion: "networking.k8s.io/v1" });
      expect(list.items.map((p) => `${p.metadata?.namespace}/${p.metadata?.name}`)).to.deep.equal([
        "x/deny",
      ]);
      expect(list.items[0]?.spec?.policyTypes).to.deep.equal(["Ingress"]);
      expect(
        (await networking.listNamespacedNetworkPolicy({ namespace: "y" })).items,
      ).to.deep.equal([]);
      const pods = await core.listPodForAllNamespaces();
      const namespaces = await core.listNamespace({ labelSelector: "ns" });
      expect(namespaces.items.map((n) => n.metadata?.name)).to.deep.equal(["x", "y"]);
      const from = { resourceVersion: list.metadata?.resourceVersion };
      const all = await collectWatch(kc, "/apis/networking.k8s.io/v1/networkpolicies", from);
      const inY = await collectWatch(
        kc,
        "/apis/networking.k8s.io/v1/namespaces/y/networkpolicies",
        from,
      );
      const podWatch = await collectWatch(kc, "/api/v1/pods", {
        resourceVersion: pods.metadata?.resourceVersion,
      });
      const nsWatch = await collectWatch(kc, "/api/v1/namespaces", {
        resourceVersion: namespaces.metadata?.resourceVersion,
      });

      const created = await networking.createNamespacedNetworkPolicy({
        namespace: "y",
        body: {
          metadata: { name: "allow" },
          spec: {
            podSelector: { matchLabels: { pod: "a" } },
            policyTypes: ["Ingress"],
            ingress: [
              {
                // client-node's name for `from` (a reserved word); it sends `from`.
                _from: [{ namespaceSelector: { matchLabels: { ns: "x" } } }],
                ports: [{ protocol: "TCP", port: "serve-80-tcp" }],
              },
            ],
          },
        },
      });
      expect(created.metadata?.uid).to.match(/^[0-9a-f-]{36}$/);
      server.put("networkpolicies", {
        metadata: { name: "deny", namespace: "x" },
        spec: { podSelector: { matchLabels: { pod: "a" } }, policyTypes: ["Ingress"] },
      });
      const deleted = await networking.deleteNamespacedNetworkPolicy({
        name: "deny",
        namespace: "x",
      });
      expect(deleted).to.deep.include({ kind: "Status", status: "Success" });
      server.put("pods", {
        metadata: { name: "b", namespace: "y", labels: { pod: "b" } },
        spec: { nodeName: "node2" },
      });
      server.put("namespaces", {
        metadata: { name: "x", labels: { ns: "x", "kubernetes.io/metadata.name": "x", env: "e" } },
      });
      await until(
        () =>
          all.events.length >= 3 &&
          inY.events.length >= 1 &&
          podWatch.events.length >= 1 &&
          nsWatch.events.length >= 1,
        "the events",
      );
      const named = (w: typeof all) =>
        w.events.map((e) => `${e.type} ${e.object.metadata?.namespace ?? ""}/${e.name}`);
      expect(named(all)).to.deep.equal(["ADDED y/allow", "MODIFIED x/deny", "DELETED x/deny"]);
      expect(named(inY)).to.deep.equal(["ADDED y/allow"]);
      expect(named(podWatch)).to.deep.equal(["ADDED y/b"]);
      expect(named(nsWatch)).to.deep.equal(["MODIFIED /x"]);
      expect(all.events[0]?.object).to.deep.include({
        kind: "NetworkPolicy",
        apiVersion: "networking.k8s.io/v1",
      });
      // A watch hands over the wire's JSON: `from`, and the named port as a string.
      expect((all.events[0]!.object as unknown as { spec: unknown }).spec).to.deep.equal({
        podSelector: { matchLabels: { pod: "a" } },
        policyTypes: ["Ingress"],
        ingress: [
          {
            from: [{ namespaceSelector: { matchLabels: { ns: "x" } } }],
            ports: [{ protocol: "TCP", port: "serve-80-tcp" }],
          },
        ],
      });
      const typed = await networking.readNamespacedNetworkPolicy({ name: "allow", namespace: "y" });
      expect(typed.spec?.ingress?.[0]?._from?.[0]?.namespaceSelector?.matchLabels).to.deep.equal({
        ns: "x",
      });
      for (const w of [all, inY, podWatch, nsWatch]) w.controller.abort();
    });

    it("ends open watches on close()", async () => {
      const w = await collectWatch(kc, "/api/v1/nodes", {});
      expect(server.openWatches()).to.have.length(1);
      await server.close();
      await until(() => w.done() !== "open", "done");
      expect(w.done()).to.equal(null);
      await start();
    });
  });

  describe("informers", () => {
    it("makeInformer on nodes sees add, update, delete; put() of an unchanged object emits nothing", async () => {
      server.put("nodes", { metadata: { name: "n1" }, spec: { podCIDR: "10.1.0.0/24" } });
      const informer = keep(makeInformer<V1Node>(kc, "/api/v1/nodes", () => core.listNode()));
      const { log, errors } = track(informer);
      await informer.start();
      expect(log).to.deep.equal(["add n1"]);
      server.put("nodes", { metadata: { name: "n2" } });
      server.put("nodes", { metadata: { name: "n1" }, spec: { podCIDR: "10.1.0.0/24" } });
      server.put("nodes", {
        metadata: { name: "n1", annotations: { "midonet.org/host-id": "h1" } },
        spec: { podCIDR: "10.1.0.0/24" },
      });
      server.remove("nodes", undefined, "n2");
      await until(() => log.length >= 4, "four callbacks");
      expect(log).to.deep.equal(["add n1", "add n2", "update n1", "delete n2"]);
      expect(informer.get("n1")?.metadata?.annotations).to.deep.equal({
        "midonet.org/host-id": "h1",
      });
      expect(informer.list().map((n) => n.metadata?.name)).to.deep.equal(["n1"]);
      expect(errors).to.deep.equal([]);
    });

    it("ListWatch with fieldSelector spec.nodeName=node1 sees only that node's pods, including one bound later", async () => {
      const selector = "spec.nodeName=node1";
      const informer = keep(
        new ListWatch<V1Pod>(
          "/api/v1/pods",
          new Watch(kc),
          () => core.listPodForAllNamespaces({ fieldSelector: selector }),
          false,
          undefined,
          selector,
        ),
      );
      server.put("pods", { metadata: { name: "a", namespace: NS }, spec: { nodeName: "node1" } });
      server.put("pods", { metadata: { name: "b", namespace: NS }, spec: { nodeName: "node2" } });
      server.put("pods", { metadata: { name: "pending", namespace: "kube-system" }, spec: {} });
      const { log } = track(informer);
      await informer.start();
      expect(server.openWatches()[0]).to.include({ path: "/api/v1/pods", fieldSelector: selector });
      server.put("pods", {
        metadata: { name: "pending", namespace: "kube-system" },
        spec: { nodeName: "node1" },
      });
      server.put("pods", {
        metadata: { name: "b", namespace: NS, labels: { x: "1" } },
        spec: { nodeName: "node2" },
      });
      await core.deleteNamespacedPod({ name: "a", namespace: NS });
      await until(() => log.length >= 3, "three callbacks");
      expect(log).to.deep.equal(["add a", "add pending", "delete a"]);
      expect(
        informer.list().map((p) => `${p.metadata?.namespace}/${p.metadata?.name}`),
      ).to.deep.equal(["kube-system/pending"]);
    });

    it("a label-selected informer sees an object leaving the selector as a delete", async () => {
      server.put("endpointslices", {
        metadata: {
          name: "web-abc",
          namespace: NS,
          labels: { "kubernetes.io/service-name": "web" },
        },
        addressType: "IPv4",
        endpoints: [{ addresses: ["10.1.0.5"], conditions: { ready: true } }],
        ports: [{ name: "http", port: 8080, protocol: "TCP" }],
      });
      const discovery = kc.makeApiClient(DiscoveryV1Api);
      const informer = keep(
        makeInformer<V1EndpointSlice>(
          kc,
          "/apis/discovery.k8s.io/v1/endpointslices",
          () =>
            discovery.listEndpointSliceForAllNamespaces({
              labelSelector: "kubernetes.io/service-name=web",
            }),
          "kubernetes.io/service-name=web",
        ),
      );
      const { log } = track(informer);
      await informer.start();
      await discovery.createNamespacedEndpointSlice({
        namespace: NS,
        body: {
          metadata: { name: "web-def", labels: { "kubernetes.io/service-name": "web" } },
          addressType: "IPv4",
          endpoints: [{ addresses: ["10.1.1.7"] }],
          ports: [{ port: 8080 }],
        },
      });
      await discovery.patchNamespacedEndpointSlice(
        {
          name: "web-abc",
          namespace: NS,
          body: { metadata: { labels: { "kubernetes.io/service-name": null } } },
        },
        mergePatch,
      );
      await until(() => log.length >= 3, "three callbacks");
      expect(log).to.deep.equal(["add web-abc", "add web-def", "delete web-abc"]);
      expect(informer.list()[0]?.endpoints?.[0]?.addresses).to.deep.equal(["10.1.1.7"]);
    });

    for (const mode of ["event", "status"] as const) {
      it(`relists after a 410 (expired as ${mode}): missed deletes, adds and updates reach the callbacks`, async () => {
        await server.close();
        await start({ expiredWatchAs: mode });
        server.put("configmaps", { metadata: { name: "keep", namespace: NS }, data: { v: "1" } });
        server.put("configmaps", { metadata: { name: "gone", namespace: NS } });
        // makeInformer returns this ListWatch, typed without latestResourceVersion().
        const informer = keep(
          new ListWatch<V1ConfigMap>(
            `/api/v1/namespaces/${NS}/configmaps`,
            new Watch(kc),
            () => core.listNamespacedConfigMap({ namespace: NS }),
            false,
          ),
        );
        const { log, errors } = track(informer);
        await informer.start();
        const watched = informer.latestResourceVersion();
        await informer.stop(); // the watch is down for a while ...
        // stop() aborts the watch, and client-node reports that abort to the error callbacks.
        await until(() => errors.length > 0, "the abort");
        expect(errors.map((e) => (e as Error).name)).to.deep.equal(["AbortError"]);
        server.remove("configmaps", NS, "gone");
        server.put("configmaps", { metadata: { name: "new", namespace: NS } });
        server.put("configmaps", { metadata: { name: "keep", namespace: NS }, data: { v: "2" } });
        server.compact(); // ... longer than the history kept
        const lists = () => server.requests.filter((r) => r.method === "GET" && !r.watch).length;
        const listsBefore = lists();
        await informer.start();
        await until(() => log.length >= 5, "the relist");
        // The relist walks the list in key order: gone, keep, new.
        expect(log).to.deep.equal([
          "add gone",
          "add keep",
          "delete gone",
          "update keep",
          "add new",
        ]);
        expect(errors).to.have.length(1);
        expect(lists()).to.equal(listsBefore + 1);
        expect(Number(informer.latestResourceVersion())).to.be.greaterThan(Number(watched));
        expect(informer.get("keep", NS)?.data).to.deep.equal({ v: "2" });
      });
    }

    it("re-watches from its last resourceVersion when the server ends the watch", async () => {
      const informer = keep(
        makeInformer<V1ConfigMap>(kc, `/api/v1/namespaces/${NS}/configmaps`, () =>
          core.listNamespacedConfigMap({ namespace: NS }),
        ),
      );
      const { log } = track(informer);
      await informer.start();
      server.put("configmaps", { metadata: { name: "a", namespace: NS } });
      await until(() => log.length === 1, "add a");
      server.endWatches();
      const rewatch = await until(() => server.openWatches()[0], "the re-watch");
      expect(rewatch.resourceVersion).to.equal(server.resourceVersion());
      server.put("configmaps", { metadata: { name: "b", namespace: NS } });
      await until(() => log.length === 2, "add b");
      expect(log).to.deep.equal(["add a", "add b"]);
    });

    it("does not restart by itself after a non-410 watch error: error callback, then start() again recovers", async () => {
      const informer = keep(makeInformer<V1Node>(kc, "/api/v1/nodes", () => core.listNode()));
      const { log, errors } = track(informer);
      await informer.start();
      server.injectFault({ path: "/api/v1/nodes", watch: true, status: 500 });
      server.endWatches();
      await until(() => errors.length > 0, "the error callback");
      expect((errors[0] as { statusCode?: number }).statusCode).to.equal(500);
      expect(server.openWatches()).to.deep.equal([]);
      await informer.start();
      server.put("nodes", { metadata: { name: "n1" } });
      await until(() => log.length === 1, "add n1");
      expect(
        server.requests.filter((r) => r.fault).map((r) => [r.path, r.watch, r.status]),
      ).to.deep.equal([["/api/v1/nodes", true, 500]]);
    });
  });

  describe("fault injection and request log", () => {
    it("answers the next N matching requests with the injected status, then serves normally", async () => {
      server.put("nodes", { metadata: { name: "node1" } });
      server.injectFault({
        method: "GET",
        path: "/api/v1/nodes/*",
        status: 500,
        times: 2,
        retryAfterSeconds: 1,
      });
      const first = await apiError(core.readNode({ name: "node1" }));
      expect(first.code).to.equal(500);
      expect(first.status).to.deep.include({
        reason: "InternalError",
        message: "Internal error occurred: injected fault",
      });
      expect(first.status.details?.retryAfterSeconds).to.equal(1);
      await apiError(core.readNode({ name: "node1" }));
      expect((await core.readNode({ name: "node1" })).metadata?.name).to.equal("node1");
      expect(
        server.requests.slice(-3).map((r) => [r.method, r.path, r.status, r.fault ?? false]),
      ).to.deep.equal([
        ["GET", "/api/v1/nodes/node1", 500, true],
        ["GET", "/api/v1/nodes/node1", 500, true],
        ["GET", "/api/v1/nodes/node1", 200, false],
      ]);
    });

    it("an injected 409 on an object answers the real Conflict Status", async () => {
      const coordination = kc.makeApiClient(CoordinationV1Api);
      const lease = await coordination.createNamespacedLease({
        namespace: NS,
        body: { metadata: { name: "l" }, spec: { holderIdentity: "a" } },
      });
      server.injectFault({ method: "PUT", path: /\/leases\/l$/, status: 409 });
      const { code, status } = await apiError(
        coordination.replaceNamespacedLease({ name: "l", namespace: NS, body: lease }),
      );
      expect(code).to.equal(409);
      expect(status.message).to.equal(
        `Operation cannot be fulfilled on leases.coordination.k8s.io "l": ${OPTIMISTIC_LOCK}`,
      );
      expect(
        (await coordination.replaceNamespacedLease({ name: "l", namespace: NS, body: lease })).spec
          ?.holderIdentity,
      ).to.equal("a");
    });
  });
});
