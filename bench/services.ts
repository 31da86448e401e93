/**
 * bench/services: what load-balancing Services in nftables (src/driver/services/) costs at
 * 10,000 Services and 100,000 endpoints, each figure beside a reference from the same run.
 * The cluster: N one-port Services (TCP 80; 1 in 50 UDP 53), one EndpointSlice each of 10
 * endpoints over 100 nodes (1 in 100 on this node), shaped as the API serves them and
 * JSON.parse'd in pages of 500, as the driver's watch reads them. Driver code runs in children
 * with the driver's Node flags inside fresh network namespaces, as the driver runs in its node's.
 *
 * 1. full: serviceFromApi, planService, planBlock, hairpinElements (build), then the kernel
 *    datapath's applyWhole of fullScriptParts (apply: each table's script made, compiled and
 *    sent as an nf_tables netlink batch while the kernel takes the last), from nothing. Reference: the same Services as kube-proxy's nftables mode writes them (a
 *    chain a Service, `numgen random mod 10 vmap` to a chain an endpoint doing the DNAT)
 *    through `nft -f`; and the driver's script through `nft -f` (libnftables, one
 *    transaction). Medians of the rounds. Goal <= 2 s.
 * 2. change: a ServiceProxy fed by an in-memory KubeApi (watchEach only), kernel datapath;
 *    one endpoint of one Service replaced, from the EndpointSlice's upsert to applyScript
 *    resolving. References: the same changes with 10 Services, and with N Services written
 *    by libnftables (applyNftScript) instead of netlink batches. Goal p99 <= 50 ms.
 * 3. packet: TCP connects (each SYN through the DNAT) from a client namespace in the pod CIDR
 *    to the last Service's ClusterIP, via a router namespace holding the rules, to a server
 *    namespace holding its endpoints; 10 Services against N, in interleaved rounds. Reference:
 *    kube-proxy's iptables mode through iptables-nft-restore (KUBE-SERVICES, a rule a Service
 *    walked in order, ours last: the worst case). Goal: p50 at N / p50 at 10 <= 1.1.
 * 4. memory: RSS after gc() of a child holding a ServiceProxy synced with N Services, less a
 *    child that loaded the same modules and synced none. Goal < 200 MiB.
 *
 * As root: `npm run bench:services` (about 7 min on 2 cores, most of it the reference's loads);
 * `-- --quick` (N = 1,000); `-- --only full,packet`; `-- --cpu-prof DIR` (the children's CPU
 * profiles). All it makes carries a random tag and is removed at the end, also after a failure
 * or Ctrl-C. Exit status 0 when everything ran, whatever the figures; 1 on a failure; 130 when
 * interrupted.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { availableParallelism, cpus, release, tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import pino from "pino";
import { trimMallocArenas } from "../src/common/malloc-trim.js";
import type { DriverConfig } from "../src/driver/config/network-config.js";
import type { KubeApi, KubeObjectView, ResourceEventHandlers } from "../src/driver/kube/api.js";
import { kernelServicesDatapath } from "../src/driver/services/kernel-datapath.js";
import { ServiceProxy } from "../src/driver/services/proxy.js";
import {
  type Block,
  hairpinElements,
  planBlock,
  SERVICES_TABLES,
} from "../src/driver/services/ruleset.js";
import { type Elements, fullScript, fullScriptParts } from "../src/driver/services/ruleset-diff.js";
import {
  applyNftScript,
  NFT_BIN,
  nftBackendName,
  nftBatchInProcess,
} from "../src/plumbing/nftables.js";
import type { SliceView } from "../src/services/endpoints.js";
import { type PortPlan, planService, serviceFromApi } from "../src/services/model.js";
import { DRIVER_NODE_FLAGS, REPO_ROOT } from "../test/support/driver-harness.js";
import { listNetns, uniqueTag } from "../test/support/netns.js";
import { startNetnsScript, stopPodServer } from "../test/support/pod-server.js";
import { fmt, option, percentile, printColumns, say } from "./common.js";

const argv = process.argv.slice(2);
const QUICK = argv.includes("--quick");
const ONLY = (option(argv, "--only") ?? "full,change,packet,memory").split(",");
const CPU_PROF_DIR = option(argv, "--cpu-prof");
const SIZES = QUICK
  ? { services: 1_000, fullRounds: 2, changes: 20, connRounds: 4, connPerRound: 100 }
  : { services: 10_000, fullRounds: 3, changes: 60, connRounds: 8, connPerRound: 250 };
const GOALS = { fullMs: 2_000, changeP99Ms: 50, packetRatio: 1.1, rssMiB: 200 };
const [EPS, NODES, NODE, POD_CIDR] = [10, 100, "node-0", "10.244.0.0/24"] as const;
/** Part 3: the server namespace holds the last Service's endpoints. */
const SERVER_IPS = Array.from({ length: EPS }, (_, k) => `10.250.0.${k + 1}`);
const SELF = fileURLToPath(import.meta.url);
const PREFIX = `svcb-${uniqueTag()}-`;
const IPT_RESTORE = ["/usr/sbin", "/sbin"].map((d) => `${d}/iptables-nft-restore`).find(existsSync);
const MiB = 2 ** 20;

