/**
 * The driver's live network configuration: the `--config-dir` ConfigMap volume,
 * read, validated in full and swapped in atomically, then watched for kubelet's
 * updates. A rejected update never replaces a good configuration: the last good
 * one keeps serving and the error is kept for CniStatus, the log and the metrics.
 *
 * kubelet updates the volume by renaming a new `..data` symlink over the old
 * one; the key files are symlinks through `..data` and never change themselves.
 * Raw fs.watch misses that; chokidar reports a `change` for each key within a
 * few milliseconds of the swap (1–4 ms measured with chokidar 4 to 6; fs.watch on
 * the directory misses every swap).
 */

import { EventEmitter } from "node:events";
import { constants, statSync } from "node:fs";
import { lstat, readdir, readFile, readlink, realpath, stat } from "node:fs/promises";
import { join, resolve } from "node:path";
import { type FSWatcher, watch } from "chokidar";
import pino from "pino";
import { CniError } from "../../cni/errors.js";
import { messageOf } from "../../common/errors.js";
import { listNodeAddresses } from "../../plumbing/node-addresses.js";
import { type DriverConfig, type LoadOptions, loadDriverConfig } from "./network-config.js";
import type { PodCidrs } from "./pod-cidr.js";
import { type NodeAddress, nodeLinkNames } from "./pod-range-guard.js";

/** A rejected load, as CniStatus and the log show it. */
export interface ConfigError {
  message: string;
  at: Date;
  source: string;
}

export interface ConfigSourceOptions {
  /** The mounted ConfigMap directory (`--config-dir`). */
  dir: string;
  /** Where exec'd plugins are looked up (CNI_PATH). */
  binDirs: string[];
  podCidrs?: PodCidrs;
  /** host-local's `dataDir` for networks that set none. */
  hostLocalDataDir?: string;
  builtins?: LoadOptions["builtins"];
  /**
   * Which directory each load reads; default `dir`, which is watched either way.
   * With `--configmap`, the ConfigMap's copy fetched through the API while that
   * is the fresher one (kube/configmap-mirror.ts).
   */
  resolveDir?: () => Promise<string>;
  /**
   * The node's addresses, which no pod range may overlap (pod-range-guard.ts);
   * default: those of the driver's own namespace. A listing that fails
   * rejects the load: no range is taken without the check.
   */
  nodeAddresses?: () => Promise<NodeAddress[]>;
  /** Quiet time after the last change before a reload; default 100 ms. */
  debounceMs?: number;
  /** How often kubelet's `..data` link is looked at behind the watcher (default 2000 ms; 0: never). */
  dataRecheckMs?: number;
  logger?: pino.Logger;
}

export interface ConfigSourceEvents {
  reload: [cfg: DriverConfig];
  error: [err: ConfigError];
}

/** kubelet's AtomicWriter: the data-dir link, and the prefix of every name it reserves. */
const DATA_DIR = "..data";
const RESERVED_PREFIX = "..";

/** A snapshot read can race a second swap that removes its version dir; it is read again. */
const SNAPSHOT_ATTEMPTS = 3;

const isErrno = (err: unknown, code: string): boolean =>
  (err as NodeJS.ErrnoException | undefined)?.code === code;

/**
 * Reads every key of the volume: name → bytes. Keys are the names not starting
 * with `..`, regular files only (through symlinks); a key that is a directory
 * (a ConfigMap item projected to a sub-path) is left out.
 *
 * When `..data` is a symlink (a kubelet-projected volume), the keys are read from
 * the one version directory it points at, resolved once: every key then comes
 * from the same version even if kubelet swaps again mid-read, and those files are
 * exactly what the visible `key -> ..data/key` links resolve to. A plain
 * directory (no `..data`) is read through its visible entries.
 */
export async function readConfigDir(dir: string): Promise<Map<string, Uint8Array>> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await readSnapshot(dir);
    } catch (err) {
      // ENOENT mid-read: the version dir was replaced between readdir and read.
      if (!isErrno(err, "ENOENT") || attempt >= SNAPSHOT_ATTEMPTS) throw err;
    }
  }
}

async function readSnapshot(dir: string): Promise<Map<string, Uint8Array>> {
  let base = dir;
  try {
    if ((await lstat(join(dir, DATA_DIR))).isSymbolicLink()) {
      base = await realpath(join(dir, DATA_DIR));
    }
  } catch (err) {
    if (!isErrno(err, "ENOENT")) throw err;
  }
  const files = new Map<string, Uint8Array>();
  const names = (await readdir(base)).filter((n) => !n.startsWith(RESERVED_PREFIX)).sort();
  for (const name of names) {
    const path = join(base, name);
    let isFile: boolean;
    try {
      isFile = (await stat(path)).isFile();
    } catch (err) {
      // A dangling key link in a plain directory: nothing to read.
      if (base === dir && isErrno(err, "ENOENT")) continue;
      throw err;
    }
    if (isFile) files.set(name, await readFile(path));
  }
  return files;
}

