/**
 * The nft script that takes the Services tables from what the kernel has to
 * what the plans ask for: whole at the first sync (every table dropped and
 * written again, in one transaction), else only the blocks that changed —
 * their chains flushed and rewritten, their map elements deleted and added,
 * what went away removed last (after whatever jumped to it). Pure.
 */
import {
  addElement,
  type Block,
  elementTable,
  SERVICE_SHARDS,
  SERVICES_TABLE,
  shardSkeleton,
  shardTable,
  skeleton,
} from "./ruleset.js";

export type Elements = Map<string, Map<string, string>>;

const inet = (table: string) => `inet ${table}`;

const elementText = (key: string, value: string) => (value ? `${key} : ${value}` : key);

/** Element changes per table: table -> map -> key -> value. */
type TableElements = Map<string, Elements>;

function into(per: TableElements, table: string): Elements {
  const e = per.get(table) ?? new Map();
  per.set(table, e);
  return e;
}

function elementCommands(verb: "add" | "delete", per: TableElements): string[] {
  const out: string[] = [];
  for (const [table, els] of per)
    for (const [map, m] of els) {
      if (m.size === 0) continue;
      const items = [...m].map(([k, v]) => (verb === "add" ? elementText(k, v) : k));
      // Bounded commands: libnftables parses one long line slower than many short ones.
      for (let i = 0; i < items.length; i += 1000)
        out.push(
          `${verb} element ${inet(table)} ${map} { ${items.slice(i, i + 1000).join(", ")} }`,
        );
    }
  return out;
}

function chainCommands(table: string, name: string, rules: readonly string[], out: string[]): void {
  for (const r of rules) out.push(`add rule ${inet(table)} ${name} ${r}`);
}

/** A block's elements, filed by the table each map is in. */
function fileElements(b: Block, per: TableElements): void {
  for (const [map, m] of b.elements)
    for (const [k, v] of m) addElement(into(per, elementTable(map, b.shard)), map, k, v);
}

/**
 * Every table whole, a table at a time (the shared one first): each part
 * replaces its table and holds all of it, so each can be its own
 * transaction, and a part is made only when it is asked for (the kernel
 * takes one while the next is written).
 */
export function* fullScriptParts(blocks: Iterable<Block>, hairpin: Elements): Generator<string> {
  const byShard = Array.from({ length: SERVICE_SHARDS }, (): Block[] => []);
  const shared: TableElements = new Map([[SERVICES_TABLE, new Map(hairpin)]]);
  for (const b of blocks) {
    byShard[b.shard]?.push(b);
    for (const [map, m] of b.elements)
      if (elementTable(map, b.shard) === SERVICES_TABLE)
        for (const [k, v] of m) addElement(into(shared, SERVICES_TABLE), map, k, v);
  }
  const replace = (table: string, body: string) => [
    `table ${inet(table)} {}`,
    `delete table ${inet(table)}`,
    body,
  ];
  yield `${[...replace(SERVICES_TABLE, skeleton()), ...elementCommands("add", shared)].join("\n")}\n`;
  for (let k = 0; k < SERVICE_SHARDS; k++) {
    const table = shardTable(k);
    const t = inet(table);
    const out = replace(table, shardSkeleton(k));
    const els: TableElements = new Map();
    for (const b of byShard[k] ?? []) {
      for (const [name, decl] of b.sets) out.push(`add set ${t} ${name} { ${decl} }`);
      for (const name of b.chains.keys()) out.push(`add chain ${t} ${name}`);
      for (const [name, rules] of b.chains) chainCommands(table, name, rules, out);
      for (const [map, m] of b.elements)
        if (elementTable(map, k) === table)
          for (const [key, v] of m) addElement(into(els, table), map, key, v);
    }
    out.push(...elementCommands("add", els));
    yield `${out.join("\n")}\n`;
  }
}

/** Every table whole, in one script (one transaction). */
export function fullScript(blocks: Iterable<Block>, hairpin: Elements): string {
  return [...fullScriptParts(blocks, hairpin)].join("");
}

const sameRules = (a: readonly string[] | undefined, b: readonly string[]) =>
  a !== undefined && a.length === b.length && a.every((r, i) => r === b[i]);

/** Element changes between two element tables: what to delete (gone or changed) and what to add. */
function elementDiff(before: Elements, after: Elements, del: Elements, add: Elements): void {
  for (const [map, m] of before)
    for (const [k, v] of m) {
      const now = after.get(map)?.get(k);
      if (now === undefined || now !== v) addElement(del, map, k, v);
    }
  for (const [map, m] of after)
    for (const [k, v] of m) if (before.get(map)?.get(k) !== v) addElement(add, map, k, v);
}

/**
 * The commands for the blocks in `changed` (undefined: the plan is gone),
 * against `current`; empty when nothing differs.
 */
export function changeScript(
  current: ReadonlyMap<string, Block>,
  changed: ReadonlyMap<string, Block | undefined>,
  hairpin: { before: Elements; after: Elements },
): string {
  const adds: string[] = [];
  const rules: string[] = [];
  const removals: string[] = [];
  const del: TableElements = new Map();
  const add: TableElements = new Map();
  for (const [key, next] of changed) {
    const prev = current.get(key);
    const shard = (next ?? prev)?.shard ?? 0;
    const empty: Block = { shard, chains: new Map(), sets: new Map(), elements: new Map() };
    const b = next ?? empty;
    const p = prev ?? empty;
    const table = shardTable(shard);
    const t = inet(table);
    // A set's name covers its declaration (ruleset.ts): one of the same name is the same set.
    for (const [name, decl] of b.sets)
      if (!p.sets.has(name)) adds.push(`add set ${t} ${name} { ${decl} }`);
    for (const [name, r] of b.chains) {
      const old = p.chains.get(name);
      if (sameRules(old, r)) continue;
      adds.push(old ? `flush chain ${t} ${name}` : `add chain ${t} ${name}`);
      chainCommands(table, name, r, rules);
    }
    const [pe, be]: [TableElements, TableElements] = [new Map(), new Map()];
    fileElements(p, pe);
    fileElements(b, be);
    for (const tb of new Set([...pe.keys(), ...be.keys()]))
      elementDiff(pe.get(tb) ?? new Map(), be.get(tb) ?? new Map(), into(del, tb), into(add, tb));
    for (const name of p.chains.keys())
      if (!b.chains.has(name)) {
        adds.push(`flush chain ${t} ${name}`);
        removals.push(`delete chain ${t} ${name}`);
      }
    for (const name of p.sets.keys())
      if (!b.sets.has(name)) removals.push(`delete set ${t} ${name}`);
  }
  elementDiff(hairpin.before, hairpin.after, into(del, SERVICES_TABLE), into(add, SERVICES_TABLE));
  const out = [
    ...adds,
    ...rules,
    ...elementCommands("delete", del),
    ...elementCommands("add", add),
    ...removals,
  ];
  return out.length === 0 ? "" : `${out.join("\n")}\n`;
}
