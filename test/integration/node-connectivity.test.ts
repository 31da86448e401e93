/**
 * Node connectivity of the MidoNet datapath: with a network on
 * `"datapath": "midonet"`, the driver sets up the node link (the node IP,
 * network + 2, on the node end; the peer up for the agent; routes to the
 * cluster and service CIDRs via network + 1), enables IPv4 forwarding, keeps
 * the link in step with config swaps, is not ready while it cannot set it up,
 * and annotates the Node with the node end's MAC.
 *
 * The plan (which network, which addresses, which routes) and the driver.json
 * checks are pinned by tables first; then the NodeConnectivity state machine
 * with fake plumbing; then a real driver as root.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect } from "chai";
import pino from "pino";
import { CniError } from "../../src/cni/errors.js";
import { readMidonetConfig } from "../../src/driver/builtin/midonet/config.js";
import { type DriverConfig, loadDriverConfig } from "../../src/driver/config/network-config.js";
import { type KubeApi, KubeApiError } from "../../src/driver/kube/api.js";
import type { AnnotationWriteOutcome } from "../../src/driver/kube/pod-annotations.js";
import {
  NodeConnectivity,
  type NodeConnectivityMetrics,
  type NodeConnectivityOptions,
  type NodeLinkOutcome,
  type NodeLinkPlan,
  nodeLinkPlan,
} from "../../src/driver/midonet-node/node-connectivity.js";
import { ANNOTATION_MAC_ADDRESS } from "../../src/midonet/node-contract.js";
import {
  enableIpv4Forwarding,
  ensureNodeLink,
  type NodeLinkSpec,
} from "../../src/plumbing/node-link.js";
import { DriverHarness, expectNoCniError, sleep } from "../support/driver-harness.js";
import { type FakeKubeApiServer, startFakeKubeApiServer } from "../support/fake-kube-apiserver.js";
import { createNetns, deleteHostLink, uniqueTag } from "../support/netns.js";
import { requireReferencePlugins, requireRoot } from "../support/requirements.js";
import { withTmpfs } from "../support/tmpfs.js";
import { until } from "../support/until.js";

const silent = pino({ level: "silent" });

function conflist(
  name: string,
  plugin: Record<string, unknown>,
  ipam: Record<string, unknown> = { type: "host-local", subnet: "usePodCidr" },
): string {
  return JSON.stringify({
    cniVersion: "1.0.0",
    name,
    plugins: [{ type: "midonet", ipam, ...plugin }],
  });
}

function load(files: Record<string, string>, podCidr = "10.244.3.0/24"): DriverConfig {
  return loadDriverConfig(
    new Map(Object.entries(files).map(([k, v]) => [k, Buffer.from(v)])),
    {
      source: "test",
      podCidrs: { v4: podCidr },
      pluginExists: () => true,
      builtins: new Map([["midonet", (c: Record<string, unknown>) => void readMidonetConfig(c)]]),
    },
    1,
  );
}

// ---------------------------------------------------------------------------
// Pure parts
// ---------------------------------------------------------------------------

describe("node connectivity: the plan and driver.json", () => {
  const MIDO = { datapath: "midonet", mtu: 1450 };
  const plans: [string, Record<string, string>, Partial<NodeLinkPlan> | undefined][] = [
    [
      "no midonet datapath: no plan",
      { "a.conflist": conflist("a", { datapath: "kernel" }) },
      undefined,
    ],
    [
      "node IP network+2 with the pod CIDR's prefix, gateway network+1, both routes",
      {
        "a.conflist": conflist("a", MIDO),
        "driver.json": JSON.stringify({
          clusterCidr: "10.248.0.0/16",
          serviceCidr: "10.96.0.0/12",
        }),
      },
      {
        network: "a",
        nodeIf: "midokube-node",
        peerIf: "midokube-mido",
        mtu: 1450,
        podCidr: "10.244.3.0/24",
        addressCidr: "10.244.3.2/24",
        gateway: "10.244.3.1",
        routes: [
          { dst: "10.248.0.0/16", gw: "10.244.3.1" },
          { dst: "10.96.0.0/12", gw: "10.244.3.1" },
        ],
      },
    ],
    [
      "absent CIDRs: no routes; names from driver.json; MTU default 1500",
      {
        "a.conflist": conflist("a", { datapath: "midonet" }),
        "driver.json": JSON.stringify({ nodeInterface: "n0", nodePeerInterface: "p0" }),
      },
      { nodeIf: "n0", peerIf: "p0", mtu: 1500, routes: [] },
    ],
    [
      "the IPv4 range of a dual-stack ranges list",
      {
        "a.conflist": conflist("a", MIDO, {
          type: "host-local",
          ranges: [[{ subnet: "fd00:1::/64" }], [{ subnet: "usePodCidr" }]],
        }),
      },
      { podCidr: "10.244.3.0/24", addressCidr: "10.244.3.2/24" },
    ],
    [
      "the default network first",
      {
        "a.conflist": conflist("a", MIDO, {
          type: "host-local",
          subnet: "10.1.0.0/16",
          rangeStart: "10.1.0.3",
        }),
        "b.conflist": conflist("b", MIDO),
        "driver.json": JSON.stringify({ defaultNetwork: "b" }),
      },
      { network: "b", addressCidr: "10.244.3.2/24" },
    ],
    [
      "a /16 pod CIDR",
      {
        "a.conflist": conflist("a", MIDO, {
          type: "host-local",
          subnet: "10.7.0.0/16",
          rangeStart: "10.7.0.3",
        }),
      },
      { addressCidr: "10.7.0.2/16", gateway: "10.7.0.1" },
    ],
  ];
  for (const [what, files, want] of plans) {
    it(what, () => {
      const plan = nodeLinkPlan(load(files));
      if (want === undefined) expect(plan).to.equal(undefined);
      else expect(plan).to.deep.include(want);
    });
  }

  it("a usePodCidr range starts after the node link's address (network + 2) unless it says where", () => {
    const cfg = load({ "a.conflist": conflist("a", MIDO) });
    const ipam = cfg.networks.get("a")?.plugins[0]?.raw.ipam as Record<string, unknown>;
    expect(ipam).to.include({ subnet: "10.244.3.0/24", rangeStart: "10.244.3.3" });
    const own = load({
      "a.conflist": conflist("a", MIDO, {
        type: "host-local",
        ranges: [[{ subnet: "usePodCidr", rangeStart: "10.244.3.100" }]],
      }),
    });
    const ownIpam = own.networks.get("a")?.plugins[0]?.raw.ipam as Record<string, unknown>;
    expect((ownIpam.ranges as Array<Array<Record<string, unknown>>>)[0]?.[0]).to.include({
      rangeStart: "10.244.3.100",
    });
    // The kernel datapath has no node link: its ranges are left as written.
    const kernel = load({ "a.conflist": conflist("a", { datapath: "kernel" }) });
    const kIpam = kernel.networks.get("a")?.plugins[0]?.raw.ipam as Record<string, unknown>;
    expect(kIpam).to.not.have.property("rangeStart");
  });

  for (const [what, ipam] of [
    ["a subnet of its own", { type: "host-local", subnet: "10.7.0.0/16" }],
    [
      "a range starting at the node link's address",
      { type: "host-local", ranges: [[{ subnet: "usePodCidr", rangeStart: "10.244.3.2" }]] },
    ],
  ] as const)
    it(`refuses (code 7) ${what}: it would hand the node link's address to a pod`, () => {
      let err: unknown;
      try {
        load({ "a.conflist": conflist("a", MIDO, ipam) });
      } catch (e) {
        err = e;
      }
      expect((err as { code?: number }).code).to.equal(7);
      expect((err as Error).message).to.match(
        /would hand out 10\.(7\.0|244\.3)\.2, the node link's address on the midonet datapath \(network \+ 2\): start it after that \("rangeStart": "10\.(7\.0|244\.3)\.3"\)/,
      );
    });

  it("a midonet network without a host-local IPv4 subnet has no plan to give, and says why", () => {
    const cfg = load({
      "a.conflist": conflist("a", MIDO, { type: "host-local", subnet: "fd00:1::/64" }),
    });
    expect(() => nodeLinkPlan(cfg)).to.throw(
      'network "a" uses the midonet datapath, but its ipam has no host-local IPv4 subnet',
    );
  });

  const bad: [string, Record<string, unknown>, string][] = [
    ["clusterCidr not a CIDR", { clusterCidr: "10.248.0.0" }, "clusterCidr must be an IPv4 CIDR"],
    ["serviceCidr IPv6", { serviceCidr: "fd00::/64" }, "serviceCidr must be an IPv4 CIDR"],
    ["serviceCidr a number", { serviceCidr: 10 }, "serviceCidr must be an IPv4 CIDR"],
    [
      "clusterCidr with host bits",
      { clusterCidr: "10.248.1.0/16" },
      'clusterCidr "10.248.1.0/16" has host bits set',
    ],
    [
      "nodeInterface too long",
      { nodeInterface: "a-very-long-interface" },
      "nodeInterface must be an interface name",
    ],
    [
      "nodePeerInterface with a slash",
      { nodePeerInterface: "a/b" },
      "nodePeerInterface must be an interface name",
    ],
  ];
  for (const [what, settings, message] of bad) {
    it(`driver.json rejected (code 7): ${what}`, () => {
      const files = { "a.conflist": conflist("a", MIDO), "driver.json": JSON.stringify(settings) };
      let err: unknown;
      try {
        load(files);
      } catch (e) {
        err = e;
      }
      expect(err).to.be.instanceOf(CniError);
      expect((err as CniError).code).to.equal(7);
      expect((err as CniError).message).to.satisfy((m: string) =>
        m.startsWith(`driver.json: ${message}`),
      );
    });
  }
});

// ---------------------------------------------------------------------------
// The state machine, with fake plumbing and a fake API
// ---------------------------------------------------------------------------

describe("node connectivity: retries, readiness, the Node annotation", () => {
  const cfg = load({
    "a.conflist": conflist("a", { datapath: "midonet" }),
    "driver.json": JSON.stringify({ serviceCidr: "10.96.0.0/12" }),
  });
  const kernel = load({ "a.conflist": conflist("a", { datapath: "kernel" }) });
  const fast = { baseMs: 5, maxMs: 20 };

  it("fails, is not ready with the reason, retries with backoff, then is ready", async () => {
    const specs: NodeLinkSpec[] = [];
    let failing = true;
    const nc = new NodeConnectivity({
      logger: silent,
      retryBackoff: fast,
      ensure: async (spec) => {
        specs.push(spec);
        if (failing) throw new Error("ip link add: Operation not permitted");
        return "aa:bb:cc:dd:ee:ff";
      },
      enableForwarding: async () => false,
    });
    expect(nc.notReadyReasons(cfg)).to.deep.equal(["node link midokube-node not set up yet"]);
    nc.apply(cfg);
    await until(() => nc.failures >= 2, "two failed attempts");
    expect(nc.notReadyReasons(cfg)).to.deep.equal([
      "node link midokube-node: ip link add: Operation not permitted",
    ]);
    failing = false;
    await until(() => nc.mac, "the retry that works");
    expect(nc.notReadyReasons(cfg)).to.deep.equal([]);
    expect(specs.length).to.equal(nc.failures + 1);
    expect(specs.at(-1)).to.deep.include({
      addressCidr: "10.244.3.2/24",
      routes: [{ dst: "10.96.0.0/12", gw: "10.244.3.1" }],
    });
    // A config without the midonet datapath asks nothing of the node, and the link goes.
    expect(nc.notReadyReasons(kernel)).to.deep.equal([]);
    nc.stop();
  });

  it("removes the link when no network uses the midonet datapath any more", async () => {
    const removed: string[] = [];
    const nc = new NodeConnectivity({
      logger: silent,
      ensure: async () => "aa:bb:cc:dd:ee:01",
      remove: async (n, p) => {
        removed.push(`${n} ${p}`);
        return true;
      },
      enableForwarding: async () => false,
    });
    nc.apply(cfg);
    await until(() => nc.mac, "the link");
    nc.apply(kernel);
    await until(() => removed.length > 0, "the removal");
    expect(removed).to.deep.equal(["midokube-node midokube-mido"]);
    nc.stop();
  });

  it("removes the node link an earlier process left, and the Node annotation naming its MAC, once", async () => {
    const removed: string[] = [];
    const patches: Record<string, string | null>[] = [];
    const api = {
      readNodeAnnotations: async () => ({ [ANNOTATION_MAC_ADDRESS]: "aa:bb:cc:dd:ee:09" }),
      patchNodeAnnotations: async (_n: string, a: Record<string, string | null>) => {
        patches.push(a);
      },
    } as unknown as KubeApi;
    let looked = 0;
    const nc = new NodeConnectivity({
      logger: silent,
      api: Promise.resolve(api),
      nodeName: "node-1",
      ensure: async () => "aa:bb:cc:dd:ee:01",
      remove: async (n, p) => {
        removed.push(`${n} ${p}`);
        return true;
      },
      linkMac: async (name) => {
        looked++;
        return name === "midokube-node" ? "aa:bb:cc:dd:ee:09" : undefined;
      },
      enableForwarding: async () => false,
    });
    try {
      nc.apply(kernel);
      await until(() => patches.length > 0, "the annotation's removal");
      expect(removed).to.deep.equal(["midokube-node midokube-mido"]);
      expect(patches).to.deep.equal([{ [ANNOTATION_MAC_ADDRESS]: null }]);
      nc.apply(kernel);
      await sleep(100);
      expect(looked, "looked once per process").to.equal(1);
      expect(removed).to.have.length(1);
    } finally {
      nc.stop();
    }
  });

  it("renaming the node end removes the old pair, sparing a peer name the new one reuses", async () => {
    const named = (n: string, p: string) =>
      load({
        "a.conflist": conflist("a", { datapath: "midonet" }),
        "driver.json": JSON.stringify({ nodeInterface: n, nodePeerInterface: p }),
      });
    const removed: string[] = [];
    const nc = new NodeConnectivity({
      logger: silent,
      ensure: async (spec) => `aa:bb:cc:dd:ee:0${spec.nodeIf?.slice(-1)}`,
      remove: async (n, p) => {
        removed.push(`${n} ${p}`);
        return true;
      },
      enableForwarding: async () => false,
    });
    nc.apply(named("n0", "p0"));
    await until(() => nc.mac === "aa:bb:cc:dd:ee:00", "n0");
    nc.apply(named("n1", "p0"));
    await until(() => removed.length === 1, "n0's removal");
    nc.apply(named("n2", "p2"));
    await until(() => removed.length === 2, "n1's removal");
    expect(removed).to.deep.equal(["n0 n0", "n1 p0"]);
    nc.stop();
  });

  it("writes the Node's annotation after an API outage longer than its retries, at a later resync", async () => {
    let apiUp = false;
    const patches: Record<string, string | null>[] = [];
    const api = {
      patchNodeAnnotations: async (_name: string, a: Record<string, string | null>) => {
        if (!apiUp) throw new KubeApiError("connect ECONNREFUSED");
        patches.push(a);
      },
      readNodeAnnotations: async () => ({}),
    } as unknown as KubeApi;
    const nc = new NodeConnectivity({
      logger: silent,
      api: Promise.resolve(api),
      nodeName: "node-1",
      resyncMs: 50,
      annotationBackoff: fast,
      annotationAttempts: 3,
      annotationRetryGivenUpAfterMs: 100,
      ensure: async () => "aa:bb:cc:dd:ee:07",
      remove: async () => true,
      enableForwarding: async () => false,
    });
    try {
      nc.apply(cfg);
      await sleep(300); // the three attempts are spent: given up
      expect(patches).to.deep.equal([]);
      apiUp = true; // no config load follows: only the resyncs ask again
      await until(() => patches.length > 0, "the Node annotation after the outage", 3000);
      expect(patches[0]).to.deep.equal({ "midonet.org/mac-address": "aa:bb:cc:dd:ee:07" });
    } finally {
      nc.stop();
    }
  });

  it("patches the Node's annotation with the MAC, retrying a conflict, once per MAC", async () => {
    const patches: [string, Record<string, string | null>][] = [];
    let conflicts = 1;
    const api = {
      patchNodeAnnotations: async (name: string, a: Record<string, string | null>) => {
        patches.push([name, a]);
        if (conflicts-- > 0) throw new KubeApiError("conflict", 409);
      },
    } as unknown as KubeApi;
    let mac = "aa:bb:cc:dd:ee:02";
    const nc = new NodeConnectivity({
      logger: silent,
      api: Promise.resolve(api),
      nodeName: "node-1",
      annotationBackoff: fast,
      ensure: async () => mac,
      enableForwarding: async () => false,
    });
    nc.apply(cfg);
    await until(() => patches.length === 2, "the retried patch");
    await sleep(50);
    nc.apply(cfg);
    await sleep(50);
    expect(patches.length, "the same MAC is not patched again").to.equal(2);
    mac = "aa:bb:cc:dd:ee:03";
    nc.apply(cfg);
    await until(() => patches.length === 3, "the new MAC's patch");
    expect(patches.map(([n, a]) => [n, a[ANNOTATION_MAC_ADDRESS]])).to.deep.equal([
      ["node-1", "aa:bb:cc:dd:ee:02"],
      ["node-1", "aa:bb:cc:dd:ee:02"],
      ["node-1", "aa:bb:cc:dd:ee:03"],
    ]);
    nc.stop();
  });
});

/** What NodeConnectivity reports to the driver's metrics, in order. */
class Recorded implements NodeConnectivityMetrics {
  applied: NodeLinkOutcome[] = [];
  writes: AnnotationWriteOutcome[] = [];
  nodeLinkApplied(o: NodeLinkOutcome): void {
    this.applied.push(o);
  }
  nodeAnnotationWritten(o: AnnotationWriteOutcome): void {
    this.writes.push(o);
  }
}

