/**
 * The nft scripts of ruleset-diff.ts as nf_tables netlink batches, so the
 * Services tables are written without libnftables: no parsing of 100,000
 * rule texts by nft, no read-back of the tables before each change, no
 * socket closed after it (bench/services). The script stays the single
 * description of the tables: the packet-flow tests trace it, libnftables
 * runs it where the addon cannot send batches, and this compiles it line by
 * line, command for command, in the script's order. Only the commands
 * ruleset-diff.ts writes are understood; anything else throws.
 */
import { NftMessageWriter } from "../../plumbing/nft-netlink/message-writer.js";
import {
  type BaseChain,
  deleteChain,
  deleteSet,
  deleteTable,
  flushChain,
  HOOKS,
  type HookName,
  newChain,
  newRule,
  newSet,
  newTable,
  type SetSpec,
  setElements,
} from "../../plumbing/nft-netlink/objects.js";
import { compileRule } from "./netlink-rules.js";
import { elementSpec, type SetShape, setSpec, unknown } from "./netlink-sets.js";
import { shardSkeleton, skeleton } from "./ruleset.js";

const PRIORITY: Record<string, number> = { dstnat: -100, srcnat: 100 };

/** A `table inet NAME { … }` block: its sets and chains. */
interface TableBlock {
  sets: { spec: SetSpec; shape: SetShape }[];
  chains: { name: string; base?: BaseChain; rules: string[] }[];
}

/** Parses a table block's lines (the opening line excluded, the closing one included). */
function parseTableBlock(lines: readonly string[]): TableBlock {
  const out: TableBlock = { sets: [], chains: [] };
  for (let i = 0; i < lines.length; i++) {
    const block = /^(map|set|chain) (\S+) \{$/.exec(lines[i] ?? "");
    if (!block) continue;
    const body: string[] = [];
    while (i + 1 < lines.length && lines[i + 1] !== "}") body.push(lines[++i] ?? "");
    i++;
    const name = block[2] as string;
    if (block[1] !== "chain") {
      out.sets.push(setSpec(name, body.join("; ")));
      continue;
    }
    const hook =
      /^type (nat|filter) hook (\w+) priority (-?\d+|dstnat|srcnat); policy accept;$/.exec(
        body[0] ?? "",
      );
    if (hook && !((hook[2] as string) in HOOKS)) unknown("hook", body[0] ?? "");
    const base: BaseChain | undefined = hook
      ? {
          type: hook[1] as "nat" | "filter",
          hook: hook[2] as HookName,
          priority: PRIORITY[hook[3] as string] ?? Number(hook[3]),
        }
      : undefined;
    out.chains.push({ name, ...(base ? { base } : {}), rules: base ? body.slice(1) : body });
  }
  return out;
}

/** The skeletons' sets by name (the shared table's and a shard's have none in common). */
let skeletonShapes: Map<string, SetShape> | undefined;
function knownShapes(): Map<string, SetShape> {
  if (!skeletonShapes) {
    const lines = (text: string) => text.split("\n").map((l) => l.trim());
    const sets = [skeleton(), shardSkeleton(0)].flatMap((t) => parseTableBlock(lines(t)).sets);
    skeletonShapes = new Map(sets.map((s) => [s.spec.name, s.shape]));
  }
  return skeletonShapes;
}

/** The batch of a script, and what each of its messages does (for a refusal's report). */
interface EncodedScript {
  messages: Buffer;
  count: number;
  describe(index: number): string | undefined;
}

/** `<verb> inet <table> <rest>`: the table and the rest, or undefined. */
function split(line: string, verb: string): [string, string] | undefined {
  if (!line.startsWith(verb)) return undefined;
  const at = verb.length;
  const sp = line.indexOf(" ", at);
  return sp < 0 ? [line.slice(at), ""] : [line.slice(at, sp), line.slice(sp + 1)];
}

/**
 * Compiles a script of ruleset-diff.ts. Sets declared in the skeletons or
 * by the script are known by their declaration; elements are keyed as they
 * say.
 */
export function encodeScript(script: string): EncodedScript {
  // Some 5 bytes of messages per byte of script (rules; elements are denser).
  const w = new NftMessageWriter(script.length * 6);
  const shapes = new Map(knownShapes());
  const lines = script.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] as string;
    let m = split(line, "add rule inet ");
    if (m) {
      const sp = m[1].indexOf(" ");
      newRule(w, m[0], m[1].slice(0, sp), compileRule(m[1].slice(sp + 1)), line);
      continue;
    }
    m = split(line, "add element inet ") ?? split(line, "delete element inet ");
    if (m) {
      const add = line.startsWith("add");
      const e = /^(\S+) \{ (.*) \}$/.exec(m[1]);
      const shape = shapes.get(e?.[1] ?? "");
      if (!e || !shape) return unknown("command", line);
      const items = (e[2] as string).split(", ").map((it) => elementSpec(shape, it, add));
      setElements(w, add ? "add" : "delete", m[0], e[1] as string, items);
      continue;
    }
    const table = /^table inet (\S+) \{(\}?)$/.exec(line);
    if (table?.[2]) newTable(w, table[1] as string);
    else if (table) {
      // A whole table: its sets, chains and rules.
      const body: string[] = [];
      while (i + 1 < lines.length && lines[i] !== "}") body.push((lines[++i] as string).trim());
      writeTable(w, table[1] as string, parseTableBlock(body), shapes);
    } else if (line.startsWith("delete table inet ")) deleteTable(w, line.slice(18));
    else if (line !== "") simpleCommand(w, line, shapes);
  }
  const messages = w.finish();
  return { messages, count: w.count, describe: (k) => w.label(k) };
}

/** A table block as nft sends it: the table, its chains, its sets, then the rules. */
function writeTable(
  w: NftMessageWriter,
  table: string,
  t: TableBlock,
  shapes: Map<string, SetShape>,
): void {
  newTable(w, table);
  for (const c of t.chains) newChain(w, table, c.name, c.base);
  for (const set of t.sets) {
    newSet(w, table, set.spec);
    shapes.set(set.spec.name, set.shape);
  }
  for (const c of t.chains) for (const r of c.rules) newRule(w, table, c.name, compileRule(r), r);
}

/** add set, add chain, flush chain, delete chain, delete set. */
function simpleCommand(w: NftMessageWriter, line: string, shapes: Map<string, SetShape>): void {
  const m =
    /^(add set|add chain|flush chain|delete chain|delete set) inet (\S+) (\S+)(?: \{ (.*) \})?$/.exec(
      line,
    );
  if (!m) {
    unknown("command", line);
    return;
  }
  const [table, name] = [m[2] as string, m[3] as string];
  if (m[1] === "add set") {
    const { spec, shape } = setSpec(name, m[4] ?? "");
    shapes.set(name, shape);
    newSet(w, table, spec);
  } else if (m[1] === "add chain") newChain(w, table, name);
  else if (m[1] === "flush chain") flushChain(w, table, name);
  else if (m[1] === "delete chain") deleteChain(w, table, name);
  else deleteSet(w, table, name);
}