/**
 * `pluginExists` for a list of bin dirs: an executable regular file named
 * `type` in one of them, as libcni's FindInPath looks it up. The answers are
 * kept for the one load they serve.
 */
// Exported for its tests only (integration/config-source.test.ts).
export function pluginFinder(binDirs: readonly string[]): (type: string) => boolean {
  const known = new Map<string, boolean>();
  return (type: string): boolean => {
    let found = known.get(type);
    if (found === undefined) {
      found = binDirs.some((d) => isExecutableFile(join(d, type)));
      known.set(type, found);
    }
    return found;
  };
}

function isExecutableFile(path: string): boolean {
  try {
    const st = statSync(path);
    return (
      st.isFile() && (st.mode & (constants.S_IXUSR | constants.S_IXGRP | constants.S_IXOTH)) !== 0
    );
  } catch {
    return false;
  }
}

export class ConfigSource extends EventEmitter<ConfigSourceEvents> {
  private readonly dir: string;
  private readonly binDirs: readonly string[];
  private readonly builtins: LoadOptions["builtins"];
  private readonly debounceMs: number;
  private readonly dataRecheckMs: number;
  /** Where kubelet's `..data` link pointed when the latest load began ("" without one). */
  private loadedData = "";
  private recheck: NodeJS.Timeout | undefined;
  private readonly log: pino.Logger;
  private podCidrs: PodCidrs;
  private readonly hostLocalDataDir: string | undefined;
  private readonly resolveDir: (() => Promise<string>) | undefined;
  private readonly nodeAddresses: () => Promise<NodeAddress[]>;

  private config: DriverConfig | undefined;
  private error: ConfigError | undefined;
  private generation = 0;
  private reloadCount = 0;
  private reloadErrorCount = 0;

  private watcher: FSWatcher | undefined;
  private timer: NodeJS.Timeout | undefined;
  /** The load running now, and the one queued behind it (at most one). */
  private inFlight: Promise<void> | undefined;
  private queued: Promise<void> | undefined;
  private closed = false;

  constructor(opts: ConfigSourceOptions) {
    super();
    // Absolute and normalised: chokidar reports paths under it, compared by prefix.
    this.dir = resolve(opts.dir);
    this.hostLocalDataDir = opts.hostLocalDataDir;
    this.resolveDir = opts.resolveDir;
    this.nodeAddresses = opts.nodeAddresses ?? listNodeAddresses;
    this.binDirs = [...opts.binDirs];
    this.builtins = opts.builtins;
    this.debounceMs = opts.debounceMs ?? 100;
    this.dataRecheckMs = opts.dataRecheckMs ?? 2000;
    this.log = (opts.logger ?? pino({ enabled: false })).child({ component: "config" });
    this.podCidrs = { ...opts.podCidrs };
  }

  /** Every load attempt, good or rejected (the start's included). */
  get reloads(): number {
    return this.reloadCount;
  }

  /** Load attempts rejected; the last good configuration stayed in use each time. */
  get reloadErrors(): number {
    return this.reloadErrorCount;
  }

  /** The configuration in use; undefined until one load has succeeded. */
  current(): DriverConfig | undefined {
    return this.config;
  }

  /** Why the latest load was rejected; cleared by the next good load. */
  lastError(): ConfigError | undefined {
    return this.error;
  }

  /**
   * Loads the directory once (a failure is recorded, not thrown: the driver
   * starts not ready and the watcher picks up the fix) and watches it. The
   * watcher is ready before that first read, so no update can fall between them.
   */
  async start(): Promise<void> {
    if (this.closed) throw new Error("config source is closed");
    if (this.watcher) return;
    const watcher = watch(this.dir, {
      ignoreInitial: true,
      // Only the visible keys and the directory itself: kubelet's `..`-prefixed
      // version dirs would echo every swap a second time, and their removal
      // events arrive late enough to outlast the debounce.
      depth: 0,
      ignored: (path: string) => path !== this.dir && isReservedEntry(this.dir, path),
    });
    this.watcher = watcher;
    watcher.on("all", (event, path) => {
      this.log.debug({ event, path }, "config dir changed");
      this.schedule();
    });
    watcher.on("error", (err) => {
      this.log.warn({ err }, "config dir watcher error");
    });
    await new Promise<void>((resolve) => watcher.once("ready", () => resolve()));
    // The watcher's backstop. chokidar watches each key through its symlink, on
    // the file inside the version dir of the moment, and re-arms that watch on
    // the next event; two swaps within its 5 ms event throttle can leave it on a
    // deleted file, and the key links themselves never change, so nothing would
    // fire again (measured: deaf in 16 of 20 back-to-back swaps). One readlink
    // every few seconds notices a swap it missed.
    if (this.dataRecheckMs > 0) {
      this.recheck = setInterval(() => void this.recheckData(), this.dataRecheckMs);
      this.recheck.unref();
    }
    await this.reload();
  }

