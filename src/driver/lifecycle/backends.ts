/**
 * The three ways the driver reaches the outside, chosen once at start and
 * logged: pod plumbing (rtnetlink in-process, or iproute2 execs), plugin
 * execs (posix_spawn from the addon, or Node's spawn) and host-local
 * (in-process on its lease files, or the binary exec'd). Each falls back
 * when its addon is missing, with a warning that says why. This is the only
 * place they are chosen; the daemon hands each to what uses it (the
 * PodPlumbing to the midonet plugin and its bridge cache, the SpawnBackend to
 * the plugin runner).
 */
import type pino from "pino";
import { choosePlumbing, type PlumbingBackend } from "../../plumbing/backend.js";
import { flockAddon } from "../builtin/host-local/file-lock.js";
import { type SpawnBackend, spawnBackend } from "../chain/plugin-process.js";

export type HostLocalMode = "exec" | "in-process";

export interface HostLocalBackend {
  name: HostLocalMode;
  reason: string;
  fallback: boolean;
}

export interface Backends {
  plumbing: PlumbingBackend;
  spawn: SpawnBackend;
  hostLocal: HostLocalBackend;
}

export async function chooseBackends(
  hostLocalMode: HostLocalMode,
  logger: pino.Logger,
): Promise<Backends> {
  const plumbing = await choosePlumbing();
  logger[plumbing.fallback ? "warn" : "info"](
    { plumbing: plumbing.name, reason: plumbing.reason },
    `pod plumbing through ${plumbing.name}`,
  );
  const spawn = spawnBackend();
  logger[spawn.fallback ? "warn" : "info"](
    { spawn: spawn.name, reason: spawn.reason },
    `plugins exec'd through ${spawn.name} spawn`,
  );
  const hostLocal = hostLocalBackend(hostLocalMode);
  logger[hostLocal.fallback ? "warn" : "info"](
    { hostLocal: hostLocal.name, reason: hostLocal.reason },
    `host-local ${hostLocal.name === "exec" ? "exec'd" : "runs in-process"}`,
  );
  return { plumbing, spawn, hostLocal };
}

/** How host-local runs here, and why; in-process needs the flock addon. */
function hostLocalBackend(mode: HostLocalMode): HostLocalBackend {
  if (mode === "exec") return { name: "exec", reason: "--host-local exec", fallback: false };
  const flock = flockAddon();
  if ("reason" in flock)
    return {
      name: "exec",
      reason: `in-process host-local unavailable: ${flock.reason}`,
      fallback: true,
    };
  return { name: "in-process", reason: `--host-local in-process (${flock.path})`, fallback: false };
}
