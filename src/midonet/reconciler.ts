/**
 * The reconciler: makes MidoNet hold what the desired state says, and nothing
 * else of ours.
 *
 * Level-based, keyed by resource. Mapping changes only say which keys to look
 * at; what to do is decided from the desired state at the time of the write and
 * from what MidoNet is known to hold, so a burst of events on one key costs one
 * write, and a write that failed is simply tried again later.
 *
 * What MidoNet holds is known exactly after `resync()` (a read of everything of
 * ours: actual-state.ts) and kept up to date by our own writes and by MidoNet's
 * cascades (a bridge takes its ports, a port its routes, link and binding, a
 * chain its rules and the jumps to it). A restart against a converged MidoNet
 * thus makes no write at all: resync reads, finds everything the same, and
 * stops.
 *
 * This module reads and plans, and is what the controller uses; the work is in
 * two parts: reconcile-queue.ts keeps the tasks and decides what runs before
 * what (blocking deletes, then creates and updates in dependency order, then
 * the other deletes) and when a failed one is retried; reconcile-writes.ts does
 * each task's REST calls and keeps what MidoNet holds (cascades, rule order,
 * learned MAC/ARP entries, the tunnel zone records).
 *
 * Failures. Any error (an unexpected status, a timeout, a refused connection)
 * fails that one task: it is logged, counted, and retried after an exponential
 * backoff, while the tasks that do not depend on it go on. Nothing here throws
 * out of `flush()`; `resync()` reports a failed read in its result.
 */
import { messageOf } from "../common/errors.js";
import { type ActualState, compareHeld, misorderedRules, readActualState } from "./actual-state.js";
import type { MidonetClient } from "./api.js";
import type { ResolvedConfig } from "./mapping/config.js";
import type { DesiredState } from "./mapping/desired-state.js";
import type { ResourceChanges } from "./mapping/diff.js";
import {
  type FlushReport,
  type ReconcileLogger,
  ReconcileQueue,
  type ReconcilerObserver,
} from "./reconcile-queue.js";
import { ReconcileWrites, type TunnelZoneRecords } from "./reconcile-writes.js";

// The types the reconciler's users name, wherever they are defined.
export type { FlushReport, ReconcilerObserver, WriteOp } from "./reconcile-queue.js";
export type { TunnelZoneRecords } from "./reconcile-writes.js";

export interface ReconcilerOptions {
  client: MidonetClient;
  /** The desired state, read at each write (the controller's ClusterMapper state). */
  state: DesiredState;
  config: ResolvedConfig;
  logger?: ReconcileLogger;
  observer?: ReconcilerObserver;
  /** Where each node's joined tunnel zone is recorded; without it, memberships keep no record. */
  records?: TunnelZoneRecords;
  /** First retry delay of a failed task; doubled per failure. Default 500 ms. */
  backoffMs?: number;
  /** Cap on a retry delay. Default 60 s. */
  maxBackoffMs?: number;
  /** Stops everything at once (leadership lost, shutdown). */
  signal?: AbortSignal;
  now?: () => number;
}

export interface ResyncReport {
  ok: boolean;
  error?: string;
  /** Desired resources MidoNet lacks. */
  missing: number;
  /** Desired resources MidoNet holds with other content or out of order. */
  differing: number;
  /** Objects of ours no longer desired. */
  orphans: number;
}

export class Reconciler {
  private readonly client: MidonetClient;
  private readonly state: DesiredState;
  private readonly config: ResolvedConfig;
  private readonly logger: ReconcilerOptions["logger"];
  private readonly observer: ReconcilerObserver;
  private readonly records: TunnelZoneRecords | undefined;
  private readonly queue: ReconcileQueue;
  private readonly writes: ReconcileWrites;

  constructor(options: ReconcilerOptions) {
    this.client = options.client;
    this.state = options.state;
    this.config = options.config;
    this.logger = options.logger;
    this.observer = options.observer ?? {};
    this.records = options.records;
    this.queue = new ReconcileQueue({
      state: this.state,
      backoff: { baseMs: options.backoffMs ?? 500, maxMs: options.maxBackoffMs ?? 60_000 },
      now: options.now ?? Date.now,
      signal: options.signal,
      observer: this.observer,
      logger: this.logger,
    });
    this.writes = new ReconcileWrites({
      client: this.client,
      state: this.state,
      queue: this.queue,
      records: this.records,
      observer: this.observer,
      logger: this.logger,
      signal: options.signal,
    });
  }

  /** Tasks waiting (for a retry or a dependency). */
  get pending(): number {
    return this.queue.pending;
  }

  /** Tasks waiting for a dependency that is not desired yet (a pod on an unmapped node). */
  get heldBack(): number {
    return this.queue.heldBack;
  }

  /** Nothing left to do but what waits on a dependency not desired yet. */
  get converged(): boolean {
    return this.queue.pending === this.queue.heldBack;
  }

  /** When the earliest task waiting for a retry is due; undefined when none is. */
  nextDue(): number | undefined {
    return this.queue.nextDue();
  }

  /**
   * Reads everything of ours from MidoNet and plans what brings it to the
   * desired state (then `flush()` does it). Forgets what it knew before: after
   * a read, what MidoNet holds is known exactly.
   */
  async resync(): Promise<ResyncReport> {
    let actual: ActualState;
    try {
      actual = await readActualState(this.client, {
        tenant: this.config.tenant,
        defaultTunnelZone: this.config.ids.defaultTunnelZone,
        desired: this.state.resources(),
        isDesired: (key) => this.state.get(key) !== undefined,
        joined: this.records ? [...this.records.all()] : [],
      });
    } catch (err) {
      this.observer.failure?.("read", undefined, err);
      this.logger?.warn({ err: messageOf(err) }, "reading MidoNet failed; will retry");
      return { ok: false, error: messageOf(err), missing: 0, differing: 0, orphans: 0 };
    }
    this.queue.clear();
    this.writes.reset(actual);

    let missing = 0;
    let differing = 0;
    for (const r of this.state.resources()) {
      const object = actual.objects.get(r.key);
      if (!object) {
        missing++;
        this.queue.upsert(r.key);
        continue;
      }
      const { comparison, fields } = compareHeld(r, object);
      if (comparison === "drift") {
        this.observer.drift?.(r.kind, r.key, fields);
        this.logger?.warn(
          { kind: r.kind, key: r.key, fields },
          `${r.kind} ${r.key} differs (${fields.join(", ")}) in a way MidoNet cannot update in place; left alone`,
        );
      } else if (comparison !== "same") {
        differing++;
        this.queue.upsert(r.key);
      } else if (this.writes.unrecorded(r)) {
        // Made before records were kept (or the record was lost): record it.
        this.queue.upsert(r.key);
      }
    }
    for (const [chain, order] of actual.chainOrder) {
      const desired = this.state.chainRules(chain);
      if (desired.length === 0) continue;
      for (const id of misorderedRules(desired, order)) {
        if (this.queue.has(id)) continue;
        differing++;
        this.queue.upsert(id, true);
      }
    }
    const orphans = this.writes.withoutLearned(actual);
    for (const key of orphans) this.queue.delete(key, actual.objects.get(key)!);
    const report = { ok: true, missing, differing, orphans: orphans.length };
    this.logger?.info(report, "read MidoNet");
    return report;
  }

  /** Takes the keys a mapping change touched; `flush()` acts on them. */
  enqueue(changes: ResourceChanges): void {
    this.queue.enqueue(changes, this.writes);
  }

  /** Acts on every task that is due, pass after pass while passes make progress. */
  async flush(): Promise<FlushReport> {
    return this.queue.flush(this.writes);
  }
}
