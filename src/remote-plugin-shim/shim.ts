/**
 * cni-driver-shim: a classic CNI plugin whose every verb but VERSION is one call
 * to the driver's socket. It reads top to bottom as a reference plugin does —
 * the checks skel makes, then cmdAdd, cmdDel, cmdCheck, cmdStatus, cmdGc — and
 * returns what to print and the exit code rather than printing, so the whole
 * protocol can be driven from a test as well as from main.ts.
 *
 * What it owes the runtime (cni-spec §4, §5): the result in exactly the config's
 * cniVersion; the CNI error JSON on stdout and exit 1 on failure; nothing on
 * stdout for a successful DEL, CHECK, STATUS or GC. The driver's CNI errors pass
 * through unchanged. While the driver is unreachable or not ready: ADD and CHECK
 * retry until `timeoutSeconds`, then code 11 naming the socket; STATUS answers
 * 50 at once; DEL never fails for that reason — it removes the container
 * interface itself, queues the rest for the driver's replay, and succeeds.
 */
import { type CniArgPair, parseCniArgs } from "../cni/args.js";
import { type EnvRecord, type PluginEnv, parsePluginEnv } from "../cni/env.js";
import { CniError, ErrorCode } from "../cni/errors.js";
import { parseGcValidAttachments } from "../cni/gc.js";
import { requireVerbSupported, versionInfo } from "../cni/versions.js";
import type { DeletionRecord } from "../wire/deletion-record.js";
import { API_VERSION, NOT_READY_DETAILS, type PodRequest } from "../wire/types.js";
import { queueDeletion } from "./deletion-queue.js";
import { answerError, callDriver, callDriverRetrying } from "./driver-call.js";
import { removeContainerInterface } from "./local-teardown.js";
import { openShimLog, type ShimLog } from "./log.js";
import { parseShimConfig, type ShimConfig } from "./plugin-config.js";

/**
 * How long a driver may take to open its HTTP/2 session. A live driver does it in
 * a millisecond; one that holds the socket but does not answer (stopped, wedged)
 * must not make DEL or STATUS wait for the whole timeout.
 */
export const CONNECT_TIMEOUT_MS = 2000;

export interface ShimOutput {
  /** What goes to stdout: the result, the error JSON, or nothing. */
  stdout: string;
  exitCode: 0 | 1;
}

interface Call {
  env: PluginEnv;
  conf: ShimConfig;
  stdin: Uint8Array;
  cniArgs: CniArgPair[];
  log: ShimLog;
}

/** Runs one CNI invocation: the environment, and a reader of stdin (not called for VERSION). */
export async function runShim(
  env: EnvRecord,
  readInput: () => Promise<Uint8Array>,
): Promise<ShimOutput> {
  let cniVersion: string | undefined;
  let log: ShimLog = () => {};
  const started = Date.now();
  try {
    const pluginEnv = parsePluginEnv(env);
    if (pluginEnv.command === "VERSION") {
      return { stdout: `${JSON.stringify(versionInfo())}\n`, exitCode: 0 };
    }
    const stdin = await readInput();
    const conf = parseShimConfig(stdin);
    cniVersion = conf.cniVersion;
    log = openShimLog(conf.logFile);
    requireVerbSupported(pluginEnv.command, conf.cniVersion);
    const call: Call = {
      env: pluginEnv,
      conf,
      stdin,
      cniArgs: parseCniArgs(pluginEnv.cniArgs),
      log,
    };

    let stdout = "";
    switch (pluginEnv.command) {
      case "ADD":
        stdout = await cmdAdd(call);
        break;
      case "DEL":
        await cmdDel(call);
        break;
      case "CHECK":
        await cmdCheck(call);
        break;
      case "STATUS":
        await cmdStatus(call);
        break;
      case "GC":
        await cmdGc(call);
        break;
    }
    log("ok", { ...callFields(call), durationMs: Date.now() - started });
    return { stdout, exitCode: 0 };
  } catch (err) {
    const e = CniError.from(err);
    log("error", {
      command: env.CNI_COMMAND,
      containerId: env.CNI_CONTAINERID,
      ifName: env.CNI_IFNAME,
      code: e.code,
      msg: e.message,
      details: e.details || undefined,
      durationMs: Date.now() - started,
    });
    return { stdout: `${JSON.stringify(e.toJSON(cniVersion), null, 4)}\n`, exitCode: 1 };
  }
}

function callFields(c: Call): Record<string, unknown> {
  return {
    command: c.env.command,
    containerId: c.env.containerId,
    ifName: c.env.ifName,
    netns: c.env.netns,
    network: c.conf.network || undefined,
    cniVersion: c.conf.cniVersion,
  };
}

/** ADD, DEL and CHECK: the attachment, with the runtime's stdin passed on unchanged. */
function podRequest(c: Call): PodRequest {
  return {
    api_version: API_VERSION,
    pod: null,
    container_id: c.env.containerId ?? "",
    netns: c.env.netns ?? "",
    ifname: c.env.ifName ?? "",
    network: c.conf.network,
    cni_version: c.conf.cniVersion,
    cni_args: c.cniArgs.map(([key, value]) => ({ key, value })),
    // The driver reads runtimeConfig (and args) from stdin_config itself.
    capabilities: null,
    stdin_config: c.stdin,
  };
}

/** The error after retrying ran out of time: still code 11, and it names the socket. */
function gaveUp(c: Call, err: CniError, attempts: number): CniError {
  const at = `cni-driver at ${c.conf.socket}`;
  const msg = err.message.startsWith(at) ? err.message : `${at}: ${err.message}`;
  return new CniError(
    err.code,
    `${msg} (gave up after ${attempts} attempt${attempts === 1 ? "" : "s"} in ${c.conf.timeoutMs / 1000} s)`,
    err.details,
  );
}

