/**
 * The policy model's parts one by one: label selectors, address ranges, the
 * API's JSON read into the model's inputs, and the model's answers as data
 * (podPolicy's PodRules, namedTargets, peerAddresses, PolicyProblems). The
 * reachability they add up to is tested in policy-model.test.ts.
 */
import { expect } from "chai";
import {
  type AddressRanges,
  addressRanges,
  formatRange,
  ipBlockProblem,
  type Range,
  rangeCidrs,
  rangesContain,
} from "../../src/policy/addresses.js";
import {
  namespaceFromApi,
  networkPolicyFromApi,
  podFromApi,
  podPlacement,
} from "../../src/policy/from-api.js";
import { PolicyModel } from "../../src/policy/model.js";
import { selectorMatches, selectorProblem } from "../../src/policy/selector.js";
import type {
  LabelSelector,
  LabelSelectorRequirement,
  NetworkPolicy,
  PolicyPod,
} from "../../src/policy/types.js";

const formatted = (r: AddressRanges) => ({
  v4: r.v4.map((x) => formatRange(x, 4)),
  v6: r.v6.map((x) => formatRange(x, 6)),
});

describe("policy/selector", () => {
  const web = { app: "web", tier: "front" };
  const req = (
    operator: LabelSelectorRequirement["operator"],
    key: string,
    values?: string[],
  ): LabelSelector => ({
    matchExpressions: [{ key, operator, ...(values ? { values } : {}) }],
  });

  const cases: Array<[string, LabelSelector | undefined, Record<string, string>, boolean]> = [
    ["undefined selector matches everything", undefined, {}, true],
    ["empty selector matches everything", {}, web, true],
    ["empty selector matches a pod without labels", {}, {}, true],
    [
      "empty matchLabels and matchExpressions match everything",
      { matchLabels: {}, matchExpressions: [] },
      {},
      true,
    ],
    ["matchLabels: equal value", { matchLabels: { app: "web" } }, web, true],
    ["matchLabels: other value", { matchLabels: { app: "db" } }, web, false],
    ["matchLabels: missing key", { matchLabels: { role: "web" } }, web, false],
    [
      "matchLabels: every pair must hold",
      { matchLabels: { app: "web", tier: "back" } },
      web,
      false,
    ],
    ["matchLabels: both pairs hold", { matchLabels: { app: "web", tier: "front" } }, web, true],
    ["matchLabels: an empty value is not a missing label", { matchLabels: { app: "" } }, {}, false],
    [
      "matchLabels: an empty value matches an empty label",
      { matchLabels: { app: "" } },
      { app: "" },
      true,
    ],
    [
      "matchLabels: a key named like an Object method",
      { matchLabels: { constructor: "x" } },
      {},
      false,
    ],
    ["In: value listed", req("In", "app", ["db", "web"]), web, true],
    ["In: value not listed", req("In", "app", ["db"]), web, false],
    ["In: missing key", req("In", "role", ["web"]), web, false],
    ["In: without values matches nothing", req("In", "app"), web, false],
    ["NotIn: value listed", req("NotIn", "app", ["web"]), web, false],
    ["NotIn: value not listed", req("NotIn", "app", ["db"]), web, true],
    ["NotIn: missing key holds", req("NotIn", "role", ["web"]), web, true],
    ["Exists: present", req("Exists", "tier"), web, true],
    ["Exists: present with an empty value", req("Exists", "tier"), { tier: "" }, true],
    ["Exists: missing", req("Exists", "role"), web, false],
    ["Exists: a key named like an Object method", req("Exists", "toString"), {}, false],
    ["DoesNotExist: present", req("DoesNotExist", "tier"), web, false],
    ["DoesNotExist: missing", req("DoesNotExist", "role"), web, true],
    [
      "unknown operator matches nothing",
      { matchExpressions: [{ key: "app", operator: "Equals" as "In", values: ["web"] }] },
      web,
      false,
    ],
    [
      "every expression must hold (one fails)",
      {
        matchExpressions: [
          { key: "app", operator: "In", values: ["web"] },
          { key: "tier", operator: "NotIn", values: ["front"] },
        ],
      },
      web,
      false,
    ],
    [
      "every expression must hold (all hold)",
      {
        matchExpressions: [
          { key: "app", operator: "In", values: ["web"] },
          { key: "tier", operator: "Exists" },
          { key: "role", operator: "DoesNotExist" },
        ],
      },
      web,
      true,
    ],
    [
      "matchLabels and matchExpressions together: both hold",
      {
        matchLabels: { app: "web" },
        matchExpressions: [{ key: "tier", operator: "In", values: ["front"] }],
      },
      web,
      true,
    ],
    [
      "matchLabels and matchExpressions together: labels fail",
      {
        matchLabels: { app: "db" },
        matchExpressions: [{ key: "tier", operator: "In", values: ["front"] }],
      },
      web,
      false,
    ],
    [
      "matchLabels and matchExpressions together: expressions fail",
      {
        matchLabels: { app: "web" },
        matchExpressions: [{ key: "tier", operator: "DoesNotExist" }],
      },
      web,
      false,
    ],
  ];
  for (const [title, selector, labels, want] of cases) {
    it(`${title} → ${want}`, () => {
      expect(selectorMatches(selector, labels)).to.equal(want);
    });
  }

  it("selectorProblem: none for valid selectors, a reason for an unknown operator or In/NotIn without values", () => {
    expect(selectorProblem(undefined)).to.equal(undefined);
    expect(selectorProblem({})).to.equal(undefined);
    expect(selectorProblem(req("Exists", "a"))).to.equal(undefined);
    expect(selectorProblem(req("NotIn", "a", ["b"]))).to.equal(undefined);
    expect(
      selectorProblem({
        matchExpressions: [{ key: "app", operator: "Equals" as "In", values: ["x"] }],
      }),
    ).to.equal('matchExpressions key "app": unknown operator "Equals"');
    expect(selectorProblem(req("In", "app"))).to.equal(
      'matchExpressions key "app": In needs values',
    );
    expect(selectorProblem(req("NotIn", "app", []))).to.equal(
      'matchExpressions key "app": NotIn needs values',
    );
  });
});

