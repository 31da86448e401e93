/**
 * The kernel datapath as a cluster network, end to end: three nodes (network
 * namespaces on one underlay bridge), each running its own `cni-driver serve`
 * against the fake API server, real pods on each, and real ping and TCP
 * between them — over host-gw routes, over VXLAN, and out to an "outside"
 * namespace through the masquerade, and through Services written as
 * kube-proxy writes them. Nodes are added, changed and deleted
 * through the API while the drivers run, and while one is stopped.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect } from "chai";
import { VTEP_MAC_ANNOTATION } from "../../src/driver/cluster-network/nodes.js";
import { ROUTE_PROTOCOL } from "../../src/driver/cluster-network/plan.js";
import { VXLAN_DEVICE } from "../../src/driver/cluster-network/settings.js";
import {
  type ClusterMember,
  ClusterUnderlay,
  vxlanFdb as fdb,
  inNs,
  OUTSIDE_ADDRESS,
  printMemberLogs,
  driverRoutes as routes,
  startMembers,
  type TestNode,
  tearDownCluster,
  UNDERLAY,
} from "../support/cluster-nodes.js";
import { DriverHarness, expectNoCniError } from "../support/driver-harness.js";
import { type FakeKubeApiServer, startFakeKubeApiServer } from "../support/fake-kube-apiserver.js";
import { kubeProxyNftables } from "../support/kube-proxy.js";
import { createNetns, pingFrom } from "../support/netns.js";
import { CONTAINER_PORT, startPodServer, stopPodServer } from "../support/pod-server.js";
import { requireCommand, requireRoot } from "../support/requirements.js";
import { until } from "../support/until.js";

/** A bounded wait, roomy enough for three drivers on a busy two-core machine. */
const eventually = <T>(probe: () => T | undefined | null | false, what: string) =>
  until(probe, what, 30_000);

type Member = ClusterMember;

function routeTo(ns: string, dst: string) {
  return routes(ns).find((r) => r.dst === dst);
}

function vxlanInfo(
  ns: string,
): { mac: string; vni: number; port: number; local: string; mtu: number } | undefined {
  const r = inNs(ns, ["ip", "-j", "-d", "link", "show", VXLAN_DEVICE]);
  if (r.status !== 0) return undefined;
  const l = JSON.parse(r.stdout)[0];
  const d = l.linkinfo.info_data;
  return { mac: l.address, vni: d.id, port: d.port, local: d.local, mtu: l.mtu };
}

function txPackets(ns: string, dev: string): number {
  const r = inNs(ns, ["cat", `/sys/class/net/${dev}/statistics/tx_packets`]);
  return Number(r.stdout.trim());
}

/** Whether the masquerade's table is there (not NetworkPolicy's, inet cni-driver-policy). */
function hasMasqueradeTable(ns: string): boolean {
  return /^table inet cni-driver$/m.test(nftTables(ns));
}

function nftTables(ns: string): string {
  return inNs(ns, ["nft", "list", "tables"]).stdout;
}

