/**
 * Exec one CNI plugin binary the way libcni's pkg/invoke does (cni-spec §4, §6):
 * find `type` in the bin dirs, run it with the CNI_* environment and the config
 * on stdin, read its result or its error from stdout.
 *
 * This is the hot path of every pod set-up: one spawn (plugin-process.ts), no
 * shell, nothing built per call beyond the environment.
 */

import { statSync } from "node:fs";
import { join } from "node:path";
import type { CniCommand, PluginEnv } from "../../cni/env.js";
import { pluginEnvToProcessEnv } from "../../cni/env.js";
import { CniError, ErrorCode, isFailureCode } from "../../cni/errors.js";
import { type ProcessOutcome, runProcess, type SpawnBackend } from "./plugin-process.js";

export type Verb = CniCommand;

// Exported for its tests only (integration/plugin-exec.test.ts, support/plugin-spawn.ts).
export interface ExecRequest {
  /** The config's `type`: a bare file name looked up in `binDirs`. */
  type: string;
  binDirs: readonly string[];
  command: Verb;
  containerId?: string;
  netns?: string;
  ifName?: string;
  /** CNI_ARGS text, "K=V;K=V". */
  cniArgs?: string;
  /** The plugin's config JSON. */
  stdin: string;
  /** Bound on the whole call, "text file busy" retries included. */
  timeoutMs: number;
  /** Environment to start from (default process.env); the CNI_* variables are always set from this request. */
  baseEnv?: NodeJS.ProcessEnv;
  /** Aborting kills the plugin as a timeout does. */
  signal?: AbortSignal;
  /** After a timeout or abort, SIGTERM first, then SIGKILL once this grace has passed (default 2000 ms). */
  killGraceMs?: number;
  /** Receives what the plugin wrote on stderr when it succeeded (libcni copies it to its own stderr). */
  onStderr?: (text: string) => void;
  /** How the plugin is started (libcni's invoke.Exec seam): the one the daemon chose at start. */
  spawn: SpawnBackend;
}

/** Every failure of execPlugin: a CniError that also names the plugin and the verb. */
// Exported for its tests only (integration/plugin-exec.test.ts).
export class PluginExecError extends CniError {
  readonly plugin: string;
  readonly command: Verb;

  constructor(plugin: string, command: Verb, code: number, msg: string, details = "") {
    super(code, msg, details);
    this.name = "PluginExecError";
    this.plugin = plugin;
    this.command = command;
  }
}

/** libcni retries an exec that fails with "text file busy" (a binary being replaced): 6 tries, 1 s apart. */
const TEXT_FILE_BUSY_TRIES = 6;
const TEXT_FILE_BUSY_DELAY_MS = 1000;
const DEFAULT_KILL_GRACE_MS = 2000;
/** The verbs whose success prints something the caller reads. */
const VERBS_WITH_OUTPUT: ReadonlySet<Verb> = new Set<Verb>(["ADD", "VERSION"]);
/** A CNI result is a few kB; this bounds what a misbehaving plugin can make us hold. */
const MAX_OUTPUT_BYTES = 16 * 1024 * 1024;
/** How much of a plugin's unparseable output goes into an error's details. */
const MAX_QUOTED_OUTPUT = 4096;

/**
 * A `type` names a file inside a bin dir, never a path (libcni FindInPath
 * refuses a separator): otherwise a config could make the driver exec any
 * binary on the node.
 */
function checkBareName(type: string): void {
  if (type === "" || type === "." || type === ".." || type.includes("/") || type.includes("\0")) {
    throw new CniError(
      ErrorCode.InvalidNetworkConfig,
      `invalid plugin type ${JSON.stringify(type)}: must be a bare file name`,
    );
  }
}

/**
 * The absolute path of plugin `type`: the first bin dir holding a regular file
 * of that name (symlinks followed; libcni does not check the exec bit either,
 * the exec reports it). Throws code 7 when `type` is not a bare file name or no
 * dir holds it: the config names a plugin this node does not have.
 */
