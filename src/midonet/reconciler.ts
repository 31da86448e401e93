/**
 * The reconciler: makes MidoNet hold what the desired state says, and nothing
 * else of ours.
 *
 * Level-based, keyed by resource. Mapping changes only say which keys to look
 * at; what to do is decided from the desired state at the time of the write and
 * from what MidoNet is known to hold (`held`), so a burst of events on one key
 * costs one write, and a write that failed is simply tried again later.
 *
 * What MidoNet holds is known exactly after `resync()` (a read of everything of
 * ours: actual-state.ts) and kept up to date by our own writes and by MidoNet's
 * cascades (a bridge takes its ports, a port its routes, link and binding, a
 * chain its rules and the jumps to it). A key whose fate is unknown (a create
 * that timed out may have happened) is held as uncertain: it is read before
 * anything is written to it, so a retry never duplicates a create. A restart
 * against a converged MidoNet thus makes no write at all: resync reads, finds
 * everything the same, and stops.
 *
 * Order. Each pass: first the deletes that would block a create (a binding, a
 * link, a tunnel zone membership: MidoNet refuses a second one for the same
 * port or host) and the old halves of replacements; then creates and updates in
 * dependency order (a resource waits until everything in its `dependsOn` is
 * held; one whose dependency is not desired at all is held back, not failed);
 * then every other delete, dependents before what they depend on. Creating
 * before deleting makes a replaced rule (a DNAT whose endpoints changed has a
 * new id) take effect before the old one goes. MidoNet rules cannot be updated;
 * a new rule is POSTed at `insertPosition` in the chain as it stands.
 *
 * Learned MAC/ARP entries and tunnel zone memberships, which MidoNet lists
 * without saying whose they are, are owned as docs/midonet.md ("What the
 * controller owns") says: a learned entry a DELETE of ours left listed is not
 * deleted again; a membership is ours while a node's record names its zone
 * (TunnelZoneRecords, written before the POST, moved once it is deleted).
 *
 * Failures. Any error (an unexpected status, a timeout, a refused connection)
 * fails that one task: it is logged, counted, and retried after an exponential
 * backoff, while the tasks that do not depend on it go on. Nothing here throws
 * out of `flush()`; `resync()` reports a failed read in its result.
 */
import type { Logger } from "pino";
import { type BackoffPolicy, backoffDelay } from "../common/backoff.js";
import { messageOf } from "../common/errors.js";
import { type ActualState, compareHeld, misorderedRules, readActualState } from "./actual-state.js";
import { MidonetApiError, type MidonetClient } from "./api.js";
import type { ResolvedConfig } from "./mapping/config.js";
import type { DesiredState } from "./mapping/desired-state.js";
import { insertPosition } from "./mapping/desired-state.js";
import type { ResourceChanges } from "./mapping/diff.js";
import {
  CREATION_RANK,
  type DesiredResource,
  nodeOwner,
  ownerNode,
  resourceKey,
} from "./mapping/model.js";
import {
  type MidonetObject,
  type ResourceKind,
  type Rule,
  tunnelZoneHostPath,
  type UpdatableKind,
} from "./resources.js";

export type WriteOp = "create" | "update" | "delete";

/** What the reconciler reports as it goes (metrics). */
export interface ReconcilerObserver {
  /** A write MidoNet accepted (a create answered "exists" is not one). */
  write?(op: WriteOp, kind: ResourceKind): void;
  /** A task that failed and will be retried. */
  failure?(op: WriteOp | "read", kind: ResourceKind | undefined, error: unknown): void;
  /** An object of ours that differs in a way we leave alone (see Comparison "drift"). */
  drift?(kind: ResourceKind, key: string, fields: string[]): void;
}

