/**
 * What each resource's body may set: the schema the simulator reads bodies
 * with, and the one the client's unit tests check every body it sends
 * against (test/unit/midonet-accepted-fields.test.ts).
 *
 * MidoNet ignores a field its model lacks (ObjectMapperProvider.java configures
 * Jackson with FAIL_ON_UNKNOWN_PROPERTIES false), and so does the simulator: a
 * typo such as nwDstAdress would silently drop a match condition on a real
 * MidoNet, which is why the client's tests, not the simulator's answers,
 * catch it.
 */
import {
  BRIDGE_OPERATOR_FIELDS,
  PORT_OPERATOR_FIELDS,
  ROUTER_OPERATOR_FIELDS,
} from "./operator-fields.js";

const DEVICE = ["id", "tenantId", "name", "inboundFilterId", "outboundFilterId"];
const PORT = [
  "id",
  "type",
  "inboundFilterId",
  "outboundFilterId",
  ...Object.keys(PORT_OPERATOR_FIELDS),
];

/** What a route matches (Route.java); kept apart from src/midonet: the simulator is the oracle. */
const ROUTE_MATCH = ["srcNetworkAddr", "srcNetworkLength", "dstNetworkAddr", "dstNetworkLength"];

/** Condition.java's fields the simulator's rules match on. */
export const CONDITION_FIELDS = [
  // Ask the connection tracker (NetworkPolicy's return flows).
  "matchForwardFlow",
  "matchReturnFlow",
  "dlType",
  "nwProto",
  "nwSrcAddress",
  "nwSrcLength",
  "nwDstAddress",
  "nwDstLength",
  "tpSrc",
  "tpDst",
];

export const NAT_RULE_TYPES = ["dnat", "snat", "rev_dnat", "rev_snat"];
export const FORWARD_NAT_RULE_TYPES = ["dnat", "snat"];

export const ACCEPTED_FIELDS = {
  TunnelZone: ["id", "name", "type"],
  TunnelZoneHost: ["hostId", "ipAddress"],
  Router: [...DEVICE, ...Object.keys(ROUTER_OPERATOR_FIELDS)],
  Bridge: [...DEVICE, ...Object.keys(BRIDGE_OPERATOR_FIELDS)],
  BridgePort: PORT,
  // RouterPort.java binds these; its portSubnet is @JsonIgnore (ignored if sent, never rendered).
  RouterPort: [...PORT, "networkAddress", "networkLength", "portAddress", "portMac"],
  PortLink: ["peerId"],
  Route: ["id", "type", ...ROUTE_MATCH, "nextHopPort", "nextHopGateway", "weight"],
  Chain: ["id", "tenantId", "name"],
  PortRange: ["start", "end"],
  NatTarget: ["addressFrom", "addressTo", "portFrom", "portTo"],
  HostInterfacePort: ["hostId", "portId", "interfaceName"],
  MacPort: ["macAddr", "portId"],
  IP4Mac: ["ip", "mac"],
} as const satisfies Record<string, readonly string[]>;

/** A rule's fields by its type: the conditions, and what the type adds. */
export function ruleFields(type: string): string[] {
  const fields = ["id", "type", "position", ...CONDITION_FIELDS];
  if (type === "jump") fields.push("jumpChainId");
  if (NAT_RULE_TYPES.includes(type)) fields.push("flowAction");
  if (FORWARD_NAT_RULE_TYPES.includes(type)) fields.push("natTargets");
  return fields;
}
