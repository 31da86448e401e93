/**
 * bench/pod-setup: SetUpPod + TearDownPod through the driver's socket, side by
 * side with the reference chain (Debian's `ptp` + `host-local`, exec'd the way
 * libcni does), at concurrency 1, 16 and 110, measured in one run.
 *
 * Both sides get the same treatment: a fresh netns per pod, made before the
 * clock starts (namespace creation is no part of either measurement); each
 * worker loops ADD → DEL over its own pods; latency is recorded per call, ADD
 * and DEL apart; throughput is pods fully set up and torn down per second of
 * wall time. Rounds alternate driver/reference in ABBA order so drift and
 * machine noise hit both sides alike.
 *
 * Run as root: `npm run bench:pod-setup` (optionally `-- --levels 1,16`).
 * Everything it makes (driver root, namespaces, veths, leases) carries a random
 * tag and is removed at the end, also on failure or Ctrl-C.
 */
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { availableParallelism, cpus, release, tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import type { PodRequest } from "../src/wire/types.js";
import { DriverHarness, sleep } from "../test/support/driver-harness.js";
import { deleteHostLink, listNetns, uniqueTag } from "../test/support/netns.js";
import { REFERENCE_PLUGIN_DIR } from "../test/support/requirements.js";

/** Pod subnets: 10.244.240.0/24 for the driver, .241 for the reference (each /24 holds 253 pods). */
const DRIVER_SUBNET_OCTET = 240;
const REFERENCE_SUBNET = "10.244.241.0/24";
const REFERENCE_GATEWAY = "10.244.241.1";
const PTP = join(REFERENCE_PLUGIN_DIR, "ptp");

/** Per level: rounds per side and pods per round. Sized to stay well under 3 minutes on 2 cores. */
interface Level {
  concurrency: number;
  rounds: number;
  podsPerRound: number;
}
const LEVELS: readonly Level[] = [
  { concurrency: 1, rounds: 6, podsPerRound: 10 },
  { concurrency: 16, rounds: 4, podsPerRound: 64 },
  { concurrency: 110, rounds: 4, podsPerRound: 220 },
];
const WARMUP_PODS = 5;
/** Pause after making a round's namespaces, so the kernel's work on them is not timed. */
const SETTLE_MS = 200;
/** Bound on every single call; a call that takes this long is a failure, not a sample. */
const CALL_TIMEOUT_MS = 30_000;
/** Failed calls tolerated before the bench gives up. */
const MAX_FAILURES = 5;

const TARGETS = {
  addP50AtC1: 0.6,
  delP50AtC1: 1.0,
  throughputAtC110: 2.0,
};

interface Pod {
  name: string;
  containerId: string;
  netns: string;
  netnsPath: string;
}

interface Side {
  label: "driver" | "reference";
  /** One letter in names, so a leftover says which side made it. */
  letter: "d" | "r";
  add(pod: Pod): Promise<void>;
  del(pod: Pod): Promise<void>;
}

interface Samples {
  add: number[];
  del: number[];
  pods: number;
  wallMs: number;
  /** CPU time of the bench, the driver and all they exec'd during the rounds (see processTreeCpuMs). */
  cpuMs: number;
}

const tag = uniqueTag();
const netnsPrefix = `cnb-${tag}-`;
const failures: string[] = [];
let stopping = false;

// ---------------------------------------------------------------------------
// The two sides

function driverSide(h: DriverHarness): Side {
  const request = (p: Pod): Partial<PodRequest> => ({
    pod: { namespace: "bench", name: p.name, uid: "" },
    container_id: p.containerId,
    netns: p.netnsPath,
    ifname: "eth0",
  });
  return {
    label: "driver",
    letter: "d",
    async add(p) {
      const r = await h.client.setUpPod(request(p), { timeoutMs: CALL_TIMEOUT_MS });
      if (r.error) throw new Error(`SetUpPod ${p.name}: CNI error ${r.error.code}: ${r.error.msg}`);
    },
    async del(p) {
      const r = await h.client.tearDownPod(request(p), { timeoutMs: CALL_TIMEOUT_MS });
      if (r.error)
        throw new Error(`TearDownPod ${p.name}: CNI error ${r.error.code}: ${r.error.msg}`);
    },
  };
}

/**
 * ptp with host-local as its IPAM: ptp execs host-local itself, as in a real
 * libcni chain. Exec'd with a bare `spawn` (no shell, config on stdin, CNI_* in
 * the environment), the closest Node has to libcni's pkg/invoke fork/exec; not
 * through execPlugin, whose execa layer and process group add about a
 * millisecond per exec that libcni does not pay.
 */
function referenceSide(dataDir: string, network: string): Side {
  const config = JSON.stringify({
    cniVersion: "1.0.0",
    name: network,
    type: "ptp",
    mtu: 1500,
    ipam: { type: "host-local", ranges: [[{ subnet: REFERENCE_SUBNET }]], dataDir },
  });
  const baseEnv = { ...process.env };
  delete baseEnv.NODE_EXTRA_CA_CERTS;
  const run = async (command: "ADD" | "DEL", p: Pod): Promise<void> => {
    const env = {
      ...baseEnv,
      CNI_COMMAND: command,
      CNI_CONTAINERID: p.containerId,
      CNI_NETNS: p.netnsPath,
      CNI_IFNAME: "eth0",
      // What containerd puts there for a pod sandbox.
      CNI_ARGS: `IgnoreUnknown=1;K8S_POD_NAMESPACE=bench;K8S_POD_NAME=${p.name};K8S_POD_INFRA_CONTAINER_ID=${p.containerId}`,
      CNI_PATH: REFERENCE_PLUGIN_DIR,
    };
    const out = await execWithStdin(PTP, env, config, CALL_TIMEOUT_MS);
    if (out.code !== 0) {
      throw new Error(`ptp ${command} ${p.name}: exit ${out.code}: ${out.stdout}${out.stderr}`);
    }
  };
  return {
    label: "reference",
    letter: "r",
    add: (p) => run("ADD", p),
    del: (p) => run("DEL", p),
  };
}

interface ExecOutcome {
  code: number | null;
  stdout: string;
  stderr: string;
}

function execWithStdin(
  file: string,
  env: NodeJS.ProcessEnv,
  stdin: string,
  timeoutMs: number,
): Promise<ExecOutcome> {
  return new Promise((resolve) => {
    const child = spawn(file, [], { env, stdio: ["pipe", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.stdout.setEncoding("utf8").on("data", (s: string) => {
      stdout += s;
    });
    child.stderr.setEncoding("utf8").on("data", (s: string) => {
      stderr += s;
    });
    child.stdin.on("error", () => {}); // EPIPE if it exits without reading
    child.on("error", (err) => {
      clearTimeout(timer);
      resolve({ code: -1, stdout, stderr: `${stderr}${err.message}` });
    });
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
    child.stdin.end(stdin);
  });
}

// ---------------------------------------------------------------------------
// Namespaces (made and removed outside the timed part, one `ip -batch` each way)

function ipBatch(lines: string[]): void {
  if (lines.length === 0) return;
  const r = spawnSync("ip", ["-force", "-batch", "-"], {
    input: `${lines.join("\n")}\n`,
    encoding: "utf8",
    timeout: 60_000,
  });
  if (r.status !== 0) throw new Error(`ip -batch: ${r.stderr || r.error?.message}`);
}

function makePods(side: Side, level: number, round: number | string, count: number): Pod[] {
  const pods: Pod[] = [];
  for (let i = 0; i < count; i++) {
    const id = `${side.letter}${level}-${round}-${i}`;
    const netns = `${netnsPrefix}${id}`;
    pods.push({
      name: `bench-${tag}-${id}`,
      containerId: `bench${tag}${id.replaceAll("-", "x")}`,
      netns,
      netnsPath: `/run/netns/${netns}`,
    });
  }
  ipBatch(pods.map((p) => `netns add ${p.netns}`));
  return pods;
}

/** Best effort: whatever is left is found by prefix and removed at the end. */
function removeNetns(names: string[]): void {
  try {
    ipBatch(names.map((n) => `netns del ${n}`));
  } catch {
    // Reported by the leftover check in cleanup().
  }
}

// ---------------------------------------------------------------------------
// Measuring

/**
 * One round: `concurrency` workers, worker w owning pods w, w+c, w+2c …, each
 * looping ADD → DEL. A failed ADD is still followed by a DEL (to clean up) but
 * the pod counts as neither sample nor throughput.
 */
async function runRound(
  side: Side,
  concurrency: number,
  pods: Pod[],
  into: Samples,
): Promise<void> {
  const workers = Math.min(concurrency, pods.length);
  const cpu0 = processTreeCpuMs();
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: workers }, async (_, w) => {
      for (let i = w; i < pods.length && !stopping; i += workers) {
        const pod = pods[i]!;
        const a0 = performance.now();
        let ok = await attempt(side, "ADD", pod);
        const a1 = performance.now();
        if (ok) into.add.push(a1 - a0);
        const addOk = ok;
        ok = await attempt(side, "DEL", pod);
        if (ok) into.del.push(performance.now() - a1);
        if (addOk && ok) into.pods++;
      }
    }),
  );
  into.wallMs += performance.now() - t0;
  into.cpuMs += processTreeCpuMs() - cpu0;
}

/** The bench process and the driver: their CPU, with everything they exec'd, is what a pod costs. */
const measuredPids: number[] = [process.pid];

/**
 * CPU time (user + system) of the measured processes and of every child they
 * have reaped, from /proc/<pid>/stat in USER_HZ ticks (10 ms on Linux). A Go
 * plugin waits for what it execs, so ptp's host-local is counted too. Kernel
 * threads (veth and RCU work) are not: they cost both sides alike. Read per
 * process rather than for the whole machine, so other work on a shared
 * machine stays out of the figure.
 */
function processTreeCpuMs(): number {
  let ticks = 0;
  for (const pid of measuredPids) {
    try {
      // Fields after "(comm) ": state is [0], utime [11], stime [12], cutime [13], cstime [14].
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      const f = stat.slice(stat.lastIndexOf(") ") + 2).split(" ");
      ticks += Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14]);
    } catch {
      // The driver is gone (a signal): its share is lost, the run is over anyway.
    }
  }
  return ticks * 10;
}

