/**
 * A bounded burst of concurrent plugin execs mixing every way a run can end,
 * on each way of starting plugins. Each call must end as its kind says, and
 * once the burst has settled nothing of it may be left: no descriptor, no child
 * of this process (live or unreaped), no process in a plugin's group, nothing a
 * plugin started but the process that left its group on purpose.
 *
 * Every fake plugin records its pid ($$, also its process group: it leads a
 * session of its own) under PID_DIR, named by its container id. Every process
 * the burst starts carries MARK_VAR in its environment, which tells this run's
 * processes apart from any that reused one of their pids.
 */
import { type ChildProcess, spawn } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { isDeepStrictEqual } from "node:util";
import { expect } from "chai";
import type { Verb } from "../../src/driver/chain/plugin-exec.js";
import type { SpawnBackend } from "../../src/driver/chain/plugin-process.js";
import {
  type BurstCall,
  type BurstOutcome,
  startBurst,
  useSpawn,
} from "../support/plugin-spawn.js";

const REPO_ROOT = new URL("../../", import.meta.url).pathname;

const CALLS = 200;
const IN_FLIGHT = 50;
/**
 * How long a burst, and then its descriptors and processes, get before the
 * test gives up on them: a guard against a hang, not a measure (the slowest
 * kind ends at ~0.6 s on an idle machine; bench/ measures how fast).
 */
const HANG_GUARD_MS = 240_000;
/** execPlugin's bound on what a plugin may print. */
const MAX_OUTPUT_BYTES = 16 * 1024 * 1024;
/** Well past a pipe's 64 KiB buffer: the writer blocks until the plugin reads, or exits. */
const LARGE_STDIN_BYTES = 256 * 1024;

const MARK_VAR = "CNI_STRESS_RUN";
/** Set on the process that leaves its plugin's session on purpose. */
const ESCAPED = "CNI_STRESS_ESCAPED=1";
const RECORD = `echo $$ > "$PID_DIR/$CNI_CONTAINERID"`;

type Failed = Extract<BurstOutcome, { settled: "error" }>;

interface Call extends BurstCall {
  id: string;
  kind: Kind;
}

interface Kind {
  /** Also the plugin's `type`, so it is what the messages name. */
  name: string;
  /** Its share of a burst. */
  weight: number;
  /** The fake plugin's sh script. */
  script: string;
  command?: Verb;
  largeStdin?: boolean;
  timeoutMs?: number;
  killGraceMs?: number;
  abortAfterMs?: (index: number) => number;
  /** The plugin runs at least until it recorded its pid, whatever the load. */
  alwaysRecords?: boolean;
  /** Throws when the outcome is not what this kind must give; `recorded`: its pid file exists. */
  check(outcome: BurstOutcome, call: Call, recorded: boolean): void;
}

/** Asserts deep equality, quoting both sides whole (the failures of a burst are listed, not diffed). */
function same(actual: unknown, expected: unknown, what: string): void {
  if (!isDeepStrictEqual(actual, expected)) {
    throw new Error(`${what}: expected ${JSON.stringify(expected)}, got ${JSON.stringify(actual)}`);
  }
}

function resultOf(outcome: BurstOutcome): unknown {
  if (outcome.settled !== "value") {
    throw new Error(`expected a result, got error ${JSON.stringify(outcome.error)}`);
  }
  return outcome.value;
}

function failureOf(outcome: BurstOutcome, code: number, message: string): Failed {
  if (outcome.settled !== "error") {
    throw new Error(`expected error ${code}, got result ${JSON.stringify(outcome.value)}`);
  }
  const { name, code: gotCode, message: gotMessage } = outcome.error;
  same(
    { name, code: gotCode, message: gotMessage },
    { name: "PluginExecError", code, message },
    "error",
  );
  return outcome;
}

/**
 * The call did not end before `min`: a deadline, a grace or an abort was not cut
 * short. A loaded machine only ends calls later, so this holds on any machine; how
 * much later is for bench/, not for a test.
 */
function notBefore(outcome: BurstOutcome, min: number): void {
  // Date.now() against the timer that fired: a few ms of rounding either way.
  if (outcome.ms < min - 10) {
    throw new Error(`took ${outcome.ms} ms, expected at least ${min} ms`);
  }
}

/** Fails naming how many `items` there are and the first of them. */
function expectNone(items: readonly string[], what: string): void {
  if (items.length === 0) return;
  const shown = items.slice(0, 20).join("\n  ");
  expect.fail(`${what}: ${items.length}\n  ${shown}${items.length > 20 ? "\n  …" : ""}`);
}

