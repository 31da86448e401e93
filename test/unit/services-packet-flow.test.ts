/**
 * The Services table end to end, as kube-proxy's packetFlowTest checks its
 * nftables proxier (pkg/proxy/nftables/proxier_test.go): a small cluster of
 * Services and EndpointSlices as API objects, the script the driver would
 * load for node-a, and packets traced through it (test/support/nft-trace.ts):
 * source, destination, protocol and port -> the endpoints it may be DNATed to,
 * REJECT, DROP or no match, and whether it is masqueraded.
 *
 * node-a: pod CIDRs 10.0.1.0/24 and fd00:10:1::/64, addresses 192.168.0.2 and
 * fd00:192::2. node-b: 10.0.2.0/24 and fd00:10:2::/64.
 */
import { expect } from "chai";
import { type Block, hairpinElements, planBlock } from "../../src/driver/services/ruleset.js";
import { changeScript, fullScript } from "../../src/driver/services/ruleset-diff.js";
import type { SliceView } from "../../src/services/endpoints.js";
import {
  type PortPlan,
  planService,
  serviceFromApi,
  sliceService,
} from "../../src/services/model.js";
import {
  applyScript,
  dumpTable,
  type NftTable,
  type Proto,
  parseScript,
  type TraceInput,
  trace,
} from "../support/nft-trace.js";

const NODE = "node-a";
const NODE_IP = "192.168.0.2";
const NODE_IP6 = "fd00:192::2";
const POD_CIDRS = { 4: ["10.0.1.0/24"], 6: ["fd00:10:1::/64"] };
const T = "inet cni-driver-services";

/** Clients: off the cluster, a pod of node-a (no endpoint of anything), a pod of node-b. */
const OUTSIDE = "203.0.113.7";
const OUTSIDE6 = "2001:db8::7";
const POD_A = "10.0.1.200";
const POD_A6 = "fd00:10:1::200";
const POD_B = "10.0.2.200";

type State = "ready" | "serving-terminating" | "terminating" | "unready";
type Ep = [ip: string, node: string, state?: State];

interface SvcOpts {
  type?: "ClusterIP" | "NodePort" | "LoadBalancer";
  ips: string[];
  ports: Array<{ name: string; port: number; protocol?: string; nodePort?: number }>;
  externalIPs?: string[];
  lb?: string[];
  etp?: "Local";
  itp?: "Local";
  affinity?: number;
}

function service(name: string, o: SvcOpts): Record<string, unknown> {
  return {
    metadata: { namespace: "default", name },
    spec: {
      type: o.type ?? "ClusterIP",
      clusterIP: o.ips[0],
      clusterIPs: o.ips,
      ports: o.ports.map((p) => ({ protocol: "TCP", ...p, targetPort: p.name })),
      ...(o.externalIPs ? { externalIPs: o.externalIPs } : {}),
      ...(o.etp ? { externalTrafficPolicy: o.etp } : {}),
      ...(o.itp ? { internalTrafficPolicy: o.itp } : {}),
      ...(o.affinity
        ? {
            sessionAffinity: "ClientIP",
            sessionAffinityConfig: { clientIP: { timeoutSeconds: o.affinity } },
          }
        : {}),
    },
    ...(o.lb ? { status: { loadBalancer: { ingress: o.lb.map((ip) => ({ ip })) } } } : {}),
  };
}

type ApiSlice = SliceView & {
  metadata: { namespace: string; name: string; labels: Record<string, string> };
};

/** A slice of Service `svc`; ports [name, port, protocol] default to http 8080/TCP. */
function slice(
  svc: string,
  eps: Ep[],
  ports: Array<[string, number, string?]> = [["http", 8080]],
  id = "",
): ApiSlice {
  const ipv6 = eps.some(([ip]) => ip.includes(":"));
  return {
    metadata: {
      namespace: "default",
      name: `${svc}-${ipv6 ? "v6" : "v4"}${id}`,
      labels: { "kubernetes.io/service-name": svc },
    },
    addressType: ipv6 ? "IPv6" : "IPv4",
    ports: ports.map(([name, port, protocol = "TCP"]) => ({ name, port, protocol })),
    endpoints: eps.map(([ip, nodeName, state = "ready"]) => ({
      addresses: [ip],
      nodeName,
      conditions: {
        ready: state === "ready",
        serving: state === "ready" || state === "serving-terminating",
        terminating: state === "serving-terminating" || state === "terminating",
      },
    })),
  };
}

