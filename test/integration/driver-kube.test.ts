/**
 * The driver with the Kubernetes API (the fake API server under test/support,
 * reached through a TCP gate the tests can close, or make swallow requests):
 * usePodCidr from the Node's spec.podCIDRs and not ready until it has one; the
 * midonet.org/mac-address annotation after ADD (conflicts retried) and its
 * removal on DEL; an Event on the Pod naming the failed step; `--configmap`
 * edits taking effect through the API in milliseconds with the mount as the
 * fallback; and ADD/DEL answered at once while the API server is away.
 *
 * The pure parts (which pod CIDR, which ConfigMap copy, the MAC of a result …)
 * are pinned by tables first.
 */
import { spawnSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import net from "node:net";
import { join } from "node:path";
import { CoreV1Api, KubeConfig, PatchStrategy, setHeaderOptions } from "@kubernetes/client-node";
import { expect } from "chai";
import type { AnyResult } from "../../src/cni/types.js";
import { contentHash } from "../../src/driver/config/network-config.js";
import { KubeApiError, kubeConfigSource } from "../../src/driver/kube/api.js";
import {
  chooseConfigCopy,
  configMapFiles,
  parseConfigMapRef,
} from "../../src/driver/kube/configmap-mirror.js";
import { CONFIGMAP_COPY_DIR, kubeSettingsFrom } from "../../src/driver/kube/integration.js";
import { podCidrsOfNode } from "../../src/driver/kube/node-pod-cidrs.js";
import { isRetryable, podInterfaceMac } from "../../src/driver/kube/pod-annotations.js";
import { EVENT_REASON_SETUP_FAILED, setUpFailedMessage } from "../../src/driver/kube/pod-events.js";
import { ANNOTATION_MAC_ADDRESS } from "../../src/midonet/node-contract.js";
import type { CniStatusResponse, PodResponse } from "../../src/wire/types.js";
import { queueDeletion } from "../support/deletion-queue.js";
import { DriverHarness, expectNoCniError, REPO_ROOT, sleep } from "../support/driver-harness.js";
import {
  type FakeKubeApiServer,
  type KubeObject,
  startFakeKubeApiServer,
} from "../support/fake-kube-apiserver.js";
import {
  createNetns,
  deleteHostLink,
  deleteNetns,
  linkIn,
  listHostLinks,
} from "../support/netns.js";
import { requireReferencePlugins, requireRoot } from "../support/requirements.js";
import { until } from "../support/until.js";

// ---------------------------------------------------------------------------
// Pure parts
// ---------------------------------------------------------------------------

describe("driver kube: pure parts", () => {
  const nodes: [string, KubeObject | undefined, { v4?: string; v6?: string }][] = [
    ["no Node", undefined, {}],
    ["a Node without a spec", { metadata: { name: "n" } }, {}],
    [
      "dual stack podCIDRs",
      { spec: { podCIDRs: ["10.1.0.0/24", "fd00:1::/64"] } },
      { v4: "10.1.0.0/24", v6: "fd00:1::/64" },
    ],
    [
      "IPv6 first",
      { spec: { podCIDRs: ["fd00:1::/64", "10.1.0.0/24"] } },
      { v4: "10.1.0.0/24", v6: "fd00:1::/64" },
    ],
    ["IPv6 only", { spec: { podCIDRs: ["fd00:1::/64"] } }, { v6: "fd00:1::/64" }],
    ["the legacy podCIDR", { spec: { podCIDR: "10.2.0.0/24" } }, { v4: "10.2.0.0/24" }],
    [
      "podCIDRs win over podCIDR",
      { spec: { podCIDR: "10.2.0.0/24", podCIDRs: ["10.3.0.0/24"] } },
      { v4: "10.3.0.0/24" },
    ],
    ["empty entries ignored", { spec: { podCIDRs: [""], podCIDR: "" } }, {}],
  ];
  for (const [what, node, want] of nodes) {
    it(`pod CIDRs of ${what}`, () => {
      expect(podCidrsOfNode(node)).to.deep.equal(want);
    });
  }

  const seen = new Set(["v1", "v2", "mountOld"]);
  const choices: [string, Parameters<typeof chooseConfigCopy>[0], "api" | "mount"][] = [
    ["no API copy", { apiSynced: true, mountHash: "m", seen }, "mount"],
    ["no API copy, API away", { apiSynced: false, seen }, "mount"],
    [
      "API copy, watch healthy, mount different",
      { apiCopy: "v2", apiSynced: true, mountHash: "x", seen },
      "api",
    ],
    [
      "API away, mount equal to the copy",
      { apiCopy: "v2", apiSynced: false, mountHash: "v2", seen },
      "api",
    ],
    [
      "API away, mount at a version already seen",
      { apiCopy: "v2", apiSynced: false, mountHash: "v1", seen },
      "api",
    ],
    [
      "API away, mount as read while healthy",
      { apiCopy: "v2", apiSynced: false, mountHash: "mountOld", seen },
      "api",
    ],
    ["API away, mount unreadable", { apiCopy: "v2", apiSynced: false, seen }, "api"],
    [
      "API away, mount at a version never seen",
      { apiCopy: "v2", apiSynced: false, mountHash: "v3", seen },
      "mount",
    ],
  ];
  for (const [what, input, want] of choices) {
    it(`reads the ${want} copy: ${what}`, () => {
      expect(chooseConfigCopy(input)).to.equal(want);
    });
  }

  it("parses --configmap NAMESPACE/NAME and refuses anything else", () => {
    expect(parseConfigMapRef("kube-system/cni-driver-config")).to.deep.equal({
      namespace: "kube-system",
      name: "cni-driver-config",
    });
    for (const bad of ["cni-driver-config", "/x", "a/", "a/b/c", "A/b", "a b/c"]) {
      expect(() => parseConfigMapRef(bad), bad).to.throw("--configmap must be NAMESPACE/NAME");
    }
  });

  it("projects data as UTF-8 and binaryData decoded, hashed as the mounted files are", () => {
    const files = configMapFiles({
      data: { "a.conflist": "{}" },
      binaryData: { b: Buffer.from([0, 1, 255]).toString("base64") },
    });
    expect([...files.keys()]).to.deep.equal(["a.conflist", "b"]);
    expect([...(files.get("b") as Uint8Array)]).to.deep.equal([0, 1, 255]);
    expect(contentHash(files)).to.equal(
      contentHash(
        new Map([
          ["a.conflist", Buffer.from("{}")],
          ["b", Buffer.from([0, 1, 255])],
        ]),
      ),
    );
  });

  it("takes the MAC of the attachment's own interface inside the pod", () => {
    const result = {
      cniVersion: "1.0.0",
      interfaces: [
        { name: "cdtbr0", mac: "02:00:00:00:00:01" },
        { name: "veth1", mac: "02:00:00:00:00:02" },
        { name: "net1", mac: "02:00:00:00:00:03", sandbox: "/run/netns/x" },
        { name: "eth0", mac: "0A:58:0A:F4:00:05", sandbox: "/run/netns/x" },
      ],
      ips: [],
    } as unknown as AnyResult;
    expect(podInterfaceMac(result, "eth0")).to.equal("0a:58:0a:f4:00:05");
    expect(podInterfaceMac(result, "eth9"), "falls back to the first in the pod").to.equal(
      "02:00:00:00:00:03",
    );
    expect(
      podInterfaceMac({ cniVersion: "1.0.0", ips: [] } as unknown as AnyResult, "eth0"),
    ).to.equal(undefined);
  });

  const retry: [string, unknown, boolean][] = [
    ["409 Conflict", new KubeApiError("x", 409), true],
    ["429 TooManyRequests", new KubeApiError("x", 429), true],
    ["500", new KubeApiError("x", 500), true],
    ["503", new KubeApiError("x", 503), true],
    ["no answer", new KubeApiError("ECONNREFUSED"), true],
    ["404 (pod gone)", new KubeApiError("x", 404), false],
    ["403 Forbidden", new KubeApiError("x", 403), false],
    ["422 Invalid", new KubeApiError("x", 422), false],
  ];
  for (const [what, err, want] of retry) {
    it(`${want ? "retries" : "does not retry"} an annotation patch failing with ${what}`, () => {
      expect(isRetryable(err)).to.equal(want);
    });
  }

  it("finds the API in --kubeconfig, else in-cluster in a pod, else nowhere", () => {
    expect(kubeConfigSource("/k", { KUBERNETES_SERVICE_HOST: "10.96.0.1" })).to.deep.equal({
      kind: "kubeconfig",
      path: "/k",
    });
    expect(kubeConfigSource(undefined, { KUBERNETES_SERVICE_HOST: "10.96.0.1" })).to.deep.equal({
      kind: "in-cluster",
    });
    expect(kubeConfigSource(undefined, {})).to.equal(undefined);
    const base = {
      podCidrGiven: false,
      configDir: "/etc/cni-driver",
      stateDir: "/var/lib/cni-driver",
    };
    expect(kubeSettingsFrom(base, {})).to.equal(undefined);
    expect(
      kubeSettingsFrom({ ...base, kubeconfig: "/k" }, { NODE_NAME: "n1" })?.nodeName,
      "NODE_NAME",
    ).to.equal("n1");
    expect(
      kubeSettingsFrom({ ...base, kubeconfig: "/k", nodeName: "n2" }, { NODE_NAME: "n1" })
        ?.nodeName,
    ).to.equal("n2");
    expect(() => kubeSettingsFrom({ ...base, configMap: "kube-system/c" }, {})).to.throw(
      "--configmap needs the Kubernetes API",
    );
  });

  it("words the Event with the step, the CNI error and its code", () => {
    expect(
      setUpFailedMessage({
        pod: { namespace: "default", name: "p" },
        ifName: "eth0",
        containerId: "c1",
        step: "running the plugin chain",
        code: 11,
        message: 'plugin type="host-local" (network "n") failed (add): no IP addresses available',
      }),
    ).to.equal(
      'SetUpPod of eth0 failed while running the plugin chain: plugin type="host-local" (network "n") failed (add): no IP addresses available (CNI error 11)',
    );
    expect(
      setUpFailedMessage({
        pod: { namespace: "d", name: "p" },
        ifName: "eth0",
        containerId: "c",
        step: "s",
        code: 1,
        message: "x".repeat(2000),
      }),
    ).to.have.length(1024);
  });

  it("does not load @kubernetes/client-node with the driver's modules (only when an API is configured)", () => {
    // A resolve hook reports every resolution of the client library.
    const hook = `export async function resolve(s, c, next) { if (s.startsWith("@kubernetes/client-node")) process.stdout.write("LOADED " + s + "\\n"); return next(s, c); }`;
    const script = [
      'import { register } from "node:module";',
      `register("data:text/javascript,${encodeURIComponent(hook)}");`,
      `await import(${JSON.stringify(join(REPO_ROOT, "src/driver/lifecycle/daemon.ts"))});`,
      `await import(${JSON.stringify(join(REPO_ROOT, "src/driver/kube/integration.ts"))});`,
      'console.log("IMPORTED");',
      `if (process.argv[1] === "connect") await import(${JSON.stringify(join(REPO_ROOT, "src/driver/kube/api.ts"))}).then((m) => m.connectKubeApi({ kind: "kubeconfig", path: "/nonexistent" }, {}).catch(() => {}));`,
    ].join("\n");
    const env = { ...process.env };
    delete env.NODE_EXTRA_CA_CERTS;
    const run = (arg: string) =>
      spawnSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script, arg], {
        cwd: REPO_ROOT,
        env,
        encoding: "utf8",
      });
    const plain = run("");
    expect(plain.stdout, plain.stderr).to.contain("IMPORTED");
    expect(plain.stdout).to.not.contain("LOADED");
    const connecting = run("connect");
    expect(connecting.stdout, connecting.stderr).to.contain("LOADED @kubernetes/client-node");
  });
});

