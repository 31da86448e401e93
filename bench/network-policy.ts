/**
 * bench/network-policy: what enforcing NetworkPolicy on the kernel datapath
 * costs, each figure against a reference measured in the same run.
 *
 * One "node" (a network namespace on an underlay, test/support/cluster-nodes.ts)
 * runs `cni-driver serve` against the fake API server (test/support/
 * fake-kube-apiserver.ts), which holds the cluster: namespaces, pods of other
 * (fake) nodes with their status.podIPs, and policies. The node's own pods are
 * put into the API before SetUpPod (labels, nodeName, a container port), and
 * get their status.podIPs after it, as kubelet writes them.
 *
 * 1. setup       SetUpPod p50 and p90 at concurrency 1, with 1,000 policies in
 *                the API (10 selecting the pods set up) against none; through
 *                the driver's socket (DriverClient) and through the shim binary
 *                exec'd as a runtime execs it. Rounds alternate none, policies,
 *                policies, none. Goal ≤ 1.2×.
 * 2. change      A policy change to enforcement: 110 pods on the node, 10,000
 *                pods and 1,000 policies in the API; one policy selecting every
 *                pod of the node gets a new port (and, every other time, one more
 *                or one less allowed peer label); the time from the API write to
 *                the first rule with the new port in the node's nftables, as
 *                `nft monitor` in the node reports it (then checked with `nft
 *                list chain`). p50 and p99 over ≥ 50 changes; reference: the same
 *                changes with no other policy. Goal p99 ≤ 200 ms.
 * 3. throughput  Pod-to-pod TCP on the node (iperf3 when installed, else a Node
 *                source and reader in the pods) and new connections a second (a
 *                Node client opening, reading one byte, closing, 8 at a time),
 *                to a server 100 policies select (the one allowing the client
 *                sorted last) and to one no policy selects, in paired rounds
 *                (the median of the rounds' ratios); the control: the same pairs
 *                with `"networkPolicy": false`. A third pod checks that the
 *                policies are in force. Goal ≥ 0.95×.
 * 4. memory      The driver's RSS with 150,000 pods, 10,000 policies and 5,000
 *                namespaces in the API and 110 pods of its own, after it has
 *                listed everything and synced (its log's "listed" lines and its
 *                syncs counter), and the time the initial sync took; against the
 *                same driver with only its own pods and their policies. Goal ≤
 *                250 MiB.
 *
 * The driver is the current sources compiled into a private directory under
 * .tmp/ (tsc without type checking, ~15 s) and run as the image runs them (the
 * shebang's Node flags): dist/ may be stale or rebuilt by others meanwhile.
 * `--driver dist` runs dist/ as it is, `--driver tsx` the sources through tsx.
 *
 * Run as root: `npm run bench:network-policy` (about 8 minutes on 2 cores);
 * `-- --quick` for smaller sizes (about 2 minutes); `-- --only setup,change`
 * (setup, change, throughput, memory) for some parts; more options in
 * bench/README.md. Everything it makes carries a random tag and is removed at
 * the end, also after a failure or Ctrl-C. Exit status 0 when everything ran,
 * whatever the figures; 1 when something failed; 130 when interrupted.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import http from "node:http";
import { availableParallelism, cpus, release } from "node:os";
import { join } from "node:path";
import { hostVethName, podVethKey } from "../src/midonet/host-veth-name.js";
import type { PodRequest } from "../src/wire/types.js";
import { ClusterUnderlay, type TestNode } from "../test/support/cluster-nodes.js";
import {
  type DriverCommand,
  DriverHarness,
  type HarnessOptions,
  REPO_ROOT,
  sleep,
} from "../test/support/driver-harness.js";
import {
  type FakeKubeApiServer,
  type FakeResource,
  type KubeObject,
  startFakeKubeApiServer,
} from "../test/support/fake-kube-apiserver.js";
import { execInNetns, uniqueTag } from "../test/support/netns.js";
import { startNetnsScript } from "../test/support/pod-server.js";
import { newestMtime, SHIM_BINARY, SHIM_TYPE } from "../test/support/runtimes.js";
import {
  CALL_TIMEOUT_MS,
  CNI_VERSION,
  execPath,
  execWithStdin,
  fmt,
  inParallel,
  ipBatch,
  option,
  percentile,
  printColumns,
  processCpuMs,
  runtimeBaseEnv,
  say,
} from "./common.js";
import { clusterPodLabels, clusterPolicy, namespaceObject, nsName } from "./policy-cluster.js";

// ---------------------------------------------------------------------------
// Options and sizes

const argv = process.argv.slice(2);
const QUICK = argv.includes("--quick");
const PARTS = ["setup", "change", "throughput", "memory"] as const;
type Part = (typeof PARTS)[number];
const DRIVER_MODES = ["build", "dist", "tsx"] as const;
type DriverMode = (typeof DRIVER_MODES)[number];

function parseOnly(raw: string | undefined): Set<Part> {
  if (!raw) return new Set(PARTS);
  const out = new Set<Part>();
  for (const w of raw.split(",").map((s) => s.trim())) {
    const part = w === "traffic" ? "throughput" : w;
    if (!(PARTS as readonly string[]).includes(part))
      throw new Error(`--only: ${JSON.stringify(w)} is none of ${PARTS.join(", ")}`);
    out.add(part as Part);
  }
  return out;
}

const SIZES = QUICK
  ? {
      namespaces: 20,
      apiPods: 2_000,
      policies: 200,
      setupPods: 8,
      localPods: 30,
      changes: 20,
      seconds: 1,
      trafficRounds: 4,
      memNamespaces: 500,
      memPods: 15_000,
      memPolicies: 1_000,
      memLocalPods: 30,
    }
  : {
      namespaces: 100,
      apiPods: 10_000,
      policies: 1_000,
      setupPods: 20,
      localPods: 110,
      changes: 60,
      seconds: 2,
      trafficRounds: 10,
      memNamespaces: 5_000,
      memPods: 150_000,
      memPolicies: 10_000,
      memLocalPods: 110,
    };
/** Policies of the node pods' namespace that select them (part of SIZES.policies). */
const SELECTING = 10;
/** Policies selecting the throughput server, the last one allowing the client. */
const TRAFFIC_POLICIES = 100;
/** Fake nodes the API's other pods are spread over. */
const FAKE_NODES = 500;
const MEM_FAKE_NODES = 5_000;
const CONN_CONCURRENCY = 8;
/** The connection client's turns between the two destinations of a round. */
const CONN_SLICE_MS = 100;
/** After the work stops and before a memory figure is read (the driver collects 2 s after its last call). */
const MEM_SETTLE_MS = 8_000;
/** Bound on one change reaching the node's nftables before it counts as not enforced. */
const CHANGE_BOUND_MS = 10_000;

/** `--cpu-prof DIR`: the driver writes a V8 CPU profile there when it exits (each start, one file). */
const CPU_PROF_DIR = option(argv, "--cpu-prof");
/** `--driver-log FILE`: the driver's log (all its starts) written there at the end; `--log-level` its level (default info). */
const DRIVER_LOG = option(argv, "--driver-log");
const DRIVER_LOG_LEVEL = option(argv, "--log-level") ?? "info";

const GOALS = { setupRatio: 1.2, changeP99Ms: 200, trafficRatio: 0.95, rssMiB: 250 };

const TAG = uniqueTag();
const WEB_NS = "web";
const TP_NS = "tp";
const CLUSTER_CIDR = "10.0.0.0/8";
const NODE_NAME = "node-1";
const NODE_OCTET = 21;
const SUBNET_OCTET = 231;
/** The throughput pods' ports: the Node sink, the one-byte answer, iperf3's server. */
const SINK_PORT = 5201;
const ANSWER_PORT = 5202;
const IPERF_PORT = 5203;
const POLICY_TABLE = "inet cni-driver-policy";
const SYNCS_METRIC = "cni_driver_network_policy_syncs_total";

// ---------------------------------------------------------------------------
// The cluster's objects: realistic, small

/** Pod j of another node: 10.64.0.0 onwards, far from the node's 10.244.x.0/24. */
function remotePodIp(j: number): string {
  return `10.${64 + (j >> 16)}.${(j >> 8) & 255}.${j & 255}`;
}

function podObject(
  namespace: string,
  name: string,
  labels: Record<string, string>,
  node: string,
  ip?: string,
): KubeObject {
  return {
    metadata: { namespace, name, labels },
    spec: {
      nodeName: node,
      containers: [
        {
          name: "main",
          image: "registry.k8s.io/pause:3.9",
          ports: [{ name: "http", containerPort: 8080, protocol: "TCP" }],
        },
      ],
    },
    ...(ip ? { status: { phase: "Running", podIP: ip, podIPs: [{ ip }] } } : {}),
  };
}

