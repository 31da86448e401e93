/**
 * Chains and their rules. A rule POSTed without position goes to the head of
 * the chain, GET reports index+1, and a position beyond size+1 is a 400. The
 * condition fields are the ones the controller matches on (accepted-fields.ts);
 * any other is ignored, as MidoNet ignores unknown fields, so a rule using one
 * needs the simulator taught first (the client's schema test says so).
 */
import {
  ACCEPTED_FIELDS,
  FORWARD_NAT_RULE_TYPES,
  NAT_RULE_TYPES,
  ruleFields,
} from "./accepted-fields.js";
import { Body, badRequest, notFound, violation } from "./body.js";
import { MT } from "./media-types.js";
import { type Ctx, created, noContent, ok, type Reply, type RouteDef } from "./route-table.js";
import { type ChainRec, type RuleRec, renderChain, type SimulatorState } from "./state.js";

const RULE_TYPES = [
  "accept",
  "drop",
  "reject",
  "return",
  "jump",
  "dnat",
  "snat",
  "rev_dnat",
  "rev_snat",
] as const;

/**
 * A field Condition.java bounds with @Min/@Max: out of bounds, MidoNet's bean
 * validation answers with a violation, in Hibernate Validator's words.
 */
function validated(body: Body, key: string, min: number, max: number): number | null {
  if (!body.has(key)) return null;
  const v = body.raw(key);
  if (typeof v !== "number" || !Number.isInteger(v)) return body.int(key, min, max);
  if (v < min) throw violation(key, `must be greater than or equal to ${min}`);
  if (v > max) throw violation(key, `must be less than or equal to ${max}`);
  return v;
}

function ruleTypeOf(raw: unknown): string {
  const type = (raw as { type?: unknown } | null)?.type;
  if (typeof type !== "string" || !(RULE_TYPES as readonly string[]).includes(type)) {
    throw badRequest(`Rule.type: must be one of ${RULE_TYPES.join(", ")}`);
  }
  return type;
}

function parseConditions(body: Body): Record<string, unknown> {
  const fields: Record<string, unknown> = {};
  const put = (key: string, v: unknown) => {
    if (v !== null) fields[key] = v;
  };
  // Booleans default to false in Condition.java: false is stored as absent.
  for (const key of ["matchForwardFlow", "matchReturnFlow"])
    if (body.bool(key) === true) fields[key] = true;
  put("dlType", validated(body, "dlType", 0x0600, 0xffff));
  put("nwProto", body.int("nwProto", 0, 255));
  put("nwSrcAddress", body.ipv4("nwSrcAddress"));
  put("nwSrcLength", validated(body, "nwSrcLength", 0, 32));
  put("nwDstAddress", body.ipv4("nwDstAddress"));
  put("nwDstLength", validated(body, "nwDstLength", 0, 32));
  for (const key of ["tpSrc", "tpDst"] as const) {
    if (body.has(key)) fields[key] = parsePortRange(body, key);
  }
  return fields;
}

/**
 * Condition.java (midonet-cluster/src/main/java/org/midonet/cluster/rest_api/
 * models/) annotates tpSrc and tpDst with @ValidRange(min = 1, max = 0xFFFF),
 * checked by RangeValidator.java (.../rest_api/validation/): valid when
 * start <= end and both are within [1, 65535]. Port 0 and a reversed range
 * fail alike, as one bean violation on the field with ValidRange's default
 * message, midokura.javarx.L4PortRangeNotValid in
 * midonet-cluster/src/main/resources/ValidationMessages.properties. A range
 * without start or end makes RangeValidator unbox a null (an exception, not a
 * violation): the simulator refuses it with a plain 400.
 */
const PORT_RANGE_MESSAGE = "Port range not valid. Must be between 1 and 65535.";

function parsePortRange(body: Body, key: "tpSrc" | "tpDst"): { start: number; end: number } {
  const range = Body.parse(`Rule.${key}`, body.raw(key), ACCEPTED_FIELDS.PortRange);
  // Jackson binds start and end to Integer: anything else fails before validation.
  const start = range.int("start", -(2 ** 31), 2 ** 31 - 1, true) as number;
  const end = range.int("end", -(2 ** 31), 2 ** 31 - 1, true) as number;
  if (start > end || start < 1 || end > 0xffff) throw violation(key, PORT_RANGE_MESSAGE);
  return { start, end };
}

function parseJump(s: SimulatorState, body: Body): string {
  const jumpChainId = body.uuid("jumpChainId");
  if (jumpChainId === null) throw badRequest("Rule.jumpChainId: a jump rule needs a chain");
  if (!s.chains.has(jumpChainId)) {
    throw notFound(`Rule.jumpChainId: chain ${jumpChainId} not found`);
  }
  return jumpChainId;
}