// ---------------------------------------------------------------------------
// The cluster, by index: the same Services for the driver and the references

const ip4 = (n: number) => `${n >>> 24}.${(n >>> 16) & 255}.${(n >>> 8) & 255}.${n & 255}`;
const clusterIp = (i: number) => ip4(0x0a600000 + i + 1);
const portOf = (i: number) =>
  i % 50 === 7
    ? { name: "dns", port: 53, target: 5353, protocol: "UDP", l4: "udp" }
    : { name: "http", port: 80, target: 8080, protocol: "TCP", l4: "tcp" };
/** Service i's endpoint addresses; in part 3's tables the last Service's are the server's. */
const endpointsOf = (i: number, n: number, toServer = false) =>
  toServer && i === n - 1
    ? [...SERVER_IPS]
    : Array.from({ length: EPS }, (_, k) => ip4(0x0a800000 + i * EPS + k + 1));
const uid = (kind: number, i: number) => `5f1c0a2e-000${kind}-4000-8000-${i.toString(16)}`;
const AT = "2026-11-20T08:00:00Z";
const managed = (manager: string, fieldsV1: object) => [
  { manager, operation: "Update", apiVersion: "v1", time: AT, fieldsType: "FieldsV1", fieldsV1 },
];

function serviceObject(i: number) {
  const [p, name, ip] = [portOf(i), `svc-${i}`, clusterIp(i)] as const;
  const portKey = `k:{"port":${p.port},"protocol":"${p.protocol}"}`;
  const fields = { "f:ports": { [portKey]: { "f:name": {}, "f:port": {}, "f:targetPort": {} } } };
  return {
    metadata: {
      ...{ name, namespace: `ns-${i % 100}`, uid: uid(1, i), resourceVersion: String(1000 + i) },
      ...{ creationTimestamp: AT, labels: { app: name } },
      managedFields: managed("kubectl-client-side-apply", { "f:spec": fields }),
    },
    spec: {
      ...{ clusterIP: ip, clusterIPs: [ip], internalTrafficPolicy: "Cluster" },
      ...{ ipFamilies: ["IPv4"], ipFamilyPolicy: "SingleStack", sessionAffinity: "None" },
      ports: [{ name: p.name, port: p.port, protocol: p.protocol, targetPort: p.target }],
      ...{ selector: { app: name }, type: "ClusterIP" },
    },
    status: { loadBalancer: {} },
  };
}

function sliceObject(i: number, ips: readonly string[], version = 1) {
  const [p, name, namespace] = [portOf(i), `svc-${i}`, `ns-${i % 100}`] as const;
  const owner = { apiVersion: "v1", kind: "Service", name, uid: uid(1, i), controller: true };
  return {
    addressType: "IPv4",
    endpoints: ips.map((ip, k) => ({
      addresses: [ip],
      conditions: { ready: true, serving: true, terminating: false },
      nodeName: `node-${((i * EPS + k) * 7) % NODES}`,
      targetRef: { kind: "Pod", name: `${name}-7d4b9c-${k}`, namespace, uid: uid(3, i * EPS + k) },
    })),
    metadata: {
      ...{ name: `${name}-x7k2p`, namespace, uid: uid(2, i), generateName: `${name}-` },
      ...{ resourceVersion: String(50_000 + i * 100 + version), generation: version },
      ...{ creationTimestamp: AT, labels: { "kubernetes.io/service-name": name } },
      annotations: { "endpoints.kubernetes.io/last-change-trigger-time": AT },
      ownerReferences: [owner],
      managedFields: managed("kube-controller-manager", { "f:endpoints": {}, "f:ports": {} }),
    },
    ports: [{ name: p.name, port: p.target, protocol: p.protocol }],
  };
}

/** Objects 0..n-1 as the watch gets them: pages of JSON text, parsed. */
function* pages(n: number, make: (i: number) => object): Generator<KubeObjectView[]> {
  for (let p = 0; p < n; p += 500)
    yield JSON.parse(
      JSON.stringify(Array.from({ length: Math.min(500, n - p) }, (_, k) => make(p + k))),
    );
}

/** The blocks and hairpin elements of services[i] with slices[i]: what the first sync writes. */
function driverPlan(services: readonly unknown[], slices: readonly unknown[]) {
  const node = { podCidrs: { 4: [POD_CIDR], 6: [] } };
  const [plans, blocks]: [PortPlan[], Block[]] = [[], []];
  services.forEach((o, i) => {
    const spec = serviceFromApi(o);
    for (const p of spec ? planService(spec, [slices[i] as SliceView], { name: NODE }) : []) {
      plans.push(p);
      blocks.push(planBlock(p, node));
    }
  });
  return { blocks, hairpin: hairpinElements(plans, NODE, node.podCidrs) as Elements };
}

/** The driver's whole tables as one script. */
function driverScript(services: readonly unknown[], slices: readonly unknown[]): string {
  const { blocks, hairpin } = driverPlan(services, slices);
  return fullScript(blocks, hairpin);
}