async function attempt(side: Side, verb: "ADD" | "DEL", pod: Pod): Promise<boolean> {
  try {
    await (verb === "ADD" ? side.add(pod) : side.del(pod));
    return true;
  } catch (err) {
    failures.push(`${side.label} ${verb}: ${err instanceof Error ? err.message : String(err)}`);
    if (failures.length > MAX_FAILURES) stopping = true;
    return false;
  }
}

/** Nearest-rank percentile of unsorted samples (p99 of 60 samples is the largest). */
function percentile(samples: readonly number[], p: number): number {
  if (samples.length === 0) return Number.NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

/** Median cost of Node spawning a do-nothing binary: the floor under each reference exec. */
async function spawnFloorMs(runs = 30): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    await execWithStdin("/bin/true", {}, "", 5000);
    times.push(performance.now() - t0);
  }
  return percentile(times, 50);
}

// ---------------------------------------------------------------------------
// Report

interface Row {
  side: Side["label"];
  concurrency: number;
  s: Samples;
}

function fmt(n: number, digits = 1): string {
  return Number.isFinite(n) ? n.toFixed(digits) : "-";
}

function printTable(rows: Row[]): void {
  const header = [
    "side",
    "conc",
    "pods",
    "ADD p50",
    "p90",
    "p99",
    "DEL p50",
    "p90",
    "p99",
    "pods/s",
    "CPU ms/pod",
  ];
  const lines = rows.map((r) => [
    r.side,
    String(r.concurrency),
    String(r.s.pods),
    fmt(percentile(r.s.add, 50)),
    fmt(percentile(r.s.add, 90)),
    fmt(percentile(r.s.add, 99)),
    fmt(percentile(r.s.del, 50)),
    fmt(percentile(r.s.del, 90)),
    fmt(percentile(r.s.del, 99)),
    fmt(throughput(r.s)),
    fmt(r.s.pods > 0 ? r.s.cpuMs / r.s.pods : Number.NaN),
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i]!.length)));
  const show = (cells: string[]) =>
    cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join("  ");
  say(show(header));
  for (const l of lines) say(show(l));
  say("(latencies in ms per call; pods/s = pods set up and torn down per second of wall time;");
  say(
    " CPU ms/pod = user+system CPU of the bench and driver processes and all they exec'd, per pod)",
  );
}

