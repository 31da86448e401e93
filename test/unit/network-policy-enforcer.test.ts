/**
 * The enforcer's decisions, on a fake API and a datapath that records what
 * it is told: what a pod gets while its labels or the policies are unknown
 * (networkPolicyUnknownPods), that an ADD's rules are written before attach
 * returns, which tracked connections a change cuts, and when it does nothing.
 * The nftables text itself is tested against a real kernel in
 * test/integration/network-policy-nft.test.ts.
 */
import { expect } from "chai";
import pino from "pino";
import type {
  FollowedCollection,
  KubeApi,
  KubeObjectView,
  ResourceEventHandlers,
} from "../../src/driver/kube/api.js";
import type { PolicyDatapath } from "../../src/driver/network-policy/datapath.js";
import {
  type LocalPod,
  localPodsFromCache,
  NetworkPolicyEnforcer,
} from "../../src/driver/network-policy/enforcer.js";
import { type ElementChange, scriptOf } from "../../src/driver/network-policy/ruleset-commands.js";
import type { Flow, FlowGroup } from "../../src/plumbing/conntrack.js";
import { driverConfig } from "../support/driver-config.js";

const logger = pino({ level: "silent" });

const config = driverConfig;

/** A KubeApi whose collections are fed by the test (through the watch's transform, as the real one); lists "succeed" when the test says so. */
class FakeApi {
  readonly handlers = new Map<FollowedCollection, ResourceEventHandlers>();
  private readonly transforms = new Map<
    FollowedCollection,
    (o: KubeObjectView) => KubeObjectView
  >();
  pods = new Map<string, KubeObjectView>();
  readFails = false;
  readonly server = "fake";

  watchEach(
    resource: FollowedCollection,
    handlers: ResourceEventHandlers,
    transform: (o: KubeObjectView) => KubeObjectView = (o) => o,
  ) {
    this.handlers.set(resource, handlers);
    this.transforms.set(resource, transform);
    return { synced: false, lastError: undefined, stop: async () => {} };
  }
  async readPod(ref: { namespace: string; name: string }) {
    if (this.readFails) throw new Error("connect ECONNREFUSED");
    return this.pods.get(`${ref.namespace}/${ref.name}`);
  }
  /** Delivers objects and the first list of a collection. */
  list(resource: FollowedCollection, objs: KubeObjectView[]) {
    const h = this.handlers.get(resource);
    if (!h) throw new Error(`no watch of ${resource}`);
    for (const o of objs) h.upsert(this.transforms.get(resource)!(o));
    h.onSynced?.();
  }
  upsert(resource: FollowedCollection, o: KubeObjectView) {
    this.handlers.get(resource)?.upsert(this.transforms.get(resource)!(o));
  }
  remove(resource: FollowedCollection, o: KubeObjectView) {
    this.handlers.get(resource)?.remove(o);
  }
}

class RecordingDatapath implements PolicyDatapath {
  scripts: string[] = [];
  /** Transactions to refuse before accepting again. */
  failures = 0;
  flows: Flow[] = [];
  deleted: FlowGroup[] = [];
  tableDeleted = 0;
  async applyScript(script: string) {
    if (this.failures > 0) {
      this.failures--;
      throw new Error("nft: Could not process rule: Operation not permitted");
    }
    this.scripts.push(script);
  }
  /** Element-only changes, recorded as the text they stand for. */
  elementBatches = 0;
  async applyElements(changes: readonly ElementChange[]) {
    await this.applyScript(scriptOf(changes));
    this.elementBatches++;
    return true;
  }
  async listFlows() {
    return this.flows;
  }
  async deleteFlows(g: FlowGroup) {
    this.deleted.push(g);
  }
  async nodeAddresses() {
    return ["192.0.2.1", "10.244.1.1"];
  }
  async deleteTable() {
    this.tableDeleted++;
  }
  get all() {
    return this.scripts.join("\n");
  }
}

const ns = (name: string, labels: Record<string, string> = {}) => ({
  metadata: {
    name,
    resourceVersion: "1",
    labels: { "kubernetes.io/metadata.name": name, ...labels },
  },
});
const pod = (namespace: string, name: string, ip: string, labels: Record<string, string> = {}) => ({
  metadata: { namespace, name, resourceVersion: "1", labels },
  spec: { containers: [{ ports: [{ name: "http", containerPort: 80 }] }] },
  status: { podIPs: [{ ip }] },
});
const denyIngress = (namespace: string) => ({
  metadata: { namespace, name: "deny", resourceVersion: "1" },
  spec: { podSelector: {}, policyTypes: ["Ingress"] },
});

