/**
 * Informers (list, then watch) on the kinds the controller maps, kept running.
 *
 * @kubernetes/client-node's ListWatch relists by itself after a 410 (history
 * compacted) and re-watches when the server ends a watch, but after any other
 * error (a 500, a refused connection, a failed list) it only calls its error
 * callbacks and stops. So every error here schedules start() again, with a
 * backoff, until stop().
 */
import {
  type KubeConfig,
  type KubernetesListObject,
  type KubernetesObject,
  ListWatch,
  Watch,
} from "@kubernetes/client-node";
import type { Logger } from "pino";

export interface InformerHandlers<T> {
  add(obj: T): void;
  update(obj: T): void;
  delete(obj: T): void;
}

export interface ResilientInformerOptions<T extends KubernetesObject> {
  kubeConfig: KubeConfig;
  /** The watch path, e.g. /api/v1/nodes. */
  path: string;
  list: () => Promise<KubernetesListObject<T>>;
  handlers: InformerHandlers<T>;
  /** A short name for logs and metrics ("nodes"). */
  name: string;
  logger?: Pick<Logger, "warn" | "debug">;
  onError?: (err: unknown) => void;
  /** First restart delay after an error; doubled up to maxBackoffMs. Default 500 ms. */
  backoffMs?: number;
  maxBackoffMs?: number;
}

function describe(err: unknown): string {
  const e = err as { message?: string; code?: number; statusCode?: number };
  const status = e?.statusCode ?? e?.code;
  if (typeof status === "number") return `HTTP ${status}`;
  return e?.message ?? String(err);
}

export class ResilientInformer<T extends KubernetesObject> {
  private readonly informer: ListWatch<T>;
  private readonly o: ResilientInformerOptions<T>;
  private stopped = true;
  private failures = 0;
  private lastFailureAt = 0;
  private restartTimer: NodeJS.Timeout | undefined;
  private syncedOnce = false;
  private readonly syncWaiters: (() => void)[] = [];

  constructor(options: ResilientInformerOptions<T>) {
    this.o = options;
    this.informer = new ListWatch<T>(
      options.path,
      new Watch(options.kubeConfig),
      options.list,
      false,
    );
    this.informer.on("add", (o) => options.handlers.add(o));
    this.informer.on("update", (o) => options.handlers.update(o));
    this.informer.on("delete", (o) => options.handlers.delete(o));
    this.informer.on("error", (err) => this.onError(err));
  }

  /** The first list has been received. */
  get synced(): boolean {
    return this.syncedOnce;
  }

  /** Resolves once the first list has been received (never, if stopped before). */
  whenSynced(): Promise<void> {
    if (this.syncedOnce) return Promise.resolve();
    return new Promise((resolve) => this.syncWaiters.push(resolve));
  }

  get(name: string, namespace?: string): T | undefined {
    return this.informer.get(name, namespace);
  }

  list(): readonly T[] {
    return this.informer.list();
  }

  async start(): Promise<void> {
    this.stopped = false;
    await this.begin();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.restartTimer);
    await this.informer.stop();
  }

  private async begin(): Promise<void> {
    if (this.stopped) return;
    await this.informer.start();
    // ListWatch.start() resolves after a failed list too (having called the error
    // callbacks); a list that succeeded left its resourceVersion behind.
    if (!this.syncedOnce && this.informer.latestResourceVersion() !== "") {
      this.syncedOnce = true;
      for (const w of this.syncWaiters.splice(0)) w();
    }
  }

  private onError(err: unknown): void {
    if (this.stopped) return; // stop() aborts the watch, which reports the abort
    const maxBackoff = this.o.maxBackoffMs ?? 30_000;
    // A failure long after the last one starts a new backoff.
    if (Date.now() - this.lastFailureAt > 2 * maxBackoff) this.failures = 0;
    this.lastFailureAt = Date.now();
    this.failures++;
    this.o.onError?.(err);
    const delay = Math.min(maxBackoff, (this.o.backoffMs ?? 500) * 2 ** (this.failures - 1));
    this.o.logger?.warn(
      { informer: this.o.name, err: describe(err), retryInMs: delay },
      `${this.o.name} watch failed; restarting`,
    );
    clearTimeout(this.restartTimer);
    this.restartTimer = setTimeout(() => {
      this.begin().catch((e: unknown) => this.onError(e));
    }, delay);
  }
}
