/**
 * Where the Service proxy's rules and flow cleanups go: the kernel of this
 * node's network namespace (a recorder stands in for it in unit tests).
 *
 * Scripts (ruleset-diff.ts) are compiled to nf_tables netlink batches and
 * sent over the nftables addon's kept socket (netlink-script.ts): libnftables
 * would parse every rule's text again and read the tables back before each
 * change, which costs more than the change (bench/services). Without the
 * addon's batches, libnftables runs the same script, one transaction.
 */
import { deleteFlows, type Flow, listFlows } from "../../plumbing/conntrack.js";
import {
  applyNftBatch,
  applyNftScript,
  NftError,
  nftBatchInProcess,
} from "../../plumbing/nftables.js";
import { encodeScript } from "./netlink-script.js";
import { SERVICES_TABLE, SERVICES_TABLES } from "./ruleset.js";

/** What the proxy does to the node. */
export interface ServicesDatapath {
  /** A script of ruleset-diff.ts, one transaction. */
  applyScript(script: string): Promise<void>;
  /**
   * fullScriptParts' tables, each whole and replacing its table; absent:
   * the proxy joins them into one script for applyScript.
   */
  applyWhole?(parts: Iterable<string>): Promise<void>;
  /** Removes every Services table (absent ones are fine). */
  deleteTable(): Promise<void>;
  listFlows(): Promise<Flow[]>;
  deleteFlow(flow: Flow): Promise<void>;
}

const ACTION = `Services in table inet ${SERVICES_TABLE}`;

async function applyScript(script: string): Promise<void> {
  if (!nftBatchInProcess()) return applyNftScript(ACTION, script);
  await applyNftBatch(ACTION, encodeScript(script));
}

/**
 * The tables whole, one transaction each, the next made and compiled while
 * the kernel takes the last: at 100,000 rules making them and the kernel's
 * work are of one order, so the two overlap. Each Service's chains and
 * frontends live in one table, so each is replaced at once; only a Service
 * whose endpoints came or went while the driver was down can meet its old
 * reject (the shared table's) for that moment.
 */
async function applyWhole(parts: Iterable<string>): Promise<void> {
  if (!nftBatchInProcess()) return applyNftScript(ACTION, [...parts].join(""));
  let sending: Promise<void> = Promise.resolve();
  try {
    for (const part of parts) {
      const batch = encodeScript(part);
      await sending;
      sending = applyNftBatch(ACTION, batch);
    }
  } finally {
    // Never left behind unawaited: a failure of the last batch is this call's.
    await sending.catch(() => {});
  }
  await sending;
}

/** Every Services table deleted in one transaction: no moment with some of them left serving. */
async function deleteTables(): Promise<void> {
  const script = SERVICES_TABLES.map((t) => `table inet ${t} {}\ndelete table inet ${t}\n`).join(
    "",
  );
  try {
    if (nftBatchInProcess()) await applyNftBatch(ACTION, encodeScript(script));
    else await applyNftScript(ACTION, script);
  } catch (err) {
    // Without nft no table was ever made.
    if (!(err instanceof NftError && err.missingTool)) throw err;
  }
}

export const kernelServicesDatapath: ServicesDatapath = {
  applyScript,
  applyWhole,
  deleteTable: deleteTables,
  listFlows,
  deleteFlow: (f) =>
    deleteFlows({
      protocol: f.protocol,
      src: f.original.src,
      dst: f.original.dst,
      dport: f.original.dport,
    }),
};
