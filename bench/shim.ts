/**
 * bench/shim: what the shim binary costs a runtime. In one run, interleaved:
 *
 *   shim       ADD then DEL by exec'ing dist/bin/cni-driver-shim exactly as a
 *              runtime does (CNI_* environment, the plugin's conflist entry on
 *              stdin, no NODE_EXTRA_CA_CERTS), against a real driver;
 *   direct     the same ADD and DEL through the same driver's socket, from this
 *              process with DriverClient, already connected;
 *   reference  Debian's ptp + host-local, exec'd as libcni does;
 *   VERSION    CNI_COMMAND=VERSION of the shim, and of host-local for scale.
 *
 * The shim's overhead is shim minus direct, paired per iteration (the two run
 * back to back against the same driver, so driver and kernel noise mostly
 * cancels). Targets: overhead p50 ≤ 40 ms for ADD and for DEL; shim VERSION
 * p50 ≤ 50 ms.
 *
 * Every pod gets a fresh netns, made before the clock starts, and lives 100 ms
 * (untimed) between its ADD and its DEL on every side. Run as root:
 * `npm run bench:shim` (optionally `-- --iterations 20`, or `-- --shim PATH` to
 * measure another build). Everything it makes (driver root, namespaces, veths,
 * leases) carries a random tag and is removed at the end, also on failure or
 * Ctrl-C.
 */
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { availableParallelism, cpus, release, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { performance } from "node:perf_hooks";
import { parseCniArgs } from "../src/cni/args.js";
import { API_VERSION, type PodRequest } from "../src/wire/types.js";
import { DriverHarness, sleep } from "../test/support/driver-harness.js";
import { deleteHostLink, listNetns, uniqueTag } from "../test/support/netns.js";
import { REFERENCE_PLUGIN_DIR } from "../test/support/requirements.js";
import { ensureShimBuilt, SHIM_TYPE } from "../test/support/runtimes.js";

/** The driver's pods on 10.244.245.0/24, the reference's on .246. */
const DRIVER_SUBNET_OCTET = 245;
const REFERENCE_SUBNET = "10.244.246.0/24";
const REFERENCE_GATEWAY = "10.244.246.1";
const PTP = join(REFERENCE_PLUGIN_DIR, "ptp");
const HOST_LOCAL = join(REFERENCE_PLUGIN_DIR, "host-local");
const CNI_VERSION = "1.0.0";

const DEFAULT_ITERATIONS = 40;
const WARMUP_ITERATIONS = 5;
/** Pause after making an iteration's namespaces, so the kernel's work on them is not timed. */
const SETTLE_MS = 100;
/**
 * Untimed pause between a pod's ADD and its DEL, the same on every side. How long
 * the kernel takes to delete a veth depends on how long ago it was made (its
 * IPv6 set-up and RCU work are still under way right after ADD): without the
 * pause the direct side, whose DEL follows its ADD at once, is timed against a
 * different kernel state than the execs, whose DEL comes a process start later.
 */
const POD_LIFETIME_MS = 100;
/** Bound on every single call; a call that takes this long is a failure, not a sample. */
const CALL_TIMEOUT_MS = 30_000;
/** Failed calls tolerated before the bench gives up. */
const MAX_FAILURES = 5;

const TARGETS = {
  /** Shim minus direct, p50 of the per-iteration differences, for ADD and for DEL. */
  overheadP50Ms: 40,
  versionP50Ms: 50,
};

interface Pod {
  name: string;
  containerId: string;
  netns: string;
  netnsPath: string;
}

/** One way of doing ADD and DEL for a pod. */
interface Side {
  label: "shim" | "direct" | "reference";
  /** One letter in names, so a leftover says which side made it. */
  letter: "s" | "d" | "r";
  add(pod: Pod): Promise<void>;
  del(pod: Pod): Promise<void>;
}

type SampleKey = `${Side["label"]} ${"ADD" | "DEL"}` | "shim VERSION" | "host-local VERSION";

const tag = uniqueTag();
const netnsPrefix = `cnbs-${tag}-`;
const failures: string[] = [];
let stopping = false;

// ---------------------------------------------------------------------------
// Exec, as runtimes do it

interface ExecOutcome {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * A bare `spawn` (no shell, no exec library): the closest Node has to libcni's
 * pkg/invoke fork/exec. Resolves when the child has exited and its pipes closed.
 */
function execWithStdin(
  file: string,
  env: NodeJS.ProcessEnv,
  stdin: string,
  timeoutMs = CALL_TIMEOUT_MS,
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
    child.stdin.on("error", () => {}); // EPIPE if it exits without reading (VERSION)
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

/**
 * The runtime's own environment, as libcni passes it to every plugin: no
 * NODE_EXTRA_CA_CERTS (runtimes do not set it, and it costs every Node start
 * ~60 ms) and no NODE_OPTIONS (a loader of this process is not the runtime's).
 */
function runtimeBaseEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  delete env.NODE_EXTRA_CA_CERTS;
  delete env.NODE_OPTIONS;
  return env;
}

/** What containerd puts in CNI_ARGS for a pod sandbox. */
function cniArgs(p: Pod): string {
  return `IgnoreUnknown=1;K8S_POD_NAMESPACE=bench;K8S_POD_NAME=${p.name};K8S_POD_INFRA_CONTAINER_ID=${p.containerId}`;
}

function cniEnv(
  base: NodeJS.ProcessEnv,
  command: "ADD" | "DEL",
  p: Pod,
  cniPath: string,
): NodeJS.ProcessEnv {
  return {
    ...base,
    CNI_COMMAND: command,
    CNI_CONTAINERID: p.containerId,
    CNI_NETNS: p.netnsPath,
    CNI_IFNAME: "eth0",
    CNI_ARGS: cniArgs(p),
    CNI_PATH: cniPath,
  };
}

function expectExit0(what: string, p: Pod, out: ExecOutcome): void {
  if (out.code !== 0) {
    throw new Error(`${what} ${p.name}: exit ${out.code}: ${out.stdout}${out.stderr}`.trim());
  }
}

/** An ADD's stdout must be a result in the config's version, as a runtime parses it. */
function expectResult(what: string, p: Pod, out: ExecOutcome): void {
  expectExit0(what, p, out);
  let version: unknown;
  try {
    version = (JSON.parse(out.stdout) as { cniVersion?: unknown }).cniVersion;
  } catch {
    version = undefined;
  }
  if (version !== CNI_VERSION) throw new Error(`${what} ${p.name}: not a result: ${out.stdout}`);
}

// ---------------------------------------------------------------------------
// The three sides

/** The shim's conflist entry, as libcni hands it over: name and cniVersion injected. */
function shimConfig(h: DriverHarness): string {
  return JSON.stringify({
    cniVersion: CNI_VERSION,
    name: "bench-shim",
    type: SHIM_TYPE,
    socket: h.socket,
    stateDir: h.stateDir,
  });
}

function shimSide(shim: string, h: DriverHarness): Side {
  const config = shimConfig(h);
  const base = runtimeBaseEnv();
  return {
    label: "shim",
    letter: "s",
    async add(p) {
      expectResult(
        "shim ADD",
        p,
        await execWithStdin(shim, cniEnv(base, "ADD", p, "/opt/cni/bin"), config),
      );
    },
    async del(p) {
      expectExit0(
        "shim DEL",
        p,
        await execWithStdin(shim, cniEnv(base, "DEL", p, "/opt/cni/bin"), config),
      );
    },
  };
}

/** The request the shim would send for this pod (shim.ts podRequest), so the driver does the same work. */
function directSide(h: DriverHarness): Side {
  const stdin = Buffer.from(shimConfig(h));
  const request = (p: Pod): PodRequest => ({
    api_version: API_VERSION,
    pod: null,
    container_id: p.containerId,
    netns: p.netnsPath,
    ifname: "eth0",
    network: "",
    cni_version: CNI_VERSION,
    cni_args: parseCniArgs(cniArgs(p)).map(([key, value]) => ({ key, value })),
    capabilities: null,
    stdin_config: stdin,
  });
  return {
    label: "direct",
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

/** ptp with host-local as its IPAM; ptp execs host-local itself, as in a libcni chain. */
function referenceSide(dataDir: string, network: string): Side {
  const config = JSON.stringify({
    cniVersion: CNI_VERSION,
    name: network,
    type: "ptp",
    mtu: 1500,
    ipam: { type: "host-local", ranges: [[{ subnet: REFERENCE_SUBNET }]], dataDir },
  });
  const base = runtimeBaseEnv();
  return {
    label: "reference",
    letter: "r",
    async add(p) {
      const out = await execWithStdin(PTP, cniEnv(base, "ADD", p, REFERENCE_PLUGIN_DIR), config);
      expectResult("ptp ADD", p, out);
    },
    async del(p) {
      const out = await execWithStdin(PTP, cniEnv(base, "DEL", p, REFERENCE_PLUGIN_DIR), config);
      expectExit0("ptp DEL", p, out);
    },
  };
}

/** CNI_COMMAND=VERSION alone: the process start and nothing else. */
async function version(file: string): Promise<void> {
  const out = await execWithStdin(file, { ...runtimeBaseEnv(), CNI_COMMAND: "VERSION" }, "");
  if (out.code !== 0 || !out.stdout.includes("supportedVersions")) {
    throw new Error(`${file} VERSION: exit ${out.code}: ${out.stdout}${out.stderr}`.trim());
  }
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

function podFor(side: Side, iteration: number | string): Pod {
  const id = `${side.letter}${iteration}`;
  const netns = `${netnsPrefix}${id}`;
  return {
    name: `bench-${tag}-${id}`,
    containerId: `bench${tag}${id}`,
    netns,
    netnsPath: `/run/netns/${netns}`,
  };
}

/** Best effort: whatever is left is found by prefix and removed at the end. */
function removeNetns(names: string[]): void {
  try {
    ipBatch(names.map((n) => `netns del ${n}`));
  } catch {
    // Reported by the leftover check.
  }
}

// ---------------------------------------------------------------------------
// Measuring

class Samples {
  private readonly byKey = new Map<SampleKey, number[]>();

  add(key: SampleKey, ms: number): void {
    const list = this.byKey.get(key) ?? [];
    list.push(ms);
    this.byKey.set(key, list);
  }

  get(key: SampleKey): number[] {
    return this.byKey.get(key) ?? [];
  }
}

/** Runs `fn` and returns its duration in ms, or undefined (recorded as a failure) when it throws. */
async function timed(what: string, fn: () => Promise<void>): Promise<number | undefined> {
  const t0 = performance.now();
  try {
    await fn();
    return performance.now() - t0;
  } catch (err) {
    failures.push(`${what}: ${err instanceof Error ? err.message : String(err)}`);
    if (failures.length > MAX_FAILURES) stopping = true;
    return undefined;
  }
}

/**
 * One iteration: a fresh netns per side, then each side's ADD → pause → DEL in an order
 * that rotates with the iteration (so no side always runs first, or always right
 * after another), then the two VERSIONs. The shim and direct samples of an
 * iteration form a pair; a pair with a failed call is dropped from the overhead.
 */
async function runIteration(
  sides: readonly Side[],
  shim: string,
  iteration: number | string,
  rotate: number,
  into: Samples,
  pairs: { add: number[]; del: number[] },
): Promise<void> {
  const pods = sides.map((s) => podFor(s, iteration));
  ipBatch(pods.map((p) => `netns add ${p.netns}`));
  try {
    await sleep(SETTLE_MS);
    const took = new Map<string, number | undefined>();
    for (let k = 0; k < sides.length && !stopping; k++) {
      const i = (k + rotate) % sides.length;
      const side = sides[i]!;
      const pod = pods[i]!;
      const add = await timed(`${side.label} ADD`, () => side.add(pod));
      await sleep(POD_LIFETIME_MS);
      // A failed ADD is still followed by a DEL, to clean up; neither is a sample.
      const del = await timed(`${side.label} DEL`, () => side.del(pod));
      if (add !== undefined && del !== undefined) {
        into.add(`${side.label} ADD`, add);
        into.add(`${side.label} DEL`, del);
        took.set(`${side.label} ADD`, add);
        took.set(`${side.label} DEL`, del);
      }
    }
    const pair = (verb: "ADD" | "DEL") => {
      const s = took.get(`shim ${verb}`);
      const d = took.get(`direct ${verb}`);
      return s !== undefined && d !== undefined ? s - d : undefined;
    };
    const addDiff = pair("ADD");
    const delDiff = pair("DEL");
    if (addDiff !== undefined && delDiff !== undefined) {
      pairs.add.push(addDiff);
      pairs.del.push(delDiff);
    }
    if (stopping) return;
    const sv = await timed("shim VERSION", () => version(shim));
    if (sv !== undefined) into.add("shim VERSION", sv);
    const hv = await timed("host-local VERSION", () => version(HOST_LOCAL));
    if (hv !== undefined) into.add("host-local VERSION", hv);
  } finally {
    removeNetns(pods.map((p) => p.netns));
  }
}

/** Nearest-rank percentile of unsorted samples (p99 of 40 samples is the largest). */
function percentile(samples: readonly number[], p: number): number {
  if (samples.length === 0) return Number.NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

/** Median cost of Node spawning a do-nothing binary: the floor under every exec here. */
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

function fmt(n: number, digits = 1): string {
  return Number.isFinite(n) ? n.toFixed(digits) : "-";
}

function say(line = ""): void {
  process.stdout.write(`${line}\n`);
}

function printTable(rows: Array<[string, readonly number[]]>): void {
  const header = ["what", "n", "p50", "p90", "p99"];
  const lines = rows.map(([what, s]) => [
    what,
    String(s.length),
    fmt(percentile(s, 50)),
    fmt(percentile(s, 90)),
    fmt(percentile(s, 99)),
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i]!.length)));
  const show = (cells: string[]) =>
    cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join("  ");
  say(show(header));
  for (const l of lines) say(show(l));
}

function verdict(what: string, value: number, target: number): void {
  const pass = Number.isFinite(value) && value <= target;
  say(
    `${what.padEnd(34)} ${fmt(value).padStart(6)} ms   target ≤ ${target} ms   ${pass ? "PASS" : "MISS"}`,
  );
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

/** Everything this run may have left: namespaces (with the veths in them), ptp's host ends, temp dirs. */
async function cleanup(h: DriverHarness | undefined, refRoot: string): Promise<void> {
  if (h) await h.cleanup().catch(() => {});
  removeNetns(listNetns(netnsPrefix));
  for (const ns of listNetns(netnsPrefix)) spawnSync("ip", ["netns", "del", ns]);
  // The host end of a veth goes with its netns, but asynchronously: wait a
  // bounded time, then delete what is still there.
  for (let i = 0; i < 50 && hostLinksHolding(REFERENCE_GATEWAY).length > 0; i++) await sleep(100);
  for (const link of hostLinksHolding(REFERENCE_GATEWAY)) deleteHostLink(link);
  rmSync(refRoot, { recursive: true, force: true });
}

// ---------------------------------------------------------------------------

/** The value of `--name V` or `--name=V`. */
function option(argv: string[], name: string): string | undefined {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : argv.find((a) => a.startsWith(`${name}=`))?.slice(name.length + 1);
}

function parseIterations(argv: string[]): number {
  const arg = option(argv, "--iterations");
  if (arg === undefined) return DEFAULT_ITERATIONS;
  const n = Number(arg);
  if (!Number.isInteger(n) || n < 1 || n > 1000) throw new Error("--iterations: 1 to 1000");
  return n;
}

/** `--shim PATH` measures another build (an older one, say); by default dist/bin's, rebuilt when stale. */
function shimPath(argv: string[]): string {
  const arg = option(argv, "--shim");
  if (arg === undefined) return ensureShimBuilt();
  if (!existsSync(arg)) throw new Error(`--shim: ${arg} does not exist`);
  return resolve(arg);
}

function debVersion(pkg: string): string {
  // `dpkg-query -W` prints "<package>\t<version>".
  const r = spawnSync("dpkg-query", ["-W", pkg], { encoding: "utf8" });
  const v = r.status === 0 ? r.stdout.trim().split("\t")[1] : undefined;
  return `${pkg} ${v ?? "(version unknown)"}`;
}

async function main(): Promise<number> {
  if (process.getuid?.() !== 0) {
    process.stderr.write("bench/shim: needs root (network namespaces, veths, routes)\n");
    return 1;
  }
  if (!existsSync(PTP) || !existsSync(HOST_LOCAL)) {
    process.stderr.write(
      `bench/shim: needs ${PTP} and ${HOST_LOCAL} (Debian package containernetworking-plugins)\n`,
    );
    return 1;
  }
  const iterations = parseIterations(process.argv.slice(2));
  const shim = shimPath(process.argv.slice(2));
  const refRoot = mkdtempSync(join(tmpdir(), "cni-driver-bench-shim-"));
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
    process.stderr.write(`\n${sig}: finishing the call in flight, then cleaning up\n`);
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);

  const started = new Date();
  const samples = new Samples();
  const pairs = { add: [] as number[], del: [] as number[] };
  try {
    const floor = await spawnFloorMs();
    harness = new DriverHarness({ subnetOctet: DRIVER_SUBNET_OCTET });
    await harness.writeDefaultConfig();
    await harness.start();
    const sides: readonly Side[] = [
      shimSide(shim, harness),
      directSide(harness),
      referenceSide(refRoot, refNetwork),
    ];
    const st = statSync(shim);

    say(`bench/shim  ${started.toISOString()}`);
    say(
      `machine: ${availableParallelism()} cores (${cpus()[0]?.model.trim() ?? "?"}), Linux ${release()}, node ${process.version}, ${debVersion("containernetworking-plugins")}`,
    );
    say(
      `shim: ${shim} (${Math.round(st.size / 2 ** 20)} MB, built ${st.mtime.toISOString()}), exec'd without NODE_EXTRA_CA_CERTS${process.env.NODE_EXTRA_CA_CERTS ? " (set in this shell, removed for every exec)" : ""}`,
    );
    say(`driver: ${harness.network} (built-in midonet, kernel datapath) on ${harness.subnet}`);
    say(`reference: ptp + host-local on ${REFERENCE_SUBNET}, exec'd directly (no shell)`);
    say(`Node spawn floor (/bin/true, p50): ${fmt(floor, 2)} ms per exec`);
    say(
      `plan: ${WARMUP_ITERATIONS} warm-up iterations, then ${iterations}, each: ADD, ${POD_LIFETIME_MS} ms, DEL by shim, direct and reference (order rotating), then VERSION of shim and host-local`,
    );
    say();

    const warmup = new Samples();
    const warmPairs = { add: [] as number[], del: [] as number[] };
    for (let i = 0; i < WARMUP_ITERATIONS && !stopping; i++) {
      await runIteration(sides, shim, `w${i}`, i, warmup, warmPairs);
    }
    for (let i = 0; i < iterations && !stopping; i++) {
      await runIteration(sides, shim, i, i, samples, pairs);
    }

    if (stopping) {
      say(
        failures.length > MAX_FAILURES
          ? `STOPPED after ${failures.length} failed calls: partial figures, not a result`
          : "INTERRUPTED: partial figures, not a result",
      );
    }
    printTable([
      ["shim ADD", samples.get("shim ADD")],
      ["direct ADD", samples.get("direct ADD")],
      ["reference ADD (ptp)", samples.get("reference ADD")],
      ["shim DEL", samples.get("shim DEL")],
      ["direct DEL", samples.get("direct DEL")],
      ["reference DEL (ptp)", samples.get("reference DEL")],
      ["overhead ADD (shim − direct)", pairs.add],
      ["overhead DEL (shim − direct)", pairs.del],
      ["shim VERSION", samples.get("shim VERSION")],
      ["host-local VERSION", samples.get("host-local VERSION")],
    ]);
    say("(ms per call, exec to exit for the execs; overhead: per-iteration differences)");
    say();
    verdict("shim overhead ADD p50", percentile(pairs.add, 50), TARGETS.overheadP50Ms);
    verdict("shim overhead DEL p50", percentile(pairs.del, 50), TARGETS.overheadP50Ms);
    verdict("shim VERSION p50", percentile(samples.get("shim VERSION"), 50), TARGETS.versionP50Ms);
    say();
    say(
      `left after the run: driver ${harness.leases().length} leases, ${harness.bridgePorts().length} bridge ports; reference ${leaseCount(join(refRoot, refNetwork))} leases, ${hostLinksHolding(REFERENCE_GATEWAY).length} host veths`,
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

main().then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(`bench/shim failed: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exitCode = 1;
  },
);
