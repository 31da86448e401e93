/**
 * src/services/endpoints: the endpoints of a Service port a node uses, case
 * by case as kube-proxy's TestCategorizeEndpoints (pkg/proxy/topology_test.go)
 * lays them out: a traffic policy, the endpoints with their conditions and
 * nodes, and what Cluster, Local and all-reachable come to on node-1.
 */
import { expect } from "chai";
import {
  categorizeEndpoints,
  type NodeTopology,
  type ServiceEndpoint,
  type SliceView,
  slicePortEndpoints,
  type TrafficPolicy,
} from "../../src/services/endpoints.js";

const NODE = "node-1";
/** node-1 in zone-a (its topology.kubernetes.io/zone label). */
const HERE: NodeTopology = { name: NODE, zone: "zone-a" };
/** Hints as the EndpointSlice controller writes them (trafficDistribution, the topology annotation). */
const hinted = (e: ServiceEndpoint, zones: string[], nodes: string[] = []): ServiceEndpoint => ({
  ...e,
  ...(zones.length > 0 ? { zoneHints: zones } : {}),
  ...(nodes.length > 0 ? { nodeHints: nodes } : {}),
});
const ep = (
  ip: string,
  nodeName: string,
  state: "ready" | "serving-terminating" | "terminating" | "unready" = "ready",
): ServiceEndpoint => ({
  ip,
  port: 80,
  nodeName,
  ready: state === "ready",
  serving: state === "ready" || state === "serving-terminating",
  terminating: state === "serving-terminating" || state === "terminating",
});
const CLUSTER: TrafficPolicy = {
  internalLocal: false,
  externalLocal: false,
  externallyAccessible: false,
};
const INTERNAL_LOCAL: TrafficPolicy = { ...CLUSTER, internalLocal: true };
const EXTERNAL_LOCAL: TrafficPolicy = {
  ...CLUSTER,
  externalLocal: true,
  externallyAccessible: true,
};
const ips = (eps: readonly ServiceEndpoint[] | undefined) => eps?.map((e) => e.ip).sort();

interface Case {
  name: string;
  policy: TrafficPolicy;
  endpoints: ServiceEndpoint[];
  cluster: string[] | undefined;
  local: string[] | undefined;
  all: string[];
  hasAny: boolean;
  /** This node, when not HERE. */
  node?: NodeTopology;
}