/**
 * The record, one per node and kept on the Node (so any leader, and a restart,
 * reads it), of the tunnel zone the controller joined the node's host to. The
 * rule it serves, at resync: ours are the default zone's members whose host is
 * a node's (actual-state.ts), and each node's host in its recorded zone; of
 * those, what is not desired is an orphan and is deleted, then the record
 * follows (to the zone the node is wanted in, or away). A node with no host id
 * yet owns nothing by its record (it names no membership MidoNet could hold);
 * a recorded zone since deleted is not listed, so nothing is read there (its
 * members went with it). A new leader reads the records from its informer: one
 * the old leader wrote a moment before names the membership it was making,
 * which is desired (so read, and recorded again) unless the node changed
 * again meanwhile, which the next resync (periodic, by default) catches.
 *
 * What it cannot cover: a node deleted while we were down takes its record
 * with it, so its membership in a zone other than the default stays (the
 * default zone's goes by the host rule); likewise the old host's in such a
 * zone when the node's host id changed while we were down.
 */
export interface TunnelZoneRecords {
  /** The zone `node`'s record names (lowercase), if any. */
  zoneOf(node: string): string | undefined;
  /** Every record with its node's host id now (a node with no host id yet is left out). */
  all(): Iterable<{ node: string; zone: string; hostId: string }>;
  /** Makes `node`'s record name `zone` (undefined: removes it); resolves once the API took it. */
  write(node: string, zone: string | undefined): Promise<void>;
}

export interface ReconcilerOptions {
  client: MidonetClient;
  /** The desired state, read at each write (the controller's ClusterMapper state). */
  state: DesiredState;
  config: ResolvedConfig;
  logger?: Pick<Logger, "debug" | "info" | "warn" | "error">;
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
interface Held {
  object: MidonetObject;
  certain: boolean;
}

interface Task {
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

/** Deleted before creates: MidoNet refuses a second binding of a port, link of a port, membership of a host. */
const BLOCKING_KINDS: ReadonlySet<ResourceKind> = new Set([
  "HostInterfacePort",
  "PortLink",
  "TunnelZoneHost",
]);

const MAX_PASSES = 8;

function statusOf(err: unknown): number | undefined {
  return err instanceof MidonetApiError ? err.status : undefined;
}

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

/** The object to send: the desired resource without the mapping's bookkeeping. */
function asObject(r: DesiredResource): MidonetObject {
  const parentId = (r as { parentId?: string }).parentId;
  return (
    parentId === undefined
      ? { kind: r.kind, body: r.body }
      : { kind: r.kind, parentId, body: r.body }
  ) as MidonetObject;
}

export class Reconciler {
  private readonly client: MidonetClient;
  private readonly state: DesiredState;
  private readonly config: ResolvedConfig;
  private readonly logger: ReconcilerOptions["logger"];
  private readonly observer: ReconcilerObserver;
  private readonly records: TunnelZoneRecords | undefined;
  private readonly backoff: BackoffPolicy;
  private readonly signal: AbortSignal | undefined;
  private readonly now: () => number;
  private readonly held = new Map<string, Held>();
  /** chain id → rule ids in the order MidoNet holds them. */
  private readonly chainOrder = new Map<string, string[]>();
  private readonly tasks = new Map<string, Task>();
  /** MAC and ARP entries deleted since the last resync: still listed there, they are learned ones. */
  private readonly tableDeletes = new Set<string>();
  /** MAC and ARP entries known to be learned (see the header): not deleted while listed. */
  private readonly learned = new Set<string>();
  private counts = { creates: 0, updates: 0, deletes: 0, failures: 0 };

  constructor(options: ReconcilerOptions) {
    this.client = options.client;
    this.state = options.state;
    this.config = options.config;
    this.logger = options.logger;
    this.observer = options.observer ?? {};
    this.records = options.records;
    this.backoff = { baseMs: options.backoffMs ?? 500, maxMs: options.maxBackoffMs ?? 60_000 };
    this.signal = options.signal;
    this.now = options.now ?? Date.now;
  }

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

