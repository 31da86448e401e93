/**
 * One term as leader: a full read of MidoNet (resync), then events, retries
 * and periodic resyncs, until the term's signal aborts. A term owns its
 * MidoNet client, its reconciler and its Node annotator; a later term starts
 * from a fresh read, never from what this one believed.
 */
import { setTimeout as sleep } from "node:timers/promises";
import type { Logger } from "pino";
import { type BackoffPolicy, backoffDelay } from "../../common/backoff.js";
import type { ClusterMapper } from "../mapping/cluster.js";
import type { ResourceChanges } from "../mapping/diff.js";
import type { FlushReport, Reconciler } from "../reconciler.js";
import type { ControllerMetrics } from "./metrics.js";
import type { NodeAnnotator } from "./node-annotations.js";

/** Wakes a waiting loop; a wake that comes while nobody waits is kept for the next wait. */
class Wakeup {
  private pending = false;
  private resolve: (() => void) | undefined;

  notify(): void {
    this.pending = true;
    this.resolve?.();
  }

  async wait(ms: number, signal: AbortSignal): Promise<void> {
    if (this.pending || signal.aborted) {
      this.pending = false;
      return;
    }
    await new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener("abort", done);
        this.resolve = undefined;
        resolve();
      };
      const timer = setTimeout(done, Math.max(0, Math.min(ms, 2 ** 31 - 1)));
      signal.addEventListener("abort", done, { once: true });
      this.resolve = done;
    });
    this.pending = false;
  }
}

export interface LeadershipOptions {
  abort: AbortController;
  reconciler: Reconciler;
  annotator: NodeAnnotator;
  mapper: ClusterMapper;
  metrics: ControllerMetrics;
  logger: Logger;
  /** Resolves once every informer has had its first list. */
  synced: () => Promise<void>;
  /** Full read of MidoNet this often; 0: only at the start. */
  resyncPeriodMs: number;
  /** Between failed first resyncs. */
  retry: BackoffPolicy;
}

export class Leadership {
  readonly abort: AbortController;
  readonly reconciler: Reconciler;
  readonly annotator: NodeAnnotator;
  private readonly wakeup = new Wakeup();
  private resynced = false;
  private lastResync = 0;
  private wasConverged = false;

  constructor(private readonly o: LeadershipOptions) {
    this.abort = o.abort;
    this.reconciler = o.reconciler;
    this.annotator = o.annotator;
  }

  private get signal(): AbortSignal {
    return this.abort.signal;
  }

  /** A first resync done, and nothing due: MidoNet holds the desired state. */
  get converged(): boolean {
    return this.resynced && this.reconciler.converged;
  }

  /** A mapping change, to be written. */
  enqueue(changes: ResourceChanges): void {
    this.reconciler.enqueue(changes);
    this.wakeup.notify();
  }

  /** The term's work, until aborted. */
  async run(): Promise<void> {
    const aborted = new Promise<void>((resolve) =>
      this.signal.addEventListener("abort", () => resolve(), { once: true }),
    );
    await Promise.race([this.o.synced(), aborted]);
    if (this.signal.aborted) return;
    this.annotator.start();
    if (!(await this.firstResync())) return;
    while (!this.signal.aborted) {
      const report = await this.reconciler.flush();
      if (this.signal.aborted) break;
      this.reportFlush(report);
      await this.waitForWork();
    }
  }

  /** Resyncs until one succeeds (with backoff); false when aborted first. */
  private async firstResync(): Promise<boolean> {
    for (let attempt = 0; !this.signal.aborted && !(await this.resync()); attempt++) {
      try {
        await sleep(backoffDelay(this.o.retry, attempt), undefined, { signal: this.signal });
      } catch {
        return false;
      }
    }
    if (this.signal.aborted) return false;
    this.resynced = true;
    this.lastResync = Date.now();
    return true;
  }

  private async resync(): Promise<boolean> {
    const report = await this.reconciler.resync();
    this.o.metrics.inc("midonet_controller_resyncs_total", { outcome: report.ok ? "ok" : "error" });
    return report.ok;
  }

  /** Until a change comes, a retry is due or the periodic resync (done here) is. */
  private async waitForWork(): Promise<void> {
    const resyncAt =
      this.o.resyncPeriodMs > 0
        ? this.lastResync + this.o.resyncPeriodMs
        : Number.POSITIVE_INFINITY;
    const due = this.reconciler.nextDue() ?? Number.POSITIVE_INFINITY;
    await this.wakeup.wait(Math.min(due, resyncAt) - Date.now(), this.signal);
    if (!this.signal.aborted && Date.now() >= resyncAt) {
      this.lastResync = Date.now();
      await this.resync();
    }
  }

  /** The mapping's warnings as a gauge, and a log line when MidoNet comes to hold the desired state. */
  private reportFlush(report: FlushReport): void {
    const warnings = new Map<string, number>();
    for (const w of this.o.mapper.warnings()) {
      warnings.set(w.code, (warnings.get(w.code) ?? 0) + 1);
    }
    this.o.metrics.replace(
      "midonet_controller_mapping_warnings",
      [...warnings].map(([code, n]) => [{ code }, n]),
    );
    const converged = this.reconciler.converged;
    if (converged && !this.wasConverged) {
      this.o.logger.info(
        { desired: this.o.mapper.state.size, held: report.held },
        "MidoNet holds the desired state",
      );
    }
    this.wasConverged = converged;
  }
}
