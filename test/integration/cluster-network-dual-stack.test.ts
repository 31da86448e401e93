/**
 * IPv6 pod ranges across the VXLAN tunnel: two nodes whose Nodes carry an IPv4
 * and an IPv6 pod CIDR but only IPv4 addresses, one behind a router, so that
 * `crossNode: "auto"` reaches the other over VXLAN. The tunnel runs over the
 * nodes' IPv4 addresses and carries both families: each IPv6 pod CIDR gets a
 * route via the peer's IPv6 VTEP address, a neighbour for it, and shares the
 * peer's one forwarding entry; pods ping each other over both families. IPv6
 * traffic leaving clusterCidrIPv6 is masqueraded to the node's IPv6 address.
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect } from "chai";
import { VXLAN_DEVICE } from "../../src/driver/cluster-network/settings.js";
import {
  type ClusterMember,
  ClusterUnderlay,
  driverRoutes,
  inNs,
  printMemberLogs,
  tearDownCluster,
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

const fdb = (ns: string): string[] => vxlanFdb(ns).map((e) => `${e.mac} ${e.dst}`);
const neighbours = (ns: string): string[] =>
  vxlanNeighbours(ns)
    .map((n) => `${n.ip} ${n.mac}`)
    .sort();

const ECHO_PORT = 7071;
/** Documentation addresses (2001:db8::/32) on the underlay's segment. */
const NODE_A_V6 = "2001:db8::31";
const OUTSIDE_V6 = "2001:db8::200";

