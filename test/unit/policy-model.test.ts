/**
 * The policy model against the NetworkPolicy truth tables
 * (test/support/netpol-truth-tables.ts), dual stack included.
 */
import { describePolicyTruthTables, modelOracle } from "../support/netpol-truth-tables.js";

describePolicyTruthTables("policy model: truth tables after kubernetes' netpol e2e", modelOracle, {
  ipv6: true,
});
