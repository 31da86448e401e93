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
 * Run as root: `npm run bench:pod-setup` (optionally `-- --levels 1,16`, and
 * `-- --host-local exec` for the driver exec'ing Debian's host-local binary
 * instead of running it in-process, its default).
 * Everything it makes (driver root, namespaces, veths, leases) carries a random
 * tag and is removed at the end, also on failure or Ctrl-C.
 */
import { sleep } from "../test/support/driver-harness.js";
import {
  BenchRun,
  type Side as BenchSide,
  driverSide,
  emptyRoundSamples,
  fmt,
  option,
  type Pod,
  percentile,
  printColumns,
  type RoundSamples,
  say,
  throughput,
} from "./common.js";

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

const TARGETS = {
  addP50AtC1: 0.6,
  delP50AtC1: 1.0,
  throughputAtC110: 2.0,
};

type Side = BenchSide<"driver" | "reference">;

/** CPU time is that of the bench, the driver and all they exec'd during the rounds (see measuredPids). */
type Samples = RoundSamples;

const bench = new BenchRun({
  name: "bench/pod-setup",
  netnsStem: "cnb",
  driverOctet: 240,
  referenceOctet: 241,
  tempPrefix: "cni-driver-bench-ref-",
  inFlight: "the calls",
});

// ---------------------------------------------------------------------------
// The two sides (the driver's: driverSide in common.ts)

function makePods(side: Side, level: number, round: number | string, count: number): Pod[] {
  const pods = Array.from({ length: count }, (_, i) =>
    bench.pod(`${side.letter}${level}-${round}-${i}`),
  );
  bench.addNetns(pods);
  return pods;
}

// ---------------------------------------------------------------------------
// Measuring

/**
 * The bench process and the driver: their CPU, with everything they exec'd, is
 * what a pod costs. A Go plugin waits for what it execs, so ptp's host-local is
 * counted too. Kernel threads (veth and RCU work) are not: they cost both sides
 * alike. Read per process rather than for the whole machine, so other work on a
 * shared machine stays out of the figure.
 */
const measuredPids: number[] = [process.pid];

// ---------------------------------------------------------------------------
// Report

interface Row {
  side: Side["label"];
  concurrency: number;
  s: Samples;
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
  printColumns(header, lines);
  say("(latencies in ms per call; pods/s = pods set up and torn down per second of wall time;");
  say(
    " CPU ms/pod = user+system CPU of the bench and driver processes and all they exec'd, per pod)",
  );
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

// ---------------------------------------------------------------------------

function parseLevels(argv: string[]): readonly Level[] {
  const arg = option(argv, "--levels");
  if (arg === undefined) return LEVELS;
  const wanted = arg.split(",").map(Number);
  const chosen = LEVELS.filter((l) => wanted.includes(l.concurrency));
  if (chosen.length !== wanted.length) {
    throw new Error(`--levels: choose from ${LEVELS.map((l) => l.concurrency).join(",")}`);
  }
  return chosen;
}

/** `--host-local in-process|exec`: how the driver runs host-local (its own flag, same default). */
function parseHostLocal(argv: string[]): "exec" | "in-process" {
  const mode = option(argv, "--host-local") ?? "in-process";
  if (mode !== "exec" && mode !== "in-process")
    throw new Error(`--host-local: "exec" or "in-process", not ${JSON.stringify(mode)}`);
  return mode;
}

async function main(): Promise<number> {
  if (!bench.preflight()) return 1;
  const levels = parseLevels(process.argv.slice(2));
  const hostLocal = parseHostLocal(process.argv.slice(2));
  return bench.session(
    async (s) => {
      const { harness, reference } = s;
      if (harness.pid !== undefined) measuredPids.push(harness.pid);
      const sides: readonly Side[] = [driverSide(harness), reference.side()];
      bench.printHeader(
        s,
        `${WARMUP_PODS} warm-up pods per side, then ${levels.map((l) => `c=${l.concurrency}: ${l.rounds}×${l.podsPerRound}`).join(", ")} pods per side, rounds in ABBA order`,
        [],
        hostLocal === "exec"
          ? ", host-local exec'd (--host-local exec)"
          : ", host-local in-process (--host-local in-process)",
      );

      for (const side of sides) {
        const pods = makePods(side, 0, "w", WARMUP_PODS);
        await bench.runRound(side, 1, pods, emptyRoundSamples(), measuredPids);
        bench.removeNetns(pods.map((p) => p.netns));
      }

      const rows: Row[] = [];
      for (const level of levels) {
        if (bench.stopping) break;
        const bySide = new Map<Side["label"], Samples>();
        for (const side of sides) bySide.set(side.label, emptyRoundSamples());
        for (let round = 0; round < level.rounds * 2 && !bench.stopping; round++) {
          // ABBA: d r r d d r …
          const side = sides[Math.floor((round + 1) / 2) % 2]!;
          const pods = makePods(side, level.concurrency, round, level.podsPerRound);
          try {
            await sleep(SETTLE_MS);
            await bench.runRound(
              side,
              level.concurrency,
              pods,
              bySide.get(side.label)!,
              measuredPids,
            );
          } finally {
            bench.removeNetns(pods.map((p) => p.netns));
          }
        }
        for (const side of sides) {
          if (bySide.get(side.label)!.pods === 0) continue;
          rows.push({
            side: side.label,
            concurrency: level.concurrency,
            s: bySide.get(side.label)!,
          });
        }
        if (!bench.stopping) process.stderr.write(`  c=${level.concurrency} done\n`);
      }

      bench.printStopped();
      printTable(rows);
      say();
      printRatios(rows);
      say();
    },
    ["--host-local", hostLocal],
  );
}

bench.run(main);