  /** Nothing left to do but what waits on a dependency not desired yet. */
  get converged(): boolean {
    return this.tasks.size === this.heldBack;
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
    this.held.clear();
    this.tasks.clear();
    this.chainOrder.clear();
    for (const [chain, order] of actual.chainOrder) this.chainOrder.set(chain, [...order]);
    for (const [key, object] of actual.objects) this.held.set(key, { object, certain: true });

    let missing = 0;
    let differing = 0;
    for (const r of this.state.resources()) {
      const object = actual.objects.get(r.key);
      if (!object) {
        missing++;
        this.addTask({ key: r.key, op: "upsert", attempts: 0, notBefore: 0 });
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
        this.addTask({ key: r.key, op: "upsert", attempts: 0, notBefore: 0 });
      } else if (this.unrecorded(r)) {
        // Made before records were kept (or the record was lost): record it.
        this.addTask({ key: r.key, op: "upsert", attempts: 0, notBefore: 0 });
      }
    }
    for (const [chain, order] of this.chainOrder) {
      const desired = this.state.chainRules(chain);
      if (desired.length === 0) continue;
      for (const id of misorderedRules(desired, order)) {
        if (this.tasks.has(id)) continue;
        differing++;
        this.addTask({ key: id, op: "upsert", replace: true, attempts: 0, notBefore: 0 });
      }
    }
    const orphans = this.withoutLearned(actual);
    for (const key of orphans) {
      const target = actual.objects.get(key) as MidonetObject;
      this.addTask({ key, op: "delete", target, attempts: 0, notBefore: 0 });
    }
    const report = { ok: true, missing, differing, orphans: orphans.length };
    this.logger?.info(report, "read MidoNet");
    return report;
  }

  /**
   * The orphans less the MAC and ARP entries known to be learned: those a
   * DELETE of ours left listed (see the header), as long as they stay listed.
   */
  private withoutLearned(actual: ActualState): string[] {
    for (const key of this.tableDeletes) {
      if (!actual.objects.has(key) || this.learned.has(key)) continue;
      this.learned.add(key);
      this.logger?.info(
        { key },
        `${key} is still listed after its DELETE: an entry MidoNet's datapath learned; left alone while it stays`,
      );
    }
    this.tableDeletes.clear();
    for (const key of this.learned) if (!actual.objects.has(key)) this.learned.delete(key);
    return actual.orphans.filter((key) => !this.learned.has(key));
  }

  /** Takes the keys a mapping change touched; `flush()` acts on them. */
  enqueue(changes: ResourceChanges): void {
    for (const r of changes.create) this.touch(r.key);
    for (const u of changes.update) this.touch(u.after.key);
    for (const r of changes.delete) this.touch(r.key);
  }

  /** Acts on every task that is due, pass after pass while passes make progress. */
  async flush(): Promise<FlushReport> {
    this.counts = { creates: 0, updates: 0, deletes: 0, failures: 0 };
    for (let pass = 0; pass < MAX_PASSES && !this.signal?.aborted; pass++) {
      const progress = await this.pass();
      if (!progress) break;
      const now = this.now();
      const due = [...this.tasks.values()].some(
        (t) => t.heldBy === undefined && t.waitingFor === undefined && t.notBefore <= now,
      );
      if (!due) {
        break;
      }
    }
    return { ...this.counts, pending: this.tasks.size, held: this.heldBack };
  }

  // -- tasks ----------------------------------------------------------------

  private addTask(task: Task): void {
    this.tasks.set(task.key, task);
  }

  /** A key changed: look at it again (what MidoNet holds under it says what to delete if it went). */
  private touch(key: string): void {
    if (this.state.get(key)) {
      this.addTask({ key, op: "upsert", attempts: 0, notBefore: 0 });
      return;
    }
    const held = this.held.get(key);
    if (!held) {
      this.tasks.delete(key); // never made: nothing to delete
      return;
    }
    this.addTask({ key, op: "delete", target: held.object, attempts: 0, notBefore: 0 });
  }

  /** The task is done, unless a newer one for its key came in meanwhile. */
  private done(task: Task): void {
    if (this.tasks.get(task.key) === task) this.tasks.delete(task.key);
  }

