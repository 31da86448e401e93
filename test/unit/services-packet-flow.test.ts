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
import { type Block, shardTable } from "../../src/driver/services/ruleset.js";
import { sliceService } from "../../src/services/model.js";
import {
  applyScript,
  dumpTable,
  type NftTable,
  type Proto,
  parseScript,
  qualified,
  type TraceInput,
  trace,
} from "../support/nft-trace.js";
import {
  changes,
  type Ep,
  http,
  type Rendered,
  render,
  SERVICES,
  SERVICES_2,
  SLICES,
  SLICES_2,
  slice,
  WEB_3,
} from "../support/services-fixture.js";

const NODE_IP = "192.168.0.2";
const NODE_IP6 = "fd00:192::2";
const T = "inet cni-driver-services";

/** Clients: off the cluster, a pod of node-a (no endpoint of anything), a pod of node-b. */
const OUTSIDE = "203.0.113.7";
const OUTSIDE6 = "2001:db8::7";
const POD_A = "10.0.1.200";
const POD_A6 = "fd00:10:1::200";
const POD_B = "10.0.2.200";
/** Off the cluster and outside every loadBalancerSourceRanges of the fixture. */
const FAR = "192.0.2.9";

/** The table (`inet <shard>`) holding a Service's chains, in a render. */
function tableOf(r: Rendered, svc: string): string {
  const p = r.plans.find((x) => x.service === `default/${svc}`);
  return `inet ${shardTable((r.blocks.get(p?.key ?? "") as Block).shard)}`;
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
  { name: "loadBalancerSourceRanges: a source within them reaches the endpoints, masqueraded", src: OUTSIDE, dst: "198.51.100.30", port: 80, expect: "10.0.1.160:8080, 10.0.2.160:8080", masq: true },
  { name: "loadBalancerSourceRanges: a source outside them is dropped", src: FAR, dst: "198.51.100.30", port: 80, expect: "DROP" },
  { name: "loadBalancerSourceRanges: a pod of this node outside them is dropped too, as kube-proxy drops it", src: POD_A, dst: "198.51.100.30", port: 80, expect: "DROP" },
  { name: "loadBalancerSourceRanges: its node port lets every source in", src: FAR, dst: NODE_IP, port: 30160, expect: "10.0.1.160:8080, 10.0.2.160:8080", masq: true },
  { name: "loadBalancerSourceRanges: its externalIP lets every source in", src: FAR, dst: "198.51.100.32", port: 80, expect: "10.0.1.160:8080, 10.0.2.160:8080", masq: true },
  { name: "loadBalancerSourceRanges: its ClusterIP lets every pod in", src: POD_A, dst: "172.30.0.160", port: 80, expect: "10.0.1.160:8080, 10.0.2.160:8080" },
  { name: "loadBalancerSourceRanges holding the node's IP: the load-balancer IP itself as a source (a VIP looping back) is let in", src: "198.51.100.31", dst: "198.51.100.31", port: 80, expect: "10.0.2.161:8080", masq: true },
  { name: "loadBalancerSourceRanges holding the node's IP: another node of the range is let in", src: "192.168.0.3", dst: "198.51.100.31", port: 80, expect: "10.0.2.161:8080", masq: true },
  { name: "loadBalancerSourceRanges holding the node's IP: a source outside is dropped", src: OUTSIDE, dst: "198.51.100.31", port: 80, expect: "DROP" },
  { name: "loadBalancerSourceRanges not holding the node's IP: the load-balancer IP as a source is dropped", src: "198.51.100.30", dst: "198.51.100.30", port: 80, expect: "DROP" },
  { name: "loadBalancerSourceRanges, dual stack: an IPv4 source within the IPv4 range", src: OUTSIDE, dst: "198.51.100.33", port: 80, expect: "10.0.2.162:8080", masq: true },
  { name: "loadBalancerSourceRanges, dual stack: an IPv6 source within the IPv6 range", src: OUTSIDE6, dst: "2001:db8:5::33", port: 80, expect: "[fd00:10:2::162]:8080", masq: true },
  { name: "loadBalancerSourceRanges, dual stack: an IPv6 source outside it", src: "2001:db8:1::7", dst: "2001:db8:5::33", port: 80, expect: "DROP" },
  { name: "topology hints (PreferSameZone): node-a's pod reaches the endpoints hinted for zone-a, on either node", src: POD_A, dst: "172.30.0.170", port: 80, expect: "10.0.1.170:8080, 10.0.2.171:8080" },
  { name: "topology hints: through the node port from outside too (Cluster policy), masqueraded", src: OUTSIDE, dst: NODE_IP, port: 30170, expect: "10.0.1.170:8080, 10.0.2.171:8080", masq: true },
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
    const sticky = BEFORE.blocks.get("default/sticky:80/tcp/4") as Block;
    const chains = [...sticky.chains.keys()];
    const svc = chains.find((c) => c.startsWith("svc-")) as string;
    const [ep1, ep2, ...more] = chains.filter((c) => c.startsWith("ep-")) as [string, string];
    expect(more).to.deep.equal([]);
    const ST = `inet ${shardTable(sticky.shard)}`;
    const rules = (c: string) =>
      table.chains.get(qualified(shardTable(sticky.shard), c))?.rules.map((r) => r.text) ?? [];
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
        `add set ${ST} ${aff(ep)} { type ipv4_addr; flags dynamic,timeout; timeout 600s; }`,
      );
    }
    // A client the set remembers goes to its endpoint only, from the ClusterIP and the node port alike.
    const remembered = parseScript(BEFORE.script);
    const target = rules(ep1)[1]?.split(" to ")[1] as string;
    applyScript(remembered, `add element ${ST} ${aff(ep1)} { ${OUTSIDE} }`);
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
      parseScript(
        `${BEFORE.script}add rule ${tableOf(BEFORE, "web")} ${svc} tcp dport 80 counter accept\n`,
      ),
    ).to.throw(/cannot parse "tcp dport 80 counter accept"/);
  });
});