function remotePod(j: number, namespaces: number, fakeNodes: number): KubeObject {
  return podObject(
    nsName(j % namespaces),
    `r-${j}`,
    clusterPodLabels(j),
    `fake-${j % fakeNodes}`,
    remotePodIp(j),
  );
}

/** Policy k of the node pods' namespace: selects them (app web or tier web), peers of all kinds. */
function webPolicy(k: number): KubeObject {
  const from = [
    [
      {
        namespaceSelector: { matchLabels: { team: `t${k % 10}` } },
        podSelector: { matchLabels: { app: `a${k % 50}` } },
      },
    ],
    [{ namespaceSelector: { matchLabels: { team: `t${(k + 3) % 10}` } } }],
    [{ ipBlock: { cidr: "10.64.0.0/16", except: ["10.64.3.0/24"] } }, { podSelector: {} }],
  ][k % 3];
  const egress =
    k % 4 === 0
      ? [
          {
            to: [
              {
                namespaceSelector: {},
                podSelector: { matchLabels: { app: `a${(k + 5) % 50}` } },
              },
            ],
            ports: [
              { protocol: "TCP", port: "http" },
              { protocol: "TCP", port: 5432 },
            ],
          },
          {
            ports: [
              { protocol: "UDP", port: 53 },
              { protocol: "TCP", port: 53 },
            ],
          },
        ]
      : undefined;
  return {
    metadata: { namespace: WEB_NS, name: `web-${k}` },
    spec: {
      podSelector:
        k % 2 === 0
          ? { matchLabels: { app: "web" } }
          : { matchExpressions: [{ key: "tier", operator: "In", values: ["web", "api"] }] },
      policyTypes: egress ? ["Ingress", "Egress"] : ["Ingress"],
      ingress: [
        {
          from,
          ports: [
            { protocol: "TCP", port: 8080 },
            { protocol: "TCP", port: "http" },
          ],
        },
      ],
      ...(egress ? { egress } : {}),
    },
  };
}

/** The policy part 2 changes: every pod of the node, from a1 pods anywhere (and a2, when `extraPeer`). */
function changingPolicy(port: number, extraPeer: boolean): KubeObject {
  const peer = (app: string) => ({ namespaceSelector: {}, podSelector: { matchLabels: { app } } });
  return {
    metadata: { namespace: WEB_NS, name: "changing" },
    spec: {
      podSelector: { matchLabels: { app: "web" } },
      policyTypes: ["Ingress"],
      ingress: [
        {
          from: extraPeer ? [peer("a1"), peer("a2")] : [peer("a1")],
          ports: [{ protocol: "TCP", port }],
        },
      ],
    },
  };
}

/** Throughput: policy k of TRAFFIC_POLICIES selects the server; the last (sorted last) allows the client. */
function trafficPolicy(k: number): KubeObject {
  if (k === TRAFFIC_POLICIES - 1)
    return {
      metadata: { namespace: TP_NS, name: "zz-allow-client" },
      spec: {
        podSelector: { matchLabels: { app: "tp-server" } },
        policyTypes: ["Ingress"],
        ingress: [
          {
            from: [{ podSelector: { matchLabels: { app: "tp-client" } } }],
            ports: [
              { protocol: "TCP", port: SINK_PORT },
              { protocol: "TCP", port: ANSWER_PORT },
              { protocol: "TCP", port: IPERF_PORT },
            ],
          },
        ],
      },
    };
  return {
    metadata: { namespace: TP_NS, name: `p-${String(k).padStart(3, "0")}` },
    spec: {
      podSelector: { matchLabels: { app: "tp-server" } },
      policyTypes: ["Ingress"],
      ingress: [
        {
          from: [
            {
              namespaceSelector: { matchLabels: { team: `t${k % 10}` } },
              podSelector: { matchLabels: { app: `a${k % 50}` } },
            },
          ],
          ports: [{ protocol: "TCP", port: 9000 + k }],
        },
      ],
    },
  };
}

function putNamespaces(server: FakeKubeApiServer, count: number): void {
  for (let i = 0; i < count; i++) server.put("namespaces", namespaceObject(nsName(i), i));
  server.put("namespaces", namespaceObject(WEB_NS, 1000));
  server.put("namespaces", namespaceObject(TP_NS, 1001));
}

function putRemotePods(
  server: FakeKubeApiServer,
  count: number,
  namespaces: number,
  fakeNodes: number,
): void {
  for (let j = 0; j < count; j++) server.put("pods", remotePod(j, namespaces, fakeNodes));
}

/** `count` policies: SELECTING in the node pods' namespace, the rest spread over the namespaces. */
function putPolicies(server: FakeKubeApiServer, count: number, namespaces: number): void {
  for (let k = 0; k < Math.min(SELECTING, count); k++) server.put("networkpolicies", webPolicy(k));
  for (let k = SELECTING; k < count; k++)
    server.put("networkpolicies", clusterPolicy(k, namespaces));
}

function removeAll(
  server: FakeKubeApiServer,
  resource: FakeResource,
  keep: (o: KubeObject) => boolean = () => false,
): void {
  for (const o of server.list(resource)) {
    if (keep(o)) continue;
    server.remove(resource, o.metadata?.namespace, o.metadata?.name ?? "");
  }
}

// ---------------------------------------------------------------------------
// The driver

/** A harness that runs another compiled tree than dist/ (the private build). */
class BenchDriver extends DriverHarness {
  constructor(
    opts: HarnessOptions,
    private readonly cli?: string,
  ) {
    super(opts);
  }

  /** The logs of the starts before this one (the harness keeps the current start's). */
  earlierLogs = "";

  override async start(opts: { waitReady?: boolean } = {}): Promise<void> {
    this.earlierLogs += this.logs;
    await super.start(opts);
  }

  override serveCommand(dirs: Parameters<DriverHarness["serveCommand"]>[0] = {}): DriverCommand {
    const c = super.serveCommand(dirs);
    const dist = join(REPO_ROOT, "dist/src/driver/cli.js");
    const entry = c.args.findIndex((a) => a === dist || a === "--import");
    const args = c.args.map((a) => (a === dist && this.cli ? this.cli : a));
    if (CPU_PROF_DIR) args.splice(entry, 0, "--cpu-prof", `--cpu-prof-dir=${CPU_PROF_DIR}`);
    return { ...c, args };
  }
}

/** The current sources compiled under `dir` (no type check: what others have half-edited still runs as it is). */
function buildDriver(dir: string): string {
  mkdirSync(dir, { recursive: true });
  const config = join(dir, "tsconfig.json");
  writeFileSync(
    config,
    JSON.stringify({
      extends: join(REPO_ROOT, "tsconfig.json"),
      compilerOptions: {
        outDir: join(dir, "dist"),
        rootDir: REPO_ROOT,
        noCheck: true,
        sourceMap: false,
        types: ["node"],
      },
      include: [join(REPO_ROOT, "src/**/*.ts")],
    }),
  );
  // proto-path.ts finds the proto next to the tree's dist/.
  symlinkSync(join(REPO_ROOT, "proto"), join(dir, "proto"));
  const tsc = join(REPO_ROOT, "node_modules/typescript/bin/tsc");
  const r = spawnSync(process.execPath, [tsc, "-p", config], {
    encoding: "utf8",
    timeout: 600_000,
  });
  const cli = join(dir, "dist/src/driver/cli.js");
  if (!existsSync(cli))
    throw new Error(`compiling the driver failed: ${r.stdout}${r.stderr}${r.error ?? ""}`);
  return cli;
}

/** The shim: dist/bin's when it is newer than its sources, else built into `dir`; undefined (and why) when it cannot be. */
function findShim(dir: string): { path?: string; why?: string } {
  const sources = Math.max(
    newestMtime(join(REPO_ROOT, "src/remote-plugin-shim")),
    newestMtime(join(REPO_ROOT, "scripts/build-shim.sh")),
  );
  if (existsSync(SHIM_BINARY) && statSync(SHIM_BINARY).mtimeMs >= sources)
    return { path: SHIM_BINARY };
  const out = join(dir, "cni-driver-shim");
  const r = spawnSync("bash", [join(REPO_ROOT, "scripts/build-shim.sh"), out], {
    cwd: REPO_ROOT,
    encoding: "utf8",
    timeout: 300_000,
  });
  if (r.status === 0 && existsSync(out)) return { path: out };
  return { why: `scripts/build-shim.sh failed: ${(r.stderr || String(r.error)).trim()}` };
}

interface Ctx {
  server: FakeKubeApiServer;
  ul: ClusterUnderlay;
  node: TestNode;
  h: BenchDriver;
  shim?: string;
  shimWhy?: string;
  /** Pod ids, unique in the run. */
  seq: number;
  failures: string[];
  /** Processes to kill at the end whatever happens. */
  children: Set<ChildProcess>;
}

