/**
 * bench/shim: what a runtime gets from exec'ing the shim, against what it gets
 * from the reference plugin (Debian's ptp + host-local, exec'd as libcni does),
 * every target a ratio from the same run:
 *
 *   ADD p50 at concurrency 1      shim ≤ 0.7 × reference
 *   pods/s at concurrency 110     shim ≥ 2 × reference (pods set up and torn down)
 *   VERSION p50                   shim ≤ 1.5 × host-local's
 *   peak RSS per exec             shim ≤ reference (ru_maxrss, through GNU time)
 *   the binary                    ≤ 2 MB, statically linked (no interpreter, no DT_NEEDED)
 *
 * Phases, in one run against one real driver:
 *
 *   c=1     iterations of ADD → 100 ms → DEL by three sides in rotating order:
 *           shim (dist/bin/cni-driver-shim exec'd exactly as a runtime execs a
 *           plugin), direct (the same request on the driver's socket from this
 *           process: shim − direct is what the exec costs), reference; then
 *           VERSION of the shim and of host-local
 *   c=110   110 workers looping ADD → DEL over their own pods, shim, direct and
 *           reference rounds in ABBA order, never at the same time
 *   RSS     a few execs of each side's ADD, DEL and VERSION under GNU time (untimed)
 *   binary  size, and its ELF headers
 *
 * Every pod gets a fresh netns, made before the clock starts. Run as root:
 * `npm run bench:shim` (`-- --iterations 20`; `-- --shim PATH` measures another
 * build, which must exist; by default dist/bin/cni-driver-shim, built first when
 * it is missing or older than its sources). Everything it makes (driver root,
 * namespaces, veths, leases) carries a random tag and is removed at the end,
 * also on failure or Ctrl-C.
 */

import { existsSync, statSync } from "node:fs";
import { resolve } from "node:path";
import { parseCniArgs } from "../src/cni/args.js";
import { messageOf } from "../src/common/errors.js";
import { API_VERSION, type PodRequest } from "../src/wire/types.js";
import { type DriverHarness, sleep } from "../test/support/driver-harness.js";
import { elfLinkage } from "../test/support/elf.js";
import { REFERENCE_PLUGIN_DIR } from "../test/support/requirements.js";
import { ensureShimBuilt, SHIM_TYPE } from "../test/support/runtimes.js";
import {
  BenchRun,
  type Side as BenchSide,
  CNI_VERSION,
  cniArgs,
  cniEnv,
  emptyRoundSamples,
  execWithStdin,
  expectExit0,
  expectResult,
  fmt,
  HOST_LOCAL,
  option,
  type Pod,
  PTP,
  peakRssKiB,
  percentile,
  printColumns,
  type RoundSamples,
  runtimeBaseEnv,
  type Session,
  say,
  socketSide,
  throughput,
} from "./common.js";

const DEFAULT_ITERATIONS = 40;
const WARMUP_ITERATIONS = 5;
/** c=110: rounds per side (ABBA: shim, reference, reference, shim, …) and pods per round. */
const HIGH_CONCURRENCY = 110;
const HIGH_ROUNDS_PER_SIDE = 2;
const HIGH_PODS_PER_ROUND = 220;
/** Execs per side and verb measured for peak RSS. */
const RSS_RUNS = 5;
/** Pause after making namespaces, so the kernel's work on them is not timed. */
const SETTLE_MS = 100;
/**
 * Untimed pause between a pod's ADD and its DEL at c=1, the same on every side:
 * how long the kernel takes to delete a veth depends on how long ago it was made.
 */
const POD_LIFETIME_MS = 100;
/** The shim waits this long for the driver: far more than a loaded 2-core machine needs. */
const SHIM_TIMEOUT_SECONDS = 120;

const TARGETS = {
  addP50AtC1: 0.7,
  throughputAtC110: 2.0,
  versionP50: 1.5,
  peakRss: 1.0,
  binaryBytes: 2_000_000,
};

type Side = BenchSide<"shim" | "direct" | "reference">;

const bench = new BenchRun({
  name: "bench/shim",
  netnsStem: "cnbs",
  driverOctet: 245,
  referenceOctet: 246,
  tempPrefix: "cni-driver-bench-shim-",
  inFlight: "the calls",
});

// ---------------------------------------------------------------------------
// The sides

/** The shim's conflist entry, as libcni hands it over: name and cniVersion injected. */
function shimConfig(h: DriverHarness): string {
  return JSON.stringify({
    cniVersion: CNI_VERSION,
    name: "bench-shim",
    type: SHIM_TYPE,
    socket: h.socket,
    stateDir: h.stateDir,
    timeoutSeconds: SHIM_TIMEOUT_SECONDS,
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
        await execWithStdin(shim, cniEnv(base, "ADD", p, REFERENCE_PLUGIN_DIR), config),
      );
    },
    async del(p) {
      expectExit0(
        "shim DEL",
        p,
        await execWithStdin(shim, cniEnv(base, "DEL", p, REFERENCE_PLUGIN_DIR), config),
      );
    },
  };
}