const http = (nodePort?: number) => [{ name: "http", port: 80, ...(nodePort ? { nodePort } : {}) }];

const SERVICES: Record<string, SvcOpts> = {
  web: { ips: ["172.30.0.10"], ports: http() },
  empty: {
    type: "NodePort",
    ips: ["172.30.0.20"],
    ports: [...http(30020), { name: "dns", port: 53, protocol: "UDP" }],
  },
  "np-cluster": { type: "NodePort", ips: ["172.30.0.30"], ports: http(30030) },
  "np-local": { type: "NodePort", ips: ["172.30.0.40"], ports: http(30040), etp: "Local" },
  "np-local-remote": { type: "NodePort", ips: ["172.30.0.50"], ports: http(30050), etp: "Local" },
  "external-ip": { ips: ["172.30.0.60"], ports: http(), externalIPs: ["198.51.100.10"] },
  lb: {
    type: "LoadBalancer",
    ips: ["172.30.0.61"],
    ports: http(30061),
    lb: ["198.51.100.20"],
    etp: "Local",
  },
  "itp-local": { ips: ["172.30.0.70"], ports: http(), itp: "Local" },
  "itp-local-remote": { ips: ["172.30.0.71"], ports: http(), itp: "Local" },
  terminating: { ips: ["172.30.0.80"], ports: http() },
  "terminating-local": { type: "NodePort", ips: ["172.30.0.82"], ports: http(30082), etp: "Local" },
  named: { ips: ["172.30.0.90"], ports: http() },
  self: { ips: ["172.30.0.100"], ports: http() },
  sticky: { type: "NodePort", ips: ["172.30.0.110"], ports: http(30110), affinity: 600 },
  dual: { type: "NodePort", ips: ["172.30.0.120", "fd00:30::120"], ports: http(30120) },
  "itp-local-np-cluster": {
    type: "NodePort",
    ips: ["172.30.0.150"],
    ports: http(30150),
    itp: "Local",
  },
  protocols: {
    ips: ["172.30.0.130"],
    ports: [
      { name: "sctp", port: 5000, protocol: "SCTP" },
      { name: "dns", port: 53, protocol: "UDP" },
      { name: "dns-tcp", port: 53 },
    ],
  },
};

// biome-ignore format: one slice a line
const SLICES: ApiSlice[] = [
  slice("web", [["10.0.1.5", "node-a"], ["10.0.2.5", "node-b"], ["10.0.2.6", "node-b", "unready"]]),
  slice("empty", [["10.0.2.20", "node-b", "unready"]], [["http", 8080], ["dns", 53, "UDP"]]),
  slice("np-cluster", [["10.0.1.30", "node-a"], ["10.0.2.30", "node-b"]]),
  slice("np-local", [["10.0.1.40", "node-a"], ["10.0.2.40", "node-b"]]),
  slice("np-local-remote", [["10.0.2.50", "node-b"]]),
  slice("external-ip", [["10.0.1.60", "node-a"], ["10.0.2.60", "node-b"]]),
  slice("lb", [["10.0.1.61", "node-a"], ["10.0.2.61", "node-b"]]),
  slice("itp-local", [["10.0.1.70", "node-a"], ["10.0.2.70", "node-b"]]),
  slice("itp-local-remote", [["10.0.2.71", "node-b"]]),
  slice("terminating", [["10.0.1.80", "node-a", "serving-terminating"], ["10.0.2.80", "node-b", "terminating"], ["10.0.2.81", "node-b", "unready"]]),
  slice("terminating-local", [["10.0.1.82", "node-a", "serving-terminating"], ["10.0.2.82", "node-b"]]),
  // targetPort by name: each slice says what it resolved to on its pods.
  slice("named", [["10.0.1.90", "node-a"]], [["http", 8080]], "-1"),
  slice("named", [["10.0.2.90", "node-b"]], [["http", 9090]], "-2"),
  slice("self", [["10.0.1.101", "node-a"]]),
  slice("sticky", [["10.0.1.110", "node-a"], ["10.0.2.110", "node-b"]]),
  slice("dual", [["10.0.1.120", "node-a"], ["10.0.2.120", "node-b"]]),
  slice("itp-local-np-cluster", [["10.0.2.150", "node-b"]]),
  slice("dual", [["fd00:10:1::120", "node-a"], ["fd00:10:2::120", "node-b"]]),
  slice("protocols", [["10.0.2.130", "node-b"]], [["sctp", 5000, "SCTP"], ["dns", 5353, "UDP"], ["dns-tcp", 5354]]),
];
/** web with its unready endpoint become ready. */
const WEB_3 = slice("web", [
  ["10.0.1.5", "node-a"],
  ["10.0.2.5", "node-b"],
  ["10.0.2.6", "node-b"],
]);