describe("cluster network: routes between nodes, VXLAN, masquerade (three node namespaces)", function () {
  this.timeout(120_000);
  let root: string;
  let ul: ClusterUnderlay;
  let server: FakeKubeApiServer;
  const members: Member[] = [];
  let kubeconfig: string;
  const clusterCidr = "10.244.0.0/16";

  const nodeObject = (m: { node: TestNode; h: DriverHarness }, address = m.node.address) => ({
    metadata: { name: m.node.name },
    spec: { podCIDR: m.h.subnet, podCIDRs: [m.h.subnet] },
    status: {
      addresses: [
        { type: "InternalIP", address },
        { type: "Hostname", address: m.node.name },
      ],
    },
  });

  /** Writes driver.json (and the network) on every node: each driver reloads. */
  async function configureAll(driverJson: Record<string, unknown>): Promise<void> {
    for (const m of members) {
      await m.h.writeConfig({
        "pod-network.conflist": JSON.stringify(m.h.conflist()),
        "driver.json": JSON.stringify(driverJson),
      });
    }
  }

  before(async function () {
    requireRoot(this);
    requireCommand(this, "nft", "nftables");
    requireCommand(this, "bridge", "iproute2");
    root = mkdtempSync(join(tmpdir(), "cni-driver-cluster-"));
    ul = new ClusterUnderlay(root);
    server = await startFakeKubeApiServer();
    kubeconfig = await ul.exposeApi(Number(new URL(server.url).port), server.kubeconfig());
    for (const [i, name] of ["node-a", "node-b", "node-c"].entries()) {
      const node = ul.addNode(name, 11 + i);
      const h = new DriverHarness({
        subnetOctet: 161 + i,
        netns: node.netns,
        extraFlags: ["--kubeconfig", kubeconfig, "--node-name", name, "--node-link-resync", "1"],
      });
      members.push({ node, h, pod: "" });
    }
    await configureAll({ crossNode: "host-gw", clusterCidr });
    for (const m of members) server.put("nodes", nodeObject(m));
    await startMembers(members);
  });

  afterEach(function () {
    if (this.currentTest?.state !== "failed") return;
    printMemberLogs(members);
  });

  after(() => tearDownCluster(members, ul, server, root));

  const a = () => members[0] as Member;
  const b = () => members[1] as Member;
  const c = () => members[2] as Member;

  it("host-gw: each node routes every other node's pod CIDR via its address, tagged with the driver's protocol; pods ping and talk TCP across nodes", async () => {
    for (const m of members) {
      for (const peer of members.filter((p) => p !== m)) {
        const r = await eventually(
          () => routeTo(m.node.netns, peer.h.subnet),
          `${m.node.name}: route to ${peer.node.name}`,
        );
        expect(r.gateway).to.equal(peer.node.address);
      }
      // Its own pod CIDR is on its bridge, never routed by the driver.
      expect(routeTo(m.node.netns, m.h.subnet)).to.equal(undefined);
    }
    expect(pingFrom(a().h.netnsName(1), b().pod)).to.equal(true);
    expect(pingFrom(a().h.netnsName(1), c().pod)).to.equal(true);
    expect(pingFrom(c().h.netnsName(1), a().pod)).to.equal(true);
    const srv = await startPodServer(b().h.netnsName(1), "hello from b");
    try {
      expect(ul.tcpFrom(a().h.netnsName(1), b().pod, CONTAINER_PORT)).to.equal("hello from b");
    } finally {
      await stopPodServer(srv);
    }
  });

  it("a Node deleted loses its routes on every other node at once; back at a new address, the routes follow it", async () => {
    server.remove("nodes", undefined, c().node.name);
    for (const m of [a(), b()])
      await eventually(
        () => !routeTo(m.node.netns, c().h.subnet),
        `${m.node.name}: route to node-c removed`,
      );
    expect(pingFrom(a().h.netnsName(1), c().pod)).to.equal(false);
    // node-c comes back with another address on the underlay.
    const moved = `${UNDERLAY}.23`;
    inNs(c().node.netns, ["ip", "addr", "add", `${moved}/24`, "dev", "eth0"]);
    server.put("nodes", nodeObject(c(), moved));
    for (const m of [a(), b()])
      await eventually(
        () => routeTo(m.node.netns, c().h.subnet)?.gateway === moved,
        `${m.node.name}: route to node-c via ${moved}`,
      );
    // node-c kept its own routes while its Node was away.
    expect(routeTo(c().node.netns, a().h.subnet)?.gateway).to.equal(a().node.address);
    expect(pingFrom(a().h.netnsName(1), c().pod)).to.equal(true);
    server.put("nodes", nodeObject(c()));
    await eventually(
      () => routeTo(a().node.netns, c().h.subnet)?.gateway === c().node.address,
      "route back to node-c's first address",
    );
  });

  it("at start, routes of Nodes deleted while the driver was away are removed; routes it did not make are left alone", async () => {
    const ns = a().node.netns;
    await a().h.stop();
    server.remove("nodes", undefined, b().node.name);
    // A Node the driver routed to once, deleted long ago; and two routes of the operator's.
    inNs(ns, [
      "ip",
      "route",
      "add",
      "10.244.250.0/24",
      "via",
      `${UNDERLAY}.99`,
      "proto",
      String(ROUTE_PROTOCOL),
    ]);
    inNs(ns, ["ip", "route", "add", "10.251.0.0/24", "via", `${UNDERLAY}.98`, "proto", "static"]);
    await a().h.start();
    await eventually(
      () => !routeTo(ns, b().h.subnet) && !routeTo(ns, "10.244.250.0/24"),
      "stale routes removed at start",
    );
    expect(routeTo(ns, c().h.subnet)?.gateway).to.equal(c().node.address);
    const all = JSON.parse(
      inNs(ns, ["ip", "-j", "route", "show", "10.251.0.0/24"]).stdout,
    ) as unknown[];
    expect(all, "the operator's route").to.have.length(1);
    // node-b's pod CIDR routed by someone else: the driver leaves that route be.
    inNs(ns, ["ip", "route", "add", b().h.subnet, "via", `${UNDERLAY}.97`, "proto", "static"]);
    server.put("nodes", nodeObject(b()));
    await eventually(() => routeTo(b().node.netns, a().h.subnet), "node-b routes to node-a again");
    await eventually(
      () => a().h.logs.includes("is not the driver's: left alone"),
      "the conflict logged",
    );
    const kept = JSON.parse(inNs(ns, ["ip", "-j", "route", "show", b().h.subnet]).stdout) as Array<{
      gateway: string;
    }>;
    expect(kept.map((r) => r.gateway)).to.deep.equal([`${UNDERLAY}.97`]);
    inNs(ns, ["ip", "route", "del", b().h.subnet, "proto", "static"]);
    inNs(ns, ["ip", "route", "del", "10.251.0.0/24"]);
    await eventually(
      () => routeTo(ns, b().h.subnet)?.gateway === b().node.address,
      "node-a routes to node-b once the way is free (resync)",
    );
  });

  it("vxlan: midokube-vxlan with the configured VNI and port on every node, its MAC on the Node, routes, neighbours and forwarding entries per peer; pods talk across it", async () => {
    await configureAll({ crossNode: "vxlan", vxlan: { vni: 42, port: 4799 }, clusterCidr });
    for (const m of members) {
      const info = await eventually(
        () => vxlanInfo(m.node.netns),
        `${m.node.name}: ${VXLAN_DEVICE}`,
      );
      expect(info).to.include({ vni: 42, port: 4799, local: m.node.address });
      await eventually(
        () =>
          server.get("nodes", undefined, m.node.name)?.metadata?.annotations?.[
            VTEP_MAC_ANNOTATION
          ] === info.mac,
        `${m.node.name}'s ${VTEP_MAC_ANNOTATION}`,
      );
    }
    for (const m of members) {
      for (const peer of members.filter((p) => p !== m)) {
        const r = await eventually(() => {
          const r = routeTo(m.node.netns, peer.h.subnet);
          return r?.dev === VXLAN_DEVICE ? r : undefined;
        }, `${m.node.name}: route to ${peer.node.name} through ${VXLAN_DEVICE}`);
        expect(r.gateway).to.equal(peer.h.subnet.replace("/24", ""));
        expect(r.flags).to.include("onlink");
        const peerMac = vxlanInfo(peer.node.netns)?.mac;
        await eventually(
          () => fdb(m.node.netns).some((e) => e.mac === peerMac && e.dst === peer.node.address),
          `${m.node.name}: fdb entry for ${peer.node.name}`,
        );
      }
    }
    // A forwarding entry removed behind the driver's back comes back at the next resync.
    const lost = fdb(a().node.netns).find((e) => e.dst === b().node.address);
    expect(lost).to.not.equal(undefined);
    inNs(a().node.netns, [
      "bridge",
      "fdb",
      "del",
      lost?.mac ?? "",
      "dev",
      VXLAN_DEVICE,
      "dst",
      lost?.dst ?? "",
      "self",
    ]);
    expect(fdb(a().node.netns).some((e) => e.dst === b().node.address)).to.equal(false);
    await eventually(
      () => fdb(a().node.netns).some((e) => e.dst === b().node.address),
      "node-b's forwarding entry put back",
    );
    // The network sets an MTU of 1500 itself, over an underlay of 1500: kept, and the operator is told.
    expect(vxlanInfo(a().node.netns)?.mtu).to.equal(1450);
    await eventually(
      () => a().h.logs.includes("1500 is more than midokube-vxlan's 1450: packets that large"),
      "the MTU warning",
    );
    const before = txPackets(a().node.netns, VXLAN_DEVICE);
    expect(pingFrom(a().h.netnsName(1), b().pod)).to.equal(true);
    expect(pingFrom(c().h.netnsName(1), a().pod)).to.equal(true);
    expect(txPackets(a().node.netns, VXLAN_DEVICE)).to.be.greaterThan(before);
    const srv = await startPodServer(c().h.netnsName(1), "hello over vxlan");
    try {
      expect(ul.tcpFrom(b().h.netnsName(1), c().pod, CONTAINER_PORT)).to.equal("hello over vxlan");
    } finally {
      await stopPodServer(srv);
    }
  });

  it("vxlan: a Node deleted takes its route, neighbour and forwarding entry with it", async () => {
    server.remove("nodes", undefined, c().node.name);
    const ns = a().node.netns;
    await eventually(
      () => !routeTo(ns, c().h.subnet) && !fdb(ns).some((e) => e.dst === c().node.address),
      "node-c's entries gone on node-a",
    );
    const neigh = JSON.parse(
      inNs(ns, ["ip", "-j", "neigh", "show", "dev", VXLAN_DEVICE]).stdout,
    ) as Array<{ dst: string }>;
    expect(neigh.map((n) => n.dst)).to.not.include(c().h.subnet.replace("/24", ""));
    server.put("nodes", nodeObject(c()));
    await eventually(() => routeTo(ns, c().h.subnet), "node-c routed again");
  });

  it("auto: host-gw to peers on the node's own subnet, vxlan to the others", async () => {
    // node-c moves to another subnet, reached through the underlay acting as a router.
    const far = "198.51.100.13";
    inNs(ul.underlay, ["ip", "addr", "add", "198.51.100.254/24", "dev", "ul"]);
    inNs(ul.underlay, ["sysctl", "-qw", "net.ipv4.ip_forward=1"]);
    inNs(c().node.netns, ["ip", "addr", "add", `${far}/24`, "dev", "eth0"]);
    for (const m of [a(), b()])
      inNs(m.node.netns, ["ip", "route", "add", "198.51.100.0/24", "via", ul.apiAddress]);
    server.put("nodes", nodeObject(c(), far));
    await configureAll({ crossNode: "auto", clusterCidr });
    const ns = a().node.netns;
    // Each node's whole state at once: the mode switch re-creates every VXLAN device
    // (the port went back to its default), and routes through a device go with it.
    const through = (m: Member, peer: Member) => {
      const r = routeTo(m.node.netns, peer.h.subnet);
      return r?.dev === VXLAN_DEVICE && vxlanInfo(m.node.netns)?.port === 4789;
    };
    await eventually(
      () =>
        fdb(ns).some((e) => e.dst === far) &&
        through(a(), c()) &&
        routeTo(ns, b().h.subnet)?.gateway === b().node.address,
      "node-a: node-b by host-gw, node-c through vxlan at its far address",
    );
    await eventually(
      () => fdb(b().node.netns).some((e) => e.dst === far) && through(b(), c()),
      "node-b: node-c through vxlan",
    );
    // node-c sees both others on its own subnet; its endpoint moved to its new address.
    await eventually(
      () =>
        vxlanInfo(c().node.netns)?.local === far &&
        routeTo(c().node.netns, a().h.subnet)?.gateway === a().node.address &&
        routeTo(c().node.netns, b().h.subnet)?.gateway === b().node.address,
      "node-c: both others by host-gw, its VTEP at its far address",
    );
    expect(pingFrom(a().h.netnsName(1), b().pod)).to.equal(true);
    expect(pingFrom(a().h.netnsName(1), c().pod)).to.equal(true);
    expect(pingFrom(c().h.netnsName(1), b().pod)).to.equal(true);
  });

  it("host-gw again: the VXLAN device goes, with its Node annotation", async () => {
    server.put("nodes", nodeObject(c()));
    await configureAll({ crossNode: "host-gw", clusterCidr });
    for (const m of members) {
      await eventually(() => !vxlanInfo(m.node.netns), `${m.node.name}: ${VXLAN_DEVICE} removed`);
      await eventually(
        () =>
          server.get("nodes", undefined, m.node.name)?.metadata?.annotations?.[
            VTEP_MAC_ANNOTATION
          ] === undefined,
        `${m.node.name}: annotation removed`,
      );
    }
    await eventually(
      () => routeTo(a().node.netns, c().h.subnet)?.gateway === c().node.address,
      "node-c by host-gw",
    );
    expect(pingFrom(a().h.netnsName(1), c().pod)).to.equal(true);
  });

  it("masquerade: pod traffic leaving clusterCidr reaches the outside from the node's address; nonMasqueradeCidrs keep the pod's; off removes the table", async () => {
    const port = 18_080;
    const echo = await ul.startPeerEcho(ul.outside, port);
    try {
      await eventually(() => hasMasqueradeTable(a().node.netns), "the masquerade table");
      expect(ul.tcpFrom(a().h.netnsName(1), OUTSIDE_ADDRESS, port)).to.equal(a().node.address);
      // Removed behind the driver's back: the next resync writes it again.
      inNs(a().node.netns, ["nft", "delete", "table", "inet", "cni-driver"]);
      await eventually(() => hasMasqueradeTable(a().node.netns), "the masquerade table put back");
      // Exempt the outside: it must route the pods' range back itself.
      inNs(ul.outside, ["ip", "route", "add", clusterCidr, "via", a().node.address]);
      await configureAll({
        crossNode: "host-gw",
        clusterCidr,
        nonMasqueradeCidrs: [`${OUTSIDE_ADDRESS}/32`],
      });
      await eventually(
        () => ul.tcpFrom(a().h.netnsName(1), OUTSIDE_ADDRESS, port) === a().pod,
        "the pod's own address seen outside",
      );
      await configureAll({ crossNode: "host-gw", clusterCidr, masquerade: false });
      for (const m of members)
        await eventually(() => !hasMasqueradeTable(m.node.netns), `${m.node.name}: table removed`);
      expect(ul.tcpFrom(a().h.netnsName(1), OUTSIDE_ADDRESS, port)).to.equal(a().pod);
    } finally {
      echo.kill("SIGKILL");
    }
  });
  it("without nft the masquerade fails, logged and retried, and the routes are made all the same", async () => {
    const ns = a().node.netns;
    await configureAll({ crossNode: "host-gw", clusterCidr });
    await a().h.stop();
    inNs(ns, ["ip", "route", "del", b().h.subnet, "proto", String(ROUTE_PROTOCOL)]);
    process.env.CNI_DRIVER_NFT_BIN = "/nonexistent/nft";
    try {
      await a().h.start();
    } finally {
      delete process.env.CNI_DRIVER_NFT_BIN;
    }
    await eventually(() => routeTo(ns, b().h.subnet), "node-a routes to node-b");
    await eventually(
      () => a().h.logs.includes("nftables is not installed"),
      "the masquerade's failure logged",
    );
    await a().h.stop();
    await a().h.start();
    await eventually(() => hasMasqueradeTable(ns), "the table, with nft back");
  });

  it("Services through kube-proxy's DNAT rules (iptables and nftables modes): to a pod on another node, to one on the same bridge, and back to the client itself (hairpin)", async () => {
    const ns = a().node.netns;
    const srv = members.map(
      () => undefined as Awaited<ReturnType<typeof startPodServer>> | undefined,
    );
    createNetns(a().h.netnsName(2));
    const res = await a().h.client.setUpPod(a().h.podRequest(2));
    expectNoCniError(res);
    const a2 = (res.result?.ips[0]?.address ?? "").split("/")[0] as string;
    // The node-wide br_netfilter switch off: the driver's bridge turns it on for itself.
    inNs(ns, ["sysctl", "-qw", "net.bridge.bridge-nf-call-iptables=0"]);
    const services = [
      { name: "remote", ip: "10.96.0.11", endpoint: b().pod },
      { name: "local", ip: "10.96.0.12", endpoint: a2 },
      { name: "hairpin", ip: "10.96.0.13", endpoint: a().pod },
    ];
    const rules = [
      "*nat",
      ":PREROUTING ACCEPT [0:0]",
      ":INPUT ACCEPT [0:0]",
      ":OUTPUT ACCEPT [0:0]",
      ":POSTROUTING ACCEPT [0:0]",
    ];
    rules.push(":KUBE-SERVICES - [0:0]", ":KUBE-POSTROUTING - [0:0]", ":KUBE-MARK-MASQ - [0:0]");
    for (const svc of services)
      rules.push(
        `:KUBE-SVC-${svc.name.toUpperCase()} - [0:0]`,
        `:KUBE-SEP-${svc.name.toUpperCase()} - [0:0]`,
      );
    rules.push(
      '-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
      '-A OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
      '-A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING',
      "-A KUBE-MARK-MASQ -j MARK --or-mark 0x4000",
      "-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN",
      "-A KUBE-POSTROUTING -j MARK --xor-mark 0x4000",
      '-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully',
    );
    for (const svc of services) {
      const up = svc.name.toUpperCase();
      rules.push(
        `-A KUBE-SERVICES -d ${svc.ip}/32 -p tcp -m comment --comment "default/${svc.name} cluster IP" -m tcp --dport 80 -j KUBE-SVC-${up}`,
        `-A KUBE-SVC-${up} -m comment --comment "default/${svc.name} -> ${svc.endpoint}:${CONTAINER_PORT}" -j KUBE-SEP-${up}`,
        `-A KUBE-SEP-${up} -s ${svc.endpoint}/32 -m comment --comment default/${svc.name} -j KUBE-MARK-MASQ`,
        `-A KUBE-SEP-${up} -p tcp -m comment --comment default/${svc.name} -m tcp -j DNAT --to-destination ${svc.endpoint}:${CONTAINER_PORT}`,
      );
    }
    rules.push("COMMIT", "");
    const restore = spawnSync("ip", ["netns", "exec", ns, "iptables-restore"], {
      input: rules.join("\n"),
      encoding: "utf8",
    });
    expect(restore.status, restore.stderr).to.equal(0);
    try {
      srv[0] = await startPodServer(b().h.netnsName(1), "b1");
      srv[1] = await startPodServer(a().h.netnsName(2), "a2");
      srv[2] = await startPodServer(a().h.netnsName(1), "a1");
      const client = a().h.netnsName(1);
      expect(ul.tcpFrom(client, "10.96.0.11", 80), "to node-b's pod").to.equal("b1");
      expect(ul.tcpFrom(client, "10.96.0.12", 80), "to a pod on the same bridge").to.equal("a2");
      expect(ul.tcpFrom(client, "10.96.0.13", 80), "back to itself").to.equal("a1");
      // What made the last two work: the bridge's own br_netfilter switch, and hairpin on the port.
      const bridge = a().h.bridge;
      inNs(ns, ["ip", "link", "set", bridge, "type", "bridge", "nf_call_iptables", "0"]);
      expect(ul.tcpFrom(client, "10.96.0.12", 80), "same bridge without br_netfilter").to.equal("");
      inNs(ns, ["ip", "link", "set", bridge, "type", "bridge", "nf_call_iptables", "1"]);
      const port = a().h.hostVeth(1);
      inNs(ns, ["ip", "link", "set", port, "type", "bridge_slave", "hairpin", "off"]);
      expect(ul.tcpFrom(client, "10.96.0.13", 80), "hairpin off").to.equal("");
      inNs(ns, ["ip", "link", "set", port, "type", "bridge_slave", "hairpin", "on"]);
      expect(ul.tcpFrom(client, "10.96.0.13", 80)).to.equal("a1");
      // The same Services as kube-proxy's nftables mode writes them.
      inNs(ns, ["iptables", "-t", "nat", "-F"]);
      expect(ul.tcpFrom(client, "10.96.0.11", 80), "no rules, no Service").to.equal("");
      const nft = spawnSync("ip", ["netns", "exec", ns, "nft", "-f", "-"], {
        input: kubeProxyNftables(
          services.map((svc) => ({
            name: svc.name,
            clusterIp: svc.ip,
            port: 80,
            endpoint: svc.endpoint,
            targetPort: CONTAINER_PORT,
          })),
        ),
        encoding: "utf8",
      });
      expect(nft.status, nft.stderr).to.equal(0);
      expect(ul.tcpFrom(client, "10.96.0.11", 80), "nftables: node-b's pod").to.equal("b1");
      expect(ul.tcpFrom(client, "10.96.0.12", 80), "nftables: same bridge").to.equal("a2");
      expect(ul.tcpFrom(client, "10.96.0.13", 80), "nftables: itself").to.equal("a1");
    } finally {
      for (const c of srv) await stopPodServer(c);
      inNs(ns, ["iptables", "-t", "nat", "-F"]);
      inNs(ns, ["nft", "delete", "table", "ip", "kube-proxy"]);
    }
  });
});