describe("policy/addresses", () => {
  it("pod addresses become single-address ranges, sorted, touching ones joined", () => {
    const r = addressRanges(["10.0.0.4", "10.0.0.1", "10.0.0.2", "10.0.0.2", "10.0.0.9"], []);
    expect(formatted(r)).to.deep.equal({
      v4: ["10.0.0.1-10.0.0.2", "10.0.0.4", "10.0.0.9"],
      v6: [],
    });
  });

  it("an ipBlock is its CIDR; a CIDR with host bits means its network", () => {
    expect(formatted(addressRanges([], [{ cidr: "10.1.0.77/24" }]))).to.deep.equal({
      v4: ["10.1.0.0-10.1.0.255"],
      v6: [],
    });
    expect(formatted(addressRanges([], [{ cidr: "10.1.0.7/32" }]))).to.deep.equal({
      v4: ["10.1.0.7"],
      v6: [],
    });
    expect(formatted(addressRanges([], [{ cidr: "0.0.0.0/0" }, { cidr: "::/0" }]))).to.deep.equal({
      v4: ["0.0.0.0-255.255.255.255"],
      v6: ["::-ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"],
    });
  });

  it("excepts carve holes, in any order, overlapping or not", () => {
    const r = addressRanges(
      [],
      [{ cidr: "10.0.0.0/24", except: ["10.0.0.128/25", "10.0.0.16/28", "10.0.0.20/30"] }],
    );
    expect(formatted(r).v4).to.deep.equal(["10.0.0.0-10.0.0.15", "10.0.0.32-10.0.0.127"]);
  });

  it("an except at either edge, or covering the whole block, leaves what is left", () => {
    expect(
      formatted(addressRanges([], [{ cidr: "10.0.0.0/30", except: ["10.0.0.0/32"] }])).v4,
    ).to.deep.equal(["10.0.0.1-10.0.0.3"]);
    expect(
      formatted(addressRanges([], [{ cidr: "10.0.0.0/30", except: ["10.0.0.3/32"] }])).v4,
    ).to.deep.equal(["10.0.0.0-10.0.0.2"]);
    expect(addressRanges([], [{ cidr: "10.0.0.0/30", except: ["10.0.0.0/30"] }]).v4).to.deep.equal(
      [],
    );
    expect(addressRanges([], [{ cidr: "10.0.0.0/30", except: ["10.0.0.0/8"] }]).v4).to.deep.equal(
      [],
    );
  });

  it("an except outside the block or of the other family cuts nothing", () => {
    // ::/96 spans the same numbers as all of IPv4: only the family tells them apart.
    const r = addressRanges([], [{ cidr: "10.0.0.0/30", except: ["10.0.1.0/24", "::/96"] }]);
    expect(formatted(r)).to.deep.equal({ v4: ["10.0.0.0-10.0.0.3"], v6: [] });
  });

  it("pods and blocks merge: a pod inside another block's except is still in (peers OR)", () => {
    const r = addressRanges(
      ["10.0.0.5", "10.0.0.200", "fd00::1"],
      [{ cidr: "10.0.0.0/25", except: ["10.0.0.4/30"] }, { cidr: "10.0.0.128/26" }],
    );
    expect(formatted(r)).to.deep.equal({
      v4: ["10.0.0.0-10.0.0.3", "10.0.0.5", "10.0.0.8-10.0.0.191", "10.0.0.200"],
      v6: ["fd00::1"],
    });
  });

  it("IPv6 blocks with excepts", () => {
    const r = addressRanges([], [{ cidr: "fd00::/120", except: ["fd00::10/124"] }]);
    expect(formatted(r)).to.deep.equal({ v4: [], v6: ["fd00::-fd00::f", "fd00::20-fd00::ff"] });
  });

  it("addresses and CIDRs that do not parse are skipped", () => {
    const r = addressRanges(
      ["not-an-ip", "10.0.0.256", "10.0.0.1"],
      [{ cidr: "10.0.0.0/33" }, { cidr: "x" }],
    );
    expect(formatted(r)).to.deep.equal({ v4: ["10.0.0.1"], v6: [] });
  });

  it("an IPv4-mapped IPv6 address counts as IPv4", () => {
    expect(formatted(addressRanges(["::ffff:10.0.0.1"], []))).to.deep.equal({
      v4: ["10.0.0.1"],
      v6: [],
    });
  });

  it("ipBlockProblem names the CIDR that does not parse", () => {
    expect(ipBlockProblem({ cidr: "10.0.0.0/8", except: ["10.1.0.0/16"] })).to.equal(undefined);
    expect(ipBlockProblem({ cidr: "fd00::/64" })).to.equal(undefined);
    expect(ipBlockProblem({ cidr: "10.0.0.0/33" })).to.equal(
      'ipBlock: "10.0.0.0/33" is not a CIDR',
    );
    expect(ipBlockProblem({ cidr: "10.0.0.0" })).to.equal('ipBlock: "10.0.0.0" is not a CIDR');
    expect(ipBlockProblem({ cidr: "10.0.0.0/8", except: ["10.1.0.0/16", "nope"] })).to.equal(
      'ipBlock: "nope" is not a CIDR',
    );
  });

  describe("rangesContain", () => {
    const r = addressRanges(["fd00::7"], [{ cidr: "10.0.0.0/24", except: ["10.0.0.128/25"] }]);
    for (const [ip, want] of [
      ["10.0.0.0", true],
      ["10.0.0.127", true],
      ["10.0.0.128", false],
      ["10.0.0.255", false],
      ["9.255.255.255", false],
      ["10.0.1.0", false],
      ["::ffff:10.0.0.5", true],
      // ::a00:5 is 10.0.0.5's number, but an IPv6 address.
      ["::a00:5", false],
      ["fd00::7", true],
      ["fd00::6", false],
      ["fd00::8", false],
      ["10.0.0.0/24", false],
      ["", false],
    ] as const) {
      it(`${JSON.stringify(ip)} → ${want}`, () => {
        expect(rangesContain(r, ip)).to.equal(want);
      });
    }
    it("an empty set contains nothing", () => {
      expect(rangesContain({ v4: [], v6: [] }, "10.0.0.1")).to.equal(false);
    });
  });

  it("formatRange writes one address or first-last, as Go writes addresses", () => {
    const one: Range = [0x0a000001n, 0x0a000001n];
    const span: Range = [0x0a000000n, 0x0a0000ffn];
    expect(formatRange(one, 4)).to.equal("10.0.0.1");
    expect(formatRange(span, 4)).to.equal("10.0.0.0-10.0.0.255");
    const v6: Range = [0xfd00n << 112n, (0xfd00n << 112n) + 0xffffn];
    expect(formatRange(v6, 6)).to.equal("fd00::-fd00::ffff");
    expect(formatRange([1n, 1n], 6)).to.equal("::1");
  });
});