function throughput(s: Samples): number {
  return s.wallMs > 0 ? s.pods / (s.wallMs / 1000) : Number.NaN;
}

function printRatios(rows: Row[]): void {
  const find = (side: Side["label"], c: number) =>
    rows.find((r) => r.side === side && r.concurrency === c)?.s;
  const ratio = (
    what: string,
    c: number,
    value: (s: Samples) => number,
    target: number,
    atMost: boolean,
  ) => {
    const d = find("driver", c);
    const r = find("reference", c);
    if (!d || !r || d.pods === 0 || r.pods === 0) return;
    const x = value(d) / value(r);
    const pass = atMost ? x <= target : x >= target;
    say(
      `${what.padEnd(22)} driver/reference = ${fmt(x, 2).padStart(5)}   target ${atMost ? "≤" : "≥"} ${target.toFixed(2)}   ${Number.isFinite(x) && pass ? "PASS" : "MISS"}`,
    );
  };
  ratio("SetUpPod p50 @ c=1", 1, (s) => percentile(s.add, 50), TARGETS.addP50AtC1, true);
  ratio("TearDownPod p50 @ c=1", 1, (s) => percentile(s.del, 50), TARGETS.delP50AtC1, true);
  ratio("pods/s @ c=110", 110, throughput, TARGETS.throughputAtC110, false);
}