function driverJson(networkPolicy = true): string {
  return JSON.stringify({ crossNode: "none", clusterCidr: CLUSTER_CIDR, networkPolicy });
}

async function configure(h: DriverHarness, networkPolicy = true): Promise<void> {
  await h.writeConfig({
    "pod-network.conflist": JSON.stringify(h.conflist()),
    "driver.json": driverJson(networkPolicy),
  });
}

/** A command in the node's namespace. */
function inNode(ctx: Ctx, cmd: string[], timeoutMs = 10_000) {
  return execInNetns(ctx.node.netns, cmd, timeoutMs);
}

/** The driver's /metrics, read from inside the node (its health address is the node's loopback). */
function metricSum(ctx: Ctx, name: string): number | undefined {
  const addr = ctx.h.healthAddress;
  if (!addr) return undefined;
  const r = inNode(ctx, ["curl", "-s", "--max-time", "3", `http://${addr}/metrics`], 5000);
  if (r.status !== 0) return undefined;
  let sum: number | undefined;
  for (const line of r.stdout.split("\n")) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    sum = (sum ?? 0) + Number(line.slice(line.lastIndexOf(" ") + 1));
  }
  return sum;
}

/**
 * Until the driver has stopped syncing: its syncs counter unchanged over
 * `quietMs` (bounded by `boundMs`). Answers the counter and when it was last
 * seen to change (performance.now(); when the first read started if it never did).
 */
async function waitQuiet(
  ctx: Ctx,
  quietMs = 600,
  boundMs = 120_000,
): Promise<{ syncs: number; changedAt: number }> {
  const deadline = performance.now() + boundMs;
  // Before the first read: a count already final was reached by then (the first scrape can be slow).
  let since = performance.now();
  let last = metricSum(ctx, SYNCS_METRIC);
  for (let i = 0; i < 100_000 && performance.now() < deadline; i++) {
    await sleep(150);
    if (!ctx.h.running) throw new Error(`the driver exited: ${ctx.h.logs.slice(-2000)}`);
    const now = metricSum(ctx, SYNCS_METRIC);
    if (now !== last) {
      last = now;
      since = performance.now();
    } else if (now !== undefined && performance.now() - since >= quietMs)
      return { syncs: now, changedAt: since };
  }
  throw new Error(`the driver kept syncing (or its metrics were unreadable) for ${boundMs} ms`);
}

interface ListedLine {
  kind: string;
  at: number;
}

/** The driver's "listed" lines since its start, with their times (ms since the epoch). */
function listedLines(h: DriverHarness): ListedLine[] {
  const out: ListedLine[] = [];
  for (const line of h.logs.split("\n")) {
    if (!line.includes('"msg":"listed"')) continue;
    try {
      const o = JSON.parse(line) as { kind?: string; time?: string };
      out.push({ kind: o.kind ?? "?", at: Date.parse(o.time ?? "") });
    } catch {
      // A line cut short: read again next poll.
    }
  }
  return out;
}

/** Until the driver has listed pods, namespaces and policies (bounded); their lines. */
async function waitListed(h: DriverHarness, boundMs: number): Promise<ListedLine[]> {
  const deadline = performance.now() + boundMs;
  for (let i = 0; i < 100_000 && performance.now() < deadline; i++) {
    const lines = listedLines(h);
    if (new Set(lines.map((l) => l.kind)).size >= 3) return lines;
    if (!h.running) break;
    await sleep(50);
  }
  throw new Error(
    `the driver did not list pods, namespaces and policies in ${boundMs} ms; its log:\n${h.logs.slice(-3000)}`,
  );
}

/** The nftables backend the driver said it uses. */
function nftBackend(h: DriverHarness): string {
  return /"nftables":"([a-z]+)"/.exec(h.logs)?.[1] ?? "?";
}