describe("policy/from-api", () => {
  // The documentation's example, as kubectl sends it and a watch hands it back.
  const apiPolicy = {
    apiVersion: "networking.k8s.io/v1",
    kind: "NetworkPolicy",
    metadata: {
      name: "test-network-policy",
      namespace: "default",
      uid: "0b4f8a4e-1f44-4c2d-9d38-9a1c4c5b0e11",
      resourceVersion: "4242",
      generation: 1,
      annotations: { "kubectl.kubernetes.io/last-applied-configuration": "{}" },
    },
    spec: {
      podSelector: { matchLabels: { role: "db" } },
      policyTypes: ["Ingress", "Egress"],
      ingress: [
        {
          from: [
            { ipBlock: { cidr: "172.17.0.0/16", except: ["172.17.1.0/24"] } },
            { namespaceSelector: { matchLabels: { project: "myproject" } } },
            { podSelector: { matchLabels: { role: "frontend" } } },
            {
              namespaceSelector: {
                matchExpressions: [{ key: "env", operator: "In", values: ["prod", "staging"] }],
              },
              podSelector: { matchExpressions: [{ key: "role", operator: "Exists" }] },
            },
          ],
          ports: [
            { protocol: "TCP", port: 6379 },
            { protocol: "TCP", port: "redis" },
          ],
        },
      ],
      egress: [
        {
          to: [{ ipBlock: { cidr: "10.0.0.0/24" } }],
          ports: [
            { protocol: "TCP", port: 32000, endPort: 32768 },
            { port: 53, protocol: "UDP" },
          ],
        },
        {},
      ],
    },
  };

  it("reads a NetworkPolicy as kubectl sends it", () => {
    expect(networkPolicyFromApi(apiPolicy)).to.deep.equal({
      namespace: "default",
      name: "test-network-policy",
      podSelector: { matchLabels: { role: "db" }, matchExpressions: [] },
      policyTypes: ["Ingress", "Egress"],
      ingress: [
        {
          peers: [
            { ipBlock: { cidr: "172.17.0.0/16", except: ["172.17.1.0/24"] } },
            { namespaceSelector: { matchLabels: { project: "myproject" }, matchExpressions: [] } },
            { podSelector: { matchLabels: { role: "frontend" }, matchExpressions: [] } },
            {
              namespaceSelector: {
                matchLabels: {},
                matchExpressions: [{ key: "env", operator: "In", values: ["prod", "staging"] }],
              },
              podSelector: {
                matchLabels: {},
                matchExpressions: [{ key: "role", operator: "Exists" }],
              },
            },
          ],
          ports: [
            { protocol: "TCP", port: 6379 },
            { protocol: "TCP", port: "redis" },
          ],
        },
      ],
      egress: [
        {
          peers: [{ ipBlock: { cidr: "10.0.0.0/24", except: [] } }],
          ports: [
            { protocol: "TCP", port: 32000, endPort: 32768 },
            { protocol: "UDP", port: 53 },
          ],
        },
        { peers: [], ports: [] },
      ],
    } satisfies NetworkPolicy);
  });

  it("no policyTypes stays unset (the model works out the implicit value); a protocol defaults to TCP", () => {
    const p = networkPolicyFromApi({
      metadata: { name: "p", namespace: "x" },
      spec: { podSelector: {}, egress: [{ ports: [{ port: "serve-80-tcp" }, {}] }] },
    });
    expect(p).to.not.have.property("policyTypes");
    expect(p.podSelector).to.deep.equal({ matchLabels: {}, matchExpressions: [] });
    expect(p.ingress).to.deep.equal([]);
    expect(p.egress).to.deep.equal([
      { peers: [], ports: [{ protocol: "TCP", port: "serve-80-tcp" }, { protocol: "TCP" }] },
    ]);
  });

  it("client-node's typed objects spell `from` as `_from`", () => {
    const p = networkPolicyFromApi({
      metadata: { name: "p", namespace: "x" },
      spec: {
        podSelector: {},
        ingress: [{ _from: [{ podSelector: { matchLabels: { pod: "b" } } }] }],
      },
    });
    expect(p.ingress).to.deep.equal([
      { peers: [{ podSelector: { matchLabels: { pod: "b" }, matchExpressions: [] } }], ports: [] },
    ]);
  });

  it("null selectors in a peer are absent; non-string labels are dropped", () => {
    const p = networkPolicyFromApi({
      metadata: { name: "p", namespace: "x" },
      spec: {
        podSelector: { matchLabels: { a: "1", b: 2 } },
        ingress: [{ from: [{ podSelector: null, namespaceSelector: {} }] }],
      },
    });
    expect(p.podSelector.matchLabels).to.deep.equal({ a: "1" });
    expect(p.ingress?.[0]?.peers).to.deep.equal([
      { namespaceSelector: { matchLabels: {}, matchExpressions: [] } },
    ]);
  });

  const apiPod = {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name: "web-0",
      namespace: "shop",
      labels: { app: "web", "pod-template-hash": "abc" },
    },
    spec: {
      nodeName: "node-1",
      initContainers: [{ name: "init", ports: [{ name: "metrics", containerPort: 9090 }] }],
      containers: [
        {
          name: "web",
          ports: [
            { name: "http", containerPort: 8080, protocol: "TCP" },
            { containerPort: 8443 },
            { name: "dns", containerPort: 5353, protocol: "UDP" },
          ],
        },
        { name: "sidecar", ports: [{ name: "sctp-feed", containerPort: 9899, protocol: "SCTP" }] },
        { name: "no-ports" },
      ],
    },
    status: {
      phase: "Running",
      podIP: "10.244.1.7",
      podIPs: [{ ip: "10.244.1.7" }, { ip: "fd00:10:244:1::7" }],
    },
  };

  it("reads a Pod: labels, podIPs (dual-stack), named container ports", () => {
    expect(podFromApi(apiPod)).to.deep.equal({
      namespace: "shop",
      name: "web-0",
      labels: { app: "web", "pod-template-hash": "abc" },
      ips: ["10.244.1.7", "fd00:10:244:1::7"],
      namedPorts: [
        { name: "metrics", protocol: "TCP", port: 9090 },
        { name: "http", protocol: "TCP", port: 8080 },
        { name: "dns", protocol: "UDP", port: 5353 },
        { name: "sctp-feed", protocol: "SCTP", port: 9899 },
      ],
      hostNetwork: false,
    } satisfies PolicyPod);
    expect(podPlacement(apiPod)).to.deep.equal({ nodeName: "node-1", finished: false });
  });

  it("falls back to status.podIP; no address before scheduling; hostNetwork is read", () => {
    const host = podFromApi({
      metadata: { name: "kube-proxy-x", namespace: "kube-system" },
      spec: { hostNetwork: true, containers: [] },
      status: { podIP: "192.168.0.10", phase: "Succeeded" },
    });
    expect(host.ips).to.deep.equal(["192.168.0.10"]);
    expect(host.hostNetwork).to.equal(true);
    expect(host.labels).to.deep.equal({});
    const pending = podFromApi({ metadata: { name: "p", namespace: "x" }, spec: {}, status: {} });
    expect(pending.ips).to.deep.equal([]);
    expect(pending.hostNetwork).to.equal(false);
    expect(podPlacement({ spec: {}, status: { phase: "Failed" } })).to.deep.equal({
      finished: true,
    });
    expect(podPlacement({ spec: { nodeName: "n" }, status: { phase: "Succeeded" } })).to.deep.equal(
      {
        nodeName: "n",
        finished: true,
      },
    );
  });

  it("reads a Namespace with its labels", () => {
    expect(
      namespaceFromApi({
        metadata: { name: "shop", labels: { "kubernetes.io/metadata.name": "shop", team: "a" } },
      }),
    ).to.deep.equal({ name: "shop", labels: { "kubernetes.io/metadata.name": "shop", team: "a" } });
  });

  it("what it reads the model applies: the documentation's example end to end", () => {
    const m = new PolicyModel();
    m.upsertNamespace(namespaceFromApi({ metadata: { name: "default", labels: {} } }));
    m.upsertNamespace(
      namespaceFromApi({ metadata: { name: "other", labels: { project: "myproject" } } }),
    );
    const db = podFromApi({
      metadata: { name: "db", namespace: "default", labels: { role: "db" } },
      spec: { containers: [{ ports: [{ name: "redis", containerPort: 6380 }] }] },
      status: { podIP: "10.0.0.10" },
    });
    const frontend = podFromApi({
      metadata: { name: "fe", namespace: "default", labels: { role: "frontend" } },
      spec: { containers: [] },
      status: { podIP: "10.0.0.11" },
    });
    const stranger = podFromApi({
      metadata: { name: "s", namespace: "default", labels: { role: "stranger" } },
      spec: { containers: [] },
      status: { podIP: "10.0.0.12" },
    });
    const elsewhere = podFromApi({
      metadata: { name: "e", namespace: "other", labels: {} },
      spec: { containers: [] },
      status: { podIP: "10.0.1.5" },
    });
    for (const p of [db, frontend, stranger, elsewhere]) m.upsertPod(p);
    expect(m.upsertPolicy(networkPolicyFromApi(apiPolicy))).to.equal(undefined);
    expect(m.allows(db, "ingress", "10.0.0.11", "TCP", 6379)).to.equal(true);
    expect(m.allows(db, "ingress", "10.0.0.11", "TCP", 6380)).to.equal(true); // "redis" on db
    expect(m.allows(db, "ingress", "10.0.0.11", "TCP", 6381)).to.equal(false);
    expect(m.allows(db, "ingress", "10.0.0.12", "TCP", 6379)).to.equal(false);
    expect(m.allows(db, "ingress", "10.0.1.5", "TCP", 6379)).to.equal(true);
    expect(m.allows(db, "ingress", "172.17.0.9", "TCP", 6379)).to.equal(true);
    expect(m.allows(db, "ingress", "172.17.1.9", "TCP", 6379)).to.equal(false);
    // egress: 10.0.0.0/24 on TCP 32000-32768 or UDP 53, plus a rule `{}` allowing everything.
    expect(m.allows(db, "egress", "8.8.8.8", "UDP", 53)).to.equal(true);
    expect(m.allows(frontend, "ingress", "10.0.0.12", "TCP", 1)).to.equal(true);
  });
});

