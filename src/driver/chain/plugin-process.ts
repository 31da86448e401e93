/**
 * One run of a plugin binary: its config on stdin, stdout and stderr collected,
 * ended by us on timeout or abort (its process group: SIGTERM, then SIGKILL
 * once a grace has passed). The plugin leads a session of its own, so a kill
 * reaches whatever it started: a grandchild left alive would hold stdout open
 * and the call would hang on it.
 *
 * Two ways to start it, two implementations of SpawnBackend; the daemon
 * chooses one at start (spawnBackend(), from lifecycle/backends.ts) and hands
 * it to the plugin runner:
 *  - "native": posix_spawn on a thread of the cni_driver_spawn addon
 *    (native/spawn/spawn.c). Nothing is forked and the event loop never waits.
 *  - "node": child_process.spawn, the fallback without the addon (or on a
 *    kernel without pidfd_open). Node forks the whole driver on the main thread
 *    for every exec, and the kernel copies the page tables of a ~150 MB process
 *    each time: 1.5-5 ms of blocked event loop and more CPU than host-local
 *    itself, twice per pod.
 * CNI_DRIVER_SPAWN=native|node forces one (tests, bisecting); forcing native
 * without a working addon is an error at start, with the reason. Nothing is
 * kept here: each spawnBackend() call chooses again.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { constants as osConstants } from "node:os";
import { loadNativeAddon } from "../../common/native-addon.js";

export interface ProcessRun {
  path: string;
  env: Record<string, string>;
  stdin: string;
  timeoutMs: number;
  /** After a timeout or abort, SIGTERM first, then SIGKILL once this grace has passed. */
  killGraceMs: number;
  /** More than this on stdout and stderr together: the plugin is killed and the run says so. */
  maxOutputBytes: number;
  signal?: AbortSignal;
  /**
   * How it is started. The driver passes the one it chose at start; without
   * one (a bench's one-off execs), spawnBackend() chooses for this run.
   */
  backend?: SpawnBackend;
}

export interface ProcessOutcome {
  stdout: string;
  stderr: string;
  exitCode?: number;
  /** The signal that ended the plugin, when one did ("SIGKILL"). */
  signal?: string;
  /** errno code when the plugin could not be started at all (ETXTBSY, EACCES, ENOENT …). */
  spawnError?: string;
  tooMuchOutput: boolean;
  /** Set when we ended the plugin ourselves. */
  stopped?: "timeout" | "abort";
}

type Ended = Omit<ProcessOutcome, "stopped">;

/** A started plugin: a way to signal its group, and its end. */
interface Started {
  kill(signal: NodeJS.Signals): void;
  ended: Promise<Ended>;
}

export type SpawnBackendName = "native" | "node";

export interface SpawnBackend {
  name: SpawnBackendName;
  /** Why this one: forced by the environment, or why native could not be used. */
  reason: string;
  /** "node" because native could not be used (not because it was asked for). */
  fallback: boolean;
  start(run: ProcessRun): Started;
}

export const SPAWN_ENV = "CNI_DRIVER_SPAWN";

/**
 * Starts the plugin and waits for its end, stopping it at the deadline or on
 * abort. Never rejects: every way a run can end is in the outcome.
 */
export async function runProcess(run: ProcessRun): Promise<ProcessOutcome> {
  let backend: SpawnBackend;
  try {
    backend = run.backend ?? spawnBackend();
  } catch (err) {
    return { stdout: "", stderr: "", spawnError: (err as Error).message, tooMuchOutput: false };
  }
  const started = backend.start(run);
  let stopped: ProcessOutcome["stopped"];
  let killTimer: NodeJS.Timeout | undefined;
  const stop = (why: "timeout" | "abort"): void => {
    if (stopped !== undefined) return;
    stopped = why;
    started.kill("SIGTERM");
    killTimer = setTimeout(() => started.kill("SIGKILL"), run.killGraceMs);
  };
  const timer = setTimeout(() => stop("timeout"), run.timeoutMs);
  const onAbort = (): void => stop("abort");
  run.signal?.addEventListener("abort", onAbort, { once: true });
  try {
    const ended = await started.ended;
    return stopped === undefined ? ended : { ...ended, stopped };
  } finally {
    clearTimeout(timer);
    if (killTimer !== undefined) clearTimeout(killTimer);
    run.signal?.removeEventListener("abort", onAbort);
  }
}

// ---------------------------------------------------------------------------
// native: the cni_driver_spawn addon

interface SpawnAddon {
  supported(): boolean;
  spawn(
    path: string,
    env: string[],
    stdin: Buffer,
    maxOutput: number,
    callback: (err: NodeJS.ErrnoException | undefined, result?: NativeResult) => void,
  ): object;
  kill(handle: object, signal: number): void;
}

interface NativeResult {
  /** Undefined only when the addon could not allocate the buffer. */
  stdout?: Buffer;
  stderr?: Buffer;
  exitCode: number | null;
  signal: number | null;
  tooMuchOutput: boolean;
}

const ADDON = { file: "build/Release/cni_driver_spawn.node", envVar: "CNI_DRIVER_SPAWN_ADDON" };

const signalNames = new Map<number, string>(
  Object.entries(osConstants.signals).map(([name, n]) => [n, name]),
);

