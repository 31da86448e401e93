/**
 * bench/network-policy: what NetworkPolicy on the kernel datapath costs, each
 * figure against a reference measured in the same run. One node (a network
 * namespace on an underlay) runs `cni-driver serve` against the fake API
 * server, as the cluster tests do.
 *
 * 1. setup   SetUpPod p50 at concurrency 1 through the socket with 1,000
 *            policies in the API (10 of them selecting the pods set up)
 *            against none. Rounds alternate (none, policies, policies, none).
 *            Goal ≤ 1.2×.
 * 2. change  A policy change to enforcement: 110 pods on the node, 10,000
 *            pods and 1,000 policies in the API; one policy selecting the
 *            node's pods has its port switched, and the time to the rule in
 *            the node's nftables is read from `nft monitor`. p50 and p99 over
 *            the changes; reference: the same change with no other policy and
 *            no other pod. Goal p99 ≤ 200 ms.
 * 3. traffic Pod-to-pod TCP throughput (iperf3) and new connections per
 *            second between two pods of the node, with 100 policies selecting
 *            the server (one allowing the client) against none. Goal ≥ 0.95×.
 * 4. memory  The driver's RSS with 150,000 pods, 10,000 policies and 5,000
 *            namespaces in the API, after it has listed them all and
 *            enforced. Goal ≤ 250 MiB.
 *
 * Run as root: `npm run bench:network-policy` (`-- --only setup,change`,
 * `-- --quick` for smaller sizes). Everything it makes carries a random tag
 * and is removed at the end, also on failure.
 */
import { type ChildProcess, execFileSync, spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ClusterUnderlay, type TestNode } from "../test/support/cluster-nodes.js";
import { DriverHarness, expectNoCniError, sleep } from "../test/support/driver-harness.js";
import {
  type FakeKubeApiServer,
  type KubeObject,
  startFakeKubeApiServer,
} from "../test/support/fake-kube-apiserver.js";
import { createNetns } from "../test/support/netns.js";
import { fmt, option, percentile, printColumns, say } from "./common.js";

const argv = process.argv.slice(2);
const QUICK = argv.includes("--quick");
const ONLY = new Set((option(argv, "--only") ?? "setup,change,traffic,memory").split(","));
const CLUSTER_CIDR = "10.244.0.0/16";
const BENCH_NS = "bench";

const SIZES = QUICK
  ? {
      setupPods: 15,
      changeLocal: 30,
      apiPods: 2000,
      policies: 200,
      changes: 20,
      memPods: 20_000,
      memPolicies: 1000,
      memNamespaces: 500,
    }
  : {
      setupPods: 40,
      changeLocal: 110,
      apiPods: 10_000,
      policies: 1000,
      changes: 60,
      memPods: 150_000,
      memPolicies: 10_000,
      memNamespaces: 5000,
    };

const GOALS = { setupRatio: 1.2, changeP99Ms: 200, trafficRatio: 0.95, rssMiB: 250 };

// ---------------------------------------------------------------------------
// The API's objects

function namespaceObject(name: string): KubeObject {
  return {
    metadata: {
      name,
      labels: { "kubernetes.io/metadata.name": name, team: `t${name.length % 7}` },
    },
  };
}

function podObject(
  namespace: string,
  name: string,
  node: string,
  app: string,
  ip?: string,
): KubeObject {
  return {
    metadata: { namespace, name, labels: { app, tier: "web" } },
    spec: {
      nodeName: node,
      containers: [
        {
          name: "c",
          image: "busybox",
          ports: [{ name: "http", containerPort: 80, protocol: "TCP" }],
        },
      ],
    },
    ...(ip ? { status: { phase: "Running", podIP: ip, podIPs: [{ ip }] } } : {}),
  };
}

/** A policy in `namespace` selecting `app` pods, allowing TCP `port` from `fromApp` pods of namespaces of a team. */
function policyObject(
  namespace: string,
  name: string,
  app: string,
  fromApp: string,
  port: number | string,
): KubeObject {
  return {
    metadata: { namespace, name },
    spec: {
      podSelector: { matchLabels: { app } },
      policyTypes: ["Ingress"],
      ingress: [
        {
          from: [{ podSelector: { matchLabels: { app: fromApp } }, namespaceSelector: {} }],
          ports: [{ protocol: "TCP", port }],
        },
      ],
    },
  };
}

