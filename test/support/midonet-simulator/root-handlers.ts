/** GET / (the Application object) and POST /login. */
import { MT } from "./media-types.js";
import { type Ctx, ok, type Reply, type RouteDef } from "./route-table.js";
import type { SimulatorState } from "./state.js";

function getApplication(s: SimulatorState): Reply {
  const b = s.baseUrl;
  return ok({
    uri: `${b}/`,
    version: "5",
    bridges: `${b}/bridges`,
    chains: `${b}/chains`,
    hosts: `${b}/hosts`,
    routers: `${b}/routers`,
    tunnelZones: `${b}/tunnel_zones`,
    bridgeTemplate: `${b}/bridges/{id}`,
    chainTemplate: `${b}/chains/{id}`,
    hostTemplate: `${b}/hosts/{id}`,
    portTemplate: `${b}/ports/{id}`,
    routeTemplate: `${b}/routes/{id}`,
    routerTemplate: `${b}/routers/{id}`,
    ruleTemplate: `${b}/rules/{id}`,
    tunnelZoneTemplate: `${b}/tunnel_zones/{id}`,
  });
}

function login(s: SimulatorState, { headers }: Ctx): Reply {
  return ok(s.session.login(headers));
}

export const rootRoutes: RouteDef[] = [
  { method: "GET", path: "", produces: MT.application, handle: getApplication },
  { method: "POST", path: "login", produces: MT.token, handle: login },
];