describe("cluster network, dual stack: IPv6 pod ranges over the IPv4 VXLAN tunnel", function () {
  this.timeout(180_000);
  let root: string;
  let ul: ClusterUnderlay;
  let server: FakeKubeApiServer;
  const members: ClusterMember[] = [];
  const pod6 = new Map<ClusterMember, string>();
  const v6Cidr = (m: ClusterMember) => `fd00:10:244:${m.h.opts.subnetOctet}::/64`;

  before(async function () {
    requireRoot(this);
    requireCommand(this, "nft", "nftables");
    requireCommand(this, "bridge", "iproute2");
    root = mkdtempSync(join(tmpdir(), "cni-driver-dual-"));
    ul = new ClusterUnderlay(root);
    server = await startFakeKubeApiServer();
    const kubeconfig = await ul.exposeApi(Number(new URL(server.url).port), server.kubeconfig());
    const nodes = [ul.addNode("node-a", 31), ul.addRoutedNode("node-d", 34)];
    for (const [i, node] of nodes.entries()) {
      // Routing pods' IPv6 traffic is the node's to allow (the driver leaves it to the operator).
      inNs(node.netns, ["sysctl", "-qw", "net.ipv6.conf.all.forwarding=1"]);
      const octet = 181 + i;
      const h = new DriverHarness({
        subnetOctet: octet,
        netns: node.netns,
        mtu: 1450,
        extraFlags: [
          // Both families (the harness gives the IPv4 one alone; the last --pod-cidr wins).
          "--pod-cidr",
          `10.244.${octet}.0/24,fd00:10:244:${octet}::/64`,
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
      const conflist = m.h.conflist() as { plugins: Array<{ ipam?: Record<string, unknown> }> };
      const ipam = conflist.plugins[0]?.ipam as Record<string, unknown>;
      ipam.ranges = [[{ subnet: "usePodCidr" }], [{ subnet: "usePodCidrIPv6" }]];
      await m.h.writeConfig({
        "pod-network.conflist": JSON.stringify(conflist),
        "driver.json": JSON.stringify({
          crossNode: "auto",
          clusterCidr: "10.244.0.0/16",
          clusterCidrIPv6: "fd00:10:244::/48",
        }),
      });
      server.put("nodes", {
        metadata: { name: m.node.name },
        spec: { podCIDR: m.h.subnet, podCIDRs: [m.h.subnet, v6Cidr(m)] },
        status: { addresses: [{ type: "InternalIP", address: m.node.address }] },
      });
    }
    for (const m of members) await m.h.start();
    for (const m of members) {
      createNetns(m.h.netnsName(1));
      const res = await m.h.client.setUpPod(m.h.podRequest(1));
      expectNoCniError(res);
      const ips = (res.result?.ips ?? []).map((ip) => ip.address.split("/")[0] as string);
      m.pod = ips.find((a) => !a.includes(":")) ?? "";
      pod6.set(m, ips.find((a) => a.includes(":")) ?? "");
    }
  });

  afterEach(function () {
    if (this.currentTest?.state !== "failed") return;
    printMemberLogs(members);
  });

  after(() => tearDownCluster(members, ul, server, root));

  it("each node routes the other's IPv6 pod CIDR via its IPv6 VTEP address through the tunnel, and pods ping each other over both families", async () => {
    const [a, d] = members as [ClusterMember, ClusterMember];
    expect(pod6.get(a), "node-a's pod has an IPv6 address").to.match(/^fd00:10:244:181::/);
    expect(pod6.get(d), "node-d's pod has an IPv6 address").to.match(/^fd00:10:244:182::/);
    for (const [m, peer] of [
      [a, d],
      [d, a],
    ] as const) {
      const vtep6 = `fd00:10:244:${peer.h.opts.subnetOctet}::`;
      await eventually(
        () =>
          driverRoutes(m.node.netns, 6).some(
            (r) =>
              r.dst === v6Cidr(peer) &&
              r.gateway === vtep6 &&
              r.dev === VXLAN_DEVICE &&
              r.flags?.includes("onlink"),
          ),
        `${m.node.name}: ${v6Cidr(peer)} via ${vtep6} dev ${VXLAN_DEVICE} onlink`,
      );
      const peerMac = JSON.parse(
        inNs(peer.node.netns, ["ip", "-j", "link", "show", VXLAN_DEVICE]).stdout,
      )[0].address as string;
      await eventually(
        () => neighbours(m.node.netns).includes(`${vtep6} ${peerMac}`),
        `${m.node.name}: the neighbour ${vtep6} → ${peerMac}`,
      );
      // One forwarding entry per peer, whatever the families it carries.
      expect(fdb(m.node.netns)).to.deep.equal([`${peerMac} ${peer.node.address}`]);
      const own = (
        JSON.parse(
          inNs(m.node.netns, ["ip", "-j", "-6", "addr", "show", "dev", VXLAN_DEVICE]).stdout,
        )[0].addr_info as Array<{ local?: string; prefixlen?: number; scope?: string }>
      )
        .filter((x) => x.local && x.scope === "global")
        .map((x) => `${x.local}/${x.prefixlen}`);
      expect(own, `${m.node.name}'s own IPv6 VTEP address`).to.deep.equal([
        `fd00:10:244:${m.h.opts.subnetOctet}::/128`,
      ]);
    }
    // Addresses just made are tentative for a moment (duplicate address detection).
    await eventually(
      () => pingFrom(a.h.netnsName(1), pod6.get(d) as string),
      "node-a's pod → node-d's over IPv6",
    );
    await eventually(
      () => pingFrom(d.h.netnsName(1), pod6.get(a) as string),
      "node-d's pod → node-a's over IPv6",
    );
    expect(pingFrom(a.h.netnsName(1), d.pod), "and over IPv4").to.equal(true);
  });

  it("a pod's IPv6 traffic leaving clusterCidrIPv6 reaches the outside from the node's IPv6 address; inside it, the pod keeps its own", async () => {
    const [a, d] = members as [ClusterMember, ClusterMember];
    // node-a and the outside share the underlay's segment in IPv6 too.
    inNs(a.node.netns, ["ip", "addr", "add", `${NODE_A_V6}/64`, "dev", "eth0", "nodad"]);
    inNs(ul.outside, ["ip", "addr", "add", `${OUTSIDE_V6}/64`, "dev", "eth0", "nodad"]);
    await ul.startPeerEcho(ul.outside, ECHO_PORT, "::");
    await eventually(
      () => ul.tcpFrom(a.h.netnsName(1), OUTSIDE_V6, ECHO_PORT) === NODE_A_V6,
      "the outside sees node-a's IPv6 address",
    );
    await ul.startPeerEcho(d.h.netnsName(1), ECHO_PORT, "::");
    expect(ul.tcpFrom(a.h.netnsName(1), pod6.get(d) as string, ECHO_PORT), "pod to pod").to.equal(
      pod6.get(a),
    );
  });
});