/** Fake pods of other nodes, spread over namespaces, with addresses outside this node's range. */
function putApiPods(server: FakeKubeApiServer, count: number, namespaces: number): void {
  for (let i = 0; i < count; i++) {
    const ip = `10.${100 + ((i >> 16) & 63)}.${(i >> 8) & 255}.${i & 255}`;
    server.put(
      "pods",
      podObject(`ns-${i % namespaces}`, `p-${i}`, `node-${i % 500}`, `a${i % 50}`, ip),
    );
  }
}

function putPolicies(
  server: FakeKubeApiServer,
  count: number,
  namespaces: number,
  prefix = "pol",
): string[] {
  const names: string[] = [];
  for (let i = 0; i < count; i++) {
    const name = `${prefix}-${i}`;
    server.put(
      "networkpolicies",
      policyObject(`ns-${i % namespaces}`, name, `a${i % 50}`, `a${(i + 1) % 50}`, 80),
    );
    names.push(`ns-${i % namespaces}/${name}`);
  }
  return names;
}

function removeAll(
  server: FakeKubeApiServer,
  resource: "networkpolicies" | "pods",
  keep?: (o: KubeObject) => boolean,
): void {
  for (const o of server.list(resource)) {
    if (keep?.(o)) continue;
    server.remove(resource, o.metadata?.namespace, o.metadata?.name ?? "");
  }
}

// ---------------------------------------------------------------------------
// The node

interface Bench {
  root: string;
  server: FakeKubeApiServer;
  ul: ClusterUnderlay;
  node: TestNode;
  h: DriverHarness;
  next: number;
}

async function startNode(
  b: Omit<Bench, "node" | "h" | "next">,
  name: string,
  octet: number,
  subnetOctet: number,
  kubeconfig: string,
): Promise<{ node: TestNode; h: DriverHarness }> {
  const node = b.ul.addNode(name, octet);
  const h = new DriverHarness({
    subnetOctet,
    netns: node.netns,
    nodeBinary: process.execPath,
    // info: the bench reads the "listed" lines.
    extraFlags: ["--kubeconfig", kubeconfig, "--node-name", name, "--log-level", "info"],
  });
  await h.writeConfig({
    "pod-network.conflist": JSON.stringify(h.conflist()),
    "driver.json": JSON.stringify({
      crossNode: "none",
      clusterCidr: CLUSTER_CIDR,
      networkPolicy: true,
    }),
  });
  b.server.put("nodes", {
    metadata: { name },
    spec: { podCIDR: h.subnet, podCIDRs: [h.subnet] },
    status: { addresses: [{ type: "InternalIP", address: node.address }] },
  });
  await h.start();
  return { node, h };
}

const listedLines = (h: DriverHarness) =>
  h.logs.split("\n").filter((l) => l.includes('"msg":"listed"')).length;

/** Waits (bounded) until the driver has said it listed all three kinds, `before` such lines having been logged. */
async function listed(h: DriverHarness, before: number, boundMs: number): Promise<number> {
  const t0 = performance.now();
  while (performance.now() - t0 < boundMs) {
    if (listedLines(h) >= before + 3) return performance.now() - t0;
    await sleep(50);
  }
  throw new Error(
    `the driver did not list pods, namespaces and policies in ${boundMs} ms; its log:\n${h.logs.slice(-3000)}`,
  );
}