const driverTableFor = (n: number, toServer: boolean) =>
  driverScript(
    Array.from({ length: n }, (_, i) => serviceObject(i)),
    Array.from({ length: n }, (_, i) => sliceObject(i, endpointsOf(i, n, toServer))),
  );

const h8 = (s: string) => createHash("sha256").update(s).digest("hex").slice(0, 8).toUpperCase();

/** kube-proxy's nftables mode (pkg/proxy/nftables/proxier.go), its NAT part, as knftables writes it. */
function kubeProxyNft(n: number): string {
  const T = "ip kube-proxy";
  const out = [
    `add table ${T}\nadd chain ${T} mark-for-masquerade\nadd chain ${T} masquerading`,
    `add rule ${T} mark-for-masquerade mark set mark or 0x4000`,
    `add rule ${T} masquerading mark and 0x4000 == 0 return`,
    `add rule ${T} masquerading mark set mark xor 0x4000`,
    `add rule ${T} masquerading masquerade fully-random`,
    `add map ${T} service-ips { type ipv4_addr . inet_proto . inet_service : verdict ; }`,
    `add set ${T} cluster-ips { type ipv4_addr ; }\nadd chain ${T} services`,
    `add rule ${T} services ip daddr . meta l4proto . th dport vmap @service-ips`,
    ...["prerouting priority dstnat", "output priority -100", "postrouting priority srcnat"].map(
      (h) => `add chain ${T} nat-${h.split(" ")[0]} { type nat hook ${h} ; }`,
    ),
    `add rule ${T} nat-prerouting jump services\nadd rule ${T} nat-output jump services`,
    `add rule ${T} nat-postrouting jump masquerading`,
  ];
  for (let i = 0; i < n; i++) {
    const [p, ip] = [portOf(i), clusterIp(i)];
    const id = `ns-${i % 100}/svc-${i}/${p.l4}/${p.name}`;
    const svc = `service-${h8(id)}-${id}`;
    const eps = endpointsOf(i, n).map((e) => [e, `endpoint-${h8(id + e)}-${id}__${e}/${p.target}`]);
    const vmap = eps.map(([, chain], k) => `${k} : goto ${chain}`).join(" , ");
    out.push(
      // The chains before the rules naming them, as knftables orders a transaction.
      ...eps.flatMap(([e, chain]) => [
        `add chain ${T} ${chain}\nadd rule ${T} ${chain} ip saddr ${e} jump mark-for-masquerade`,
        `add rule ${T} ${chain} meta l4proto ${p.l4} dnat to ${e}:${p.target}`,
      ]),
      `add chain ${T} ${svc}`,
      `add rule ${T} ${svc} ip daddr ${ip} ${p.l4} dport ${p.port} ip saddr != 10.0.0.0/8 jump mark-for-masquerade`,
      `add rule ${T} ${svc} numgen random mod ${EPS} vmap { ${vmap} }`,
      `add element ${T} cluster-ips { ${ip} }`,
      `add element ${T} service-ips { ${ip} . ${p.l4} . ${p.port} : goto ${svc} }`,
    );
  }
  return `${out.join("\n")}\n`;
}

/** kube-proxy's iptables mode, its nat table, for iptables-nft-restore: KUBE-SERVICES walked in order. */
function kubeProxyIptables(n: number): string {
  const chains = ["PREROUTING ACCEPT", "OUTPUT ACCEPT", "POSTROUTING ACCEPT", "KUBE-SERVICES -"];
  chains.push("KUBE-MARK-MASQ -", "KUBE-POSTROUTING -");
  const rules = [
    '-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
    '-A OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
    "-A POSTROUTING -j KUBE-POSTROUTING\n-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000",
    "-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN",
    "-A KUBE-POSTROUTING -j MARK --set-xmark 0x4000/0x0",
    "-A KUBE-POSTROUTING -j MASQUERADE --random-fully",
  ];
  for (let i = 0; i < n; i++) {
    const [p, id] = [portOf(i), `ns-${i % 100}/svc-${i}:${portOf(i).name}`];
    const svc = `KUBE-SVC-${h8(id)}${h8(`${id}!`)}`;
    const match = `-d ${clusterIp(i)}/32 -p ${p.l4} -m comment --comment "${id} cluster IP" -m ${p.l4} --dport ${p.port}`;
    chains.push(`${svc} -`);
    rules.push(
      `-A KUBE-SERVICES ${match} -j ${svc}`,
      `-A ${svc} ! -s 10.0.0.0/8 ${match} -j KUBE-MARK-MASQ`,
    );
    endpointsOf(i, n, true).forEach((e, k) => {
      const sep = `KUBE-SEP-${h8(id + e)}${h8(e + id)}`;
      const odds =
        k < EPS - 1
          ? `-m statistic --mode random --probability ${(1 / (EPS - k)).toFixed(11)} `
          : "";
      chains.push(`${sep} -`);
      rules.push(
        `-A ${svc} -m comment --comment "${id} -> ${e}:${p.target}" ${odds}-j ${sep}`,
        `-A ${sep} -s ${e}/32 -m comment --comment "${id}" -j KUBE-MARK-MASQ`,
        `-A ${sep} -p ${p.l4} -m comment --comment "${id}" -m ${p.l4} -j DNAT --to-destination ${e}:${p.target}`,
      );
    });
  }
  return `*nat\n${chains.map((c) => `:${c} [0:0]`).join("\n")}\n${rules.join("\n")}\nCOMMIT\n`;
}