/** The request the shim sends for this pod, so the driver does the same work. */
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
  return socketSide("direct", "d", h, request);
}

/** CNI_COMMAND=VERSION alone: the process start and nothing else. */
async function version(file: string): Promise<void> {
  const out = await execWithStdin(file, { ...runtimeBaseEnv(), CNI_COMMAND: "VERSION" }, "");
  if (out.code !== 0 || !out.stdout.includes("supportedVersions")) {
    throw new Error(`${file} VERSION: exit ${out.code}: ${out.stdout}${out.stderr}`.trim());
  }
}

// ---------------------------------------------------------------------------
// c=1

interface LowSamples {
  byKey: Map<string, number[]>;
  overheadAdd: number[];
  overheadDel: number[];
}

function push(into: LowSamples, key: string, ms: number): void {
  into.byKey.set(key, [...(into.byKey.get(key) ?? []), ms]);
}

const get = (s: LowSamples, key: string): number[] => s.byKey.get(key) ?? [];

/**
 * One iteration: a fresh netns per side, each side's ADD → pause → DEL in an
 * order that rotates with the iteration, then the two VERSIONs. The shim and
 * direct calls of an iteration form a pair for the overhead.
 */
async function lowIteration(
  sides: readonly Side[],
  shim: string,
  iteration: number | string,
  into: LowSamples,
): Promise<void> {
  const pods = sides.map((s) => bench.pod(`${s.letter}${iteration}`));
  bench.addNetns(pods);
  try {
    await sleep(SETTLE_MS);
    const took = new Map<string, number>();
    const rotate = typeof iteration === "number" ? iteration : 0;
    for (let k = 0; k < sides.length && !bench.stopping; k++) {
      const i = (k + rotate) % sides.length;
      const side = sides[i]!;
      const add = await bench.timed(`${side.label} ADD`, () => side.add(pods[i]!));
      await sleep(POD_LIFETIME_MS);
      const del = await bench.timed(`${side.label} DEL`, () => side.del(pods[i]!));
      if (add === undefined || del === undefined) continue;
      push(into, `${side.label} ADD`, add);
      push(into, `${side.label} DEL`, del);
      took.set(`${side.label} ADD`, add);
      took.set(`${side.label} DEL`, del);
    }
    const sa = took.get("shim ADD");
    const da = took.get("direct ADD");
    const sd = took.get("shim DEL");
    const dd = took.get("direct DEL");
    if (sa !== undefined && da !== undefined && sd !== undefined && dd !== undefined) {
      into.overheadAdd.push(sa - da);
      into.overheadDel.push(sd - dd);
    }
    if (bench.stopping) return;
    const sv = await bench.timed("shim VERSION", () => version(shim));
    if (sv !== undefined) push(into, "shim VERSION", sv);
    const hv = await bench.timed("host-local VERSION", () => version(HOST_LOCAL));
    if (hv !== undefined) push(into, "host-local VERSION", hv);
  } finally {
    bench.removeNetns(pods.map((p) => p.netns));
  }
}

// ---------------------------------------------------------------------------
// c=110

/**
 * CPU is that of the bench and the driver, with everything they exec'd and
 * reaped (the shims, ptp and its host-local).
 */
async function highRounds(
  sides: readonly Side[],
  cpuPids: readonly number[],
): Promise<Map<string, RoundSamples>> {
  const out = new Map<string, RoundSamples>(sides.map((s) => [s.label, emptyRoundSamples()]));
  // ABBA: each side runs first as often as last, so drift hits both alike.
  const order: Side[] = [];
  for (let r = 0; r < HIGH_ROUNDS_PER_SIDE; r++) {
    order.push(...(r % 2 === 0 ? sides : [...sides].reverse()));
  }
  for (const [round, side] of order.entries()) {
    if (bench.stopping) break;
    const pods = Array.from({ length: HIGH_PODS_PER_ROUND }, (_, i) =>
      bench.pod(`${side.letter}h${round}-${i}`),
    );
    bench.addNetns(pods);
    try {
      await sleep(SETTLE_MS * 2);
      await bench.runRound(side, HIGH_CONCURRENCY, pods, out.get(side.label)!, cpuPids);
    } finally {
      bench.removeNetns(pods.map((p) => p.netns));
    }
    process.stderr.write(`  c=${HIGH_CONCURRENCY} round ${round + 1}/${order.length} done\n`);
  }
  return out;
}

