/**
 * host-local's lock: an exclusive flock on <dataDir>/<network>/lock, the file
 * host-local itself creates (go-filemutex, mode 0750). Taking the same lock
 * keeps the in-process allocator and any host-local binary on the node (another
 * runtime's chain, an older driver) from handing out one address twice.
 *
 * flock comes from a small addon (native/flock); without it the in-process
 * allocator is not offered and the driver execs host-local. The lock is polled
 * without blocking, with a bounded backoff, so the event loop never waits on it;
 * within this process one promise chain per lock file orders the holders, since
 * flock does not exclude two holders sharing a process's descriptors.
 */
import { closeSync, constants, openSync } from "node:fs";
import { performance } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";
import { addonOnce } from "../../../common/native-addon.js";

interface FlockAddon {
  flock(fd: number, operation: number): boolean;
}

const LOCK_EX_NB = 2 | 4;
const ADDON = { file: "build/Release/cni_driver_flock.node", envVar: "CNI_DRIVER_FLOCK_ADDON" };

/** The addon, or why it cannot be had; looked up once. */
export const flockAddon = addonOnce<FlockAddon>(ADDON);

/** In-process order per lock file: the tail of its holders' chain. */
const queues = new Map<string, Promise<unknown>>();

/**
 * Runs `fn` holding the lock at `path` (created if missing). Waits at most
 * `timeoutMs` for another process to let go, then fails naming the file.
 */
export async function withFileLock<T>(
  path: string,
  timeoutMs: number,
  fn: () => T | Promise<T>,
): Promise<T> {
  const prev = queues.get(path) ?? Promise.resolve();
  const run = prev.then(
    () => holding(path, timeoutMs, fn),
    () => holding(path, timeoutMs, fn),
  );
  const tail = run.catch(() => undefined);
  queues.set(path, tail);
  try {
    return await run;
  } finally {
    if (queues.get(path) === tail) queues.delete(path);
  }
}

async function holding<T>(path: string, timeoutMs: number, fn: () => T | Promise<T>): Promise<T> {
  const got = flockAddon();
  if ("reason" in got) throw new Error(`cannot lock ${path}: ${got.reason}`);
  const fd = openSync(path, constants.O_CREAT | constants.O_RDONLY, 0o750);
  try {
    const deadline = performance.now() + timeoutMs;
    // Another process holds it for a few ms at most (one host-local run): poll
    // from 1 ms, doubling to 16.
    for (let pause = 1; !got.addon.flock(fd, LOCK_EX_NB); pause = Math.min(pause * 2, 16)) {
      if (performance.now() >= deadline)
        throw new Error(`timed out after ${timeoutMs} ms waiting for the lock ${path}`);
      await sleep(pause);
    }
    // Closing the descriptor lets go of the lock.
    return await fn();
  } finally {
    closeSync(fd);
  }
}