// ---------------------------------------------------------------------------
// Children: driver code inside a network namespace

type FullOut = { buildMs: number; applyMs: number; backend: string };
type Series = { total: number[]; apply: number[]; lines: number[] };
type Mem = { rss: number; trimmed: number; listedHeap: number; heap: number; hwm: number };
type ProxyOut = { fullSyncMs: number; gc: boolean } & Series & Mem;
type Applied = { at: number; applyMs: number; script: string };

const result = (o: object) => process.stdout.write(`RESULT ${JSON.stringify(o)}\n`);

/** Part 1's driver side: build, then apply, timed apart. */
async function fullChild(n: number): Promise<void> {
  const services = [...pages(n, serviceObject)].flat();
  const slices = [...pages(n, (i) => sliceObject(i, endpointsOf(i, n)))].flat();
  const backend = nftBatchInProcess() ? "netlink batches" : nftBackendName(); // loaded before the clock
  const t0 = performance.now();
  const { blocks, hairpin } = driverPlan(services, slices);
  const t1 = performance.now();
  await kernelServicesDatapath.applyWhole?.(fullScriptParts(blocks, hairpin));
  result({ buildMs: t1 - t0, applyMs: performance.now() - t1, backend });
}

/** Parts 2 and 4: a ServiceProxy on the kernel datapath, fed by an in-memory watchEach. */
async function proxyChild(n: number, changes: number, mode: string): Promise<void> {
  const handlers = new Map<string, ResourceEventHandlers>();
  // As the real watch does: each object through the proxy's transform before its handler.
  const watchEach = (
    resource: string,
    h: ResourceEventHandlers,
    transform: (o: KubeObjectView) => KubeObjectView = (o) => o,
  ) => {
    handlers.set(resource, { ...h, upsert: (o) => h.upsert(transform(o)) });
    return { synced: true, lastError: undefined, stop: async () => {} };
  };
  // applyScript timestamped as it resolves: when the rules are in the kernel.
  const applied: Applied[] = [];
  const nth = async (k: number) => {
    for (let i = 0; i < 60_000 && applied.length <= k; i++) await sleep(1);
    return applied[k] ?? Promise.reject(new Error(`no applyScript #${k + 1} in 60 s`));
  };
  const proxy = new ServiceProxy({
    logger: pino({ level: "silent" }),
    api: Promise.resolve({ server: "bench", watchEach } as unknown as KubeApi),
    nodeName: NODE,
    localPodCidrs: () => ({ v4: POD_CIDR }),
    datapath: {
      ...kernelServicesDatapath,
      async applyScript(script) {
        const t = performance.now();
        if (mode === "change-libnftables") await applyNftScript("bench: change", script);
        else await kernelServicesDatapath.applyScript(script);
        const at = performance.now();
        applied.push({ at, applyMs: at - t, script });
      },
      // The first sync: the tables whole (through libnftables: one script, one transaction).
      async applyWhole(parts) {
        const t = performance.now();
        if (mode === "change-libnftables") await applyNftScript("bench: full", [...parts].join(""));
        else await kernelServicesDatapath.applyWhole?.(parts);
        const at = performance.now();
        applied.push({ at, applyMs: at - t, script: "" });
      },
    },
  });
  const raw = { type: "midonet", datapath: "kernel", ipam: { type: "host-local" } };
  const networks = new Map([["pods", { name: "pods", plugins: [{ type: "midonet", raw }] }]]);
  await proxy.apply({ networks, settings: { services: "driver" } } as unknown as DriverConfig);
  const gc = (globalThis as { gc?: () => void }).gc;
  const heapAfterGc = () => {
    for (let k = 0; k < 3; k++) gc?.();
    return process.memoryUsage().heapUsed / MiB;
  };
  const feed = (resource: string, make: (i: number) => object) => {
    const h = handlers.get(resource) as ResourceEventHandlers;
    for (const page of pages(n, make)) for (const o of page) h.upsert(o);
    h.onSynced?.();
  };
  feed("services", serviceObject);
  feed("endpointslices", (i) => sliceObject(i, endpointsOf(i, n)));
  const listed = performance.now();
  // Before the sync (it starts on the next turn): the heap of the objects as the proxy keeps them.
  const listedHeap = mode === "rss" ? heapAfterGc() : 0;
  const out = { fullSyncMs: (await nth(0)).at - listed, gc: !!gc };
  await sleep(200);
  if (mode === "rss") {
    const heap = heapAfterGc();
    await sleep(200);
    const rss = process.memoryUsage().rss / MiB;
    // What the driver's idle collection (rpc/idle-gc.ts) would give back after the next pod call.
    trimMallocArenas();
    const trimmed = process.memoryUsage().rss / MiB;
    const hwm = /^VmHWM:\s+(\d+)/m.exec(readFileSync("/proc/self/status", "utf8"))?.[1];
    result({ ...out, rss, trimmed, listedHeap, heap, hwm: Number(hwm) / 1024 });
  } else {
    const s: Series = { total: [], apply: [], lines: [] };
    for (let c = 0; c < changes; c++) {
      // A pod of a Service replaced: one endpoint's address changes, the other 9 stay.
      const i = (c * 7919 + 13) % n;
      const ips = endpointsOf(i, n);
      const fresh = ip4(0x0ac80000 + c + 1);
      ips[c % EPS] = fresh;
      const [slice] = pages(1, () => sliceObject(i, ips, 2 + c)).next().value ?? [];
      const t = performance.now();
      handlers.get("endpointslices")?.upsert(slice as KubeObjectView);
      const a = await nth(c + 1);
      if (!a.script.includes(fresh)) throw new Error(`change ${c}: ${fresh} not in ${a.script}`);
      s.total.push(a.at - t);
      s.apply.push(a.applyMs);
      s.lines.push(a.script.split("\n").length - 1);
      await sleep(25); // the sync's tail (health checks, UDP flows) ends before the next change
    }
    result({ ...out, ...s });
  }
  await proxy.stop();
}