/** One bench pod: its Pod object first (as the API has it before kubelet sets it up), then SetUpPod. */
async function addPod(
  b: Bench,
  app: string,
): Promise<{ id: string; name: string; ip: string; ms: number }> {
  const id = `p${b.next++}`;
  const name = `${id}`;
  b.server.put("pods", podObject(BENCH_NS, name, b.node.name, app));
  createNetns(b.h.netnsName(id));
  const req = b.h.podRequest(id, { pod: { namespace: BENCH_NS, name, uid: "" } });
  const t0 = performance.now();
  const res = await b.h.client.setUpPod(req);
  const ms = performance.now() - t0;
  expectNoCniError(res);
  const ip = (res.result?.ips[0]?.address ?? "").split("/")[0] as string;
  const o = b.server.get("pods", BENCH_NS, name) as KubeObject;
  b.server.put("pods", { ...o, status: { phase: "Running", podIP: ip, podIPs: [{ ip }] } });
  return { id, name, ip, ms };
}

async function removePod(b: Bench, p: { id: string; name: string }): Promise<void> {
  const res = await b.h.client.tearDownPod(
    b.h.podRequest(p.id, { pod: { namespace: BENCH_NS, name: p.name, uid: "" } }),
  );
  if (res.error) throw new Error(`TearDownPod ${p.id}: ${res.error.msg}`);
  b.server.remove("pods", BENCH_NS, p.name);
  spawnSync("ip", ["netns", "del", b.h.netnsName(p.id)]);
}

// ---------------------------------------------------------------------------
// 1. SetUpPod with 1,000 policies

async function setupPart(b: Bench): Promise<string[]> {
  say(
    `setup: SetUpPod at c=1, ${SIZES.setupPods} pods a round, none against ${SIZES.policies} policies`,
  );
  const samples: Record<"none" | "policies", number[]> = { none: [], policies: [] };
  const order: Array<"none" | "policies"> = ["none", "policies", "policies", "none"];
  for (const side of order) {
    removeAll(b.server, "networkpolicies");
    if (side === "policies") {
      putPolicies(b.server, SIZES.policies - 10, 100);
      // Ten that select the bench's pods (app: bench).
      for (let i = 0; i < 10; i++)
        b.server.put(
          "networkpolicies",
          policyObject(BENCH_NS, `sel-${i}`, "bench", `a${i}`, 80 + i),
        );
    }
    await sleep(1000);
    const pods = [];
    for (let i = 0; i < SIZES.setupPods; i++) {
      const p = await addPod(b, "bench");
      if (i >= 2) samples[side].push(p.ms);
      pods.push(p);
    }
    for (const p of pods) await removePod(b, p);
  }
  removeAll(b.server, "networkpolicies");
  const none = percentile(samples.none, 50);
  const with1000 = percentile(samples.policies, 50);
  printColumns(
    ["SetUpPod", "p50 ms", "p90 ms", "samples"],
    [
      [
        "no policy",
        fmt(none, 2),
        fmt(percentile(samples.none, 90), 2),
        String(samples.none.length),
      ],
      [
        `${SIZES.policies} policies`,
        fmt(with1000, 2),
        fmt(percentile(samples.policies, 90), 2),
        String(samples.policies.length),
      ],
    ],
  );
  const ratio = with1000 / none;
  return [
    `SetUpPod p50 with ${SIZES.policies} policies / none: ${fmt(ratio, 2)}× (goal ≤ ${GOALS.setupRatio}×: ${ratio <= GOALS.setupRatio ? "met" : "missed"})`,
  ];
}

// ---------------------------------------------------------------------------
// 2. A policy change to enforcement

/** `nft monitor` in the node: when each line containing a marker first appeared. */
class NftMonitor {
  private readonly child: ChildProcess;
  private rest = "";
  private readonly waiters: Array<{ marker: string; resolve(t: number): void }> = [];

  constructor(ns: string) {
    this.child = spawn("ip", ["netns", "exec", ns, "nft", "monitor", "rules"], {
      stdio: ["ignore", "pipe", "ignore"],
    });
    this.child.stdout?.on("data", (buf: Buffer) => {
      const now = performance.now();
      const lines = (this.rest + buf.toString()).split("\n");
      this.rest = lines.pop() ?? "";
      for (const line of lines) {
        for (const w of [...this.waiters]) {
          if (!line.includes(w.marker)) continue;
          this.waiters.splice(this.waiters.indexOf(w), 1);
          w.resolve(now);
        }
      }
    });
  }