function status(pid: number): { rssMiB: number; hwmMiB: number } {
  const s = readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+) kB$`, "m").exec(s)?.[1]);
  return { rssMiB: kb("VmRSS") / 1024, hwmMiB: kb("VmHWM") / 1024 };
}

// ---------------------------------------------------------------------------
// The node's pods

interface LocalPod {
  id: string;
  namespace: string;
  name: string;
  labels: Record<string, string>;
  containerId: string;
  netns: string;
  netnsPath: string;
  hostIf: string;
  ip?: string;
  /** How it was set up, while it is. */
  via?: "socket" | "shim";
}

/**
 * `count` pods of the node: their Pod objects in the API (as the scheduler
 * leaves them, before kubelet sets them up) and their network namespaces.
 */
function makeLocalPods(
  ctx: Ctx,
  namespace: string,
  labels: Record<string, string>,
  count: number,
): LocalPod[] {
  const pods: LocalPod[] = [];
  for (let i = 0; i < count; i++) {
    const id = String(ctx.seq++);
    const name = `${labels.app ?? "pod"}-${TAG}-${id}`;
    const containerId = ctx.h.containerId(id);
    pods.push({
      id,
      namespace,
      name,
      labels,
      containerId,
      netns: ctx.h.netnsName(id),
      netnsPath: ctx.h.netnsPath(id),
      hostIf: hostVethName(podVethKey({ namespace, name }, containerId, "eth0")),
    });
  }
  ipBatch(pods.map((p) => `netns add ${p.netns}`));
  for (const p of pods) ctx.server.put("pods", podObject(p.namespace, p.name, p.labels, NODE_NAME));
  return pods;
}

function socketRequest(p: LocalPod): Partial<PodRequest> {
  return {
    pod: { namespace: p.namespace, name: p.name, uid: "" },
    container_id: p.containerId,
    netns: p.netnsPath,
    ifname: "eth0",
  };
}

function shimConfig(ctx: Ctx): string {
  return JSON.stringify({
    cniVersion: CNI_VERSION,
    name: "bench-np-shim",
    type: SHIM_TYPE,
    socket: ctx.h.socket,
    stateDir: ctx.h.stateDir,
    timeoutSeconds: 120,
  });
}

function shimEnv(command: "ADD" | "DEL", p: LocalPod): NodeJS.ProcessEnv {
  return {
    ...runtimeBaseEnv(),
    CNI_COMMAND: command,
    CNI_CONTAINERID: p.containerId,
    CNI_NETNS: p.netnsPath,
    CNI_IFNAME: "eth0",
    CNI_ARGS: `IgnoreUnknown=1;K8S_POD_NAMESPACE=${p.namespace};K8S_POD_NAME=${p.name};K8S_POD_INFRA_CONTAINER_ID=${p.containerId}`,
    CNI_PATH: "/usr/lib/cni",
  };
}

/** SetUpPod (through the socket or the shim), timed; then its address in the API, as kubelet writes it (untimed). */
async function setUp(ctx: Ctx, p: LocalPod, via: "socket" | "shim"): Promise<number> {
  const t0 = performance.now();
  let ip: string;
  if (via === "socket") {
    const res = await ctx.h.client.setUpPod(socketRequest(p), { timeoutMs: CALL_TIMEOUT_MS });
    if (res.error)
      throw new Error(`SetUpPod ${p.name}: CNI error ${res.error.code}: ${res.error.msg}`);
    ip = (res.result?.ips[0]?.address ?? "").split("/")[0] as string;
  } else {
    const out = await execWithStdin(ctx.shim as string, shimEnv("ADD", p), shimConfig(ctx));
    if (out.code !== 0)
      throw new Error(`shim ADD ${p.name}: exit ${out.code}: ${out.stdout}${out.stderr}`);
    const result = JSON.parse(out.stdout) as { ips?: Array<{ address: string }> };
    ip = (result.ips?.[0]?.address ?? "").split("/")[0] as string;
  }
  const ms = performance.now() - t0;
  p.via = via;
  p.ip = ip;
  ctx.server.put("pods", podObject(p.namespace, p.name, p.labels, NODE_NAME, ip));
  return ms;
}

async function tearDown(ctx: Ctx, p: LocalPod): Promise<void> {
  if (!p.via) return;
  if (p.via === "socket") {
    const res = await ctx.h.client.tearDownPod(socketRequest(p), { timeoutMs: CALL_TIMEOUT_MS });
    if (res.error) throw new Error(`TearDownPod ${p.name}: ${res.error.msg}`);
  } else {
    const out = await execWithStdin(ctx.shim as string, shimEnv("DEL", p), shimConfig(ctx));
    if (out.code !== 0) throw new Error(`shim DEL ${p.name}: exit ${out.code}: ${out.stderr}`);
  }
  p.via = undefined;
}

/** Tears the pods down (a failure noted, never thrown), removes their Pod objects and namespaces. */
async function releasePods(ctx: Ctx, pods: readonly LocalPod[], concurrency = 4): Promise<void> {
  await inParallel(
    pods,
    concurrency,
    async (p) => {
      try {
        await tearDown(ctx, p);
      } catch (err) {
        ctx.failures.push(String(err));
      }
      ctx.server.remove("pods", p.namespace, p.name);
    },
    () => stopping,
  );
  try {
    ipBatch(pods.map((p) => `netns del ${p.netns}`));
  } catch {
    // What is left goes with the harness's cleanup (by prefix).
  }
}

/** `nft list chain` of one of the node's policy chains; "" when it does not exist. */
function listChain(ctx: Ctx, chain: string): string {
  const r = inNode(ctx, ["nft", "list", "chain", ...POLICY_TABLE.split(" "), chain]);
  return r.status === 0 ? r.stdout : "";
}

/** The chain a pod's ingress verdict jumps to (pods the same rules apply to share it), listed; "" when none. */
function podIngressChain(ctx: Ctx, ip: string): string {
  const r = inNode(ctx, ["nft", "list", "map", ...POLICY_TABLE.split(" "), "ingress4"]);
  const escaped = ip.replaceAll(".", "\\.");
  const chain = new RegExp(`\\b${escaped} : jump ([\\w-]+)`).exec(r.stdout)?.[1];
  return r.status === 0 && chain ? listChain(ctx, chain) : "";
}

/** The rule chains a pod chain reaches: its jumps, in its port map too, and through `q_` chains. */
function ruleChainsOf(ctx: Ctx, podChain: string): string[] {
  const jumps = (text: string, prefix: string) =>
    [...text.matchAll(new RegExp(`jump (${prefix}_\\w+)`, "g"))].map((m) => m[1] as string);
  const fanned = jumps(podChain, "q").flatMap((q) => jumps(listChain(ctx, q), "r"));
  return [...new Set([...jumps(podChain, "r"), ...fanned])];
}

/** A pod's ingress chain and the rule chains it reaches, listed one after the other. */
function listIngress(ctx: Ctx, ip: string): string {
  const own = podIngressChain(ctx, ip);
  return [own, ...ruleChainsOf(ctx, own).map((c) => listChain(ctx, c))].join("\n");
}

// ---------------------------------------------------------------------------
// 1. SetUpPod with 1,000 policies

type SetupSide = "none" | "policies";
type Via = "socket" | "shim";

async function setupPart(ctx: Ctx): Promise<string[]> {
  const vias: Via[] = ctx.shim ? ["socket", "shim"] : ["socket"];
  say(
    `setup: SetUpPod at c=1, ${SIZES.setupPods} pods a round per path (${vias.join(", ")}), first of each not counted; rounds ${SIZES.policies} policies (warm-up, not counted), none, ${SIZES.policies} policies, ${SIZES.policies} policies, none`,
  );
  if (!ctx.shim) say(`  (no shim: ${ctx.shimWhy})`);
  const samples = new Map<string, number[]>();
  const key = (side: SetupSide, via: Via) => `${side}/${via}`;
  // The first round warms up what a driver that has run a while has warm: V8 compiles the
  // policy paths over their first hundred syncs (a cold round measured 1.3-1.4x a warm one).
  for (const [side, counted] of [
    ["policies", false],
    ["none", true],
    ["policies", true],
    ["policies", true],
    ["none", true],
  ] as const) {
    if (stopping) break;
    removeAll(ctx.server, "networkpolicies");
    if (side === "policies") putPolicies(ctx.server, SIZES.policies, SIZES.namespaces);
    await waitQuiet(ctx);
    const pods = makeLocalPods(
      ctx,
      WEB_NS,
      { app: "web", tier: "web" },
      SIZES.setupPods * vias.length,
    );
    try {
      // The pod watch has them, as it would well before kubelet starts a sandbox.
      await sleep(300);
      for (let i = 0; i < pods.length && !stopping; i++) {
        const p = pods[i] as LocalPod;
        const via = vias[i % vias.length] as Via;
        const ms = await setUp(ctx, p, via);
        if (i < vias.length) {
          // Not counted: the first of each path. Checked: the policies are (or are not) on it.
          const chain = podIngressChain(ctx, p.ip as string);
          if ((side === "policies") !== chain.includes("drop"))
            ctx.failures.push(
              `setup ${side}: pod ${p.name} ${chain ? "has" : "has no"} ingress chain`,
            );
          continue;
        }
        if (counted) samples.set(key(side, via), [...(samples.get(key(side, via)) ?? []), ms]);
      }
    } finally {
      await releasePods(ctx, pods);
    }
  }
  removeAll(ctx.server, "networkpolicies");
  const rows: string[][] = [];
  const out: string[] = [];
  for (const via of vias) {
    const none = samples.get(key("none", via)) ?? [];
    const pol = samples.get(key("policies", via)) ?? [];
    for (const [label, s] of [
      ["no policy", none],
      [`${SIZES.policies} policies (${SELECTING} select the pod)`, pol],
    ] as const)
      rows.push([
        `${via}: ${label}`,
        fmt(percentile(s, 50), 2),
        fmt(percentile(s, 90), 2),
        fmt(percentile(s, 99), 2),
        String(s.length),
      ]);
    const r50 = percentile(pol, 50) / percentile(none, 50);
    const r90 = percentile(pol, 90) / percentile(none, 90);
    rows.push([`${via}: ratio`, `${fmt(r50, 2)}×`, `${fmt(r90, 2)}×`, "", ""]);
    out.push(
      `SetUpPod p50 (${via}) with ${SIZES.policies} policies / none: ${fmt(r50, 2)}× (p90 ${fmt(r90, 2)}×); goal ≤ ${GOALS.setupRatio}×: ${verdict(r50 <= GOALS.setupRatio)}`,
    );
  }
  printColumns(["SetUpPod at c=1 (ms)", "p50", "p90", "p99", "samples"], rows);
  say();
  return out;
}

// ---------------------------------------------------------------------------
// 2. A policy change to enforcement

/** `nft monitor` in the node: the time (performance.now()) the first line matching a pattern came. */
class NftMonitor {
  private readonly child: ChildProcess;
  private rest = "";
  private waiter: { re: RegExp; resolve(t: number): void } | undefined;

  constructor(
    ns: string,
    private readonly children: Set<ChildProcess>,
  ) {
    this.child = spawn("ip", ["netns", "exec", ns, "nft", "monitor"], {
      stdio: ["ignore", "pipe", "ignore"],
    });
    children.add(this.child);
    this.child.stdout?.on("data", (buf: Buffer) => {
      const now = performance.now();
      const lines = (this.rest + buf.toString()).split("\n");
      this.rest = lines.pop() ?? "";
      const w = this.waiter;
      if (w && lines.some((l) => w.re.test(l))) {
        this.waiter = undefined;
        w.resolve(now);
      }
    });
  }

  /** The time of the first line matching `re` from now on; undefined after `boundMs`. */
  next(re: RegExp, boundMs: number): Promise<number | undefined> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.waiter = undefined;
        resolve(undefined);
      }, boundMs);
      this.waiter = {
        re,
        resolve: (t) => {
          clearTimeout(timer);
          resolve(t);
        },
      };
    });
  }

  stop(): void {
    if (this.child.exitCode === null) this.child.kill("SIGKILL");
    this.children.delete(this.child);
  }
}

const portPattern = (port: number) => new RegExp(`dport (\\{ )?(\\d+, )*${port}\\b`);

/** `count` changes of the changing policy, each timed from the API write to the node's nftables. */
/** Port only, and port with one more or one less allowed peer label (its peer set changes). */
interface ChangeTimes {
  port: number[];
  peer: number[];
}

/** Whether the changing policy at `port` also allows a2 pods: ports 4n+1 add them, 4n+3 take them away. */
const withA2 = (port: number) => port % 4 === 1 || port % 4 === 2;

async function changeBlock(
  ctx: Ctx,
  probe: LocalPod,
  count: number,
  next: { port: number },
): Promise<ChangeTimes> {
  const monitor = new NftMonitor(ctx.node.netns, ctx.children);
  const times: ChangeTimes = { port: [], peer: [] };
  try {
    await sleep(300);
    for (let i = 0; i < count && !stopping; i++) {
      const port = next.port++;
      const re = portPattern(port);
      const seen = monitor.next(re, CHANGE_BOUND_MS);
      const t0 = performance.now();
      ctx.server.put("networkpolicies", changingPolicy(port, withA2(port)));
      const t1 = await seen;
      if (t1 === undefined) {
        ctx.failures.push(
          `change to port ${port}: not in the node's nftables after ${CHANGE_BOUND_MS} ms`,
        );
        continue;
      }
      times[withA2(port) !== withA2(port - 1) ? "peer" : "port"].push(t1 - t0);
      // What the monitor said is what the chain has (untimed, bounded).
      let ok = false;
      for (let k = 0; k < 50 && !ok; k++) {
        ok = re.test(listIngress(ctx, probe.ip as string));
        if (!ok) await sleep(100);
      }
      if (!ok)
        ctx.failures.push(`change to port ${port}: the monitor saw it, the chain has it not`);
      // Let the sync's connection cut and the counters settle; jitter against phase-locking.
      await sleep(120 + Math.random() * 80);
    }
  } finally {
    monitor.stop();
  }
  return times;
}