const timeoutLimits = (call: Call): { timeoutMs: number; graceMs: number } => ({
  timeoutMs: call.request.timeoutMs,
  graceMs: call.request.killGraceMs ?? 0,
});

const KINDS: readonly Kind[] = [
  {
    name: "result",
    weight: 4,
    script: `${RECORD}\ncat`,
    alwaysRecords: true,
    check: (o, call) => same(resultOf(o), JSON.parse(call.request.stdin), "result"),
  },
  {
    name: "silent",
    weight: 2,
    command: "DEL",
    script: `${RECORD}\nexit 0`,
    alwaysRecords: true,
    check: (o) => same(resultOf(o), undefined, "result"),
  },
  {
    name: "cni-error",
    weight: 2,
    script: `${RECORD}
printf '{"cniVersion":"1.0.0","code":117,"msg":"no leases left for %s","details":"range 10.0.0.0/30"}' "$CNI_CONTAINERID"
exit 1`,
    alwaysRecords: true,
    check: (o, call) =>
      same(
        failureOf(o, 117, `no leases left for ${call.id}`).error.details,
        "range 10.0.0.0/30",
        "details",
      ),
  },
  {
    name: "stderr-only",
    weight: 2,
    script: `${RECORD}\necho "cannot open /run/$CNI_CONTAINERID" >&2\nexit 2`,
    alwaysRecords: true,
    check: (o, call) =>
      failureOf(
        o,
        999,
        `stderr-only: netplugin failed: "cannot open /run/${call.id}": exit status 2`,
      ),
  },
  {
    name: "self-killed",
    weight: 2,
    script: `${RECORD}\nkill -9 $$`,
    alwaysRecords: true,
    check: (o) =>
      failureOf(o, 999, "self-killed: netplugin failed with no error message: signal: SIGKILL"),
  },
  {
    // Exits at once while most of its stdin is still to be written: EPIPE, not a crash.
    name: "stdin-unread",
    weight: 2,
    largeStdin: true,
    script: `${RECORD}\nprintf '{"unread":"%s"}' "$CNI_CONTAINERID"`,
    alwaysRecords: true,
    check: (o, call) => same(resultOf(o), { unread: call.id }, "result"),
  },
  {
    name: "stdin-counted",
    weight: 1,
    largeStdin: true,
    script: `${RECORD}\nwc -c`,
    alwaysRecords: true,
    check: (o, call) => same(resultOf(o), Buffer.byteLength(call.request.stdin), "result"),
  },
  {
    name: "flood",
    weight: 1,
    script: `${RECORD}\nexec yes`,
    alwaysRecords: true,
    check: (o) =>
      failureOf(o, 999, `flood: ADD wrote more than ${MAX_OUTPUT_BYTES} bytes of output`),
  },
  {
    name: "timeout",
    weight: 2,
    timeoutMs: 300,
    killGraceMs: 200,
    script: `${RECORD}\nsleep 30 &\nwait`,
    check: (o, call) => {
      const { timeoutMs } = timeoutLimits(call);
      failureOf(o, 11, `timeout: ADD timed out after ${timeoutMs} ms; plugin killed`);
      notBefore(o, timeoutMs);
    },
  },
  {
    // Ignores SIGTERM (its sleep too): only the SIGKILL after the grace ends it.
    name: "stubborn",
    weight: 1,
    timeoutMs: 300,
    killGraceMs: 300,
    script: `trap '' TERM\n${RECORD}\nsleep 30 &\nwait`,
    check: (o, call, recorded) => {
      const { timeoutMs, graceMs } = timeoutLimits(call);
      failureOf(o, 11, `stubborn: ADD timed out after ${timeoutMs} ms; plugin killed`);
      // Recorded: the trap was set before the SIGTERM came, so the SIGKILL ended it.
      notBefore(o, recorded ? timeoutMs + graceMs : timeoutMs);
    },
  },
  {
    // Exits itself once a process that left its session holds its stdout and
    // stderr open: the call must still end at its deadline. The escaped process
    // holds them for an hour (the after hook kills it), so a call that waited
    // for them to close would never settle.
    name: "escaper",
    weight: 1,
    timeoutMs: 300,
    killGraceMs: 200,
    script: `${RECORD}
${ESCAPED} setsid sh -c 'echo $$ > "$ESC_DIR/$CNI_CONTAINERID"; exec sleep 3600' &
while [ ! -s "$ESC_DIR/$CNI_CONTAINERID" ]; do sleep 0.01; done`,
    check: (o, call) => {
      const { timeoutMs } = timeoutLimits(call);
      failureOf(o, 11, `escaper: ADD timed out after ${timeoutMs} ms; plugin killed`);
      notBefore(o, timeoutMs);
    },
  },
  {
    // Aborted from before the spawn (0 ms) to well after it.
    name: "aborted",
    weight: 2,
    killGraceMs: 200,
    abortAfterMs: (index) => (index * 37) % 300,
    script: `${RECORD}\nsleep 30 &\nwait`,
    check: (o, call) => {
      failureOf(o, 11, "aborted: ADD canceled; plugin killed");
      const abortAfterMs = call.abortAfterMs ?? 0;
      notBefore(o, abortAfterMs);
    },
  },
];

