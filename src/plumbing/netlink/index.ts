/**
 * Pod plumbing through rtnetlink, in-process: no exec. The operations run on one
 * worker thread (worker.ts) that owns the native addon and its sockets; the main
 * thread only posts requests and awaits replies, so neither a spawn nor the
 * kernel's time under rtnl_lock blocks its event loop.
 *
 * The worker is started by the first call and ends after a quiet minute: its
 * isolate, modules and sockets are about 8 MiB of an idle driver (bench/memory),
 * and starting it again costs the next call some 80 ms, which a node that sat
 * quiet that long can spare.
 *
 * RtnetlinkPlumbing is the PodPlumbing of the driver where the addon loads,
 * with the semantics of the iproute2 one (iproute2.ts); errors are
 * NetlinkError (an IpCommandError). Each object has its worker: nothing here
 * is shared between them.
 */
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { pathToFileURL } from "node:url";
import { Worker } from "node:worker_threads";
import { trimMallocArenas } from "../../common/malloc-trim.js";
import type {
  ContainerSideSpec,
  HostAttachment,
  LinkInfo,
  PodInterfaceRef,
  PodInterfaceState,
  PodRoute,
  VethSpec,
} from "../pod-interface-types.js";
import { type PodPlumbing, replacingStaleHostEnd } from "../pod-plumbing.js";
import {
  deserializeError,
  type NetlinkOpName,
  type WorkerHello,
  type WorkerReply,
  type WorkerRequest,
} from "./protocol.js";
import type { SessionStats } from "./session.js";

export { NetlinkError } from "./error.js";

export interface NetlinkStats extends SessionStats {
  /** Open fds of the whole process, counted from the worker. */
  processFds: number;
}

interface Pending {
  resolve(value: unknown): void;
  reject(err: Error): void;
}

/**
 * The worker's file beside this one: worker.js from dist. Under tsx (tests,
 * benches) it is worker.ts, and Node 20 applies no `--import` loader to a
 * worker's entry, so a small bootstrap registers tsx's loader in the worker
 * first and then imports it.
 */
function startWorker(): Worker {
  const opts = { name: "cni-driver-netlink", stdout: false, stderr: false };
  if (!import.meta.url.endsWith(".ts"))
    return new Worker(new URL("./worker.js", import.meta.url), opts);
  const entry = new URL("./worker.ts", import.meta.url).href;
  const bootstrap = `import(${JSON.stringify(tsxApiUrl())}).then((tsx) => {
    tsx.register();
    return import(${JSON.stringify(entry)});
  });`;
  return new Worker(bootstrap, { ...opts, eval: true });
}

/**
 * tsx's ESM loader API. import.meta.resolve is missing where tsx loaded this
 * file as CommonJS (mocha); its package.json export map says where the ESM entry is.
 */
function tsxApiUrl(): string {
  if (typeof import.meta.resolve === "function") return import.meta.resolve("tsx/esm/api");
  const pkgPath = createRequire(import.meta.url).resolve("tsx/package.json");
  const pkg = JSON.parse(readFileSync(pkgPath, "utf8")) as {
    exports: Record<string, { import: { default: string } }>;
  };
  const entry = pkg.exports["./esm/api"]?.import.default ?? "./dist/esm/api/index.mjs";
  return pathToFileURL(join(dirname(pkgPath), entry)).href;
}

class NetlinkWorker {
  private readonly worker: Worker;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private dead: Error | undefined;
  private quiet: NodeJS.Timeout | undefined;
  private retiring = false;
  readonly ready: Promise<string>;

  constructor(
    private readonly quietMs: number,
    private readonly onExit: () => void,
    private readonly onQuiet: () => void,
  ) {
    const worker = startWorker();
    this.worker = worker;
    this.ready = new Promise<string>((resolve, reject) => {
      const onHello = (m: WorkerHello) => {
        if (!("hello" in m)) return;
        worker.off("message", onHello);
        if (m.ready) {
          worker.on("message", (r: WorkerReply) => this.settle(r));
          worker.unref();
          this.armQuiet();
          resolve(m.addon);
        } else reject(new Error(m.reason));
      };
      worker.on("message", onHello);
      worker.on("error", (err) => {
        this.fail(err);
        reject(err);
      });
      worker.on("exit", (code) => {
        const err = new Error(`netlink worker exited with code ${code}`);
        this.fail(err);
        reject(err);
        this.onExit();
        // Its isolate was freed in its own malloc arena, which glibc keeps otherwise.
        if (this.retiring) trimMallocArenas();
      });
    });
  }

  call<T>(op: NetlinkOpName, args: unknown[], transfer: ArrayBuffer[] = []): Promise<T> {
    if (this.dead) return Promise.reject(this.dead);
    const id = this.nextId++;
    clearTimeout(this.quiet);
    // Referenced while a call is in flight, so the process waits for its answer.
    if (this.pending.size === 0) this.worker.ref();
    return new Promise<T>((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
      this.worker.postMessage({ id, op, args } satisfies WorkerRequest, transfer);
    });
  }

