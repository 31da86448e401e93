/**
 * What the benches share: exec'ing a plugin as a runtime does, the reference
 * chain (Debian's ptp + host-local) they measure the driver against, per-pod
 * network namespaces, nearest-rank percentiles and the report's lines, and the
 * life of a run (root check, Ctrl-C, failures, cleanup, exit code).
 *
 * Everything a run makes carries its random tag, so its cleanup finds by name
 * whatever a failure or a signal left behind.
 */

import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { availableParallelism, cpus, release, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { performance } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";
import { execaSync } from "execa";
import { messageOf } from "../src/common/errors.js";
import { runProcess, spawnBackend } from "../src/driver/chain/plugin-process.js";
import type { PodRequest } from "../src/wire/types.js";
import { DriverHarness } from "../test/support/driver-harness.js";
import { deleteHostLink, listNetns, uniqueTag } from "../test/support/netns.js";
import { REFERENCE_PLUGIN_DIR } from "../test/support/requirements.js";

export const CNI_VERSION = "1.0.0";
export const PTP = join(REFERENCE_PLUGIN_DIR, "ptp");
export const HOST_LOCAL = join(REFERENCE_PLUGIN_DIR, "host-local");
/** Bound on every single call; a call that takes this long is a failure, not a sample. */
export const CALL_TIMEOUT_MS = 30_000;
/** Failed calls tolerated before the bench gives up. */
export const MAX_FAILURES = 5;

export interface Pod {
  name: string;
  containerId: string;
  netns: string;
  netnsPath: string;
}

/** One way of doing ADD and DEL for a pod. */
export interface Side<Label extends string = string> {
  label: Label;
  /** One letter in names, so a leftover says which side made it. */
  letter: string;
  add(pod: Pod): Promise<void>;
  del(pod: Pod): Promise<void>;
}

// ---------------------------------------------------------------------------
// Exec, as runtimes do it

export interface ExecOutcome {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * One exec as a runtime's libcni makes it: no shell, the config on stdin, the
 * result from stdout. Through the driver's own exec path (plugin-process.ts):
 * posix_spawn from the spawn addon, a clone(CLONE_VM | CLONE_VFORK) exec as Go's
 * os/exec in containerd or CRI-O does, so the reference does not pay the fork
 * of a large Node process that no runtime pays. Without the addon, Node's fork
 * (`exec path` in the header says which), and the reference is slower by that.
 */
export async function execWithStdin(
  file: string,
  env: NodeJS.ProcessEnv,
  stdin: string,
  timeoutMs = CALL_TIMEOUT_MS,
): Promise<ExecOutcome> {
  const defined: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) if (v !== undefined) defined[k] = v;
  const out = await runProcess({
    path: file,
    env: defined,
    stdin,
    timeoutMs,
    killGraceMs: 0,
    maxOutputBytes: 16 * 1024 * 1024,
  });
  if (out.spawnError !== undefined) return { code: -1, stdout: "", stderr: out.spawnError };
  const stderr = out.stopped ? `${out.stderr}timed out after ${timeoutMs} ms` : out.stderr;
  return { code: out.exitCode ?? null, stdout: out.stdout, stderr };
}

/** How execWithStdin execs here: "native" (posix_spawn) or "node" (fork), with the reason. */
export function execPath(): string {
  const b = spawnBackend();
  return b.name === "native" ? "posix_spawn (spawn addon)" : `Node's fork (${b.reason})`;
}

/**
 * The runtime's own environment, as libcni passes it to every plugin: no
 * NODE_EXTRA_CA_CERTS (runtimes do not set it, and it costs every Node start
 * ~60 ms) and no NODE_OPTIONS (a loader of this process is not the runtime's).
 */
export function runtimeBaseEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  delete env.NODE_EXTRA_CA_CERTS;
  delete env.NODE_OPTIONS;
  return env;
}

/** What containerd puts in CNI_ARGS for a pod sandbox. */
export function cniArgs(p: Pod): string {
  return `IgnoreUnknown=1;K8S_POD_NAMESPACE=bench;K8S_POD_NAME=${p.name};K8S_POD_INFRA_CONTAINER_ID=${p.containerId}`;
}