/** A logger whose lines (level, msg and fields) land in `lines`. */
function capturingLogger(): { logger: pino.Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const logger = pino(
    { level: "debug" },
    { write: (l: string) => lines.push(JSON.parse(l) as Record<string, unknown>) },
  );
  return { logger, lines };
}

/** Messages logged at info or above. */
const loud = (lines: Record<string, unknown>[]) =>
  lines.filter((l) => (l.level as number) >= 30).map((l) => l.msg);

/**
 * A fake API holding one Node's annotation: patches change it (unless `refuse`
 * answers an error for them), and readNodeAnnotations reads it.
 */
function fakeNodeApi(initial?: string): {
  api: KubeApi;
  patches: (string | null | undefined)[];
  node: { annotation?: string };
  refuse: (value: string | null) => KubeApiError | undefined;
} {
  const node: { annotation?: string } = { annotation: initial };
  const patches: (string | null | undefined)[] = [];
  const fake = {
    node,
    patches,
    refuse: (_: string | null): KubeApiError | undefined => undefined,
    api: undefined as unknown as KubeApi,
  };
  fake.api = {
    patchNodeAnnotations: async (_name: string, a: Record<string, string | null>) => {
      const v = a[ANNOTATION_MAC_ADDRESS];
      patches.push(v);
      const err = fake.refuse(v ?? null);
      if (err) throw err;
      if (v === null || v === undefined) delete node.annotation;
      else node.annotation = v;
    },
    readNodeAnnotations: async (): Promise<Record<string, string>> =>
      node.annotation ? { [ANNOTATION_MAC_ADDRESS]: node.annotation } : {},
  } as unknown as KubeApi;
  return fake;
}