  private async recheckData(): Promise<void> {
    const now = await readlink(join(this.dir, DATA_DIR)).catch(() => "");
    if (now !== this.loadedData && !this.timer && !this.inFlight && !this.closed) {
      this.log.debug({ from: this.loadedData, to: now }, "..data moved with no watcher event");
      this.schedule();
    }
  }

  /** The pod CIDRs the `usePodCidr` template is filled from now (the Node's, or --pod-cidr). */
  podCidrsNow(): PodCidrs {
    return this.podCidrs;
  }

  /** Replaces the pod CIDRs the `usePodCidr` template is filled from, and reloads. */
  setPodCidrs(c: PodCidrs): Promise<void> {
    this.podCidrs = { ...c };
    return this.reload();
  }

  /**
   * Reads the directory now. Loads never overlap: a call while one runs queues
   * exactly one more (calls meanwhile share it), which starts when the running
   * one ends and so sees every change made before it was asked for.
   */
  reload(): Promise<void> {
    if (this.closed) return Promise.resolve();
    if (this.queued) return this.queued;
    if (this.inFlight) {
      this.queued = this.inFlight.then(() => {
        this.queued = undefined;
        return this.reload();
      });
      return this.queued;
    }
    this.inFlight = this.loadOnce().finally(() => {
      this.inFlight = undefined;
    });
    return this.inFlight;
  }

  /** Stops watching; a load in progress is awaited, none starts after. */
  async close(): Promise<void> {
    this.closed = true;
    if (this.recheck) clearInterval(this.recheck);
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    const watcher = this.watcher;
    this.watcher = undefined;
    await watcher?.close();
    await this.queued;
    await this.inFlight;
  }

  private schedule(): void {
    if (this.closed) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.reload();
    }, this.debounceMs);
  }

  /** One load: read, validate, swap in or record the error. Never throws. */
  private async loadOnce(): Promise<void> {
    const started = performance.now();
    this.reloadCount += 1;
    let cfg: DriverConfig;
    let dir = this.dir;
    // Before the keys are read: a swap after this point makes the next recheck load again.
    this.loadedData = await readlink(join(this.dir, DATA_DIR)).catch(() => "");
    try {
      if (this.resolveDir) dir = await this.resolveDir();
      const files = await readConfigDir(dir);
      const nodeAddresses = await this.nodeAddresses().catch((err: unknown) => {
        throw new Error(
          `cannot list the node's addresses to check the pod ranges against: ${messageOf(err)}`,
        );
      });
      cfg = loadDriverConfig(
        files,
        {
          source: dir,
          podCidrs: this.podCidrs,
          hostLocalDataDir: this.hostLocalDataDir,
          pluginExists: pluginFinder(this.binDirs),
          builtins: this.builtins,
          binDirs: this.binDirs,
          nodeAddresses,
          ownInterfaces: this.config ? nodeLinkNames(this.config.settings) : [],
        },
        this.generation + 1,
      );
    } catch (err) {
      this.reject(err, dir);
      return;
    }
    // The swap: one assignment, so a call sees either the old config or the new one.
    this.generation = cfg.generation;
    this.config = cfg;
    this.error = undefined;
    this.log.info(
      {
        generation: cfg.generation,
        contentHash: cfg.contentHash,
        networks: [...cfg.networks.keys()],
        defaultNetwork: cfg.defaultNetwork,
        durationMs: Math.round((performance.now() - started) * 1000) / 1000,
      },
      "network configuration loaded",
    );
    this.notify("reload", () => this.emit("reload", cfg));
  }

  private reject(err: unknown, dir: string): void {
    this.reloadErrorCount += 1;
    const message = describe(err, dir);
    const error: ConfigError = { message, at: new Date(), source: dir };
    this.error = error;
    this.log.error(
      {
        source: dir,
        code: err instanceof CniError ? err.code : undefined,
        keptGeneration: this.config?.generation ?? null,
      },
      `network configuration rejected: ${message}`,
    );
    // An 'error' event without a listener would throw: only emit to listeners.
    if (this.listenerCount("error") > 0) this.notify("error", () => this.emit("error", error));
  }

  /**
   * Emits to the listeners; one that throws is logged, not propagated: a load is
   * done once it has swapped, and a debounced reload has no caller to throw to.
   */
  private notify(event: keyof ConfigSourceEvents, emit: () => void): void {
    try {
      emit();
    } catch (err) {
      this.log.error({ err, event }, "config listener failed");
    }
  }
}

/** True for kubelet's reserved entries (`..data`, `..2024_…`) directly under the dir. */
function isReservedEntry(dir: string, path: string): boolean {
  const rel = path.startsWith(`${dir}/`) ? path.slice(dir.length + 1) : path;
  return rel.startsWith(RESERVED_PREFIX);
}

/** The message for a failed load: CNI errors name the key already; fs errors get the dir. */
function describe(err: unknown, dir: string): string {
  if (err instanceof CniError) return err.message;
  const e = err as NodeJS.ErrnoException;
  if (e && typeof e.code === "string") return `cannot read config dir ${dir}: ${e.message}`;
  return messageOf(err);
}
