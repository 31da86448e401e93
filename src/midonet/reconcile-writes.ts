/**
 * The reconciler's writes: what one task does to MidoNet (a GET where what is
 * held is uncertain, then a POST, PUT or DELETE), and what MidoNet is known to
 * hold afterwards, our own writes and MidoNet's cascades included. Apart from
 * the queue (reconcile-queue.ts), which decides when a task runs: this module
 * decides what its write is, and keeps the picture of MidoNet true.
 *
 * A key whose fate is unknown (a create that timed out may have happened) is
 * held as uncertain and read before anything is written to it, so a retry
 * never duplicates a create. MidoNet rules cannot be updated; a new rule is
 * POSTed at `insertPosition` in the chain as it stands (the order read, then
 * kept up to date by our writes).
 *
 * Learned MAC/ARP entries and tunnel zone memberships, which MidoNet lists
 * without saying whose they are, are owned as docs/midonet.md ("What the
 * controller owns") says: a learned entry a DELETE of ours left listed is not
 * deleted again; a membership is ours while a node's record names its zone
 * (TunnelZoneRecords, written before the POST, moved once it is deleted).
 */
import { messageOf } from "../common/errors.js";
import { type ActualState, compareHeld } from "./actual-state.js";
import { MidonetApiError, type MidonetClient } from "./api.js";
import type { DesiredState } from "./mapping/desired-state.js";
import { insertPosition } from "./mapping/desired-state.js";
import { type DesiredResource, nodeOwner, ownerNode, resourceKey } from "./mapping/model.js";
import { mergedPutBody } from "./owned-fields.js";
import type {
  Held,
  ReconcileLogger,
  ReconcileQueue,
  ReconcilerObserver,
  Task,
  TaskRunner,
} from "./reconcile-queue.js";
import {
  type MidonetObject,
  type Rule,
  tunnelZoneHostPath,
  type UpdatableKind,
} from "./resources.js";

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

export interface ReconcileWritesOptions {
  client: MidonetClient;
  state: DesiredState;
  /** Where the writes say a task is done, failed or needs another. */
  queue: ReconcileQueue;
  records: TunnelZoneRecords | undefined;
  observer: ReconcilerObserver;
  logger: ReconcileLogger | undefined;
  signal: AbortSignal | undefined;
}

