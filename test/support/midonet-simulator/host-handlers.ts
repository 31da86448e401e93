/**
 * Hosts (registered by the MidoNet agents, read only) and the bindings of
 * virtual ports to their interfaces. A host takes a binding only while it is
 * in a tunnel zone, as MidoNet requires.
 */
import { ACCEPTED_FIELDS } from "./accepted-fields.js";
import { Body, badRequest, conflict, notFound } from "./body.js";
import { MT } from "./media-types.js";
import { type Ctx, created, noContent, ok, type Reply, type RouteDef } from "./route-table.js";
import { type BindingRec, renderHost, SimulatorState } from "./state.js";

function listHosts(s: SimulatorState): Reply {
  return ok([...s.hosts.values()].map((h) => s.withUri(renderHost(h), `/hosts/${h.id}`)));
}

function getHost(s: SimulatorState, { params }: Ctx): Reply {
  const h = s.getOr404(s.hosts, params.id, "Host");
  return ok(s.withUri(renderHost(h), `/hosts/${h.id}`));
}

const bindingPath = (b: BindingRec) => `/hosts/${b.hostId}/ports/${b.portId}`;

function listBindings(s: SimulatorState, { params }: Ctx): Reply {
  const h = s.getOr404(s.hosts, params.id, "Host");
  return ok(
    [...s.bindings.values()]
      .filter((b) => b.hostId === h.id)
      .map((b) => s.withUri({ ...b }, bindingPath(b))),
  );
}

function checkBindable(s: SimulatorState, hostId: string, portId: string, ifName: string): void {
  if (![...s.tunnelZones.values()].some((z) => z.members.has(hostId))) {
    throw conflict(`host ${hostId} is not a member of any tunnel zone`);
  }
  const bound = s.bindings.get(portId);
  if (bound) {
    throw conflict(
      `port ${portId} is already bound to ${bound.interfaceName} on host ${bound.hostId}`,
    );
  }
  for (const b of s.bindings.values()) {
    if (b.hostId === hostId && b.interfaceName === ifName) {
      throw conflict(`interface ${ifName} on host ${hostId} is already bound to port ${b.portId}`);
    }
  }
}

function bindPort(s: SimulatorState, { params, body: raw }: Ctx): Reply {
  const h = s.getOr404(s.hosts, params.id, "Host");
  const body = Body.parse("HostInterfacePort", raw, ACCEPTED_FIELDS.HostInterfacePort);
  // The host comes from the path; a hostId in the body is ignored, as MidoNet does.
  body.uuid("hostId");
  const portId = body.uuid("portId", true) as string;
  const interfaceName = body.str("interfaceName", true) as string;
  if (interfaceName.length === 0) {
    throw badRequest("HostInterfacePort.interfaceName: may not be empty");
  }
  const port = s.ports.get(portId);
  if (!port) throw notFound(`HostInterfacePort.portId: port ${portId} not found`);
  checkBindable(s, h.id, portId, interfaceName);
  const binding = { hostId: h.id, portId, interfaceName };
  s.bindings.set(portId, binding);
  port.hostId = h.id;
  port.interfaceName = interfaceName;
  return created(bindingPath(binding));
}

function bindingOr404(s: SimulatorState, params: Record<string, string>): BindingRec {
  const h = s.getOr404(s.hosts, params.id, "Host");
  const portId = SimulatorState.pathId(params.portId, "HostInterfacePort");
  const b = s.bindings.get(portId);
  if (!b || b.hostId !== h.id) throw notFound(`port ${portId} is not bound on host ${h.id}`);
  return b;
}

function getBinding(s: SimulatorState, { params }: Ctx): Reply {
  const b = bindingOr404(s, params);
  return ok(s.withUri({ ...b }, bindingPath(b)));
}

/**
 * As HostInterfacePortResource.scala's delete does it: the port (404 when
 * there is none) loses its binding wherever it is bound, or has none to lose;
 * the host in the path is not looked at. 204 either way.
 */
function unbindPort(s: SimulatorState, { params }: Ctx): Reply {
  const portId = SimulatorState.pathId(params.portId, "HostInterfacePort");
  const port = s.getOr404(s.ports, portId, "Port");
  s.bindings.delete(portId);
  port.hostId = null;
  port.interfaceName = null;
  return noContent;
}

export const hostRoutes: RouteDef[] = [
  { method: "GET", path: "hosts", produces: MT.hosts, handle: listHosts },
  // HostResource.scala: GET /hosts/{id}, Host-v3.
  { method: "GET", path: "hosts/:id", produces: MT.host, handle: getHost },
  {
    method: "GET",
    path: "hosts/:id/ports",
    produces: MT.hostInterfacePorts,
    handle: listBindings,
  },
  {
    method: "POST",
    path: "hosts/:id/ports",
    consumes: MT.hostInterfacePort,
    handle: bindPort,
  },
  {
    method: "GET",
    path: "hosts/:id/ports/:portId",
    produces: MT.hostInterfacePort,
    handle: getBinding,
  },
  { method: "DELETE", path: "hosts/:id/ports/:portId", handle: unbindPort },
];