// ---------------------------------------------------------------------------
// The parent: namespaces, processes, cleanup

const children = new Set<ChildProcess>();
let stopping = false;
let dir = "";

/** One `ip -batch` of `lines` (in `ns` when given): set-up, never timed. */
function ip(ns: string | undefined, lines: string[]): void {
  const args = [...(ns ? ["-n", ns] : []), "-batch", "-"];
  const r = spawnSync("ip", args, { input: `${lines.join("\n")}\n`, encoding: "utf8" });
  if (r.status !== 0) throw new Error(`ip ${args.join(" ")}: ${r.stderr || r.error}`);
}

function freshNetns(id: string): string {
  ip(undefined, [`netns add ${PREFIX}${id}`]);
  ip(`${PREFIX}${id}`, ["link set lo up"]);
  return `${PREFIX}${id}`;
}

const dropNetns = (ns: string) => spawnSync("ip", ["netns", "del", ns]);

type Ran = { code: number | null; out: string; err: string; ms: number };

/** A command in `ns`, bounded (10 min); its output and wall time in ms. */
function runIn(ns: string, cmd: string[], input = ""): Promise<Ran> {
  return new Promise((resolve) => {
    const t0 = performance.now();
    const c = spawn("ip", ["netns", "exec", ns, ...cmd], { cwd: REPO_ROOT });
    children.add(c);
    let [out, err] = ["", ""];
    c.stdout.on("data", (b: Buffer) => (out += b));
    c.stderr.on("data", (b: Buffer) => (err += b));
    c.stdin.on("error", () => {}); // a command that exits before reading: its status says why
    c.stdin.end(input);
    const timer = setTimeout(() => c.kill("SIGKILL"), 600_000);
    c.on("close", (code) => {
      clearTimeout(timer);
      children.delete(c);
      resolve({ code, out, err, ms: performance.now() - t0 });
    });
  });
}

function check(what: string, r: Ran): Ran {
  if (r.code !== 0) throw new Error(`${what}: exit ${r.code}: ${r.err.slice(-2000)}`);
  return r;
}

/** This file as a child (`--child ...`) in a fresh namespace, with the driver's Node flags. */
function driverChild<T>(id: string, args: (string | number)[]): Promise<T> {
  const prof = CPU_PROF_DIR ? ["--cpu-prof", `--cpu-prof-dir=${CPU_PROF_DIR}`] : [];
  const cmd = [process.execPath, ...DRIVER_NODE_FLAGS, ...prof, "--import", "tsx", SELF, "--child"];
  return inFresh(id, async (ns) => {
    const r = check(`child ${args.join(" ")}`, await runIn(ns, [...cmd, ...args.map(String)]));
    const line = r.out.split("\n").find((l) => l.startsWith("RESULT "));
    if (!line) throw new Error(`child ${args.join(" ")}: no result: ${r.out.slice(-500)}`);
    return JSON.parse(line.slice(7)) as T;
  });
}

/** Runs `fn` in a fresh namespace, removed after. */
async function inFresh<T>(id: string, fn: (ns: string) => Promise<T>): Promise<T> {
  const ns = freshNetns(id);
  try {
    return await fn(ns);
  } finally {
    dropNetns(ns);
  }
}

const med = (s: readonly number[]) => percentile(s, 50);
const ms = (x: number) => fmt(x, 0);
const mb = (x: number) => fmt(x, 1);
/** A line of the final table: figure, measured, reference, goal, met. */
type Row = [string, string, string, string, boolean];

// ---------------------------------------------------------------------------
// 1. Full sync