function say(line = ""): void {
  process.stdout.write(`${line}\n`);
}

// ---------------------------------------------------------------------------
// Leftovers and cleanup

function hostLinksHolding(address: string): string[] {
  const out =
    spawnSync("ip", ["-o", "-4", "addr", "show", "to", `${address}/32`], { encoding: "utf8" })
      .stdout ?? "";
  return out
    .split("\n")
    .map((l) => (l.split(/\s+/)[1] ?? "").split("@")[0] ?? "")
    .filter((n) => n !== "");
}

function leaseCount(dir: string): number {
  if (!existsSync(dir)) return 0;
  // host-local keeps one file per address, named by the address; lock and last_reserved_ip.* are not leases.
  return readdirSync(dir).filter((f) => /^[0-9a-f.:]+$/i.test(f) && f.includes(".")).length;
}

function bridgePorts(bridge: string): number {
  const out =
    spawnSync("ip", ["-o", "link", "show", "master", bridge], { encoding: "utf8" }).stdout ?? "";
  return out.split("\n").filter((l) => l.trim() !== "").length;
}

/** Everything this run may have left: namespaces (with the veths in them), ptp's host ends, temp dirs. */
async function cleanup(h: DriverHarness | undefined, refRoot: string): Promise<void> {
  if (h) await h.cleanup().catch(() => {});
  removeNetns(listNetns(netnsPrefix));
  for (const ns of listNetns(netnsPrefix)) spawnSync("ip", ["netns", "del", ns]);
  // A netns going away takes its veth end with it, and the host end follows, but
  // asynchronously: wait a bounded time, then delete what is still there.
  for (let i = 0; i < 50 && hostLinksHolding(REFERENCE_GATEWAY).length > 0; i++) await sleep(100);
  for (const link of hostLinksHolding(REFERENCE_GATEWAY)) deleteHostLink(link);
  rmSync(refRoot, { recursive: true, force: true });
}

// ---------------------------------------------------------------------------

function parseLevels(argv: string[]): readonly Level[] {
  const i = argv.indexOf("--levels");
  const arg = i >= 0 ? argv[i + 1] : argv.find((a) => a.startsWith("--levels="))?.slice(9);
  if (arg === undefined) return LEVELS;
  const wanted = arg.split(",").map(Number);
  const chosen = LEVELS.filter((l) => wanted.includes(l.concurrency));
  if (chosen.length !== wanted.length) {
    throw new Error(`--levels: choose from ${LEVELS.map((l) => l.concurrency).join(",")}`);
  }
  return chosen;
}