interface Rendered {
  plans: PortPlan[];
  blocks: Map<string, Block>;
  hairpin: Map<string, Map<string, string>>;
  script: string;
}

function render(services: Record<string, SvcOpts>, slices: readonly ApiSlice[]): Rendered {
  const plans = Object.entries(services).flatMap(([name, o]) => {
    const spec = serviceFromApi(service(name, o));
    if (!spec) throw new Error(`${name}: not proxied`);
    return planService(
      spec,
      slices.filter((s) => sliceService(s)?.name === name),
      NODE,
    );
  });
  const blocks = new Map(plans.map((p) => [p.key, planBlock(p, { podCidrs: POD_CIDRS })]));
  const hairpin = hairpinElements(plans, NODE);
  return { plans, blocks, hairpin, script: fullScript(blocks.values(), hairpin) };
}

/** The chains and sets of a Service's blocks. */
function namesOf(r: Rendered, svc: string): string[] {
  return r.plans
    .filter((p) => p.service === `default/${svc}`)
    .flatMap((p) => {
      const b = r.blocks.get(p.key) as Block;
      return [...b.chains.keys(), ...b.sets.keys()];
    });
}

interface Row {
  name: string;
  hook?: TraceInput["hook"];
  src: string;
  dst: string;
  proto?: Proto;
  port: number;
  /** "ip:port, ip:port" (sorted), "REJECT", "DROP" or "NONE" (no Service matched). */
  expect: string;
  masq?: boolean;
}