describe("services: the incremental script (changeScript)", () => {
  it("one Service's endpoints changed: only its chain is rewritten", () => {
    const slices = SLICES.map((s) => (sliceService(s)?.name === "web" ? WEB_3 : s));
    const after = render(SERVICES, slices);
    const script = changes(BEFORE, after);
    const [web] = namesOf(BEFORE, "web");
    const W = tableOf(BEFORE, "web");
    expect(script.trim().split("\n")).to.deep.equal([
      `flush chain ${W} ${web}`,
      `add rule ${W} ${web} ip daddr 172.30.0.10 ip saddr != 10.0.1.0/24 fib saddr type != local meta mark set meta mark | 0x100000`,
      `add rule ${W} ${web} meta l4proto tcp numgen random mod 3 == 0 dnat ip to 10.0.1.5:8080`,
      `add rule ${W} ${web} meta l4proto tcp numgen random mod 2 == 0 dnat ip to 10.0.2.5:8080`,
      `add rule ${W} ${web} meta l4proto tcp dnat ip to 10.0.2.6:8080`,
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
      gone.map((c) => `delete chain ${tableOf(BEFORE, "np-local")} ${c}`).sort(),
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
    const W = tableOf(BEFORE, "web");
    const t = () => parseScript(BEFORE.script);
    expect(() => applyScript(t(), `delete chain ${W} ${svc}`)).to.throw(/still in use/);
    expect(() =>
      applyScript(t(), `add element ${W} service-ips { 172.30.0.10 . tcp . 80 : goto services }`),
    ).to.throw(/already maps/);
    expect(() =>
      applyScript(t(), `delete element ${W} service-ips { 172.30.0.10 . tcp . 81 }`),
    ).to.throw(/no element/);
    // A rule names the chains of its own table only.
    expect(() =>
      applyScript(
        t(),
        `add element ${T} no-endpoint-services { 172.30.0.99 . tcp . 80 : goto ${svc} }`,
      ),
    ).to.throw(/chain svc-/);
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