// --- the model's answers as data ---

const SERVE = [
  { name: "serve-80-tcp", protocol: "TCP" as const, port: 80 },
  { name: "serve-81-tcp", protocol: "TCP" as const, port: 81 },
  { name: "serve-81-udp", protocol: "UDP" as const, port: 81 },
];

function mkPod(ns: string, name: string, ip: string, extra: Partial<PolicyPod> = {}): PolicyPod {
  return {
    namespace: ns,
    name,
    labels: { pod: name },
    ips: [ip],
    namedPorts: SERVE,
    hostNetwork: false,
    ...extra,
  };
}

/** x: a, b (no serve-81-tcp), h (hostNetwork, labelled pod=b); y: b (serve-80-tcp on 8080). */
function smallModel() {
  const m = new PolicyModel();
  for (const ns of ["x", "y"]) m.upsertNamespace({ name: ns, labels: { ns } });
  const pods = {
    xa: mkPod("x", "a", "10.0.1.1"),
    xb: mkPod("x", "b", "10.0.1.2", { namedPorts: SERVE.filter((p) => p.name !== "serve-81-tcp") }),
    xh: mkPod("x", "h", "192.168.0.10", { labels: { pod: "b" }, hostNetwork: true }),
    yb: mkPod("y", "b", "10.0.2.2", {
      namedPorts: SERVE.map((p) => (p.name === "serve-80-tcp" ? { ...p, port: 8080 } : p)),
    }),
  };
  for (const p of Object.values(pods)) m.upsertPod(p);
  return { m, ...pods };
}