// biome-ignore format: one row a line, as kube-proxy's tables
const ROWS: Row[] = [
  { name: "ClusterIP from outside the cluster (a router sends the range here): masqueraded", src: OUTSIDE, dst: "172.30.0.10", port: 80, expect: "10.0.1.5:8080, 10.0.2.5:8080", masq: true },
  { name: "internalTrafficPolicy Local, NodePort Cluster: a local pod through the node port reaches the cluster's endpoints", src: POD_A, dst: NODE_IP, port: 30150, expect: "10.0.2.150:8080" },
  { name: "internalTrafficPolicy Local, NodePort Cluster: its ClusterIP has no local endpoint", src: POD_A, dst: "172.30.0.150", port: 80, expect: "DROP" },
  { name: "internalTrafficPolicy Local, NodePort Cluster from outside: masqueraded", src: OUTSIDE, dst: NODE_IP, port: 30150, expect: "10.0.2.150:8080", masq: true },
  { name: "ClusterIP from a local pod: every ready endpoint, local and remote", src: POD_A, dst: "172.30.0.10", port: 80, expect: "10.0.1.5:8080, 10.0.2.5:8080" },
  { name: "ClusterIP from the node itself", hook: "output", src: NODE_IP, dst: "172.30.0.10", port: 80, expect: "10.0.1.5:8080, 10.0.2.5:8080" },
  { name: "ClusterIP, a port it does not have", src: POD_A, dst: "172.30.0.10", port: 81, expect: "NONE" },
  { name: "ClusterIP, UDP to its TCP port", src: POD_A, dst: "172.30.0.10", proto: "udp", port: 80, expect: "NONE" },
  { name: "an address no Service has", src: POD_A, dst: "8.8.8.8", proto: "udp", port: 53, expect: "NONE" },
  { name: "no usable endpoint: TCP rejected", src: POD_A, dst: "172.30.0.20", port: 80, expect: "REJECT" },
  { name: "no usable endpoint: UDP rejected", src: POD_A, dst: "172.30.0.20", proto: "udp", port: 53, expect: "REJECT" },
  { name: "no usable endpoint, from the node (filter-output runs before nat-output)", hook: "output", src: NODE_IP, dst: "172.30.0.20", port: 80, expect: "REJECT" },
  { name: "no usable endpoint: its node port rejected too", src: OUTSIDE, dst: NODE_IP, port: 30020, expect: "REJECT" },
  { name: "no usable endpoint: a port it does not have is not rejected", src: POD_A, dst: "172.30.0.20", port: 81, expect: "NONE" },
  { name: "NodePort Cluster from outside: every endpoint, masqueraded", src: OUTSIDE, dst: NODE_IP, port: 30030, expect: "10.0.1.30:8080, 10.0.2.30:8080", masq: true },
  { name: "NodePort Cluster from another node's pod: masqueraded", src: POD_B, dst: NODE_IP, port: 30030, expect: "10.0.1.30:8080, 10.0.2.30:8080", masq: true },
  { name: "NodePort Cluster from a local pod: not masqueraded", src: POD_A, dst: NODE_IP, port: 30030, expect: "10.0.1.30:8080, 10.0.2.30:8080" },
  { name: "NodePort Cluster from the node itself: masqueraded, as kube-proxy does", hook: "output", src: NODE_IP, dst: NODE_IP, port: 30030, expect: "10.0.1.30:8080, 10.0.2.30:8080", masq: true },
  { name: "NodePort on 127.0.0.1: no match", hook: "output", src: "127.0.0.1", dst: "127.0.0.1", port: 30030, expect: "NONE" },
  { name: "NodePort, another protocol: no match", src: OUTSIDE, dst: NODE_IP, proto: "udp", port: 30030, expect: "NONE" },
  { name: "NodePort on an address that is not the node's: no match", src: OUTSIDE, dst: "192.168.0.3", port: 30030, expect: "NONE" },
  { name: "NodePort Local from outside: the local endpoints only, source kept", src: OUTSIDE, dst: NODE_IP, port: 30040, expect: "10.0.1.40:8080" },
  { name: "NodePort Local from a local pod: every endpoint (short-circuit)", src: POD_A, dst: NODE_IP, port: 30040, expect: "10.0.1.40:8080, 10.0.2.40:8080" },
  { name: "NodePort Local from the node itself: every endpoint, masqueraded", hook: "output", src: NODE_IP, dst: NODE_IP, port: 30040, expect: "10.0.1.40:8080, 10.0.2.40:8080", masq: true },
  { name: "NodePort Local, its ClusterIP: every endpoint", src: POD_A, dst: "172.30.0.40", port: 80, expect: "10.0.1.40:8080, 10.0.2.40:8080" },
  { name: "NodePort Local, endpoints only on node-b, from outside: dropped", src: OUTSIDE, dst: NODE_IP, port: 30050, expect: "DROP" },
  { name: "NodePort Local, endpoints only on node-b, from a local pod: reached", src: POD_A, dst: NODE_IP, port: 30050, expect: "10.0.2.50:8080" },
  { name: "NodePort Local, endpoints only on node-b, its ClusterIP", src: POD_A, dst: "172.30.0.50", port: 80, expect: "10.0.2.50:8080" },
  { name: "externalIP from outside: masqueraded", src: OUTSIDE, dst: "198.51.100.10", port: 80, expect: "10.0.1.60:8080, 10.0.2.60:8080", masq: true },
  { name: "externalIP from a local pod: not masqueraded", src: POD_A, dst: "198.51.100.10", port: 80, expect: "10.0.1.60:8080, 10.0.2.60:8080" },
  { name: "externalIP, a port it does not have", src: OUTSIDE, dst: "198.51.100.10", port: 443, expect: "NONE" },
  { name: "LoadBalancer IP (Local) from outside: local endpoint, source kept", src: OUTSIDE, dst: "198.51.100.20", port: 80, expect: "10.0.1.61:8080" },
  { name: "LoadBalancer's node port (Local) from outside", src: OUTSIDE, dst: NODE_IP, port: 30061, expect: "10.0.1.61:8080" },
  { name: "LoadBalancer IP from a local pod: every endpoint", src: POD_A, dst: "198.51.100.20", port: 80, expect: "10.0.1.61:8080, 10.0.2.61:8080" },
  { name: "internalTrafficPolicy Local: the local endpoint only", src: POD_A, dst: "172.30.0.70", port: 80, expect: "10.0.1.70:8080" },
  { name: "internalTrafficPolicy Local, no local endpoint: dropped, not rejected", src: POD_A, dst: "172.30.0.71", port: 80, expect: "DROP" },
  { name: "no ready endpoint: the serving terminating ones", src: POD_A, dst: "172.30.0.80", port: 80, expect: "10.0.1.80:8080" },
  { name: "terminating fallback under Local: the local serving terminating endpoint", src: OUTSIDE, dst: NODE_IP, port: 30082, expect: "10.0.1.82:8080" },
  { name: "terminating fallback under Local: its ClusterIP uses the ready remote one", src: POD_A, dst: "172.30.0.82", port: 80, expect: "10.0.2.82:8080" },
  { name: "named targetPort: each slice's own port", src: POD_A, dst: "172.30.0.90", port: 80, expect: "10.0.1.90:8080, 10.0.2.90:9090" },
  { name: "a pod reaching itself through its Service: hairpin masquerade", src: "10.0.1.101", dst: "172.30.0.100", port: 80, expect: "10.0.1.101:8080", masq: true },
  { name: "another local endpoint reaching that Service: not masqueraded", src: "10.0.1.5", dst: "172.30.0.100", port: 80, expect: "10.0.1.101:8080" },
  { name: "session affinity, a new client: every endpoint", src: POD_A, dst: "172.30.0.110", port: 80, expect: "10.0.1.110:8080, 10.0.2.110:8080" },
  { name: "session affinity, node port from outside: masqueraded", src: OUTSIDE, dst: NODE_IP, port: 30110, expect: "10.0.1.110:8080, 10.0.2.110:8080", masq: true },
  { name: "dual stack, IPv4 ClusterIP: IPv4 endpoints", src: POD_A, dst: "172.30.0.120", port: 80, expect: "10.0.1.120:8080, 10.0.2.120:8080" },
  { name: "dual stack, IPv6 ClusterIP: IPv6 endpoints", src: POD_A6, dst: "fd00:30::120", port: 80, expect: "[fd00:10:1::120]:8080, [fd00:10:2::120]:8080" },
  { name: "dual stack, IPv6 node port from outside: masqueraded", src: OUTSIDE6, dst: NODE_IP6, port: 30120, expect: "[fd00:10:1::120]:8080, [fd00:10:2::120]:8080", masq: true },
  { name: "dual stack, IPv6 node port from a local pod", src: POD_A6, dst: NODE_IP6, port: 30120, expect: "[fd00:10:1::120]:8080, [fd00:10:2::120]:8080" },
  { name: "dual stack, node port on ::1: no match", hook: "output", src: "::1", dst: "::1", port: 30120, expect: "NONE" },
  { name: "SCTP port", src: POD_A, dst: "172.30.0.130", proto: "sctp", port: 5000, expect: "10.0.2.130:5000" },
  { name: "UDP port", src: POD_A, dst: "172.30.0.130", proto: "udp", port: 53, expect: "10.0.2.130:5353" },
  { name: "TCP port of the same number", src: POD_A, dst: "172.30.0.130", port: 53, expect: "10.0.2.130:5354" },
  { name: "TCP to the SCTP port: no match", src: POD_A, dst: "172.30.0.130", port: 5000, expect: "NONE" },
];