function statusOf(err: unknown): number | undefined {
  return err instanceof MidonetApiError ? err.status : undefined;
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

export class ReconcileWrites implements TaskRunner {
  private readonly held = new Map<string, Held>();
  /** chain id → rule ids in the order MidoNet holds them. */
  private readonly chainOrder = new Map<string, string[]>();
  /** MAC and ARP entries deleted since the last resync: still listed there, they are learned ones. */
  private readonly tableDeletes = new Set<string>();
  /** MAC and ARP entries known to be learned (see the header): not deleted while listed. */
  private readonly learned = new Set<string>();

  constructor(private readonly o: ReconcileWritesOptions) {}

  heldUnder(key: string): Held | undefined {
    return this.held.get(key);
  }

  /** Forgets what it knew: after a read, what MidoNet holds is `actual`, exactly. */
  reset(actual: ActualState): void {
    this.held.clear();
    this.chainOrder.clear();
    for (const [chain, order] of actual.chainOrder) this.chainOrder.set(chain, [...order]);
    for (const [key, object] of actual.objects) this.held.set(key, { object, certain: true });
  }

  /**
   * The orphans less the MAC and ARP entries known to be learned: those a
   * DELETE of ours left listed (see the header), as long as they stay listed.
   */
  withoutLearned(actual: ActualState): string[] {
    for (const key of this.tableDeletes) {
      if (!actual.objects.has(key) || this.learned.has(key)) continue;
      this.learned.add(key);
      this.o.logger?.info(
        { key },
        `${key} is still listed after its DELETE: an entry MidoNet's datapath learned; left alone while it stays`,
      );
    }
    this.tableDeletes.clear();
    for (const key of this.learned) if (!actual.objects.has(key)) this.learned.delete(key);
    return actual.orphans.filter((key) => !this.learned.has(key));
  }

  // -- upserts --------------------------------------------------------------

  async upsert(task: Task, want: DesiredResource): Promise<boolean> {
    let held = this.held.get(task.key);
    if (held && !held.certain) {
      // Maybe there (a create that timed out, a cascade we cannot be sure of): look first.
      try {
        const body = await this.o.client.get(asObject(want));
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
        this.o.queue.failed(task, "create", want.kind, err);
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
        if (comparison === "drift") this.o.observer.drift?.(want.kind, want.key, fields);
        if (!(await this.recordJoin(task, want))) return false;
        this.o.queue.done(task);
        return true;
      }
      if (comparison === "update") return this.update(task, want);
      if (!(await this.deleteHeld(task, held.object))) return false;
    }
    return this.create(task, want);
  }

  /**
   * A PUT replaces the whole object, so it is read first and sent back with
   * only the fields the controller owns changed (owned-fields.ts): what an
   * operator set on it (a load balancer, mirrors, a QoS policy) stays.
   */
  private async update(task: Task, want: DesiredResource): Promise<boolean> {
    const wanted = asObject(want) as MidonetObject & { kind: "Router" | "Bridge" | "Port" };
    try {
      const held = await this.o.client.get(wanted);
      if (held === undefined) {
        // Gone since it was read: made again.
        this.held.delete(task.key);
        return this.create(task, want);
      }
      const body = mergedPutBody(wanted, held);
      await this.o.client.update({ ...wanted, body } as MidonetObject & { kind: UpdatableKind });
    } catch (err) {
      if (statusOf(err) === 404) this.held.delete(task.key);
      this.o.queue.failed(task, "update", want.kind, err);
      return false;
    }
    this.written(task, want, "update");
    return true;
  }

  private async create(task: Task, want: DesiredResource): Promise<boolean> {
    let object = asObject(want);
    let position: number | undefined;
    if (object.kind === "Rule") {
      const order = await this.orderOf(object.parentId);
      if (order === undefined) {
        this.o.queue.failed(
          task,
          "create",
          "Rule",
          new Error(`rules of chain ${object.parentId} unreadable`),
        );
        return false;
      }
      position = insertPosition(this.o.state.chainRules(object.parentId), order, want.key);
      const body: Rule = { ...object.body, position };
      object = { ...object, body };
    }
    // Stopped while the record was written: the POST is the next leader's to make.
    if (!(await this.recordJoin(task, want)) || this.o.signal?.aborted) return false;
    let result: "created" | "exists";
    try {
      result = await this.o.client.create(object);
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
      this.o.queue.failed(task, "create", want.kind, err);
      return false;
    }
    if (result === "exists") {
      // Something holds the id or key already: what, exactly, decides.
      this.held.set(task.key, { object: asObject(want), certain: false });
      if (object.kind === "Rule") this.chainOrder.delete(object.parentId);
      try {
        const body = await this.o.client.get(asObject(want));
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
        this.o.queue.failed(task, "create", want.kind, err);
        return false;
      }
      // The next pass compares what is there with what is wanted.
      task.notBefore = 0;
      return true;
    }
    if (object.kind === "Rule") {
      this.chainOrder.get(object.parentId)?.splice((position as number) - 1, 0, want.key);
    }
    if (object.kind === "Chain") this.chainOrder.set(want.key, []);
    this.written(task, want, "create");
    return true;
  }

  /** MidoNet took the create or update of `want`: it is held as sent, and the task is done. */
  private written(task: Task, want: DesiredResource, op: "create" | "update"): void {
    this.o.queue.wrote(op, want.kind);
    this.held.set(task.key, { object: asObject(want), certain: true });
    this.o.queue.done(task);
    this.o.logger?.debug({ kind: want.kind, key: want.key }, `${op}d ${want.kind} ${want.key}`);
  }

  // -- tunnel zone records (TunnelZoneRecords) -------------------------------

  /** A node's membership MidoNet holds as wanted, but whose zone its record does not name. */
  unrecorded(r: DesiredResource): boolean {
    const node = ownerNode(r.owner);
    return (
      this.o.records !== undefined &&
      r.kind === "TunnelZoneHost" &&
      node !== undefined &&
      this.o.records.zoneOf(node) !== r.parentId
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
    if (!this.o.records || want.kind !== "TunnelZoneHost") return true;
    const node = ownerNode(want.owner);
    if (node === undefined) return true;
    const recorded = this.o.records.zoneOf(node);
    if (recorded === want.parentId) return true;
    if (recorded !== undefined) {
      const named = tunnelZoneHostPath(recorded, want.body.hostId);
      const held = this.held.get(named);
      if (held && !this.o.state.get(named)) {
        if (!this.o.queue.has(named)) this.o.queue.delete(named, held.object);
        task.waitingFor = named;
        return false;
      }
    }
    try {
      await this.o.records.write(node, want.parentId);
    } catch (err) {
      this.o.queue.failed(task, "create", want.kind, err);
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
    if (!this.o.records || gone.kind !== "TunnelZoneHost") return;
    for (const r of this.o.records.all()) {
      if (r.zone !== gone.parentId || r.hostId !== gone.body.hostId) continue;
      const zone = this.wantedZone(r.node);
      if (zone === r.zone) continue; // re-made in place (a new address)
      try {
        await this.o.records.write(r.node, zone);
      } catch (err) {
        this.o.logger?.warn(
          { node: r.node, err: messageOf(err) },
          "moving a node's tunnel zone record failed; its next join writes it",
        );
      }
    }
  }

  /** The zone the desired state wants `node`'s host in; undefined when none. */
  private wantedZone(node: string): string | undefined {
    for (const r of this.o.state.mapping(nodeOwner(node))?.resources ?? []) {
      if (r.kind === "TunnelZoneHost") return r.parentId;
    }
    return undefined;
  }

  /** A create answered 404: a referent we took for held may be gone; read them again. */
  private doubtDependencies(want: DesiredResource): void {
    for (const dep of want.dependsOn) {
      const held = this.held.get(dep);
      if (held) held.certain = false;
      this.o.queue.remake(dep);
    }
  }

  /** The chain's rule order as MidoNet holds it, read when not known. */
  private async orderOf(chainId: string): Promise<string[] | undefined> {
    const known = this.chainOrder.get(chainId);
    if (known) return known;
    try {
      const rules = await this.o.client.rules.list(chainId);
      const order = rules.map((r) => (r.id as string).toLowerCase());
      this.chainOrder.set(chainId, order);
      return order;
    } catch (err) {
      this.o.logger?.warn(
        { chain: chainId, err: messageOf(err) },
        "reading a chain's rules failed",
      );
      return undefined;
    }
  }

  // -- deletes --------------------------------------------------------------

  async delete(task: Task): Promise<boolean> {
    const target = task.target as MidonetObject;
    if (!(await this.deleteHeld(task, target))) return false;
    this.o.queue.done(task);
    return true;
  }

  /** Deletes `object` (the task's key); false when it failed (the task is rescheduled). */
  private async deleteHeld(task: Task, object: MidonetObject): Promise<boolean> {
    let existed: boolean;
    try {
      existed = await this.o.client.delete(object);
    } catch (err) {
      this.o.queue.failed(task, "delete", object.kind, err);
      return false;
    }
    if (existed) this.o.queue.wrote("delete", object.kind);
    if (object.kind === "MacPort" || object.kind === "IP4Mac") {
      this.tableDeletes.add(resourceKey(object));
    }
    this.gone(resourceKey(object), object);
    this.o.logger?.debug(
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
        this.o.queue.remake(k);
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