async function main(): Promise<number> {
  if (process.getuid?.() !== 0) {
    process.stderr.write("bench/pod-setup: needs root (network namespaces, veths, routes)\n");
    return 1;
  }
  if (!existsSync(PTP) || !existsSync(join(REFERENCE_PLUGIN_DIR, "host-local"))) {
    process.stderr.write(
      `bench/pod-setup: needs ${PTP} and host-local (Debian package containernetworking-plugins)\n`,
    );
    return 1;
  }
  const levels = parseLevels(process.argv.slice(2));
  const refRoot = mkdtempSync(join(tmpdir(), "cni-driver-bench-ref-"));
  const refNetwork = `bench-ref-${tag}`;
  let harness: DriverHarness | undefined;

  const onSignal = (sig: NodeJS.Signals) => {
    if (stopping) {
      process.stderr.write(`${sig} again: cleaning up now\n`);
      if (harness?.pid) spawnSync("kill", ["-KILL", String(harness.pid)]);
      void cleanup(harness, refRoot).finally(() => process.exit(130));
      return;
    }
    stopping = true;
    process.stderr.write(`\n${sig}: finishing the calls in flight, then cleaning up\n`);
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);

  const started = new Date();
  const rows: Row[] = [];
  try {
    const floor = await spawnFloorMs();
    harness = new DriverHarness({ subnetOctet: DRIVER_SUBNET_OCTET });
    await harness.writeDefaultConfig();
    await harness.start();
    if (harness.pid !== undefined) measuredPids.push(harness.pid);
    const sides = [driverSide(harness), referenceSide(refRoot, refNetwork)];

    say(`bench/pod-setup  ${started.toISOString()}`);
    say(
      `machine: ${availableParallelism()} cores (${cpus()[0]?.model.trim() ?? "?"}), Linux ${release()}, node ${process.version}, ${debVersion("containernetworking-plugins")}`,
    );
    say(`driver: ${harness.network} (built-in midonet, kernel datapath) on ${harness.subnet}`);
    say(`reference: ptp + host-local on ${REFERENCE_SUBNET}, exec'd directly (no shell)`);
    say(`Node spawn floor (/bin/true, p50): ${fmt(floor, 2)} ms per exec`);
    say(
      `plan: ${WARMUP_PODS} warm-up pods per side, then ${levels.map((l) => `c=${l.concurrency}: ${l.rounds}×${l.podsPerRound}`).join(", ")} pods per side, rounds in ABBA order`,
    );
    say();

    for (const side of sides) {
      const pods = makePods(side, 0, "w", WARMUP_PODS);
      await runRound(side, 1, pods, { add: [], del: [], pods: 0, wallMs: 0, cpuMs: 0 });
      removeNetns(pods.map((p) => p.netns));
    }

    for (const level of levels) {
      if (stopping) break;
      const bySide = new Map<Side["label"], Samples>();
      for (const side of sides)
        bySide.set(side.label, { add: [], del: [], pods: 0, wallMs: 0, cpuMs: 0 });
      for (let round = 0; round < level.rounds * 2 && !stopping; round++) {
        // ABBA: d r r d d r …
        const side = sides[Math.floor((round + 1) / 2) % 2]!;
        const pods = makePods(side, level.concurrency, round, level.podsPerRound);
        try {
          await sleep(SETTLE_MS);
          await runRound(side, level.concurrency, pods, bySide.get(side.label)!);
        } finally {
          removeNetns(pods.map((p) => p.netns));
        }
      }
      for (const side of sides) {
        if (bySide.get(side.label)!.pods === 0) continue;
        rows.push({ side: side.label, concurrency: level.concurrency, s: bySide.get(side.label)! });
      }
      if (!stopping) process.stderr.write(`  c=${level.concurrency} done\n`);
    }

    if (stopping) {
      say(
        failures.length > MAX_FAILURES
          ? `STOPPED after ${failures.length} failed calls: partial figures, not a result`
          : "INTERRUPTED: partial figures, not a result",
      );
    }
    printTable(rows);
    say();
    printRatios(rows);
    say();
    say(
      `left after the run: driver ${leaseCount(join(harness.dataDir, harness.network))} leases, ${bridgePorts(harness.bridge)} bridge ports; reference ${leaseCount(join(refRoot, refNetwork))} leases, ${hostLinksHolding(REFERENCE_GATEWAY).length} host veths`,
    );
  } finally {
    await cleanup(harness, refRoot);
  }
  say(`took ${fmt((Date.now() - started.getTime()) / 1000, 0)} s; cleaned up`);
  if (failures.length > 0) {
    process.stderr.write(
      `${failures.length} failed calls:\n  ${failures.slice(0, 10).join("\n  ")}\n`,
    );
    return 1;
  }
  return stopping ? 130 : 0;
}

function debVersion(pkg: string): string {
  // `dpkg-query -W` prints "<package>\t<version>".
  const r = spawnSync("dpkg-query", ["-W", pkg], { encoding: "utf8" });
  const version = r.status === 0 ? r.stdout.trim().split("\t")[1] : undefined;
  return `${pkg} ${version ?? "(version unknown)"}`;
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(
      `bench/pod-setup failed: ${err instanceof Error ? err.stack : String(err)}\n`,
    );
    process.exitCode = 1;
  },
);
