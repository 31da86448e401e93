/**
 * Bridge MAC and ARP tables, which MidoNet keeps as state tables
 * (DirectoryStateTable): besides the persistent entries the API creates, the
 * datapath learns entries. The list GETs answer the table's remoteSnapshot:
 * one value per key (the MAC, the IP), a learned value over a persistent one.
 * DELETE removes only the persistent entry and answers 204 whether or not there
 * was one, so a learned entry stays; GET of one entry answers 200 when the
 * persistent entry exists or the learned value equals it. A duplicate
 * persistent entry is MidoNet's unhandled error, a 500.
 */
import { isIPv4 } from "node:net";
import { ACCEPTED_FIELDS } from "./accepted-fields.js";
import { ApiError, Body, badRequest, macFromPath, notFound, UUID_RE } from "./body.js";
import { MT } from "./media-types.js";
import { type Ctx, created, noContent, ok, type Reply, type RouteDef } from "./route-table.js";
import { type DeviceRec, renderArp, renderMac, type SimulatorState } from "./state.js";

const macPath = (bridgeId: string, mac: string, portId: string) =>
  `/bridges/${bridgeId}/mac_table/${mac.replaceAll(":", "-")}_${portId}`;
const arpPath = (bridgeId: string, ip: string, mac: string) =>
  `/bridges/${bridgeId}/arp_table/${ip}_${mac.replaceAll(":", "-")}`;

/** One value per key, a learned value over a persistent one, and of several persistent ones the first. */
function remoteSnapshot(
  persistent: Iterable<[string, string]>,
  learned: ReadonlyMap<string, string> | undefined,
): Map<string, string> {
  const out = new Map<string, string>();
  for (const [key, value] of persistent) if (!out.has(key)) out.set(key, value);
  for (const [key, value] of learned ?? []) out.set(key, value);
  return out;
}

function addEntry<T>(tables: Map<string, Map<string, T>>, bridgeId: string, key: string, e: T) {
  const table = tables.get(bridgeId) ?? new Map<string, T>();
  if (table.has(key)) throw new ApiError(500, `entry ${key} already exists`);
  table.set(key, e);
  tables.set(bridgeId, table);
}

function listMacs(s: SimulatorState, { params }: Ctx): Reply {
  const b = s.getOr404(s.bridges, params.id, "Bridge");
  const persistent = [...(s.macTables.get(b.id)?.values() ?? [])].map((e): [string, string] => [
    e.macAddr,
    e.portId,
  ]);
  const listed = remoteSnapshot(persistent, s.learnedMacs.get(b.id));
  return ok(
    [...listed].map(([macAddr, portId]) =>
      s.withUri(renderMac({ macAddr, portId }), macPath(b.id, macAddr, portId)),
    ),
  );
}

function addMac(s: SimulatorState, { params, body: raw }: Ctx): Reply {
  const b = s.getOr404(s.bridges, params.id, "Bridge");
  const body = Body.parse("MacPort", raw, ACCEPTED_FIELDS.MacPort);
  const macAddr = body.mac("macAddr", true) as string;
  const portId = body.uuid("portId", true) as string;
  const port = s.ports.get(portId);
  if (!port) throw notFound(`MacPort.portId: port ${portId} not found`);
  if (port.type !== "Bridge" || port.deviceId !== b.id) {
    throw badRequest(`MacPort.portId: port ${portId} is not on bridge ${b.id}`);
  }
  addEntry(s.macTables, b.id, `${macAddr}_${portId}`, { macAddr, portId });
  return created(macPath(b.id, macAddr, portId));
}

/** The entry a path names: bridge, then "aa-bb-cc-dd-ee-ff_<port id>". */
function macEntry(s: SimulatorState, params: Record<string, string>) {
  const b: DeviceRec = s.getOr404(s.bridges, params.id, "Bridge");
  const pair = params.pair ?? "";
  const sep = pair.indexOf("_");
  const mac = macFromPath(pair.slice(0, Math.max(sep, 0)));
  const portId = pair.slice(sep + 1).toLowerCase();
  if (sep < 0 || mac === undefined || !UUID_RE.test(portId)) {
    throw badRequest(`${pair} is not a MAC-port pair such as aa-bb-cc-dd-ee-ff_<port id>`);
  }
  return { b, key: `${mac}_${portId}`, mac, portId };
}

