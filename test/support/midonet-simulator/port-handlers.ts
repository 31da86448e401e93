/**
 * Ports on bridges and routers, and the links between them. A router port
 * without portMac gets a random MAC, a PUT without portMac clears it (as
 * MidoNet does), and a router port's address (portAddress) gets one Local
 * /32 route when the port is created, never on a PUT (see
 * SimulatorState.addLocalRoute).
 */
import { isIPv4 } from "node:net";
import { ACCEPTED_FIELDS } from "./accepted-fields.js";
import { ApiError, Body, badRequest, conflict, notFound, randomMac } from "./body.js";
import { MT } from "./media-types.js";
import { PORT_OPERATOR_FIELDS, parseOperatorFields } from "./operator-fields.js";
import { type Ctx, created, noContent, ok, type Reply, type RouteDef } from "./route-table.js";
import { type PortRec, renderPort, type SimulatorState } from "./state.js";

type PortType = PortRec["type"];

function parsePort(s: SimulatorState, raw: unknown, type: PortType, existing?: PortRec) {
  const body = Body.parse(`${type}Port`, raw, ACCEPTED_FIELDS[`${type}Port`]);
  const sentType = body.str("type", true);
  if (sentType !== type) throw badRequest(`Port.type: expected ${type}, got ${sentType}`);
  const rec: PortRec = {
    id: existing?.id ?? "",
    type,
    deviceId: existing?.deviceId ?? "",
    inboundFilterId: body.uuid("inboundFilterId"),
    outboundFilterId: body.uuid("outboundFilterId"),
    peerId: existing?.peerId ?? null,
    hostId: existing?.hostId ?? null,
    interfaceName: existing?.interfaceName ?? null,
    portSubnet: null,
    portAddress: null,
    portMac: type === "Router" ? body.mac("portMac") : null,
    operator: parseOperatorFields(s, body, PORT_OPERATOR_FIELDS),
  };
  s.requireChain(rec.inboundFilterId, "inboundFilterId");
  s.requireChain(rec.outboundFilterId, "outboundFilterId");
  if (type === "Router") Object.assign(rec, routerPortAddress(body));
  return { rec, body };
}

const IP_FORMAT = "is an invalid IP format";

/**
 * A router port's address as RouterPort.java takes it
 * (midonet-cluster/src/main/java/org/midonet/cluster/rest_api/models/RouterPort.java):
 * networkAddress and portAddress are @NotNull and @Pattern(IPv4.regex, "is an
 * invalid IP format"), networkLength an int with @Min(0) @Max(32) (absent: 0).
 * portSubnet is @JsonIgnore: a body's portSubnet is ignored, as any field the
 * JSON does not bind, and never rendered; beforeToProto stores
 * networkAddress/networkLength as the port's subnet. The validator checks a
 * PUT's body as a POST's, so both need the addresses, and lists every
 * violation at once.
 */
function routerPortAddress(body: Body): { portSubnet: string; portAddress: string } {
  const violations: { property: string; message: string }[] = [];
  const address = (key: string): string => {
    const v = body.has(key) ? body.raw(key) : null;
    if (v === null) violations.push({ property: key, message: "may not be null" });
    else if (typeof v !== "string")
      body.str(key); // Jackson's own 400: not a string at all
    else if (!isIPv4(v)) violations.push({ property: key, message: IP_FORMAT });
    return typeof v === "string" ? v : "";
  };
  const networkAddress = address("networkAddress");
  const portAddress = address("portAddress");
  const length = body.has("networkLength")
    ? (body.int("networkLength", -(2 ** 31), 2 ** 31 - 1) as number)
    : 0;
  if (length < 0)
    violations.push({ property: "networkLength", message: "must be greater than or equal to 0" });
  if (length > 32)
    violations.push({ property: "networkLength", message: "must be less than or equal to 32" });
  if (violations.length > 0) throw new ApiError(400, "Validation error(s) found", violations);
  return { portSubnet: `${networkAddress}/${length}`, portAddress };
}