// Exported for its tests only (integration/plugin-exec.test.ts).
export async function findPlugin(type: string, binDirs: readonly string[]): Promise<string> {
  checkBareName(type);
  for (const dir of binDirs) {
    if (dir === "") continue;
    const candidate = join(dir, type);
    try {
      // A stat per dir, synchronously: microseconds, where a thread-pool round trip
      // would hold up every exec behind whatever I/O the process has queued.
      if (statSync(candidate).isFile()) return candidate;
    } catch {
      // Absent or unreadable here: try the next dir, as libcni does.
    }
  }
  // libcni's wording, with Go's formatting of a []string.
  throw new CniError(
    ErrorCode.InvalidNetworkConfig,
    `failed to find plugin ${JSON.stringify(type)} in path [${binDirs.join(" ")}]`,
  );
}

/**
 * Runs the plugin and returns, for ADD and VERSION, its stdout parsed as JSON
 * (undefined when it printed nothing). For DEL, CHECK, GC and STATUS a success
 * returns undefined whatever the plugin printed: libcni discards their stdout
 * (ExecPluginWithoutResult), so a chatty plugin must not fail them. Throws a
 * PluginExecError:
 * - the plugin's own error (stdout parsed as a CNI error) with its code, msg
 *   and details unchanged, so the runtime sees what the plugin said; but code
 *   999 when its code cannot stand for a failure (0, or past 2^32-1: see
 *   isFailureCode), its message kept;
 * - code 999 "<type>: netplugin failed: "<stderr>": <exit>" when it failed
 *   with nothing on stdout (libcni takes the message from stderr then), or
 *   failed with stdout that is not a CNI error;
 * - code 6 when ADD or VERSION succeeded but printed something that is not JSON;
 * - code 11 on timeout or abort (see `timedOut`);
 * - code 7 from findPlugin.
 */
export async function execPlugin(req: ExecRequest): Promise<unknown | undefined> {
  const fail = (code: number, msg: string, details = ""): PluginExecError =>
    new PluginExecError(req.type, req.command, code, msg, details);

  let path: string;
  try {
    path = await findPlugin(req.type, req.binDirs);
  } catch (err) {
    const e = CniError.from(err);
    throw fail(e.code, e.message, e.details);
  }

  const env = pluginEnvToProcessEnv(
    {
      command: req.command,
      containerId: req.containerId,
      netns: req.netns,
      ifName: req.ifName,
      cniArgs: req.cniArgs ?? "",
      cniPath: [...req.binDirs],
    } as PluginEnv,
    req.baseEnv ?? process.env,
  );
  const deadline = Date.now() + req.timeoutMs;

  for (let attempt = 1; ; attempt++) {
    if (req.signal?.aborted) throw canceled(req, fail);
    const remaining = deadline - Date.now();
    if (remaining <= 0) throw timedOut(req, fail);

    const run = await runProcess({
      path,
      env,
      stdin: req.stdin,
      timeoutMs: remaining,
      killGraceMs: req.killGraceMs ?? DEFAULT_KILL_GRACE_MS,
      maxOutputBytes: MAX_OUTPUT_BYTES,
      signal: req.signal,
      backend: req.spawn,
    });
    if (run.stopped === "timeout") throw timedOut(req, fail);
    if (run.stopped === "abort") throw canceled(req, fail);

    if (run.spawnError === "ETXTBSY") {
      // The binary is open for writing (being installed or upgraded): wait
      // and try again, as libcni does. libcni then returns empty output as
      // success once its tries run out; failing is the honest answer.
      if (attempt >= TEXT_FILE_BUSY_TRIES) {
        throw fail(
          ErrorCode.Internal,
          `${req.type}: cannot exec ${path}: text file busy (${attempt} tries)`,
        );
      }
      await sleep(Math.min(TEXT_FILE_BUSY_DELAY_MS, deadline - Date.now()), req.signal);
      continue;
    }
    if (run.spawnError !== undefined) {
      throw fail(ErrorCode.Internal, `${req.type}: cannot exec ${path}: ${run.spawnError}`);
    }
    if (run.tooMuchOutput) {
      throw fail(
        ErrorCode.Internal,
        `${req.type}: ${req.command} wrote more than ${MAX_OUTPUT_BYTES} bytes of output`,
      );
    }
    if (run.exitCode === 0) {
      if (run.stderr !== "" && req.onStderr) req.onStderr(run.stderr);
      return VERBS_WITH_OUTPUT.has(req.command) ? parseResult(run.stdout, req, fail) : undefined;
    }
    throw pluginFailure(run, req, fail);
  }
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, Math.max(0, ms));
    signal?.addEventListener("abort", done, { once: true });
  });
}