async function changePart(ctx: Ctx): Promise<string[]> {
  say(
    `change: ${SIZES.localPods} pods on the node, ${SIZES.apiPods} pods in the API; one policy selecting every pod of the node changes port (every other time also adding or removing an allowed peer label), ${SIZES.changes} changes a side in blocks (ref, full, full, ref)`,
  );
  removeAll(ctx.server, "networkpolicies");
  const next = { port: 20_000 };
  ctx.server.put("networkpolicies", changingPolicy(next.port, withA2(next.port)));
  next.port++;
  const pods = makeLocalPods(ctx, WEB_NS, { app: "web", tier: "web" }, SIZES.localPods);
  const results: Record<"ref" | "full", ChangeTimes> = {
    ref: { port: [], peer: [] },
    full: { port: [], peer: [] },
  };
  let setupS = 0;
  try {
    await sleep(300);
    const t0 = performance.now();
    await inParallel(
      pods,
      4,
      (p) => setUp(ctx, p, "socket"),
      () => stopping,
    );
    setupS = (performance.now() - t0) / 1000;
    const probe = pods[0] as LocalPod;
    const half = Math.ceil(SIZES.changes / 2);
    for (const side of ["ref", "full", "full", "ref"] as const) {
      if (stopping) break;
      removeAll(ctx.server, "networkpolicies", (o) => o.metadata?.name === "changing");
      if (side === "full") putPolicies(ctx.server, SIZES.policies - 1, SIZES.namespaces);
      await waitQuiet(ctx);
      const got = await changeBlock(ctx, probe, half, next);
      results[side].port.push(...got.port);
      results[side].peer.push(...got.peer);
    }
  } finally {
    removeAll(ctx.server, "networkpolicies");
    await releasePods(ctx, pods);
  }
  say(`  (${SIZES.localPods} pods set up 4 at a time in ${fmt(setupS, 1)} s)`);
  const row = (label: string, s: number[]) => [
    label,
    fmt(percentile(s, 50)),
    fmt(percentile(s, 90)),
    fmt(percentile(s, 99)),
    fmt(Math.max(...s)),
    String(s.length),
  ];
  printColumns(
    ["policy change → node's nftables (ms)", "p50", "p90", "p99", "max", "changes"],
    (["ref", "full"] as const).flatMap((side) => {
      const label =
        side === "ref"
          ? "reference: no other policy"
          : `${SIZES.policies} policies, ${SIZES.apiPods} pods`;
      const r = results[side];
      return [
        row(`${label}: every change`, [...r.port, ...r.peer]),
        row("  port only", r.port),
        row("  port and a peer label", r.peer),
      ];
    }),
  );
  say();
  const all = (side: "ref" | "full") => [...results[side].port, ...results[side].peer];
  const p99 = percentile(all("full"), 99);
  return [
    `policy change to enforcement with ${SIZES.policies} policies: p50 ${fmt(percentile(all("full"), 50))} ms, p99 ${fmt(p99)} ms (port only p99 ${fmt(percentile(results.full.port, 99))}, with a peer label ${fmt(percentile(results.full.peer, 99))}; reference p50 ${fmt(percentile(all("ref"), 50))}, p99 ${fmt(percentile(all("ref"), 99))} ms); goal p99 ≤ ${GOALS.changeP99Ms} ms: ${verdict(p99 <= GOALS.changeP99Ms)}`,
  ];
}

// ---------------------------------------------------------------------------
// 3. Throughput and connections per second

function nodeEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  delete env.NODE_EXTRA_CA_CERTS;
  delete env.NODE_OPTIONS;
  return env;
}

function iperf3Path(): string | undefined {
  const r = spawnSync("sh", ["-c", "command -v iperf3"], { encoding: "utf8" });
  return r.stdout.trim() || undefined;
}

/** The server pod's listeners: a sink answering with the bytes it got, and a one-byte answer. */
/**
 * The server pods' listeners: a source that sends as fast as the connection
 * takes (one buffer, written again and again), and a one-byte answer.
 */
const SERVER_SCRIPT = `const net = require("node:net"); let up = 0;
  const ready = () => { if (++up === 2) console.log("listening"); };
  const chunk = Buffer.alloc(256 * 1024, 7);
  net.createServer((s) => { s.on("error", () => {}); const pump = () => { while (s.write(chunk)) {} };
    s.on("drain", pump); pump(); }).listen(${SINK_PORT}, "0.0.0.0", ready);
  net.createServer((s) => { s.on("error", () => {}); s.end("x"); }).listen(${ANSWER_PORT}, "0.0.0.0", ready);`;

/**
 * Clients on CPU 0, servers on CPU 1 (taskset, with 2 cores or more; `--no-pin`
 * leaves them to the scheduler): where the two ends land otherwise changes
 * from one measure to the next and swamps what is measured.
 */
const PIN =
  !argv.includes("--no-pin") &&
  availableParallelism() >= 2 &&
  spawnSync("sh", ["-c", "command -v taskset"]).status === 0;

function runInNetns(ns: string, script: string, timeoutMs: number) {
  const cmd = ["ip", "netns", "exec", ns, process.execPath, "-e", script];
  return spawnSync(PIN ? "taskset" : (cmd[0] as string), PIN ? ["-c", "0", ...cmd] : cmd.slice(1), {
    encoding: "utf8",
    timeout: timeoutMs,
    env: nodeEnv(),
  });
}

/**
 * Gbit/s of one TCP connection from `fromNs` to the source at `address`, the
 * bytes counted in one reused buffer (no allocation per read), for `seconds`
 * from the connection's establishment. The data flows server to client: the
 * connection's first packet meets the server's policy, and every packet after
 * it, either way, the forward chain's established rule.
 */
function nodeGbits(fromNs: string, address: string, seconds: number): number {
  const script = `const net = require("node:net"); let bytes = 0; let t0 = 0n;
    const s = net.connect({ port: ${SINK_PORT}, host: ${JSON.stringify(address)},
      onread: { buffer: Buffer.allocUnsafe(1 << 20), callback: (n) => { bytes += n; } } });
    s.on("connect", () => { t0 = process.hrtime.bigint(); setTimeout(() => {
      console.log(JSON.stringify({ bytes, secs: Number(process.hrtime.bigint() - t0) / 1e9 })); process.exit(0); }, ${seconds * 1000}); });
    s.on("error", (e) => { console.error(e.message); process.exit(2); });
    setTimeout(() => { console.error("not connected"); process.exit(3); }, ${seconds * 1000 + 15_000});`;
  const r = runInNetns(fromNs, script, seconds * 1000 + 30_000);
  if (r.status !== 0) throw new Error(`TCP client to ${address}: ${r.stderr || r.error}`);
  const o = JSON.parse(r.stdout) as { bytes: number; secs: number };
  return (o.bytes * 8) / o.secs / 1e9;
}

async function iperfGbits(
  ctx: Ctx,
  bin: string,
  fromNs: string,
  toNs: string,
  address: string,
  seconds: number,
): Promise<number> {
  const serve = [
    "ip",
    "netns",
    "exec",
    toNs,
    bin,
    "-s",
    "-1",
    "--forceflush",
    "-p",
    String(IPERF_PORT),
    "-B",
    address,
  ];
  const server = spawn(PIN ? "taskset" : "ip", PIN ? ["-c", "1", ...serve] : serve.slice(1), {
    stdio: ["ignore", "pipe", "ignore"],
  });
  ctx.children.add(server);
  try {
    await new Promise<void>((resolve, reject) => {
      server.stdout?.on("data", (b: Buffer) => {
        if (b.toString().includes("listening")) resolve();
      });
      server.once("exit", (code) => reject(new Error(`iperf3 server exited with ${code}`)));
      setTimeout(() => reject(new Error("iperf3 server not listening after 10 s")), 10_000).unref();
    });
    const run = [
      "ip",
      "netns",
      "exec",
      fromNs,
      bin,
      "-c",
      address,
      "-p",
      String(IPERF_PORT),
      "-t",
      String(seconds),
      "-J",
    ];
    const r = spawnSync(PIN ? "taskset" : "ip", PIN ? ["-c", "0", ...run] : run.slice(1), {
      encoding: "utf8",
      timeout: (seconds + 20) * 1000,
    });
    if (r.status !== 0) throw new Error(`iperf3 to ${address}: ${r.stdout.slice(-300)}`);
    return (JSON.parse(r.stdout).end.sum_received.bits_per_second as number) / 1e9;
  } finally {
    if (server.exitCode === null) server.kill("SIGKILL");
    ctx.children.delete(server);
  }
}