const X_A: LocalPod = { hostIf: "midoxa", namespace: "x", name: "a", ips: ["10.244.1.2"] };

/** Waits until the datapath has seen `n` scripts (bounded). */
async function scripts(dp: RecordingDatapath, n: number): Promise<void> {
  for (let i = 0; i < 200 && dp.scripts.length < n; i++) await new Promise((r) => setTimeout(r, 5));
  expect(dp.scripts.length, "scripts applied").to.be.at.least(n);
}

describe("network policy enforcer", () => {
  let api: FakeApi;
  let dp: RecordingDatapath;
  let enforcer: NetworkPolicyEnforcer;

  const start = async (settings: Record<string, unknown> = {}, datapath = "kernel") => {
    enforcer = new NetworkPolicyEnforcer({
      logger,
      api: Promise.resolve(api as unknown as KubeApi),
      datapath: dp,
      podReadTimeoutMs: 50,
      retryBackoff: { baseMs: 5, maxMs: 20 },
    });
    await enforcer.apply(config(settings, datapath));
  };

  beforeEach(() => {
    api = new FakeApi();
    dp = new RecordingDatapath();
  });
  afterEach(async () => {
    await enforcer?.stop();
  });

  it("before the policies are known, a new pod is denied (the default) and its rules are written before attach returns", async () => {
    await start();
    await enforcer.attach(X_A);
    expect(dp.scripts).to.have.length(1);
    expect(dp.all).to.match(/map ingress4 \{[^}]*10\.244\.1\.2 : jump deny/);
    expect(dp.all).to.match(/map egress4 \{[^}]*10\.244\.1\.2 : jump deny/);
  });

  it('with networkPolicyUnknownPods "allow", the same pod is open', async () => {
    await start({ networkPolicyUnknownPods: "allow" });
    await enforcer.attach(X_A);
    expect(dp.all).not.to.include("10.244.1.2 : jump");
  });

  it("until the policies are listed and no pod is set up, the last run's table is left alone", async () => {
    await start();
    enforcer.seed([X_A]);
    api.list("pods", [pod("x", "a", "10.244.1.2")]);
    await new Promise((r) => setTimeout(r, 30));
    expect(dp.scripts).to.have.length(0);
    api.list("namespaces", [ns("x")]);
    api.list("networkpolicies", []);
    await scripts(dp, 1);
    expect(dp.scripts[0]).to.match(/^table inet cni-driver-policy\ndelete table/);
    expect(dp.all).not.to.include("jump");
  });

  it("a pod the watch has not delivered is read with a GET; a default deny in its namespace isolates it", async () => {
    await start();
    api.list("namespaces", [ns("x")]);
    api.list("networkpolicies", [denyIngress("x")]);
    api.list("pods", []);
    await scripts(dp, 1);
    api.pods.set("x/a", pod("x", "a", ""));
    await enforcer.attach(X_A);
    expect(dp.all).to.match(/10\.244\.1\.2 : jump in-[0-9a-f]{16}/);
    expect(dp.all).to.match(
      /chain in-[0-9a-f]{16} \{\s*drop\s*\}|add rule inet cni-driver-policy in-[0-9a-f]{16} drop/,
    );
  });

  it("a pod whose labels cannot be read is denied only where a policy exists in its namespace", async () => {
    await start();
    api.readFails = true;
    api.list("namespaces", [ns("x"), ns("y")]);
    api.list("networkpolicies", [denyIngress("x")]);
    api.list("pods", []);
    await scripts(dp, 1);
    await enforcer.attach(X_A);
    expect(dp.all).to.match(/10\.244\.1\.2 : jump deny/);
    await enforcer.attach({ hostIf: "midoya", namespace: "y", name: "a", ips: ["10.244.1.3"] });
    expect(dp.all).not.to.include("10.244.1.3 : jump");
    // Once the watch delivers the pod, its real policy replaces the deny.
    const before = dp.scripts.length;
    api.upsert("pods", pod("x", "a", "10.244.1.2"));
    await scripts(dp, before + 1);
    expect(dp.scripts.at(-1)).to.match(/10\.244\.1\.2 : jump in-[0-9a-f]{16}/);
  });

  it("a policy that denies cuts the live connections it no longer allows, never the node's own", async () => {
    await start();
    api.list("namespaces", [ns("x"), ns("y")]);
    api.list("networkpolicies", []);
    api.list("pods", [pod("x", "a", "10.244.1.2"), pod("y", "b", "10.244.2.5", { app: "b" })]);
    await enforcer.attach(X_A);
    const flow = (
      src: string,
      dst: string,
      dport: number,
      state = "ESTABLISHED",
      sport = 40000,
    ) => ({
      protocol: "tcp" as const,
      state,
      original: { src, dst, sport, dport },
      reply: { src: dst, dst: src, sport: dport, dport: sport },
    });
    dp.flows = [
      flow("10.244.2.5", "10.244.1.2", 80),
      flow("10.244.2.5", "10.244.1.2", 81),
      flow("10.244.2.5", "10.244.1.2", 81, "ESTABLISHED", 40001),
      flow("10.244.2.5", "10.244.1.2", 82, "TIME_WAIT"),
      flow("192.0.2.1", "10.244.1.2", 81),
      flow("10.244.1.2", "10.244.2.5", 80),
    ];
    const before = dp.scripts.length;
    api.upsert("networkpolicies", {
      metadata: { namespace: "x", name: "only-80-from-y", resourceVersion: "2" },
      spec: {
        podSelector: {},
        ingress: [
          {
            from: [{ namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "y" } } }],
            ports: [{ port: 80 }],
          },
        ],
      },
    });
    await scripts(dp, before + 1);
    for (let i = 0; i < 100 && dp.deleted.length === 0; i++)
      await new Promise((r) => setTimeout(r, 5));
    // Both live flows to 81 in one command; the closing one to 82 and the node's are left.
    expect(dp.deleted).to.deep.equal([
      { protocol: "tcp", src: "10.244.2.5", dst: "10.244.1.2", dport: 81 },
    ]);
  });

  it("a policy that cannot be applied is logged and still isolates what it selects", async () => {
    await start();
    api.list("namespaces", [ns("x")]);
    api.list("pods", [pod("x", "a", "10.244.1.2")]);
    api.list("networkpolicies", [
      {
        metadata: { namespace: "x", name: "typo", resourceVersion: "1" },
        spec: { podSelector: {}, ingress: [{ from: [{ ipBlock: { cidr: "10.0.0.0/33" } }] }] },
      },
    ]);
    await enforcer.attach(X_A);
    expect(dp.all).to.match(/10\.244\.1\.2 : jump in-[0-9a-f]{16}/);
  });

  it('"networkPolicy": false and the midonet datapath enforce nothing; switching off removes the table', async () => {
    await start({ networkPolicy: false });
    await enforcer.attach(X_A);
    expect(dp.scripts).to.have.length(0);
    expect(api.handlers.size).to.equal(0);
    await enforcer.stop();
    await start({}, "midonet");
    await enforcer.attach(X_A);
    expect(dp.scripts).to.have.length(0);
    await enforcer.stop();
    await start();
    expect(api.handlers.size).to.equal(3);
    await enforcer.apply(config({ networkPolicy: false }));
    expect(dp.tableDeleted).to.equal(1);
  });

  it("a transaction the kernel refuses fails the ADD, and is retried whole until it lands", async () => {
    await start();
    api.list("namespaces", [ns("x")]);
    api.list("networkpolicies", [denyIngress("x")]);
    api.list("pods", [pod("x", "a", "10.244.1.2")]);
    dp.failures = 2;
    let refused: unknown;
    await enforcer.attach(X_A).catch((e: unknown) => {
      refused = e;
    });
    expect(String(refused)).to.include("Operation not permitted");
    // The retries (backoff 5–20 ms) write the table whole: what the kernel has is not known.
    await scripts(dp, 1);
    expect(dp.scripts.at(-1)).to.match(/^table inet cni-driver-policy\ndelete table/);
    expect(dp.scripts.at(-1)).to.match(/10\.244\.1\.2 : jump in-[0-9a-f]{16}/);
  });

  it("reads this node's pods from the result cache: host end, addresses, pod identity", () => {
    const pods = localPodsFromCache([
      {
        cniArgs: [
          ["K8S_POD_NAMESPACE", "x"],
          ["K8S_POD_NAME", "a"],
        ],
        result: {
          cniVersion: "1.0.0",
          interfaces: [
            { name: "midoabc", mac: "aa:bb:cc:dd:ee:ff" },
            { name: "eth0", sandbox: "/run/netns/p" },
          ],
          ips: [{ address: "10.244.1.2/24" }, { address: "fd00::2/64" }],
        },
      },
      { result: { cniVersion: "1.0.0", interfaces: [{ name: "veth0" }], ips: [] } },
      { result: { not: "a result" } },
    ]);
    expect(pods).to.deep.equal([
      { hostIf: "midoabc", ips: ["10.244.1.2", "fd00::2"], namespace: "x", name: "a" },
    ]);
  });
});