export function cniEnv(
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

export function expectExit0(what: string, p: Pod, out: ExecOutcome): void {
  if (out.code !== 0) {
    throw new Error(`${what} ${p.name}: exit ${out.code}: ${out.stdout}${out.stderr}`.trim());
  }
}

/** An ADD's stdout must be a result in the config's version, as a runtime parses it. */
export function expectResult(what: string, p: Pod, out: ExecOutcome): void {
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
// The driver, through its socket

/**
 * ADD and DEL as SetUpPod and TearDownPod on the driver's socket, through the
 * harness's DriverClient (already connected); a CNI error is a failed call.
 */
export function socketSide<Label extends string>(
  label: Label,
  letter: string,
  h: DriverHarness,
  request: (p: Pod) => Partial<PodRequest>,
): Side<Label> {
  return {
    label,
    letter,
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

/** The driver's side of a bench: pod `p` as a kubelet names it, eth0 in its netns. */
export function driverSide(h: DriverHarness): Side<"driver"> {
  const request = (p: Pod): Partial<PodRequest> => ({
    pod: { namespace: "bench", name: p.name, uid: "" },
    container_id: p.containerId,
    netns: p.netnsPath,
    ifname: "eth0",
  });
  return socketSide("driver", "d", h, request);
}

// ---------------------------------------------------------------------------
// The reference chain

/**
 * ptp with host-local as its IPAM on 10.244.<octet>.0/24: ptp execs host-local
 * itself, as in a libcni chain. Its leases live under a temp dir of its own.
 */
export class ReferenceChain {
  readonly subnet: string;
  /** host-local's default gateway, the address ptp puts on every host end. */
  readonly gateway: string;
  readonly root: string;
  readonly network: string;

  constructor(octet: number, tempPrefix: string, tag: string) {
    this.subnet = `10.244.${octet}.0/24`;
    this.gateway = `10.244.${octet}.1`;
    this.root = mkdtempSync(join(tmpdir(), tempPrefix));
    this.network = `bench-ref-${tag}`;
  }

  /** ptp's config on stdin, as libcni hands it over. */
  config(): string {
    return JSON.stringify({
      cniVersion: CNI_VERSION,
      name: this.network,
      type: "ptp",
      mtu: 1500,
      ipam: { type: "host-local", ranges: [[{ subnet: this.subnet }]], dataDir: this.root },
    });
  }

  side(): Side<"reference"> {
    const config = this.config();
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

  /** host-local keeps one file per address, named by the address; lock and last_reserved_ip.* are not leases. */
  leases(): number {
    const dir = join(this.root, this.network);
    if (!existsSync(dir)) return 0;
    return readdirSync(dir).filter((f) => /^[0-9a-f.:]+$/i.test(f) && f.includes(".")).length;
  }

  /** ptp's host ends: every host link holding the gateway address. */
  hostVeths(): string[] {
    const out =
      spawnSync("ip", ["-o", "-4", "addr", "show", "to", `${this.gateway}/32`], {
        encoding: "utf8",
      }).stdout ?? "";
    return out
      .split("\n")
      .map((l) => (l.split(/\s+/)[1] ?? "").split("@")[0] ?? "")
      .filter((n) => n !== "");
  }

  /**
   * Once the pods' namespaces are gone: a netns going away takes its veth end
   * with it, and the host end follows, but asynchronously; wait a bounded time,
   * then delete what is still there.
   */
  async cleanup(): Promise<void> {
    for (let i = 0; i < 50 && this.hostVeths().length > 0; i++) await sleep(100);
    for (const link of this.hostVeths()) deleteHostLink(link);
    rmSync(this.root, { recursive: true, force: true });
  }

  describe(): string {
    return `reference: ptp + host-local on ${this.subnet}, exec'd as a runtime does (no shell)`;
  }
}

// ---------------------------------------------------------------------------
// Namespaces (made and removed outside the timed part, one `ip -batch` each way)

export function ipBatch(lines: string[]): void {
  if (lines.length === 0) return;
  const r = spawnSync("ip", ["-force", "-batch", "-"], {
    input: `${lines.join("\n")}\n`,
    encoding: "utf8",
    timeout: 60_000,
  });
  if (r.status !== 0) throw new Error(`ip -batch: ${r.stderr || r.error?.message}`);
}

// ---------------------------------------------------------------------------
// Measuring

/** Nearest-rank percentile of unsorted samples (p99 of up to 100 samples is the largest). */
export function percentile(samples: readonly number[], p: number): number {
  if (samples.length === 0) return Number.NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

/** What rounds of ADD → DEL at one concurrency gave one side. */
export interface RoundSamples {
  add: number[];
  del: number[];
  /** Pods both set up and torn down. */
  pods: number;
  wallMs: number;
  /** CPU time of the measured processes and all they exec'd during the rounds (processCpuMs). */
  cpuMs: number;
}

export function emptyRoundSamples(): RoundSamples {
  return { add: [], del: [], pods: 0, wallMs: 0, cpuMs: 0 };
}

/** Pods set up and torn down per second of wall time. */
export function throughput(s: RoundSamples): number {
  return s.wallMs > 0 ? s.pods / (s.wallMs / 1000) : Number.NaN;
}

/**
 * The peak resident set of one exec, in KiB: the exec run under GNU time
 * (Debian package `time`), which reads it from wait4's rusage (ru_maxrss, the
 * largest of the process and the children it waited for). Untimed: time's own
 * exec would distort a latency. Undefined, with the reason in `why`, when it
 * could not be measured.
 */
export function peakRssKiB(
  file: string,
  env: NodeJS.ProcessEnv,
  stdin: string,
): { kib?: number; why?: string; stdout: string } {
  if (!existsSync(GNU_TIME))
    return { why: `${GNU_TIME} missing (Debian package time)`, stdout: "" };
  const out = join(mkdtempSync(join(tmpdir(), "cni-driver-bench-rss-")), "maxrss");
  try {
    const r = execaSync(GNU_TIME, ["-f", "%M", "-o", out, file], {
      env,
      extendEnv: false,
      input: stdin,
      timeout: CALL_TIMEOUT_MS,
      stripFinalNewline: false,
      reject: false,
    });
    if (r.exitCode !== 0) {
      const status = r.exitCode ?? (r.timedOut ? "timed out" : r.signal);
      return { why: `exit ${status}: ${r.stdout}${r.stderr}`, stdout: r.stdout };
    }
    const kib = Number(readFileSync(out, "utf8").trim().split("\n").pop());
    return Number.isFinite(kib)
      ? { kib, stdout: r.stdout }
      : { why: "no figure", stdout: r.stdout };
  } finally {
    rmSync(dirname(out), { recursive: true, force: true });
  }
}

const GNU_TIME = "/usr/bin/time";

/** Median cost of exec'ing a do-nothing binary through execWithStdin: the floor under every exec. */
export async function spawnFloorMs(runs = 30): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    await execWithStdin("/bin/true", {}, "", 5000);
    times.push(performance.now() - t0);
  }
  return percentile(times, 50);
}

/**
 * CPU time (user + system) of the processes and of every child they have
 * reaped, from /proc/<pid>/stat in USER_HZ ticks (10 ms on Linux). A process
 * that is gone (a signal) adds nothing: its share is lost, the run is over anyway.
 */
export function processCpuMs(pids: readonly number[]): number {
  let ticks = 0;
  for (const pid of pids) {
    try {
      // Fields after "(comm) ": state is [0], utime [11], stime [12], cutime [13], cstime [14].
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      const f = stat.slice(stat.lastIndexOf(") ") + 2).split(" ");
      ticks += Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14]);
    } catch {
      // Gone.
    }
  }
  return ticks * 10;
}

// ---------------------------------------------------------------------------
// Report

/** Runs `fn` over `items`, `workers` at a time, until done or `stopped()` says so. */
export async function inParallel<T>(
  items: readonly T[],
  workers: number,
  fn: (item: T) => Promise<unknown>,
  stopped: () => boolean = () => false,
): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(workers, items.length) }, async () => {
      while (next < items.length && !stopped()) await fn(items[next++] as T);
    }),
  );
}

