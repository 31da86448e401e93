/**
 * The whole desired MidoNet state: every object's mapping, indexed by resource
 * key, with rule positions assigned chain by chain.
 *
 * Positions. A rule's position is its 1-based index among the rules of its
 * chain sorted by `order` (then key). Rules are never reordered relative to one
 * another by a change: a rule's order derives from what identifies it. So when a
 * reconciler deletes the rules that went and inserts the new ones in ascending
 * position, the chain ends in the desired order. When it inserts while rules
 * that are about to go are still there (create before delete), the POST
 * position is the one after the rule's nearest desired predecessor in the
 * actual chain: `insertPosition` computes it.
 *
 * Two objects claiming one key (only a misconfiguration can: two nodes
 * annotated with one MidoNet host, two pods with one address and MAC) is
 * reported as a "duplicate-resource" warning; the claim of the owner that sorts
 * first holds the key, whatever order the claims came in.
 */
import type { Rule } from "../resources.js";
import {
  compareForCreation,
  noChanges,
  type ResourceChanges,
  sameResource,
  sortForCreation,
  sortForDeletion,
} from "./diff.js";
import {
  CREATION_RANK,
  type DesiredResource,
  type MappingWarning,
  type ObjectMapping,
} from "./model.js";

/** The rules of one chain as sort keys ("<order>\0<key>"), sorted unless `dirty`. */
interface ChainOrder {
  keys: string[];
  dirty: boolean;
}

function byOwner(a: DesiredResource, b: DesiredResource): number {
  return a.owner < b.owner ? -1 : a.owner > b.owner ? 1 : 0;
}

function ruleSortKey(r: DesiredResource): string {
  return `${r.order ?? ""}\u0000${r.key}`;
}

