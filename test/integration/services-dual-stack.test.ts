/**
 * Dual-stack Services on the driver's nftables: a node whose pods have an
 * IPv4 and an IPv6 address, a Service with a ClusterIP of each family and an
 * EndpointSlice of each; real TCP over both families, to another pod (the
 * client's address kept) and back to the client itself (masqueraded).
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect } from "chai";
import {
  type ClusterMember,
  ClusterUnderlay,
  inNs,
  printMemberLogs,
  startMembers,
  tearDownCluster,
  UNDERLAY,
} from "../support/cluster-nodes.js";
import { DriverHarness, expectNoCniError } from "../support/driver-harness.js";
import { type FakeKubeApiServer, startFakeKubeApiServer } from "../support/fake-kube-apiserver.js";
import { createNetns } from "../support/netns.js";
import { startNetnsScript, stopPodServer } from "../support/pod-server.js";
import { requireCommand, requireRoot } from "../support/requirements.js";
import { serverScript, TCP_PORT, tcp } from "../support/service-probes.js";
import { until } from "../support/until.js";

const OCTET = 191;
const V6_CIDR = `fd00:10:244:${OCTET}::/64`;

describe("Services without kube-proxy, dual stack: IPv4 and IPv6 ClusterIPs of one Service", function () {
  this.timeout(120_000);
  let root: string;
  let ul: ClusterUnderlay;
  let server: FakeKubeApiServer;
  const members: ClusterMember[] = [];
  const servers: Array<Awaited<ReturnType<typeof startNetnsScript>>> = [];
  const ips = new Map<number, { v4: string; v6: string }>();

  before(async function () {
    requireRoot(this);
    requireCommand(this, "nft", "nftables");
    root = mkdtempSync(join(tmpdir(), "cni-driver-services6-"));
    ul = new ClusterUnderlay(root);
    server = await startFakeKubeApiServer();
    const kubeconfig = await ul.exposeApi(Number(new URL(server.url).port), server.kubeconfig());
    const node = ul.addNode("node-a", 41);
    inNs(node.netns, ["sysctl", "-qw", "net.ipv6.conf.all.forwarding=1"]);
    inNs(node.netns, ["ip", "route", "add", "default", "via", `${UNDERLAY}.254`]);
    const h = new DriverHarness({
      subnetOctet: OCTET,
      netns: node.netns,
      extraFlags: [
        "--pod-cidr",
        `10.244.${OCTET}.0/24,${V6_CIDR}`,
        "--kubeconfig",
        kubeconfig,
        "--node-name",
        node.name,
      ],
    });
    const m: ClusterMember = { node, h, pod: "" };
    members.push(m);
    const conflist = h.conflist() as { plugins: Array<{ ipam?: Record<string, unknown> }> };
    const ipam = conflist.plugins[0]?.ipam as Record<string, unknown>;
    ipam.ranges = [[{ subnet: "usePodCidr" }], [{ subnet: "usePodCidrIPv6" }]];
    await h.writeConfig({
      "pod-network.conflist": JSON.stringify(conflist),
      "driver.json": JSON.stringify({
        crossNode: "none",
        clusterCidr: "10.244.0.0/16",
        clusterCidrIPv6: "fd00:10:244::/48",
        services: "driver",
      }),
    });
    server.put("nodes", {
      metadata: { name: node.name },
      spec: { podCIDR: h.subnet, podCIDRs: [h.subnet, V6_CIDR] },
      status: { addresses: [{ type: "InternalIP", address: node.address }] },
    });
    await startMembers(members);
    for (const i of [1, 2]) {
      if (i === 2) createNetns(h.netnsName(2));
      const res = await h.client.setUpPod(h.podRequest(i));
      expectNoCniError(res);
      const addrs = (res.result?.ips ?? []).map((ip) => ip.address.split("/")[0] as string);
      ips.set(i, {
        v4: addrs.find((a) => !a.includes(":")) as string,
        v6: addrs.find((a) => a.includes(":")) as string,
      });
      servers.push(await startNetnsScript(h.netnsName(i), serverScript(`p${i}`, 6)));
    }
  });

  afterEach(function () {
    if (this.currentTest?.state === "failed") printMemberLogs(members);
  });

  after(async () => {
    for (const s of servers) await stopPodServer(s);
    await tearDownCluster(members, ul, server, root);
  });

  function service(name: string, v4: string, v6: string, endpoint: number): void {
    server.put("services", {
      metadata: { namespace: "default", name },
      spec: {
        clusterIP: v4,
        clusterIPs: [v4, v6],
        ipFamilies: ["IPv4", "IPv6"],
        ipFamilyPolicy: "RequireDualStack",
        ports: [{ name: "web", protocol: "TCP", port: 80, targetPort: TCP_PORT }],
      },
    });
    const ep = ips.get(endpoint) as { v4: string; v6: string };
    for (const [family, address] of [
      ["IPv4", ep.v4],
      ["IPv6", ep.v6],
    ] as const)
      server.put("endpointslices", {
        metadata: {
          namespace: "default",
          name: `${name}-${family.toLowerCase()}`,
          labels: { "kubernetes.io/service-name": name },
        },
        addressType: family,
        endpoints: [{ addresses: [address], nodeName: "node-a", conditions: { ready: true } }],
        ports: [{ name: "web", protocol: "TCP", port: TCP_PORT }],
      });
  }

  it("each family's ClusterIP leads to the endpoint of its family, the client's address kept; a pod reaching itself over IPv6 is masqueraded", async () => {
    const client = members[0]?.h.netnsName(1) as string;
    const me = ips.get(1) as { v4: string; v6: string };
    service("both", "10.96.3.1", "fd00:96::1", 2);
    service("self", "10.96.3.2", "fd00:96::2", 1);
    await until(() => tcp(client, "fd00:96::1", 80).startsWith("p2"), "the IPv6 ClusterIP", 30_000);
    expect(tcp(client, "fd00:96::1", 80)).to.equal(`p2 ${me.v6}`);
    expect(tcp(client, "10.96.3.1", 80)).to.equal(`p2 ${me.v4}`);
    await until(() => tcp(client, "fd00:96::2", 80).startsWith("p1"), "IPv6 hairpin", 30_000);
    expect(tcp(client, "fd00:96::2", 80).split(" ")[1]).to.not.equal(me.v6);
    expect(tcp(client, "10.96.3.2", 80).split(" ")[1]).to.not.equal(me.v4);
  });
});
