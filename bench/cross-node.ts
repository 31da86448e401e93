/**
 * bench/cross-node: the kernel datapath as a cluster network, three figures.
 *
 * 1. TCP throughput pod-to-pod across two nodes, over host-gw routes and over
 *    VXLAN, as a ratio to node-to-node throughput over the same underlay,
 *    measured in the same run (iperf3, alternating rounds). Target: ≥ 0.9×
 *    with host-gw.
 * 2. From a Node's appearance in the API to its route in the node's table:
 *    1,000 Nodes put into the fake API server at once, each route's arrival
 *    seen by `ip monitor route`; p50/p99 against the same 1,000 routes written
 *    by one `ip -batch` in the same namespace (the kernel's own floor).
 * 3. The driver's CPU and RSS with 5,000 Nodes: to converge, and over resyncs
 *    once converged; against the same driver with no peers, in the same run.
 *
 * The nodes are network namespaces on an underlay bridge (test/support/
 * cluster-nodes.ts), each running the compiled driver (`npm run build` first)
 * against the fake API server. Run as root: `npm run bench:cross-node`
 * (`-- --seconds 5 --rounds 3 --nodes 1000 --scale 5000`). iperf3 is installed
 * from Debian when missing. Everything is named with a random tag and removed
 * at the end, also on failure or Ctrl-C.
 */
import { type ChildProcess, execFileSync, spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  type ClusterMember,
  ClusterUnderlay,
  inNs,
  startMembers,
  type TestNode,
  tearDownCluster,
} from "../test/support/cluster-nodes.js";
import { DriverHarness, expectNoCniError, sleep } from "../test/support/driver-harness.js";
import {
  type FakeKubeApiServer,
  startFakeKubeApiServer,
} from "../test/support/fake-kube-apiserver.js";
import { createNetns } from "../test/support/netns.js";
import { fmt, option, percentile, printColumns, processCpuMs, say } from "./common.js";

const argv = process.argv.slice(2);
const SECONDS = Number(option(argv, "--seconds") ?? 5);
const ROUNDS = Number(option(argv, "--rounds") ?? 3);
const NODES = Number(option(argv, "--nodes") ?? 1000);
const SCALE = Number(option(argv, "--scale") ?? 5000);
const TARGET_RATIO = 0.9;
const CLUSTER_CIDR = "10.0.0.0/8";
/** The scale node's second subnet: room for every fake peer's address on-link. */
const PEER_NET = "172.20";
/** Peers' pod CIDRs: 10.128.0.0/24 onwards, clear of the harness's 10.244.x.0/24. */
const peerCidr = (i: number) => `10.${128 + Math.floor(i / 256)}.${i % 256}.0/24`;
const peerAddress = (i: number) => `${PEER_NET}.${1 + Math.floor(i / 250)}.${2 + (i % 250)}`;
const ROUTE_PROTOCOL = 157;
/** The reference's pods: 10.77.1.0/24 on plain-a, 10.77.2.0/24 on plain-b. */
const PLAIN_PODS = "10.77";
const PLAIN_MODE = "plain (no driver)";
const RESYNC_SECONDS = 10;

function ensureIperf3(): string {
  const found = spawnSync("sh", ["-c", "command -v iperf3"], { encoding: "utf8" }).stdout.trim();
  if (found) return found;
  say("iperf3 missing: installing Debian's iperf3 …");
  const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
  execFileSync("apt-get", ["install", "-y", "--no-install-recommends", "iperf3"], {
    env,
    stdio: "ignore",
  });
  return "iperf3";
}

function nodeObject(name: string, podCidr: string, address: string) {
  return {
    metadata: { name },
    spec: { podCIDR: podCidr, podCIDRs: [podCidr] },
    status: { addresses: [{ type: "InternalIP", address }] },
  };
}

function routeDev(ns: string, dst: string): string | undefined {
  const r = inNs(ns, ["ip", "-j", "route", "show", dst, "proto", String(ROUTE_PROTOCOL)]);
  return (JSON.parse(r.stdout || "[]") as Array<{ dev?: string }>)[0]?.dev;
}

