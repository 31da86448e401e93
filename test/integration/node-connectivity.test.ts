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
import { spawnSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { expect } from "chai";
import pino from "pino";
import { CniError } from "../../src/cni/errors.js";
import { readMidonetConfig } from "../../src/driver/builtin/midonet-plugin.js";
import { type KubeApi, KubeApiError } from "../../src/driver/kube/api.js";
import { MAC_ADDRESS_ANNOTATION } from "../../src/driver/kube/pod-annotations.js";
import { type DriverConfig, loadDriverConfig } from "../../src/driver/network-config.js";
import {
  NodeConnectivity,
  type NodeLinkPlan,
  nodeLinkPlan,
} from "../../src/driver/node-connectivity.js";
import type { NodeLinkSpec } from "../../src/plumbing/node-link.js";
import { DriverHarness, expectNoCniError, sleep } from "../support/driver-harness.js";
import { type FakeKubeApiServer, startFakeKubeApiServer } from "../support/fake-kube-apiserver.js";
import { createNetns, deleteHostLink } from "../support/netns.js";
import { requireReferencePlugins, requireRoot } from "../support/requirements.js";
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
        "a.conflist": conflist("a", MIDO, { type: "host-local", subnet: "10.1.0.0/16" }),
        "b.conflist": conflist("b", MIDO),
        "driver.json": JSON.stringify({ defaultNetwork: "b" }),
      },
      { network: "b", addressCidr: "10.244.3.2/24" },
    ],
    [
      "a /16 pod CIDR",
      { "a.conflist": conflist("a", MIDO, { type: "host-local", subnet: "10.7.0.0/16" }) },
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
    expect(patches.map(([n, a]) => [n, a[MAC_ADDRESS_ANNOTATION]])).to.deep.equal([
      ["node-1", "aa:bb:cc:dd:ee:02"],
      ["node-1", "aa:bb:cc:dd:ee:02"],
      ["node-1", "aa:bb:cc:dd:ee:03"],
    ]);
    nc.stop();
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

describe("cni-driver serve with the midonet datapath: node connectivity (integration)", function () {
  this.timeout(60_000);
  let h: DriverHarness;
  let server: FakeKubeApiServer;
  let nodeName: string;
  let nodeIf: string;
  let peerIf: string;
  let forwardBefore: string | undefined;
  const FORWARD = "/proc/sys/net/ipv4/ip_forward";

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
    h.opts.extraFlags = ["--kubeconfig", kubeconfig, "--node-name", nodeName];
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
        server.get("nodes", undefined, nodeName)?.metadata?.annotations?.[MAC_ADDRESS_ANNOTATION],
      "the Node's annotation",
    );
    expect(annotated).to.equal(mac);
  });

  it("a pod ADD works in the midonet datapath: the host veth up and on no bridge", async () => {
    createNetns(h.netnsName(1));
    const add = await h.client.setUpPod(h.podRequest(1));
    expectNoCniError(add);
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
});