/**
 * New connections a second from `fromNs` to the one-byte answers at two
 * addresses, CONN_CONCURRENCY at a time (each opened, its byte read, closed):
 * one process takes turns between the two every CONN_SLICE_MS (starting with
 * `addresses[0]`), so that both meet the same moments of the machine; each
 * rate is the connections to it over the time it had.
 */
function connectionRates(
  fromNs: string,
  addresses: readonly [string, string],
  seconds: number,
): Array<{ rate: number; failed: number }> {
  const script = `const net = require("node:net"); const to = ${JSON.stringify(addresses)};
    const ok = [0, 0], failed = [0, 0], ms = [0, 0]; let cur = 0, live = ${CONN_CONCURRENCY};
    const t0 = Date.now(); const end = t0 + ${seconds * 1000}; let sliceAt = t0;
    const turn = () => { const now = Date.now(); ms[cur] += now - sliceAt; sliceAt = now; };
    const timer = setInterval(() => { turn(); cur ^= 1; }, ${CONN_SLICE_MS});
    const done = () => { if (--live > 0) return; clearInterval(timer); turn();
      console.log(JSON.stringify({ ok, failed, ms })); process.exit(0); };
    const one = () => { if (Date.now() >= end) return done(); const d = cur; let got = false;
      const s = net.connect(${ANSWER_PORT}, to[d]);
      s.setTimeout(2000, () => s.destroy()); s.on("data", () => { got = true; }); s.on("error", () => {});
      s.on("close", () => { if (got) ok[d]++; else failed[d]++; one(); }); };
    for (let i = 0; i < ${CONN_CONCURRENCY}; i++) one();`;
  const r = runInNetns(fromNs, script, seconds * 1000 + 30_000);
  if (r.status !== 0) throw new Error(`connection client: ${r.stderr || r.error}`);
  const o = JSON.parse(r.stdout) as { ok: number[]; failed: number[]; ms: number[] };
  return [0, 1].map((d) => ({
    rate: (o.ok[d] as number) / ((o.ms[d] as number) / 1000),
    failed: o.failed[d] as number,
  }));
}

/** Whether a connection from `fromNs` to the one-byte answer gets its byte (1.5 s). */
function reaches(fromNs: string, address: string): boolean {
  const script = `const s = require("node:net").connect(${ANSWER_PORT}, ${JSON.stringify(address)});
    s.on("data", () => process.exit(0)); s.on("error", () => process.exit(2)); setTimeout(() => process.exit(3), 1500);`;
  return runInNetns(fromNs, script, 10_000).status === 0;
}

/** One measure of each destination: Gbit/s and new connections a second. */
interface TrafficSample {
  gbit: number;
  cps: number;
  failed: number;
}

/**
 * Paired rounds: each round measures the server that 100 policies select and
 * one that none selects, back to back (in alternating order), so that what
 * else runs on the machine hits both alike; the figure is the median of the
 * rounds' ratios. Then `"networkPolicy": false` (no table at all), a few
 * rounds of the unselected server, for what the table itself costs (not paired).
 */
async function throughputPart(ctx: Ctx): Promise<string[]> {
  const iperf3 = argv.includes("--tcp-node") ? undefined : iperf3Path();
  const seconds = Number(option(argv, "--seconds") ?? SIZES.seconds);
  const rounds = Number(option(argv, "--rounds") ?? SIZES.trafficRounds);
  const tool = iperf3
    ? `iperf3 ${seconds} s`
    : `a Node source and reader, ${seconds} s (iperf3 is not installed: Debian package iperf3)`;
  say(
    `throughput: pod to pod on the node, ${tool}; new connections/s (Node, ${CONN_CONCURRENCY} at a time, ${seconds} s); ${rounds} paired rounds: a server ${TRAFFIC_POLICIES} policies select (the one allowing the client sorted last) and one no policy selects; then ${Math.ceil(rounds / 2)} paired rounds with networkPolicy false (the control: no table, no policy)`,
  );
  removeAll(ctx.server, "networkpolicies");
  const [selected] = makeLocalPods(ctx, TP_NS, { app: "tp-server" }, 1) as [LocalPod];
  const [open] = makeLocalPods(ctx, TP_NS, { app: "tp-open" }, 1) as [LocalPod];
  const [client] = makeLocalPods(ctx, TP_NS, { app: "tp-client" }, 1) as [LocalPod];
  const [intruder] = makeLocalPods(ctx, TP_NS, { app: "tp-intruder" }, 1) as [LocalPod];
  const pods = [selected, open, client, intruder];
  const samples: Record<"selected" | "open" | "off" | "offSelected", TrafficSample[]> = {
    selected: [],
    open: [],
    off: [],
    offSelected: [],
  };
  const listeners: ChildProcess[] = [];
  const gbits = (to: LocalPod): Promise<number> | number =>
    iperf3
      ? iperfGbits(ctx, iperf3, client.netns, to.netns, to.ip as string, seconds)
      : nodeGbits(client.netns, to.ip as string, seconds);
  /** One round: each destination's throughput (in `order`), then both connection rates at once. */
  const round = async (order: readonly [LocalPod, LocalPod]): Promise<TrafficSample[]> => {
    const g = [await gbits(order[0]), await gbits(order[1])];
    const c = connectionRates(
      client.netns,
      [order[0].ip as string, order[1].ip as string],
      seconds,
    );
    return order.map((_, i) => ({
      gbit: g[i] as number,
      cps: (c[i] as { rate: number }).rate,
      failed: (c[i] as { failed: number }).failed,
    }));
  };
  /** Paired rounds, alternating which goes first; the samples of `a` and of `b`, in round order. */
  const pairs = async (
    n: number,
    a: LocalPod,
    b: LocalPod,
    into: [TrafficSample[], TrafficSample[]],
  ) => {
    for (let r = 0; r < n && !stopping; r++) {
      const got = await round(r % 2 === 0 ? [a, b] : [b, a]);
      const [ga, gb] = r % 2 === 0 ? got : [got[1], got[0]];
      into[0].push(ga as TrafficSample);
      into[1].push(gb as TrafficSample);
    }
  };
  try {
    await sleep(300);
    for (const p of pods) await setUp(ctx, p, "socket");
    for (const p of [selected, open]) {
      const l = await startNetnsScript(p.netns, SERVER_SCRIPT);
      listeners.push(l);
      ctx.children.add(l);
      // `ip netns exec` execs Node: the pid is the server's.
      if (PIN) spawnSync("taskset", ["-a", "-p", "-c", "1", String(l.pid)], { stdio: "ignore" });
    }
    for (let k = 0; k < TRAFFIC_POLICIES; k++) ctx.server.put("networkpolicies", trafficPolicy(k));
    await waitQuiet(ctx);
    // In force: the intruder is refused by the selected server, the client passes; the open one takes anyone.
    const check = (from: LocalPod, to: LocalPod, want: boolean, when: string) => {
      if (reaches(from.netns, to.ip as string) !== want)
        ctx.failures.push(
          `throughput (${when}): ${from.labels.app} ${want ? "cannot reach" : "reaches"} ${to.labels.app}`,
        );
    };
    check(client, selected, true, "policies");
    check(intruder, selected, false, "policies");
    check(intruder, open, true, "policies");
    const rules = ruleChainsOf(ctx, podIngressChain(ctx, selected.ip as string)).length;
    if (rules < TRAFFIC_POLICIES)
      ctx.failures.push(
        `throughput: the server's chain has ${rules} rules, not ${TRAFFIC_POLICIES}`,
      );
    await pairs(rounds, selected, open, [samples.selected, samples.open]);
    await configure(ctx.h, false);
    for (let k = 0; k < 100; k++) {
      if (inNode(ctx, ["nft", "list", "table", ...POLICY_TABLE.split(" ")]).status !== 0) break;
      await sleep(100);
    }
    check(intruder, selected, true, "networkPolicy false");
    // The same pairs with no table at all: what the two pods differ by without any policy.
    await pairs(Math.ceil(rounds / 2), selected, open, [samples.offSelected, samples.off]);
    await configure(ctx.h, true);
  } finally {
    for (const l of listeners) {
      if (l.exitCode === null) l.kill("SIGKILL");
      ctx.children.delete(l);
    }
    removeAll(ctx.server, "networkpolicies");
    await releasePods(ctx, pods);
  }
  // What the traffic left in the node's connection tracking, which every sync's cut reads whole; then gone, for the next part.
  const tracked = inNode(ctx, ["conntrack", "-C"]).stdout.trim();
  const t0 = performance.now();
  const listed = inNode(ctx, ["conntrack", "-L"], 120_000).stdout.length;
  const listMs = performance.now() - t0;
  inNode(ctx, ["conntrack", "-F"]);
  const p50 = (xs: number[]) => percentile(xs, 50);
  const ratios = (f: (s: TrafficSample) => number, a = samples.selected, b = samples.open) =>
    a.map((s, i) => f(s) / f(b[i] as TrafficSample));
  const gRatios = ratios((s) => s.gbit);
  const cRatios = ratios((s) => s.cps);
  const gControl = ratios((s) => s.gbit, samples.offSelected, samples.off);
  const cControl = ratios((s) => s.cps, samples.offSelected, samples.off);
  const row = (label: string, xs: TrafficSample[]) => [
    label,
    fmt(p50(xs.map((s) => s.gbit)), 2),
    fmt(p50(xs.map((s) => s.cps)), 0),
    String(xs.reduce((n, s) => n + s.failed, 0)),
    String(xs.length),
  ];
  const span = (xs: number[]) =>
    `${fmt(p50(xs), 3)}× (${fmt(Math.min(...xs), 2)}–${fmt(Math.max(...xs), 2)})`;
  printColumns(
    ["pod to pod, one node (medians)", "Gbit/s", "conn/s", "failed conns", "rounds"],
    [
      row("to a pod no policy selects (reference)", samples.open),
      row(`to a pod ${TRAFFIC_POLICIES} policies select`, samples.selected),
      row("networkPolicy false, no table: the reference pod", samples.off),
      row("networkPolicy false, no table: the other pod", samples.offSelected),
    ],
  );
  say(
    `  paired ratios, median (min–max): throughput ${span(gRatios)}, conn/s ${span(cRatios)}; rounds: ${gRatios.map((x) => fmt(x, 2)).join(" ")} / ${cRatios.map((x) => fmt(x, 2)).join(" ")}`,
  );
  say(
    `  control, the same pairs with networkPolicy false: throughput ${span(gControl)}, conn/s ${span(cControl)}`,
  );
  say(
    `  left in the node's connection tracking: ${tracked} entries; \`conntrack -L\` (what a sync's cut reads) ${fmt(listMs, 0)} ms, ${fmt(listed / 1024 / 1024, 1)} MiB; then flushed`,
  );
  say();
  const g = p50(gRatios);
  const c = p50(cRatios);
  return [
    `TCP throughput to a pod ${TRAFFIC_POLICIES} policies select / none: ${fmt(g, 3)}×; goal ≥ ${GOALS.trafficRatio}×: ${verdict(g >= GOALS.trafficRatio)}`,
    `new connections/s to a pod ${TRAFFIC_POLICIES} policies select / none: ${fmt(c, 3)}×; goal ≥ ${GOALS.trafficRatio}×: ${verdict(c >= GOALS.trafficRatio)}`,
  ];
}