  private failed(task: Task, op: WriteOp | "read", kind: ResourceKind, err: unknown): void {
    task.attempts++;
    const delay = backoffDelay(this.backoff, task.attempts - 1);
    task.notBefore = this.now() + delay;
    this.counts.failures++;
    this.observer.failure?.(op, kind, err);
    this.logger?.warn(
      { key: task.key, kind, op, attempts: task.attempts, retryInMs: delay, err: messageOf(err) },
      `${op} ${kind} ${task.key} failed; retrying`,
    );
  }

  /** One round over the due tasks; true when something was done. */
  private async pass(): Promise<boolean> {
    const now = this.now();
    const upserts: Task[] = [];
    const early: Task[] = [];
    const late: Task[] = [];
    for (const task of [...this.tasks.values()]) {
      if (this.state.get(task.key)) {
        if (task.op === "delete") {
          task.op = "upsert"; // desired again before it went
          task.target = undefined;
        }
        if (task.notBefore <= now || task.heldBy !== undefined || task.waitingFor !== undefined) {
          upserts.push(task);
        }
        continue;
      }
      const held = this.held.get(task.key);
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
      if (this.signal?.aborted) return progress;
      if (await this.runDelete(task)) progress = true;
    }
    const wanted = (t: Task) => this.state.get(t.key) as DesiredResource;
    upserts.sort((a, b) => compareCreation(wanted(a), wanted(b)));
    for (const task of upserts) {
      if (this.signal?.aborted) return progress;
      // Re-read: an earlier task of this pass may have changed what it needs.
      const want = this.state.get(task.key);
      if (!want || this.tasks.get(task.key) !== task) continue;
      if (await this.runUpsert(task, want)) progress = true;
    }
    for (const task of late.sort((a, b) => compareDeletion(a.target!, b.target!))) {
      if (this.signal?.aborted) return progress;
      if (this.tasks.get(task.key) !== task) continue;
      if (!this.held.has(task.key)) {
        this.done(task); // went with something deleted before it
        continue;
      }
      if (await this.runDelete(task)) progress = true;
    }
    return progress;
  }

  // -- upserts --------------------------------------------------------------

  /** Whether every dependency is held for sure; marks the task held back when one is not desired. */
  private dependenciesReady(task: Task, want: DesiredResource): boolean {
    task.heldBy = undefined;
    task.waitingFor = undefined;
    for (const dep of want.dependsOn) {
      if (!this.state.get(dep)) {
        task.heldBy = dep;
        return false;
      }
      if (this.standing(dep)) continue;
      // Desired, but not known to be there (or about to be re-made): see to it first.
      if (!this.tasks.has(dep)) this.addTask({ key: dep, op: "upsert", attempts: 0, notBefore: 0 });
      task.waitingFor = dep;
      return false;
    }
    return true;
  }

  /** Held for sure, and staying (no replacement of it pending). */
  private standing(key: string): boolean {
    const held = this.held.get(key);
    if (!held?.certain) return false;
    const task = this.tasks.get(key);
    if (!task) return true;
    const want = this.state.get(key);
    return (
      task.op === "upsert" &&
      !task.replace &&
      want !== undefined &&
      compareHeld(want, held.object).comparison !== "replace"
    );
  }

  private async runUpsert(task: Task, want: DesiredResource): Promise<boolean> {
    if (!this.dependenciesReady(task, want)) return false;
    let held = this.held.get(task.key);
    if (held && !held.certain) {
      // Maybe there (a create that timed out, a cascade we cannot be sure of): look first.
      try {
        const body = await this.client.get(asObject(want));
        held =
          body === undefined
            ? undefined
            : { object: { ...asObject(want), body } as MidonetObject, certain: true };
        if (held) this.held.set(task.key, held);
        else this.held.delete(task.key);
        // A rule made after all (its answer lost): the chain's order read meanwhile lacks it.
        const wanted = asObject(want);
        if (held && wanted.kind === "Rule") this.chainOrder.delete(wanted.parentId);
      } catch (err) {
        this.failed(task, "create", want.kind, err);
        return false;
      }
    }
    if (held && task.replace) {
      if (!(await this.deleteHeld(task, held.object))) return false;
      task.replace = false;
      held = undefined;
    }
    if (held) {
      const { comparison, fields } = compareHeld(want, held.object);
      if (comparison === "same" || comparison === "drift") {
        if (comparison === "drift") this.observer.drift?.(want.kind, want.key, fields);
        if (!(await this.recordJoin(task, want))) return false;
        this.done(task);
        return true;
      }
      if (comparison === "update") return this.update(task, want);
      if (!(await this.deleteHeld(task, held.object))) return false;
    }
    return this.create(task, want);
  }

