/**
 * The reconciler's task queue: which keys are to be looked at, in what order,
 * and when a failed one is tried again. It knows nothing of REST: each task is
 * handed to a TaskRunner (the writes, reconcile-writes.ts), which says whether
 * it was done. Apart from the writes so that what runs before what can be read
 * (and changed) without wading through status codes and cascades.
 *
 * Coalescing. One task per key: a burst of events on a key leaves one task,
 * and what it does (make, or delete what is held) is decided when it runs, from
 * the desired state then. A task the writes finish is dropped only if no newer
 * one for its key came in meanwhile.
 *
 * Order. Each pass: first the deletes that would block a create (a binding, a
 * link, a tunnel zone membership: MidoNet refuses a second one for the same
 * port or host); then creates and updates in dependency order (a resource
 * waits until everything in its `dependsOn` is held; one whose dependency is
 * not desired at all is held back, not failed); then every other delete,
 * dependents before what they depend on. Creating before deleting makes a
 * replaced rule (a DNAT whose endpoints changed has a new id) take effect
 * before the old one goes. Passes repeat while they make progress and
 * something is due, up to MAX_PASSES.
 *
 * Retries. A failed task waits an exponential backoff (src/common/backoff.ts)
 * and is counted; the tasks that do not depend on it go on.
 */
import type { Logger } from "pino";
import { type BackoffPolicy, backoffDelay } from "../common/backoff.js";
import { messageOf } from "../common/errors.js";
import { compareHeld } from "./actual-state.js";
import type { DesiredState } from "./mapping/desired-state.js";
import type { ResourceChanges } from "./mapping/diff.js";
import { CREATION_RANK, type DesiredResource, resourceKey } from "./mapping/model.js";
import type { MidonetObject, ResourceKind } from "./resources.js";

export type WriteOp = "create" | "update" | "delete";

export type ReconcileLogger = Pick<Logger, "debug" | "info" | "warn" | "error">;

/** What the reconciler reports as it goes (metrics). */
export interface ReconcilerObserver {
  /** A write MidoNet accepted (a create answered "exists" is not one). */
  write?(op: WriteOp, kind: ResourceKind): void;
  /** A task that failed and will be retried. */
  failure?(op: WriteOp | "read", kind: ResourceKind | undefined, error: unknown): void;
  /** An object of ours that differs in a way we leave alone (see Comparison "drift"). */
  drift?(kind: ResourceKind, key: string, fields: string[]): void;
}

export interface FlushReport {
  creates: number;
  updates: number;
  deletes: number;
  failures: number;
  /** Tasks left: waiting for a retry or for a dependency. */
  pending: number;
  /** Of those, waiting for a dependency that is not desired yet. */
  held: number;
}

/** What MidoNet holds under a key: `object` exactly, or (uncertain) maybe. */
export interface Held {
  object: MidonetObject;
  certain: boolean;
}

export interface Task {
  key: string;
  op: "upsert" | "delete";
  /** delete: what to delete. */
  target?: MidonetObject;
  /** upsert: delete what is held and create again, even if it compares the same (rule order). */
  replace?: boolean;
  attempts: number;
  notBefore: number;
  /** upsert: a dependency that is not desired (yet): no retries until it is. */
  heldBy?: string | undefined;
  /** upsert: a desired dependency not made yet: retried once that is done. */
  waitingFor?: string | undefined;
}

/**
 * What the queue needs of the writes: what is held, and a task done. Handed to
 * `enqueue` and `flush` rather than kept: the writes keep the queue (to say a
 * task is done or failed), and this way neither has to be made first.
 */
export interface TaskRunner {
  /** What MidoNet is known to hold under `key`. */
  heldUnder(key: string): Held | undefined;
  /** Makes MidoNet hold `want`, whose dependencies are held; true when that made progress. */
  upsert(task: Task, want: DesiredResource): Promise<boolean>;
  /** Deletes the task's target; true when done. */
  delete(task: Task): Promise<boolean>;
}

export interface ReconcileQueueOptions {
  state: DesiredState;
  backoff: BackoffPolicy;
  now: () => number;
  signal: AbortSignal | undefined;
  observer: ReconcilerObserver;
  logger: ReconcileLogger | undefined;
}

/** Deleted before creates: MidoNet refuses a second binding of a port, link of a port, membership of a host. */
const BLOCKING_KINDS: ReadonlySet<ResourceKind> = new Set([
  "HostInterfacePort",
  "PortLink",
  "TunnelZoneHost",
]);

/** A bound on one flush: each pass lets go what waited on the last; what is left waits for the next flush. */
const MAX_PASSES = 8;