// ---------------------------------------------------------------------------
// Integration: a real driver, the fake API server
// ---------------------------------------------------------------------------

/**
 * A TCP gate in front of the fake API server: open (forwards), down (refuses
 * connections, as a dead server), or blackhole (accepts and never answers, as a
 * hung one). The port stays the same, so the driver's kubeconfig stays valid.
 */
class TcpGate {
  port = 0;
  private server: net.Server | undefined;
  private readonly sockets = new Set<net.Socket>();
  private mode: "open" | "blackhole" = "open";

  constructor(private readonly targetPort: number) {}

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  async open(mode: "open" | "blackhole" = "open"): Promise<void> {
    this.cut();
    this.mode = mode;
    if (this.server) return;
    const server = net.createServer((client) => {
      this.sockets.add(client);
      client.on("close", () => this.sockets.delete(client));
      client.on("error", () => {});
      if (this.mode === "blackhole") return;
      const upstream = net.connect(this.targetPort, "127.0.0.1");
      this.sockets.add(upstream);
      upstream.on("close", () => {
        this.sockets.delete(upstream);
        client.destroy();
      });
      upstream.on("error", () => client.destroy());
      client.on("close", () => upstream.destroy());
      client.pipe(upstream).pipe(client);
    });
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(this.port, "127.0.0.1", () => resolve());
    });
    this.port = (server.address() as net.AddressInfo).port;
    this.server = server;
  }

  /** Refuses connections and cuts the open ones. */
  async down(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    this.cut();
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  private cut(): void {
    for (const s of this.sockets) s.destroy();
    this.sockets.clear();
  }
}

