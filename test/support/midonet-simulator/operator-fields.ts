/**
 * Fields of routers, bridges and ports that the controller never sets but an
 * operator may (a load balancer, mirrors, a QoS policy, the admin state …).
 *
 * A PUT replaces the whole object with its body: what the body omits is
 * cleared, to null or to the default of the model's constructor
 * (adminStateUp = true). MidoNet's resources (midonet-cluster
 * MidonetResource.scala's update, with RouterResource/BridgeResource and
 * PortResource.scala's updateFilter) keep of the stored object only what the
 * models' update(from) copies back: ids and back-references (Router.java:
 * portIds, routeIds, bgp ids, traceRequestIds; Bridge.java: portIds,
 * vxLanPortIds, dhcpIds, traceRequestIds; Port.java: tunnelKey, the binding
 * and peer when the body has none, insertions, serviceContainerId). So a PUT
 * that does not carry loadBalancerId, localRedirectChainId, forwardChainId,
 * the mirror lists or adminStateUp undoes an operator's setting of them.
 * qosPolicyId (on routers and bridges) follows the same rule here.
 */
import type { Body } from "./body.js";
import type { SimulatorState } from "./state.js";

type FieldType = "uuid" | "chain" | "uuids" | "adminState" | "int";

/** Field → its type; a field's default is what an omitted one becomes. */
type FieldSpec = Readonly<Record<string, FieldType>>;

export type OperatorValues = Record<string, unknown>;

const MIRRORS: FieldSpec = { inboundMirrorIds: "uuids", outboundMirrorIds: "uuids" };

export const ROUTER_OPERATOR_FIELDS: FieldSpec = {
  adminStateUp: "adminState",
  loadBalancerId: "uuid",
  localRedirectChainId: "chain",
  forwardChainId: "chain",
  asNumber: "int",
  qosPolicyId: "uuid",
  ...MIRRORS,
};

export const BRIDGE_OPERATOR_FIELDS: FieldSpec = {
  adminStateUp: "adminState",
  qosPolicyId: "uuid",
  ...MIRRORS,
};

/** Port.java's writable fields besides the filters (and RouterPort's address and MAC). */
export const PORT_OPERATOR_FIELDS: FieldSpec = {
  adminStateUp: "adminState",
  vifId: "uuid",
  ...MIRRORS,
};

function defaultOf(type: FieldType): unknown {
  if (type === "adminState") return true;
  if (type === "int") return 0;
  return null;
}

/** The fields' values as `body` sets them, defaults for those it omits; 400/404 for a bad one. */
export function parseOperatorFields(
  s: SimulatorState,
  body: Body,
  spec: FieldSpec,
): OperatorValues {
  const out: OperatorValues = {};
  for (const [key, type] of Object.entries(spec)) {
    if (!body.has(key)) {
      out[key] = defaultOf(type);
      continue;
    }
    switch (type) {
      case "adminState":
        out[key] = body.bool(key);
        break;
      case "int":
        out[key] = body.int(key, 0, 2 ** 31 - 1);
        break;
      case "uuids":
        out[key] = body.uuidList(key);
        break;
      case "chain":
        out[key] = body.uuid(key);
        s.requireChain(out[key] as string, key);
        break;
      default:
        out[key] = body.uuid(key);
    }
  }
  return out;
}