describe("policy/model: podPolicy", () => {
  const mixedPorts = [
    { port: 80 },
    { protocol: "UDP" as const },
    { protocol: "TCP" as const, port: 1000, endPort: 2000 },
    { port: 3000, endPort: 3000 },
    { port: "serve-81-tcp" },
    { protocol: "UDP" as const, port: "serve-81-udp" },
    { port: "serve-99-tcp" },
    // A name is looked up with its protocol: serve-80-tcp over UDP is nothing.
    { protocol: "UDP" as const, port: "serve-80-tcp" },
  ];

  it("no policy: undefined in both directions (not isolated)", () => {
    const { m, xa } = smallModel();
    expect(m.podPolicy(xa)).to.deep.equal({});
    expect(m.hasPolicies("x")).to.equal(false);
  });

  it("ingress rules: ids, anyPeer, ports 'any' vs numbers, names resolved on the pod itself", () => {
    const { m, xa, xb } = smallModel();
    m.upsertPolicy({
      namespace: "x",
      name: "p",
      podSelector: {},
      ingress: [{}, { peers: [], ports: [] }, { peers: [{ podSelector: {} }], ports: mixedPorts }],
    });
    const { selection: _, ...rules } = m.podPolicy(xa);
    expect(rules).to.deep.equal({
      ingress: [
        { id: "x/p/ingress/0", anyPeer: true, ports: "any", portNames: [], perPod: false },
        { id: "x/p/ingress/1", anyPeer: true, ports: "any", portNames: [], perPod: false },
        {
          id: "x/p/ingress/2",
          anyPeer: false,
          ports: [
            { protocol: "TCP", port: 80 },
            { protocol: "UDP" },
            { protocol: "TCP", port: 1000, endPort: 2000 },
            { protocol: "TCP", port: 3000 },
            { protocol: "TCP", port: 81 },
            { protocol: "UDP", port: 81 },
          ],
          portNames: [],
          // Named ports resolved on the pod: another pod of the rule may get other numbers.
          perPod: true,
        },
      ],
    });
    // x/b has no serve-81-tcp: that entry resolves to nothing there.
    const xbPorts = m.podPolicy(xb).ingress?.[2]?.ports;
    expect(xbPorts).to.deep.equal([
      { protocol: "TCP", port: 80 },
      { protocol: "UDP" },
      { protocol: "TCP", port: 1000, endPort: 2000 },
      { protocol: "TCP", port: 3000 },
      { protocol: "UDP", port: 81 },
    ]);
  });

  it("pods selected alike (same matching podSelectors, same named ports) share one answer; others do not", () => {
    const { m, xa, xb } = smallModel();
    const twin = mkPod("x", "twin", "10.0.1.9");
    const other = mkPod("x", "other", "10.0.1.8", { labels: { role: "other" } });
    for (const p of [twin, other]) m.upsertPod(p);
    m.upsertPolicy({ namespace: "x", name: "all", podSelector: {}, ingress: [{}] });
    m.upsertPolicy({
      namespace: "x",
      name: "others",
      podSelector: { matchLabels: { role: "other" } },
      ingress: [{ ports: [{ port: 81 }] }],
    });
    expect(m.podPolicy(twin), "same labels as far as selectors go, same ports").to.equal(
      m.podPolicy(xa),
    );
    expect(m.podPolicy(xb).selection, "other named ports").not.to.equal(m.podPolicy(xa).selection);
    expect(m.podPolicy(other).ingress?.map((r) => r.id)).to.deep.equal([
      "x/all/ingress/0",
      "x/others/ingress/0",
    ]);
    expect(m.podPolicy(other).selection).not.to.equal(m.podPolicy(xa).selection);
    // A policy event gives new answers, still one per selection.
    m.upsertPolicy({
      namespace: "x",
      name: "all",
      podSelector: {},
      ingress: [{ ports: [{ port: 8 }] }],
    });
    expect(m.podPolicy(twin)).to.equal(m.podPolicy(xa));
    expect(m.podPolicy(xa).ingress?.[0]?.ports).to.deep.equal([{ protocol: "TCP", port: 8 }]);
  });

  it("egress rules keep names as portNames, resolved per destination", () => {
    const { m, xa } = smallModel();
    m.upsertPolicy({
      namespace: "x",
      name: "p",
      podSelector: {},
      egress: [{ ports: mixedPorts }],
    });
    const pp = m.podPolicy(xa);
    // No policyTypes, egress rules: Ingress too, with no rules.
    expect(pp.ingress).to.deep.equal([]);
    expect(pp.egress).to.deep.equal([
      {
        id: "x/p/egress/0",
        anyPeer: true,
        ports: [
          { protocol: "TCP", port: 80 },
          { protocol: "UDP" },
          { protocol: "TCP", port: 1000, endPort: 2000 },
          { protocol: "TCP", port: 3000 },
        ],
        portNames: [
          { protocol: "TCP", name: "serve-81-tcp" },
          { protocol: "UDP", name: "serve-81-udp" },
          { protocol: "TCP", name: "serve-99-tcp" },
          { protocol: "UDP", name: "serve-80-tcp" },
        ],
        perPod: false,
      },
    ]);
  });

  it("policies of the pod's namespace that select it, in name order; others' absent", () => {
    const { m, xa, xb, yb } = smallModel();
    m.upsertPolicy({ namespace: "x", name: "z-last", podSelector: {}, ingress: [{}] });
    m.upsertPolicy({
      namespace: "x",
      name: "a-first",
      podSelector: { matchLabels: { pod: "a" } },
      ingress: [{}],
    });
    m.upsertPolicy({ namespace: "x", name: "egress", podSelector: {}, policyTypes: ["Egress"] });
    m.upsertPolicy({
      namespace: "y",
      name: "other-ns",
      podSelector: { matchLabels: { pod: "a" } },
      ingress: [],
    });
    expect(m.podPolicy(xa).ingress?.map((r) => r.id)).to.deep.equal([
      "x/a-first/ingress/0",
      "x/z-last/ingress/0",
    ]);
    expect(m.podPolicy(xa).egress).to.deep.equal([]);
    expect(m.podPolicy(xb).ingress?.map((r) => r.id)).to.deep.equal(["x/z-last/ingress/0"]);
    expect(m.podPolicy(yb)).to.deep.equal({});
    expect(m.hasPolicies("x")).to.equal(true);
    expect(m.hasPolicies("y")).to.equal(true);
    expect(m.hasPolicies("z")).to.equal(false);
  });

  it("a hostNetwork pod is never selected", () => {
    const { m, xh } = smallModel();
    m.upsertPolicy({
      namespace: "x",
      name: "all",
      podSelector: {},
      policyTypes: ["Ingress", "Egress"],
    });
    expect(m.podPolicy(xh)).to.deep.equal({});
    expect(m.allows(xh, "ingress", "10.9.9.9", "TCP", 80)).to.equal(true);
  });

  it("pod() answers what was upserted, until deleted", () => {
    const { m, xa } = smallModel();
    expect(m.pod("x", "a")).to.equal(xa);
    m.deletePod("x", "a");
    expect(m.pod("x", "a")).to.equal(undefined);
    m.deletePod("x", "a"); // twice is harmless
    expect(m.pod("x", "nobody")).to.equal(undefined);
  });
});