/** A deterministic shuffle (mulberry32), so that a failing order can be run again. */
function shuffled<T>(items: T[], seed: number): T[] {
  let state = seed >>> 0;
  const random = (): number => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
  for (let i = items.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [items[i], items[j]] = [items[j] as T, items[i] as T];
  }
  return items;
}

interface Dirs {
  bin: string;
  pids: string;
  escaped: string;
}

/** `count` calls, the kinds in proportion to their weights, in a shuffled order. */
function planBurst(
  kinds: readonly Kind[],
  count: number,
  prefix: string,
  dirs: Dirs,
  markValue: string,
): Call[] {
  const weighted = kinds.flatMap((kind) => Array.from({ length: kind.weight }, () => kind));
  const order = shuffled(
    Array.from({ length: count }, (_, i) => weighted[i % weighted.length] as Kind),
    count,
  );
  const baseEnv = {
    PATH: process.env.PATH ?? "/usr/sbin:/usr/bin:/sbin:/bin",
    PID_DIR: dirs.pids,
    ESC_DIR: dirs.escaped,
    [MARK_VAR]: markValue,
  };
  return order.map((kind, index) => {
    const id = `${prefix}-${index}`;
    const config: Record<string, string> = { cniVersion: "1.0.0", name: "stress", call: id };
    if (kind.largeStdin) config.pad = "x".repeat(LARGE_STDIN_BYTES);
    const call: Call = {
      id,
      kind,
      request: {
        type: kind.name,
        binDirs: [dirs.bin],
        command: kind.command ?? "ADD",
        containerId: id,
        netns: "/var/run/netns/stress",
        ifName: "eth0",
        stdin: JSON.stringify(config),
        timeoutMs: kind.timeoutMs ?? HANG_GUARD_MS,
        killGraceMs: kind.killGraceMs ?? 200,
        baseEnv,
      },
    };
    if (kind.abortAfterMs) call.abortAfterMs = kind.abortAfterMs(index);
    return call;
  });
}

/** What each settled call got wrong, one line per call. */
function mismatches(
  calls: readonly Call[],
  outcomes: readonly (BurstOutcome | undefined)[],
  pidDir: string,
): string[] {
  const wrong: string[] = [];
  calls.forEach((call, i) => {
    const outcome = outcomes[i];
    if (outcome === undefined) return;
    const recorded = existsSync(join(pidDir, call.id));
    try {
      if (call.kind.alwaysRecords && !recorded) throw new Error("the plugin never ran");
      call.kind.check(outcome, call, recorded);
    } catch (err) {
      wrong.push(`${call.id} (${call.kind.name}): ${(err as Error).message}`);
    }
  });
  return wrong;
}

/** Waits for `promise` at most `ms`; true when it settled. */
async function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  try {
    return await Promise.race([promise.then(() => true), late]);
  } finally {
    clearTimeout(timer);
  }
}