const NS = "default";

interface KubeTestEnv {
  server: FakeKubeApiServer;
  gate: TcpGate;
  kubeconfig: string;
}

async function startKubeEnv(h: DriverHarness): Promise<KubeTestEnv> {
  const server = await startFakeKubeApiServer();
  const gate = new TcpGate(Number(new URL(server.url).port));
  await gate.open();
  const kubeconfig = join(h.root, "kubeconfig");
  writeFileSync(kubeconfig, server.kubeconfig().replace(server.url, gate.url), { mode: 0o600 });
  return { server, gate, kubeconfig };
}

function annotationOf(server: FakeKubeApiServer, name: string): string | undefined {
  return server.get("pods", NS, name)?.metadata?.annotations?.[ANNOTATION_MAC_ADDRESS];
}

function podMac(res: PodResponse): string {
  const mac = res.result?.interfaces.find((i) => i.name === "eth0" && i.sandbox)?.mac;
  expect(mac, "the pod interface's MAC in the result").to.be.a("string");
  return (mac as string).toLowerCase();
}

function patchesOf(server: FakeKubeApiServer, podName: string): number[] {
  return server.requests
    .filter((r) => r.method === "PATCH" && r.path === `/api/v1/namespaces/${NS}/pods/${podName}`)
    .map((r) => r.status);
}