  private async update(task: Task, want: DesiredResource): Promise<boolean> {
    try {
      await this.client.update(asObject(want) as MidonetObject & { kind: UpdatableKind });
    } catch (err) {
      if (statusOf(err) === 404) this.held.delete(task.key);
      this.failed(task, "update", want.kind, err);
      return false;
    }
    this.counts.updates++;
    this.observer.write?.("update", want.kind);
    this.held.set(task.key, { object: asObject(want), certain: true });
    this.done(task);
    this.logger?.debug({ kind: want.kind, key: want.key }, `updated ${want.kind} ${want.key}`);
    return true;
  }

  private async create(task: Task, want: DesiredResource): Promise<boolean> {
    let object = asObject(want);
    let position: number | undefined;
    if (object.kind === "Rule") {
      const order = await this.orderOf(object.parentId);
      if (order === undefined) {
        this.failed(
          task,
          "create",
          "Rule",
          new Error(`rules of chain ${object.parentId} unreadable`),
        );
        return false;
      }
      position = insertPosition(this.state.chainRules(object.parentId), order, want.key);
      const body: Rule = { ...object.body, position };
      object = { ...object, body };
    }
    // Stopped while the record was written: the POST is the next leader's to make.
    if (!(await this.recordJoin(task, want)) || this.signal?.aborted) return false;
    let result: "created" | "exists";
    try {
      result = await this.client.create(object);
    } catch (err) {
      const status = statusOf(err);
      if (err instanceof MidonetApiError && err.retryable) {
        // It may have been made before the answer was lost: look before the next try.
        this.held.set(task.key, { object: asObject(want), certain: false });
      }
      if (status === 404) this.doubtDependencies(want);
      // A rule refused (400) or perhaps made where we asked (no answer): the chain's
      // order we hold may be wrong either way, and every later insert's position with it.
      if (
        object.kind === "Rule" &&
        (status === 400 || (err instanceof MidonetApiError && err.retryable))
      )
        this.chainOrder.delete(object.parentId);
      this.failed(task, "create", want.kind, err);
      return false;
    }
    if (result === "exists") {
      // Something holds the id or key already: what, exactly, decides.
      this.held.set(task.key, { object: asObject(want), certain: false });
      if (object.kind === "Rule") this.chainOrder.delete(object.parentId);
      try {
        const body = await this.client.get(asObject(want));
        if (body === undefined) {
          this.held.delete(task.key);
          throw new Error(
            `MidoNet answered 409 to the create, yet holds no ${want.kind} ${want.key}: another object is in its way`,
          );
        }
        this.held.set(task.key, {
          object: { ...asObject(want), body } as MidonetObject,
          certain: true,
        });
      } catch (err) {
        this.failed(task, "create", want.kind, err);
        return false;
      }
      // The next pass compares what is there with what is wanted.
      task.notBefore = 0;
      return true;
    }
    this.counts.creates++;
    this.observer.write?.("create", want.kind);
    this.held.set(task.key, { object: asObject(want), certain: true });
    if (object.kind === "Rule") {
      this.chainOrder.get(object.parentId)?.splice((position as number) - 1, 0, want.key);
    }
    if (object.kind === "Chain") this.chainOrder.set(want.key, []);
    this.done(task);
    this.logger?.debug({ kind: want.kind, key: want.key }, `created ${want.kind} ${want.key}`);
    return true;
  }

