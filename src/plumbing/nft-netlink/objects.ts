/**
 * The nf_tables objects of an inet table as messages: the table, chains
 * (base chains with their hook), sets and verdict maps, rules, elements,
 * and their deletion. Everything is named; a batch refers to chains and
 * sets made earlier in the same batch by name, as the kernel allows.
 */
import { attrBytes } from "./attribute-bytes.js";
import { type Expr, type VerdictKind, verdictAttr } from "./expressions.js";
import { MSG, type NftMessageWriter } from "./message-writer.js";

const TABLE_NAME = 1;
const CHAIN = { TABLE: 1, NAME: 3, HOOK: 4, POLICY: 5, TYPE: 7 } as const;
const HOOK = { NUM: 1, PRIORITY: 2 } as const;
const RULE = { TABLE: 1, CHAIN: 2, EXPRESSIONS: 4 } as const;
const SET = {
  TABLE: 1,
  NAME: 2,
  FLAGS: 3,
  KEY_TYPE: 4,
  KEY_LEN: 5,
  DATA_TYPE: 6,
  DATA_LEN: 7,
  ID: 10,
  TIMEOUT: 11,
  USERDATA: 13,
} as const;
const ELEMS = { TABLE: 1, SET: 2, ELEMENTS: 3 } as const;
const ELEM = { KEY: 1, DATA: 2 } as const;
const LIST_ELEM = 1;
const DATA_VALUE = 1;

/** nf_inet_hooks. */
export const HOOKS = { prerouting: 0, input: 1, forward: 2, output: 3, postrouting: 4 } as const;
export type HookName = keyof typeof HOOKS;

export function newTable(w: NftMessageWriter, table: string): void {
  w.begin(MSG.NEWTABLE, `add table inet ${table}`).str(TABLE_NAME, table).u32(2 /* FLAGS */, 0);
}

export function deleteTable(w: NftMessageWriter, table: string): void {
  w.begin(MSG.DELTABLE, `delete table inet ${table}`).str(TABLE_NAME, table);
}

export interface BaseChain {
  type: "nat" | "filter";
  hook: HookName;
  priority: number;
}

/** A chain; a base chain with its hook and an accept policy. */
export function newChain(w: NftMessageWriter, table: string, name: string, base?: BaseChain): void {
  w.begin(MSG.NEWCHAIN, `add chain inet ${table} ${name}`)
    .str(CHAIN.TABLE, table)
    .str(CHAIN.NAME, name);
  if (!base) return;
  w.str(CHAIN.TYPE, base.type).u32(CHAIN.POLICY, 1 /* NF_ACCEPT */);
  w.nest(CHAIN.HOOK, () => w.u32(HOOK.NUM, HOOKS[base.hook]).u32(HOOK.PRIORITY, base.priority));
}

/** `flush chain`: every rule of the chain deleted. */
export function flushChain(w: NftMessageWriter, table: string, name: string): void {
  w.begin(MSG.DELRULE, `flush chain inet ${table} ${name}`)
    .str(RULE.TABLE, table)
    .str(RULE.CHAIN, name);
}

export function deleteChain(w: NftMessageWriter, table: string, name: string): void {
  w.begin(MSG.DELCHAIN, `delete chain inet ${table} ${name}`)
    .str(CHAIN.TABLE, table)
    .str(CHAIN.NAME, name);
}

/** A rule appended to its chain; `label` names it in error reports (its nft text). */
export function newRule(
  w: NftMessageWriter,
  table: string,
  chain: string,
  exprs: readonly Expr[],
  label: string,
): void {
  w.begin(MSG.NEWRULE, label).str(RULE.TABLE, table).str(RULE.CHAIN, chain);
  w.nest(RULE.EXPRESSIONS, () => {
    for (const e of exprs) w.raw(e);
  });
}

/** A set or verdict map as nft declares it (key type and length as nft computes them). */
export interface SetSpec {
  name: string;
  /** NFTA_SET_FLAGS (NFT_SET_MAP 0x8, NFT_SET_TIMEOUT 0x10, NFT_SET_EVAL 0x20). */
  flags: number;
  keyType: number;
  keyLength: number;
  /** Verdict maps. */
  verdict?: boolean;
  timeoutMs?: number;
  /** nft's own description of the types (NFTA_SET_USERDATA), which `nft list` reads back. */
  userdata: Uint8Array;
}

/** NFT_DATA_VERDICT as a set's data type. */
const DATA_TYPE_VERDICT = 0xffffff00;

/** Sets made in one process are numbered: the kernel requires an id unique within the batch. */
let setIds = 0;

export function newSet(w: NftMessageWriter, table: string, s: SetSpec): void {
  setIds = (setIds + 1) % 0x7fffffff;
  w.begin(MSG.NEWSET, `add ${s.verdict ? "map" : "set"} inet ${table} ${s.name}`)
    .str(SET.TABLE, table)
    .str(SET.NAME, s.name)
    .u32(SET.FLAGS, s.flags)
    .u32(SET.KEY_TYPE, s.keyType)
    .u32(SET.KEY_LEN, s.keyLength);
  if (s.verdict) w.u32(SET.DATA_TYPE, DATA_TYPE_VERDICT).u32(SET.DATA_LEN, 0);
  w.u32(SET.ID, setIds + 1);
  if (s.timeoutMs !== undefined) w.u64(SET.TIMEOUT, BigInt(s.timeoutMs));
  w.bytes(SET.USERDATA, s.userdata);
}

export function deleteSet(w: NftMessageWriter, table: string, name: string): void {
  w.begin(MSG.DELSET, `delete set inet ${table} ${name}`).str(SET.TABLE, table).str(SET.NAME, name);
}

/** One element: its key's bytes and, in a verdict map, its verdict. */
export interface ElementSpec {
  key: Uint8Array;
  verdict?: { kind: VerdictKind; chain?: string };
}

/** The most bytes of elements per message: the list's nest must fit a 16-bit length. */
const ELEMENTS_PER_MESSAGE_BYTES = 60_000;

/** Adds or deletes elements, in as many messages as their size needs. */
export function setElements(
  w: NftMessageWriter,
  op: "add" | "delete",
  table: string,
  set: string,
  elements: readonly ElementSpec[],
): void {
  let i = 0;
  while (i < elements.length) {
    const first = i;
    w.begin(op === "add" ? MSG.NEWSETELEM : MSG.DELSETELEM, `${op} element inet ${table} ${set}`)
      .str(ELEMS.TABLE, table)
      .str(ELEMS.SET, set);
    const start = w.messageLength();
    w.nest(ELEMS.ELEMENTS, () => {
      for (; i < elements.length; i++) {
        if (i > first && w.messageLength() - start > ELEMENTS_PER_MESSAGE_BYTES) break;
        const e = elements[i] as ElementSpec;
        w.nest(LIST_ELEM, () => {
          w.nest(ELEM.KEY, () => w.bytes(DATA_VALUE, e.key));
          if (e.verdict && op === "add")
            w.raw(attrBytes([ELEM.DATA, [verdictAttr(e.verdict.kind, e.verdict.chain)]]));
        });
      }
    });
  }
}