describe("cni-driver serve with the Kubernetes API: Node, annotations, Events, outages (integration)", function () {
  this.timeout(60_000);
  let h: DriverHarness;
  let env: KubeTestEnv;
  let nodeName: string;

  before(async function () {
    requireRoot(this);
    requireReferencePlugins(this, "host-local");
    h = new DriverHarness({ subnetOctet: 61 });
    nodeName = `node-${h.tag}`;
    env = await startKubeEnv(h);
    // One network from the Node's IPv4 CIDR, and one that needs its IPv6 CIDR:
    // the config loads only once both came from the Node.
    await h.writeConfig({
      "pod-network.conflist": JSON.stringify(h.conflist()),
      "v6-network.conflist": JSON.stringify({
        cniVersion: "1.0.0",
        name: "v6-network",
        plugins: [
          {
            type: "midonet",
            datapath: "kernel",
            bridge: `${h.bridge}6`,
            ipam: {
              type: "host-local",
              ranges: [[{ subnet: "usePodCidrIPv6" }]],
              dataDir: h.dataDir,
            },
          },
        ],
      }),
      "driver.json": JSON.stringify({ defaultNetwork: h.network }),
    });
    // The harness passes --pod-cidr; an empty one after it (the last wins) means "not given".
    h.opts.extraFlags = ["--pod-cidr", "", "--kubeconfig", env.kubeconfig, "--node-name", nodeName];
    await h.start({ waitReady: false });
  });

  after(async () => {
    await h?.cleanup();
    await env?.gate.down();
    await env?.server.close();
  });

  it("is not ready while the Node does not exist or has no pod CIDR, and says why", async () => {
    const reasons = async () =>
      (await h.client.cniStatus({}, { timeoutMs: 1000 })).not_ready_reasons;
    const missing = await until(
      async () =>
        (await reasons()).find(
          (r) =>
            r.startsWith(`node ${nodeName} has no pod CIDR yet`) && r.includes("does not exist"),
        ),
      "the reason naming the missing Node",
      15_000,
    );
    expect(missing).to.equal(`node ${nodeName} has no pod CIDR yet (the Node does not exist)`);
    const add = await h.client.setUpPod(h.podRequest("early"));
    expect(add.error?.code).to.equal(11);
    // The config cannot load without the CIDR either; that is the reason the ADD gives.
    expect(add.error?.msg).to.contain("the node has no IPv4 pod CIDR yet");

    env.server.put("nodes", { metadata: { name: nodeName }, spec: {} });
    const plain = await until(
      async () => (await reasons()).find((r) => r === `node ${nodeName} has no pod CIDR yet`),
      "the plain reason once the Node exists",
    );
    expect(plain).to.be.a("string");
    const status = await h.client.cniStatus();
    expect(status.ready).to.equal(false);
    expect(status.error?.code).to.equal(50);
  });

  it("fills usePodCidr and usePodCidrIPv6 from the Node's spec.podCIDRs and becomes ready", async () => {
    const v6 = `fd00:${h.tag.slice(0, 4)}::/64`;
    const t0 = performance.now();
    env.server.put("nodes", {
      metadata: { name: nodeName },
      spec: { podCIDR: h.subnet, podCIDRs: [h.subnet, v6] },
    });
    const ready = await until(
      async () => {
        const s = await h.client.cniStatus({}, { timeoutMs: 1000 });
        return s.ready ? s : undefined;
      },
      "readiness",
      30_000,
    );
    // Shown, not asserted: how fast is for bench/; a test asserts that it happens.
    const ms = performance.now() - t0;
    console.log(`      [Node podCIDRs -> driver ready: ${ms.toFixed(1)} ms]`);
    expect(ready.config?.networks).to.have.members([h.network, "v6-network"]);
  });

  let mac1 = "";
  it("annotates the pod with its interface's MAC after ADD, off the answer, and removes it on DEL", async () => {
    env.server.put("pods", { metadata: { name: h.podName(1), namespace: NS }, spec: { nodeName } });
    createNetns(h.netnsName(1));
    const res = await h.client.setUpPod(h.podRequest(1));
    expectNoCniError(res);
    expect(res.result?.ips[0]?.address.startsWith(`10.244.61.`)).to.equal(true);
    mac1 = podMac(res);
    expect(mac1).to.equal(linkIn(h.netnsName(1), "eth0")?.address);
    const t0 = performance.now();
    await until(() => annotationOf(env.server, h.podName(1)) === mac1, "the MAC annotation");
    console.log(
      `      [ADD answer -> annotation in the API: ${(performance.now() - t0).toFixed(1)} ms]`,
    );
    const req = env.server.requests.find(
      (r) => r.method === "PATCH" && r.path.endsWith(`/pods/${h.podName(1)}`),
    );
    expect(req?.contentType).to.equal("application/merge-patch+json");

    expectNoCniError(await h.client.tearDownPod(h.podRequest(1)));
    await until(
      () => annotationOf(env.server, h.podName(1)) === undefined,
      "the annotation removed",
    );
    expect(
      env.server.get("pods", NS, h.podName(1))?.metadata?.annotations ?? {},
    ).to.not.have.property(ANNOTATION_MAC_ADDRESS);
  });

  it("retries the annotation patch on 409 Conflict until it lands", async () => {
    const name = h.podName(2);
    env.server.put("pods", { metadata: { name, namespace: NS }, spec: { nodeName } });
    env.server.injectFault({
      method: "PATCH",
      path: `/api/v1/namespaces/${NS}/pods/${name}`,
      status: 409,
      times: 2,
    });
    createNetns(h.netnsName(2));
    const res = await h.client.setUpPod(h.podRequest(2));
    expectNoCniError(res);
    await until(
      () => annotationOf(env.server, name) === podMac(res),
      "the annotation after two conflicts",
    );
    expect(patchesOf(env.server, name)).to.deep.equal([409, 409, 200]);
    expectNoCniError(await h.client.tearDownPod(h.podRequest(2)));
    await until(() => annotationOf(env.server, name) === undefined, "the annotation removed");
  });

  it("never fails the ADD over the annotation: a pod gone from the API (404) is dropped, not retried; a pod without identity is not patched", async () => {
    createNetns(h.netnsName(3));
    const res = await h.client.setUpPod(h.podRequest(3));
    expectNoCniError(res);
    await until(() => patchesOf(env.server, h.podName(3)).length > 0, "the patch attempt");
    await sleep(400);
    expect(patchesOf(env.server, h.podName(3))).to.deep.equal([404]);
    expectNoCniError(await h.client.tearDownPod(h.podRequest(3)));
    await until(() => patchesOf(env.server, h.podName(3)).length === 2, "the removal's attempt");
    expect(patchesOf(env.server, h.podName(3))).to.deep.equal([404, 404]);

    const before = env.server.requests.filter((r) => r.method === "PATCH").length;
    createNetns(h.netnsName(4));
    const anonymous = await h.client.setUpPod(h.podRequest(4, { pod: null }));
    expectNoCniError(anonymous);
    expectNoCniError(await h.client.tearDownPod(h.podRequest(4, { pod: null })));
    await sleep(300);
    expect(env.server.requests.filter((r) => r.method === "PATCH").length).to.equal(before);
  });

  it("records a Warning Event on the Pod naming the failed step, and counts repeats into it", async () => {
    const name = h.podName(5);
    const pod = env.server.put("pods", { metadata: { name, namespace: NS }, spec: { nodeName } });
    const uid = pod.metadata?.uid as string;
    // No such netns: the built-in plugin fails inside the chain.
    const req = h.podRequest(5, { pod: { namespace: NS, name, uid } });
    const first = await h.client.setUpPod(req);
    expect(first.error).to.not.equal(null);
    const code = first.error?.code as number;
    const events = () =>
      env.server
        .list("events", NS)
        .filter((e) => (e.involvedObject as { name?: string })?.name === name);
    const [event] = await until(() => (events().length > 0 ? events() : undefined), "the Event");
    expect(event).to.deep.include({ reason: EVENT_REASON_SETUP_FAILED, type: "Warning", count: 1 });
    expect(event?.involvedObject).to.deep.include({ kind: "Pod", namespace: NS, name, uid });
    expect(event?.source).to.deep.equal({ component: "cni-driver", host: nodeName });
    const message = event?.message as string;
    expect(message).to.contain("SetUpPod of eth0 failed while running the plugin chain: ");
    expect(message).to.contain('plugin type="midonet"');
    expect(message).to.contain(first.error?.msg as string);
    expect(message).to.contain(`(CNI error ${code})`);

    for (let i = 0; i < 2; i++) expect((await h.client.setUpPod(req)).error?.code).to.equal(code);
    await until(() => events()[0]?.count === 3, "count 3 on the same Event", 5000);
    expect(events()).to.have.length(1);
    expect(
      env.server.requests
        .filter((r) => r.method === "PATCH" && r.path.includes("/events/"))
        .every((r) => r.contentType === "application/merge-patch+json"),
    ).to.equal(true);
  });

  it("answers ADD and DEL at once while the API server is down, and annotates once it is back", async () => {
    const name = h.podName(6);
    env.server.put("pods", { metadata: { name, namespace: NS }, spec: { nodeName } });
    await env.gate.down();
    createNetns(h.netnsName(6));
    let t0 = performance.now();
    // Answered while the API is down: the gate stays shut until ADD and DEL are answered.
    const res = await h.client.setUpPod(h.podRequest(6));
    const addMs = performance.now() - t0;
    expectNoCniError(res);
    expect(annotationOf(env.server, name), "no annotation before the API is back").to.equal(
      undefined,
    );
    const status = await h.client.cniStatus();
    expect(status.ready, JSON.stringify(status.not_ready_reasons)).to.equal(true);
    await sleep(300);
    await env.gate.open();
    await until(
      () => annotationOf(env.server, name) === podMac(res),
      "the annotation after the outage",
      15_000,
    );

    await env.gate.down();
    t0 = performance.now();
    expectNoCniError(await h.client.tearDownPod(h.podRequest(6)));
    const delMs = performance.now() - t0;
    console.log(`      [API down: ADD ${addMs.toFixed(1)} ms, DEL ${delMs.toFixed(1)} ms]`);
    await env.gate.open();
    await until(
      () => annotationOf(env.server, name) === undefined,
      "the removal after the outage",
      15_000,
    );
  });

  it("answers ADD and DEL at once while the API server accepts connections and never answers", async () => {
    const name = h.podName(7);
    env.server.put("pods", { metadata: { name, namespace: NS }, spec: { nodeName } });
    await env.gate.open("blackhole");
    createNetns(h.netnsName(7));
    let t0 = performance.now();
    const res = await h.client.setUpPod(h.podRequest(7));
    const addMs = performance.now() - t0;
    expectNoCniError(res);
    t0 = performance.now();
    expectNoCniError(await h.client.tearDownPod(h.podRequest(7)));
    const delMs = performance.now() - t0;
    console.log(`      [API hung: ADD ${addMs.toFixed(1)} ms, DEL ${delMs.toFixed(1)} ms]`);
    expect((await h.client.cniStatus()).ready).to.equal(true);
    await env.gate.open();
    expect(h.leases()).to.deep.equal([]);
  });

  it("after a restart, a late DEL of a pod's old sandbox leaves the newer sandbox's annotation; the newer one's DEL removes it", async () => {
    const name = h.podName(8);
    env.server.put("pods", { metadata: { name, namespace: NS }, spec: { nodeName } });
    // Two sandboxes of one pod: A dies, B is set up before A's DEL arrives. The
    // newer one's cache file sorts last: only the files' mtimes say it is newer.
    const sandbox = (s: "a" | "b") =>
      h.podRequest(`8${s}`, { pod: { namespace: NS, name, uid: "" } });
    createNetns(h.netnsName("8a"));
    const a = await h.client.setUpPod(sandbox("a"));
    expectNoCniError(a);
    await until(() => annotationOf(env.server, name) === podMac(a), "sandbox A's MAC");
    // A's netns goes, and its veth with it; the host end's name is the pod's, B's to take.
    const hostEnd = a.result?.interfaces.find((i) => !i.sandbox && i.name.startsWith("mido"));
    expect(hostEnd, "the host end in A's result").to.not.equal(undefined);
    deleteNetns(h.netnsName("8a"));
    deleteHostLink(hostEnd?.name as string);
    await until(() => !listHostLinks("mido").includes(hostEnd?.name as string), "A's veth gone");
    createNetns(h.netnsName("8b"));
    const b = await h.client.setUpPod(sandbox("b"));
    expectNoCniError(b);
    expect(podMac(b)).to.not.equal(podMac(a));
    await until(() => annotationOf(env.server, name) === podMac(b), "sandbox B's MAC");

    expect(await h.stop()).to.equal(0);
    const patchesBefore = patchesOf(env.server, name).length;
    await h.start();
    await sleep(300);
    expect(patchesOf(env.server, name).length, "the restart alone patches nothing").to.equal(
      patchesBefore,
    );

    expectNoCniError(await h.client.tearDownPod(sandbox("a")));
    await sleep(400);
    expect(annotationOf(env.server, name), "after A's DEL").to.equal(podMac(b));
    expect(patchesOf(env.server, name).length, "A's DEL patches nothing").to.equal(patchesBefore);
    expect(linkIn(h.netnsName("8b"), "eth0")?.address, "B's interface").to.equal(podMac(b));

    expectNoCniError(await h.client.tearDownPod(sandbox("b")));
    await until(() => annotationOf(env.server, name) === undefined, "the annotation removed");
    expect(h.leases()).to.deep.equal([]);
  });

  it("an attachment GC tears down takes its pod's annotation with it", async () => {
    const name = h.podName(9);
    env.server.put("pods", { metadata: { name, namespace: NS }, spec: { nodeName } });
    createNetns(h.netnsName(9));
    const res = await h.client.setUpPod(h.podRequest(9, { pod: { namespace: NS, name, uid: "" } }));
    expectNoCniError(res);
    await until(() => annotationOf(env.server, name) === podMac(res), "the MAC annotation");
    // Every other cached attachment of the suite stays valid.
    const valid = h
      .cacheFiles()
      .map((f) => new RegExp(`^${h.network}-(.+)-(eth\\d+)$`).exec(f))
      .filter((m): m is RegExpExecArray => m !== null && m[1] !== h.containerId(9))
      .map((m) => ({ container_id: m[1] as string, ifname: m[2] as string }));
    const gc = await h.client.garbageCollect({
      networks: [{ network: h.network, valid_attachments: valid }],
    });
    expect(gc.error).to.equal(null);
    expect(gc.removed_attachments).to.equal(1);
    await until(() => annotationOf(env.server, name) === undefined, "the annotation removed");
    deleteNetns(h.netnsName(9));
  });

  it("a DEL the shim queued while the driver was down, replayed at start, takes the pod's annotation with it", async () => {
    const name = h.podName(10);
    env.server.put("pods", { metadata: { name, namespace: NS }, spec: { nodeName } });
    createNetns(h.netnsName(10));
    const res = await h.client.setUpPod(
      h.podRequest(10, { pod: { namespace: NS, name, uid: "" } }),
    );
    expectNoCniError(res);
    await until(() => annotationOf(env.server, name) === podMac(res), "the MAC annotation");

    expect(await h.stop()).to.equal(0);
    queueDeletion(h.stateDir, {
      kind: "cniDriverDeletionV1",
      network: h.network,
      containerId: h.containerId(10),
      ifName: "eth0",
      netns: h.netnsPath(10),
      cniArgs: [
        ["K8S_POD_NAMESPACE", NS],
        ["K8S_POD_NAME", name],
      ],
      cniVersion: "1.0.0",
      queuedAtUnixMs: Date.now(),
    });
    await h.start();
    await until(() => annotationOf(env.server, name) === undefined, "the annotation removed");
    expect(h.cacheFiles().filter((f) => f.includes(h.containerId(10)))).to.deep.equal([]);
    deleteNetns(h.netnsName(10));
  });

  it("restarted while the API is down: after 5 s it takes up the pod CIDRs the last run kept, and serves ADD", async () => {
    expect(await h.stop()).to.equal(0);
    await env.gate.down();
    try {
      const t0 = performance.now();
      await h.start({ waitReady: false });
      const early = await h.client.cniStatus();
      expect(early.ready, "before the grace").to.equal(false);
      await h.waitReady(50_000);
      // Not before the grace (5 s): it waited for the API first.
      expect(performance.now() - t0, "ms until ready").to.be.at.least(4000);
      expect(h.logs).to.contain("using the ones kept from the last run");
      createNetns(h.netnsName(11));
      const res = await h.client.setUpPod(h.podRequest(11));
      expectNoCniError(res);
      expect(res.result?.ips[0]?.address.startsWith(h.subnet.replace(/0\/24$/, ""))).to.equal(true);
      expectNoCniError(await h.client.tearDownPod(h.podRequest(11)));
    } finally {
      await env.gate.open();
      deleteNetns(h.netnsName(11));
    }
  });
});