// ---------------------------------------------------------------------------
// Peak RSS

interface RssSamples {
  [what: string]: number[];
}

/** RSS_RUNS pods per side, each ADD and DEL exec'd under GNU time; then VERSION of each. */
function measureRss(shim: string, s: Session): { rss: RssSamples; why?: string } {
  const rss: RssSamples = {};
  const base = runtimeBaseEnv();
  const shimConf = shimConfig(s.harness);
  const refConf = s.reference.config();
  const add = (what: string, r: { kib?: number; why?: string }) => {
    if (r.kib === undefined) throw new Error(`${what}: ${r.why}`);
    rss[what] = [...(rss[what] ?? []), r.kib];
  };
  try {
    for (let i = 0; i < RSS_RUNS && !bench.stopping; i++) {
      const pods = [bench.pod(`sm${i}`), bench.pod(`rm${i}`)];
      bench.addNetns(pods);
      try {
        const [sp, rp] = pods as [Pod, Pod];
        const env = (cmd: "ADD" | "DEL", p: Pod) => cniEnv(base, cmd, p, REFERENCE_PLUGIN_DIR);
        add("shim ADD", peakRssKiB(shim, env("ADD", sp), shimConf));
        add("shim DEL", peakRssKiB(shim, env("DEL", sp), shimConf));
        add("reference ADD (ptp)", peakRssKiB(PTP, env("ADD", rp), refConf));
        add("reference DEL (ptp)", peakRssKiB(PTP, env("DEL", rp), refConf));
        const v = { ...base, CNI_COMMAND: "VERSION" };
        add("shim VERSION", peakRssKiB(shim, v, ""));
        add("host-local VERSION", peakRssKiB(HOST_LOCAL, v, ""));
      } finally {
        bench.removeNetns(pods.map((p) => p.netns));
      }
    }
    return { rss };
  } catch (err) {
    return { rss, why: messageOf(err) };
  }
}

// ---------------------------------------------------------------------------
// Report

const verdicts: boolean[] = [];

function verdict(what: string, shown: string, target: string, pass: boolean): void {
  verdicts.push(pass);
  say(
    `${what.padEnd(30)} ${shown.padStart(12)}   target ${target.padEnd(22)} ${pass ? "PASS" : "FAIL"}`,
  );
}

function ratio(
  what: string,
  shim: number,
  reference: number,
  target: number,
  atMost: boolean,
): void {
  const x = shim / reference;
  const ok = Number.isFinite(x) && (atMost ? x <= target : x >= target);
  verdict(what, `${fmt(x, 2)}×`, `${atMost ? "≤" : "≥"} ${target.toFixed(2)}×`, ok);
}

const max = (s: readonly number[]): number => (s.length ? Math.max(...s) : Number.NaN);

// ---------------------------------------------------------------------------

function parseIterations(argv: string[]): number {
  const arg = option(argv, "--iterations");
  if (arg === undefined) return DEFAULT_ITERATIONS;
  const n = Number(arg);
  if (!Number.isInteger(n) || n < 1 || n > 1000) throw new Error("--iterations: 1 to 1000");
  return n;
}

/** `--shim PATH` measures another build; by default dist/bin's, rebuilt when stale. */
function shimPath(argv: string[]): string {
  const arg = option(argv, "--shim");
  if (arg === undefined) return ensureShimBuilt();
  if (!existsSync(arg)) throw new Error(`--shim: ${arg} does not exist`);
  return resolve(arg);
}