const input = (r: Packet): TraceInput => ({
  hook: r.hook ?? "prerouting",
  src: r.src,
  dst: r.dst,
  protocol: r.proto ?? "tcp",
  dport: r.port,
  nodeAddresses: [NODE_IP, NODE_IP6],
});

/** What a row sends. */
type Packet = Omit<Row, "name" | "expect" | "masq">;

function outcome(t: NftTable, r: Packet): { output: string; masq: boolean } {
  const got = trace(t, input(r));
  const output =
    got.verdict === "dnat"
      ? got.endpoints.join(", ")
      : got.verdict === "none"
        ? "NONE"
        : got.verdict.toUpperCase();
  return { output, masq: got.masquerade };
}

const BEFORE = render(SERVICES, SLICES);

describe("services: packets through the nftables Services table (kube-proxy's packetFlowTest)", () => {
  const table = parseScript(BEFORE.script);
  for (const r of ROWS)
    it(r.name, () => {
      expect(outcome(table, r)).to.deep.equal({ output: r.expect, masq: r.masq ?? false });
    });

  it("session affinity: a chain and a timeout set per endpoint, the set checked before the pick", () => {
    const chains = [...(BEFORE.blocks.get("default/sticky:80/tcp/4") as Block).chains.keys()];
    const svc = chains.find((c) => c.startsWith("svc-")) as string;
    const [ep1, ep2, ...more] = chains.filter((c) => c.startsWith("ep-")) as [string, string];
    expect(more).to.deep.equal([]);
    const rules = (c: string) => table.chains.get(c)?.rules.map((r) => r.text) ?? [];
    const aff = (ep: string) => ep.replace(/^ep-/, "aff-");
    expect(rules(svc)).to.deep.equal([
      `ip daddr 172.30.0.110 ip saddr != 10.0.1.0/24 fib saddr type != local meta mark set meta mark | 0x100000`,
      `ip saddr @${aff(ep1)} goto ${ep1}`,
      `ip saddr @${aff(ep2)} goto ${ep2}`,
      `numgen random mod 2 == 0 goto ${ep1}`,
      `goto ${ep2}`,
    ]);
    for (const ep of [ep1, ep2]) {
      expect(rules(ep)[0]).to.equal(`update @${aff(ep)} { ip saddr }`);
      expect(rules(ep)[1]).to.match(/^meta l4proto tcp dnat ip to 10\.0\.[12]\.110:8080$/);
      expect(BEFORE.script).to.include(
        `add set ${T} ${aff(ep)} { type ipv4_addr; flags dynamic,timeout; timeout 600s; }`,
      );
    }
    // A client the set remembers goes to its endpoint only, from the ClusterIP and the node port alike.
    const remembered = parseScript(BEFORE.script);
    const target = rules(ep1)[1]?.split(" to ")[1] as string;
    applyScript(remembered, `add element ${T} ${aff(ep1)} { ${OUTSIDE} }`);
    for (const r of [
      ROWS.find((x) => x.dst === "172.30.0.110"),
      ROWS.find((x) => x.port === 30110),
    ] as Row[])
      expect(outcome(remembered, { ...r, src: OUTSIDE }).output).to.equal(target);
  });

  it("the picks are fair: each of a port's N endpoints is taken with probability 1/N", () => {
    for (const n of [1, 2, 3, 7, 64]) {
      const eps = Array.from({ length: n }, (_, i): Ep => [`10.0.2.${i + 1}`, "node-b"]);
      const r = render({ fair: { ips: ["172.30.9.1"], ports: http() } }, [slice("fair", eps)]);
      const [svc] = namesOf(r, "fair");
      const rules = (r.blocks.values().next().value as Block).chains.get(svc as string) ?? [];
      let rest = 1;
      const odds = rules
        .filter((x) => x.includes("dnat"))
        .map((x) => {
          const k = Number(/numgen random mod (\d+) == 0/.exec(x)?.[1] ?? 1);
          const p = rest / k;
          rest -= p;
          return p;
        });
      expect(odds, `${n} endpoints`).to.have.length(n);
      for (const p of odds) expect(p).to.be.closeTo(1 / n, 1e-12);
    }
  });

  it("the tracer refuses a rule it does not understand", () => {
    const svc = [...(BEFORE.blocks.get("default/web:80/tcp/4") as Block).chains.keys()][0];
    expect(() =>
      parseScript(`${BEFORE.script}add rule ${T} ${svc} tcp dport 80 counter accept\n`),
    ).to.throw(/cannot parse "tcp dport 80 counter accept"/);
  });
});