export function fmt(n: number, digits = 1): string {
  return Number.isFinite(n) ? n.toFixed(digits) : "-";
}

export function say(line = ""): void {
  process.stdout.write(`${line}\n`);
}

/** A table: the first column left-aligned, the others right-aligned, two spaces apart. */
export function printColumns(header: string[], lines: string[][]): void {
  const widths = header.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i]!.length)));
  const show = (cells: string[]) =>
    cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join("  ");
  say(show(header));
  for (const l of lines) say(show(l));
}

function debVersion(pkg: string): string {
  // `dpkg-query -W` prints "<package>\t<version>".
  const r = spawnSync("dpkg-query", ["-W", pkg], { encoding: "utf8" });
  const v = r.status === 0 ? r.stdout.trim().split("\t")[1] : undefined;
  return `${pkg} ${v ?? "(version unknown)"}`;
}

/** The value of `--name V` or `--name=V`. */
export function option(argv: string[], name: string): string | undefined {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : argv.find((a) => a.startsWith(`${name}=`))?.slice(name.length + 1);
}

// ---------------------------------------------------------------------------
// A run

/** A bench, as its runs name and place what they make. */
export interface BenchSettings {
  /** As it is printed ("bench/shim"). */
  name: string;
  /** Starts the names of the run's namespaces. */
  netnsStem: string;
  /** The driver's pods on 10.244.<driverOctet>.0/24 … */
  driverOctet: number;
  /** … the reference's on 10.244.<referenceOctet>.0/24 (each /24 holds 253 pods). */
  referenceOctet: number;
  /** Of the reference chain's temp dir. */
  tempPrefix: string;
  /** What a first Ctrl-C waits for: "the call", "the calls". */
  inFlight: string;
}