describe("node connectivity: periodic resync, annotation removal, metrics", () => {
  const cfg = load({
    "a.conflist": conflist("a", { datapath: "midonet" }),
    "driver.json": JSON.stringify({ serviceCidr: "10.96.0.0/12" }),
  });
  const kernel = load({ "a.conflist": conflist("a", { datapath: "kernel" }) });
  const fast = { baseMs: 5, maxMs: 20 };
  const MAC = "aa:bb:cc:dd:ee:10";
  /** On fake plumbing: the link made with MAC, removed without fuss, no sysctl; `o` overrides. */
  const fakeNc = (o: Partial<NodeConnectivityOptions>): NodeConnectivity =>
    new NodeConnectivity({
      logger: silent,
      ensure: async () => MAC,
      remove: async () => true,
      enableForwarding: async () => false,
      ...o,
    });

  it("re-applies a link in place every resyncMs, quietly: no info line, no second Node patch", async () => {
    const { logger, lines } = capturingLogger();
    const { api, patches } = fakeNodeApi();
    const metrics = new Recorded();
    let calls = 0;
    const nc = fakeNc({
      logger,
      api: Promise.resolve(api),
      nodeName: "node-1",
      resyncMs: 20,
      metrics,
      ensure: async () => {
        calls++;
        return MAC;
      },
    });
    nc.apply(cfg);
    await until(() => calls >= 4, "three resyncs", 2000);
    nc.stop();
    expect(patches).to.deep.equal([MAC]);
    expect(loud(lines)).to.have.members([
      "node link set up",
      "node annotated with the node link's MAC",
    ]);
    expect(metrics.applied.length).to.be.at.least(4);
    expect(metrics.applied.every((o) => o === "ok")).to.equal(true);
    expect(metrics.writes).to.deep.equal(["ok"]);
    // Stopped: no more resyncs.
    const stoppedAt = calls;
    await sleep(80);
    expect(calls).to.equal(stoppedAt);
  });

  it("a resync that had to repair something warns with what it found, counts a repair, and annotates a new MAC", async () => {
    const { logger, lines } = capturingLogger();
    const { api, patches } = fakeNodeApi();
    const metrics = new Recorded();
    let calls = 0;
    const nc = fakeNc({
      logger,
      metrics,
      api: Promise.resolve(api),
      nodeName: "node-1",
      resyncMs: 20,
      annotationBackoff: fast,
      ensure: async (_spec, changes) => {
        calls++;
        if (calls === 3) {
          changes?.push("midokube-node missing: pair created");
          return "aa:bb:cc:dd:ee:11";
        }
        return calls < 3 ? MAC : "aa:bb:cc:dd:ee:11";
      },
    });
    nc.apply(cfg);
    await until(() => patches.length === 2, "the new MAC's patch", 2000);
    await until(() => calls >= 5, "two more resyncs", 2000);
    nc.stop();
    expect(patches).to.deep.equal([MAC, "aa:bb:cc:dd:ee:11"]);
    const restored = lines.filter((l) => l.msg === "node link restored");
    expect(restored).to.have.length(1);
    expect(restored[0]?.level).to.equal(40);
    expect(restored[0]?.changes).to.deep.equal(["midokube-node missing: pair created"]);
    expect(metrics.applied.slice(0, 4)).to.deep.equal(["ok", "ok", "repaired", "ok"]);
  });

  it("never overlaps a resync with a run in progress, and config loads keep it going", async () => {
    let inFlight = 0;
    let most = 0;
    let calls = 0;
    const nc = fakeNc({
      resyncMs: 1,
      ensure: async () => {
        calls++;
        most = Math.max(most, ++inFlight);
        await sleep(15);
        inFlight--;
        return MAC;
      },
    });
    nc.apply(cfg);
    for (let i = 0; i < 5; i++) {
      await sleep(7);
      nc.apply(cfg);
    }
    await until(() => calls >= 8, "resyncs after the loads", 2000);
    nc.stop();
    expect(most).to.equal(1);
  });

  it("resyncMs 0 applies on config loads only", async () => {
    let calls = 0;
    const nc = fakeNc({
      resyncMs: 0,
      ensure: async () => {
        calls++;
        return MAC;
      },
    });
    nc.apply(cfg);
    await until(() => nc.mac, "the link");
    await sleep(100);
    nc.stop();
    expect(calls).to.equal(1);
  });

  it("a failing resync counts a failure, makes the driver not ready, and its retry restores it", async () => {
    const metrics = new Recorded();
    let calls = 0;
    const nc = fakeNc({
      resyncMs: 20,
      // Long enough for the not-ready state to be seen before the retry.
      retryBackoff: { baseMs: 300, maxMs: 300 },
      metrics,
      ensure: async () => {
        calls++;
        if (calls === 2) throw new Error("ip link add: File exists");
        return MAC;
      },
    });
    nc.apply(cfg);
    await until(() => nc.failures === 1, "the failed resync", 2000);
    expect(nc.notReadyReasons(cfg)).to.deep.equal([
      "node link midokube-node: ip link add: File exists",
    ]);
    await until(() => calls >= 4, "the retry and a resync after it", 2000);
    nc.stop();
    expect(nc.notReadyReasons(cfg)).to.deep.equal([]);
    expect(metrics.applied.slice(0, 3)).to.deep.equal(["ok", "failed", "ok"]);
    expect(nc.failures).to.equal(1);
  });

  it("reports no link planned for a config without the midonet datapath", async () => {
    const metrics = new Recorded();
    const nc = fakeNc({ metrics });
    nc.apply(cfg);
    await until(() => metrics.applied.length === 1, "the link");
    nc.apply(kernel);
    await until(() => metrics.applied.length === 2, "the removal");
    nc.stop();
    expect(metrics.applied).to.deep.equal(["ok", "none"]);
  });

  it("removes the Node annotation it set when the link goes, retrying a conflict with backoff", async () => {
    const fake = fakeNodeApi();
    let conflicts = 1;
    fake.refuse = (v) =>
      v === null && conflicts-- > 0 ? new KubeApiError("conflict", 409) : undefined;
    const metrics = new Recorded();
    const nc = fakeNc({
      api: Promise.resolve(fake.api),
      nodeName: "node-1",
      annotationBackoff: fast,
      metrics,
    });
    nc.apply(cfg);
    await until(() => fake.node.annotation === MAC, "the annotation");
    nc.apply(kernel);
    await until(() => fake.patches.length === 3, "the retried removal", 2000);
    await sleep(30);
    nc.stop();
    expect(fake.patches).to.deep.equal([MAC, null, null]);
    expect(fake.node.annotation).to.equal(undefined);
    expect(nc.mac).to.equal(undefined);
    expect(metrics.writes).to.deep.equal(["ok", "retried", "ok"]);
  });

  // This process's own patch never landed (refused): the annotation on the Node
  // is an earlier process's, removed only when it names the link that goes.
  const notOurs: [string, string | undefined, boolean][] = [
    ["the Node holds the removed link's MAC: removed", MAC, true],
    ["the Node holds another MAC: left alone", "aa:bb:cc:dd:ee:99", false],
    ["the Node has no annotation: nothing written", undefined, false],
  ];
  for (const [what, onNode, removed] of notOurs) {
    it(`removal of an annotation this process never set: ${what}`, async () => {
      const fake = fakeNodeApi(onNode);
      fake.refuse = (v) => (v === null ? undefined : new KubeApiError("forbidden", 403));
      const metrics = new Recorded();
      const nc = fakeNc({
        api: Promise.resolve(fake.api),
        nodeName: "node-1",
        annotationBackoff: fast,
        metrics,
      });
      nc.apply(cfg);
      await until(() => metrics.writes.length === 1, "the refused patch");
      nc.apply(kernel);
      await until(() => metrics.applied.length === 2, "the link's removal");
      await sleep(50);
      nc.stop();
      expect(fake.patches).to.deep.equal(removed ? [MAC, null] : [MAC]);
      expect(fake.node.annotation).to.equal(removed ? undefined : onNode);
      expect(metrics.writes).to.deep.equal(removed ? ["dropped", "ok"] : ["dropped"]);
    });
  }

  it("keeps the annotation when removing the link failed (the link, with that MAC, is still there)", async () => {
    const fake = fakeNodeApi();
    const nc = fakeNc({
      api: Promise.resolve(fake.api),
      nodeName: "node-1",
      remove: async () => {
        throw new Error("ip link del: Operation not permitted");
      },
    });
    nc.apply(cfg);
    await until(() => fake.node.annotation === MAC, "the annotation");
    nc.apply(kernel);
    await sleep(50);
    nc.stop();
    expect(fake.patches).to.deep.equal([MAC]);
  });

  it("a resync does not retry a Node patch given up on; the next config load does", async () => {
    const fake = fakeNodeApi();
    let refusing = true;
    fake.refuse = () => (refusing ? new KubeApiError("forbidden", 403) : undefined);
    const metrics = new Recorded();
    let calls = 0;
    const nc = fakeNc({
      api: Promise.resolve(fake.api),
      nodeName: "node-1",
      resyncMs: 10,
      metrics,
      ensure: async () => {
        calls++;
        return MAC;
      },
    });
    nc.apply(cfg);
    await until(() => calls >= 4, "resyncs after the refusal", 2000);
    expect(fake.patches).to.deep.equal([MAC]);
    refusing = false;
    nc.apply(cfg);
    await until(() => fake.node.annotation === MAC, "the patch after the load", 2000);
    nc.stop();
    expect(fake.patches).to.deep.equal([MAC, MAC]);
    expect(metrics.writes).to.deep.equal(["dropped", "ok"]);
  });
});

