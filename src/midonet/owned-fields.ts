/**
 * Which fields of a router, bridge or port the controller owns, and the body
 * of a PUT that changes them without undoing anyone else's.
 *
 * MidoNet's PUT replaces the whole object with its body: a field the body
 * omits is cleared (an operator's load balancer, forward chain, mirrors, QoS
 * policy; adminStateUp goes back to true). So a PUT is read-modify-write: the
 * object as MidoNet holds it, with only the owned fields set as wanted. The
 * same list decides what counts as a difference (actual-state.ts compareHeld),
 * so what the controller compares is exactly what it writes.
 */
import type { MidonetObject, UpdatableKind } from "./resources.js";

const DEVICE_FIELDS = ["name", "tenantId", "inboundFilterId", "outboundFilterId"] as const;
const PORT_FIELDS = ["inboundFilterId", "outboundFilterId"] as const;
/** A router port's address: a change of it needs a new port (actual-state.ts compareHeld). */
export const ROUTER_PORT_ADDRESS = ["networkAddress", "networkLength", "portAddress"] as const;
const ROUTER_PORT_FIELDS = [...PORT_FIELDS, ...ROUTER_PORT_ADDRESS, "portMac"] as const;

/**
 * What the server renders but takes no value for, or takes one it should not
 * from a stale read (Port.java's update keeps a body's non-null hostId,
 * interfaceName and peerId over the stored ones): never sent back.
 */
const READ_ONLY = new Set([
  "uri",
  "deviceId",
  "peerId",
  "hostId",
  "interfaceName",
  "active",
  "bgpStatus",
]);

/** The fields the controller sets on an object of this kind (and type, for ports). */
export function ownedFields(
  kind: Exclude<UpdatableKind, "TunnelZone">,
  body: object,
): readonly string[] {
  if (kind !== "Port") return DEVICE_FIELDS;
  return (body as { type?: string }).type === "Router" ? ROUTER_PORT_FIELDS : PORT_FIELDS;
}

/**
 * The body to PUT: `held` (the object as just read) with the owned fields
 * as in `wanted`, an owned field `wanted` leaves out being cleared (null).
 */
export function mergedPutBody(
  wanted: MidonetObject & { kind: "Router" | "Bridge" | "Port" },
  held: object,
): object {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(held)) if (!READ_ONLY.has(key)) out[key] = value;
  const want = wanted.body as Record<string, unknown>;
  for (const key of ownedFields(wanted.kind, want)) out[key] = want[key] ?? null;
  out.id = want.id;
  if (wanted.kind === "Port") out.type = want.type;
  return out;
}