const CASES: Case[] = [
  {
    name: "Cluster: every ready endpoint, wherever it is",
    policy: CLUSTER,
    endpoints: [
      ep("10.0.0.1", NODE),
      ep("10.0.0.2", "node-2"),
      ep("10.0.0.3", "node-2", "unready"),
    ],
    cluster: ["10.0.0.1", "10.0.0.2"],
    local: undefined,
    all: ["10.0.0.1", "10.0.0.2"],
    hasAny: true,
  },
  {
    name: "Cluster: no ready endpoint, so the serving terminating ones (not the merely terminating)",
    policy: CLUSTER,
    endpoints: [
      ep("10.0.0.1", NODE, "serving-terminating"),
      ep("10.0.0.2", "node-2", "terminating"),
      ep("10.0.0.3", "node-2", "unready"),
    ],
    cluster: ["10.0.0.1"],
    local: undefined,
    all: ["10.0.0.1"],
    hasAny: true,
  },
  {
    name: "Cluster: one ready endpoint: the terminating ones are not used",
    policy: CLUSTER,
    endpoints: [ep("10.0.0.1", NODE, "serving-terminating"), ep("10.0.0.2", "node-2")],
    cluster: ["10.0.0.2"],
    local: undefined,
    all: ["10.0.0.2"],
    hasAny: true,
  },
  {
    name: "Cluster: nothing usable: no endpoint, and none anywhere (rejected)",
    policy: CLUSTER,
    endpoints: [ep("10.0.0.1", NODE, "unready"), ep("10.0.0.2", "node-2", "terminating")],
    cluster: [],
    local: undefined,
    all: [],
    hasAny: false,
  },
  {
    name: "internalTrafficPolicy Local: the ready endpoints of this node only",
    policy: INTERNAL_LOCAL,
    endpoints: [ep("10.0.0.1", NODE), ep("10.0.0.2", "node-2"), ep("10.0.0.3", NODE, "unready")],
    cluster: undefined,
    local: ["10.0.0.1"],
    all: ["10.0.0.1"],
    hasAny: true,
  },
  {
    name: "internalTrafficPolicy Local, none on this node: nothing here, yet some elsewhere (dropped, not rejected)",
    policy: INTERNAL_LOCAL,
    endpoints: [ep("10.0.0.2", "node-2")],
    cluster: undefined,
    local: [],
    all: [],
    hasAny: true,
  },
  {
    name: "internalTrafficPolicy Local: this node's serving terminating ones when it has no ready one",
    policy: INTERNAL_LOCAL,
    endpoints: [ep("10.0.0.1", NODE, "serving-terminating"), ep("10.0.0.2", "node-2")],
    cluster: undefined,
    local: ["10.0.0.1"],
    all: ["10.0.0.1"],
    hasAny: true,
  },
  {
    name: "externalTrafficPolicy Local with a node port: Cluster for pods, Local for outside; all reachable is Cluster",
    policy: EXTERNAL_LOCAL,
    endpoints: [ep("10.0.0.1", NODE), ep("10.0.0.2", "node-2")],
    cluster: ["10.0.0.1", "10.0.0.2"],
    local: ["10.0.0.1"],
    all: ["10.0.0.1", "10.0.0.2"],
    hasAny: true,
  },
  {
    name: "externalTrafficPolicy Local, this node's endpoint terminating: all reachable joins the two",
    policy: EXTERNAL_LOCAL,
    endpoints: [ep("10.0.0.1", NODE, "serving-terminating"), ep("10.0.0.2", "node-2")],
    cluster: ["10.0.0.2"],
    local: ["10.0.0.1"],
    all: ["10.0.0.1", "10.0.0.2"],
    hasAny: true,
  },
  {
    name: "externalTrafficPolicy Local without a way in from outside: plain Cluster",
    policy: { ...EXTERNAL_LOCAL, externallyAccessible: false },
    endpoints: [ep("10.0.0.1", NODE), ep("10.0.0.2", "node-2")],
    cluster: ["10.0.0.1", "10.0.0.2"],
    local: undefined,
    all: ["10.0.0.1", "10.0.0.2"],
    hasAny: true,
  },
  {
    name: "zone hints on every ready endpoint, some for this zone: Cluster is those",
    policy: CLUSTER,
    endpoints: [
      hinted(ep("10.0.0.1", "node-2"), ["zone-a"]),
      hinted(ep("10.0.0.2", "node-3"), ["zone-b"]),
      hinted(ep("10.0.0.3", "node-4"), ["zone-a", "zone-c"]),
    ],
    cluster: ["10.0.0.1", "10.0.0.3"],
    local: undefined,
    all: ["10.0.0.1", "10.0.0.3"],
    hasAny: true,
  },
  {
    name: "zone hints, one ready endpoint without: hints ignored",
    policy: CLUSTER,
    endpoints: [hinted(ep("10.0.0.1", "node-2"), ["zone-a"]), ep("10.0.0.2", "node-3")],
    cluster: ["10.0.0.1", "10.0.0.2"],
    local: undefined,
    all: ["10.0.0.1", "10.0.0.2"],
    hasAny: true,
  },
  {
    name: "zone hints, an unready endpoint without: it does not count",
    policy: CLUSTER,
    endpoints: [
      hinted(ep("10.0.0.1", "node-2"), ["zone-a"]),
      hinted(ep("10.0.0.2", "node-3"), ["zone-b"]),
      ep("10.0.0.3", "node-3", "unready"),
    ],
    cluster: ["10.0.0.1"],
    local: undefined,
    all: ["10.0.0.1"],
    hasAny: true,
  },
  {
    name: "zone hints, none for this zone: hints ignored",
    policy: CLUSTER,
    endpoints: [
      hinted(ep("10.0.0.1", "node-2"), ["zone-b"]),
      hinted(ep("10.0.0.2", "node-3"), ["zone-c"]),
    ],
    cluster: ["10.0.0.1", "10.0.0.2"],
    local: undefined,
    all: ["10.0.0.1", "10.0.0.2"],
    hasAny: true,
  },
  {
    name: "zone hints, this node without a zone label: hints ignored",
    policy: CLUSTER,
    node: { name: NODE },
    endpoints: [
      hinted(ep("10.0.0.1", "node-2"), ["zone-a"]),
      hinted(ep("10.0.0.2", "node-3"), ["zone-b"]),
    ],
    cluster: ["10.0.0.1", "10.0.0.2"],
    local: undefined,
    all: ["10.0.0.1", "10.0.0.2"],
    hasAny: true,
  },
  {
    name: "node hints on every ready endpoint, one for this node (PreferSameNode): Cluster is it, before zone hints",
    policy: CLUSTER,
    endpoints: [
      hinted(ep("10.0.0.1", NODE), ["zone-a"], [NODE]),
      hinted(ep("10.0.0.2", "node-2"), ["zone-a"], ["node-2"]),
    ],
    cluster: ["10.0.0.1"],
    local: undefined,
    all: ["10.0.0.1"],
    hasAny: true,
  },
  {
    name: "node hints, none for this node: the zone hints decide",
    policy: CLUSTER,
    endpoints: [
      hinted(ep("10.0.0.1", "node-2"), ["zone-a"], ["node-2"]),
      hinted(ep("10.0.0.2", "node-3"), ["zone-b"], ["node-3"]),
    ],
    cluster: ["10.0.0.1"],
    local: undefined,
    all: ["10.0.0.1"],
    hasAny: true,
  },
  {
    name: "zone hints under internalTrafficPolicy Local: they play no part",
    policy: INTERNAL_LOCAL,
    endpoints: [
      hinted(ep("10.0.0.1", NODE), ["zone-b"]),
      hinted(ep("10.0.0.2", "node-2"), ["zone-a"]),
    ],
    cluster: undefined,
    local: ["10.0.0.1"],
    all: ["10.0.0.1"],
    hasAny: true,
  },
  {
    name: "zone hints with externalTrafficPolicy Local: Cluster narrowed, Local this node's, all reachable joins the two",
    policy: EXTERNAL_LOCAL,
    endpoints: [
      hinted(ep("10.0.0.1", NODE), ["zone-b"]),
      hinted(ep("10.0.0.2", "node-2"), ["zone-a"]),
    ],
    cluster: ["10.0.0.2"],
    local: ["10.0.0.1"],
    all: ["10.0.0.1", "10.0.0.2"],
    hasAny: true,
  },
  {
    name: "zone hints, no ready endpoint: the serving terminating ones, hints aside",
    policy: CLUSTER,
    endpoints: [
      hinted(ep("10.0.0.1", "node-2", "serving-terminating"), ["zone-b"]),
      hinted(ep("10.0.0.2", "node-3", "serving-terminating"), ["zone-a"]),
    ],
    cluster: ["10.0.0.1", "10.0.0.2"],
    local: undefined,
    all: ["10.0.0.1", "10.0.0.2"],
    hasAny: true,
  },
];