/** State two: several Services changed at once. */
const SERVICES_2: Record<string, SvcOpts> = Object.fromEntries([
  ...Object.entries(SERVICES).filter(([n]) => n !== "np-local"),
  ["sticky", { ...SERVICES.sticky, affinity: 900 }],
  ["lb", { ...SERVICES.lb, etp: undefined }],
  ["added", { type: "NodePort", ips: ["172.30.0.140"], ports: http(30140) }],
]);
const GONE_2 = ["web", "empty", "self", "itp-local-remote"];
// biome-ignore format: one slice a line
const SLICES_2: ApiSlice[] = [
  ...SLICES.filter((s) => !GONE_2.includes(sliceService(s)?.name ?? "")),
  WEB_3,
  slice("empty", [["10.0.2.20", "node-b"]], [["http", 8080], ["dns", 53, "UDP"]]),
  slice("self", [["10.0.1.101", "node-a", "unready"]]),
  slice("itp-local-remote", [["10.0.1.71", "node-a"], ["10.0.2.71", "node-b"]]),
  slice("added", [["10.0.1.140", "node-a"]]),
];

/** Every plan key of either state: what changed is changeScript's to find. */
function changes(from: Rendered, to: Rendered): string {
  const keys = new Set([...from.blocks.keys(), ...to.blocks.keys()]);
  const changed = new Map([...keys].map((k) => [k, to.blocks.get(k)]));
  return changeScript(from.blocks, changed, { before: from.hairpin, after: to.hairpin });
}