type Fail = (code: number, msg: string, details?: string) => PluginExecError;

/**
 * A timed-out plugin gets code 11 ("try again later"): the runtime retries a
 * failed sandbox anyway, and a plugin that was slow (lock contention, a busy
 * node) is the transient condition that code exists for. 999 would tell the
 * runtime nothing, and no other code describes "did not answer in time".
 */
function timedOut(req: ExecRequest, fail: Fail): PluginExecError {
  return fail(
    ErrorCode.TryAgainLater,
    `${req.type}: ${req.command} timed out after ${req.timeoutMs} ms; plugin killed`,
  );
}

/** The caller gave up on the call (its client went away, shutdown): same code as a timeout. */
function canceled(req: ExecRequest, fail: Fail): PluginExecError {
  return fail(ErrorCode.TryAgainLater, `${req.type}: ${req.command} canceled; plugin killed`);
}

function quoteOutput(text: string): string {
  const cut = text.length > MAX_QUOTED_OUTPUT ? `${text.slice(0, MAX_QUOTED_OUTPUT)}…` : text;
  return JSON.stringify(cut);
}

/** How the plugin ended, as Go's exec.ExitError prints it. */
function exitText(run: ProcessOutcome): string {
  return run.signal !== undefined ? `signal: ${run.signal}` : `exit status ${run.exitCode}`;
}

function parseResult(stdout: string, req: ExecRequest, fail: Fail): unknown | undefined {
  if (stdout.trim() === "") return undefined;
  try {
    return JSON.parse(stdout);
  } catch (err) {
    throw fail(
      ErrorCode.DecodingFailure,
      `${req.type}: ${req.command} printed output that is not JSON: ${(err as Error).message}`,
      quoteOutput(stdout),
    );
  }
}

/** libcni's pluginErr: stdout is the error if it parses as one, else stderr is the message. */
function pluginFailure(run: ProcessOutcome, req: ExecRequest, fail: Fail): PluginExecError {
  const stdout = run.stdout.trim();
  if (stdout === "") {
    const stderr = run.stderr.trim();
    const msg =
      stderr === ""
        ? `netplugin failed with no error message: ${exitText(run)}`
        : `netplugin failed: ${JSON.stringify(stderr)}: ${exitText(run)}`;
    return fail(ErrorCode.Internal, `${req.type}: ${msg}`);
  }
  let parsed: unknown;
  let parseError = "not a CNI error object";
  try {
    parsed = JSON.parse(stdout);
  } catch (err) {
    parseError = (err as Error).message;
  }
  const pluginError = CniError.fromJSON(parsed);
  if (pluginError && !isFailureCode(pluginError.code)) {
    return fail(
      ErrorCode.Internal,
      `${req.type}: ${pluginError.message} (the plugin failed with error code ${pluginError.code}: ${exitText(run)})`,
      pluginError.details,
    );
  }
  if (pluginError) {
    return fail(pluginError.code, pluginError.message, pluginError.details);
  }
  return fail(
    ErrorCode.Internal,
    `${req.type}: netplugin failed but error parsing its diagnostic message ${quoteOutput(stdout)}: ${parseError}`,
  );
}