  terminate(): Promise<number> {
    return this.worker.terminate();
  }

  /** Closes the worker's sockets and lets it end; it takes no further call. */
  retire(): void {
    this.retiring = true;
    this.call("close", []).catch(() => {}); // a worker already gone has nothing left open
  }

  private armQuiet(): void {
    if (this.retiring) return;
    this.quiet = setTimeout(this.onQuiet, this.quietMs);
    this.quiet.unref();
  }

  private settle(r: WorkerReply): void {
    const p = this.pending.get(r.id);
    if (!p) return;
    this.pending.delete(r.id);
    if (this.pending.size === 0) {
      this.worker.unref();
      this.armQuiet();
    }
    if (r.ok) p.resolve(r.value);
    else p.reject(deserializeError(r.error));
  }

  private fail(err: Error): void {
    this.dead ??= err;
    for (const p of this.pending.values()) p.reject(err);
    this.pending.clear();
  }
}

/** How long the worker may sit without a call before it ends (bench/memory). */
const QUIET_MS = 60_000;

export interface RtnetlinkPlumbingOptions {
  /** A worker with no call in flight this long ends; the next call starts another. Default 60 s. */
  quietMs?: number;
}

/**
 * PodPlumbing through rtnetlink, on a worker of its own: started by start() or
 * the first call, ended after a quiet time, started again by the next call.
 */
export class RtnetlinkPlumbing implements PodPlumbing {
  private current: NetlinkWorker | undefined;
  private readonly quietMs: number;

  constructor(opts: RtnetlinkPlumbingOptions = {}) {
    this.quietMs = opts.quietMs ?? QUIET_MS;
  }

  /**
   * Starts the worker and resolves with the addon's path once it answered a first
   * request; rejects with the reason when the addon cannot be loaded or used.
   */
  start(): Promise<string> {
    return this.worker().ready;
  }

  createVethPair(spec: VethSpec, host: HostAttachment): Promise<void> {
    return this.call("createVethPair", spec, host);
  }

  createVethPairReplacingStale(spec: VethSpec, host: HostAttachment): Promise<boolean> {
    return replacingStaleHostEnd(this, spec, host);
  }

  configureContainerSide(spec: ContainerSideSpec): Promise<PodRoute[]> {
    return this.call("configureContainerSide", spec);
  }

  deletePodInterface(ref: PodInterfaceRef): Promise<boolean> {
    return this.call("deletePodInterface", ref);
  }

  deleteHostLink(name: string): Promise<void> {
    return this.call("deleteHostLink", name);
  }

  showLink(name: string, netns?: string): Promise<LinkInfo | undefined> {
    return this.call("showLink", name, netns);
  }

  inspectPodInterface(
    netns: string,
    ifName: string,
    withIpv6Routes: boolean,
  ): Promise<PodInterfaceState | undefined> {
    return this.call("inspectPodInterface", netns, ifName, withIpv6Routes);
  }

  ensureBridge(
    name: string,
    gatewayCidrs: readonly string[],
    mtu?: number,
    netfilter?: boolean,
  ): Promise<void> {
    return this.call("ensureBridge", name, gatewayCidrs, mtu, netfilter);
  }

  listBridgePorts(name: string): Promise<string[]> {
    return this.call("listBridgePorts", name);
  }

  /**
   * One raw exchange in the host (netns undefined) or in a netns: the message's
   * bytes go to the worker and the answer's come back, both transferred. For
   * tests and diagnostics; the answer is every message of the exchange, up to
   * and including its NLMSG_ERROR or NLMSG_DONE.
   */
  async request(netns: string | undefined, msg: Uint8Array): Promise<Uint8Array> {
    const w = this.worker();
    await w.ready;
    const copy = new Uint8Array(msg);
    return w.call<Uint8Array>("request", [netns ?? null, copy], [copy.buffer as ArrayBuffer]);
  }

  /** Socket counters of the worker, and the process's open fds. */
  stats(): Promise<NetlinkStats> {
    return this.call("stats");
  }

  /** Closes idle sockets and those of vanished netns paths now (the worker also does it periodically). */
  sweep(): Promise<void> {
    return this.call("sweep");
  }

  /** Starts the worker once; a worker that died or ended when quiet is replaced at the next call. */
  private worker(): NetlinkWorker {
    if (!this.current) {
      const w = new NetlinkWorker(
        this.quietMs,
        () => {
          if (this.current === w) this.current = undefined;
        },
        () => {
          if (this.current === w) this.current = undefined;
          w.retire();
        },
      );
      this.current = w;
      w.ready.catch(() => {
        if (this.current === w) this.current = undefined;
      });
    }
    return this.current;
  }

  private async call<T>(op: NetlinkOpName, ...args: unknown[]): Promise<T> {
    const w = this.worker();
    await w.ready;
    return w.call<T>(op, args);
  }
}