/** The FlushReport count each kind of write adds to. */
const COUNTED = { create: "creates", update: "updates", delete: "deletes" } as const;

/**
 * Deletion order: the reverse of creation, except that a tunnel zone membership
 * goes first. A default-zone member is known as ours only while its host is a
 * node's (wanted in the zone, or bound to one of our ports); deleted after the
 * host's bindings, a crash in between would leave a membership that no later
 * resync recognises. Nothing depends on a membership, so it can go first.
 */
function deletionRank(kind: ResourceKind): number {
  return kind === "TunnelZoneHost" ? Number.MAX_SAFE_INTEGER : CREATION_RANK[kind];
}

function compareDeletion(a: MidonetObject, b: MidonetObject): number {
  const rank = deletionRank(b.kind) - deletionRank(a.kind);
  if (rank !== 0) return rank;
  const ka = resourceKey(a);
  const kb = resourceKey(b);
  return ka < kb ? -1 : ka > kb ? 1 : 0;
}

function compareCreation(a: DesiredResource, b: DesiredResource): number {
  const rank = CREATION_RANK[a.kind] - CREATION_RANK[b.kind];
  if (rank !== 0) return rank;
  if (a.kind === "Rule" && b.kind === "Rule") {
    const pa = a.body.position ?? 0;
    const pb = b.body.position ?? 0;
    if (a.parentId !== b.parentId) return a.parentId < b.parentId ? -1 : 1;
    if (pa !== pb) return pa - pb;
  }
  return a.key < b.key ? -1 : a.key > b.key ? 1 : 0;
}

export class ReconcileQueue {
  private readonly tasks = new Map<string, Task>();
  private counts = { creates: 0, updates: 0, deletes: 0, failures: 0 };

  constructor(private readonly o: ReconcileQueueOptions) {}

  /** Tasks waiting (for a retry or a dependency). */
  get pending(): number {
    return this.tasks.size;
  }

  /** Tasks waiting for a dependency that is not desired yet (a pod on an unmapped node). */
  get heldBack(): number {
    let n = 0;
    for (const t of this.tasks.values()) if (t.heldBy !== undefined) n++;
    return n;
  }

  /** When the earliest task waiting for a retry is due; undefined when none is. */
  nextDue(): number | undefined {
    let due: number | undefined;
    for (const t of this.tasks.values()) {
      if (t.heldBy !== undefined || t.waitingFor !== undefined) continue;
      if (due === undefined || t.notBefore < due) due = t.notBefore;
    }
    return due;
  }

  has(key: string): boolean {
    return this.tasks.has(key);
  }

  /** Drops every task (a resync plans afresh). */
  clear(): void {
    this.tasks.clear();
  }

  /** Queues making `key` as desired, replacing any task for it; `replace`: re-made even if the same. */
  upsert(key: string, replace = false): void {
    const task: Task = { key, op: "upsert", attempts: 0, notBefore: 0 };
    if (replace) task.replace = true;
    this.tasks.set(key, task);
  }

  /** Queues deleting `target` (held under `key`), replacing any task for it. */
  delete(key: string, target: MidonetObject): void {
    this.tasks.set(key, { key, op: "delete", target, attempts: 0, notBefore: 0 });
  }

  /** Queues making `key` again when it is desired and nothing is queued for it yet. */
  remake(key: string): void {
    if (this.o.state.get(key) && !this.tasks.has(key)) this.upsert(key);
  }

  /** Takes the keys a mapping change touched; `flush()` acts on them. */
  enqueue(changes: ResourceChanges, runner: Pick<TaskRunner, "heldUnder">): void {
    for (const r of changes.create) this.touch(r.key, runner);
    for (const u of changes.update) this.touch(u.after.key, runner);
    for (const r of changes.delete) this.touch(r.key, runner);
  }

  /** Acts on every task that is due, pass after pass while passes make progress. */
  async flush(runner: TaskRunner): Promise<FlushReport> {
    this.counts = { creates: 0, updates: 0, deletes: 0, failures: 0 };
    for (let pass = 0; pass < MAX_PASSES && !this.o.signal?.aborted; pass++) {
      const progress = await this.pass(runner);
      if (!progress) break;
      const now = this.o.now();
      const due = [...this.tasks.values()].some(
        (t) => t.heldBy === undefined && t.waitingFor === undefined && t.notBefore <= now,
      );
      if (!due) {
        break;
      }
    }
    return { ...this.counts, pending: this.tasks.size, held: this.heldBack };
  }

  /** The task is done, unless a newer one for its key came in meanwhile. */
  done(task: Task): void {
    if (this.tasks.get(task.key) === task) this.tasks.delete(task.key);
  }