/** What a bench measures with: a driver started, the reference chain, and the run's facts so far. */
export interface Session {
  harness: DriverHarness;
  reference: ReferenceChain;
  started: Date;
  /** spawnFloorMs() before the driver started. */
  floorMs: number;
}

/**
 * One run of a bench that sets pods up through the driver and through the
 * reference chain: its tag and namespaces, its failed calls, and whether it is
 * stopping (a signal, or more than MAX_FAILURES failures), which every loop
 * checks before its next call.
 */
export class BenchRun {
  readonly tag = uniqueTag();
  readonly netnsPrefix: string;
  readonly failures: string[] = [];
  stopping = false;

  constructor(private readonly settings: BenchSettings) {
    this.netnsPrefix = `${settings.netnsStem}-${this.tag}-`;
  }

  get name(): string {
    return this.settings.name;
  }

  /** The pod `id` names (a side's letter first), with its netns; not made yet. */
  pod(id: string): Pod {
    const netns = `${this.netnsPrefix}${id}`;
    return {
      name: `bench-${this.tag}-${id}`,
      containerId: `bench${this.tag}${id.replaceAll("-", "x")}`,
      netns,
      netnsPath: `/run/netns/${netns}`,
    };
  }

  addNetns(pods: readonly Pod[]): void {
    ipBatch(pods.map((p) => `netns add ${p.netns}`));
  }

  /** Best effort: whatever is left is found by prefix and removed in cleanup(). */
  removeNetns(names: readonly string[]): void {
    try {
      ipBatch(names.map((n) => `netns del ${n}`));
    } catch {
      // Reported by the leftover check.
    }
  }

  /** Runs `fn` and returns its duration in ms, or undefined (recorded as a failure) when it throws. */
  async timed(what: string, fn: () => Promise<void>): Promise<number | undefined> {
    const t0 = performance.now();
    try {
      await fn();
      return performance.now() - t0;
    } catch (err) {
      this.failures.push(`${what}: ${messageOf(err)}`);
      if (this.failures.length > MAX_FAILURES) this.stopping = true;
      return undefined;
    }
  }

