/**
 * bench/memory: the driver's resident memory and open descriptors over a long
 * life, against fixed targets. Points: just started; idle (a quiet minute after
 * start, when the netlink worker has ended); with 110 pods up (a node's default
 * maxPods); after 3,000 ADD/DEL cycles at concurrency 8; after each of four
 * rounds of 110 pods set up and torn down; and idle again a quiet minute later.
 * Descriptors must come back to the started count once the pods are gone, and to
 * the idle count when idle again.
 *
 * The driver runs as the image runs it: the compiled dist/ (`npm run build`
 * first) on this Node, through test/support/driver-harness.ts under a temporary
 * root. Each figure is read a settle time after the work stops, so memory the
 * work freed has had a chance to go (V8 collects on its own schedule; nothing
 * here forces it).
 *
 * Run as root: `npm run bench:memory` (optionally `-- --cycles 1000`).
 * Everything it makes carries a random tag and is removed at the end, also on
 * failure or Ctrl-C.
 */
import { spawn } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import {
  DRIVER_NODE_FLAGS,
  type DriverHarness,
  REPO_ROOT,
  sleep,
} from "../test/support/driver-harness.js";
import {
  BenchRun,
  driverSide,
  emptyRoundSamples,
  fmt,
  inParallel,
  option,
  printColumns,
  say,
} from "./common.js";

const PODS = 110;
const CYCLES = 3000;
const CYCLE_CONCURRENCY = 8;
const ROUNDS = 4;
/** Network namespaces the cycles reuse: each worker's pods come back to the same few. */
const CYCLE_NETNS_PER_WORKER = 4;
/** After work stops and before a figure is read. */
const SETTLE_MS = 3000;
/**
 * The netlink worker ends after a minute without a call (src/plumbing/netlink/index.ts):
 * an idle driver is one that has sat this long, plus the settle time.
 */
const WORKER_QUIET_MS = 60_000;

const MiB = 1024 * 1024;
const TARGETS = { idle: 60 * MiB, podsUp: 80 * MiB, afterCycles: 100 * MiB };

const bench = new BenchRun({
  name: "bench/memory",
  netnsStem: "cnm",
  driverOctet: 242,
  referenceOctet: 243,
  tempPrefix: "cni-driver-bench-mem-",
  inFlight: "the calls",
});

interface Sample {
  point: string;
  rssBytes: number;
  fds: number;
  /** What the figure must stay within, if anything. */
  targetBytes?: number;
  /** The descriptors must be back at this count: the started driver's, or the idle one's. */
  fdsBaseline?: { count: number; name: string };
}

/** VmRSS of a process, in bytes. */
function rssBytes(pid: number): number {
  const m = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  if (!m) throw new Error(`no VmRSS for pid ${pid}`);
  return Number(m[1]) * 1024;
}

function openFds(pid: number): number {
  return readdirSync(`/proc/${pid}/fd`).length;
}

async function sample(
  h: DriverHarness,
  point: string,
  extra: Partial<Sample> = {},
): Promise<Sample> {
  await sleep(SETTLE_MS);
  const pid = h.pid as number;
  const s = { point, rssBytes: rssBytes(pid), fds: openFds(pid), ...extra };
  process.stderr.write(`  ${point}: ${fmt(s.rssBytes / MiB)} MiB, ${s.fds} descriptors\n`);
  return s;
}

/**
 * The reference, measured in the same run: the same Node binary with the driver's
 * flags and nothing loaded, idle for the settle time. What the driver's figures
 * are above it is the driver's own; the rest is the runtime's, and moves with the
 * Node the image ships.
 */
async function bareNodeRss(): Promise<number> {
  const child = spawn(
    process.execPath,
    [...DRIVER_NODE_FLAGS, "-e", "setInterval(() => {}, 1 << 30)"],
    { stdio: "ignore" },
  );
  try {
    await sleep(SETTLE_MS);
    if (child.pid === undefined || child.exitCode !== null)
      throw new Error("the bare Node of the reference did not start");
    return rssBytes(child.pid);
  } finally {
    child.kill("SIGKILL");
  }
}

/** 110 pods set up at once (concurrency 16), then, after `whileUp`, torn down. */
async function podsUpAndDown(
  h: DriverHarness,
  round: number | string,
  whileUp?: () => Promise<void>,
): Promise<void> {
  const pods = Array.from({ length: PODS }, (_, i) => bench.pod(`p${round}-${i}`));
  bench.addNetns(pods);
  const side = driverSide(h);
  try {
    await inParallel(
      pods,
      16,
      (p) => bench.timed("ADD", () => side.add(p)),
      () => bench.stopping,
    );
    await whileUp?.();
    await inParallel(
      pods,
      16,
      (p) => bench.timed("DEL", () => side.del(p)),
      () => bench.stopping,
    );
  } finally {
    bench.removeNetns(pods.map((p) => p.netns));
  }
}

/**
 * `cycles` ADD → DEL, `CYCLE_CONCURRENCY` workers at a time, each on its own few
 * namespaces, with a new container id every cycle (as every new sandbox has).
 */