  /** The task failed: counted, reported, and due again after its backoff. */
  failed(task: Task, op: WriteOp | "read", kind: ResourceKind, err: unknown): void {
    task.attempts++;
    const delay = backoffDelay(this.o.backoff, task.attempts - 1);
    task.notBefore = this.o.now() + delay;
    this.counts.failures++;
    this.o.observer.failure?.(op, kind, err);
    this.o.logger?.warn(
      { key: task.key, kind, op, attempts: task.attempts, retryInMs: delay, err: messageOf(err) },
      `${op} ${kind} ${task.key} failed; retrying`,
    );
  }

  /** A write MidoNet accepted: counted for the flush's report, and reported. */
  wrote(op: WriteOp, kind: ResourceKind): void {
    this.counts[COUNTED[op]]++;
    this.o.observer.write?.(op, kind);
  }

  /** A key changed: look at it again (what MidoNet holds under it says what to delete if it went). */
  private touch(key: string, runner: Pick<TaskRunner, "heldUnder">): void {
    if (this.o.state.get(key)) {
      this.upsert(key);
      return;
    }
    const held = runner.heldUnder(key);
    if (!held) {
      this.tasks.delete(key); // never made: nothing to delete
      return;
    }
    this.delete(key, held.object);
  }

  /** One round over the due tasks; true when something was done. */
  private async pass(runner: TaskRunner): Promise<boolean> {
    const now = this.o.now();
    const upserts: Task[] = [];
    const early: Task[] = [];
    const late: Task[] = [];
    for (const task of [...this.tasks.values()]) {
      if (this.o.state.get(task.key)) {
        if (task.op === "delete") {
          task.op = "upsert"; // desired again before it went
          task.target = undefined;
        }
        if (task.notBefore <= now || task.heldBy !== undefined || task.waitingFor !== undefined) {
          upserts.push(task);
        }
        continue;
      }
      const held = runner.heldUnder(task.key);
      if (!held) {
        this.done(task); // not desired, not there (or gone with its parent)
        continue;
      }
      if (task.op === "upsert") {
        task.op = "delete";
        task.heldBy = undefined;
        task.waitingFor = undefined;
      }
      task.target = held.object;
      if (task.notBefore > now) continue;
      (BLOCKING_KINDS.has(held.object.kind) ? early : late).push(task);
    }
    let progress = false;

    for (const task of early.sort((a, b) => compareDeletion(a.target!, b.target!))) {
      if (this.o.signal?.aborted) return progress;
      if (await runner.delete(task)) progress = true;
    }
    const wanted = (t: Task) => this.o.state.get(t.key) as DesiredResource;
    upserts.sort((a, b) => compareCreation(wanted(a), wanted(b)));
    for (const task of upserts) {
      if (this.o.signal?.aborted) return progress;
      // Re-read: an earlier task of this pass may have changed what it needs.
      const want = this.o.state.get(task.key);
      if (!want || this.tasks.get(task.key) !== task) continue;
      if (!this.dependenciesReady(task, want, runner)) continue;
      if (await runner.upsert(task, want)) progress = true;
    }
    for (const task of late.sort((a, b) => compareDeletion(a.target!, b.target!))) {
      if (this.o.signal?.aborted) return progress;
      if (this.tasks.get(task.key) !== task) continue;
      if (!runner.heldUnder(task.key)) {
        this.done(task); // went with something deleted before it
        continue;
      }
      if (await runner.delete(task)) progress = true;
    }
    return progress;
  }

  /** Whether every dependency is held for sure; marks the task held back when one is not desired. */
  private dependenciesReady(task: Task, want: DesiredResource, runner: TaskRunner): boolean {
    task.heldBy = undefined;
    task.waitingFor = undefined;
    for (const dep of want.dependsOn) {
      if (!this.o.state.get(dep)) {
        task.heldBy = dep;
        return false;
      }
      if (this.standing(dep, runner)) continue;
      // Desired, but not known to be there (or about to be re-made): see to it first.
      this.remake(dep);
      task.waitingFor = dep;
      return false;
    }
    return true;
  }

  /** Held for sure, and staying (no replacement of it pending). */
  private standing(key: string, runner: TaskRunner): boolean {
    const held = runner.heldUnder(key);
    if (!held?.certain) return false;
    const task = this.tasks.get(key);
    if (!task) return true;
    const want = this.o.state.get(key);
    return (
      task.op === "upsert" &&
      !task.replace &&
      want !== undefined &&
      compareHeld(want, held.object).comparison !== "replace"
    );
  }
}