async function waitFor(what: string, probe: () => boolean, timeoutMs = 120_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!probe()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

// ---------------------------------------------------------------------------
// 1. Throughput

/** One iperf3 run from `fromNs` to a one-off server in `toNs` at `address`: Gbit/s received. */
async function iperf(iperf3: string, fromNs: string, toNs: string, address: string) {
  const server = spawn(
    "ip",
    ["netns", "exec", toNs, iperf3, "-s", "-1", "--forceflush", "-B", address],
    {
      stdio: ["ignore", "pipe", "ignore"],
    },
  );
  try {
    await new Promise<void>((resolve, reject) => {
      server.stdout?.on("data", (b: Buffer) => {
        if (b.toString().includes("listening")) resolve();
      });
      server.once("exit", (code) => reject(new Error(`iperf3 server exited with ${code}`)));
      setTimeout(() => reject(new Error("iperf3 server not listening after 10 s")), 10_000).unref();
    });
    const r = inNs(
      fromNs,
      [iperf3, "-c", address, "-t", String(SECONDS), "-J"],
      (SECONDS + 20) * 1000,
    );
    if (r.status !== 0) throw new Error(`iperf3 to ${address} failed: ${r.stdout.slice(-500)}`);
    return JSON.parse(r.stdout).end.sum_received.bits_per_second / 1e9;
  } finally {
    if (server.exitCode === null) server.kill("SIGKILL");
  }
}

interface Throughput {
  mode: string;
  node: number[];
  pod: number[];
}

const median = (xs: number[]) => percentile(xs, 50);

/** Two nodes and a pod on each, as throughput is measured between them. */
interface PodPair {
  nodeA: string;
  nodeB: TestNode;
  podA: string;
  podB: string;
  podBAddress: string;
}

function memberPods(a: ClusterMember, b: ClusterMember, podIndex: number, podBAddress: string) {
  return {
    nodeA: a.node.netns,
    nodeB: b.node,
    podA: a.h.netnsName(podIndex),
    podB: b.h.netnsName(podIndex),
    podBAddress,
  };
}

async function measureThroughput(iperf3: string, mode: string, p: PodPair): Promise<Throughput> {
  const t: Throughput = { mode, node: [], pod: [] };
  for (let r = 0; r < ROUNDS; r++) {
    // Alternating order, so drift hits both sides alike.
    const node = () => iperf(iperf3, p.nodeA, p.nodeB.netns, p.nodeB.address);
    const pod = () => iperf(iperf3, p.podA, p.podB, p.podBAddress);
    if (r % 2 === 0) {
      t.node.push(await node());
      t.pod.push(await pod());
    } else {
      t.pod.push(await pod());
      t.node.push(await node());
    }
  }
  return t;
}

/**
 * The reference: the same shape with no driver. Two more nodes on the underlay,
 * each with a plain bridge, one pod on it by a veth pair, forwarding on and a
 * static route to the other node's pods; no nftables, hence no conntrack. Its
 * pod-to-pod over its node-to-node is what a bridged, routed pod network can get
 * on this machine (the extra veth pairs and the bridge); the driver's pods over
 * its pods are the driver's own cost (its nftables hooks, conntrack).
 */
function plainPair(ul: ClusterUnderlay): PodPair {
  const run = (ns: string, ...args: string[]) => {
    const r = inNs(ns, args);
    if (r.status !== 0) throw new Error(`${args.join(" ")} in ${ns}: ${r.stderr.trim()}`);
  };
  const nodes = [ul.addNode("plain-a", 13), ul.addNode("plain-b", 14)] as const;
  const pods = nodes.map((n, i) => {
    const pod = `${n.netns}-pod`;
    const [gateway, address] = [`${PLAIN_PODS}.${i + 1}.1`, `${PLAIN_PODS}.${i + 1}.2`];
    createNetns(pod);
    run(n.netns, "sysctl", "-qw", "net.ipv4.ip_forward=1");
    run(n.netns, "ip", "link", "add", "plainbr", "type", "bridge");
    run(n.netns, "ip", "addr", "add", `${gateway}/24`, "dev", "plainbr");
    run(n.netns, "ip", "link", "set", "plainbr", "up");
    run(
      n.netns,
      "ip",
      "link",
      "add",
      "veth-pod",
      "type",
      "veth",
      "peer",
      "name",
      "eth0",
      "netns",
      pod,
    );
    run(n.netns, "ip", "link", "set", "veth-pod", "master", "plainbr", "up");
    run(pod, "ip", "link", "set", "lo", "up");
    run(pod, "ip", "addr", "add", `${address}/24`, "dev", "eth0");
    run(pod, "ip", "link", "set", "eth0", "up");
    run(pod, "ip", "route", "add", "default", "via", gateway);
    return { pod, address };
  });
  for (const [i, n] of nodes.entries()) {
    const other = nodes[1 - i] as TestNode;
    run(n.netns, "ip", "route", "add", `${PLAIN_PODS}.${2 - i}.0/24`, "via", other.address);
  }
  const [podA, podB] = pods as [{ pod: string }, { pod: string; address: string }];
  return {
    nodeA: nodes[0].netns,
    nodeB: nodes[1],
    podA: podA.pod,
    podB: podB.pod,
    podBAddress: podB.address,
  };
}

async function throughputPart(
  iperf3: string,
  ul: ClusterUnderlay,
  kubeconfig: string,
  server: FakeKubeApiServer,
  members: ClusterMember[],
): Promise<Throughput[]> {
  for (const [i, name] of ["node-a", "node-b"].entries()) {
    const node = ul.addNode(name, 11 + i);
    const h = new DriverHarness({
      subnetOctet: 201 + i,
      netns: node.netns,
      nodeBinary: process.execPath,
      extraFlags: ["--kubeconfig", kubeconfig, "--node-name", name],
    });
    await h.writeConfig({
      "pod-network.conflist": JSON.stringify(h.conflist()),
      "driver.json": JSON.stringify({ crossNode: "host-gw", clusterCidr: CLUSTER_CIDR }),
    });
    server.put("nodes", nodeObject(name, h.subnet, node.address));
    members.push({ node, h, pod: "" });
  }
  const [a, b] = members as [ClusterMember, ClusterMember];
  await startMembers(members);
  await waitFor("host-gw routes", () => routeDev(a.node.netns, b.h.subnet) === "eth0");
  await waitFor("host-gw routes", () => routeDev(b.node.netns, a.h.subnet) === "eth0");
  say("throughput: host-gw, and the plain reference …");
  const hostGw = await measureThroughput(iperf3, "host-gw", memberPods(a, b, 1, b.pod));
  const plain = await measureThroughput(iperf3, PLAIN_MODE, plainPair(ul));
  // VXLAN: pods of MTU 1450 (1500 less the encapsulation), set up after the switch.
  const podB2: string[] = [];
  for (const m of [a, b]) {
    await m.h.writeConfig({
      "pod-network.conflist": JSON.stringify(m.h.conflist({ mtu: 1450 })),
      "driver.json": JSON.stringify({ crossNode: "vxlan", clusterCidr: CLUSTER_CIDR }),
    });
  }
  await waitFor("vxlan routes", () => routeDev(a.node.netns, b.h.subnet) === "midokube-vxlan");
  await waitFor("vxlan routes", () => routeDev(b.node.netns, a.h.subnet) === "midokube-vxlan");
  for (const m of [a, b]) {
    createNetns(m.h.netnsName(2));
    const res = await m.h.client.setUpPod(m.h.podRequest(2));
    expectNoCniError(res);
    podB2.push((res.result?.ips[0]?.address ?? "").split("/")[0] as string);
  }
  say("throughput: vxlan …");
  const vxlan = await measureThroughput(iperf3, "vxlan", memberPods(a, b, 2, podB2[1] as string));
  for (const m of members) await m.h.stop();
  return [hostGw, vxlan, plain];
}

// ---------------------------------------------------------------------------
// 2 and 3. Many Nodes

/** `ip monitor route` in `ns`: the time each route of the driver's first appeared. */
class RouteWatch {
  readonly seen = new Map<string, number>();
  private readonly child: ChildProcess;
  private rest = "";

  constructor(ns: string) {
    this.child = spawn("ip", ["-n", ns, "monitor", "route"], {
      stdio: ["ignore", "pipe", "ignore"],
    });
    this.child.stdout?.on("data", (b: Buffer) => {
      const now = performance.now();
      const lines = (this.rest + b.toString()).split("\n");
      this.rest = lines.pop() ?? "";
      for (const line of lines) {
        if (line.startsWith("Deleted") || !line.includes(`proto ${ROUTE_PROTOCOL}`)) continue;
        const dst = line.split(" ")[0] as string;
        if (!this.seen.has(dst)) this.seen.set(dst, now);
      }
    });
  }

  stop(): void {
    if (this.child.exitCode === null) this.child.kill("SIGKILL");
  }
}

function rssMiB(pid: number): number {
  const m = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return Number(m?.[1]) / 1024;
}

/** The driver's process: `ip netns exec` execs it, so the harness's pid is the driver's. */
function cpuMs(h: DriverHarness): number {
  return processCpuMs([h.pid as number]);
}

interface ScaleFigures {
  appearP50: number;
  appearP99: number;
  appearMax: number;
  batchMs: number;
  idleRss: number;
  idleCpuPct: number;
  convergeCpuMs: number;
  convergeMs: number;
  scaleRss: number;
  scaleCpuPct: number;
}

/** CPU share of the driver over `ms`, in % of one core. */
async function cpuShare(h: DriverHarness, ms: number): Promise<number> {
  const c0 = cpuMs(h);
  await sleep(ms);
  return ((cpuMs(h) - c0) / ms) * 100;
}

/** The kernel's floor: `count` routes like the driver's, one `ip -batch`, timed; then removed. */
function batchFloorMs(ns: string, count: number): number {
  const lines = Array.from(
    { length: count },
    (_, i) => `route add 10.${64 + Math.floor(i / 256)}.${i % 256}.0/24 via ${peerAddress(i)}`,
  );
  const t0 = performance.now();
  execFileSync("ip", ["-n", ns, "-batch", "-"], { input: `${lines.join("\n")}\n` });
  const ms = performance.now() - t0;
  execFileSync("ip", ["-n", ns, "-batch", "-"], {
    input: `${lines.map((l) => l.replace("route add", "route del")).join("\n")}\n`,
  });
  return ms;
}

async function scalePart(
  ul: ClusterUnderlay,
  kubeconfig: string,
  server: FakeKubeApiServer,
  members: ClusterMember[],
): Promise<ScaleFigures> {
  // Every peer's Node goes; only the scale node's driver runs from here on.
  for (const m of members) server.remove("nodes", undefined, m.node.name);
  const node: TestNode = ul.addNode("scale", 50);
  execFileSync("ip", ["-n", node.netns, "addr", "add", `${PEER_NET}.0.1/16`, "dev", "eth0"]);
  const h = new DriverHarness({
    subnetOctet: 210,
    netns: node.netns,
    nodeBinary: process.execPath,
    extraFlags: [
      "--kubeconfig",
      kubeconfig,
      "--node-name",
      "scale",
      "--node-link-resync",
      String(RESYNC_SECONDS),
    ],
  });
  await h.writeConfig({
    "pod-network.conflist": JSON.stringify(h.conflist()),
    "driver.json": JSON.stringify({ crossNode: "host-gw", clusterCidr: CLUSTER_CIDR }),
  });
  server.put("nodes", nodeObject("scale", h.subnet, node.address));
  members.push({ node, h, pod: "" });
  await h.start();
  await sleep(3000);
  const idleRss = rssMiB(h.pid as number);
  const idleCpuPct = await cpuShare(h, RESYNC_SECONDS * 2000);
  const batchMs = batchFloorMs(node.netns, NODES);

  // 2. NODES Nodes at once.
  say(`${NODES} Nodes at once …`);
  const watch = new RouteWatch(node.netns);
  await sleep(500);
  const putAt = new Map<string, number>();
  for (let i = 0; i < NODES; i++) {
    putAt.set(peerCidr(i), performance.now());
    server.put("nodes", nodeObject(`peer-${i}`, peerCidr(i), peerAddress(i)));
  }
  await waitFor(`${NODES} routes`, () => watch.seen.size >= NODES);
  const delays = [...putAt].map(([dst, t]) => (watch.seen.get(dst) ?? Number.NaN) - t);

  // 3. Up to SCALE Nodes: the CPU to converge, then the steady state.
  await sleep(3000);
  say(`up to ${SCALE} Nodes …`);
  const c0 = cpuMs(h);
  const t0 = performance.now();
  for (let i = NODES; i < SCALE; i++) {
    server.put("nodes", nodeObject(`peer-${i}`, peerCidr(i), peerAddress(i)));
  }
  await waitFor(`${SCALE} routes`, () => watch.seen.size >= SCALE, 300_000);
  const convergeMs = performance.now() - t0;
  const convergeCpuMs = cpuMs(h) - c0;
  watch.stop();
  await sleep(3000);
  const scaleCpuPct = await cpuShare(h, RESYNC_SECONDS * 2000);
  const scaleRss = rssMiB(h.pid as number);
  return {
    appearP50: percentile(delays, 50),
    appearP99: percentile(delays, 99),
    appearMax: Math.max(...delays),
    batchMs,
    idleRss,
    idleCpuPct,
    convergeCpuMs,
    convergeMs,
    scaleRss,
    scaleCpuPct,
  };
}

// ---------------------------------------------------------------------------

function report(tp: Throughput[], s: ScaleFigures): boolean {
  say();
  say(`TCP throughput, iperf3 ${SECONDS} s × ${ROUNDS} rounds a side (median, Gbit/s):`);
  printColumns(
    ["crossNode", "node-to-node", "pod-to-pod", "ratio", "rounds (node / pod)"],
    tp.map((t) => [
      t.mode,
      fmt(median(t.node), 2),
      fmt(median(t.pod), 2),
      `${fmt(median(t.pod) / median(t.node), 2)}×`,
      `${t.node.map((x) => fmt(x, 2)).join(" ")} / ${t.pod.map((x) => fmt(x, 2)).join(" ")}`,
    ]),
  );
  const hostGw = tp[0] as Throughput;
  const ratio = median(hostGw.pod) / median(hostGw.node);
  const pass = ratio >= TARGET_RATIO;
  say(
    `${pass ? "PASS" : "FAIL"}: pod-to-pod with host-gw ${fmt(ratio, 2)}× node-to-node (target ≥ ${TARGET_RATIO}×)`,
  );
  const plain = tp.find((t) => t.mode === PLAIN_MODE);
  if (plain) {
    const ceiling = median(plain.pod) / median(plain.node);
    const own = median(hostGw.pod) / median(plain.pod);
    say(
      `  the same shape without the driver: pod-to-pod ${fmt(ceiling, 2)}× node-to-node (this machine's ceiling for a bridged, routed pod); the driver's host-gw pods ${fmt(own, 2)}× its pods (the driver's own cost)`,
    );
  }
  say();
  say(`${NODES} Nodes appearing at once, to their route in the node's table:`);
  say(
    `  p50 ${fmt(s.appearP50, 0)} ms, p99 ${fmt(s.appearP99, 0)} ms, last ${fmt(s.appearMax, 0)} ms; ` +
      `the same ${NODES} routes by one ip -batch: ${fmt(s.batchMs, 0)} ms`,
  );
  say();
  say(`The driver with ${SCALE} Nodes (resync every ${RESYNC_SECONDS} s):`);
  printColumns(
    ["peers", "RSS MiB", "CPU % of a core (steady)", "to converge"],
    [
      ["0", fmt(s.idleRss), fmt(s.idleCpuPct, 2), "-"],
      [
        String(SCALE),
        fmt(s.scaleRss),
        fmt(s.scaleCpuPct, 2),
        `${SCALE - NODES} more Nodes: ${fmt(s.convergeMs / 1000, 2)} s, ${fmt(s.convergeCpuMs / 1000, 2)} CPU s`,
      ],
    ],
  );
  return pass;
}

async function main(): Promise<void> {
  if (process.getuid?.() !== 0) throw new Error("bench/cross-node needs root (namespaces)");
  const iperf3 = ensureIperf3();
  const root = mkdtempSync(join(tmpdir(), "cni-driver-bench-xnode-"));
  const ul = new ClusterUnderlay(root);
  const members: ClusterMember[] = [];
  let server: FakeKubeApiServer | undefined;
  const cleanup = () => tearDownCluster(members, ul, server, root);
  for (const sig of ["SIGINT", "SIGTERM"] as const) {
    process.once(sig, () => {
      void cleanup().finally(() => process.exit(130));
    });
  }
  try {
    server = await startFakeKubeApiServer();
    const kubeconfig = await ul.exposeApi(Number(new URL(server.url).port), server.kubeconfig());
    say(
      `bench/cross-node: ${process.version}, ${SECONDS} s × ${ROUNDS} rounds, ${NODES} then ${SCALE} Nodes`,
    );
    const tp = await throughputPart(iperf3, ul, kubeconfig, server, members);
    const scale = await scalePart(ul, kubeconfig, server, members);
    report(tp, scale);
  } finally {
    await cleanup();
  }
}

main().catch((err) => {
  console.error(err instanceof Error ? (err.stack ?? err.message) : err);
  process.exitCode = 1;
});