// ---------------------------------------------------------------------------
// A real driver, as root
// ---------------------------------------------------------------------------

interface IpAddr {
  ifname: string;
  address: string;
  flags: string[];
  operstate: string;
  master?: string;
  addr_info?: { family: string; local: string; prefixlen: number }[];
}

function ipJson<T>(args: string[]): T[] {
  const r = spawnSync("ip", ["-j", ...args], { encoding: "utf8" });
  if (r.status !== 0) return [];
  return JSON.parse(r.stdout || "[]") as T[];
}

function hostLink(name: string): IpAddr | undefined {
  return ipJson<IpAddr>(["addr", "show", "dev", name])[0];
}

function routesOf(dev: string): string[] {
  return ipJson<{ dst: string; gateway?: string }>(["route", "show", "dev", dev])
    .filter((r) => r.gateway)
    .map((r) => `${r.dst} via ${r.gateway}`)
    .sort();
}

describe("ensureNodeLink: what a re-application finds to repair (integration)", function () {
  this.timeout(30_000);
  const tag = uniqueTag();
  const nodeIf = `cdr${tag}`;
  const peerIf = `cdq${tag}`;
  const spec: NodeLinkSpec = {
    nodeIf,
    peerIf,
    mtu: 1500,
    addressCidr: "10.244.81.2/24",
    routes: [
      { dst: "10.251.0.0/16", gw: "10.244.81.1" },
      { dst: "10.252.0.1/32", gw: "10.244.81.1" },
    ],
  };
  const ip = (...args: string[]) => {
    const r = spawnSync("ip", args, { encoding: "utf8" });
    expect(r.status, `ip ${args.join(" ")}: ${r.stderr}`).to.equal(0);
  };
  const apply = async () => {
    const changes: string[] = [];
    await ensureNodeLink(spec, changes);
    return changes;
  };

  before(function () {
    requireRoot(this);
  });
  after(() => {
    deleteHostLink(nodeIf);
    deleteHostLink(peerIf);
  });

  it("creates the pair the first time, then finds nothing to do (a /32 route included)", async () => {
    expect(await apply()).to.deep.equal([`${nodeIf} missing: pair created`]);
    expect(await apply()).to.deep.equal([]);
  });

  // A change made behind ensureNodeLink's back → what the next application reports.
  const disturbances: [string, () => void, string[]][] = [
    [
      "a route deleted",
      () => ip("route", "del", "10.251.0.0/16", "dev", nodeIf),
      ["route 10.251.0.0/16 via 10.244.81.1 missing"],
    ],
    [
      "the /32 route deleted",
      () => ip("route", "del", "10.252.0.1/32", "dev", nodeIf),
      ["route 10.252.0.1/32 via 10.244.81.1 missing"],
    ],
    [
      "the address replaced by another",
      () => {
        ip("addr", "del", "10.244.81.2/24", "dev", nodeIf);
        ip("addr", "add", "10.244.81.9/24", "dev", nodeIf);
      },
      [
        "address 10.244.81.9/24 removed",
        "address 10.244.81.2/24 missing",
        // Deleting the address took the routes through its gateway with it.
        "route 10.251.0.0/16 via 10.244.81.1 missing",
        "route 10.252.0.1/32 via 10.244.81.1 missing",
      ],
    ],
    ["the peer set down", () => ip("link", "set", peerIf, "down"), [`${peerIf} was down`]],
    [
      "the peer deleted (and the node end with it)",
      () => ip("link", "del", peerIf),
      [`${nodeIf} missing: pair created`],
    ],
  ];
  for (const [what, disturb, want] of disturbances) {
    it(`${what}: reported, repaired, and quiet on the next application`, async () => {
      disturb();
      expect(await apply()).to.deep.equal(want);
      expect(await apply()).to.deep.equal([]);
    });
  }
});