function getMac(s: SimulatorState, { params }: Ctx): Reply {
  const { b, key, mac, portId } = macEntry(s, params);
  const held = s.macTables.get(b.id)?.has(key) || s.learnedMacs.get(b.id)?.get(mac) === portId;
  if (!held) throw notFound(`MAC table entry ${params.pair} not found`);
  return ok(s.withUri(renderMac({ macAddr: mac, portId }), macPath(b.id, mac, portId)));
}

function deleteMac(s: SimulatorState, { params }: Ctx): Reply {
  const { b, key } = macEntry(s, params);
  s.macTables.get(b.id)?.delete(key);
  return noContent;
}

function listArps(s: SimulatorState, { params }: Ctx): Reply {
  const b = s.getOr404(s.bridges, params.id, "Bridge");
  const persistent = [...(s.arpTables.get(b.id)?.values() ?? [])].map((e): [string, string] => [
    e.ip,
    e.mac,
  ]);
  const listed = remoteSnapshot(persistent, s.learnedArps.get(b.id));
  return ok(
    [...listed].map(([ip, mac]) => s.withUri(renderArp({ ip, mac }), arpPath(b.id, ip, mac))),
  );
}

function addArp(s: SimulatorState, { params, body: raw }: Ctx): Reply {
  const b = s.getOr404(s.bridges, params.id, "Bridge");
  const body = Body.parse("IP4Mac", raw, ACCEPTED_FIELDS.IP4Mac);
  const ip = body.ipv4("ip", true) as string;
  const mac = body.mac("mac", true) as string;
  addEntry(s.arpTables, b.id, `${ip}_${mac}`, { ip, mac });
  return created(arpPath(b.id, ip, mac));
}

/** The entry a path names: bridge, then "<ip>_aa-bb-cc-dd-ee-ff". */
function arpEntry(s: SimulatorState, params: Record<string, string>) {
  const b: DeviceRec = s.getOr404(s.bridges, params.id, "Bridge");
  const pair = params.pair ?? "";
  const sep = pair.indexOf("_");
  const ip = pair.slice(0, Math.max(sep, 0));
  const mac = macFromPath(pair.slice(sep + 1));
  if (sep < 0 || !isIPv4(ip) || mac === undefined) {
    throw badRequest(`${pair} is not an IP-MAC pair such as 10.0.0.1_aa-bb-cc-dd-ee-ff`);
  }
  return { b, key: `${ip}_${mac}`, ip, mac };
}

function getArp(s: SimulatorState, { params }: Ctx): Reply {
  const { b, key, ip, mac } = arpEntry(s, params);
  const held = s.arpTables.get(b.id)?.has(key) || s.learnedArps.get(b.id)?.get(ip) === mac;
  if (!held) throw notFound(`ARP table entry ${params.pair} not found`);
  return ok(s.withUri(renderArp({ ip, mac }), arpPath(b.id, ip, mac)));
}

function deleteArp(s: SimulatorState, { params }: Ctx): Reply {
  const { b, key } = arpEntry(s, params);
  s.arpTables.get(b.id)?.delete(key);
  return noContent;
}

export const stateTableRoutes: RouteDef[] = [
  { method: "GET", path: "bridges/:id/mac_table", produces: MT.macPorts, handle: listMacs },
  { method: "POST", path: "bridges/:id/mac_table", consumes: MT.macPort, handle: addMac },
  { method: "GET", path: "bridges/:id/mac_table/:pair", produces: MT.macPort, handle: getMac },
  { method: "DELETE", path: "bridges/:id/mac_table/:pair", handle: deleteMac },
  { method: "GET", path: "bridges/:id/arp_table", produces: MT.ip4Macs, handle: listArps },
  { method: "POST", path: "bridges/:id/arp_table", consumes: MT.ip4Mac, handle: addArp },
  { method: "GET", path: "bridges/:id/arp_table/:pair", produces: MT.ip4Mac, handle: getArp },
  { method: "DELETE", path: "bridges/:id/arp_table/:pair", handle: deleteArp },
];
