/**
 * Services without kube-proxy, end to end: three nodes (network namespaces on
 * one underlay), each running `cni-driver serve` with `"services": "driver"`
 * against the fake API server, which holds Services and EndpointSlices;
 * real pods, real TCP and UDP through the driver's own nftables table. Each
 * server answers with its name and the address it saw, so a test sees both
 * which endpoint was chosen and whether the client's address was kept. The
 * nodes run without br_netfilter (its node-wide sysctl off): same-node pod
 * traffic is the driver's to route (services/bridge-steering.ts).
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect } from "chai";
import { SERVICES_TABLES } from "../../src/driver/services/ruleset.js";
import {
  bridgeSettings,
  type ClusterMember,
  ClusterUnderlay,
  inNs,
  OUTSIDE_ADDRESS,
  printMemberLogs,
  startMembers,
  tearDownCluster,
  UNDERLAY,
  withoutNodeBrNetfilter,
} from "../support/cluster-nodes.js";
import { DriverHarness, expectNoCniError } from "../support/driver-harness.js";
import { type FakeKubeApiServer, startFakeKubeApiServer } from "../support/fake-kube-apiserver.js";
import { createNetns } from "../support/netns.js";
import { startNetnsScript, stopPodServer } from "../support/pod-server.js";
import { requireCommand, requireRoot } from "../support/requirements.js";
import {
  ALT_PORT,
  httpGet,
  serverScript,
  TCP_PORT,
  tcp,
  UDP_PORT,
  udp,
} from "../support/service-probes.js";
import { until } from "../support/until.js";

const eventually = <T>(probe: () => T | undefined | null | false, what: string) =>
  until(probe, what, 30_000);

const NS = "default";

interface Endpoint {
  ip: string;
  node: string;
  ready?: boolean;
  serving?: boolean;
  terminating?: boolean;
}

describe("Services without kube-proxy: the driver's nftables, real packets across three nodes", function () {
  this.timeout(180_000);
  let root: string;
  let ul: ClusterUnderlay;
  let server: FakeKubeApiServer;
  const members: ClusterMember[] = [];
  const servers: Array<Awaited<ReturnType<typeof startNetnsScript>>> = [];
  let a2 = "";

  const a = () => members[0] as ClusterMember;
  const b = () => members[1] as ClusterMember;

  async function configureAll(driverJson: Record<string, unknown>): Promise<void> {
    for (const m of members)
      await m.h.writeConfig({
        "pod-network.conflist": JSON.stringify(m.h.conflist()),
        "driver.json": JSON.stringify(driverJson),
      });
  }

  function service(
    name: string,
    clusterIp: string,
    spec: Record<string, unknown> = {},
    status: Record<string, unknown> = {},
  ) {
    server.put("services", {
      metadata: { namespace: NS, name },
      spec: {
        type: "ClusterIP",
        clusterIP: clusterIp,
        clusterIPs: [clusterIp],
        ports: [{ name: "web", protocol: "TCP", port: 80, targetPort: "web" }],
        ...spec,
      },
      status: { loadBalancer: {}, ...status },
    });
  }

  function slice(
    svc: string,
    endpoints: Endpoint[],
    ports: Array<{ name: string; port: number; protocol?: string }> = [
      { name: "web", port: TCP_PORT },
    ],
    sliceName = `${svc}-1`,
  ) {
    server.put("endpointslices", {
      apiVersion: "discovery.k8s.io/v1",
      kind: "EndpointSlice",
      metadata: {
        namespace: NS,
        name: sliceName,
        labels: { "kubernetes.io/service-name": svc },
      },
      addressType: "IPv4",
      endpoints: endpoints.map((e) => ({
        addresses: [e.ip],
        nodeName: e.node,
        conditions: {
          ready: e.ready ?? true,
          serving: e.serving ?? e.ready ?? true,
          terminating: e.terminating ?? false,
        },
      })),
      ports: ports.map((p) => ({ protocol: "TCP", ...p })),
    });
  }

  /** The Services tables' text on node `m` (the shared one and its shards). */
  const table = (m: ClusterMember) =>
    SERVICES_TABLES.map((t) => inNs(m.node.netns, ["nft", "list", "table", "inet", t]).stdout).join(
      "",
    );

  before(async function () {
    requireRoot(this);
    requireCommand(this, "nft", "nftables");
    root = mkdtempSync(join(tmpdir(), "cni-driver-services-"));
    ul = new ClusterUnderlay(root);
    server = await startFakeKubeApiServer();
    const kubeconfig = await ul.exposeApi(Number(new URL(server.url).port), server.kubeconfig());
    for (const [i, name] of ["node-a", "node-b", "node-c"].entries()) {
      const node = ul.addNode(name, 21 + i);
      // No br_netfilter for this node: what kube-proxy needed, the driver does without.
      withoutNodeBrNetfilter(node.netns);
      // A node has a default route: traffic it sends to a ClusterIP is routed before it is DNATed.
      inNs(node.netns, ["ip", "route", "add", "default", "via", `${UNDERLAY}.254`]);
      const h = new DriverHarness({
        subnetOctet: 171 + i,
        netns: node.netns,
        extraFlags: ["--kubeconfig", kubeconfig, "--node-name", name, "--node-link-resync", "1"],
      });
      members.push({ node, h, pod: "" });
    }
    await configureAll({ crossNode: "host-gw", clusterCidr: "10.244.0.0/16", services: "driver" });
    for (const m of members)
      server.put("nodes", {
        metadata: { name: m.node.name },
        spec: { podCIDR: m.h.subnet, podCIDRs: [m.h.subnet] },
        status: { addresses: [{ type: "InternalIP", address: m.node.address }] },
      });
    await startMembers(members);
    createNetns(a().h.netnsName(2));
    const res = await a().h.client.setUpPod(a().h.podRequest(2));
    expectNoCniError(res);
    a2 = (res.result?.ips[0]?.address ?? "").split("/")[0] as string;
    servers.push(
      await startNetnsScript(a().h.netnsName(1), serverScript("a1")),
      await startNetnsScript(a().h.netnsName(2), serverScript("a2")),
      await startNetnsScript(b().h.netnsName(1), serverScript("b1")),
    );
  });

  afterEach(function () {
    if (this.currentTest?.state === "failed") printMemberLogs(members);
  });

  after(async () => {
    for (const s of servers) await stopPodServer(s);
    await tearDownCluster(members, ul, server, root);
  });

  it("ClusterIP: to a pod on another node and to one on the same node with the client's address kept; to itself (hairpin) masqueraded", async () => {
    const a1 = a().h.netnsName(1);
    service("remote", "10.96.1.1");
    slice("remote", [{ ip: b().pod, node: "node-b" }]);
    service("local", "10.96.1.2");
    slice("local", [{ ip: a2, node: "node-a" }]);
    service("self", "10.96.1.3");
    slice("self", [{ ip: a().pod, node: "node-a" }]);
    await eventually(() => tcp(a1, "10.96.1.1", 80).startsWith("b1"), "the remote Service");
    expect(tcp(a1, "10.96.1.1", 80)).to.equal(`b1 ${a().pod}`);
    await eventually(() => tcp(a1, "10.96.1.2", 80).startsWith("a2"), "the same-node Service");
    expect(tcp(a1, "10.96.1.2", 80)).to.equal(`a2 ${a().pod}`);
    await eventually(() => tcp(a1, "10.96.1.3", 80).startsWith("a1"), "the hairpin Service");
    const seen = tcp(a1, "10.96.1.3", 80).split(" ")[1];
    expect(seen, "a pod reaching itself sees another source").to.not.equal(a().pod);
    // From the node itself (a host-network pod, kubelet), and from a pod of a third node.
    expect(tcp(a().node.netns, "10.96.1.1", 80)).to.match(/^b1 /);
    expect(tcp(members[2]?.h.netnsName(1) as string, "10.96.1.2", 80)).to.equal(
      `a2 ${members[2]?.pod}`,
    );
    // None of it through br_netfilter or hairpin mode: the bridge and its ports have neither.
    expect(bridgeSettings(a().node.netns, a().h.bridge)).to.deep.equal({
      netfilter: "0",
      hairpin: ["off", "off"],
    });
    expect(
      inNs(a().node.netns, ["nft", "list", "table", "bridge", "cni-driver-steer"]).stdout,
    ).to.contain(`ip daddr ${a().h.subnet}`);
  });

  it("a Service with no endpoints rejects (connection refused, not a timeout); its first endpoint makes it answer", async () => {
    service("empty", "10.96.1.9");
    await eventually(() => table(a()).includes("10.96.1.9"), "the empty Service's reject");
    expect(tcp(a().h.netnsName(1), "10.96.1.9", 80)).to.equal("ECONNREFUSED");
    expect(tcp(a().node.netns, "10.96.1.9", 80), "from the node").to.equal("ECONNREFUSED");
    slice("empty", [{ ip: b().pod, node: "node-b" }]);
    await eventually(() => tcp(a().h.netnsName(1), "10.96.1.9", 80).startsWith("b1"), "answers");
  });

  it("NodePort with Cluster policy: from outside to every node, masqueraded; with Local policy: the client's address kept, only the node with an endpoint answers, and the health check port says so", async () => {
    const out = ul.outside;
    service("np", "10.96.1.10", {
      type: "NodePort",
      externalTrafficPolicy: "Cluster",
      ports: [{ name: "web", protocol: "TCP", port: 80, targetPort: "web", nodePort: 30080 }],
    });
    slice("np", [{ ip: b().pod, node: "node-b" }]);
    for (const m of members) {
      await eventually(
        () => tcp(out, m.node.address, 30080).startsWith("b1"),
        `node port on ${m.node.name}`,
      );
      const seen = tcp(out, m.node.address, 30080).split(" ")[1];
      expect(seen, `masqueraded through ${m.node.name}`).to.not.equal(OUTSIDE_ADDRESS);
    }
    expect(tcp(a().node.netns, "127.0.0.1", 30080), "not on loopback").to.equal("ECONNREFUSED");
    service("npl", "10.96.1.11", {
      type: "NodePort",
      externalTrafficPolicy: "Local",
      healthCheckNodePort: 30500,
      ports: [{ name: "web", protocol: "TCP", port: 80, targetPort: "web", nodePort: 30081 }],
    });
    slice("npl", [{ ip: b().pod, node: "node-b" }]);
    await eventually(
      () => tcp(out, b().node.address, 30081).startsWith("b1"),
      "Local node port on node-b",
    );
    expect(tcp(out, b().node.address, 30081)).to.equal(`b1 ${OUTSIDE_ADDRESS}`);
    expect(tcp(out, a().node.address, 30081), "node-a has no local endpoint").to.equal("TIMEOUT");
    // A pod of node-a still reaches the Service through node-a's node port.
    expect(tcp(a().h.netnsName(1), a().node.address, 30081)).to.match(/^b1 /);
    await eventually(
      () => httpGet(out, `http://${b().node.address}:30500/healthz`).startsWith("200 "),
      "node-b's health check",
    );
    const body = JSON.parse(httpGet(out, `http://${b().node.address}:30500/healthz`).slice(4));
    expect(body).to.deep.equal({
      service: { namespace: NS, name: "npl" },
      localEndpoints: 1,
      serviceProxyHealthy: true,
    });
    expect(httpGet(out, `http://${a().node.address}:30500/healthz`)).to.match(/^503 /);
  });

  it("externalIPs and a load balancer's ingress IP lead to the endpoints", async () => {
    const vip = "203.0.113.10";
    service(
      "lb",
      "10.96.1.12",
      {
        type: "LoadBalancer",
        externalIPs: ["203.0.113.11"],
        ports: [{ name: "web", protocol: "TCP", port: 80, targetPort: "web", nodePort: 30082 }],
      },
      { loadBalancer: { ingress: [{ ip: vip }] } },
    );
    slice("lb", [{ ip: b().pod, node: "node-b" }]);
    // The outside reaches the load balancer's address through node-a, as a load balancer would send it.
    inNs(ul.outside, ["ip", "route", "replace", "203.0.113.0/24", "via", a().node.address]);
    try {
      await eventually(() => tcp(ul.outside, vip, 80).startsWith("b1"), "the load balancer IP");
      expect(tcp(ul.outside, "203.0.113.11", 80)).to.match(/^b1 /);
      expect(tcp(a().h.netnsName(1), vip, 80), "from a pod").to.equal(`b1 ${a().pod}`);
    } finally {
      inNs(ul.outside, ["ip", "route", "del", "203.0.113.0/24"]);
    }
  });

  it("loadBalancerSourceRanges: a load balancer's IP lets in the sources within them and drops the rest; its node port lets in all", async () => {
    const vip = "203.0.113.20";
    const c = members[2] as ClusterMember;
    const ranges = (r: string[]) =>
      service(
        "lbsr",
        "10.96.1.16",
        {
          type: "LoadBalancer",
          loadBalancerSourceRanges: r,
          ports: [{ name: "web", protocol: "TCP", port: 80, targetPort: "web", nodePort: 30084 }],
        },
        { loadBalancer: { ingress: [{ ip: vip }] } },
      );
    ranges([`${OUTSIDE_ADDRESS}/32`]);
    slice("lbsr", [{ ip: b().pod, node: "node-b" }]);
    // The outside and node-c reach the load balancer's address through node-a.
    inNs(ul.outside, ["ip", "route", "replace", `${vip}/32`, "via", a().node.address]);
    inNs(c.node.netns, ["ip", "route", "replace", `${vip}/32`, "via", a().node.address]);
    try {
      await eventually(() => tcp(ul.outside, vip, 80).startsWith("b1"), "the load balancer IP");
      expect(tcp(c.node.netns, vip, 80), "node-c, outside the ranges").to.equal("TIMEOUT");
      expect(tcp(a().h.netnsName(1), vip, 80), "a pod of node-a, outside them").to.equal("TIMEOUT");
      expect(tcp(c.node.netns, a().node.address, 30084), "node-c to the node port").to.match(
        /^b1 /,
      );
      ranges([`${OUTSIDE_ADDRESS}/32`, `${c.node.address}/32`]);
      await eventually(() => tcp(c.node.netns, vip, 80).startsWith("b1"), "node-c let in");
      expect(tcp(ul.outside, vip, 80)).to.match(/^b1 /);
    } finally {
      inNs(ul.outside, ["ip", "route", "del", `${vip}/32`]);
      inNs(c.node.netns, ["ip", "route", "del", `${vip}/32`]);
    }
  });

  it("topology hints: a node's pods reach the endpoints hinted for its zone; a new zone label moves them", async () => {
    const zoned = (zone: string | undefined) =>
      server.put("nodes", {
        metadata: {
          name: "node-a",
          ...(zone ? { labels: { "topology.kubernetes.io/zone": zone } } : {}),
        },
        spec: { podCIDR: a().h.subnet, podCIDRs: [a().h.subnet] },
        status: { addresses: [{ type: "InternalIP", address: a().node.address }] },
      });
    service("zonal", "10.96.1.17");
    // As the EndpointSlice controller writes them for trafficDistribution: PreferSameZone.
    server.put("endpointslices", {
      apiVersion: "discovery.k8s.io/v1",
      kind: "EndpointSlice",
      metadata: {
        namespace: NS,
        name: "zonal-1",
        labels: { "kubernetes.io/service-name": "zonal" },
      },
      addressType: "IPv4",
      endpoints: [
        { ip: a2, node: "node-a", zone: "zone-a" },
        { ip: b().pod, node: "node-b", zone: "zone-b" },
      ].map((e) => ({
        addresses: [e.ip],
        nodeName: e.node,
        zone: e.zone,
        conditions: { ready: true, serving: true, terminating: false },
        hints: { forZones: [{ name: e.zone }] },
      })),
      ports: [{ name: "web", protocol: "TCP", port: TCP_PORT }],
    });
    const a1 = a().h.netnsName(1);
    const answers = () =>
      new Set(Array.from({ length: 6 }, () => tcp(a1, "10.96.1.17", 80).split(" ")[0]));
    try {
      zoned("zone-a");
      await eventually(() => tcp(a1, "10.96.1.17", 80).startsWith("a2"), "the zonal Service");
      expect([...answers()], "node-a in zone-a").to.deep.equal(["a2"]);
      zoned("zone-b");
      await eventually(() => tcp(a1, "10.96.1.17", 80).startsWith("b1"), "node-a moved to zone-b");
      expect([...answers()], "node-a in zone-b").to.deep.equal(["b1"]);
    } finally {
      zoned(undefined);
    }
  });

  it("session affinity: a client sticks to one endpoint, and the memory of it expires after the timeout", async () => {
    service("sticky", "10.96.1.13", {
      sessionAffinity: "ClientIP",
      sessionAffinityConfig: { clientIP: { timeoutSeconds: 3 } },
    });
    slice("sticky", [
      { ip: b().pod, node: "node-b" },
      { ip: a2, node: "node-a" },
    ]);
    const a1 = a().h.netnsName(1);
    await eventually(() => /^(a2|b1) /.test(tcp(a1, "10.96.1.13", 80)), "the sticky Service");
    const first = tcp(a1, "10.96.1.13", 80).split(" ")[0];
    for (let i = 0; i < 8; i++) expect(tcp(a1, "10.96.1.13", 80).split(" ")[0]).to.equal(first);
    expect(table(a())).to.include(a().pod);
    await eventually(() => !table(a()).includes(`${a().pod} expires`), "the affinity's expiry");
  });

  it("endpoint conditions: serving and terminating endpoints serve when none is ready; named target ports resolve per slice", async () => {
    service("term", "10.96.1.14");
    slice("term", [
      { ip: b().pod, node: "node-b", ready: false, serving: true, terminating: true },
      { ip: a2, node: "node-a", ready: false, serving: false, terminating: true },
    ]);
    const a1 = a().h.netnsName(1);
    await eventually(() => tcp(a1, "10.96.1.14", 80).startsWith("b1"), "the terminating endpoint");
    for (let i = 0; i < 5; i++) expect(tcp(a1, "10.96.1.14", 80)).to.match(/^b1 /);
    // "web" is 8080 on node-b's pod and 9090 on a2: each slice says which.
    service("named", "10.96.1.15");
    slice("named", [{ ip: b().pod, node: "node-b" }], [{ name: "web", port: TCP_PORT }], "named-1");
    slice("named", [{ ip: a2, node: "node-a" }], [{ name: "web", port: ALT_PORT }], "named-2");
    await eventually(() => table(a()).includes(`${a2}:${ALT_PORT}`), "the named port");
    const seen = new Set<string>();
    for (let i = 0; i < 30 && seen.size < 2; i++)
      seen.add(tcp(a1, "10.96.1.15", 80).split(" ")[0] ?? "");
    expect([...seen].sort()).to.deep.equal(["a2", "b1"]);
  });

  it("UDP: after the endpoint is replaced, the next datagram of the same flow reaches the new one", async () => {
    service("dns", "10.96.1.53", {
      ports: [{ name: "dns", protocol: "UDP", port: 53, targetPort: UDP_PORT }],
    });
    const ports = [{ name: "dns", port: UDP_PORT, protocol: "UDP" }];
    slice("dns", [{ ip: a2, node: "node-a" }], ports);
    const a1 = a().h.netnsName(1);
    await eventually(() => udp(a1, "10.96.1.53", 53, 40_053).startsWith("a2"), "the UDP Service");
    slice("dns", [{ ip: b().pod, node: "node-b" }], ports);
    await eventually(() => table(a()).includes(`${b().pod}:${UDP_PORT}`), "the new endpoint");
    // The sync removes the stale flow right after it writes the rules: wait for the
    // whole sync, not just the rules (without the removal this waits in vain).
    const flows = () =>
      inNs(a().node.netns, ["conntrack", "-L", "-p", "udp", "--orig-dst", "10.96.1.53"]).stdout;
    await eventually(() => !flows().includes(`src=${a2} `), "the flow to the old endpoint gone");
    // a2 still answers: only the stale flow's removal sends this datagram to b1.
    expect(udp(a1, "10.96.1.53", 53, 40_053)).to.equal(`b1 ${a().pod}`);
    // A deleted Service takes its flows with it.
    expect(flows()).to.include("dport=53");
    server.remove("services", NS, "dns");
    await eventually(() => !flows().includes("dport=53"), "the deleted Service's UDP flows gone");
  });

  it("a restarted driver leaves the rules in force while it is away, and rewrites them whole when it is back", async () => {
    const a1 = a().h.netnsName(1);
    await a().h.stop();
    expect(tcp(a1, "10.96.1.1", 80), "served while the driver is away").to.equal(`b1 ${a().pod}`);
    slice("remote", [{ ip: a2, node: "node-a" }]);
    await a().h.start();
    await eventually(() => tcp(a1, "10.96.1.1", 80).startsWith("a2"), "the change made while away");
  });

  it('switching "services" to "kube-proxy" removes the table without a restart; back to "driver" writes it again', async () => {
    const a1 = a().h.netnsName(1);
    service("switch", "10.96.1.30");
    slice("switch", [{ ip: a2, node: "node-a" }]);
    await eventually(() => tcp(a1, "10.96.1.30", 80).startsWith("a2"), "the Service");
    await configureAll({
      crossNode: "host-gw",
      clusterCidr: "10.244.0.0/16",
      services: "kube-proxy",
    });
    for (const m of members)
      await eventually(
        () => !table(m).includes("cni-driver-services"),
        `${m.node.name}'s table gone`,
      );
    expect(tcp(a1, "10.96.1.30", 80)).to.not.match(/^a2/);
    // kube-proxy's bridge settings back, the steering gone.
    await eventually(
      () => bridgeSettings(a().node.netns, a().h.bridge).netfilter === "1",
      "br_netfilter back on the bridge",
    );
    expect(bridgeSettings(a().node.netns, a().h.bridge)).to.deep.equal({
      netfilter: "1",
      hairpin: ["on", "on"],
    });
    expect(inNs(a().node.netns, ["nft", "list", "tables"]).stdout).not.to.contain(
      "cni-driver-steer",
    );
    await configureAll({ crossNode: "host-gw", clusterCidr: "10.244.0.0/16", services: "driver" });
    await eventually(() => tcp(a1, "10.96.1.30", 80).startsWith("a2"), "back");
  });
});