async function cycles(h: DriverHarness, count: number): Promise<void> {
  const nets = Array.from({ length: CYCLE_CONCURRENCY * CYCLE_NETNS_PER_WORKER }, (_, i) =>
    bench.pod(`c-${i}`),
  );
  bench.addNetns(nets);
  try {
    const samples = emptyRoundSamples();
    const side = driverSide(h);
    let cycle = 0;
    // A pass uses each namespace once, for a sandbox never seen before.
    while (samples.pods < count && !bench.stopping) {
      const pass = nets.slice(0, Math.min(count - samples.pods, nets.length)).map((p) => ({
        ...p,
        containerId: `${p.containerId}x${cycle}`,
        name: `${p.name}-${cycle++}`,
      }));
      const before = samples.pods;
      await bench.runRound(side, CYCLE_CONCURRENCY, pass, samples);
      if (samples.pods === before) break; // every call failing: the failures say why
    }
  } finally {
    bench.removeNetns(nets.map((p) => p.netns));
  }
}

function verdict(s: Sample): string {
  const parts: string[] = [];
  if (s.targetBytes !== undefined)
    parts.push(
      `${s.rssBytes <= s.targetBytes ? "PASS" : "MISS"} ≤ ${fmt(s.targetBytes / MiB, 0)} MiB`,
    );
  const base = s.fdsBaseline;
  if (base) parts.push(`descriptors ${s.fds <= base.count ? "PASS" : "MISS"} = ${base.name}`);
  return parts.join(", ");
}

async function main(): Promise<number> {
  if (!bench.preflight()) return 1;
  const cli = join(REPO_ROOT, "dist/src/driver/cli.js");
  if (!existsSync(cli)) {
    process.stderr.write(`bench/memory: ${cli} is missing: run \`npm run build\` first\n`);
    return 1;
  }
  const cycleCount = Number(option(process.argv.slice(2), "--cycles") ?? CYCLES);
  return bench.session(
    async (s) => {
      const h = s.harness;
      bench.printHeader(
        s,
        `just started; idle; ${PODS} pods up; ${cycleCount} ADD/DEL cycles at c=${CYCLE_CONCURRENCY}; ${ROUNDS} rounds of ${PODS} pods up and down; each figure ${SETTLE_MS / 1000} s after the work stops`,
        [`driver process: node ${process.version} running dist/src/driver/cli.js`],
      );
      const bare = await bareNodeRss();
      process.stderr.write(`  reference, bare Node: ${fmt(bare / MiB)} MiB\n`);
      const samples: Sample[] = [];
      const started = await sample(h, "just started");
      samples.push(started);
      // Right after work the netlink worker still holds its host socket, as it did at start.
      const busyFds = { count: started.fds, name: "started" };
      await sleep(WORKER_QUIET_MS);
      const idle = await sample(h, "idle (a quiet minute after start)", {
        targetBytes: TARGETS.idle,
      });
      samples.push(idle);
      await podsUpAndDown(h, "up", async () => {
        samples.push(await sample(h, `${PODS} pods up`, { targetBytes: TARGETS.podsUp }));
      });
      process.stderr.write(`  ${cycleCount} cycles …\n`);
      await cycles(h, cycleCount);
      samples.push(
        await sample(h, `after ${cycleCount} cycles`, {
          targetBytes: TARGETS.afterCycles,
          fdsBaseline: busyFds,
        }),
      );
      for (let r = 1; r <= ROUNDS && !bench.stopping; r++) {
        await podsUpAndDown(h, `r${r}`);
        samples.push(
          await sample(h, `after round ${r} of ${PODS} up and down`, {
            targetBytes: TARGETS.afterCycles,
            fdsBaseline: busyFds,
          }),
        );
      }
      if (!bench.stopping) {
        await sleep(WORKER_QUIET_MS);
        samples.push(
          await sample(h, "idle again (a quiet minute after the last round)", {
            targetBytes: TARGETS.afterCycles,
            fdsBaseline: { count: idle.fds, name: "idle" },
          }),
        );
      }
      bench.printStopped();
      printColumns(
        ["point", "RSS MiB", "above bare Node", "descriptors", "target"],
        samples.map((x) => [
          x.point,
          fmt(x.rssBytes / MiB),
          `+${fmt((x.rssBytes - bare) / MiB)}`,
          String(x.fds),
          verdict(x),
        ]),
      );
      say(
        `reference: the same Node (${process.version}) with the driver's flags and nothing loaded: ${fmt(bare / MiB)} MiB`,
      );
      const rounds = samples.filter((x) => x.point.startsWith("after round"));
      if (rounds.length > 1) {
        const first = rounds[0] as Sample;
        const last = rounds.at(-1) as Sample;
        say(
          `per round of ${PODS} pods: ${fmt((last.rssBytes - first.rssBytes) / MiB / (rounds.length - 1), 2)} MiB of RSS`,
        );
      }
      say();
    },
    [],
    process.execPath,
  );
}

bench.run(main);
