import { expect } from "chai";
import { hostVethName } from "../../src/midonet/host-veth-name.js";
import { idForKey, macForKey, subId } from "../../src/midonet/ids.js";
import {
  type DesiredResource,
  type EndpointSlice,
  mapGlobal,
  mapNode,
  mapPod,
  mapService,
  type Node,
  nodePlumbing,
  type ObjectMapping,
  type Pod,
  type PodNodeLookup,
  parentOf,
  resolveConfig,
  type Service,
} from "../../src/midonet/mapping/index.js";
import { podSubnet } from "../../src/midonet/node-contract.js";
import type { Rule } from "../../src/midonet/resources.js";

/** The rule body of a resource the test expects to exist. */
function ruleOf(r: DesiredResource | undefined): Rule {
  if (!r) throw new Error("expected rule missing");
  return r.body as Rule;
}

const TENANT = "midonetkube";
const config = resolveConfig({ tenant: TENANT });
const G = config.ids;
const HOST = "6f1c0c5e-1d2a-4b7e-9a55-3a0d1c2b4e5f";

// The ids the scheme gives (midonet-kubernetes' IDForKey), computed independently of the mapping.
const nodeBase = idForKey(TENANT, "Node", "node1");
const N = {
  bridge: nodeBase,
  bridgePort: subId(nodeBase, "Bridge Port"),
  routerPort: subId(nodeBase, "Router Port"),
  route: subId(nodeBase, "Route"),
  chain: subId(nodeBase, "Node Port Chain"),
  nodePort: subId(nodeBase, "Node Port"),
  snatRule: subId(nodeBase, "Node Port SNAT Rule"),
};

function node1(overrides: Partial<Node> = {}, annotations: Record<string, string> = {}): Node {
  return {
    metadata: {
      name: "node1",
      annotations: { "midonet.org/host-id": HOST, ...annotations },
    },
    spec: { podCIDR: "10.1.0.0/24" },
    status: {
      addresses: [
        { type: "InternalIP", address: "192.168.0.10" },
        { type: "ExternalIP", address: "203.0.113.10" },
        { type: "Hostname", address: "node1" },
      ],
    },
    ...overrides,
  };
}

function byKey(m: ObjectMapping): Map<string, DesiredResource> {
  return new Map(m.resources.map((r) => [r.key, r]));
}

function one(m: ObjectMapping, key: string): DesiredResource {
  const r = byKey(m).get(key);
  if (!r) throw new Error(`no resource ${key} in ${m.owner}`);
  return r;
}

function rulesOf(m: ObjectMapping, chainId: string): DesiredResource[] {
  return m.resources
    .filter((r) => r.kind === "Rule" && parentOf(r) === chainId)
    .sort((a, b) => ((a.order ?? "") < (b.order ?? "") ? -1 : 1));
}

const knownNode: PodNodeLookup = (name) =>
  name === "node1"
    ? { hostId: HOST, membershipKey: `/tunnel_zones/${G.defaultTunnelZone}/hosts/${HOST}` }
    : undefined;

function pod(overrides: Partial<Pod> = {}, annotations: Record<string, string> = {}): Pod {
  return {
    metadata: { namespace: "default", name: "web-0", annotations },
    spec: { nodeName: "node1" },
    status: { phase: "Running", podIP: "10.1.0.5" },
    ...overrides,
  };
}

function service(spec: Service["spec"], name = "web"): Service {
  return { metadata: { namespace: "default", name }, spec };
}

function slice(
  endpoints: EndpointSlice["endpoints"],
  ports: EndpointSlice["ports"] = [{ name: "http", protocol: "TCP", port: 8080 }],
  name = "web-abcde",
  addressType = "IPv4",
): EndpointSlice {
  return {
    metadata: { namespace: "default", name, labels: { "kubernetes.io/service-name": "web" } },
    addressType,
    endpoints,
    ports,
  };
}