function nativeStart(addon: SpawnAddon, run: ProcessRun): Started {
  let handle: object | undefined;
  const ended = new Promise<Ended>((resolve) => {
    const env = Object.entries(run.env).map(([k, v]) => `${k}=${v}`);
    try {
      handle = addon.spawn(run.path, env, Buffer.from(run.stdin), run.maxOutputBytes, (err, r) => {
        if (err || !r) {
          resolve({ stdout: "", stderr: "", spawnError: errnoOf(err), tooMuchOutput: false });
          return;
        }
        const out: Ended = {
          stdout: r.stdout?.toString("utf8") ?? "",
          stderr: r.stderr?.toString("utf8") ?? "",
          tooMuchOutput: r.tooMuchOutput,
        };
        if (r.exitCode !== null) out.exitCode = r.exitCode;
        if (r.signal !== null) out.signal = signalNames.get(r.signal) ?? `signal ${r.signal}`;
        resolve(out);
      });
    } catch (err) {
      resolve({ stdout: "", stderr: "", spawnError: errnoOf(err), tooMuchOutput: false });
    }
  });
  return {
    ended,
    kill(signal) {
      // The addon signals the group only while the plugin is unreaped: its pid cannot be reused yet.
      if (handle) addon.kill(handle, osConstants.signals[signal]);
    },
  };
}

// ---------------------------------------------------------------------------
// node: child_process.spawn

function nodeStart(run: ProcessRun): Started {
  let child: ChildProcess | undefined;
  const running = (): boolean =>
    child?.pid !== undefined && child.exitCode === null && child.signalCode === null;
  const killGroup = (signal: NodeJS.Signals): void => {
    if (!running()) return;
    try {
      process.kill(-(child?.pid as number), signal);
    } catch {
      // ESRCH: the group is already gone.
    }
  };
  const ended = new Promise<Ended>((resolve) => {
    try {
      // detached: setsid, a process group of its own.
      child = spawn(run.path, [], {
        env: run.env,
        detached: true,
        stdio: ["pipe", "pipe", "pipe"],
      });
    } catch (err) {
      resolve({ stdout: "", stderr: "", spawnError: errnoOf(err), tooMuchOutput: false });
      return;
    }
    const out: Buffer[] = [];
    const errOut: Buffer[] = [];
    let size = 0;
    let tooMuchOutput = false;
    let spawnError: string | undefined;
    const collect = (into: Buffer[]) => (b: Buffer) => {
      size += b.length;
      if (size > run.maxOutputBytes) {
        if (!tooMuchOutput) killGroup("SIGKILL");
        tooMuchOutput = true;
        return;
      }
      into.push(b);
    };
    child.stdout?.on("data", collect(out));
    child.stderr?.on("data", collect(errOut));
    child.on("error", (err) => {
      spawnError = errnoOf(err);
    });
    child.on("close", (code, signal) => {
      const outcome: Ended = {
        stdout: Buffer.concat(out).toString("utf8"),
        stderr: Buffer.concat(errOut).toString("utf8"),
        tooMuchOutput,
      };
      if (spawnError !== undefined) outcome.spawnError = spawnError;
      else {
        if (code !== null) outcome.exitCode = code;
        if (signal !== null) outcome.signal = signal;
      }
      resolve(outcome);
    });
    // A plugin that exits without reading its config must not crash us with EPIPE.
    child.stdin?.on("error", () => {});
    child.stdin?.end(run.stdin);
  });
  return {
    ended,
    kill(signal) {
      killGroup(signal);
      // As the addon does: past SIGKILL, output held open by a process that left
      // the group (setsid) no longer holds the call; "close" then waits for the exit alone.
      if (signal === "SIGKILL") {
        child?.stdout?.destroy();
        child?.stderr?.destroy();
      }
    },
  };
}

function errnoOf(err: unknown): string {
  const e = err as NodeJS.ErrnoException | undefined;
  return e?.code ?? e?.message ?? String(err);
}

// ---------------------------------------------------------------------------
// Choosing

/** The native implementation: posix_spawn from the addon. */
function nativeSpawn(addon: SpawnAddon, reason: string): SpawnBackend {
  return { name: "native", reason, fallback: false, start: (run) => nativeStart(addon, run) };
}

/** The node implementation: child_process.spawn. */
function nodeSpawn(reason: string, fallback: boolean): SpawnBackend {
  return { name: "node", reason, fallback, start: nodeStart };
}

/**
 * Chooses as CNI_DRIVER_SPAWN says (`forced`, by default the environment's
 * value): native when the addon loads and pidfd_open works, else node. Throws
 * only when the value is invalid, or forces native and native cannot work.
 */
export function spawnBackend(forced: string | undefined = process.env[SPAWN_ENV]): SpawnBackend {
  if (forced !== undefined && forced !== "" && forced !== "native" && forced !== "node") {
    throw new Error(`${SPAWN_ENV} must be "native" or "node", not ${JSON.stringify(forced)}`);
  }
  if (forced === "node") return nodeSpawn(`forced by ${SPAWN_ENV}`, false);
  const loaded = loadNativeAddon<SpawnAddon>(ADDON);
  let why = "reason" in loaded ? loaded.reason : "";
  if ("addon" in loaded && !loaded.addon.supported())
    why = `${loaded.path} loaded, but pidfd_open is not available (Linux before 5.3)`;
  if (why === "" && "addon" in loaded) {
    const { addon, path } = loaded;
    return nativeSpawn(addon, forced ? `forced by ${SPAWN_ENV} (${path})` : `native addon ${path}`);
  }
  if (forced === "native") throw new Error(`${SPAWN_ENV}=native, but ${why}`);
  return nodeSpawn(`native spawn unavailable: ${why}`, true);
}
