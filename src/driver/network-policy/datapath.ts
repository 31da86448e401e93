/**
 * What the NetworkPolicy enforcer does to the node, as one interface: the
 * kernel's (nftables, conntrack, the node's addresses) by default, a recorder
 * in the unit tests.
 */
import { deleteFlows, type Flow, type FlowGroup, listFlows } from "../../plumbing/conntrack.js";
import {
  applyNftElements,
  applyNftScript,
  deleteNftTable,
  nftElementsInProcess,
} from "../../plumbing/nftables.js";
import { listNodeAddresses } from "../../plumbing/node-addresses.js";
import { POLICY_TABLE } from "./ruleset.js";
import type { ElementChange } from "./ruleset-commands.js";

export interface PolicyDatapath {
  applyScript(script: string): Promise<void>;
  /**
   * A change made of element changes only, as one transaction; false when
   * this datapath cannot write them so (the caller writes the text).
   */
  applyElements(changes: readonly ElementChange[]): Promise<boolean>;
  listFlows(): Promise<Flow[]>;
  /** Deletes every flow of a group (all source ports). */
  deleteFlows(group: FlowGroup): Promise<void>;
  /** The node's own addresses: connections with them are never cut. */
  nodeAddresses(): Promise<string[]>;
  deleteTable(): Promise<void>;
}

const POLICY_ACTION = `network policy in table inet ${POLICY_TABLE}`;

export const kernelPolicyDatapath: PolicyDatapath = {
  applyScript: (script) => applyNftScript(POLICY_ACTION, script),
  // Straight to the kernel: libnftables would first read back every element of the table to delete one.
  applyElements: async (changes) => {
    if (!nftElementsInProcess()) return false;
    await applyNftElements(POLICY_ACTION, POLICY_TABLE, changes);
    return true;
  },
  listFlows,
  deleteFlows,
  nodeAddresses: async () => (await listNodeAddresses()).map((a) => a.cidr.split("/")[0] as string),
  deleteTable: () => deleteNftTable("inet", POLICY_TABLE),
};
