/**
 * MidoNet's node contract: the names and annotations are external (DESIGN's
 * table, the original integration's), and the addressing rule is what both the
 * driver's node link and the mapping's router port follow.
 */
import { expect } from "chai";
import {
  ANNOTATION_HOST_ID,
  ANNOTATION_MAC_ADDRESS,
  ANNOTATION_TUNNEL_ENDPOINT_IP,
  ANNOTATION_TUNNEL_ZONE_ID,
  NODE_INTERFACE,
  NODE_PEER_INTERFACE,
  podSubnet,
  podSubnetOf,
} from "../../src/midonet/node-contract.js";
import { parseCidr } from "../../src/net/ip.js";

describe("midonet/node-contract", () => {
  it("keeps the external names of the node link and the annotations", () => {
    expect([NODE_INTERFACE, NODE_PEER_INTERFACE]).to.deep.equal(["midokube-node", "midokube-mido"]);
    expect([
      ANNOTATION_MAC_ADDRESS,
      ANNOTATION_HOST_ID,
      ANNOTATION_TUNNEL_ZONE_ID,
      ANNOTATION_TUNNEL_ENDPOINT_IP,
    ]).to.deep.equal([
      "midonet.org/mac-address",
      "midonet.org/host-id",
      "midonet.org/tunnel-zone-id",
      "midonet.org/tunnel-endpoint-ip",
    ]);
  });

  const cases: [string, string, string, string][] = [
    ["10.244.3.0/24", "10.244.3.0/24", "10.244.3.1", "10.244.3.2"],
    ["10.244.3.77/24", "10.244.3.0/24", "10.244.3.1", "10.244.3.2"],
    ["10.1.0.0/30", "10.1.0.0/30", "10.1.0.1", "10.1.0.2"],
    ["fd00:1::/64", "fd00:1::/64", "fd00:1::1", "fd00:1::2"],
    ["FD00:1::5/126", "fd00:1::4/126", "fd00:1::5", "fd00:1::6"],
  ];
  for (const [text, cidr, gateway, nodeIp] of cases) {
    it(`${text}: gateway = network + 1, node = network + 2`, () => {
      const r = podSubnet(text);
      expect(r.ok && r.subnet).to.include({ cidr, gateway, nodeIp });
      expect(podSubnetOf(parseCidr(text)!)).to.deep.equal(r.ok && r.subnet);
    });
  }

  it("podSubnet refuses a CIDR without room for gateway and node; podSubnetOf does not check", () => {
    expect(podSubnet("10.1.0.0/31")).to.deep.equal({ ok: false, reason: "too-small" });
    expect(podSubnet("fd00::/127")).to.deep.equal({ ok: false, reason: "too-small" });
    expect(podSubnet("10.1.0.0")).to.deep.equal({ ok: false, reason: "invalid" });
    expect(podSubnetOf(parseCidr("10.1.0.0/31")!).nodeIp).to.equal("10.1.0.2");
  });
});