/** GET and POST on /bridges/{id}/ports or /routers/{id}/ports. */
function devicePortRoutes(type: PortType): RouteDef[] {
  const device = (s: SimulatorState, id: string | undefined) =>
    s.getOr404(type === "Bridge" ? s.bridges : s.routers, id, type);
  const list = (s: SimulatorState, { params }: Ctx): Reply => {
    const d = device(s, params.id);
    return ok(
      [...s.ports.values()]
        .filter((p) => p.type === type && p.deviceId === d.id)
        .map((p) => s.withUri(renderPort(p), `/ports/${p.id}`)),
    );
  };
  const create = (s: SimulatorState, { params, body: raw }: Ctx): Reply => {
    const d = device(s, params.id);
    const { rec, body } = parsePort(s, raw, type);
    rec.id = s.newId(body, (i) => s.ports.has(i), "Port");
    rec.deviceId = d.id;
    if (type === "Router" && rec.portMac === null) rec.portMac = randomMac();
    s.ports.set(rec.id, rec);
    if (type === "Router") s.addLocalRoute(rec);
    return created(`/ports/${rec.id}`);
  };
  const path = `${type === "Bridge" ? "bridges" : "routers"}/:id/ports`;
  return [
    { method: "GET", path, produces: MT.ports, handle: list },
    { method: "POST", path, consumes: MT.port, handle: create },
  ];
}

function getPort(s: SimulatorState, { params }: Ctx): Reply {
  const p = s.getOr404(s.ports, params.id, "Port");
  return ok(s.withUri(renderPort(p), `/ports/${p.id}`));
}

/**
 * Routes stay as they are, whatever the port's new address: MidoNet adds a
 * router port's Local /32 route in RouterPortResource.createFilter only
 * (midonet-cluster PortResource.scala), and its updateFilter is Port.update's
 * copy of ids and back-references, no route. The old address keeps its Local
 * route, the new one gets none.
 */
function updatePort(s: SimulatorState, { params, body }: Ctx): Reply {
  const p = s.getOr404(s.ports, params.id, "Port");
  Object.assign(p, parsePort(s, body, p.type, p).rec);
  return noContent;
}

function deletePort(s: SimulatorState, { params }: Ctx): Reply {
  s.deletePort(s.getOr404(s.ports, params.id, "Port").id);
  return noContent;
}

function linkPorts(s: SimulatorState, { params, body: raw }: Ctx): Reply {
  const p = s.getOr404(s.ports, params.id, "Port");
  const body = Body.parse("PortLink", raw, ACCEPTED_FIELDS.PortLink);
  const peerId = body.uuid("peerId", true) as string;
  const peer = s.ports.get(peerId);
  if (!peer) throw notFound(`PortLink.peerId: port ${peerId} not found`);
  if (peer.id === p.id) throw badRequest("PortLink: a port cannot be linked to itself");
  for (const end of [p, peer]) {
    if (end.peerId !== null) throw conflict(`port ${end.id} is already linked to ${end.peerId}`);
  }
  p.peerId = peer.id;
  peer.peerId = p.id;
  return created(`/ports/${p.id}/link`);
}

function unlinkPort(s: SimulatorState, { params }: Ctx): Reply {
  const p = s.getOr404(s.ports, params.id, "Port");
  if (p.peerId !== null) {
    const peer = s.ports.get(p.peerId);
    if (peer) peer.peerId = null;
    p.peerId = null;
  }
  return noContent;
}

export const portRoutes: RouteDef[] = [
  ...devicePortRoutes("Bridge"),
  ...devicePortRoutes("Router"),
  { method: "GET", path: "ports/:id", produces: MT.port, handle: getPort },
  { method: "PUT", path: "ports/:id", consumes: MT.port, handle: updatePort },
  { method: "DELETE", path: "ports/:id", handle: deletePort },
  { method: "POST", path: "ports/:id/link", consumes: MT.portLink, handle: linkPorts },
  { method: "DELETE", path: "ports/:id/link", handle: unlinkPort },
];