// ---------------------------------------------------------------------------
// 4. Memory

/** VmRSS, VmHWM (the peak so far) and V8's used heap (the driver's nodejs_heap_size_used_bytes), MiB. */
interface MemPoint {
  rssMiB: number;
  hwmMiB: number;
  heapMiB: number;
}

function memPoint(ctx: Ctx, pid: number): MemPoint {
  const heap = metricSum(ctx, "nodejs_heap_size_used_bytes");
  return { ...status(pid), heapMiB: heap === undefined ? Number.NaN : heap / 1024 / 1024 };
}

interface MemFigures {
  label: string;
  /** From the spawn: each kind listed, then the first sync written. */
  listedS: Record<string, number>;
  syncedS: number;
  cpuS: number;
  synced: MemPoint;
  withPods: MemPoint;
  setupP50: number;
}

/** GET of a list from the fake API, timed: what answering the driver's list costs the API side alone. */
function timedList(
  server: FakeKubeApiServer,
  path: string,
): Promise<{ ms: number; bytes: number }> {
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    const req = http.get(
      `${server.url}${path}`,
      { headers: { Authorization: `Bearer ${server.token}` }, agent: false },
      (res) => {
        let bytes = 0;
        res.on("data", (b: Buffer) => {
          bytes += b.length;
        });
        res.on("end", () => resolve({ ms: performance.now() - t0, bytes }));
      },
    );
    req.on("error", reject);
    req.setTimeout(600_000, () => req.destroy(new Error(`GET ${path}: no answer in 600 s`)));
  });
}

/** A fresh driver process on what the API holds now: to listed and synced, then the node's pods, then settled. */
async function memoryRound(ctx: Ctx, label: string, localPods: number): Promise<MemFigures> {
  if (ctx.h.running) await ctx.h.stop();
  // The last run's table would stand in for the first sync.
  inNode(ctx, ["nft", "delete", "table", ...POLICY_TABLE.split(" ")]);
  const startedAt = Date.now();
  const t0 = performance.now();
  await ctx.h.start({ waitReady: false });
  const pid = ctx.h.pid as number;
  await ctx.h.waitReady(600_000);
  const lines = await waitListed(ctx.h, 900_000);
  // The sync after the last list: the counter's last move before it goes quiet.
  const quiet = await waitQuiet(ctx, 1500, 900_000);
  if (quiet.syncs < 1) throw new Error(`${label}: the driver never synced`);
  const lastListed = Math.max(...lines.map((l) => l.at - startedAt));
  const syncedS = Math.max(quiet.changedAt - t0, lastListed) / 1000;
  const cpuS = processCpuMs([pid]) / 1000;
  const listedS: Record<string, number> = {};
  for (const l of lines) listedS[l.kind] ??= (l.at - startedAt) / 1000;
  await sleep(MEM_SETTLE_MS);
  const synced = memPoint(ctx, pid);
  const pods = makeLocalPods(ctx, WEB_NS, { app: "web", tier: "web" }, localPods);
  const times: number[] = [];
  try {
    await sleep(300);
    for (const p of pods) {
      if (stopping) break;
      times.push(await setUp(ctx, p, "socket"));
    }
    await sleep(MEM_SETTLE_MS);
    const withPods = memPoint(ctx, pid);
    say(
      `  ${label}: listed ${Object.entries(listedS)
        .map(([k, s]) => `${k} ${fmt(s, 1)} s`)
        .join(
          ", ",
        )}, synced ${fmt(syncedS, 1)} s; RSS ${fmt(synced.rssMiB)} MiB, ${fmt(withPods.rssMiB)} with ${localPods} pods (peak ${fmt(withPods.hwmMiB)})`,
    );
    return { label, listedS, syncedS, cpuS, synced, withPods, setupP50: percentile(times, 50) };
  } finally {
    await releasePods(ctx, pods);
  }
}