describe("policy/model: peerAddresses and namedTargets", () => {
  it("peerAddresses: pod peers (hostNetwork left out) and ipBlocks; empty for any-peer and unknown rules", () => {
    const { m } = smallModel();
    m.upsertPolicy({
      namespace: "x",
      name: "p",
      podSelector: {},
      ingress: [
        {
          peers: [
            { podSelector: { matchLabels: { pod: "b" } } },
            { namespaceSelector: { matchLabels: { ns: "y" } } },
            { ipBlock: { cidr: "172.16.0.0/30", except: ["172.16.0.1/32"] } },
          ],
        },
        {},
      ],
    });
    expect(formatted(m.peerAddresses("x/p/ingress/0"))).to.deep.equal({
      v4: ["10.0.1.2", "10.0.2.2", "172.16.0.0", "172.16.0.2-172.16.0.3"],
      v6: [],
    });
    expect(m.peerAddresses("x/p/ingress/1")).to.deep.equal({ v4: [], v6: [] });
    expect(m.peerAddresses("x/nope/ingress/0")).to.deep.equal({ v4: [], v6: [] });
  });

  it("peerAddresses follow pod and namespace events", () => {
    const { m } = smallModel();
    m.upsertPolicy({
      namespace: "x",
      name: "p",
      podSelector: {},
      ingress: [{ peers: [{ namespaceSelector: { matchLabels: { open: "yes" } } }] }],
    });
    const id = "x/p/ingress/0";
    expect(formatted(m.peerAddresses(id)).v4).to.deep.equal([]);
    m.upsertNamespace({ name: "y", labels: { ns: "y", open: "yes" } });
    expect(formatted(m.peerAddresses(id)).v4).to.deep.equal(["10.0.2.2"]);
    m.upsertPod(mkPod("y", "c", "10.0.2.3"));
    expect(formatted(m.peerAddresses(id)).v4).to.deep.equal(["10.0.2.2-10.0.2.3"]);
    m.deletePod("y", "b");
    expect(formatted(m.peerAddresses(id)).v4).to.deep.equal(["10.0.2.3"]);
    m.deleteNamespace("y");
    expect(formatted(m.peerAddresses(id)).v4).to.deep.equal([]);
  });

  const http = [{ protocol: "TCP" as const, name: "serve-80-tcp" }];

  it("namedTargets: each peer pod with the name, at its own port; hostNetwork and pods without it left out", () => {
    const { m } = smallModel();
    m.upsertPolicy({
      namespace: "x",
      name: "p",
      podSelector: {},
      policyTypes: ["Egress"],
      egress: [{ peers: [{ namespaceSelector: {}, podSelector: { matchLabels: { pod: "b" } } }] }],
    });
    const id = "x/p/egress/0";
    expect(m.namedTargets(id, http)).to.deep.equal([
      { ip: "10.0.1.2", protocol: "TCP", port: 80 },
      { ip: "10.0.2.2", protocol: "TCP", port: 8080 },
    ]);
    expect(m.namedTargets(id, [{ protocol: "TCP", name: "serve-81-tcp" }])).to.deep.equal([
      { ip: "10.0.2.2", protocol: "TCP", port: 81 },
    ]);
    // The name with another protocol is another port.
    expect(m.namedTargets(id, [{ protocol: "UDP", name: "serve-80-tcp" }])).to.deep.equal([]);
    expect(m.namedTargets(id, [])).to.deep.equal([]);
    expect(m.namedTargets("x/nope/egress/0", http)).to.deep.equal([]);
  });

  it("namedTargets of a rule without peers: every pod that has the name", () => {
    const { m } = smallModel();
    m.upsertPolicy({
      namespace: "x",
      name: "p",
      podSelector: {},
      policyTypes: ["Egress"],
      egress: [{}],
    });
    expect(m.namedTargets("x/p/egress/0", http).map((t) => `${t.ip}:${t.port}`)).to.have.members([
      "10.0.1.1:80",
      "10.0.1.2:80",
      "10.0.2.2:8080",
    ]);
  });

  it("namedTargets of an ipBlock rule: the pods inside the block, less its excepts", () => {
    const { m } = smallModel();
    m.upsertPolicy({
      namespace: "x",
      name: "p",
      podSelector: {},
      policyTypes: ["Egress"],
      egress: [{ peers: [{ ipBlock: { cidr: "10.0.0.0/16", except: ["10.0.1.1/32"] } }] }],
    });
    expect(m.namedTargets("x/p/egress/0", http).map((t) => `${t.ip}:${t.port}`)).to.have.members([
      "10.0.1.2:80",
      "10.0.2.2:8080",
    ]);
  });

  it("namedTargets follow a new pod and a pod's changed ports", () => {
    const { m } = smallModel();
    m.upsertPolicy({
      namespace: "x",
      name: "p",
      podSelector: {},
      policyTypes: ["Egress"],
      egress: [{ peers: [{ namespaceSelector: { matchLabels: { ns: "y" } } }] }],
    });
    const id = "x/p/egress/0";
    expect(m.namedTargets(id, http)).to.deep.equal([
      { ip: "10.0.2.2", protocol: "TCP", port: 8080 },
    ]);
    m.upsertPod(mkPod("y", "b", "10.0.2.2"));
    m.upsertPod(mkPod("y", "c", "10.0.2.3"));
    expect(m.namedTargets(id, http)).to.have.deep.members([
      { ip: "10.0.2.2", protocol: "TCP", port: 80 },
      { ip: "10.0.2.3", protocol: "TCP", port: 80 },
    ]);
  });

  it("namedTargets of a rule with an ipBlock and a namespaceSelector follow a namespace relabel", () => {
    // The datapath writes these targets as they are (ruleset.ts, set t_<rule>): a stale
    // list keeps the old namespace's pods open and the new one's closed.
    const { m } = smallModel();
    m.upsertNamespace({ name: "y", labels: { ns: "y", open: "yes" } });
    m.upsertNamespace({ name: "z", labels: { ns: "z" } });
    m.upsertPod(mkPod("z", "c", "10.0.3.3"));
    m.upsertPolicy({
      namespace: "x",
      name: "p",
      podSelector: {},
      policyTypes: ["Egress"],
      egress: [
        {
          peers: [
            { namespaceSelector: { matchLabels: { open: "yes" } } },
            { ipBlock: { cidr: "192.0.2.0/24" } },
          ],
        },
      ],
    });
    const id = "x/p/egress/0";
    expect(m.namedTargets(id, http)).to.deep.equal([
      { ip: "10.0.2.2", protocol: "TCP", port: 8080 },
    ]);
    m.upsertNamespace({ name: "y", labels: { ns: "y" } });
    m.upsertNamespace({ name: "z", labels: { ns: "z", open: "yes" } });
    expect(m.namedTargets(id, http)).to.deep.equal([{ ip: "10.0.3.3", protocol: "TCP", port: 80 }]);
  });
});