async function fullPart(n: number): Promise<Row> {
  say(`1. full sync of ${n} Services, ${n * EPS} endpoints; each load in a fresh namespace`);
  const files = { ref: join(dir, "kube-proxy.nft"), own: join(dir, "driver.nft") };
  writeFileSync(files.ref, kubeProxyNft(n));
  writeFileSync(files.own, driverTableFor(n, false));
  type Side = "build" | "apply" | "total" | "own" | "ref";
  const s: Record<Side, number[]> = { build: [], apply: [], total: [], own: [], ref: [] };
  let backend = "?";
  for (let r = 0; r < SIZES.fullRounds && !stopping; r++)
    for (const side of r % 2 === 0 ? ["driver", "own", "ref"] : ["ref", "own", "driver"]) {
      if (side === "driver") {
        const o = await driverChild<FullOut>(`f${r}`, ["full", n]);
        s.build.push(o.buildMs);
        s.apply.push(o.applyMs);
        s.total.push(o.buildMs + o.applyMs);
        backend = o.backend;
        continue;
      }
      const table = side === "ref" ? ["ip", "kube-proxy"] : ["inet", "cni-driver-services"];
      await inFresh(`f${r}${side}`, async (ns) => {
        const load = await runIn(ns, [NFT_BIN, "-f", files[side as "own" | "ref"]]);
        s[side as "own" | "ref"].push(check(`nft -f (${side})`, load).ms);
        // Checked, untimed: every frontend is in the kernel's maps (the driver's: one a shard).
        const tables = side === "ref" ? [table] : SERVICES_TABLES.slice(1).map((t) => ["inet", t]);
        let got = 0;
        for (const t of tables) {
          const listed = await runIn(ns, [NFT_BIN, "list", "map", ...t, "service-ips"]);
          got += listed.out.match(/: goto /g)?.length ?? 0;
        }
        if (got !== n) throw new Error(`${side}: ${got} frontends in the table, not ${n}`);
      });
    }
  const line = (l: string, v: number[]) => [l, ...[med(v), Math.min(...v), Math.max(...v)].map(ms)];
  const lines = [
    line("driver: build (plans, blocks)", s.build),
    line(`driver: applyWhole (scripts, ${backend})`, s.apply),
    line("driver: build + apply", s.total),
    line("driver's script through nft -f", s.own),
    line("reference: kube-proxy nftables mode, nft -f", s.ref),
  ];
  printColumns(["full sync (ms)", "median", "min", "max"], lines);
  const [t, ref, goal] = [
    med(s.total),
    `${ms(med(s.ref))} ms kube-proxy nft`,
    `<= ${GOALS.fullMs} ms`,
  ];
  say();
  return [`full sync, ${n} Services`, `${ms(t)} ms`, ref, goal, t <= GOALS.fullMs];
}

// ---------------------------------------------------------------------------
// 2. One endpoint change

async function changePart(n: number): Promise<Row> {
  say(`2. one endpoint change (${SIZES.changes}): EndpointSlice upsert -> applyScript resolved`);
  const ref = await driverChild<ProxyOut>("c10", ["proxy", 10, SIZES.changes, "change"]);
  const own = await driverChild<ProxyOut>("cN", ["proxy", n, SIZES.changes, "change"]);
  const text = await driverChild<ProxyOut>("cT", ["proxy", n, SIZES.changes, "change-libnftables"]);
  const q = (v: number[]) => [med(v), percentile(v, 99)].map((x) => fmt(x, 2));
  const cells = (o: ProxyOut) => [...q(o.total), ...q(o.apply), `${med(o.lines)}`];
  const head = ["change (ms)", "p50", "p99", "apply p50", "apply p99", "lines", "1st sync"];
  const rows = (
    [
      ["reference: 10 Services", ref],
      [`reference: ${n} Services, libnftables`, text],
      [`${n} Services`, own],
    ] as const
  ).map(([l, o]) => [l, ...cells(o), ms(o.fullSyncMs)]);
  printColumns(head, rows);
  say("  apply: applyScript alone; 1st sync: the proxy's whole table, lists' end to written\n");
  const [[o50, o99], [r50, r99], [t50, t99]] = [q(own.total), q(ref.total), q(text.total)];
  const [got, refs, goal] = [
    `${o50} / ${o99} ms`,
    `${r50} / ${r99} ms, 10 Svc; ${t50} / ${t99} ms libnftables`,
    `p99 <= ${GOALS.changeP99Ms} ms`,
  ];
  return [
    `endpoint change, ${n} Svc: p50 / p99`,
    got,
    refs,
    goal,
    Number(o99) <= GOALS.changeP99Ms,
  ];
}

// ---------------------------------------------------------------------------
// 3. First-packet latency

/** The client: per line {host, port, n}, n connects one after the other; their times in µs (-1: failed). */
const CLIENT_JS = `const net = require("node:net");
const one = (host, port) => new Promise((resolve) => {
  const t0 = process.hrtime.bigint();
  const s = net.connect({ host, port });
  const timer = setTimeout(() => { s.destroy(); resolve(-1); }, 2000);
  s.on("error", () => { clearTimeout(timer); resolve(-1); });
  s.once("connect", () => {
    const us = Number(process.hrtime.bigint() - t0) / 1000;
    clearTimeout(timer);
    s.resetAndDestroy(); // an RST: no TIME_WAIT piling up over thousands of connections
    resolve(us);
  });
});
require("node:readline").createInterface({ input: process.stdin }).on("line", async (line) => {
  const { host, port, n } = JSON.parse(line);
  const us = [];
  for (let i = 0; i < n; i++) us.push(await one(host, port));
  process.stdout.write(JSON.stringify(us) + "\\n");
});
console.log("ready");`;

