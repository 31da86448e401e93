/** Routers and bridges: the same fields and the same five calls, each with its own cascade on delete. */
import { ACCEPTED_FIELDS } from "./accepted-fields.js";
import { Body, violation } from "./body.js";
import { MT } from "./media-types.js";
import {
  BRIDGE_OPERATOR_FIELDS,
  parseOperatorFields,
  ROUTER_OPERATOR_FIELDS,
} from "./operator-fields.js";
import { type Ctx, created, noContent, ok, type Reply, type RouteDef } from "./route-table.js";
import { type DeviceRec, renderDevice, type SimulatorState } from "./state.js";

interface DeviceKind {
  kind: "Router" | "Bridge";
  collection: "routers" | "bridges";
  one: string[];
  many: string[];
  /** What an operator may set besides the controller's fields: a PUT clears what it omits. */
  operatorFields: typeof ROUTER_OPERATOR_FIELDS;
  map(s: SimulatorState): Map<string, DeviceRec>;
  remove(s: SimulatorState, id: string): void;
}

function parseDevice(s: SimulatorState, d: DeviceKind, raw: unknown) {
  const body = Body.parse(d.kind, raw, ACCEPTED_FIELDS[d.kind]);
  const name = body.str("name");
  // Router.java and Bridge.java: @Size(min = 0, max = 255) on name, a bean violation.
  if (name !== null && name.length > 255) {
    throw violation("name", "size must be between 0 and 255");
  }
  const fields = {
    tenantId: body.str("tenantId"),
    name,
    inboundFilterId: body.uuid("inboundFilterId"),
    outboundFilterId: body.uuid("outboundFilterId"),
    operator: parseOperatorFields(s, body, d.operatorFields),
  };
  s.requireChain(fields.inboundFilterId, "inboundFilterId");
  s.requireChain(fields.outboundFilterId, "outboundFilterId");
  return { body, fields };
}

function routesOf(d: DeviceKind): RouteDef[] {
  const path = (id: string) => `/${d.collection}/${id}`;
  const list = (s: SimulatorState): Reply =>
    ok([...d.map(s).values()].map((r) => s.withUri(renderDevice(r), path(r.id))));
  const create = (s: SimulatorState, { body: raw }: Ctx): Reply => {
    const { body, fields } = parseDevice(s, d, raw);
    const id = s.newId(body, (i) => d.map(s).has(i), d.kind);
    d.map(s).set(id, { id, ...fields });
    return created(path(id));
  };
  const get = (s: SimulatorState, { params }: Ctx): Reply => {
    const rec = s.getOr404(d.map(s), params.id, d.kind);
    return ok(s.withUri(renderDevice(rec), path(rec.id)));
  };
  // The body replaces every field: one it omits is cleared (see operator-fields.ts).
  const update = (s: SimulatorState, { params, body }: Ctx): Reply => {
    const rec = s.getOr404(d.map(s), params.id, d.kind);
    Object.assign(rec, parseDevice(s, d, body).fields);
    return noContent;
  };
  const remove = (s: SimulatorState, { params }: Ctx): Reply => {
    d.remove(s, s.getOr404(d.map(s), params.id, d.kind).id);
    return noContent;
  };
  const item = `${d.collection}/:id`;
  return [
    { method: "GET", path: d.collection, produces: d.many, handle: list },
    { method: "POST", path: d.collection, consumes: d.one, handle: create },
    { method: "GET", path: item, produces: d.one, handle: get },
    { method: "PUT", path: item, consumes: d.one, handle: update },
    { method: "DELETE", path: item, handle: remove },
  ];
}

export const deviceRoutes: RouteDef[] = [
  ...routesOf({
    kind: "Router",
    collection: "routers",
    one: MT.router,
    many: MT.routers,
    operatorFields: ROUTER_OPERATOR_FIELDS,
    map: (s) => s.routers,
    remove: (s, id) => s.deleteRouter(id),
  }),
  ...routesOf({
    kind: "Bridge",
    collection: "bridges",
    one: MT.bridge,
    many: MT.bridges,
    operatorFields: BRIDGE_OPERATOR_FIELDS,
    map: (s) => s.bridges,
    remove: (s, id) => s.deleteBridge(id),
  }),
];