describe("policy/model: upsertPolicy problems", () => {
  const base = (spec: Partial<NetworkPolicy>): NetworkPolicy => ({
    namespace: "x",
    name: "p",
    podSelector: {},
    ...spec,
  });
  const cases: Array<[string, NetworkPolicy, RegExp]> = [
    [
      "an ipBlock CIDR that does not parse",
      base({ ingress: [{ peers: [{ ipBlock: { cidr: "10.0.0.0/33" } }] }] }),
      /^ipBlock: "10\.0\.0\.0\/33" is not a CIDR$/,
    ],
    [
      "an except that does not parse",
      base({ egress: [{ peers: [{ ipBlock: { cidr: "10.0.0.0/8", except: ["10.1/16"] } }] }] }),
      /^ipBlock: "10\.1\/16" is not a CIDR$/,
    ],
    [
      "an unknown operator in a peer's podSelector",
      base({
        ingress: [
          {
            peers: [
              {
                podSelector: {
                  matchExpressions: [{ key: "a", operator: "Equals" as "In", values: ["b"] }],
                },
              },
            ],
          },
        ],
      }),
      /unknown operator "Equals"/,
    ],
    [
      "an unknown operator in the policy's podSelector",
      base({ podSelector: { matchExpressions: [{ key: "a", operator: "exists" as "Exists" }] } }),
      /unknown operator "exists"/,
    ],
    [
      "In without values in a namespaceSelector",
      base({
        ingress: [
          { peers: [{ namespaceSelector: { matchExpressions: [{ key: "a", operator: "In" }] } }] },
        ],
      }),
      /In needs values/,
    ],
    [
      "endPort below port",
      base({ ingress: [{ ports: [{ port: 81, endPort: 80 }] }] }),
      /^endPort 80 needs a numeric port no greater than it$/,
    ],
    [
      "endPort with a named port",
      base({ ingress: [{ ports: [{ port: "serve-80-tcp", endPort: 90 }] }] }),
      /^endPort 90 needs a numeric port/,
    ],
    ["endPort without port", base({ egress: [{ ports: [{ endPort: 90 }] }] }), /^endPort 90 needs/],
    ["port 0", base({ ingress: [{ ports: [{ port: 0 }] }] }), /^port 0 is out of 1-65535$/],
    [
      "port 65536",
      base({ ingress: [{ ports: [{ port: 65536 }] }] }),
      /^port 65536 is out of 1-65535$/,
    ],
    [
      "a protocol that is not TCP, UDP or SCTP",
      base({ ingress: [{ ports: [{ protocol: "ICMP" as "TCP", port: 1 }] }] }),
      /^port protocol "ICMP" is not TCP, UDP or SCTP$/,
    ],
  ];
  for (const [title, policy, reason] of cases) {
    it(`${title}: a PolicyProblem, and the selected pods are isolated with nothing allowed`, () => {
      const { m, xa } = smallModel();
      const problem = m.upsertPolicy(policy);
      expect(problem?.policy).to.equal("x/p");
      expect(problem?.reason).to.match(reason);
      // The unknown-operator podSelector matches nobody; the others select x/a.
      const selects = !/"exists"/.test(problem?.reason ?? "");
      const pp = m.podPolicy(xa);
      if (selects) expect(pp.ingress).to.deep.equal([]);
      else expect(pp).to.deep.equal({});
      expect(m.allows(xa, "ingress", "10.0.2.2", "TCP", 80)).to.equal(!selects);
    });
  }

  it("valid edge values are no problem: port 1 and 65535, endPort equal to port, every operator", () => {
    const { m, xa } = smallModel();
    const problem = m.upsertPolicy(
      base({
        podSelector: {
          matchExpressions: [
            { key: "pod", operator: "In", values: ["a"] },
            { key: "pod", operator: "NotIn", values: ["b"] },
            { key: "pod", operator: "Exists" },
            { key: "tier", operator: "DoesNotExist" },
          ],
        },
        ingress: [
          {
            ports: [
              { port: 1 },
              { port: 65535 },
              { port: 80, endPort: 80 },
              { protocol: "SCTP", port: 9 },
            ],
          },
        ],
      }),
    );
    expect(problem).to.equal(undefined);
    expect(m.allows(xa, "ingress", "10.0.2.2", "TCP", 80)).to.equal(true);
    expect(m.allows(xa, "ingress", "10.0.2.2", "TCP", 81)).to.equal(false);
    expect(m.allows(xa, "ingress", "10.0.2.2", "SCTP", 9)).to.equal(true);
  });

  it("an egress-only policy with a problem isolates egress only; fixing it by upsert clears the problem", () => {
    const { m, xa } = smallModel();
    const bad = base({
      policyTypes: ["Egress"],
      egress: [{ peers: [{ ipBlock: { cidr: "bogus" } }] }],
    });
    expect(m.upsertPolicy(bad)?.reason).to.match(/bogus/);
    expect(m.podPolicy(xa)).to.deep.include({ egress: [] }).and.not.have.property("ingress");
    expect(m.allows(xa, "egress", "10.0.2.2", "TCP", 80)).to.equal(false);
    expect(m.allows(xa, "ingress", "10.0.2.2", "TCP", 80)).to.equal(true);
    const fixed = base({
      policyTypes: ["Egress"],
      egress: [{ peers: [{ ipBlock: { cidr: "10.0.2.0/24" } }] }],
    });
    expect(m.upsertPolicy(fixed)).to.equal(undefined);
    expect(m.allows(xa, "egress", "10.0.2.2", "TCP", 80)).to.equal(true);
    expect(m.allows(xa, "egress", "10.0.3.2", "TCP", 80)).to.equal(false);
  });

  it("a valid policy replaced by a broken one loses its rules (no stale rule id answers)", () => {
    const { m, xa } = smallModel();
    m.upsertPolicy(base({ ingress: [{ peers: [{ ipBlock: { cidr: "10.0.2.0/24" } }] }] }));
    expect(formatted(m.peerAddresses("x/p/ingress/0")).v4).to.deep.equal(["10.0.2.0-10.0.2.255"]);
    expect(
      m.upsertPolicy(base({ ingress: [{ peers: [{ ipBlock: { cidr: "no" } }] }] })),
    ).to.not.equal(undefined);
    expect(m.peerAddresses("x/p/ingress/0")).to.deep.equal({ v4: [], v6: [] });
    expect(m.allows(xa, "ingress", "10.0.2.2", "TCP", 80)).to.equal(false);
    m.deletePolicy("x", "p");
    expect(m.allows(xa, "ingress", "10.0.2.2", "TCP", 80)).to.equal(true);
    expect(m.hasPolicies("x")).to.equal(false);
  });
});