  next(marker: string, boundMs: number): Promise<number> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`no "${marker}" in nft monitor within ${boundMs} ms`)),
        boundMs,
      );
      this.waiters.push({
        marker,
        resolve: (t) => {
          clearTimeout(timer);
          resolve(t);
        },
      });
    });
  }

  stop(): void {
    if (this.child.exitCode === null) this.child.kill("SIGKILL");
  }
}

async function changeRound(b: Bench, withLoad: boolean): Promise<number[]> {
  removeAll(b.server, "networkpolicies");
  removeAll(b.server, "pods", (o) => o.metadata?.namespace === BENCH_NS);
  // The changing policy's peers (app a1) are among these pods either way.
  putApiPods(b.server, withLoad ? SIZES.apiPods : 100, 100);
  if (withLoad) putPolicies(b.server, SIZES.policies - 1, 100);
  b.server.put("networkpolicies", policyObject(BENCH_NS, "changing", "bench", "a1", 1000));
  const monitor = new NftMonitor(b.node.netns);
  try {
    await sleep(withLoad ? 3000 : 1000);
    const times: number[] = [];
    for (let i = 1; i <= SIZES.changes; i++) {
      const port = 1000 + i;
      // The node's pod chains name the port once it is enforced.
      const enforced = monitor.next(`dport ${port} `, 5000);
      const t0 = performance.now();
      b.server.put("networkpolicies", policyObject(BENCH_NS, "changing", "bench", "a1", port));
      const t1 = await enforced;
      times.push(t1 - t0);
      await sleep(50);
    }
    return times;
  } finally {
    monitor.stop();
  }
}

async function changePart(b: Bench): Promise<string[]> {
  say(
    `change: ${SIZES.changeLocal} pods on the node; ${SIZES.apiPods} pods and ${SIZES.policies} policies in the API, against none`,
  );
  const pods = [];
  for (let i = 0; i < SIZES.changeLocal; i++) pods.push(await addPod(b, "bench"));
  const ref = await changeRound(b, false);
  const load = await changeRound(b, true);
  removeAll(b.server, "networkpolicies");
  removeAll(b.server, "pods", (o) => o.metadata?.namespace === BENCH_NS);
  for (const p of pods) await removePod(b, p);
  printColumns(
    ["policy change → nftables", "p50 ms", "p99 ms", "max ms", "changes"],
    [
      [
        "reference (no other policy or pod)",
        fmt(percentile(ref, 50)),
        fmt(percentile(ref, 99)),
        fmt(Math.max(...ref)),
        String(ref.length),
      ],
      [
        `${SIZES.apiPods} pods, ${SIZES.policies} policies`,
        fmt(percentile(load, 50)),
        fmt(percentile(load, 99)),
        fmt(Math.max(...load)),
        String(load.length),
      ],
    ],
  );
  const p99 = percentile(load, 99);
  return [
    `policy change to enforcement p50 ${fmt(percentile(load, 50))} ms, p99 ${fmt(p99)} ms (reference p99 ${fmt(percentile(ref, 99))} ms; goal p99 ≤ ${GOALS.changeP99Ms} ms: ${p99 <= GOALS.changeP99Ms ? "met" : "missed"})`,
  ];
}

// ---------------------------------------------------------------------------
// 3. Throughput and connections per second

function iperf3(): string {
  const found = spawnSync("sh", ["-c", "command -v iperf3"], { encoding: "utf8" }).stdout.trim();
  if (found) return found;
  say("iperf3 missing: installing Debian's iperf3 …");
  execFileSync("apt-get", ["install", "-y", "--no-install-recommends", "iperf3"], {
    stdio: "ignore",
  });
  return "iperf3";
}

async function gbits(
  bin: string,
  fromNs: string,
  toNs: string,
  address: string,
  seconds: number,
): Promise<number> {
  const server = spawn("ip", ["netns", "exec", toNs, bin, "-s", "-1", "-B", address], {
    stdio: "ignore",
  });
  try {
    await sleep(300);
    const r = spawnSync(
      "ip",
      ["netns", "exec", fromNs, bin, "-c", address, "-t", String(seconds), "-J"],
      { encoding: "utf8", timeout: (seconds + 20) * 1000 },
    );
    if (r.status !== 0) throw new Error(`iperf3 to ${address}: ${r.stdout.slice(-300)}`);
    return (JSON.parse(r.stdout).end.sum_received.bits_per_second as number) / 1e9;
  } finally {
    if (server.exitCode === null) server.kill("SIGKILL");
  }
}