describe("cni-driver serve with the midonet datapath: node connectivity (integration)", function () {
  this.timeout(60_000);
  let h: DriverHarness;
  let server: FakeKubeApiServer;
  let nodeName: string;
  let nodeIf: string;
  let peerIf: string;
  let forwardBefore: string | undefined;
  const FORWARD = "/proc/sys/net/ipv4/ip_forward";
  const RESYNC_S = 1;
  /** A resync interval and then some: what a repair may take. */
  const REPAIR_MS = RESYNC_S * 1000 + 4000;
  const nodeAnnotation = () =>
    server.get("nodes", undefined, nodeName)?.metadata?.annotations?.[ANNOTATION_MAC_ADDRESS];
  const writes = (outcome: string) =>
    h.metric(`cni_driver_node_annotation_writes_total{outcome="${outcome}"}`);
  /** The driver's log lines from the node connectivity, from character `from` of its stderr. */
  const nodeLinkLogs = (from = 0) =>
    h.logs
      .slice(from)
      .split("\n")
      .filter((l) => l.startsWith("{"))
      .map(
        (l) =>
          JSON.parse(l) as { level: string; msg: string; component?: string; changes?: string[] },
      )
      .filter((l) => l.component === "node-connectivity");

  const files = (settings: Record<string, unknown>): Record<string, string> => {
    const list = h.conflist();
    const plugins = list.plugins as Record<string, unknown>[];
    plugins[0] = { ...plugins[0], datapath: "midonet" };
    return {
      "pod-network.conflist": JSON.stringify(list),
      "driver.json": JSON.stringify({
        nodeInterface: nodeIf,
        nodePeerInterface: peerIf,
        ...settings,
      }),
    };
  };

  before(async function () {
    requireRoot(this);
    requireReferencePlugins(this, "host-local");
    forwardBefore = readFileSync(FORWARD, "utf8");
    h = new DriverHarness({ subnetOctet: 80 });
    nodeIf = `cdn${h.tag}`;
    peerIf = `cdm${h.tag}`;
    nodeName = `node-${h.tag}`;
    server = await startFakeKubeApiServer();
    server.put("nodes", { metadata: { name: nodeName }, spec: { podCIDR: h.subnet } });
    const kubeconfig = join(h.root, "kubeconfig");
    writeFileSync(kubeconfig, server.kubeconfig(), { mode: 0o600 });
    await h.writeConfig(files({ clusterCidr: "10.248.0.0/16", serviceCidr: "10.249.0.0/16" }));
    // --pod-cidr (the harness's) stays: the Node is annotated, not followed.
    h.opts.extraFlags = [
      "--kubeconfig",
      kubeconfig,
      "--node-name",
      nodeName,
      "--node-link-resync",
      String(RESYNC_S),
    ];
    await h.start();
  });

  after(async () => {
    await h?.cleanup();
    if (nodeIf) deleteHostLink(nodeIf);
    if (peerIf) deleteHostLink(peerIf);
    if (h) deleteHostLink(`cdx${h.tag}`);
    await server?.close();
    if (forwardBefore !== undefined) writeFileSync(FORWARD, forwardBefore);
  });

  it("sets the node link up once ready: node IP network+2, peer up, both routes via network+1, forwarding on", () => {
    const node = hostLink(nodeIf);
    expect(node, nodeIf).to.not.equal(undefined);
    expect(
      (node?.addr_info ?? [])
        .filter((a) => a.family === "inet")
        .map((a) => `${a.local}/${a.prefixlen}`),
    ).to.deep.equal(["10.244.80.2/24"]);
    expect(node?.flags).to.include("UP");
    const peer = hostLink(peerIf);
    expect(peer?.flags).to.include("UP");
    expect((peer?.addr_info ?? []).filter((a) => a.family === "inet")).to.deep.equal([]);
    expect(routesOf(nodeIf)).to.deep.equal([
      "10.248.0.0/16 via 10.244.80.1",
      "10.249.0.0/16 via 10.244.80.1",
    ]);
    expect(readFileSync(FORWARD, "utf8").trim()).to.equal("1");
  });

  it("annotates the Node with the MAC of the node link", async () => {
    const mac = hostLink(nodeIf)?.address;
    expect(mac).to.match(/^([0-9a-f]{2}:){5}[0-9a-f]{2}$/);
    const annotated = await until(
      () =>
        server.get("nodes", undefined, nodeName)?.metadata?.annotations?.[ANNOTATION_MAC_ADDRESS],
      "the Node's annotation",
    );
    expect(annotated).to.equal(mac);
  });

  it("a pod ADD works in the midonet datapath: the host veth up and on no bridge, the first address after the node link's", async () => {
    createNetns(h.netnsName(1));
    const add = await h.client.setUpPod(h.podRequest(1));
    expectNoCniError(add);
    // network + 2 is the node link's (midokube-node): the first pod gets network + 3.
    expect(add.result?.ips[0]?.address).to.equal("10.244.80.3/24");
    const host = hostLink(h.hostVeth(1));
    expect(host, h.hostVeth(1)).to.not.equal(undefined);
    expect(host?.flags).to.include("UP");
    expect(host?.master).to.equal(undefined);
    expect(h.bridgePorts()).to.deep.equal([]);
    expectNoCniError(await h.client.tearDownPod(h.podRequest(1)));
    expect(hostLink(h.hostVeth(1))).to.equal(undefined);
  });

  it("a config swap changing serviceCidr moves the route", async () => {
    await h.writeConfig(files({ clusterCidr: "10.248.0.0/16", serviceCidr: "10.250.0.0/16" }));
    const routes = await until(() => {
      const r = routesOf(nodeIf);
      return r.includes("10.250.0.0/16 via 10.244.80.1") ? r : undefined;
    }, "the new service route");
    expect(routes).to.deep.equal([
      "10.248.0.0/16 via 10.244.80.1",
      "10.250.0.0/16 via 10.244.80.1",
    ]);
  });

  it("is not ready, with the reason, while the link cannot be set up, and ready again once it can", async () => {
    // A bridge where the node end should be: not a veth, so not ours to use.
    const dummy = `cdx${h.tag}`;
    expect(spawnSync("ip", ["link", "add", dummy, "type", "bridge"]).status).to.equal(0);
    await h.writeConfig(files({ serviceCidr: "10.250.0.0/16", nodeInterface: dummy }));
    const reason = await until(
      async () =>
        (await h.client.cniStatus({}, { timeoutMs: 1000 })).not_ready_reasons.find((r) =>
          r.startsWith(`node link ${dummy}:`),
        ),
      "the reason naming the link",
    );
    expect(reason).to.contain("exists but is a bridge, not a veth");
    const add = await h.client.setUpPod(h.podRequest(2));
    expect(add.error?.code).to.equal(11);
    await h.writeConfig(files({ clusterCidr: "10.248.0.0/16", serviceCidr: "10.250.0.0/16" }));
    await h.waitReady();
    expect(routesOf(nodeIf)).to.deep.equal([
      "10.248.0.0/16 via 10.244.80.1",
      "10.250.0.0/16 via 10.244.80.1",
    ]);
  });

  it("restores a route deleted behind its back within the resync interval, with no failure", async () => {
    const failures = await h.metric("cni_driver_node_link_failures_total");
    const repairs = (await h.metric("cni_driver_node_link_repairs_total")) ?? Number.NaN;
    const logFrom = h.logs.length;
    const del = spawnSync("ip", ["route", "del", "10.248.0.0/16", "via", "10.244.80.1"]);
    expect(del.status, String(del.stderr)).to.equal(0);
    expect(routesOf(nodeIf)).to.deep.equal(["10.250.0.0/16 via 10.244.80.1"]);
    await until(
      () => routesOf(nodeIf).includes("10.248.0.0/16 via 10.244.80.1"),
      "the route back",
      REPAIR_MS,
    );
    expect(routesOf(nodeIf)).to.deep.equal([
      "10.248.0.0/16 via 10.244.80.1",
      "10.250.0.0/16 via 10.244.80.1",
    ]);
    expect(await h.metric("cni_driver_node_link_failures_total")).to.equal(failures);
    expect(await h.metric("cni_driver_node_link_ready")).to.equal(1);
    const restored = await until(
      () => nodeLinkLogs(logFrom).find((l) => l.msg === "node link restored"),
      "the warning",
    );
    expect(restored.level).to.equal("warn");
    expect(restored.changes).to.deep.equal(["route 10.248.0.0/16 via 10.244.80.1 missing"]);
    expect(await h.metric("cni_driver_node_link_repairs_total")).to.equal(repairs + 1);
  });

  it("re-creates the node link deleted behind its back, and annotates the Node with its new MAC", async () => {
    const oldMac = hostLink(nodeIf)?.address;
    expect(nodeAnnotation()).to.equal(oldMac);
    const ok = (await writes("ok")) ?? Number.NaN;
    expect(spawnSync("ip", ["link", "del", nodeIf]).status).to.equal(0);
    expect(hostLink(peerIf), "the peer went with it").to.equal(undefined);
    const node = await until(
      () => {
        const l = hostLink(nodeIf);
        const inet = (l?.addr_info ?? []).filter((a) => a.family === "inet");
        return inet.some((a) => `${a.local}/${a.prefixlen}` === "10.244.80.2/24") ? l : undefined;
      },
      "the node link back with its address",
      REPAIR_MS,
    );
    expect(node.flags).to.include("UP");
    expect(hostLink(peerIf)?.flags).to.include("UP");
    expect(routesOf(nodeIf)).to.deep.equal([
      "10.248.0.0/16 via 10.244.80.1",
      "10.250.0.0/16 via 10.244.80.1",
    ]);
    expect(node.address).to.not.equal(oldMac);
    await until(() => nodeAnnotation() === node.address, "the Node annotated with the new MAC");
    expect(await writes("ok")).to.equal(ok + 1);
    expect(await h.metric("cni_driver_node_link_ready")).to.equal(1);
  });

  it("a resync that finds everything in place writes nothing to the Node", async () => {
    const ok = await writes("ok");
    const before = server.get("nodes", undefined, nodeName)?.metadata?.resourceVersion;
    const logFrom = h.logs.length;
    await sleep(RESYNC_S * 1000 * 2.5);
    expect(
      nodeLinkLogs(logFrom).filter((l) => l.level !== "debug" && l.level !== "trace"),
    ).to.deep.equal([]);
    expect(server.get("nodes", undefined, nodeName)?.metadata?.resourceVersion).to.equal(before);
    expect(await writes("ok")).to.equal(ok);
  });

  it("counts the pod side effects: an ADD's annotation patch, a failed ADD's Warning Event", async () => {
    const patched = (o: string) =>
      h.metric(`cni_driver_pod_annotation_patches_total{outcome="${o}"}`);
    const events = (o: string) => h.metric(`cni_driver_pod_events_total{outcome="${o}"}`);
    const okBefore = (await patched("ok")) ?? Number.NaN;
    const createdBefore = (await events("created")) ?? Number.NaN;
    server.put("pods", { metadata: { namespace: h.podNamespace, name: h.podName(3) } });
    createNetns(h.netnsName(3));
    expectNoCniError(await h.client.setUpPod(h.podRequest(3)));
    await until(
      () =>
        server.get("pods", h.podNamespace, h.podName(3))?.metadata?.annotations?.[
          ANNOTATION_MAC_ADDRESS
        ],
      "the pod's annotation",
    );
    await until(async () => (await patched("ok")) === okBefore + 1, "the patch counted");
    const failed = await h.client.setUpPod(
      h.podRequest(4, { netns: `/run/netns/cdt-${h.tag}-missing` }),
    );
    expect(failed.error, "an ADD into a missing netns fails").to.not.equal(null);
    await until(async () => (await events("created")) === createdBefore + 1, "the Event counted");
    expect(await events("failed")).to.equal(0);
    expectNoCniError(await h.client.tearDownPod(h.podRequest(3)));
  });

  it("a config without the midonet datapath removes the link and, retried after a conflict, the Node's annotation", async () => {
    expect(nodeAnnotation()).to.match(/^([0-9a-f]{2}:){5}[0-9a-f]{2}$/);
    const ok = (await writes("ok")) ?? Number.NaN;
    const retried = (await writes("retried")) ?? Number.NaN;
    server.injectFault({ method: "PATCH", path: `/api/v1/nodes/${nodeName}`, status: 409 });
    await h.writeConfig({ "pod-network.conflist": JSON.stringify(h.conflist()) });
    await until(
      () => hostLink(nodeIf) === undefined && hostLink(peerIf) === undefined,
      "the node link removed",
    );
    await until(() => nodeAnnotation() === undefined, "the annotation removed");
    expect(await writes("retried")).to.equal(retried + 1);
    expect(await writes("ok")).to.equal(ok + 1);
    expect(await h.metric("cni_driver_node_link_ready"), "no link planned: absent").to.equal(
      undefined,
    );
    // No resync brings it back while no network uses the midonet datapath.
    await sleep(RESYNC_S * 1000 * 1.5);
    expect(hostLink(nodeIf)).to.equal(undefined);
  });
});