function parseNatTargets(body: Body): unknown[] {
  const targets = body.raw("natTargets");
  if (!Array.isArray(targets) || targets.length === 0) {
    // ForwardNatRule.java: @NotNull @Size(min = 1) natTargets, checked by bean validation.
    throw violation("natTargets", "size must be between 1 and 2147483647");
  }
  return targets.map((t) => {
    const target = Body.parse("Rule.natTargets", t, ACCEPTED_FIELDS.NatTarget);
    return {
      addressFrom: target.ipv4("addressFrom", true),
      addressTo: target.ipv4("addressTo", true),
      portFrom: target.int("portFrom", 0, 65535) ?? 0,
      portTo: target.int("portTo", 0, 65535) ?? 0,
    };
  });
}

function parseRule(s: SimulatorState, raw: unknown, chain: ChainRec) {
  const type = ruleTypeOf(raw);
  const body = Body.parse(`Rule(${type})`, raw, ruleFields(type));
  const fields = parseConditions(body);
  const jumpChainId = type === "jump" ? parseJump(s, body) : null;
  if (NAT_RULE_TYPES.includes(type)) {
    const flowAction = body.oneOf("flowAction", ["accept", "continue", "return"] as const);
    if (flowAction === null) throw badRequest(`Rule.flowAction: a ${type} rule needs one`);
    fields.flowAction = flowAction;
  }
  if (FORWARD_NAT_RULE_TYPES.includes(type)) fields.natTargets = parseNatTargets(body);
  // ChainRuleResource.createFilter (midonet-cluster RuleResource.scala) creates the
  // rule before it checks the position: a duplicate id is a 409 whatever the position.
  const id = s.newId(body, (i) => s.rules.has(i), "Rule");
  const position = body.int("position", 1, 2 ** 31 - 1) ?? 1;
  if (position > chain.ruleIds.length + 1) {
    throw badRequest(
      `Rule.position: ${position} is out of range; chain ${chain.id} has ${chain.ruleIds.length} rules`,
    );
  }
  const rec: RuleRec = { id, chainId: chain.id, type, jumpChainId, fields };
  return { rec, position };
}

function listChains(s: SimulatorState): Reply {
  return ok([...s.chains.values()].map((c) => s.withUri(renderChain(c), `/chains/${c.id}`)));
}

function createChain(s: SimulatorState, { body: raw }: Ctx): Reply {
  const body = Body.parse("Chain", raw, ACCEPTED_FIELDS.Chain);
  const tenantId = body.str("tenantId");
  const name = body.str("name");
  const id = s.newId(body, (i) => s.chains.has(i), "Chain");
  s.chains.set(id, { id, tenantId, name, ruleIds: [] });
  return created(`/chains/${id}`);
}

function getChain(s: SimulatorState, { params }: Ctx): Reply {
  const c = s.getOr404(s.chains, params.id, "Chain");
  return ok(s.withUri(renderChain(c), `/chains/${c.id}`));
}

function deleteChain(s: SimulatorState, { params }: Ctx): Reply {
  s.deleteChain(s.getOr404(s.chains, params.id, "Chain").id);
  return noContent;
}

const ruleUri = (s: SimulatorState, r: RuleRec) => s.withUri(s.renderRule(r), `/rules/${r.id}`);

function listRules(s: SimulatorState, { params }: Ctx): Reply {
  const c = s.getOr404(s.chains, params.id, "Chain");
  return ok(c.ruleIds.map((id) => ruleUri(s, s.rules.get(id) as RuleRec)));
}

function createRule(s: SimulatorState, { params, body }: Ctx): Reply {
  const c = s.getOr404(s.chains, params.id, "Chain");
  const { rec, position } = parseRule(s, body, c);
  s.rules.set(rec.id, rec);
  c.ruleIds.splice(position - 1, 0, rec.id);
  return created(`/rules/${rec.id}`);
}

function getRule(s: SimulatorState, { params }: Ctx): Reply {
  return ok(ruleUri(s, s.getOr404(s.rules, params.id, "Rule")));
}

function deleteRule(s: SimulatorState, { params }: Ctx): Reply {
  s.deleteRule(s.getOr404(s.rules, params.id, "Rule").id);
  return noContent;
}

export const chainRoutes: RouteDef[] = [
  { method: "GET", path: "chains", produces: MT.chains, handle: listChains },
  { method: "POST", path: "chains", consumes: MT.chain, handle: createChain },
  { method: "GET", path: "chains/:id", produces: MT.chain, handle: getChain },
  { method: "DELETE", path: "chains/:id", handle: deleteChain },
  { method: "GET", path: "chains/:id/rules", produces: MT.rules, handle: listRules },
  { method: "POST", path: "chains/:id/rules", consumes: MT.rule, handle: createRule },
  { method: "GET", path: "rules/:id", produces: MT.rule, handle: getRule },
  { method: "DELETE", path: "rules/:id", handle: deleteRule },
];
