/**
 * The nft script that takes the Services table from what the kernel has to
 * what the plans ask for: whole at the first sync (the table dropped and
 * written again, in one transaction), else only the blocks that changed —
 * their chains flushed and rewritten, their map elements deleted and added,
 * what went away removed last (after whatever jumped to it). Pure.
 */
import { addElement, type Block, SERVICES_TABLE, skeleton } from "./ruleset.js";

export type Elements = Map<string, Map<string, string>>;

const T = `inet ${SERVICES_TABLE}`;

const elementText = (key: string, value: string) => (value ? `${key} : ${value}` : key);

function elementCommands(verb: "add" | "delete", els: Elements): string[] {
  const out: string[] = [];
  for (const [map, m] of els) {
    if (m.size === 0) continue;
    const items = [...m].map(([k, v]) => (verb === "add" ? elementText(k, v) : k));
    // Bounded commands: libnftables parses one long line slower than many short ones.
    for (let i = 0; i < items.length; i += 1000)
      out.push(`${verb} element ${T} ${map} { ${items.slice(i, i + 1000).join(", ")} }`);
  }
  return out;
}

function chainCommands(name: string, rules: readonly string[], out: string[]): void {
  for (const r of rules) out.push(`add rule ${T} ${name} ${r}`);
}

/** The whole table: the skeleton, every block, the hairpin elements. */
export function fullScript(blocks: Iterable<Block>, hairpin: Elements): string {
  const out = [`table ${T} {}`, `delete table ${T}`, skeleton()];
  const els: Elements = new Map();
  for (const b of blocks) {
    for (const [name, decl] of b.sets) out.push(`add set ${T} ${name} { ${decl} }`);
    for (const name of b.chains.keys()) out.push(`add chain ${T} ${name}`);
    for (const [name, rules] of b.chains) chainCommands(name, rules, out);
    for (const [map, m] of b.elements) for (const [k, v] of m) addElement(els, map, k, v);
  }
  out.push(...elementCommands("add", els), ...elementCommands("add", hairpin));
  return `${out.join("\n")}\n`;
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
  const del: Elements = new Map();
  const add: Elements = new Map();
  for (const [key, next] of changed) {
    const prev = current.get(key);
    const empty: Block = { chains: new Map(), sets: new Map(), elements: new Map() };
    const b = next ?? empty;
    const p = prev ?? empty;
    // A set's name covers its declaration (ruleset.ts): one of the same name is the same set.
    for (const [name, decl] of b.sets)
      if (!p.sets.has(name)) adds.push(`add set ${T} ${name} { ${decl} }`);
    for (const [name, r] of b.chains) {
      const old = p.chains.get(name);
      if (sameRules(old, r)) continue;
      adds.push(old ? `flush chain ${T} ${name}` : `add chain ${T} ${name}`);
      chainCommands(name, r, rules);
    }
    elementDiff(p.elements, b.elements, del, add);
    for (const name of p.chains.keys())
      if (!b.chains.has(name)) {
        adds.push(`flush chain ${T} ${name}`);
        removals.push(`delete chain ${T} ${name}`);
      }
    for (const name of p.sets.keys())
      if (!b.sets.has(name)) removals.push(`delete set ${T} ${name}`);
  }
  elementDiff(hairpin.before, hairpin.after, del, add);
  const out = [
    ...adds,
    ...rules,
    ...elementCommands("delete", del),
    ...elementCommands("add", add),
    ...removals,
  ];
  return out.length === 0 ? "" : `${out.join("\n")}\n`;
}
