/**
 * Differences between desired states, and the order to apply them in.
 */
import { CREATION_RANK, type DesiredResource, type ObjectMapping } from "./model.js";

/**
 * What to do to go from one desired state to the next.
 *
 * Apply `create` first, in its order (dependencies before dependents, rules of a
 * chain in position order), then `update`, then `delete` in its order (the
 * reverse). Creating first lets a replaced rule (a DNAT rule whose endpoints
 * changed has a new id) take effect before the old one goes.
 *
 * `update` is a resource whose key stays and whose content changed: a PUT for
 * kinds MidoNet can update (tunnel zones, routers, bridges, ports), delete and
 * re-create for the others and for a router port whose address changed (the
 * reconciler's compareHeld decides).
 */
export interface ResourceChanges {
  create: DesiredResource[];
  update: { before: DesiredResource; after: DesiredResource }[];
  delete: DesiredResource[];
}

export function noChanges(): ResourceChanges {
  return { create: [], update: [], delete: [] };
}

export function isEmpty(changes: ResourceChanges): boolean {
  return changes.create.length === 0 && changes.update.length === 0 && changes.delete.length === 0;
}

function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * Creation order: by kind rank (CREATION_RANK), rules by chain and then by their
 * order in it, everything else by key. A total order, so the result does not
 * depend on the order things were mapped in.
 */
export function compareForCreation(a: DesiredResource, b: DesiredResource): number {
  const rank = CREATION_RANK[a.kind] - CREATION_RANK[b.kind];
  if (rank !== 0) return rank;
  if (a.kind === "Rule" && b.kind === "Rule") {
    return (
      compareText(a.parentId, b.parentId) ||
      compareText(a.order ?? "", b.order ?? "") ||
      compareText(a.key, b.key)
    );
  }
  if (a.kind !== b.kind) return compareText(a.kind, b.kind);
  return compareText(a.key, b.key);
}

export function sortForCreation(resources: DesiredResource[]): DesiredResource[] {
  return resources.sort(compareForCreation);
}

export function sortForDeletion(resources: DesiredResource[]): DesiredResource[] {
  return resources.sort((a, b) => compareForCreation(b, a));
}

/** Structural equality of JSON-like values (what resource bodies are). */
export function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) {
    const bb = b as unknown[];
    if (a.length !== bb.length) return false;
    for (let i = 0; i < a.length; i++) if (!deepEqual(a[i], bb[i])) return false;
    return true;
  }
  const ka = Object.keys(a as object);
  const kb = Object.keys(b as object);
  if (ka.length !== kb.length) return false;
  for (const k of ka) {
    if (!Object.hasOwn(b as object, k)) return false;
    if (!deepEqual((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]))
      return false;
  }
  return true;
}

/** The id a resource's create path nests under; undefined for top-level kinds. */
export function parentOf(r: DesiredResource): string | undefined {
  return (r as { parentId?: string }).parentId;
}

/** Same resource, same content (what it is, where it hangs, what it needs, where it sorts). */
export function sameResource(a: DesiredResource, b: DesiredResource): boolean {
  if (a === b) return true;
  return (
    a.key === b.key &&
    a.order === b.order &&
    deepEqual(a.dependsOn, b.dependsOn) &&
    a.kind === b.kind &&
    parentOf(a) === parentOf(b) &&
    deepEqual(a.body, b.body)
  );
}

/**
 * The changes between two mappings of one object (undefined: the object does
 * not exist). Pure; the incremental path for one event.
 */
export function diffMappings(
  before: ObjectMapping | undefined,
  after: ObjectMapping | undefined,
): ResourceChanges {
  const changes = noChanges();
  const old = new Map<string, DesiredResource>();
  for (const r of before?.resources ?? []) old.set(r.key, r);
  for (const r of after?.resources ?? []) {
    const prev = old.get(r.key);
    if (!prev) changes.create.push(r);
    else {
      old.delete(r.key);
      if (!sameResource(prev, r)) changes.update.push({ before: prev, after: r });
    }
  }
  changes.delete.push(...old.values());
  sortForCreation(changes.create);
  changes.update.sort((x, y) => compareForCreation(x.after, y.after));
  sortForDeletion(changes.delete);
  return changes;
}

/** Appends `more` to `into`, leaving the order to a sortChanges after the last append. */
export function appendChanges(into: ResourceChanges, more: ResourceChanges): void {
  for (const r of more.create) into.create.push(r);
  for (const u of more.update) into.update.push(u);
  for (const r of more.delete) into.delete.push(r);
}

/** Puts each list in its apply order. */
export function sortChanges(changes: ResourceChanges): ResourceChanges {
  changes.create.sort(compareForCreation);
  changes.update.sort((x, y) => compareForCreation(x.after, y.after));
  sortForDeletion(changes.delete);
  return changes;
}

/** Appends `more` to `into`, keeping each list in its apply order. */
export function mergeChanges(into: ResourceChanges, more: ResourceChanges): ResourceChanges {
  if (more.create.length + more.update.length + more.delete.length === 0) return into;
  appendChanges(into, more);
  return sortChanges(into);
}
