/**
 * Tunnel zones and their members. MidoNet checks a zone's name against every
 * zone, the one being updated included, so a PUT that keeps the name is a 409.
 */
import { ACCEPTED_FIELDS } from "./accepted-fields.js";
import { Body, badRequest, conflict, notFound } from "./body.js";
import { MT } from "./media-types.js";
import { type Ctx, created, noContent, ok, type Reply, type RouteDef } from "./route-table.js";
import { renderTunnelZone, SimulatorState, type TunnelZoneRec } from "./state.js";

const TUNNEL_ZONE_TYPES = ["gre", "vxlan", "vtep"] as const;

function parseTunnelZone(
  s: SimulatorState,
  raw: unknown,
): { body: Body; name: string; type: string } {
  const body = Body.parse("TunnelZone", raw, ACCEPTED_FIELDS.TunnelZone);
  const name = body.str("name", true) as string;
  if (name.length < 1 || name.length > 255) {
    throw badRequest("TunnelZone.name: size must be between 1 and 255");
  }
  const type = body.oneOf("type", TUNNEL_ZONE_TYPES, true) as string;
  if ([...s.tunnelZones.values()].some((z) => z.name === name)) {
    throw conflict(`a tunnel zone named ${name} already exists`);
  }
  return { body, name, type };
}

const zoneUri = (s: SimulatorState, r: TunnelZoneRec) =>
  s.withUri(renderTunnelZone(r), `/tunnel_zones/${r.id}`);

function listTunnelZones(s: SimulatorState): Reply {
  return ok([...s.tunnelZones.values()].map((r) => zoneUri(s, r)));
}

function createTunnelZone(s: SimulatorState, { body: raw }: Ctx): Reply {
  const { body, name, type } = parseTunnelZone(s, raw);
  const id = s.newId(body, (i) => s.tunnelZones.has(i), "TunnelZone");
  s.tunnelZones.set(id, { id, name, type, members: new Map() });
  return created(`/tunnel_zones/${id}`);
}

function getTunnelZone(s: SimulatorState, { params }: Ctx): Reply {
  return ok(zoneUri(s, s.getOr404(s.tunnelZones, params.id, "TunnelZone")));
}

function updateTunnelZone(s: SimulatorState, { params, body }: Ctx): Reply {
  const r = s.getOr404(s.tunnelZones, params.id, "TunnelZone");
  const { name, type } = parseTunnelZone(s, body);
  r.name = name;
  r.type = type;
  return noContent;
}

function deleteTunnelZone(s: SimulatorState, { params }: Ctx): Reply {
  s.tunnelZones.delete(s.getOr404(s.tunnelZones, params.id, "TunnelZone").id);
  return noContent;
}

const memberPath = (zoneId: string, hostId: string) => `/tunnel_zones/${zoneId}/hosts/${hostId}`;

function listMembers(s: SimulatorState, { params }: Ctx): Reply {
  const tz = s.getOr404(s.tunnelZones, params.id, "TunnelZone");
  return ok(
    [...tz.members].map(([hostId, ipAddress]) =>
      s.withUri({ tunnelZoneId: tz.id, hostId, ipAddress }, memberPath(tz.id, hostId)),
    ),
  );
}

function addMember(s: SimulatorState, { params, body: raw }: Ctx): Reply {
  const tz = s.getOr404(s.tunnelZones, params.id, "TunnelZone");
  const body = Body.parse("TunnelZoneHost", raw, ACCEPTED_FIELDS.TunnelZoneHost);
  const hostId = body.uuid("hostId", true) as string;
  const ipAddress = body.ipv4("ipAddress", true) as string;
  if (!s.hosts.has(hostId)) throw notFound(`TunnelZoneHost.hostId: host ${hostId} not found`);
  if (tz.members.has(hostId)) {
    throw conflict(`host ${hostId} is already a member of tunnel zone ${tz.id}`);
  }
  tz.members.set(hostId, ipAddress);
  return created(memberPath(tz.id, hostId));
}

function memberOr404(s: SimulatorState, params: Record<string, string>) {
  const tz = s.getOr404(s.tunnelZones, params.id, "TunnelZone");
  const hostId = SimulatorState.pathId(params.hostId, "TunnelZoneHost");
  const ipAddress = tz.members.get(hostId);
  if (ipAddress === undefined) throw notFound(`host ${hostId} is not in tunnel zone ${tz.id}`);
  return { tz, hostId, ipAddress };
}

function getMember(s: SimulatorState, { params }: Ctx): Reply {
  const { tz, hostId, ipAddress } = memberOr404(s, params);
  return ok(s.withUri({ tunnelZoneId: tz.id, hostId, ipAddress }, memberPath(tz.id, hostId)));
}

function removeMember(s: SimulatorState, { params }: Ctx): Reply {
  const { tz, hostId } = memberOr404(s, params);
  tz.members.delete(hostId);
  return noContent;
}

export const tunnelZoneRoutes: RouteDef[] = [
  { method: "GET", path: "tunnel_zones", produces: MT.tunnelZones, handle: listTunnelZones },
  { method: "POST", path: "tunnel_zones", consumes: MT.tunnelZone, handle: createTunnelZone },
  { method: "GET", path: "tunnel_zones/:id", produces: MT.tunnelZone, handle: getTunnelZone },
  { method: "PUT", path: "tunnel_zones/:id", consumes: MT.tunnelZone, handle: updateTunnelZone },
  { method: "DELETE", path: "tunnel_zones/:id", handle: deleteTunnelZone },
  {
    method: "GET",
    path: "tunnel_zones/:id/hosts",
    produces: MT.tunnelZoneHosts,
    handle: listMembers,
  },
  {
    method: "POST",
    path: "tunnel_zones/:id/hosts",
    consumes: MT.tunnelZoneHost,
    handle: addMember,
  },
  {
    method: "GET",
    path: "tunnel_zones/:id/hosts/:hostId",
    produces: MT.tunnelZoneHost,
    handle: getMember,
  },
  { method: "DELETE", path: "tunnel_zones/:id/hosts/:hostId", handle: removeMember },
];