/** Polls `probe` until `ok` holds or `ms` has passed; returns its last answer. */
async function settle<T>(
  probe: () => T | Promise<T>,
  ok: (value: T) => boolean,
  ms: number,
): Promise<T> {
  const until = Date.now() + ms;
  for (;;) {
    const value = await probe();
    if (ok(value) || Date.now() > until) return value;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

// ---------------------------------------------------------------------------
// What is left: descriptors and processes

/**
 * No garbage collection first, on purpose: an exec must give its descriptors
 * back when it settles, not whenever the collector finalizes what it left.
 */
function openFds(): number {
  return readdirSync("/proc/self/fd").length;
}

interface Proc {
  pid: number;
  state: string;
  ppid: number;
  pgrp: number;
}

function processes(): Proc[] {
  const found: Proc[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      // After the parenthesised command name: state, ppid, pgrp.
      const [state = "?", ppid, pgrp] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      found.push({ pid: Number(name), state, ppid: Number(ppid), pgrp: Number(pgrp) });
    } catch {
      // Gone meanwhile.
    }
  }
  return found;
}

function environOf(pid: number): string[] {
  try {
    return readFileSync(`/proc/${pid}/environ`, "utf8").split("\0");
  } catch {
    return [];
  }
}

function childrenOfThisProcess(): Set<number> {
  return new Set(processes().flatMap((p) => (p.ppid === process.pid ? [p.pid] : [])));
}

function recordedPids(dir: string): Set<number> {
  const pids = new Set<number>();
  for (const name of readdirSync(dir)) {
    const pid = Number.parseInt(readFileSync(join(dir, name), "utf8"), 10);
    if (pid > 0) pids.add(pid);
  }
  return pids;
}

/**
 * Every process the burst left: a child of this process that was not there
 * before (unreaped ones included), and any live process of the run but the
 * escaped ones, named by the plugin group it is in when it is in one. A zombie
 * that is not ours is an orphan whose reaping is init's business.
 */
function leftovers(mark: string, pluginPids: ReadonlySet<number>, before: Set<number>): string[] {
  const found: string[] = [];
  for (const p of processes()) {
    if (p.ppid === process.pid && !before.has(p.pid)) {
      found.push(`${p.pid}: a child of this process (state ${p.state})`);
      continue;
    }
    if (p.state === "Z" || p.pid === process.pid) continue;
    const env = environOf(p.pid);
    if (!env.includes(mark) || env.includes(ESCAPED)) continue;
    found.push(
      pluginPids.has(p.pgrp)
        ? `${p.pid}: alive in the group of plugin ${p.pgrp}`
        : `${p.pid}: started by a plugin, alive in group ${p.pgrp}`,
    );
  }
  return found;
}

/** SIGKILLs what the run left: the escaped processes by their recorded pid, then anything else of the run. */
function killRun(mark: string, escapedDir: string): void {
  const ofRun = (pid: number): boolean => environOf(pid).includes(mark);
  const kill = (pid: number): void => {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // Already gone.
    }
  };
  if (existsSync(escapedDir)) for (const pid of recordedPids(escapedDir)) if (ofRun(pid)) kill(pid);
  for (const p of processes())
    if (p.pid !== process.pid && p.state !== "Z" && ofRun(p.pid)) kill(p.pid);
}

// ---------------------------------------------------------------------------

/** Run by a child Node process: a burst, then nothing, so that it must exit by itself. */
const CHILD_SCRIPT = `
import { readFileSync, writeFileSync } from "node:fs";
const [planFile, resultFile, helperUrl, processUrl] = process.argv.slice(2);
const { spawnBackend } = await import(processUrl);
const { startBurst } = await import(helperUrl);
const { calls, inFlight } = JSON.parse(readFileSync(planFile, "utf8"));
const burst = startBurst(calls, inFlight, spawnBackend("native"));
await burst.done;
writeFileSync(resultFile, JSON.stringify(burst.outcomes));
process.stdout.write("settled\\n");
`;