async function main(): Promise<number> {
  if (!bench.preflight()) return 1;
  const iterations = parseIterations(process.argv.slice(2));
  const shim = shimPath(process.argv.slice(2));
  return bench.session(async (s) => {
    const { harness, reference } = s;
    const shimS = shimSide(shim, harness);
    const refS = reference.side();
    const st = statSync(shim);
    const linkage = elfLinkage(shim);
    const isStatic = linkage.interpreter === undefined && linkage.needed.length === 0;
    bench.printHeader(
      s,
      `c=1: ${WARMUP_ITERATIONS} warm-up iterations, then ${iterations}, each ADD, ${POD_LIFETIME_MS} ms, DEL by shim, direct and reference (order rotating), then VERSION of shim and host-local; c=${HIGH_CONCURRENCY}: ${HIGH_ROUNDS_PER_SIDE}×${HIGH_PODS_PER_ROUND} pods per side (shim, direct, reference), ABBA; peak RSS: ${RSS_RUNS} execs per side and verb under GNU time`,
      [
        `shim: ${shim} (${st.size} bytes, ${isStatic ? "static" : `dynamic: ${linkage.interpreter ?? ""} ${linkage.needed.join(" ")}`.trim()}, built ${st.mtime.toISOString()})`,
      ],
    );

    const direct = directSide(harness);
    const lowSides: readonly Side[] = [shimS, direct, refS];
    const warm: LowSamples = { byKey: new Map(), overheadAdd: [], overheadDel: [] };
    for (let i = 0; i < WARMUP_ITERATIONS && !bench.stopping; i++) {
      await lowIteration(lowSides, shim, `w${i}`, warm);
    }
    const low: LowSamples = { byKey: new Map(), overheadAdd: [], overheadDel: [] };
    for (let i = 0; i < iterations && !bench.stopping; i++) {
      await lowIteration(lowSides, shim, i, low);
    }
    process.stderr.write("  c=1 done\n");
    const high = await highRounds([shimS, direct, refS], [process.pid, harness.pid ?? 0]);
    const { rss, why: rssWhy } = bench.stopping ? { rss: {}, why: "stopped" } : measureRss(shim, s);

    bench.printStopped();
    say("c=1 (ms per call: exec to exit for the execs; overhead: shim − direct per iteration)");
    const rows: Array<[string, readonly number[]]> = [
      ["shim ADD", get(low, "shim ADD")],
      ["direct ADD", get(low, "direct ADD")],
      ["reference ADD (ptp)", get(low, "reference ADD")],
      ["shim DEL", get(low, "shim DEL")],
      ["direct DEL", get(low, "direct DEL")],
      ["reference DEL (ptp)", get(low, "reference DEL")],
      ["overhead ADD (shim − direct)", low.overheadAdd],
      ["overhead DEL (shim − direct)", low.overheadDel],
      ["shim VERSION", get(low, "shim VERSION")],
      ["host-local VERSION", get(low, "host-local VERSION")],
    ];
    printColumns(
      ["what", "n", "p50", "p90", "p99"],
      rows.map(([what, v]) => [
        what,
        String(v.length),
        fmt(percentile(v, 50)),
        fmt(percentile(v, 90)),
        fmt(percentile(v, 99)),
      ]),
    );
    say();
    say(
      `c=${HIGH_CONCURRENCY} (pods/s: pods set up and torn down per second of wall time; CPU: bench, driver and all they exec'd, per pod)`,
    );
    printColumns(
      ["side", "pods", "pods/s", "ADD p50", "p90", "DEL p50", "p90", "CPU ms/pod"],
      [...high.entries()].map(([label, r]) => [
        label,
        String(r.pods),
        fmt(throughput(r)),
        fmt(percentile(r.add, 50)),
        fmt(percentile(r.add, 90)),
        fmt(percentile(r.del, 50)),
        fmt(percentile(r.del, 90)),
        fmt(r.pods > 0 ? r.cpuMs / r.pods : Number.NaN),
      ]),
    );
    say();
    say(
      `peak RSS per exec (KiB, ru_maxrss through GNU time)${rssWhy ? `: not measured: ${rssWhy}` : ""}`,
    );
    printColumns(
      ["what", "n", "p50", "max"],
      Object.entries(rss).map(([what, v]) => [
        what,
        String(v.length),
        fmt(percentile(v, 50), 0),
        fmt(max(v), 0),
      ]),
    );
    say();

    say("comparison (shim / reference, from this run)");
    const shimHigh = high.get("shim");
    const refHigh = high.get("reference");
    ratio(
      "ADD p50 @ c=1",
      percentile(get(low, "shim ADD"), 50),
      percentile(get(low, "reference ADD"), 50),
      TARGETS.addP50AtC1,
      true,
    );
    ratio(
      `pods/s @ c=${HIGH_CONCURRENCY}`,
      shimHigh ? throughput(shimHigh) : Number.NaN,
      refHigh ? throughput(refHigh) : Number.NaN,
      TARGETS.throughputAtC110,
      false,
    );
    ratio(
      "VERSION p50 (vs host-local)",
      percentile(get(low, "shim VERSION"), 50),
      percentile(get(low, "host-local VERSION"), 50),
      TARGETS.versionP50,
      true,
    );
    ratio(
      "peak RSS per exec (max)",
      max([...(rss["shim ADD"] ?? []), ...(rss["shim DEL"] ?? [])]),
      max([...(rss["reference ADD (ptp)"] ?? []), ...(rss["reference DEL (ptp)"] ?? [])]),
      TARGETS.peakRss,
      true,
    );
    verdict(
      "binary size",
      `${st.size} B`,
      `≤ ${TARGETS.binaryBytes} B`,
      st.size <= TARGETS.binaryBytes,
    );
    verdict("statically linked", isStatic ? "yes" : "no", "no interpreter, no DT_NEEDED", isStatic);
    say(`${verdicts.filter(Boolean).length} of ${verdicts.length} targets met`);
    say();
  });
}

bench.run(main);
