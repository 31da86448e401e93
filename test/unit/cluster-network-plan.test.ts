import { expect } from "chai";
import { CniError } from "../../src/cni/errors.js";
import { clusterNodeOf, VTEP_MAC_ANNOTATION } from "../../src/driver/cluster-network/nodes.js";
import {
  masqueradeTableBody,
  planCrossNode,
  vtepMacOf,
} from "../../src/driver/cluster-network/plan.js";
import {
  type ClusterNetworkSettings,
  readClusterNetworkSettings,
} from "../../src/driver/cluster-network/settings.js";
import { driverJsonRejection } from "../support/driver-config.js";

const settings = (extra: Record<string, unknown> = {}): ClusterNetworkSettings =>
  readClusterNetworkSettings({ clusterCidr: "10.244.0.0/16", ...extra });

const node = (name: string, cidr: string, ip: string, mac?: string) =>
  clusterNodeOf({
    metadata: { name, ...(mac ? { annotations: { [VTEP_MAC_ANNOTATION]: mac } } : {}) },
    spec: { podCIDRs: [cidr] },
    status: { addresses: [{ type: "InternalIP", address: ip }] },
  } as never) as NonNullable<ReturnType<typeof clusterNodeOf>>;

const A = node("a", "10.244.1.0/24", "192.0.2.1");
const B = node("b", "10.244.2.0/24", "192.0.2.2", "02:00:00:00:00:02");
const C = node("c", "10.244.3.0/24", "198.51.100.3", "02:00:00:00:00:03");
const onSubnet = (ip: string) => ip.startsWith("192.0.2.");

describe("cluster network settings", () => {
  it("defaults: auto, VNI 1, port 4789, masquerade on, nothing exempt", () => {
    expect(readClusterNetworkSettings({})).to.deep.equal({
      crossNode: "auto",
      vxlan: { vni: 1, port: 4789 },
      masquerade: true,
      nonMasqueradeCidrs: [],
    });
  });

  for (const [what, value, message] of [
    [
      "an unknown mode",
      { crossNode: "bgp" },
      'crossNode must be "auto" | "host-gw" | "vxlan" | "none", not "bgp"',
    ],
    ["VNI 0", { vxlan: { vni: 0 } }, "vxlan.vni must be an integer from 1 to 16777215, not 0"],
    [
      "a port too large",
      { vxlan: { port: 70000 } },
      "vxlan.port must be an integer from 1 to 65535",
    ],
    ["an unknown vxlan key", { vxlan: { vin: 4 } }, 'vxlan: unknown key "vin"'],
    ["masquerade as text", { masquerade: "yes" }, 'masquerade must be true or false, not "yes"'],
    [
      "a bad CIDR",
      { nonMasqueradeCidrs: ["10.0.0.0"] },
      'nonMasqueradeCidrs[0] must be a CIDR, not "10.0.0.0"',
    ],
    [
      "host bits",
      { nonMasqueradeCidrs: ["10.0.0.1/8"] },
      "has host bits set (the network is 10.0.0.0/8)",
    ],
  ] as const) {
    it(`refuses ${what}, naming the key`, () => {
      expect(() => readClusterNetworkSettings(value)).to.throw(message);
    });
  }
  it("a bad value rejects the whole config load (code 7, naming driver.json and the key)", () => {
    const err = driverJsonRejection({ crossNode: "vxlan", vxlan: { port: 0 } });
    expect(err).to.be.instanceOf(CniError);
    expect((err as CniError).code).to.equal(7);
    expect((err as CniError).message).to.equal(
      "driver.json: vxlan.port must be an integer from 1 to 65535, not 0",
    );
  });
});