describe("services/endpoints: which endpoints a node uses (kube-proxy's CategorizeEndpoints)", () => {
  for (const c of CASES) {
    it(c.name, () => {
      const got = categorizeEndpoints(c.endpoints, c.policy, c.node ?? HERE);
      expect({
        cluster: ips(got.cluster),
        local: ips(got.local),
        all: ips(got.allReachable),
        hasAny: got.hasAny,
      }).to.deep.equal({ cluster: c.cluster, local: c.local, all: c.all, hasAny: c.hasAny });
    });
  }

  it("no endpoint at all: nothing, and none anywhere", () => {
    expect(categorizeEndpoints([], CLUSTER, HERE)).to.deep.equal({
      allReachable: [],
      hasAny: false,
    });
  });
});

describe("services/endpoints: a Service port's endpoints from its EndpointSlices", () => {
  const slices: SliceView[] = [
    {
      addressType: "IPv4",
      ports: [
        { name: "http", protocol: "TCP", port: 8080 },
        { name: "dns", protocol: "UDP", port: 53 },
      ],
      endpoints: [
        { addresses: ["10.0.0.1"], nodeName: "node-1", conditions: { ready: true } },
        // Conditions absent: ready, serving as ready, not terminating.
        { addresses: ["10.0.0.2"], nodeName: "node-2" },
        { addresses: ["10.0.0.3"], conditions: { ready: false, serving: true, terminating: true } },
      ],
    },
    {
      // The same port name resolves to another number in another slice (a rollout changing targetPort).
      addressType: "IPv4",
      ports: [{ name: "http", protocol: "TCP", port: 9090 }],
      endpoints: [
        { addresses: ["10.0.0.4"], conditions: { ready: null } },
        // Listed twice meanwhile by two slices: counted once.
        { addresses: ["10.0.0.1"], nodeName: "node-1" },
      ],
    },
    {
      addressType: "IPv4",
      ports: [{ name: "http", protocol: "TCP", port: 8080 }],
      endpoints: [{ addresses: ["10.0.0.1"] }],
    },
    {
      addressType: "IPv6",
      ports: [{ name: "http", port: 8080 }],
      endpoints: [{ addresses: ["fd00::1"] }],
    },
    {
      addressType: "FQDN",
      ports: [{ name: "http", port: 8080 }],
      endpoints: [{ addresses: ["example.com"] }],
    },
  ];

  it("resolves the port by name and protocol per slice, counts an endpoint once, reads absent conditions as the API does", () => {
    expect(slicePortEndpoints(slices, "http", "TCP", 4)).to.deep.equal([
      {
        ip: "10.0.0.1",
        port: 8080,
        nodeName: "node-1",
        ready: true,
        serving: true,
        terminating: false,
      },
      {
        ip: "10.0.0.2",
        port: 8080,
        nodeName: "node-2",
        ready: true,
        serving: true,
        terminating: false,
      },
      { ip: "10.0.0.3", port: 8080, ready: false, serving: true, terminating: true },
      { ip: "10.0.0.4", port: 9090, ready: true, serving: true, terminating: false },
      {
        ip: "10.0.0.1",
        port: 9090,
        nodeName: "node-1",
        ready: true,
        serving: true,
        terminating: false,
      },
    ]);
  });

  it("one family at a time; a port of another protocol or name is not this one; FQDN slices never count", () => {
    expect(slicePortEndpoints(slices, "http", "TCP", 6).map((e) => e.ip)).to.deep.equal([
      "fd00::1",
    ]);
    expect(
      slicePortEndpoints(slices, "dns", "UDP", 4).map((e) => `${e.ip}:${e.port}`),
    ).to.deep.equal(["10.0.0.1:53", "10.0.0.2:53", "10.0.0.3:53"]);
    expect(slicePortEndpoints(slices, "dns", "TCP", 4)).to.deep.equal([]);
    expect(slicePortEndpoints(slices, "", "TCP", 4)).to.deep.equal([]);
  });
});