describe("midonet/mapping", () => {
  describe("global resources", () => {
    const m = mapGlobal(config);

    it("are the default tunnel zone, the cluster router and three chains, with the scheme's ids", () => {
      expect(G.base).to.equal("23b6f94b-2fb5-55b0-9614-3cbb6d6dc17f");
      const devices = m.resources.filter((r) => r.kind !== "Rule").map((r) => [r.kind, r.body]);
      expect(devices).to.deep.equal([
        [
          "TunnelZone",
          { id: "51329ede-9b0f-5923-98ee-bf4ef08af54f", name: "DefaultTunnelZone", type: "vxlan" },
        ],
        [
          "Router",
          { id: "21607839-c6b4-5b98-8aa1-89a1aab61bca", name: "ClusterRouter", tenantId: TENANT },
        ],
        ["Chain", { id: G.base, name: "KUBE-MAIN", tenantId: TENANT }],
        ["Chain", { id: subId(G.base, "Pre Chain"), name: "KUBE-PRE", tenantId: TENANT }],
        [
          "Chain",
          { id: "8ba7d5a7-f323-53d4-8522-ddb2c7158ef0", name: "KUBE-SERVICES", tenantId: TENANT },
        ],
      ]);
    });

    it("KUBE-MAIN jumps to KUBE-PRE, then to KUBE-SERVICES", () => {
      const rules = rulesOf(m, G.mainChain).map((r) => r.body);
      expect(rules).to.deep.equal([
        { id: subId(G.base, "Jump To Pre"), type: "jump", jumpChainId: G.preChain },
        { id: subId(G.base, "Jump To Services"), type: "jump", jumpChainId: G.servicesChain },
      ]);
    });

    it("KUBE-PRE reverses SNAT (continue) before DNAT (accept), so a hairpin reply gets both", () => {
      const rules = rulesOf(m, G.preChain).map((r) => r.body);
      expect(rules).to.deep.equal([
        { id: subId(G.base, "Reverse SNAT"), type: "rev_snat", flowAction: "continue" },
        { id: subId(G.base, "Reverse DNAT"), type: "rev_dnat", flowAction: "accept" },
      ]);
    });

    it("takes the tunnel zone type from the config", () => {
      const gre = mapGlobal({ tenant: TENANT, tunnelZoneType: "gre" });
      expect(gre.resources[0]?.body).to.include({ type: "gre" });
    });
  });

  describe("podSubnet", () => {
    const table: [string, string, string, string][] = [
      ["10.1.0.0/24", "10.1.0.0/24", "10.1.0.1", "10.1.0.2"],
      ["10.1.0.77/24", "10.1.0.0/24", "10.1.0.1", "10.1.0.2"],
      ["10.1.0.252/30", "10.1.0.252/30", "10.1.0.253", "10.1.0.254"],
      ["fd00:1::/64", "fd00:1::/64", "fd00:1::1", "fd00:1::2"],
    ];
    for (const [text, cidr, gateway, nodeIp] of table) {
      it(`${text}: gateway ${gateway}, node ${nodeIp}`, () => {
        const r = podSubnet(text);
        expect(r.ok && r.subnet).to.include({ cidr, gateway, nodeIp });
      });
    }
    it("refuses what does not parse and what has no room", () => {
      expect(podSubnet("10.1.0.0")).to.deep.equal({ ok: false, reason: "invalid" });
      expect(podSubnet("10.1.0.0/31")).to.deep.equal({ ok: false, reason: "too-small" });
    });
  });

  describe("Node", () => {
    const m = mapNode(node1({}, { "midonet.org/mac-address": "AA-BB-CC-DD-EE-01" }), config);
    const membership = `/tunnel_zones/${G.defaultTunnelZone}/hosts/${HOST}`;
    const internalRoute = idForKey(TENANT, "Node Address", "node1/InternalIP/192.168.0.10");
    const externalRoute = idForKey(TENANT, "Node Address", "node1/ExternalIP/203.0.113.10");

    it("maps to exactly the expected keys", () => {
      expect(N.bridge).to.equal("d1c5f0f1-d501-5330-b521-b2daaf3d238b");
      expect(m.resources.map((r) => r.key).sort()).to.deep.equal(
        [
          N.bridge,
          N.bridgePort,
          N.routerPort,
          N.route,
          `/ports/${N.bridgePort}/link`,
          N.chain,
          N.nodePort,
          N.snatRule,
          internalRoute,
          externalRoute,
          membership,
          `/hosts/${HOST}/ports/${N.nodePort}`,
          `/bridges/${N.bridge}/mac_table/aa-bb-cc-dd-ee-01_${N.nodePort}`,
          `/bridges/${N.bridge}/arp_table/10.1.0.2_aa-bb-cc-dd-ee-01`,
        ].sort(),
      );
      expect(m.warnings).to.deep.equal([]);
    });

    it("the bridge is named after the node and filters through KUBE-MAIN", () => {
      const r = one(m, N.bridge);
      expect(r.kind).to.equal("Bridge");
      expect(r.body).to.deep.equal({
        id: N.bridge,
        name: "node1",
        tenantId: TENANT,
        inboundFilterId: G.mainChain,
      });
      expect(r.dependsOn).to.deep.equal([G.mainChain]);
    });

    it("the router port holds the gateway and a deterministic MAC", () => {
      const r = one(m, N.routerPort);
      expect(parentOf(r)).to.equal(G.clusterRouter);
      expect(r.body).to.deep.equal({
        id: N.routerPort,
        type: "Router",
        networkAddress: "10.1.0.0",
        networkLength: 24,
        portAddress: "10.1.0.1",
        portMac: macForKey("node1"),
      });
    });

    it("routes the pod CIDR to the router port and links it to the bridge", () => {
      expect(one(m, N.route).body).to.deep.equal({
        id: N.route,
        type: "Normal",
        srcNetworkAddr: "0.0.0.0",
        srcNetworkLength: 0,
        dstNetworkAddr: "10.1.0.0",
        dstNetworkLength: 24,
        nextHopPort: N.routerPort,
        weight: 0,
      });
      const link = one(m, `/ports/${N.bridgePort}/link`);
      expect(link.kind).to.equal("PortLink");
      expect(parentOf(link)).to.equal(N.bridgePort);
      expect(link.body).to.deep.equal({ peerId: N.routerPort });
      expect(link.dependsOn).to.have.members([N.bridgePort, N.routerPort]);
    });

    it("the node port filters through KUBE-NODE-<node>, whose rule SNATs the node IP to the gateway", () => {
      expect(one(m, N.chain).body).to.deep.equal({
        id: N.chain,
        name: "KUBE-NODE-node1",
        tenantId: TENANT,
      });
      expect(one(m, N.nodePort).body).to.deep.equal({
        id: N.nodePort,
        type: "Bridge",
        outboundFilterId: N.chain,
      });
      const snat = one(m, N.snatRule);
      expect(parentOf(snat)).to.equal(N.chain);
      expect(snat.body).to.deep.equal({
        id: N.snatRule,
        type: "snat",
        dlType: 2048,
        nwSrcAddress: "10.1.0.2",
        nwSrcLength: 32,
        natTargets: [
          { addressFrom: "10.1.0.1", addressTo: "10.1.0.1", portFrom: 30000, portTo: 60000 },
        ],
        flowAction: "continue",
      });
    });

    it("routes each InternalIP and ExternalIP (not Hostname) via the node IP", () => {
      for (const [id, ip] of [
        [internalRoute, "192.168.0.10"],
        [externalRoute, "203.0.113.10"],
      ] as const) {
        expect(one(m, id).body).to.deep.include({
          dstNetworkAddr: ip,
          dstNetworkLength: 32,
          nextHopPort: N.routerPort,
          nextHopGateway: "10.1.0.2",
          type: "Normal",
        });
      }
    });

    it("joins the default tunnel zone at the first InternalIP and binds the node port to midokube-mido", () => {
      expect(one(m, membership).body).to.deep.equal({ hostId: HOST, ipAddress: "192.168.0.10" });
      const binding = one(m, `/hosts/${HOST}/ports/${N.nodePort}`);
      expect(binding.body).to.deep.equal({
        hostId: HOST,
        portId: N.nodePort,
        interfaceName: "midokube-mido",
      });
      // MidoNet refuses a binding while the host is in no tunnel zone.
      expect(binding.dependsOn).to.include(membership);
    });

    it("with the MAC annotation: a MAC entry for the node port and an ARP entry for the node IP", () => {
      expect(
        one(m, `/bridges/${N.bridge}/mac_table/aa-bb-cc-dd-ee-01_${N.nodePort}`).body,
      ).to.deep.equal({
        macAddr: "aa:bb:cc:dd:ee:01",
        portId: N.nodePort,
      });
      expect(
        one(m, `/bridges/${N.bridge}/arp_table/10.1.0.2_aa-bb-cc-dd-ee-01`).body,
      ).to.deep.equal({
        ip: "10.1.0.2",
        mac: "aa:bb:cc:dd:ee:01",
      });
    });

    it("the tunnel zone and endpoint annotations override the defaults", () => {
      const zone = "0b5d8c3e-7f21-4a6e-8d4c-2e1f0a9b8c7d";
      const n = mapNode(
        node1(
          {},
          {
            "midonet.org/tunnel-zone-id": zone.toUpperCase(),
            "midonet.org/tunnel-endpoint-ip": "172.16.0.10",
          },
        ),
        config,
      );
      const member = one(n, `/tunnel_zones/${zone}/hosts/${HOST}`);
      expect(member.body).to.deep.equal({ hostId: HOST, ipAddress: "172.16.0.10" });
      // Not our zone: nothing of ours to wait for.
      expect(member.dependsOn).to.deep.equal([]);
    });

    it("without a host id: the bridge and its routing, no binding, a warning", () => {
      const n = mapNode(node1({ metadata: { name: "node1" } }), config);
      const kinds = n.resources.map((r) => r.kind);
      expect(kinds).to.include.members(["Bridge", "Port", "Route", "PortLink", "Chain", "Rule"]);
      expect(kinds).to.not.include.members(["HostInterfacePort", "TunnelZoneHost"]);
      expect(n.warnings.map((w) => w.code)).to.deep.equal(["no-host-id"]);
    });

    it("a pod CIDR that does not parse: no router port, route or SNAT rule, a warning, no throw", () => {
      const n = mapNode(node1({ spec: { podCIDR: "10.1.0.0/33" } }), config);
      const keys = n.resources.map((r) => r.key);
      expect(keys).to.not.include.members([N.routerPort, N.route, N.snatRule]);
      expect(keys).to.include(N.bridge);
      expect(n.warnings.map((w) => w.code)).to.deep.equal(["invalid-value"]);
    });

    it("dual stack: IPv4 mapped into MidoNet, IPv6 reported, both carried in the node plumbing", () => {
      const dual = node1({
        spec: { podCIDR: "10.1.0.0/24", podCIDRs: ["10.1.0.0/24", "fd00:1::/64"] },
        status: {
          addresses: [
            { type: "InternalIP", address: "192.168.0.10" },
            { type: "InternalIP", address: "2001:db8::10" },
          ],
        },
      });
      const n = mapNode(dual, config);
      expect(one(n, N.routerPort).body).to.deep.include({ portAddress: "10.1.0.1" });
      expect(n.warnings.map((w) => w.code)).to.deep.equal([
        "ipv6-not-mappable",
        "ipv6-not-mappable",
      ]);
      const plumbing = nodePlumbing(dual, {
        tenant: TENANT,
        mtu: 1450,
        clusterCidrs: ["10.0.0.0/8", "fd00::/48"],
        serviceCidrs: ["10.96.0.0/12"],
      });
      expect(plumbing).to.deep.equal({
        interfaceName: "midokube-node",
        peerName: "midokube-mido",
        mtu: 1450,
        addresses: [
          { family: 4, address: "10.1.0.2/24", gateway: "10.1.0.1" },
          { family: 6, address: "fd00:1::2/64", gateway: "fd00:1::1" },
        ],
        routes: [
          { dst: "10.0.0.0/8", via: "10.1.0.1" },
          { dst: "fd00::/48", via: "fd00:1::1" },
          { dst: "10.96.0.0/12", via: "10.1.0.1" },
        ],
      });
    });

    it("node plumbing leaves the MTU out when the config has none, and waits for a pod CIDR", () => {
      expect(nodePlumbing(node1(), { tenant: TENANT })).to.not.have.property("mtu");
      expect(nodePlumbing(node1({ spec: {} }), { tenant: TENANT })).to.equal(undefined);
    });
  });

  describe("Pod", () => {
    const portId = idForKey(TENANT, "Pod", "default/web-0");

    it("maps to a port on its node's bridge, bound to the pod's host veth", () => {
      const m = mapPod(pod(), config, knownNode);
      expect(m.resources.map((r) => [r.kind, r.key])).to.deep.equal([
        ["Port", portId],
        ["HostInterfacePort", `/hosts/${HOST}/ports/${portId}`],
      ]);
      const port = one(m, portId);
      expect(parentOf(port)).to.equal(N.bridge);
      expect(port.body).to.deep.equal({ id: portId, type: "Bridge" });
      expect(port.dependsOn).to.deep.equal([N.bridge]);
      const binding = one(m, `/hosts/${HOST}/ports/${portId}`);
      expect(binding.body).to.deep.equal({
        hostId: HOST,
        portId,
        interfaceName: hostVethName("default/web-0"),
      });
      expect(binding.dependsOn).to.deep.equal([
        portId,
        `/tunnel_zones/${G.defaultTunnelZone}/hosts/${HOST}`,
      ]);
    });

    const skips: [string, Partial<Pod>, string][] = [
      ["not scheduled", { spec: {} }, "no-node-name"],
      ["on the host network", { spec: { nodeName: "node1", hostNetwork: true } }, "host-network"],
      ["Succeeded", { status: { phase: "Succeeded", podIP: "10.1.0.5" } }, "finished"],
      ["Failed", { status: { phase: "Failed", podIP: "10.1.0.5" } }, "finished"],
    ];
    for (const [label, overrides, reason] of skips) {
      it(`a pod ${label} maps to nothing (${reason})`, () => {
        const m = mapPod(
          pod(overrides, { "midonet.org/mac-address": "0a:58:0a:01:00:05" }),
          config,
          knownNode,
        );
        expect(m.resources).to.deep.equal([]);
        expect(m.skipped).to.equal(reason);
      });
    }

    it("with the MAC annotation: a MAC entry, and an ARP entry for each IPv4 pod address", () => {
      const m = mapPod(
        pod(
          {
            status: {
              phase: "Running",
              podIP: "10.1.0.5",
              podIPs: [{ ip: "10.1.0.5" }, { ip: "fd00:1::5" }],
            },
          },
          { "midonet.org/mac-address": "0A:58:0A:01:00:05" },
        ),
        config,
        knownNode,
      );
      expect(
        one(m, `/bridges/${N.bridge}/mac_table/0a-58-0a-01-00-05_${portId}`).body,
      ).to.deep.equal({
        macAddr: "0a:58:0a:01:00:05",
        portId,
      });
      const arp = m.resources.filter((r) => r.kind === "IP4Mac").map((r) => r.body);
      expect(arp).to.deep.equal([{ ip: "10.1.0.5", mac: "0a:58:0a:01:00:05" }]);
    });

    it("a MAC annotation that is not a MAC: a warning, no entries", () => {
      const m = mapPod(pod({}, { "midonet.org/mac-address": "nope" }), config, knownNode);
      expect(m.resources.map((r) => r.kind)).to.deep.equal(["Port", "HostInterfacePort"]);
      expect(m.warnings.map((w) => w.code)).to.deep.equal(["invalid-value"]);
    });

    it("on a node without a known host: the port, unbound, and a warning", () => {
      const m = mapPod(pod({ spec: { nodeName: "node9" } }), config, knownNode);
      expect(m.resources.map((r) => r.kind)).to.deep.equal(["Port"]);
      expect(parentOf(m.resources[0] as DesiredResource)).to.equal(
        idForKey(TENANT, "Node", "node9"),
      );
      expect(m.warnings.map((w) => w.code)).to.deep.equal(["node-host-unknown"]);
    });
  });

  describe("Service", () => {
    const chain = idForKey(TENANT, "ServicePort", "default/web/http");
    const jump = idForKey(TENANT, "ServicePortSub", "default/web/http/10.96.0.10/6/80");
    const web = service({
      type: "ClusterIP",
      clusterIP: "10.96.0.10",
      ports: [{ name: "http", protocol: "TCP", port: 80 }],
    });
    const three = slice([
      { addresses: ["10.1.2.5"], conditions: { ready: true } },
      { addresses: ["10.1.0.5"] },
      { addresses: ["10.1.10.5"], conditions: { ready: null } },
    ]);

    it("three ready endpoints: one DNAT rule listing all three, so MidoNet spreads flows over them", () => {
      const m = mapService(web, [three], config);
      const dnat = m.resources.filter((r) => r.kind === "Rule" && (r.body as Rule).type === "dnat");
      expect(dnat).to.have.length(1);
      expect(dnat[0]?.key).to.equal(
        subId(chain, "DNAT 10.1.0.5:8080 10.1.2.5:8080 10.1.10.5:8080"),
      );
      expect(parentOf(dnat[0] as DesiredResource)).to.equal(chain);
      expect(dnat[0]?.body).to.deep.equal({
        id: subId(chain, "DNAT 10.1.0.5:8080 10.1.2.5:8080 10.1.10.5:8080"),
        type: "dnat",
        natTargets: [
          { addressFrom: "10.1.0.5", addressTo: "10.1.0.5", portFrom: 8080, portTo: 8080 },
          { addressFrom: "10.1.2.5", addressTo: "10.1.2.5", portFrom: 8080, portTo: 8080 },
          { addressFrom: "10.1.10.5", addressTo: "10.1.10.5", portFrom: 8080, portTo: 8080 },
        ],
        flowAction: "accept",
      });
    });

    it("jump rule ids as the original's: the protocol as its number in the key (converter_test.go vectors)", () => {
      // midonet-kubernetes pkg/converter/service/converter_test.go: service foo/bar,
      // cluster IP 192.2.0.1, ports cat UDP 8000 and dog TCP 200 give the sub-resource
      // keys "foo/bar/cat/192.2.0.1/17/8000" and "foo/bar/dog/192.2.0.1/6/200";
      // sub.go: the jump rule's id is IDForKey("ServicePortSub", that key).
      const m = mapService(
        {
          metadata: { namespace: "foo", name: "bar" },
          spec: {
            type: "ClusterIP",
            clusterIP: "192.2.0.1",
            ports: [
              { name: "cat", protocol: "UDP", port: 8000 },
              { name: "dog", protocol: "TCP", port: 200 },
            ],
          },
        },
        [],
        config,
      );
      const services = config.ids.servicesChain;
      const jumps = rulesOf(m, services).map((r) => r.key);
      expect(jumps.sort()).to.deep.equal(
        [
          idForKey(TENANT, "ServicePortSub", "foo/bar/cat/192.2.0.1/17/8000"),
          idForKey(TENANT, "ServicePortSub", "foo/bar/dog/192.2.0.1/6/200"),
        ].sort(),
      );
    });

    it("the service port chain: hairpin SNAT per endpoint first, then the DNAT", () => {
      const m = mapService(web, [three], config);
      expect(one(m, chain).body).to.deep.equal({
        id: chain,
        name: "KUBE-SVC-default/web/http",
        tenantId: TENANT,
      });
      const rules = rulesOf(m, chain).map((r) => r.body as Rule);
      expect(rules.map((r) => [r.type, r.nwSrcAddress ?? null])).to.deep.equal([
        ["snat", "10.1.0.5"],
        ["snat", "10.1.2.5"],
        ["snat", "10.1.10.5"],
        ["dnat", null],
      ]);
      expect(rules[0]).to.deep.equal({
        id: subId(chain, "Hairpin SNAT 10.96.0.10 10.1.0.5"),
        type: "snat",
        dlType: 2048,
        nwSrcAddress: "10.1.0.5",
        nwSrcLength: 32,
        natTargets: [
          { addressFrom: "10.96.0.10", addressTo: "10.96.0.10", portFrom: 30000, portTo: 60000 },
        ],
        flowAction: "continue",
      });
    });

    it("jumps from KUBE-SERVICES on dlType, cluster IP, protocol and port", () => {
      const m = mapService(web, [three], config);
      const r = one(m, jump);
      expect(parentOf(r)).to.equal(G.servicesChain);
      expect(r.dependsOn).to.deep.equal([G.servicesChain, chain]);
      expect(r.body).to.deep.equal({
        id: jump,
        type: "jump",
        jumpChainId: chain,
        dlType: 2048,
        nwDstAddress: "10.96.0.10",
        nwDstLength: 32,
        nwProto: 6,
        tpDst: { start: 80, end: 80 },
      });
    });

    const protocols: [string, number][] = [
      ["TCP", 6],
      ["UDP", 17],
      ["SCTP", 132],
    ];
    for (const [protocol, number] of protocols) {
      it(`${protocol} matches nwProto ${number}`, () => {
        const s = service({
          clusterIP: "10.96.0.10",
          ports: [{ name: "p", protocol, port: 5000 }],
        });
        const m = mapService(s, [], config);
        const jumps = m.resources.filter((r) => parentOf(r) === G.servicesChain);
        expect(jumps.map((r) => (r.body as Rule).nwProto)).to.deep.equal([number]);
      });
    }

    it("SCTP is mapped with a warning that MidoNet's NAT does not translate it", () => {
      const s = service({
        clusterIP: "10.96.0.10",
        ports: [{ name: "p", protocol: "SCTP", port: 5000 }],
      });
      expect(mapService(s, [], config).warnings.map((w) => w.code)).to.deep.equal([
        "sctp-not-translated",
      ]);
    });

    it("an unknown protocol: that port skipped with a warning, the others mapped, no throw", () => {
      const s = service({
        clusterIP: "10.96.0.10",
        ports: [
          { name: "odd", protocol: "DCCP", port: 9 },
          { name: "http", protocol: "TCP", port: 80 },
        ],
      });
      const m = mapService(s, [three], config);
      expect(m.warnings).to.have.length(1);
      expect(m.warnings[0]).to.include({ owner: "Service/default/web", code: "unknown-protocol" });
      expect(m.warnings[0]?.message).to.include("DCCP");
      expect(m.resources.filter((r) => r.kind === "Chain").map((r) => r.key)).to.deep.equal([
        chain,
      ]);
    });

    it("endpoints not ready are left out; ready null or absent counts as ready", () => {
      const m = mapService(
        web,
        [
          slice([
            {
              addresses: ["10.1.0.5"],
              conditions: { ready: false, serving: true, terminating: true },
            },
            { addresses: ["10.1.1.5"], conditions: {} },
            { addresses: ["10.1.2.5"], conditions: { ready: false } },
          ]),
        ],
        config,
      );
      const dnat = m.resources.find((r) => (r.body as Rule).type === "dnat");
      expect(ruleOf(dnat).natTargets?.map((t) => t.addressFrom)).to.deep.equal(["10.1.1.5"]);
    });

    it("no ready endpoint anywhere: the serving ones that are terminating, as kube-proxy falls back", () => {
      const m = mapService(
        web,
        [
          slice([
            {
              addresses: ["10.1.0.5"],
              conditions: { ready: false, serving: true, terminating: true },
            },
            {
              addresses: ["10.1.1.5"],
              conditions: { ready: false, serving: false, terminating: true },
            },
            { addresses: ["10.1.2.5"], conditions: { ready: false } },
          ]),
        ],
        config,
      );
      const dnat = m.resources.find((r) => (r.body as Rule).type === "dnat");
      expect(ruleOf(dnat).natTargets?.map((t) => t.addressFrom)).to.deep.equal(["10.1.0.5"]);
    });

    it("no usable endpoint: a drop rule ends the chain", () => {
      const m = mapService(
        web,
        [slice([{ addresses: ["10.1.0.5"], conditions: { ready: false } }])],
        config,
      );
      expect(rulesOf(m, chain).map((r) => r.body)).to.deep.equal([
        { id: subId(chain, "No Endpoints"), type: "drop" },
      ]);
    });

    it("merges several slices, drops repeats, and takes each endpoint's port from its slice", () => {
      const a = slice(
        [{ addresses: ["10.1.0.5"] }, { addresses: ["10.1.1.5"] }],
        undefined,
        "web-a",
      );
      const b = slice(
        [{ addresses: ["10.1.1.5"] }, { addresses: ["10.1.2.5"] }],
        [{ name: "http", protocol: "TCP", port: 9090 }],
        "web-b",
      );
      const c = slice([{ addresses: ["10.1.1.5"] }], undefined, "web-c");
      const m = mapService(web, [a, b, c], config);
      const dnat = m.resources.find((r) => (r.body as Rule).type === "dnat");
      expect(ruleOf(dnat).natTargets?.map((t) => `${t.addressFrom}:${t.portFrom}`)).to.deep.equal([
        "10.1.0.5:8080",
        "10.1.1.5:8080",
        "10.1.1.5:9090",
        "10.1.2.5:9090",
      ]);
      // One hairpin SNAT per address.
      expect(rulesOf(m, chain).filter((r) => (r.body as Rule).type === "snat")).to.have.length(3);
    });

    it("matches slice ports by name and protocol", () => {
      const s = service({
        clusterIP: "10.96.0.10",
        ports: [
          { name: "dns", protocol: "UDP", port: 53 },
          { name: "dns-tcp", protocol: "TCP", port: 53 },
        ],
      });
      const sl = slice(
        [{ addresses: ["10.1.0.5"] }],
        [
          { name: "dns", protocol: "UDP", port: 5353 },
          { name: "dns-tcp", protocol: "TCP", port: 5354 },
        ],
      );
      const m = mapService(s, [sl], config);
      for (const [portName, port] of [
        ["dns", 5353],
        ["dns-tcp", 5354],
      ] as const) {
        const c = idForKey(TENANT, "ServicePort", `default/web/${portName}`);
        const dnat = rulesOf(m, c).find((r) => (r.body as Rule).type === "dnat");
        expect(ruleOf(dnat).natTargets?.[0]?.portFrom).to.equal(port);
      }
    });

    const skipped: [string, Service["spec"], string][] = [
      ["a headless Service", { clusterIP: "None", ports: [{ port: 80 }] }, "headless"],
      ["a Service without a cluster IP", { ports: [{ port: 80 }] }, "headless"],
      [
        "an ExternalName Service",
        { type: "ExternalName", ports: [{ port: 80 }] },
        "not-cluster-ip",
      ],
    ];
    for (const [label, spec, reason] of skipped) {
      it(`${label} maps to nothing (${reason})`, () => {
        const m = mapService(service(spec), [three], config);
        expect(m.resources).to.deep.equal([]);
        expect(m.skipped).to.equal(reason);
      });
    }

    it("a NodePort Service's cluster IP is mapped like a ClusterIP one", () => {
      const s = service({
        type: "NodePort",
        clusterIP: "10.96.0.10",
        ports: [{ name: "http", protocol: "TCP", port: 80 }],
      });
      expect(mapService(s, [three], config).resources.map((r) => r.key)).to.deep.equal(
        mapService(web, [three], config).resources.map((r) => r.key),
      );
    });

    it("dual stack: the IPv4 cluster IP mapped, the IPv6 one and IPv6 slices reported or ignored", () => {
      const s = service({
        clusterIP: "fd00:96::10",
        clusterIPs: ["fd00:96::10", "10.96.0.10"],
        ports: [{ name: "http", protocol: "TCP", port: 80 }],
      });
      const v6 = slice([{ addresses: ["fd00:1::5"] }], undefined, "web-v6", "IPv6");
      const m = mapService(s, [three, v6], config);
      expect(m.warnings.map((w) => w.code)).to.deep.equal(["ipv6-not-mappable"]);
      expect(one(m, jump).body).to.deep.include({ nwDstAddress: "10.96.0.10", dlType: 2048 });
      const dnat = m.resources.find((r) => (r.body as Rule).type === "dnat");
      expect(ruleOf(dnat).natTargets).to.have.length(3);
    });

    it("IPv6 only: nothing MidoNet can hold, skipped with a warning", () => {
      const s = service({
        clusterIP: "fd00:96::10",
        clusterIPs: ["fd00:96::10"],
        ports: [{ port: 80 }],
      });
      const m = mapService(s, [], config);
      expect(m.skipped).to.equal("no-ipv4-cluster-ip");
      expect(m.warnings.map((w) => w.code)).to.deep.equal(["ipv6-not-mappable"]);
    });

    it("the same Service and slices in another order map to the same resources", () => {
      const a = slice(
        [{ addresses: ["10.1.0.5"] }, { addresses: ["10.1.1.5"] }],
        undefined,
        "web-a",
      );
      const b = slice(
        [{ addresses: ["10.1.2.5"] }, { addresses: ["10.1.0.5"] }],
        undefined,
        "web-b",
      );
      const twoPorts = (ports: { name: string; protocol: string; port: number }[]) =>
        service({ clusterIP: "10.96.0.10", ports });
      const p1 = { name: "http", protocol: "TCP", port: 80 };
      const p2 = { name: "dns", protocol: "UDP", port: 53 };
      const x = mapService(twoPorts([p1, p2]), [a, b], config);
      const y = mapService(twoPorts([p2, p1]), [b, a], config);
      expect(y.resources).to.deep.equal(x.resources);
    });
  });
});