for (const backend of ["native", "node"] as const)
  describe(`plugin-exec under a burst of every way a run ends (${backend} spawn)`, function () {
    // Each step below is guarded by HANG_GUARD_MS; this only bounds the sum.
    this.timeout(4 * HANG_GUARD_MS);

    let root: string | undefined;
    let dirs: Dirs;
    const mark = `${MARK_VAR}=${process.pid}-${backend}-${Date.now()}`;
    const markValue = mark.slice(MARK_VAR.length + 1);
    let child: ChildProcess | undefined;
    let spawnWith: SpawnBackend;

    before(function () {
      spawnWith = useSpawn(this, backend);
      root = mkdtempSync(join(tmpdir(), "cni-plugin-stress-"));
      dirs = { bin: join(root, "bin"), pids: join(root, "pids"), escaped: join(root, "escaped") };
      for (const dir of Object.values(dirs)) mkdirSync(dir);
      for (const kind of KINDS) {
        writeFileSync(join(dirs.bin, kind.name), `#!/bin/sh\n${kind.script}\n`, { mode: 0o755 });
      }
    });

    after(() => {
      if (child && child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
      if (root) {
        killRun(mark, dirs.escaped);
        rmSync(root, { recursive: true, force: true });
      }
    });

    it(`settles ${CALLS} calls, ${IN_FLIGHT} at a time, each as its kind must end, leaving no descriptor or process`, async () => {
      // One call of each kind first: what a first exec sets up for good (a
      // signal pipe, the spawn threads) is not a leak.
      const warmUp = planBurst(KINDS, KINDS.length, "warm", dirs, markValue);
      const warm = startBurst(warmUp, KINDS.length, spawnWith);
      expect(await settlesWithin(warm.done, HANG_GUARD_MS), "warm-up settled").to.equal(true);
      expectNone(mismatches(warmUp, warm.outcomes, dirs.pids), "warm-up calls that ended wrongly");

      const childrenBefore = childrenOfThisProcess();
      const fdsBefore = openFds();

      const calls = planBurst(KINDS, CALLS, "call", dirs, markValue);
      expect(new Set(calls.map((c) => c.kind.name))).to.have.lengthOf(KINDS.length);
      const burst = startBurst(calls, IN_FLIGHT, spawnWith);
      await settlesWithin(burst.done, HANG_GUARD_MS);

      const unsettled = calls.flatMap((c, i) =>
        burst.outcomes[i] === undefined ? [`${c.id} (${c.kind.name})`] : [],
      );
      expectNone(unsettled, `calls still running after ${HANG_GUARD_MS} ms`);
      expect(burst.maxInFlight).to.equal(IN_FLIGHT);
      expectNone(mismatches(calls, burst.outcomes, dirs.pids), "calls that ended wrongly");

      // The hard cases really happened: a process escaped, a plugin outlived SIGTERM.
      expect(readdirSync(dirs.escaped), "escaped processes").to.not.be.empty;
      expect(
        calls.some((c) => c.kind.name === "stubborn" && existsSync(join(dirs.pids, c.id))),
        "a stubborn plugin that trapped SIGTERM",
      ).to.equal(true);

      const fdsAfter = await settle(openFds, (n) => n <= fdsBefore, HANG_GUARD_MS);
      expect(fdsAfter, "open descriptors after the burst").to.be.at.most(fdsBefore);

      const pluginPids = recordedPids(dirs.pids);
      const left = await settle(
        () => leftovers(mark, pluginPids, childrenBefore),
        (l) => l.length === 0,
        HANG_GUARD_MS,
      );
      expectNone(left, "processes left by the burst");
    });

    if (backend === "native")
      it("lets a process that ran a burst exit by itself: the addon holds no ref on the event loop", async () => {
        // No escaper here: its escaped process would outlive the child by design.
        const kinds = KINDS.filter((k) => k.name !== "escaper");
        const calls = planBurst(kinds, 60, "child", dirs, markValue);
        const planFile = join(root as string, "child-plan.json");
        const resultFile = join(root as string, "child-outcomes.json");
        const script = join(root as string, "child-burst.mjs");
        writeFileSync(
          planFile,
          JSON.stringify({
            calls: calls.map(({ request, abortAfterMs }) => ({ request, abortAfterMs })),
            inFlight: IN_FLIGHT,
          }),
        );
        writeFileSync(script, CHILD_SCRIPT);
        const childrenBefore = childrenOfThisProcess();

        const started = spawn(
          process.execPath,
          [
            "--import",
            "tsx",
            script,
            planFile,
            resultFile,
            new URL("../support/plugin-spawn.ts", import.meta.url).href,
            new URL("../../src/driver/chain/plugin-process.ts", import.meta.url).href,
          ],
          { cwd: REPO_ROOT, stdio: ["ignore", "pipe", "pipe"] },
        );
        child = started;
        let stdout = "";
        let stderr = "";
        let settled = false;
        started.stdout?.on("data", (b: Buffer) => {
          stdout += b.toString();
          if (stdout.includes("settled\n")) settled = true;
        });
        started.stderr?.on("data", (b: Buffer) => {
          stderr += b.toString();
        });
        const exited = new Promise<{ code: number | null }>((resolve) => {
          started.on("close", (code) => resolve({ code }));
        });

        const exitedInTime = await settlesWithin(exited, HANG_GUARD_MS);
        expect(settled, `the child's burst settled; stderr: ${stderr}`).to.equal(true);
        expect(exitedInTime, "the child exited by itself").to.equal(true);
        const { code } = await exited;
        expect(code, `child exit code; stderr: ${stderr}`).to.equal(0);

        const outcomes = JSON.parse(readFileSync(resultFile, "utf8")) as BurstOutcome[];
        expect(outcomes).to.have.lengthOf(calls.length);
        expectNone(mismatches(calls, outcomes, dirs.pids), "child's calls that ended wrongly");
        const left = await settle(
          () => leftovers(mark, recordedPids(dirs.pids), childrenBefore),
          (l) => l.length === 0,
          HANG_GUARD_MS,
        );
        expectNone(left, "processes left by the child's burst");
      });
  });
