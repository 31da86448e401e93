/**
 * The cluster network across a router: three nodes on one underlay subnet and
 * a fourth on another subnet, reached only through a router namespace. In
 * `crossNode: "auto"` the three route each other's pods directly (host-gw) and
 * reach the fourth through VXLAN, as it reaches them; pods talk across with
 * their own addresses (no masquerade inside clusterCidr). Then a driver is
 * stopped and started again: its node's pods stay reachable throughout, and
 * at start it removes what is stale and leaves what is live in place.
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect } from "chai";
import { ROUTE_PROTOCOL } from "../../src/driver/cluster-network/plan.js";
import { VXLAN_DEVICE } from "../../src/driver/cluster-network/settings.js";
import {
  type ClusterMember,
  ClusterUnderlay,
  driverRoutes,
  inNs,
  printMemberLogs,
  startMembers,
  tearDownCluster,
  UNDERLAY,
  vxlanFdb,
  vxlanNeighbours,
} from "../support/cluster-nodes.js";
import { DriverHarness, expectNoCniError } from "../support/driver-harness.js";
import { type FakeKubeApiServer, startFakeKubeApiServer } from "../support/fake-kube-apiserver.js";
import { createNetns, pingFrom } from "../support/netns.js";
import { requireCommand, requireRoot } from "../support/requirements.js";
import { until } from "../support/until.js";

const eventually = <T>(probe: () => T | undefined | null | false, what: string) =>
  until(probe, what, 30_000);

const ECHO_PORT = 7070;

type Member = ClusterMember;

const routes = (ns: string) => driverRoutes(ns);

const routeTo = (ns: string, dst: string) => routes(ns).find((r) => r.dst === dst);

function vxlanIfindex(ns: string): number | undefined {
  const r = inNs(ns, ["ip", "-j", "link", "show", VXLAN_DEVICE]);
  return r.status === 0 ? JSON.parse(r.stdout)[0]?.ifindex : undefined;
}

const fdbDsts = (ns: string): string[] =>
  vxlanFdb(ns)
    .map((e) => e.dst)
    .sort();
const neighbours = (ns: string): string[] =>
  vxlanNeighbours(ns)
    .map((n) => n.ip)
    .sort();

describe("cluster network across a router: a fourth node off the underlay's subnet (auto picks VXLAN), and a driver restart", function () {
  this.timeout(180_000);
  let root: string;
  let ul: ClusterUnderlay;
  let server: FakeKubeApiServer;
  const members: Member[] = [];
  const clusterCidr = "10.244.0.0/16";

  const nodeObject = (m: Member) => ({
    metadata: { name: m.node.name },
    spec: { podCIDR: m.h.subnet, podCIDRs: [m.h.subnet] },
    status: { addresses: [{ type: "InternalIP", address: m.node.address }] },
  });

  before(async function () {
    requireRoot(this);
    requireCommand(this, "nft", "nftables");
    requireCommand(this, "bridge", "iproute2");
    root = mkdtempSync(join(tmpdir(), "cni-driver-routed-"));
    ul = new ClusterUnderlay(root);
    server = await startFakeKubeApiServer();
    const kubeconfig = await ul.exposeApi(Number(new URL(server.url).port), server.kubeconfig());
    const nodes = [
      ul.addNode("node-a", 21),
      ul.addNode("node-b", 22),
      ul.addNode("node-c", 23),
      ul.addRoutedNode("node-d", 24),
    ];
    for (const [i, node] of nodes.entries()) {
      const h = new DriverHarness({
        subnetOctet: 171 + i,
        netns: node.netns,
        // Room for VXLAN's 50 bytes on a 1500 underlay.
        mtu: 1450,
        extraFlags: [
          "--kubeconfig",
          kubeconfig,
          "--node-name",
          node.name,
          "--node-link-resync",
          "1",
        ],
      });
      members.push({ node, h, pod: "" });
    }
    for (const m of members) {
      await m.h.writeConfig({
        "pod-network.conflist": JSON.stringify(m.h.conflist()),
        "driver.json": JSON.stringify({ crossNode: "auto", clusterCidr }),
      });
      server.put("nodes", nodeObject(m));
    }
    await startMembers(members);
  });

  afterEach(function () {
    if (this.currentTest?.state !== "failed") return;
    printMemberLogs(members);
  });

  after(() => tearDownCluster(members, ul, server, root));

  const [a, b, c, d] = [0, 1, 2, 3].map((i) => () => members[i] as Member) as [
    () => Member,
    () => Member,
    () => Member,
    () => Member,
  ];
  const onLink = () => [a(), b(), c()];

  /** Every node's whole routing state as auto mode makes it here. */
  function settled(): boolean {
    for (const m of onLink()) {
      for (const peer of onLink().filter((p) => p !== m)) {
        if (routeTo(m.node.netns, peer.h.subnet)?.gateway !== peer.node.address) return false;
      }
      if (routeTo(m.node.netns, d().h.subnet)?.dev !== VXLAN_DEVICE) return false;
      if (!fdbDsts(m.node.netns).includes(d().node.address)) return false;
    }
    for (const peer of onLink()) {
      if (routeTo(d().node.netns, peer.h.subnet)?.dev !== VXLAN_DEVICE) return false;
    }
    return (
      fdbDsts(d().node.netns).join() ===
      onLink()
        .map((m) => m.node.address)
        .sort()
        .join()
    );
  }

  it("auto: host-gw among the underlay's nodes, VXLAN to and from the routed one; its pods reach the others' with their own source address", async () => {
    await eventually(settled, "host-gw on the underlay, VXLAN to node-d and back");
    // The on-link peers never went through VXLAN: no forwarding entries for them.
    for (const m of onLink()) expect(fdbDsts(m.node.netns)).to.deep.equal([d().node.address]);
    const dPod = d().h.netnsName(1);
    for (const m of onLink()) {
      expect(pingFrom(dPod, m.pod), `node-d's pod → ${m.node.name}'s`).to.equal(true);
      expect(pingFrom(m.h.netnsName(1), d().pod), `${m.node.name}'s pod → node-d's`).to.equal(true);
    }
    // Each side sees the other's pod address: nothing masqueraded inside clusterCidr.
    await ul.startPeerEcho(a().h.netnsName(1), ECHO_PORT);
    await ul.startPeerEcho(dPod, ECHO_PORT);
    expect(ul.tcpFrom(dPod, a().pod, ECHO_PORT)).to.equal(d().pod);
    expect(ul.tcpFrom(b().h.netnsName(1), d().pod, ECHO_PORT)).to.equal(b().pod);
    expect(ul.tcpFrom(c().h.netnsName(1), d().pod, ECHO_PORT)).to.equal(c().pod);
  });

  it("a driver restarted keeps its pods reachable all along, removes only stale state, and re-creates nothing live", async () => {
    await eventually(settled, "settled before the restart");
    const ns = a().node.netns;
    const ifindex = vxlanIfindex(ns);
    const liveRoutes = routes(ns);
    const liveFdb = fdbDsts(ns);
    const liveNeighbours = neighbours(ns);
    expect(ifindex).to.be.a("number");
    await a().h.stop();
    // While it is away its node's pods are reached as before.
    expect(pingFrom(d().h.netnsName(1), a().pod)).to.equal(true);
    expect(pingFrom(b().h.netnsName(1), a().pod)).to.equal(true);
    // Stale state of the driver's (a Node deleted meanwhile), and the operator's own.
    const sh = (line: string) => inNs(ns, line.split(" "));
    sh(`ip route add 10.244.250.0/24 via ${UNDERLAY}.99 proto ${ROUTE_PROTOCOL}`);
    sh(`bridge fdb append 0a:58:00:00:00:99 dev ${VXLAN_DEVICE} dst ${UNDERLAY}.99 self permanent`);
    sh(`ip neigh add 10.244.251.0 lladdr 0a:58:00:00:00:99 dev ${VXLAN_DEVICE} nud permanent`);
    sh(`ip route add 10.252.0.0/24 via ${UNDERLAY}.98 proto static`);
    expect(fdbDsts(ns)).to.include(`${UNDERLAY}.99`);
    await a().h.start();
    await eventually(
      () =>
        !routeTo(ns, "10.244.250.0/24") &&
        !fdbDsts(ns).includes(`${UNDERLAY}.99`) &&
        !neighbours(ns).includes("10.244.251.0"),
      "the stale route, forwarding entry and neighbour removed",
    );
    expect(vxlanIfindex(ns), "the same VXLAN device").to.equal(ifindex);
    expect(routes(ns)).to.deep.equal(liveRoutes);
    expect(fdbDsts(ns)).to.deep.equal(liveFdb);
    expect(neighbours(ns)).to.deep.equal(liveNeighbours);
    const operators = JSON.parse(inNs(ns, ["ip", "-j", "route", "show", "10.252.0.0/24"]).stdout);
    expect(operators, "the operator's route").to.have.length(1);
    inNs(ns, ["ip", "route", "del", "10.252.0.0/24"]);
    expect(pingFrom(d().h.netnsName(1), a().pod)).to.equal(true);
    expect(pingFrom(a().h.netnsName(1), c().pod)).to.equal(true);
    expect((await a().h.client.checkPod(a().h.podRequest(1))).error).to.equal(null);
  });
  it("a network that sets no mtu gets VXLAN's (the node's MTU less 50) on a node that reaches others over VXLAN, and full-size packets cross", async () => {
    const m = d();
    const conflist = m.h.conflist() as { plugins: Array<Record<string, unknown>> };
    for (const p of conflist.plugins) delete p.mtu;
    const loaded = async () => (await m.h.client.cniStatus({})).config?.generation ?? 0;
    const generation = await loaded();
    await m.h.writeConfig({
      "pod-network.conflist": JSON.stringify(conflist),
      "driver.json": JSON.stringify({ crossNode: "auto", clusterCidr }),
    });
    await eventually(async () => (await loaded()) > generation, "the config without mtu loaded");
    createNetns(m.h.netnsName(2));
    const res = await m.h.client.setUpPod(m.h.podRequest(2));
    expectNoCniError(res);
    const underlayMtu = JSON.parse(
      inNs(m.node.netns, ["ip", "-j", "link", "show", VXLAN_DEVICE]).stdout,
    )[0].mtu as number;
    expect(underlayMtu, "the VXLAN device's MTU").to.equal(1450);
    expect(res.result?.interfaces.find((i) => i.sandbox)?.mtu, "the result's").to.equal(1450);
    const inPod = JSON.parse(
      inNs(m.h.netnsName(2), ["ip", "-j", "link", "show", "eth0"]).stdout,
    )[0];
    expect(inPod.mtu, "the pod's interface").to.equal(1450);
    // 1422 bytes of ICMP payload + 28 of headers = 1450, with Don't Fragment: through the tunnel whole.
    const ping = inNs(m.h.netnsName(2), ["ping", "-c1", "-W2", "-M", "do", "-s", "1422", a().pod]);
    expect(ping.status, ping.stdout + ping.stderr).to.equal(0);
  });
});
