/** A router's routes. A Normal route needs a next hop port on the same router (400 otherwise). */
import { ACCEPTED_FIELDS } from "./accepted-fields.js";
import { Body, badRequest } from "./body.js";
import { MT } from "./media-types.js";
import { type Ctx, created, noContent, ok, type Reply, type RouteDef } from "./route-table.js";
import { type RouteRec, renderRoute, type SimulatorState } from "./state.js";

const ROUTE_TYPES = ["Normal", "BlackHole", "Reject", "Local"] as const;

function parseRoute(s: SimulatorState, raw: unknown, routerId: string) {
  const body = Body.parse("Route", raw, ACCEPTED_FIELDS.Route);
  const route: Omit<RouteRec, "id"> = {
    routerId,
    type: body.oneOf("type", ROUTE_TYPES, true) as string,
    srcNetworkAddr: body.ipv4("srcNetworkAddr", true) as string,
    srcNetworkLength: body.int("srcNetworkLength", 0, 32) ?? 0,
    dstNetworkAddr: body.ipv4("dstNetworkAddr", true) as string,
    dstNetworkLength: body.int("dstNetworkLength", 0, 32) ?? 0,
    nextHopPort: body.uuid("nextHopPort"),
    nextHopGateway: body.ipv4("nextHopGateway"),
    weight: body.int("weight", 0, 2 ** 31 - 1) ?? 0,
  };
  if (route.type === "Normal" && route.nextHopPort === null) {
    throw badRequest("Route.nextHopPort: a Normal route needs a next hop port");
  }
  if (route.nextHopPort !== null) {
    const port = s.ports.get(route.nextHopPort);
    if (port?.type !== "Router" || port.deviceId !== routerId) {
      throw badRequest(
        `Route.nextHopPort: ${route.nextHopPort} is not a port of router ${routerId}`,
      );
    }
  }
  return { body, route };
}

function listRoutes(s: SimulatorState, { params }: Ctx): Reply {
  const r = s.getOr404(s.routers, params.id, "Router");
  return ok(
    [...s.routes.values()]
      .filter((x) => x.routerId === r.id)
      .map((x) => s.withUri(renderRoute(x), `/routes/${x.id}`)),
  );
}

function createRoute(s: SimulatorState, { params, body: raw }: Ctx): Reply {
  const r = s.getOr404(s.routers, params.id, "Router");
  const { body, route } = parseRoute(s, raw, r.id);
  const id = s.newId(body, (i) => s.routes.has(i), "Route");
  s.routes.set(id, { id, ...route });
  return created(`/routes/${id}`);
}

function getRoute(s: SimulatorState, { params }: Ctx): Reply {
  const x = s.getOr404(s.routes, params.id, "Route");
  return ok(s.withUri(renderRoute(x), `/routes/${x.id}`));
}

function deleteRoute(s: SimulatorState, { params }: Ctx): Reply {
  s.routes.delete(s.getOr404(s.routes, params.id, "Route").id);
  return noContent;
}

export const routerRouteRoutes: RouteDef[] = [
  { method: "GET", path: "routers/:id/routes", produces: MT.routes, handle: listRoutes },
  { method: "POST", path: "routers/:id/routes", consumes: MT.route, handle: createRoute },
  { method: "GET", path: "routes/:id", produces: MT.route, handle: getRoute },
  { method: "DELETE", path: "routes/:id", handle: deleteRoute },
];