describe("policy/model: peerPodAddresses, the chunks a peer set is diffed by", () => {
  const id = "x/p/ingress/0";
  const flat = (m: PolicyModel) => {
    const c = m.peerPodAddresses(id);
    return { v4: c.v4.flat().sort(), v6: c.v6.flat().sort() };
  };

  it("a chunk per namespace; a pod event replaces its namespace's chunk only", () => {
    const { m } = smallModel();
    m.upsertNamespace({ name: "z", labels: { ns: "z" } });
    m.upsertPod(mkPod("z", "a", "10.0.3.1", { ips: ["10.0.3.1", "fd00:3::1"] }));
    m.upsertPolicy({
      namespace: "x",
      name: "p",
      podSelector: {},
      ingress: [{ peers: [{ namespaceSelector: {} }, { ipBlock: { cidr: "172.16.0.0/16" } }] }],
    });
    expect(m.hasPodPeers(id)).to.equal(true);
    const before = m.peerPodAddresses(id);
    expect(flat(m)).to.deep.equal({
      v4: ["10.0.1.1", "10.0.1.2", "10.0.2.2", "10.0.3.1"],
      v6: ["fd00:3::1"],
    });
    // The ipBlock is not a pod: it has its own answer.
    expect(formatted(m.peerBlocks(id)).v4).to.deep.equal(["172.16.0.0-172.16.255.255"]);
    m.upsertPod(mkPod("y", "c", "10.0.2.3"));
    const after = m.peerPodAddresses(id);
    const kept = after.v4.filter((c) => before.v4.includes(c));
    expect(kept.map((c) => [...c].sort())).to.deep.equal([["10.0.1.1", "10.0.1.2"], ["10.0.3.1"]]);
    expect(after.v6[0]).to.equal(before.v6[0]);
    expect(flat(m).v4).to.include("10.0.2.3");
    // Asked again with nothing changed: the very same chunks.
    const again = m.peerPodAddresses(id);
    expect(again.v4.every((c, i) => c === after.v4[i])).to.equal(true);
  });

  it("an event about what the model does not read (annotations, conditions) changes nothing", () => {
    const { m, xa } = smallModel();
    m.upsertPolicy({
      namespace: "x",
      name: "p",
      podSelector: {},
      ingress: [{ peers: [{ namespaceSelector: {} }] }],
    });
    const before = m.peerPodAddresses(id);
    const policy = m.podPolicy(xa);
    // The same pod as a new object, labels in another order: no change, the same answers.
    expect(m.upsertPod({ ...xa, labels: { ...xa.labels }, ips: [...xa.ips] })).to.equal(false);
    expect(m.pod("x", "a")).to.equal(xa);
    expect(m.podPolicy(m.pod("x", "a") as PolicyPod)).to.equal(policy);
    expect(m.peerPodAddresses(id)).to.equal(before);
    // Each thing it reads is a change.
    for (const changed of [
      { ...xa, labels: { ...xa.labels, tier: "web" } },
      { ...xa, ips: [...xa.ips, "fd00:1::1"] },
      { ...xa, namedPorts: SERVE.slice(1) },
      { ...xa, hostNetwork: true },
    ])
      expect(m.upsertPod(changed), JSON.stringify(changed)).to.equal(true);
    expect(m.peerPodAddresses(id)).not.to.equal(before);
  });

  it("agrees with a plain reading of the model after any run of events, past the event log's bound too", () => {
    const m = new PolicyModel();
    const nss = ["a", "b", "c", "d"];
    for (const ns of nss)
      m.upsertNamespace({ name: ns, labels: { team: ns === "d" ? "t2" : "t1" } });
    m.upsertPolicy({
      namespace: "a",
      name: "p",
      podSelector: {},
      ingress: [
        {
          peers: [
            {
              namespaceSelector: { matchLabels: { team: "t1" } },
              podSelector: { matchLabels: { app: "web" } },
            },
          ],
        },
      ],
    });
    const pid = "a/p/ingress/0";
    const expected = () => {
      const out: string[] = [];
      for (const ns of nss) {
        for (let i = 0; i < 40; i++) {
          const p = m.pod(ns, `p${i}`);
          if (p && p.labels.app === "web" && nsTeam.get(ns) === "t1") out.push(...p.ips);
        }
      }
      return out.sort();
    };
    const nsTeam = new Map(nss.map((ns) => [ns, ns === "d" ? "t2" : "t1"]));
    let seed = 7;
    const rnd = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return Math.floor(seed / 65536) % n;
    };
    // 70,000 events pass the log's 65,536: a rule read before the oldest kept one reads every namespace.
    for (let round = 0; round < 140; round++) {
      const events = round === 70 ? 69_000 : 1 + rnd(6);
      for (let e = 0; e < events; e++) {
        const ns = nss[rnd(4)] as string;
        const i = rnd(40);
        if (rnd(5) === 0) m.deletePod(ns, `p${i}`);
        else
          m.upsertPod({
            namespace: ns,
            name: `p${i}`,
            labels: { app: rnd(2) ? "web" : "db" },
            ips: [`10.${nss.indexOf(ns)}.0.${i}`],
            namedPorts: [],
            hostNetwork: false,
          });
      }
      if (round % 25 === 24) {
        const ns = nss[rnd(4)] as string;
        const team = rnd(2) ? "t1" : "t2";
        nsTeam.set(ns, team);
        m.upsertNamespace({ name: ns, labels: { team } });
      }
      expect(m.peerPodAddresses(pid).v4.flat().sort(), `round ${round}`).to.deep.equal(expected());
    }
  });
});

describe("policy/model: namedTargetChunks", () => {
  it("a chunk per namespace with targets; a pod event in one replaces that one only", () => {
    const { m } = smallModel();
    m.upsertPolicy({
      namespace: "x",
      name: "p",
      podSelector: {},
      policyTypes: ["Egress"],
      egress: [{ ports: [{ port: "serve-80-tcp" }] }],
    });
    const names = [{ protocol: "TCP" as const, name: "serve-80-tcp" }];
    const before = m.namedTargetChunks("x/p/egress/0", names);
    expect(before.map((c) => c.map((t) => `${t.ip}:${t.port}`))).to.deep.equal([
      ["10.0.1.1:80", "10.0.1.2:80"],
      ["10.0.2.2:8080"],
    ]);
    m.upsertPod(mkPod("y", "c", "10.0.2.3"));
    const after = m.namedTargetChunks("x/p/egress/0", names);
    expect(after[0]).to.equal(before[0]);
    expect(after[1]).to.not.equal(before[1]);
    expect(m.namedTargets("x/p/egress/0", names).map((t) => t.ip)).to.include("10.0.2.3");
  });
});

describe("policy addresses: a range as CIDRs", () => {
  it("covers exactly the range with the fewest aligned blocks", () => {
    const r = (a: string, b: string) =>
      addressRanges([], [{ cidr: `${a}/32` }, { cidr: `${b}/32` }]);
    expect(rangeCidrs([167772161n, 167772166n], 4)).to.deep.equal([
      "10.0.0.1/32",
      "10.0.0.2/31",
      "10.0.0.4/31",
      "10.0.0.6/32",
    ]);
    expect(rangeCidrs([0n, 2n ** 32n - 1n], 4)).to.deep.equal(["0.0.0.0/0"]);
    expect(rangeCidrs([2n ** 127n, 2n ** 127n + 255n], 6)).to.deep.equal(["8000::/120"]);
    expect(r("10.0.0.1", "10.0.0.2").v4.flatMap((x) => rangeCidrs(x, 4))).to.deep.equal([
      "10.0.0.1/32",
      "10.0.0.2/32",
    ]);
  });
});