  // -- tunnel zone records (TunnelZoneRecords) -------------------------------

  /** A node's membership MidoNet holds as wanted, but whose zone its record does not name. */
  private unrecorded(r: DesiredResource): boolean {
    const node = ownerNode(r.owner);
    return (
      this.records !== undefined &&
      r.kind === "TunnelZoneHost" &&
      node !== undefined &&
      this.records.zoneOf(node) !== r.parentId
    );
  }

  /**
   * Makes the record of `want`'s node (a membership) name its zone, before the
   * POST or before a membership found made is taken as ours. The record names
   * one zone, so while the membership it names now may still be held (and is
   * not wanted) it must stay: the task waits for that delete. False when the
   * task cannot go on yet (waiting, or the write failed and is retried).
   */
  private async recordJoin(task: Task, want: DesiredResource): Promise<boolean> {
    if (!this.records || want.kind !== "TunnelZoneHost") return true;
    const node = ownerNode(want.owner);
    if (node === undefined) return true;
    const recorded = this.records.zoneOf(node);
    if (recorded === want.parentId) return true;
    if (recorded !== undefined) {
      const named = tunnelZoneHostPath(recorded, want.body.hostId);
      const held = this.held.get(named);
      if (held && !this.state.get(named)) {
        if (!this.tasks.has(named)) {
          this.addTask({
            key: named,
            op: "delete",
            target: held.object,
            attempts: 0,
            notBefore: 0,
          });
        }
        task.waitingFor = named;
        return false;
      }
    }
    try {
      await this.records.write(node, want.parentId);
    } catch (err) {
      this.failed(task, "create", want.kind, err);
      return false;
    }
    return true;
  }

  /**
   * A membership went: the record of each node that named it follows, to the
   * zone the node is wanted in now (its create would write it anyway) or away
   * when none. Best effort: a failure leaves a record naming a zone the host is
   * not in, which the next join of the node rewrites.
   */
  private async recordLeave(gone: MidonetObject): Promise<void> {
    if (!this.records || gone.kind !== "TunnelZoneHost") return;
    for (const r of this.records.all()) {
      if (r.zone !== gone.parentId || r.hostId !== gone.body.hostId) continue;
      const zone = this.wantedZone(r.node);
      if (zone === r.zone) continue; // re-made in place (a new address)
      try {
        await this.records.write(r.node, zone);
      } catch (err) {
        this.logger?.warn(
          { node: r.node, err: messageOf(err) },
          "moving a node's tunnel zone record failed; its next join writes it",
        );
      }
    }
  }

  /** The zone the desired state wants `node`'s host in; undefined when none. */
  private wantedZone(node: string): string | undefined {
    for (const r of this.state.mapping(nodeOwner(node))?.resources ?? []) {
      if (r.kind === "TunnelZoneHost") return r.parentId;
    }
    return undefined;
  }

  /** A create answered 404: a referent we took for held may be gone; read them again. */
  private doubtDependencies(want: DesiredResource): void {
    for (const dep of want.dependsOn) {
      const held = this.held.get(dep);
      if (held) held.certain = false;
      if (this.state.get(dep) && !this.tasks.has(dep)) {
        this.addTask({ key: dep, op: "upsert", attempts: 0, notBefore: 0 });
      }
    }
  }

  /** The chain's rule order as MidoNet holds it, read when not known. */
  private async orderOf(chainId: string): Promise<string[] | undefined> {
    const known = this.chainOrder.get(chainId);
    if (known) return known;
    try {
      const rules = await this.client.rules.list(chainId);
      const order = rules.map((r) => (r.id as string).toLowerCase());
      this.chainOrder.set(chainId, order);
      return order;
    } catch (err) {
      this.logger?.warn({ chain: chainId, err: messageOf(err) }, "reading a chain's rules failed");
      return undefined;
    }
  }

  // -- deletes --------------------------------------------------------------

  private async runDelete(task: Task): Promise<boolean> {
    const target = task.target as MidonetObject;
    if (!(await this.deleteHeld(task, target))) return false;
    this.done(task);
    return true;
  }