describe("cluster network plan", () => {
  it("host-gw: a route per peer via its address; none to itself", () => {
    const p = planCrossNode({
      settings: settings({ crossNode: "host-gw" }),
      selfName: "a",
      nodes: [A, B],
      onLink: onSubnet,
    });
    expect(p.routes).to.deep.equal([{ dst: "10.244.2.0/24", via: "192.0.2.2" }]);
    expect(p.vxlan).to.equal(undefined);
  });

  it("host-gw: a peer off this node's subnets is skipped with the reason", () => {
    const p = planCrossNode({
      settings: settings({ crossNode: "host-gw" }),
      selfName: "a",
      nodes: [A, C],
      onLink: onSubnet,
    });
    expect(p.routes).to.deep.equal([]);
    expect(p.skipped[0]?.reason).to.include("198.51.100.3 is not on a subnet of this node");
  });

  it("vxlan: route via the peer's VTEP address onlink, its neighbour and forwarding entry; the device at the pod CIDR's network address", () => {
    const p = planCrossNode({
      settings: settings({ crossNode: "vxlan", vxlan: { vni: 7, port: 4799 } }),
      selfName: "a",
      nodes: [A, B, C],
      onLink: () => true,
    });
    expect(p.vxlan).to.deep.equal({
      name: "midokube-vxlan",
      vni: 7,
      port: 4799,
      local: "192.0.2.1",
      mac: vtepMacOf("a"),
      addresses: ["10.244.1.0/32"],
    });
    expect(p.routes).to.deep.equal([
      { dst: "10.244.2.0/24", via: "10.244.2.0", dev: "midokube-vxlan", onlink: true },
      { dst: "10.244.3.0/24", via: "10.244.3.0", dev: "midokube-vxlan", onlink: true },
    ]);
    expect(p.fdb).to.deep.equal([
      { mac: "02:00:00:00:00:02", dst: "192.0.2.2" },
      { mac: "02:00:00:00:00:03", dst: "198.51.100.3" },
    ]);
    expect(p.neighbours).to.deep.equal([
      { ip: "10.244.2.0", mac: "02:00:00:00:00:02" },
      { ip: "10.244.3.0", mac: "02:00:00:00:00:03" },
    ]);
  });

  it("auto: host-gw on the node's subnet, vxlan beyond; a peer without its VTEP MAC waits", () => {
    const D = node("d", "10.244.4.0/24", "203.0.113.4");
    const p = planCrossNode({
      settings: settings(),
      selfName: "a",
      nodes: [A, B, C, D],
      onLink: onSubnet,
    });
    expect(p.routes.map((r) => `${r.dst} ${r.via} ${r.dev ?? ""}`)).to.deep.equal([
      "10.244.2.0/24 192.0.2.2 ",
      "10.244.3.0/24 10.244.3.0 midokube-vxlan",
    ]);
    expect(p.skipped).to.deep.equal([
      { node: "d", reason: "its Node does not publish its VTEP MAC yet" },
    ]);
  });

  it("dual stack: an IPv6 pod CIDR crosses the same IPv4 tunnel (its own VTEP address and neighbour, the peer's one forwarding entry), or host-gw over an on-link IPv6 node address", () => {
    const dual = (name: string, n: number, ip: string, ip6?: string, mac?: string) =>
      clusterNodeOf({
        metadata: { name, ...(mac ? { annotations: { [VTEP_MAC_ANNOTATION]: mac } } : {}) },
        spec: { podCIDRs: [`10.244.${n}.0/24`, `fd00:10:244:${n}::/64`] },
        status: {
          addresses: [
            { type: "InternalIP", address: ip },
            ...(ip6 ? [{ type: "InternalIP", address: ip6 }] : []),
          ],
        },
      } as never) as NonNullable<ReturnType<typeof clusterNodeOf>>;
    const self = dual("a", 1, "192.0.2.1", "2001:db8::1");
    const near = dual("b", 2, "192.0.2.2", "2001:db8::2", "02:00:00:00:00:02");
    const far = dual("c", 3, "198.51.100.3", undefined, "02:00:00:00:00:03");
    const p = planCrossNode({
      settings: settings(),
      selfName: "a",
      nodes: [self, near, far],
      onLink: (ip) => ip.startsWith("192.0.2.") || ip.startsWith("2001:db8::"),
    });
    expect(p.vxlan?.addresses).to.deep.equal(["10.244.1.0/32", "fd00:10:244:1::/128"]);
    expect(p.routes).to.deep.equal([
      { dst: "10.244.2.0/24", via: "192.0.2.2" },
      { dst: "fd00:10:244:2::/64", via: "2001:db8::2" },
      { dst: "10.244.3.0/24", via: "10.244.3.0", dev: "midokube-vxlan", onlink: true },
      { dst: "fd00:10:244:3::/64", via: "fd00:10:244:3::", dev: "midokube-vxlan", onlink: true },
    ]);
    expect(p.fdb).to.deep.equal([{ mac: "02:00:00:00:00:03", dst: "198.51.100.3" }]);
    expect(p.neighbours).to.deep.equal([
      { ip: "10.244.3.0", mac: "02:00:00:00:00:03" },
      { ip: "fd00:10:244:3::", mac: "02:00:00:00:00:03" },
    ]);
    expect(p.skipped).to.deep.equal([]);
    // host-gw alone cannot reach the far node in either family.
    const gw = planCrossNode({
      settings: settings({ crossNode: "host-gw" }),
      selfName: "a",
      nodes: [self, far],
      onLink: (ip) => ip.startsWith("192.0.2."),
    });
    expect(gw.skipped.map((x) => x.reason)).to.deep.equal([
      "198.51.100.3 is not on a subnet of this node: host-gw cannot reach 10.244.3.0/24",
      "no IPv6 address in its status.addresses to reach fd00:10:244:3::/64 by",
    ]);
  });

  it("a peer whose pod CIDR overlaps this node's is never routed", () => {
    const X = node("x", "10.244.1.128/25", "192.0.2.9");
    const p = planCrossNode({
      settings: settings(),
      selfName: "a",
      nodes: [A, X],
      onLink: onSubnet,
    });
    expect(p.routes).to.deep.equal([]);
    expect(p.skipped[0]?.reason).to.include("overlaps this node's 10.244.1.0/24");
  });

  it("none: nothing at all", () => {
    const p = planCrossNode({
      settings: settings({ crossNode: "none" }),
      selfName: "a",
      nodes: [A, B],
      onLink: onSubnet,
    });
    expect(p.routes).to.deep.equal([]);
    expect(p.vxlan).to.equal(undefined);
  });

  it("the VTEP MAC is locally administered, unicast, and the same for the same node", () => {
    const mac = vtepMacOf("node-1");
    expect(mac).to.equal(vtepMacOf("node-1"));
    expect(mac).to.not.equal(vtepMacOf("node-2"));
    expect(Number.parseInt(mac.slice(0, 2), 16) & 0x03).to.equal(0x02);
  });

  it("masquerade, dual stack: clusterCidrIPv6 gets its own set and ip6 rule, with the IPv6 exempt ranges; it alone is enough", () => {
    const body = masqueradeTableBody(
      settings({
        clusterCidrIPv6: "fd00:10:244::/48",
        nonMasqueradeCidrs: ["192.168.0.0/16", "fd00:99::/64"],
      }),
    ) as string;
    expect(body).to.include("elements = { 10.244.0.0/16, 192.168.0.0/16 }");
    expect(body).to.include("type ipv6_addr");
    expect(body).to.include("elements = { fd00:10:244::/48, fd00:99::/64 }");
    expect(body).to.include("ip saddr 10.244.0.0/16 ip daddr != @no_masquerade_v4 masquerade");
    expect(body).to.include("ip6 saddr fd00:10:244::/48 ip6 daddr != @no_masquerade_v6 masquerade");
    const v6only = masqueradeTableBody(
      readClusterNetworkSettings({ clusterCidrIPv6: "fd00:10:244::/48" }),
    ) as string;
    expect(v6only).to.not.include("no_masquerade_v4");
    expect(v6only).to.include("@no_masquerade_v6 masquerade");
    expect(() => readClusterNetworkSettings({ clusterCidrIPv6: "10.244.0.0/16" })).to.throw(
      'clusterCidrIPv6 must be an IPv6 CIDR, not "10.244.0.0/16"',
    );
  });

  it("masquerade: clusterCidr's traffic leaving it and the exempt ranges; none without clusterCidr or when off", () => {
    const body = masqueradeTableBody(
      settings({ nonMasqueradeCidrs: ["192.168.0.0/16", "fd00::/8"] }),
    ) as string;
    expect(body).to.include("elements = { 10.244.0.0/16, 192.168.0.0/16 }");
    expect(body).to.include("ip saddr 10.244.0.0/16 ip daddr != @no_masquerade_v4 masquerade");
    expect(masqueradeTableBody(readClusterNetworkSettings({}))).to.equal(undefined);
    expect(masqueradeTableBody(settings({ masquerade: false }))).to.equal(undefined);
  });
});