describe("services: the incremental script (changeScript)", () => {
  it("one Service's endpoints changed: only its chain is rewritten", () => {
    const slices = SLICES.map((s) => (sliceService(s)?.name === "web" ? WEB_3 : s));
    const after = render(SERVICES, slices);
    const script = changes(BEFORE, after);
    const [web] = namesOf(BEFORE, "web");
    expect(script.trim().split("\n")).to.deep.equal([
      `flush chain ${T} ${web}`,
      `add rule ${T} ${web} ip daddr 172.30.0.10 ip saddr != 10.0.1.0/24 fib saddr type != local meta mark set meta mark | 0x100000`,
      `add rule ${T} ${web} meta l4proto tcp numgen random mod 3 == 0 dnat ip to 10.0.1.5:8080`,
      `add rule ${T} ${web} meta l4proto tcp numgen random mod 2 == 0 dnat ip to 10.0.2.5:8080`,
      `add rule ${T} ${web} meta l4proto tcp dnat ip to 10.0.2.6:8080`,
    ]);
    for (const other of Object.keys(SERVICES).filter((n) => n !== "web"))
      for (const name of namesOf(BEFORE, other)) expect(script).to.not.include(name);
    const t = applyScript(parseScript(BEFORE.script), script);
    expect(outcome(t, ROWS[0] as Row).output).to.equal(
      "10.0.1.5:8080, 10.0.2.5:8080, 10.0.2.6:8080",
    );
  });

  it("nothing changed: an empty script", () => {
    expect(changes(BEFORE, render(SERVICES, SLICES))).to.equal("");
  });

  it("a Service removed: its elements go before its chains, and no table is dropped", () => {
    const after = render(
      Object.fromEntries(Object.entries(SERVICES).filter(([n]) => n !== "np-local")),
      SLICES,
    );
    const lines = changes(BEFORE, after).trim().split("\n");
    expect(lines.join("\n")).to.not.include("delete table");
    const gone = namesOf(BEFORE, "np-local");
    expect(gone).to.have.length(2);
    const lastElement = lines.findLastIndex((l) => l.startsWith("delete element"));
    const firstChain = lines.findIndex((l) => l.startsWith("delete chain"));
    expect(lastElement).to.be.within(0, firstChain - 1);
    expect(lines.filter((l) => l.startsWith("delete chain")).sort()).to.deep.equal(
      gone.map((c) => `delete chain ${T} ${c}`).sort(),
    );
    expect(lines.filter((l) => l.startsWith("delete element")).join("\n"))
      .to.include("172.30.0.40 . tcp . 80")
      .and.include("tcp . 30040")
      .and.include("10.0.1.40 . 10.0.1.40");
    // The tracer applies it as the kernel would: a chain still in use cannot be deleted.
    const t = applyScript(parseScript(BEFORE.script), lines.join("\n"));
    expect(outcome(t, { src: POD_A, dst: "172.30.0.40", port: 80 }).output).to.equal("NONE");
    expect(outcome(t, { src: OUTSIDE, dst: NODE_IP, port: 30040 }).output).to.equal("NONE");
  });

  it("the tracer refuses what the kernel refuses (EBUSY, EEXIST, ENOENT)", () => {
    const [svc] = namesOf(BEFORE, "web");
    const t = () => parseScript(BEFORE.script);
    expect(() => applyScript(t(), `delete chain ${T} ${svc}`)).to.throw(/still in use/);
    expect(() =>
      applyScript(
        t(),
        `add element ${T} service-ips { 172.30.0.10 . tcp . 80 : goto reject-service }`,
      ),
    ).to.throw(/already maps/);
    expect(() =>
      applyScript(t(), `delete element ${T} service-ips { 172.30.0.10 . tcp . 81 }`),
    ).to.throw(/no element/);
  });

  const AFTER = render(SERVICES_2, SLICES_2);
  const ADDED: Packet[] = [
    { src: OUTSIDE, dst: NODE_IP, port: 30140 },
    { src: POD_A, dst: "172.30.0.140", port: 80 },
    { src: POD_A, dst: "172.30.0.40", port: 80 },
  ];
  for (const [from, to, label] of [
    [BEFORE, AFTER, "many changes at once"],
    [AFTER, BEFORE, "and back"],
  ] as const)
    it(`${label}: the changed table traces as a fresh full script of the new state`, () => {
      const applied = applyScript(parseScript(from.script), changes(from, to));
      const fresh = parseScript(to.script);
      expect(dumpTable(applied)).to.deep.equal(dumpTable(fresh));
      for (const r of [...ROWS, ...ADDED])
        expect(outcome(applied, r), JSON.stringify(r)).to.deep.equal(outcome(fresh, r));
    });

  it("the new state answers as it should", () => {
    const t = parseScript(AFTER.script);
    const at = (r: Packet) => outcome(t, r);
    expect(at({ src: POD_A, dst: "172.30.0.20", port: 80 }).output).to.equal("10.0.2.20:8080");
    expect(at({ src: "10.0.1.101", dst: "172.30.0.100", port: 80 }).output).to.equal("REJECT");
    expect(at({ src: POD_A, dst: "172.30.0.71", port: 80 }).output).to.equal("10.0.1.71:8080");
    expect(at({ src: OUTSIDE, dst: "198.51.100.20", port: 80 })).to.deep.equal({
      output: "10.0.1.61:8080, 10.0.2.61:8080",
      masq: true,
    });
    expect(at({ src: OUTSIDE, dst: NODE_IP, port: 30140 })).to.deep.equal({
      output: "10.0.1.140:8080",
      masq: true,
    });
    expect(AFTER.script).to.include("timeout 900s;").and.not.include("timeout 600s;");
  });
});