describe("node link: net.ipv4.ip_forward for the midonet datapath", () => {
  let dir = "";
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "cni-driver-forwarding-"));
  });
  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it("leaves it alone when on, and turns it on when off", async () => {
    const sysctl = join(dir, "ip_forward");
    writeFileSync(sysctl, "1\n");
    expect(await enableIpv4Forwarding(sysctl)).to.equal(false);
    writeFileSync(sysctl, "0\n");
    expect(await enableIpv4Forwarding(sysctl)).to.equal(true);
    expect(readFileSync(sysctl, "utf8")).to.equal("1\n");
  });

  it("off where /proc/sys is read-only (a container not privileged): fails naming the sysctl and the fix", async function () {
    requireRoot(this);
    const mnt = join(dir, "sys");
    await withTmpfs(mnt, "64k", async () => {
      const sysctl = join(mnt, "ip_forward");
      writeFileSync(sysctl, "0\n");
      execFileSync("mount", ["-o", "remount,ro", mnt]);
      const err = await enableIpv4Forwarding(sysctl).then(
        () => undefined,
        (e: Error) => e,
      );
      expect(err?.message).to.equal(
        `net.ipv4.ip_forward is 0 on this node and ${sysctl} cannot be written here (EROFS): the midonet datapath needs it on; set it on the node (sysctl -w net.ipv4.ip_forward=1, kept in /etc/sysctl.d) or let the driver's container write /proc/sys`,
      );
      expect(readFileSync(sysctl, "utf8")).to.equal("0\n");
    });
  });
});