  /** Deletes `object` (the task's key); false when it failed (the task is rescheduled). */
  private async deleteHeld(task: Task, object: MidonetObject): Promise<boolean> {
    let existed: boolean;
    try {
      existed = await this.client.delete(object);
    } catch (err) {
      this.failed(task, "delete", object.kind, err);
      return false;
    }
    if (existed) {
      this.counts.deletes++;
      this.observer.write?.("delete", object.kind);
    }
    if (object.kind === "MacPort" || object.kind === "IP4Mac") {
      this.tableDeletes.add(resourceKey(object));
    }
    this.gone(resourceKey(object), object);
    this.logger?.debug(
      { kind: object.kind, key: task.key, existed },
      `deleted ${object.kind} ${task.key}`,
    );
    await this.recordLeave(object);
    return true;
  }

  /**
   * `object` is gone: so is what MidoNet deletes with it. What is still desired
   * among those is queued to be made again (it waits for its dependencies).
   */
  private gone(key: string, object: MidonetObject): void {
    this.held.delete(key);
    const queue: { key: string; object: MidonetObject }[] = [{ key, object }];
    while (queue.length > 0) {
      const { key: goneKey, object: goneObject } = queue.shift() as {
        key: string;
        object: MidonetObject;
      };
      if (goneObject.kind === "Rule") {
        const order = this.chainOrder.get(goneObject.parentId);
        const at = order?.indexOf(goneKey) ?? -1;
        if (order && at >= 0) order.splice(at, 1);
      }
      if (goneObject.kind === "Chain") this.chainOrder.delete(goneKey);
      for (const [k, h] of this.held) {
        const effect = cascade(goneObject, goneKey, h.object);
        if (effect === "none") continue;
        if (effect === "gone") {
          this.held.delete(k);
          queue.push({ key: k, object: h.object });
        } else h.certain = false;
        if (this.state.get(k) && !this.tasks.has(k)) {
          this.addTask({ key: k, op: "upsert", attempts: 0, notBefore: 0 });
        }
      }
    }
  }
}

/**
 * What deleting `gone` does to `other` in MidoNet (its cascades, which
 * test/support/midonet-simulator.ts reproduces): "gone" with it, "changed" (a
 * filter reference cleared, a MAC entry whose port went), or "none".
 */
function cascade(
  gone: MidonetObject,
  goneKey: string,
  other: MidonetObject,
): "gone" | "changed" | "none" {
  const parent = (other as { parentId?: string }).parentId;
  const body = other.body as Record<string, unknown>;
  switch (gone.kind) {
    case "Bridge":
      return parent === goneKey &&
        (other.kind === "Port" || other.kind === "MacPort" || other.kind === "IP4Mac")
        ? "gone"
        : "none";
    case "Router":
      return parent === goneKey && (other.kind === "Port" || other.kind === "Route")
        ? "gone"
        : "none";
    case "Port":
      if (other.kind === "Route" && body.nextHopPort === goneKey) return "gone";
      if (other.kind === "PortLink" && (parent === goneKey || body.peerId === goneKey))
        return "gone";
      if (other.kind === "HostInterfacePort" && body.portId === goneKey) return "gone";
      if (other.kind === "MacPort" && body.portId === goneKey) return "changed";
      return "none";
    case "Chain":
      if (other.kind === "Rule" && (parent === goneKey || body.jumpChainId === goneKey))
        return "gone";
      if (body.inboundFilterId === goneKey || body.outboundFilterId === goneKey) return "changed";
      return "none";
    case "TunnelZone":
      return other.kind === "TunnelZoneHost" && parent === goneKey ? "gone" : "none";
    case "PortLink":
      // The API links both ways: the link read off the peer goes too.
      return other.kind === "PortLink" &&
        parent === (gone.body as { peerId: string }).peerId &&
        body.peerId === gone.parentId
        ? "gone"
        : "none";
    default:
      return "none";
  }
}