/** ADD and CHECK wait for a driver that is down or not ready yet, up to timeoutSeconds. */
async function callPatiently<M extends "SetUpPod" | "CheckPod">(c: Call, method: M) {
  const { answer, attempts } = await callDriverRetrying(c.conf.socket, method, podRequest(c), {
    timeoutMs: c.conf.timeoutMs,
    connectTimeoutMs: CONNECT_TIMEOUT_MS,
  });
  const err = answerError(answer);
  if (err) throw err.code === ErrorCode.TryAgainLater ? gaveUp(c, err, attempts) : err;
  if (attempts > 1) c.log("retried", { ...callFields(c), attempts });
  return answer.response as NonNullable<typeof answer.response>;
}

async function cmdAdd(c: Call): Promise<string> {
  const res = await callPatiently(c, "SetUpPod");
  // The driver converts the result to the version asked for; a runtime parses
  // exactly that version, so a mismatch is refused rather than printed.
  let printed: unknown;
  try {
    printed = JSON.parse(res.result_json);
  } catch {
    throw new CniError(
      ErrorCode.Internal,
      `cni-driver at ${c.conf.socket} answered ADD with a result that is not JSON`,
      res.result_json.slice(0, 200),
    );
  }
  const version = (printed as { cniVersion?: unknown } | null)?.cniVersion;
  if (version !== c.conf.cniVersion) {
    throw new CniError(
      ErrorCode.IncompatibleVersion,
      `cni-driver at ${c.conf.socket} answered ADD in CNI version ${JSON.stringify(version)}, not the configuration's ${c.conf.cniVersion}`,
      `result cniVersion ${String(version)}; config cniVersion ${c.conf.cniVersion}`,
    );
  }
  return res.result_json.endsWith("\n") ? res.result_json : `${res.result_json}\n`;
}

async function cmdCheck(c: Call): Promise<void> {
  await callPatiently(c, "CheckPod");
}

/**
 * DEL never waits for a driver that is away: one call, and if the driver cannot
 * take it (not reached, no answer in time, or its "not ready" answer), the
 * container interface is removed here and the rest of the teardown (lease, host
 * state, cache) is queued durably for the driver to replay (at start, on a
 * config load, and every little while). Any other answer passes through, a
 * chained plugin's timeout (code 11 from a driver that answered) included, and
 * the runtime retries a failed DEL.
 */
async function cmdDel(c: Call): Promise<void> {
  const answer = await callDriver(c.conf.socket, "TearDownPod", podRequest(c), {
    timeoutMs: c.conf.timeoutMs,
    connectTimeoutMs: CONNECT_TIMEOUT_MS,
  });
  const err = answerError(answer);
  if (!err) return;
  const cannotTake =
    err.code === ErrorCode.TryAgainLater &&
    (answer.transportError !== undefined || err.details === NOT_READY_DETAILS);
  if (!cannotTake) throw err;

  const teardown = await removeContainerInterface(c.env.netns, c.env.ifName ?? "");
  const record: DeletionRecord = {
    kind: "cniDriverDeletionV1",
    network: c.conf.network,
    containerId: c.env.containerId ?? "",
    ifName: c.env.ifName ?? "",
    netns: c.env.netns ?? "",
    cniArgs: c.cniArgs,
    cniVersion: c.conf.cniVersion,
    queuedAtUnixMs: Date.now(),
  };
  let path: string;
  try {
    path = queueDeletion(c.conf.stateDir, record);
  } catch (qerr) {
    // Without a record nothing would ever release the lease: fail, so the runtime retries.
    throw new CniError(
      ErrorCode.IOFailure,
      `cni-driver at ${c.conf.socket} cannot take DEL (${err.message}), and queueing the deletion in ${c.conf.stateDir} failed: ${(qerr as Error).message}`,
    );
  }
  c.log("queued deletion", { ...callFields(c), reason: err.message, teardown, path });
}

/** STATUS is a poll: an unreachable driver cannot serve ADD (50), said at once. */
async function cmdStatus(c: Call): Promise<void> {
  const answer = await callDriver(
    c.conf.socket,
    "CniStatus",
    { api_version: API_VERSION, network: c.conf.network, cni_version: c.conf.cniVersion },
    {
      timeoutMs: Math.min(c.conf.timeoutMs, CONNECT_TIMEOUT_MS * 2),
      connectTimeoutMs: CONNECT_TIMEOUT_MS,
    },
  );
  const err = answerError(answer);
  if (!err) return;
  if (answer.transportError && err.code === ErrorCode.TryAgainLater) {
    throw new CniError(ErrorCode.PluginNotAvailable, err.message, err.details);
  }
  throw err;
}

/** GC: the runtime's valid set for our driver network; every error the driver met is reported. */
async function cmdGc(c: Call): Promise<void> {
  const valid = parseGcValidAttachments(c.conf.raw);
  const answer = await callDriver(
    c.conf.socket,
    "GarbageCollect",
    {
      api_version: API_VERSION,
      networks: [
        {
          network: c.conf.network,
          valid_attachments: valid.map((a) => ({ container_id: a.containerID, ifname: a.ifname })),
        },
      ],
      cni_version: c.conf.cniVersion,
    },
    { timeoutMs: c.conf.timeoutMs, connectTimeoutMs: CONNECT_TIMEOUT_MS },
  );
  const err = answerError(answer);
  if (!err) return;
  const more = (answer.response?.errors ?? []).slice(1);
  if (more.length === 0) throw err;
  throw new CniError(
    err.code,
    `${err.message} (and ${more.length} more error${more.length === 1 ? "" : "s"})`,
    [err.details, ...more.map((e) => `${e.code}: ${e.msg}`)].filter(Boolean).join("; "),
  );
}
