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

/**
 * LoginFilter.java answers a good login with the Token-v1 body and, through
 * ResponseUtils.setCookie, the same token as a cookie: "sessionId=<key>;
 * Expires=<expires>" (SET_COOKIE_SESSION_KEY and SET_COOKIE_EXPIRES in
 * midonet-util/src/main/java/org/midonet/util/http/HttpSupport.java).
 */
function login(s: SimulatorState, { headers }: Ctx): Reply {
  const token = s.session.login(headers);
  return {
    ...ok(token),
    headers: { "Set-Cookie": `sessionId=${token.key}; Expires=${token.expires}` },
  };
}

export const rootRoutes: RouteDef[] = [
  { method: "GET", path: "", produces: MT.application, handle: getApplication },
  { method: "POST", path: "login", produces: MT.token, handle: login },
];