  /**
   * One round: `concurrency` workers, worker w owning pods w, w+c, w+2c …, each
   * looping ADD → DEL. A failed ADD is still followed by a DEL (to clean up) but
   * the pod counts as neither sample nor throughput. CPU is that of `cpuPids`
   * and everything they exec'd.
   */
  async runRound(
    side: Side,
    concurrency: number,
    pods: readonly Pod[],
    into: RoundSamples,
    cpuPids: readonly number[] = [process.pid],
  ): Promise<void> {
    const workers = Math.min(concurrency, pods.length);
    const cpu0 = processCpuMs(cpuPids);
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: workers }, async (_, w) => {
        for (let i = w; i < pods.length && !this.stopping; i += workers) {
          const pod = pods[i]!;
          const add = await this.timed(`${side.label} ADD`, () => side.add(pod));
          if (add !== undefined) into.add.push(add);
          const del = await this.timed(`${side.label} DEL`, () => side.del(pod));
          if (del !== undefined) into.del.push(del);
          if (add !== undefined && del !== undefined) into.pods++;
        }
      }),
    );
    into.wallMs += performance.now() - t0;
    into.cpuMs += processCpuMs(cpuPids) - cpu0;
  }

  /** Root, and the reference plugins; false (said on stderr) when either is missing. */
  preflight(): boolean {
    if (process.getuid?.() !== 0) {
      process.stderr.write(`${this.name}: needs root (network namespaces, veths, routes)\n`);
      return false;
    }
    if (!existsSync(PTP) || !existsSync(HOST_LOCAL)) {
      process.stderr.write(
        `${this.name}: needs ${PTP} and ${HOST_LOCAL} (Debian package containernetworking-plugins)\n`,
      );
      return false;
    }
    return true;
  }

  /**
   * The life of a run: the reference chain's temp root, Ctrl-C handling, the
   * spawn floor, a driver started (with `driverFlags`; with `driverNode`, the compiled
   * dist/ on that Node, as the image runs it), then `measure`; then what is left is
   * counted, and everything removed (also after a failure). Resolves with the
   * exit code.
   */
  async session(
    measure: (s: Session) => Promise<void>,
    driverFlags: readonly string[] = [],
    driverNode?: string,
  ): Promise<number> {
    const o = this.settings;
    const reference = new ReferenceChain(o.referenceOctet, o.tempPrefix, this.tag);
    let harness: DriverHarness | undefined;
    this.stopOnSignals(o.inFlight, () => harness, reference);
    const started = new Date();
    try {
      const floorMs = await spawnFloorMs();
      harness = new DriverHarness({
        subnetOctet: o.driverOctet,
        extraFlags: [...driverFlags],
        ...(driverNode ? { nodeBinary: driverNode } : {}),
      });
      await harness.writeDefaultConfig();
      await harness.start();
      await measure({ harness, reference, started, floorMs });
      say(
        `left after the run: driver ${harness.leases().length} leases, ${harness.bridgePorts().length} bridge ports; reference ${reference.leases()} leases, ${reference.hostVeths().length} host veths`,
      );
    } finally {
      await this.cleanup(harness, reference);
    }
    say(`took ${fmt((Date.now() - started.getTime()) / 1000, 0)} s; cleaned up`);
    if (this.failures.length > 0) {
      process.stderr.write(
        `${this.failures.length} failed calls:\n  ${this.failures.slice(0, 10).join("\n  ")}\n`,
      );
      return 1;
    }
    return this.stopping ? 130 : 0;
  }

  /**
   * The first SIGINT or SIGTERM stops the run after `inFlight`, and the normal
   * cleanup follows; a second one kills the driver, cleans up at once and exits 130.
   */
  private stopOnSignals(
    inFlight: string,
    harness: () => DriverHarness | undefined,
    reference: ReferenceChain,
  ): void {
    const onSignal = (sig: NodeJS.Signals) => {
      if (this.stopping) {
        process.stderr.write(`${sig} again: cleaning up now\n`);
        const h = harness();
        if (h?.pid) spawnSync("kill", ["-KILL", String(h.pid)]);
        void this.cleanup(h, reference).finally(() => process.exit(130));
        return;
      }
      this.stopping = true;
      process.stderr.write(`\n${sig}: finishing ${inFlight} in flight, then cleaning up\n`);
    };
    process.on("SIGINT", onSignal);
    process.on("SIGTERM", onSignal);
  }

  /** Everything this run may have left: the driver's root, namespaces (with the veths in them), ptp's host ends, temp dirs. */
  private async cleanup(h: DriverHarness | undefined, reference: ReferenceChain): Promise<void> {
    if (h) await h.cleanup().catch(() => {});
    this.removeNetns(listNetns(this.netnsPrefix));
    for (const ns of listNetns(this.netnsPrefix)) spawnSync("ip", ["netns", "del", ns]);
    await reference.cleanup();
  }

  /**
   * The report's head: the machine, then `extra` (what is measured besides
   * driver and reference), driver, reference, spawn floor and `plan`.
   */
  printHeader(s: Session, plan: string, extra: readonly string[] = [], driverNote = ""): void {
    say(`${this.name}  ${s.started.toISOString()}`);
    say(
      `machine: ${availableParallelism()} cores (${cpus()[0]?.model.trim() ?? "?"}), Linux ${release()}, node ${process.version}, ${debVersion("containernetworking-plugins")}`,
    );
    for (const line of extra) say(line);
    say(
      `driver: ${s.harness.network} (built-in midonet, kernel datapath) on ${s.harness.subnet}${driverNote}`,
    );
    say(s.reference.describe());
    say(`exec path: ${execPath()}; floor (/bin/true, p50): ${fmt(s.floorMs, 2)} ms per exec`);
    say(`plan: ${plan}`);
    say();
  }

  /** Before the figures of a run that stopped early. */
  printStopped(): void {
    if (!this.stopping) return;
    say(
      this.failures.length > MAX_FAILURES
        ? `STOPPED after ${this.failures.length} failed calls: partial figures, not a result`
        : "INTERRUPTED: partial figures, not a result",
    );
  }

  /** Runs the bench's main and sets the exit code from it. */
  run(main: () => Promise<number>): void {
    main().then(
      (code) => {
        process.exitCode = code;
      },
      (err: unknown) => {
        process.stderr.write(
          `${this.name} failed: ${err instanceof Error ? err.stack : String(err)}\n`,
        );
        process.exitCode = 1;
      },
    );
  }
}