/** New TCP connections a second from `fromNs` to a server in `toNs` (each one opened, a byte read, closed). */
function connectionsPerSecond(
  fromNs: string,
  toNs: string,
  address: string,
  seconds: number,
): number {
  const serverScript = `require("net").createServer((s) => s.end("x")).listen(8080, ${JSON.stringify(address)});`;
  const server = spawn("ip", ["netns", "exec", toNs, process.execPath, "-e", serverScript], {
    stdio: "ignore",
    env: { PATH: process.env.PATH },
  });
  try {
    spawnSync("sleep", ["0.5"]);
    const client = `const net = require("net"); let n = 0; const end = Date.now() + ${seconds * 1000};
      const one = () => { if (Date.now() > end) { console.log(n); process.exit(0); }
        const s = net.connect(8080, ${JSON.stringify(address)}); s.on("data", () => {}); s.on("end", () => { n++; one(); }); s.on("error", () => one()); };
      for (let i = 0; i < 8; i++) one();`;
    const r = spawnSync("ip", ["netns", "exec", fromNs, process.execPath, "-e", client], {
      encoding: "utf8",
      timeout: (seconds + 20) * 1000,
      env: { PATH: process.env.PATH },
    });
    return Number(r.stdout.trim()) / seconds;
  } finally {
    if (server.exitCode === null) server.kill("SIGKILL");
  }
}

async function trafficPart(b: Bench): Promise<string[]> {
  const bin = iperf3();
  const seconds = QUICK ? 2 : 4;
  say(
    `traffic: two pods of the node, iperf3 ${seconds} s and connections/s, 100 policies selecting the server against none`,
  );
  const server = await addPod(b, "server");
  const client = await addPod(b, "client");
  const results: Record<"none" | "policies", { gbit: number[]; cps: number[] }> = {
    none: { gbit: [], cps: [] },
    policies: { gbit: [], cps: [] },
  };
  for (const side of ["none", "policies", "policies", "none"] as const) {
    removeAll(b.server, "networkpolicies");
    if (side === "policies") {
      for (let i = 0; i < 99; i++)
        b.server.put(
          "networkpolicies",
          policyObject(BENCH_NS, `other-${i}`, "server", `nobody-${i}`, 9000 + i),
        );
      b.server.put("networkpolicies", {
        metadata: { namespace: BENCH_NS, name: "allow-client" },
        spec: {
          podSelector: { matchLabels: { app: "server" } },
          policyTypes: ["Ingress"],
          ingress: [{ from: [{ podSelector: { matchLabels: { app: "client" } } }] }],
        },
      });
    }
    await sleep(1500);
    const fromNs = b.h.netnsName(client.id);
    const toNs = b.h.netnsName(server.id);
    results[side].gbit.push(await gbits(bin, fromNs, toNs, server.ip, seconds));
    results[side].cps.push(connectionsPerSecond(fromNs, toNs, server.ip, seconds));
  }
  removeAll(b.server, "networkpolicies");
  await removePod(b, server);
  await removePod(b, client);
  const mean = (a: number[]) => a.reduce((s, x) => s + x, 0) / a.length;
  const g = mean(results.policies.gbit) / mean(results.none.gbit);
  const c = mean(results.policies.cps) / mean(results.none.cps);
  printColumns(
    ["pod to pod, same node", "Gbit/s", "connections/s"],
    [
      ["no policy", fmt(mean(results.none.gbit), 2), fmt(mean(results.none.cps), 0)],
      [
        "100 policies select the server",
        fmt(mean(results.policies.gbit), 2),
        fmt(mean(results.policies.cps), 0),
      ],
    ],
  );
  const met = (r: number) => (r >= GOALS.trafficRatio ? "met" : "missed");
  return [
    `TCP throughput with 100 policies / none: ${fmt(g, 2)}× (goal ≥ ${GOALS.trafficRatio}×: ${met(g)})`,
    `new connections/s with 100 policies / none: ${fmt(c, 2)}× (goal ≥ ${GOALS.trafficRatio}×: ${met(c)})`,
  ];
}