const SERVER_JS = `require("node:net").createServer((s) => { s.on("error", () => {}); s.destroy(); })
  .listen(8080, "0.0.0.0", () => console.log("listening"));`;

type Load = (rtr: string) => Promise<unknown>;
type Trio = [string, string, string];
type Case = { label: string; ask(count: number): Promise<number[]>; us: number[] };

/** Client (a pod of the node), router (the rules `load` writes), server; client and server started. */
async function makeCase(id: string, label: string, n: number, load: Load): Promise<Case> {
  const [cli, rtr, srv] = ["c", "r", "s"].map((x) => freshNetns(id + x)) as Trio;
  ip(rtr, [
    `link add vc type veth peer name eth0 netns ${cli}\nlink add vs type veth peer name eth0 netns ${srv}`,
    "addr add 10.244.0.1/24 dev vc\naddr add 172.31.2.1/24 dev vs\nlink set vc up\nlink set vs up",
    "route add 10.250.0.0/24 via 172.31.2.2",
  ]);
  ip(cli, ["addr add 10.244.0.2/24 dev eth0\nlink set eth0 up\nroute add default via 10.244.0.1"]);
  ip(srv, [
    ...["addr add 172.31.2.2/24 dev eth0", ...SERVER_IPS.map((a) => `addr add ${a}/32 dev eth0`)],
    "link set eth0 up\nroute add default via 172.31.2.1",
  ]);
  check("ip_forward", await runIn(rtr, ["sysctl", "-qw", "net.ipv4.ip_forward=1"]));
  await load(rtr);
  const server = await startNetnsScript(srv, SERVER_JS);
  const client = spawn("ip", ["netns", "exec", cli, process.execPath, "-e", CLIENT_JS]);
  // Every case's client on one CPU, its server on the other (`ip netns exec` execs in place):
  // where the scheduler puts them otherwise moved a case's p50 by ±10 µs from run to run.
  const pin = (c: ChildProcess, cpu: string) =>
    children.add(c) && spawnSync("taskset", ["-apc", cpu, String(c.pid)], { stdio: "ignore" });
  pin(server, "0");
  pin(client, "1");
  const lines = createInterface({ input: client.stdout })[Symbol.asyncIterator]();
  const next = async () => {
    const late = sleep(120_000, undefined, { ref: false }).then(() => ({ value: undefined }));
    const l = await Promise.race([lines.next(), late]);
    if (typeof l.value !== "string") throw new Error(`${label}: the client did not answer`);
    return l.value;
  };
  if ((await next()) !== "ready") throw new Error(`${label}: the client did not start`);
  const ask = async (count: number) => {
    client.stdin.write(`${JSON.stringify({ host: clusterIp(n - 1), port: 80, n: count })}\n`);
    return JSON.parse(await next()) as number[];
  };
  return { label, ask, us: [] };
}

async function packetPart(n: number): Promise<Row> {
  const total = SIZES.connRounds * SIZES.connPerRound;
  say(
    `3. TCP connect to the last Service's ClusterIP, ${total} a case, ${SIZES.connRounds} rounds`,
  );
  const load = (cmd: string[], text: string) => async (rtr: string) =>
    check(cmd.join(" "), await runIn(rtr, cmd, text));
  const nft = (count: number) => load([NFT_BIN, "-f", "-"], driverTableFor(count, true));
  const ipt = (count: number) => load([IPT_RESTORE as string], kubeProxyIptables(count));
  const cases = [
    await makeCase("p0", "driver, 10 Services", 10, nft(10)),
    await makeCase("p1", `driver, ${n} Services`, n, nft(n)),
    await makeCase("p2", "reference: kube-proxy iptables, 10", 10, ipt(10)),
    await makeCase("p3", `reference: kube-proxy iptables, ${n}`, n, ipt(n)),
  ];
  let failed = 0;
  const take = (c: Case, us: number[], keep: boolean) => {
    failed += us.filter((t) => t < 0).length;
    if (keep) c.us.push(...us.filter((t) => t >= 0));
  };
  // Warm-up, not counted: neighbours resolved, code paths hot; a case with no answer is broken.
  for (const c of cases) take(c, await c.ask(50), false);
  if (failed > 0) throw new Error(`${failed} warm-up connects failed: a DNAT does not work`);
  for (let r = 0; r < SIZES.connRounds && !stopping; r++)
    for (const c of r % 2 === 0 ? cases : [...cases].reverse())
      take(c, await c.ask(SIZES.connPerRound), true);
  const line = (c: Case) => [c.label, ...[50, 90, 99].map((p) => ms(percentile(c.us, p)))];
  printColumns(["connect (µs)", "p50", "p90", "p99"], cases.map(line));
  const [d10, dN, r10, rN] = cases.map((c) => med(c.us)) as [number, number, number, number];
  const [got, ref] = [`${fmt(dN / d10, 3)}x`, `${fmt(rN / r10, 3)}x iptables`];
  say(`  p50 at ${n} / at 10: driver ${got}, reference ${ref}; ${failed} connects failed\n`);
  const ok = dN / d10 <= GOALS.packetRatio;
  return [`first packet p50, ${n} / 10 Services`, got, ref, `<= ${GOALS.packetRatio}x`, ok];
}

