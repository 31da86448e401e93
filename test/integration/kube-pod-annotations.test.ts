/**
 * The pod MAC annotation against the fake kube-apiserver, two nodes' drivers at
 * once: a pod recreated under the same name on another node (a StatefulSet's
 * pod after its node failed) must keep the annotation its new node set, whatever
 * the old node's late DEL or retried ADD of the old sandbox says. The patches
 * carry the pod's uid as a precondition, which the API server enforces.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect } from "chai";
import pino from "pino";
import { connectKubeApi, isUidMismatch, type KubeApi } from "../../src/driver/kube/api.js";
import { podObserver } from "../../src/driver/kube/integration.js";
import { PodAnnotationQueue } from "../../src/driver/kube/pod-annotations.js";
import { PodEventRecorder } from "../../src/driver/kube/pod-events.js";
import type { PodNetworkObserver } from "../../src/driver/rpc/service.js";
import { ANNOTATION_MAC_ADDRESS } from "../../src/midonet/node-contract.js";
import { type FakeKubeApiServer, startFakeKubeApiServer } from "../support/fake-kube-apiserver.js";

const NS = "default";

function result(mac: string) {
  return {
    cniVersion: "1.0.0",
    interfaces: [{ name: "eth0", mac, sandbox: "/var/run/netns/x" }],
    ips: [],
  };
}

describe("pod MAC annotation across nodes (fake kube-apiserver)", function () {
  this.timeout(20_000);
  let server: FakeKubeApiServer;
  let dir: string;
  const apis: KubeApi[] = [];

  beforeEach(async () => {
    server = await startFakeKubeApiServer();
    dir = mkdtempSync(join(tmpdir(), "kube-pod-annotations-"));
    server.kubeconfig(join(dir, "kubeconfig"));
  });

  afterEach(async () => {
    for (const api of apis.splice(0)) await api.close();
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const logger = pino({ level: "silent" });

  async function connect(): Promise<KubeApi> {
    const api = await connectKubeApi(
      { kind: "kubeconfig", path: join(dir, "kubeconfig") },
      { logger },
    );
    apis.push(api);
    return api;
  }

  /** One node's driver side: its annotation queue and the observer the service calls. */
  async function nodeDriver(): Promise<{
    queue: PodAnnotationQueue;
    observer: PodNetworkObserver;
  }> {
    const api = Promise.resolve(await connect());
    const queue = new PodAnnotationQueue({ api, logger, backoff: { baseMs: 10, maxMs: 50 } });
    return { queue, observer: podObserver(queue, new PodEventRecorder({ api, logger })) };
  }

  const pod = (node: string) =>
    server.put("pods", { metadata: { name: "web-0", namespace: NS }, spec: { nodeName: node } });
  const annotation = () =>
    server.get("pods", NS, "web-0")?.metadata?.annotations?.[ANNOTATION_MAC_ADDRESS];
  const attachment = (uid: string, containerId: string) => ({
    pod: { namespace: NS, name: "web-0", uid },
    containerId,
    ifName: "eth0",
    network: "pod-network",
  });

  it("the API server refuses a patch whose uid is not the pod's (409), and the driver takes it for a replaced pod", async () => {
    const uid = pod("node-1").metadata?.uid as string;
    const api = await connect();
    const err = await api
      .patchPodAnnotations({ namespace: NS, name: "web-0" }, { a: "1" }, `${uid}-not`)
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(isUidMismatch(err), String(err)).to.equal(true);
    expect(server.get("pods", NS, "web-0")?.metadata?.annotations?.a).to.equal(undefined);
    await api.patchPodAnnotations({ namespace: NS, name: "web-0" }, { a: "1" }, uid);
    expect(server.get("pods", NS, "web-0")?.metadata?.annotations?.a).to.equal("1");
  });

  it("a late DEL of the old sandbox on the old node leaves the recreated pod's annotation", async () => {
    const node1 = await nodeDriver();
    const node2 = await nodeDriver();
    const oldUid = pod("node-1").metadata?.uid as string;
    node1.observer.attached(attachment(oldUid, "sandbox-a"), result("0a:00:00:00:00:0a") as never);
    await node1.queue.idle();
    expect(annotation()).to.equal("0a:00:00:00:00:0a");

    // node-1 fails; the pod is force-deleted and recreated on node-2.
    server.remove("pods", NS, "web-0");
    const newUid = pod("node-2").metadata?.uid as string;
    expect(newUid).to.not.equal(oldUid);
    node2.observer.attached(attachment(newUid, "sandbox-b"), result("0a:00:00:00:00:0b") as never);
    await node2.queue.idle();
    expect(annotation()).to.equal("0a:00:00:00:00:0b");

    // node-1 is back: kubelet tears down the orphaned sandbox A.
    node1.observer.detached(attachment(oldUid, "sandbox-a"));
    await node1.queue.idle();
    expect(annotation(), "the new pod's annotation").to.equal("0a:00:00:00:00:0b");
  });

  it("an ADD of the old pod whose patch lands only after the pod was recreated does not annotate the new one", async () => {
    const node1 = await nodeDriver();
    const oldUid = pod("node-1").metadata?.uid as string;
    server.remove("pods", NS, "web-0");
    pod("node-2");
    node1.observer.attached(attachment(oldUid, "sandbox-a"), result("0a:00:00:00:00:0a") as never);
    await node1.queue.idle();
    expect(annotation()).to.equal(undefined);
  });
});