describe("cni-driver serve with --configmap: edits through the API (integration)", function () {
  this.timeout(60_000);
  let h: DriverHarness;
  let env: KubeTestEnv;
  let core: CoreV1Api;
  const cmName = "cni-driver-config";
  const mergePatch = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);
  const data = (mtu: number) => ({
    "pod-network.conflist": JSON.stringify(h.conflist({ mtu }), null, 2),
  });
  const hashOf = (d: Record<string, string>) =>
    contentHash(new Map(Object.entries(d).map(([k, v]) => [k, Buffer.from(v)])));
  const copyDir = () => join(h.stateDir, CONFIGMAP_COPY_DIR);

  async function waitConfig(
    want: { hash: string; source: string },
    ms = 5000,
  ): Promise<{ status: CniStatusResponse; elapsedMs: number }> {
    const t0 = performance.now();
    const status = await until(
      async () => {
        const s = await h.client.cniStatus({}, { timeoutMs: 1000 });
        return s.config?.content_hash === want.hash && s.config?.source === want.source
          ? s
          : undefined;
      },
      `config ${want.hash.slice(0, 8)} from ${want.source}`,
      ms,
    );
    return { status, elapsedMs: performance.now() - t0 };
  }

  async function mtuOfNextPod(i: number): Promise<number | undefined> {
    createNetns(h.netnsName(i));
    expectNoCniError(await h.client.setUpPod(h.podRequest(i)));
    const mtu = linkIn(h.netnsName(i), "eth0")?.mtu;
    expectNoCniError(await h.client.tearDownPod(h.podRequest(i)));
    return mtu;
  }

  before(async function () {
    requireRoot(this);
    requireReferencePlugins(this, "host-local");
    h = new DriverHarness({ subnetOctet: 62 });
    env = await startKubeEnv(h);
    const kc = new KubeConfig();
    kc.loadFromString(env.server.kubeconfig());
    core = kc.makeApiClient(CoreV1Api);
    await h.writeDefaultConfig({ mtu: 1500 });
    env.server.put("configmaps", { metadata: { name: cmName, namespace: NS }, data: data(1500) });
  });

  after(async () => {
    await h?.cleanup();
    await env?.gate.down();
    await env?.server.close();
  });

  it("follows the API copy once synced (same content as the mount)", async () => {
    h.opts.extraFlags = ["--kubeconfig", env.kubeconfig, "--configmap", `${NS}/${cmName}`];
    await h.start();
    await waitConfig({ hash: hashOf(data(1500)), source: copyDir() }, 10_000);
  });

  it("takes an edit through the API for the next pod; the mount is untouched", async () => {
    const t0 = performance.now();
    await core.patchNamespacedConfigMap(
      { name: cmName, namespace: NS, body: { data: data(1400) } },
      mergePatch,
    );
    const { elapsedMs } = await waitConfig({ hash: hashOf(data(1400)), source: copyDir() }, 30_000);
    const total = performance.now() - t0;
    console.log(
      `      [ConfigMap edit through the API -> config in use: ${total.toFixed(1)} ms (polled ${elapsedMs.toFixed(1)} ms after the PATCH answered)]`,
    );
    expect(await mtuOfNextPod(1)).to.equal(1400);
    expect(readFileSync(join(h.configDir, "pod-network.conflist"), "utf8")).to.equal(
      data(1500)["pod-network.conflist"],
    );
  });

  it("while the API is down, keeps the API copy over a mount catching up to an older version, and follows a mount newer than anything seen", async () => {
    // kubelet's sync catches the mount up to the API copy while the API works ...
    await h.writeDefaultConfig({ mtu: 1400 });
    await sleep(400);
    await env.gate.down();
    // ... then, with the API away, swaps it to an older version (a lagging kubelet
    // cache): a version the driver has seen is never newer, so no rollback.
    await h.writeDefaultConfig({ mtu: 1500 });
    await sleep(600);
    let s = await h.client.cniStatus();
    expect(s.config?.content_hash, "no rollback to a version seen before").to.equal(
      hashOf(data(1400)),
    );
    expect(s.config?.source).to.equal(copyDir());
    // A version never seen: kubelet reached the API when the driver could not.
    await h.writeDefaultConfig({ mtu: 1250 });
    await waitConfig({ hash: hashOf(data(1250)), source: h.configDir }, 3000);
    expect(await mtuOfNextPod(2)).to.equal(1250);

    // Edited again while we could not see it: the API is the truth once it is back.
    env.server.put("configmaps", { metadata: { name: cmName, namespace: NS }, data: data(1350) });
    await env.gate.open();
    const { elapsedMs } = await waitConfig({ hash: hashOf(data(1350)), source: copyDir() }, 20_000);
    console.log(
      `      [API back -> its copy in use again: ${elapsedMs.toFixed(1)} ms (watch restart backoff)]`,
    );
    expect(await mtuOfNextPod(3)).to.equal(1350);
    s = await h.client.cniStatus();
    expect(s.last_config_error).to.equal(null);
  });

  it("falls back to the mounted ConfigMap when the ConfigMap is deleted", async () => {
    await core.deleteNamespacedConfigMap({ name: cmName, namespace: NS });
    await waitConfig({ hash: hashOf(data(1250)), source: h.configDir }, 2000);
    expect(await mtuOfNextPod(4)).to.equal(1250);
    expect(h.leases()).to.deep.equal([]);
  });
});