async function memoryPart(ctx: Ctx): Promise<string[]> {
  say(
    `memory: a fresh driver with ${SIZES.memPods} pods, ${SIZES.memPolicies} policies, ${SIZES.memNamespaces} namespaces in the API, then ${SIZES.memLocalPods} pods of its own; against the same with only its own pods and their ${SELECTING} policies`,
  );
  // What the other parts left in the API goes while no driver watches.
  await ctx.h.stop();
  removeAll(ctx.server, "networkpolicies");
  removeAll(ctx.server, "pods");
  removeAll(ctx.server, "namespaces", (o) =>
    ["default", "kube-system", "kube-public", "kube-node-lease"].includes(o.metadata?.name ?? ""),
  );
  ctx.server.put("namespaces", namespaceObject(WEB_NS, 1000));
  putPolicies(ctx.server, SELECTING, 1);
  const ref = await memoryRound(ctx, "reference", SIZES.memLocalPods);
  await ctx.h.stop();
  const t0 = performance.now();
  putNamespaces(ctx.server, SIZES.memNamespaces);
  putRemotePods(
    ctx.server,
    SIZES.memPods - SIZES.memLocalPods,
    SIZES.memNamespaces,
    MEM_FAKE_NODES,
  );
  removeAll(ctx.server, "networkpolicies");
  putPolicies(ctx.server, SIZES.memPolicies, SIZES.memNamespaces);
  const fillS = (performance.now() - t0) / 1000;
  const list = await timedList(ctx.server, "/api/v1/pods");
  say(
    `  the API filled in ${fmt(fillS, 1)} s; it answers the list of every pod in ${fmt(list.ms / 1000, 2)} s (${fmt(list.bytes / 1024 / 1024, 1)} MiB of JSON) to the bench itself`,
  );
  const big = await memoryRound(ctx, "full", SIZES.memLocalPods);
  const row = (f: MemFigures, what: string) => [
    what,
    fmt(f.listedS.pods ?? Number.NaN, 1),
    fmt(f.syncedS, 1),
    fmt(f.cpuS, 1),
    fmt(f.synced.hwmMiB),
    fmt(f.synced.rssMiB),
    fmt(f.synced.heapMiB),
    fmt(f.withPods.rssMiB),
    fmt(f.withPods.heapMiB),
    fmt(f.withPods.hwmMiB),
    fmt(f.setupP50, 1),
  ];
  printColumns(
    [
      "driver, fresh start",
      "pods listed s",
      "synced s",
      "CPU s",
      "peak",
      "RSS",
      "heap",
      `RSS +${SIZES.memLocalPods} pods`,
      "heap",
      "peak",
      "SetUpPod p50 ms",
    ],
    [
      row(ref, `reference: ${SIZES.memLocalPods} pods, ${SELECTING} policies in the API`),
      row(
        big,
        `${SIZES.memPods} pods, ${SIZES.memPolicies} policies, ${SIZES.memNamespaces} namespaces`,
      ),
    ],
  );
  say(
    `  (from the driver's spawn: each time, the CPU it had used and its peak RSS when synced; then, ${MEM_SETTLE_MS / 1000} s after the sync and after its ${SIZES.memLocalPods} pods were set up at c=1: RSS, V8's used heap and the peak so far; MiB, VmRSS and VmHWM)`,
  );
  say();
  return [
    `driver RSS with ${SIZES.memPods} pods, ${SIZES.memPolicies} policies, ${SIZES.memNamespaces} namespaces and ${SIZES.memLocalPods} pods of its own: ${fmt(big.withPods.rssMiB)} MiB (peak ${fmt(big.withPods.hwmMiB)}; reference ${fmt(ref.withPods.rssMiB)}); goal ≤ ${GOALS.rssMiB} MiB: ${verdict(big.withPods.rssMiB <= GOALS.rssMiB)}; initial sync ${fmt(big.syncedS, 1)} s from the spawn (reference ${fmt(ref.syncedS, 1)} s)`,
  ];
}

// ---------------------------------------------------------------------------

const verdict = (met: boolean) => (met ? "met" : "missed");

let stopping = false;

function printHeader(ctx: Ctx, driver: string): void {
  const nft = spawnSync("nft", ["--version"], { encoding: "utf8" }).stdout.trim();
  say(`bench/network-policy${QUICK ? " (quick)" : ""}  ${new Date().toISOString()}`);
  say(
    `machine: ${availableParallelism()} cores (${cpus()[0]?.model.trim() ?? "?"}), Linux ${release()}, node ${process.version}, ${nft}`,
  );
  say(
    `driver: ${driver}, in node namespace ${ctx.node.netns}, pods on ${ctx.h.subnet}; nftables through ${nftBackend(ctx.h)}; shim: ${ctx.shim ?? `none (${ctx.shimWhy})`}; exec path ${execPath()}`,
  );
  say(
    `API (fake, in this process): ${SIZES.namespaces} namespaces, ${SIZES.apiPods - SIZES.localPods} pods of ${FAKE_NODES} other nodes; policies per part`,
  );
  say();
}

async function main(): Promise<number> {
  if (process.getuid?.() !== 0) {
    process.stderr.write("bench/network-policy: needs root (network namespaces, nftables)\n");
    return 1;
  }
  for (const cmd of ["nft", "conntrack", "curl"]) {
    if (spawnSync("sh", ["-c", `command -v ${cmd}`]).status !== 0) {
      process.stderr.write(`bench/network-policy: needs ${cmd}\n`);
      return 1;
    }
  }
  const only = parseOnly(option(argv, "--only"));
  const mode = (option(argv, "--driver") ?? "build") as DriverMode;
  if (!DRIVER_MODES.includes(mode)) throw new Error(`--driver: one of ${DRIVER_MODES.join(", ")}`);
  if (option(argv, "--changes")) SIZES.changes = Number(option(argv, "--changes"));
  const work = join(REPO_ROOT, ".tmp", `bench-np-${TAG}`);
  let server: FakeKubeApiServer | undefined;
  let ul: ClusterUnderlay | undefined;
  let h: BenchDriver | undefined;
  const children = new Set<ChildProcess>();
  const failures: string[] = [];
  let cleaned = false;
  let signalled = 0;
  const cleanup = async () => {
    if (cleaned) return;
    cleaned = true;
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
    // SIGTERM first: a driver that exits writes its CPU profile (--cpu-prof); SIGKILL after 30 s.
    if (signalled < 2) await h?.stop().catch(() => {});
    if (DRIVER_LOG && h) writeFileSync(DRIVER_LOG, h.earlierLogs + h.logs);
    await h?.cleanup().catch(() => {});
    await ul?.cleanup().catch(() => {});
    await server?.close().catch(() => {});
    rmSync(work, { recursive: true, force: true });
  };
  const onSignal = (sig: NodeJS.Signals) => {
    stopping = true;
    if (++signalled > 1) {
      process.stderr.write(`${sig} again: cleaning up now\n`);
      void cleanup().finally(() => process.exit(130));
      return;
    }
    process.stderr.write(`\n${sig}: finishing what is in flight, then cleaning up\n`);
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  const started = performance.now();
  const summary: string[] = [];
  try {
    mkdirSync(work, { recursive: true });
    let cli: string | undefined;
    let driver: string;
    if (mode === "build") {
      const t0 = performance.now();
      cli = buildDriver(join(work, "build"));
      driver = `the sources compiled into ${join(work, "build")} (${fmt((performance.now() - t0) / 1000, 0)} s) on node ${process.version}`;
    } else if (mode === "dist") {
      driver = "dist/ as it is";
      if (!existsSync(join(REPO_ROOT, "dist/src/driver/network-policy/enforcer.js")))
        throw new Error("dist/ has no network-policy: run `npm run build` or use --driver build");
    } else driver = "the sources through tsx";
    server = await startFakeKubeApiServer({ historyLimit: 20_000 });
    ul = new ClusterUnderlay(work);
    const kubeconfig = await ul.exposeApi(Number(new URL(server.url).port), server.kubeconfig());
    const node = ul.addNode(NODE_NAME, NODE_OCTET);
    h = new BenchDriver(
      {
        subnetOctet: SUBNET_OCTET,
        netns: node.netns,
        ...(mode === "tsx" ? {} : { nodeBinary: process.execPath }),
        // info: the bench reads the "listed" lines.
        extraFlags: [
          "--kubeconfig",
          kubeconfig,
          "--node-name",
          NODE_NAME,
          "--log-level",
          DRIVER_LOG_LEVEL,
        ],
      },
      cli,
    );
    await configure(h);
    server.put("nodes", {
      metadata: { name: NODE_NAME },
      spec: { podCIDR: h.subnet, podCIDRs: [h.subnet] },
      status: { addresses: [{ type: "InternalIP", address: node.address }] },
    });
    const shim = only.has("setup") ? findShim(work) : { why: "not needed" };
    const ctx: Ctx = {
      server,
      ul,
      node,
      h,
      ...(shim.path ? { shim: shim.path } : {}),
      ...(shim.why ? { shimWhy: shim.why } : {}),
      seq: 0,
      failures,
      children,
    };
    if (only.has("setup") || only.has("change") || only.has("throughput")) {
      putNamespaces(server, SIZES.namespaces);
      putRemotePods(server, SIZES.apiPods - SIZES.localPods, SIZES.namespaces, FAKE_NODES);
    }
    await h.start();
    await waitListed(h, 120_000);
    printHeader(ctx, driver);
    if (only.has("setup") && !stopping) summary.push(...(await setupPart(ctx)));
    if (only.has("change") && !stopping) summary.push(...(await changePart(ctx)));
    if (only.has("throughput") && !stopping) summary.push(...(await throughputPart(ctx)));
    if (only.has("memory") && !stopping) summary.push(...(await memoryPart(ctx)));
    if (stopping) say("INTERRUPTED: partial figures, not a result");
    for (const line of summary) say(line);
  } catch (err) {
    failures.push(err instanceof Error ? (err.stack ?? err.message) : String(err));
    if (h?.logs) process.stderr.write(`driver log (last lines):\n${h.logs.slice(-4000)}\n`);
  } finally {
    await cleanup();
  }
  say(`took ${fmt((performance.now() - started) / 1000, 0)} s; cleaned up`);
  if (failures.length > 0) {
    process.stderr.write(`${failures.length} failures:\n  ${failures.slice(0, 10).join("\n  ")}\n`);
    return 1;
  }
  return stopping ? 130 : 0;
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(
      `bench/network-policy failed: ${err instanceof Error ? err.stack : String(err)}\n`,
    );
    process.exitCode = 1;
  },
);