// ---------------------------------------------------------------------------
// 4. Memory

async function memoryPart(n: number): Promise<Row> {
  say(`4. memory of a child with a synced ServiceProxy (${DRIVER_NODE_FLAGS.join(" ")})`);
  const base = await driverChild<ProxyOut>("m0", ["proxy", 0, 0, "rss"]);
  const full = await driverChild<ProxyOut>("mN", ["proxy", n, 0, "rss"]);
  const line = (l: string, o: ProxyOut) => [
    l,
    ...[o.rss, o.trimmed, o.listedHeap, o.heap, o.hwm].map(mb),
  ];
  const head = [
    "memory (MiB)",
    "RSS after gc",
    "+ malloc_trim",
    "heap: listed",
    "synced",
    "peak RSS",
  ];
  printColumns(head, [
    line("baseline: the modules, no Service", base),
    line(`${n} Services`, full),
  ]);
  say("  heap listed: the objects as the proxy keeps them, before its first sync; synced: after");
  const [d, trimmed, heap] = [
    full.rss - base.rss,
    full.trimmed - base.trimmed,
    full.heap - base.heap,
  ];
  say(`  difference: RSS ${mb(d)} (${mb(trimmed)} after malloc_trim), heap ${mb(heap)}\n`);
  return [
    `RSS of ${n} Services' state`,
    `${mb(d)} MiB`,
    `${mb(base.rss)} MiB baseline`,
    `< ${GOALS.rssMiB} MiB`,
    d < GOALS.rssMiB,
  ];
}

// ---------------------------------------------------------------------------

async function main(): Promise<number> {
  if (process.getuid?.() !== 0 || !IPT_RESTORE) {
    process.stderr.write("bench/services: needs root and iptables-nft-restore (iptables)\n");
    return 1;
  }
  for (const sig of ["SIGINT", "SIGTERM"] as const)
    process.on(sig, () => {
      stopping = true;
      for (const c of children) c.kill("SIGKILL");
    });
  const started = Date.now();
  dir = mkdtempSync(join(tmpdir(), "cni-driver-bench-services-"));
  const v = (cmd: string) => spawnSync(cmd, ["--version"], { encoding: "utf8" }).stdout.trim();
  const cpu = `${availableParallelism()} cores (${cpus()[0]?.model.trim()})`;
  say(`bench/services  ${new Date().toISOString()}${QUICK ? "  --quick" : ""}`);
  say(`machine: ${cpu}, Linux ${release()}, node ${process.version}; namespaces ${PREFIX}*`);
  say(`${v(NFT_BIN)}; ${v(IPT_RESTORE)}; ${nftBackendName()} in-process`);
  say(`cluster: ${SIZES.services} Services (1 in 50 UDP), ${EPS} endpoints each, ${NODES} nodes`);
  // Other work on the machine inflates every figure: said, so a run can be judged.
  const load = () => readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");
  say(`load average at the start: ${load()}\n`);
  const parts = { full: fullPart, change: changePart, packet: packetPart, memory: memoryPart };
  const rows: Row[] = [];
  try {
    for (const [name, part] of Object.entries(parts))
      if (ONLY.includes(name) && !stopping) rows.push(await part(SIZES.services));
  } catch (err) {
    if (!stopping) throw err; // else a child killed by the signal: reported as interrupted
  } finally {
    for (const c of children) await stopPodServer(c);
    for (const ns of listNetns(PREFIX)) dropNetns(ns);
    rmSync(dir, { recursive: true, force: true });
    const took = fmt((Date.now() - started) / 1000, 0);
    say(`left after the run: ${listNetns(PREFIX).length} namespaces; took ${took} s`);
    say(`load average at the end: ${load()}`);
  }
  if (stopping) say("INTERRUPTED: partial figures, not a result");
  const table = rows.map(([f, got, ref, goal, ok]) => [f, got, ref, goal, ok ? "yes" : "NO"]);
  printColumns(["figure", "measured", "reference", "goal", "met"], table);
  return stopping ? 130 : 0;
}

const at = argv.indexOf("--child");
const [role, a, b, mode] = argv.slice(at + 1);
const child = () =>
  role === "full" ? fullChild(+(a ?? 0)) : proxyChild(+(a ?? 0), +(b ?? 0), `${mode}`);
const job = at < 0 ? main() : child();
job.then(
  (code) => process.exit(code ?? 0),
  (err: unknown) => {
    process.stderr.write(`bench/services: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  },
);