// ---------------------------------------------------------------------------
// 4. Memory

function rssMiB(pid: number): number {
  const m = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return Number(m?.[1]) / 1024;
}

async function memoryPart(b: Bench): Promise<string[]> {
  say(
    `memory: ${SIZES.memPods} pods, ${SIZES.memPolicies} policies, ${SIZES.memNamespaces} namespaces in the API`,
  );
  removeAll(b.server, "networkpolicies");
  const idle = rssMiB(b.h.pid as number);
  for (let i = 0; i < SIZES.memNamespaces; i++)
    b.server.put("namespaces", namespaceObject(`ns-${i}`));
  putApiPods(b.server, SIZES.memPods, SIZES.memNamespaces);
  putPolicies(b.server, SIZES.memPolicies, SIZES.memNamespaces, "mem");
  // A restart lists them all at once, as a driver starting on a big cluster does.
  await b.h.stop();
  const from = listedLines(b.h);
  const t0 = performance.now();
  await b.h.start();
  const listMs = await listed(b.h, from, 600_000);
  const pods = [];
  for (let i = 0; i < 10; i++) pods.push(await addPod(b, `a${i}`));
  const setupMs = performance.now() - t0;
  await sleep(5000);
  const rss = rssMiB(b.h.pid as number);
  for (const p of pods) await removePod(b, p);
  printColumns(
    ["driver RSS", "MiB"],
    [
      ["before (a handful of objects)", fmt(idle)],
      [
        `${SIZES.memPods} pods, ${SIZES.memPolicies} policies, ${SIZES.memNamespaces} namespaces, 10 pods set up`,
        fmt(rss),
      ],
    ],
  );
  say(
    `  listed in ${fmt(listMs / 1000, 1)} s after the start; 10 pods set up ${fmt(setupMs / 1000, 1)} s after it`,
  );
  return [
    `driver RSS with ${SIZES.memPods} pods, ${SIZES.memPolicies} policies: ${fmt(rss)} MiB (goal ≤ ${GOALS.rssMiB}: ${rss <= GOALS.rssMiB ? "met" : "missed"})`,
  ];
}

// ---------------------------------------------------------------------------

async function main(): Promise<void> {
  if (process.getuid?.() !== 0)
    throw new Error("bench/network-policy needs root (network namespaces)");
  const root = mkdtempSync(join(tmpdir(), "cni-driver-bench-np-"));
  const server = await startFakeKubeApiServer({ historyLimit: 400_000 });
  const ul = new ClusterUnderlay(root);
  let h: DriverHarness | undefined;
  const summary: string[] = [];
  try {
    const kubeconfig = await ul.exposeApi(Number(new URL(server.url).port), server.kubeconfig());
    for (let i = 0; i < 100; i++) server.put("namespaces", namespaceObject(`ns-${i}`));
    server.put("namespaces", namespaceObject(BENCH_NS));
    const started = await startNode({ root, server, ul }, "node-1", 21, 210, kubeconfig);
    h = started.h;
    const b: Bench = { root, server, ul, node: started.node, h, next: 1 };
    await listed(h, 0, 60_000);
    say(
      `bench/network-policy${QUICK ? " (quick)" : ""}: one node, its driver against the fake API server`,
    );
    if (ONLY.has("setup")) summary.push(...(await setupPart(b)));
    if (ONLY.has("change")) summary.push(...(await changePart(b)));
    if (ONLY.has("traffic")) summary.push(...(await trafficPart(b)));
    if (ONLY.has("memory")) summary.push(...(await memoryPart(b)));
    say();
    for (const line of summary) say(line);
  } finally {
    await h?.cleanup();
    await ul.cleanup();
    await server.close();
    rmSync(root, { recursive: true, force: true });
  }
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