function lowerBound(keys: readonly string[], key: string): number {
  let lo = 0;
  let hi = keys.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((keys[mid] as string) < key) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * The POST position for `ruleId` in a chain that now holds `actual` (rule ids in
 * chain order), so that it lands right after its nearest predecessor in
 * `desired` (the chain's desired rule ids in order). 1 when none precedes it.
 */
export function insertPosition(
  desired: readonly string[],
  actual: readonly string[],
  ruleId: string,
): number {
  const at = desired.indexOf(ruleId);
  for (let i = at - 1; i >= 0; i--) {
    const where = actual.indexOf(desired[i] as string);
    if (where >= 0) return where + 2;
  }
  return 1;
}

export class DesiredState {
  private readonly owners = new Map<string, ObjectMapping>();
  /** key → its claims, the effective one first (an array only when claimed twice). */
  private readonly claims = new Map<string, DesiredResource | DesiredResource[]>();
  private readonly chains = new Map<string, ChainOrder>();
  private readonly duplicates = new Set<string>();

  /** Number of distinct resources. */
  get size(): number {
    return this.claims.size;
  }

  /** Loads many mappings at once, computing no changes (a fresh state's bulk fill). */
  load(mappings: Iterable<ObjectMapping>): void {
    for (const m of mappings) {
      const prev = this.owners.get(m.owner);
      if (prev) this.apply(m);
      else {
        this.owners.set(m.owner, m);
        for (const r of m.resources) this.claim(r, true);
      }
    }
  }

  /** Replaces what `mapping.owner` maps to; returns what changed, rules with their positions. */
  apply(mapping: ObjectMapping): ResourceChanges {
    const prev = this.owners.get(mapping.owner);
    if (mapping.resources.length === 0 && mapping.warnings.length === 0 && !mapping.skipped) {
      this.owners.delete(mapping.owner);
    } else {
      this.owners.set(mapping.owner, mapping);
    }
    const touched = new Map<string, DesiredResource | undefined>();
    const old = new Map<string, DesiredResource>();
    for (const r of prev?.resources ?? []) old.set(r.key, r);
    const next = new Map<string, DesiredResource>();
    for (const r of mapping.resources) next.set(r.key, r);

    for (const [key, r] of old) {
      const n = next.get(key);
      if (n && sameResource(r, n)) continue;
      if (!touched.has(key)) touched.set(key, this.effective(key));
      this.release(r);
    }
    for (const [key, r] of next) {
      const o = old.get(key);
      if (o && sameResource(o, r)) continue;
      if (!touched.has(key)) touched.set(key, this.effective(key));
      this.claim(r, false);
    }

    const changes = noChanges();
    for (const [key, before] of touched) {
      const after = this.effective(key);
      if (!before && after) changes.create.push(this.withPosition(after));
      else if (before && !after) changes.delete.push(before);
      else if (before && after && !sameResource(before, after)) {
        changes.update.push({ before, after: this.withPosition(after) });
      }
    }
    sortForCreation(changes.create);
    changes.update.sort((x, y) => compareForCreation(x.after, y.after));
    sortForDeletion(changes.delete);
    return changes;
  }

  /** Removes everything `owner` maps to. */
  remove(owner: string): ResourceChanges {
    return this.apply({ owner, resources: [], warnings: [] });
  }

  mapping(owner: string): ObjectMapping | undefined {
    return this.owners.get(owner);
  }

  /** The resource at `key`, rules with their position. */
  get(key: string): DesiredResource | undefined {
    const r = this.effective(key);
    return r && this.withPosition(r);
  }

  /** A rule's 1-based position in its chain; undefined for an unknown key or a non-rule. */
  position(key: string): number | undefined {
    const r = this.effective(key);
    if (r?.kind !== "Rule") return undefined;
    const keys = this.chainKeys(r.parentId);
    return lowerBound(keys, ruleSortKey(r)) + 1;
  }

  /** The ids of a chain's rules in position order. */
  chainRules(chainId: string): string[] {
    return this.chainKeys(chainId).map((k) => k.slice(k.indexOf("\u0000") + 1));
  }

  /**
   * Every resource in creation order (delete in the reverse): by kind rank,
   * then by owner, each owner's resources in its mapping's order; rules last,
   * chain by chain in position order. Deterministic: the same objects give the
   * same list whatever order they came in.
   */
  resources(): DesiredResource[] {
    const owners = [...this.owners.keys()].sort();
    const buckets: DesiredResource[][] = [[], [], [], []];
    for (const owner of owners) {
      for (const r of (this.owners.get(owner) as ObjectMapping).resources) {
        if (r.kind === "Rule") continue;
        if (this.duplicates.size > 0 && this.effective(r.key)?.owner !== owner) continue;
        (buckets[CREATION_RANK[r.kind]] as DesiredResource[]).push(r);
      }
    }
    const out = buckets.flat();
    for (const chainId of [...this.chains.keys()].sort()) {
      const keys = this.chainKeys(chainId);
      for (let i = 0; i < keys.length; i++) {
        const k = keys[i] as string;
        const r = this.effective(k.slice(k.indexOf("\u0000") + 1)) as DesiredResource;
        out.push(this.withPosition(r, i + 1));
      }
    }
    return out;
  }

  /** Every object's warnings and the duplicate claims, by owner. */
  warnings(): MappingWarning[] {
    const out: MappingWarning[] = [];
    for (const m of this.owners.values()) out.push(...m.warnings);
    for (const key of this.duplicates) {
      const claim = this.claims.get(key);
      if (!Array.isArray(claim)) continue;
      const holder = (claim[0] as DesiredResource).owner;
      for (const r of claim.slice(1)) {
        out.push({
          owner: r.owner,
          code: "duplicate-resource",
          message: `${r.kind} ${key} is already produced by ${holder}`,
        });
      }
    }
    return out.sort((a, b) => (a.owner < b.owner ? -1 : a.owner > b.owner ? 1 : 0));
  }

  private effective(key: string): DesiredResource | undefined {
    const claim = this.claims.get(key);
    return Array.isArray(claim) ? claim[0] : claim;
  }

  private claim(r: DesiredResource, bulk: boolean): void {
    const existing = this.claims.get(r.key);
    if (!existing) {
      this.claims.set(r.key, r);
      if (r.kind === "Rule") this.chainInsert(r, bulk);
      return;
    }
    const list = Array.isArray(existing) ? existing : [existing];
    const before = list[0] as DesiredResource;
    const mine = list.findIndex((x) => x.owner === r.owner);
    if (mine >= 0) list[mine] = r;
    else list.push(r);
    list.sort(byOwner);
    this.settle(r.key, list, before, bulk);
  }

  private release(r: DesiredResource): void {
    const existing = this.claims.get(r.key);
    if (!existing) return;
    const list = Array.isArray(existing) ? existing : [existing];
    const mine = list.findIndex((x) => x.owner === r.owner);
    if (mine < 0) return;
    const before = list[0] as DesiredResource;
    list.splice(mine, 1);
    if (list.length === 0) {
      this.claims.delete(r.key);
      if (before.kind === "Rule") this.chainRemove(before);
      return;
    }
    this.settle(r.key, list, before, false);
  }

  /** Stores a key's claims after a change; the effective claim (the first owner) may have changed. */
  private settle(
    key: string,
    list: DesiredResource[],
    before: DesiredResource,
    bulk: boolean,
  ): void {
    const after = list[0] as DesiredResource;
    if (after !== before) {
      if (before.kind === "Rule") this.chainRemove(before);
      if (after.kind === "Rule") this.chainInsert(after, bulk);
    }
    if (list.length === 1) {
      this.claims.set(key, after);
      this.duplicates.delete(key);
    } else {
      this.claims.set(key, list);
      this.duplicates.add(key);
    }
  }

  private chainKeys(chainId: string): string[] {
    const chain = this.chains.get(chainId);
    if (!chain) return [];
    if (chain.dirty) {
      chain.keys.sort();
      chain.dirty = false;
    }
    return chain.keys;
  }

  private chainInsert(r: DesiredResource, bulk: boolean): void {
    if (r.kind !== "Rule") return;
    const chainId = r.parentId;
    let chain = this.chains.get(chainId);
    if (!chain) {
      chain = { keys: [], dirty: false };
      this.chains.set(chainId, chain);
    }
    const sortKey = ruleSortKey(r);
    if (bulk) {
      chain.keys.push(sortKey);
      chain.dirty = chain.keys.length > 1;
      return;
    }
    const keys = this.chainKeys(chainId);
    keys.splice(lowerBound(keys, sortKey), 0, sortKey);
  }

  private chainRemove(r: DesiredResource): void {
    if (r.kind !== "Rule") return;
    const keys = this.chainKeys(r.parentId);
    const sortKey = ruleSortKey(r);
    const at = lowerBound(keys, sortKey);
    if (keys[at] === sortKey) keys.splice(at, 1);
    if (keys.length === 0) this.chains.delete(r.parentId);
  }

  private withPosition(r: DesiredResource, known?: number): DesiredResource {
    if (r.kind !== "Rule") return r;
    const position = known ?? (this.position(r.key) as number);
    const body: Rule = { ...r.body, position };
    return { ...r, body };
  }
}
