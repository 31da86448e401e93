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
import { existsSync, statSync } from "node:fs";
import { resolve } from "node:path";
import { parseCniArgs } from "../src/cni/args.js";
import { API_VERSION, type PodRequest } from "../src/wire/types.js";
import { type DriverHarness, sleep } from "../test/support/driver-harness.js";
import { ensureShimBuilt, SHIM_TYPE } from "../test/support/runtimes.js";
import {
  BenchRun,
  type Side as BenchSide,
  CNI_VERSION,
  cniArgs,
  cniEnv,
  execWithStdin,
  expectExit0,
  expectResult,
  fmt,
  HOST_LOCAL,
  option,
  type Pod,
  percentile,
  printColumns,
  runtimeBaseEnv,
  say,
  socketSide,
} from "./common.js";

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

const TARGETS = {
  /** Shim minus direct, p50 of the per-iteration differences, for ADD and for DEL. */
  overheadP50Ms: 40,
  versionP50Ms: 50,
};

type Side = BenchSide<"shim" | "direct" | "reference">;

type SampleKey = `${Side["label"]} ${"ADD" | "DEL"}` | "shim VERSION" | "host-local VERSION";

const bench = new BenchRun({
  name: "bench/shim",
  netnsStem: "cnbs",
  driverOctet: 245,
  referenceOctet: 246,
  tempPrefix: "cni-driver-bench-shim-",
  inFlight: "the call",
});

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
  const pods = sides.map((s) => bench.pod(`${s.letter}${iteration}`));
  bench.addNetns(pods);
  try {
    await sleep(SETTLE_MS);
    const took = new Map<string, number | undefined>();
    for (let k = 0; k < sides.length && !bench.stopping; k++) {
      const i = (k + rotate) % sides.length;
      const side = sides[i]!;
      const pod = pods[i]!;
      const add = await bench.timed(`${side.label} ADD`, () => side.add(pod));
      await sleep(POD_LIFETIME_MS);
      // A failed ADD is still followed by a DEL, to clean up; neither is a sample.
      const del = await bench.timed(`${side.label} DEL`, () => side.del(pod));
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
    if (bench.stopping) return;
    const sv = await bench.timed("shim VERSION", () => version(shim));
    if (sv !== undefined) into.add("shim VERSION", sv);
    const hv = await bench.timed("host-local VERSION", () => version(HOST_LOCAL));
    if (hv !== undefined) into.add("host-local VERSION", hv);
  } finally {
    bench.removeNetns(pods.map((p) => p.netns));
  }
}

// ---------------------------------------------------------------------------
// Report

function printTable(rows: Array<[string, readonly number[]]>): void {
  const header = ["what", "n", "p50", "p90", "p99"];
  const lines = rows.map(([what, s]) => [
    what,
    String(s.length),
    fmt(percentile(s, 50)),
    fmt(percentile(s, 90)),
    fmt(percentile(s, 99)),
  ]);
  printColumns(header, lines);
}

function verdict(what: string, value: number, target: number): void {
  const pass = Number.isFinite(value) && value <= target;
  say(
    `${what.padEnd(34)} ${fmt(value).padStart(6)} ms   target ≤ ${target} ms   ${pass ? "PASS" : "MISS"}`,
  );
}

// ---------------------------------------------------------------------------

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

async function main(): Promise<number> {
  if (!bench.preflight()) return 1;
  const iterations = parseIterations(process.argv.slice(2));
  const shim = shimPath(process.argv.slice(2));
  return bench.session(async (s) => {
    const { harness, reference } = s;
    const sides: readonly Side[] = [shimSide(shim, harness), directSide(harness), reference.side()];
    const st = statSync(shim);
    bench.printHeader(
      s,
      `${WARMUP_ITERATIONS} warm-up iterations, then ${iterations}, each: ADD, ${POD_LIFETIME_MS} ms, DEL by shim, direct and reference (order rotating), then VERSION of shim and host-local`,
      [
        `shim: ${shim} (${Math.round(st.size / 2 ** 20)} MB, built ${st.mtime.toISOString()}), exec'd without NODE_EXTRA_CA_CERTS${process.env.NODE_EXTRA_CA_CERTS ? " (set in this shell, removed for every exec)" : ""}`,
      ],
    );

    const warmup = new Samples();
    const warmPairs = { add: [] as number[], del: [] as number[] };
    for (let i = 0; i < WARMUP_ITERATIONS && !bench.stopping; i++) {
      await runIteration(sides, shim, `w${i}`, i, warmup, warmPairs);
    }
    const samples = new Samples();
    const pairs = { add: [] as number[], del: [] as number[] };
    for (let i = 0; i < iterations && !bench.stopping; i++) {
      await runIteration(sides, shim, i, i, samples, pairs);
    }

    bench.printStopped();
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
  });
}

bench.run(main);
