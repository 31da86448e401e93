/**
 * Converting a CNI result between versions (cni-spec §3), by libcni's rules
 * (pkg/types/100, 040, 020 and internal/convert):
 * - 1.0.0 ↔ 1.1.0 changes the version string only.
 * - 1.x → 0.3.x/0.4.0 gives each ip a `version` by the address family and
 *   keeps only name, mac and sandbox of each interface; routes are copied whole.
 * - 0.3.x/0.4.0 → 1.x drops `version`.
 * - to 0.1.0/0.2.0 (via 0.4.0): the first ip whose version is "4" and the first
 *   whose version is "6"; each route goes under ip4 or ip6 by the family of its
 *   `dst`, with only dst and gw, and is dropped when that family has no ip.
 * - 0.1.0/0.2.0 → 0.3.x+: ip4 then ip6 become ips entries (with `version`
 *   for 0.3.x/0.4.0, never an interface index); their routes, whole, become the
 *   top-level routes.
 * Go routes are one type in every version, so the 1.1.0 route fields (mtu,
 * advmss, priority, table, scope) survive every conversion except the one to
 * 0.1.0/0.2.0, where libcni copies dst and gw only.
 *
 * It stands apart from reading (result-read.ts) because it takes values that
 * are results already, checking nothing but their versions, and apart from
 * writing (result-json.ts) because it decides what a result holds, not the
 * bytes Go prints for it: the driver works in 1.x (toResult100) and converts
 * back to the version it was asked for. Nothing here mutates its input; every
 * conversion returns fresh objects.
 */

import { ipFamily } from "../net/ip.js";
import { CniError, ErrorCode } from "./errors.js";
import {
  build020,
  build040,
  build100,
  buildInterface,
  buildRoute,
  familyOf,
  interface040,
  ipConfig040,
  ipConfig100,
  nonEmpty,
  unsupportedVersion,
  versionOf,
  withOptional,
} from "./result-shape.js";
import type {
  AnyResult,
  DNS,
  IPConfig020,
  IPConfig040,
  Result020,
  Result040,
  Result100,
  Route,
} from "./types.js";
import { type CniVersion, isSupportedVersion, LATEST_VERSION, resultFamily } from "./versions.js";

// ---- copying (every conversion returns fresh objects) ------------------------------

function copyDns(dns: DNS | undefined): DNS {
  if (!dns) return {};
  return withOptional<DNS>(
    {},
    {
      nameservers: dns.nameservers && [...dns.nameservers],
      domain: dns.domain,
      search: dns.search && [...dns.search],
      options: dns.options && [...dns.options],
    },
  );
}

function copyRoutes(routes: Route[] | undefined): Route[] | undefined {
  return nonEmpty(routes?.map(buildRoute));
}

function copyIpConfig020(ip: IPConfig020 | undefined): IPConfig020 | undefined {
  if (!ip) return undefined;
  return withOptional<IPConfig020>(
    { ip: ip.ip },
    { gateway: ip.gateway, routes: copyRoutes(ip.routes as Route[] | undefined) },
  );
}

function ipConfig020(ip: IPConfig040): IPConfig020 {
  const out: IPConfig020 = { ip: ip.address };
  if (ip.gateway) out.gateway = ip.gateway;
  return out;
}

// ---- the converters, one per pair of shapes ------------------------------------------

/**
 * What 0.3.x and later results hold alike, copied: interfaces and ips each by
 * the rule of the conversion, routes and dns whole.
 */
function copyParts<I, P, J, Q>(
  r: { interfaces?: I[]; ips?: P[]; routes?: Route[]; dns?: DNS },
  copyInterface: (i: I) => J,
  copyIp: (ip: P) => Q,
): { interfaces?: J[]; ips?: Q[]; routes?: Route[]; dns: DNS } {
  return {
    interfaces: r.interfaces?.map(copyInterface),
    ips: r.ips?.map(copyIp),
    routes: copyRoutes(r.routes),
    dns: copyDns(r.dns),
  };
}

function from100To100(r: Result100, to: string): Result100 {
  return build100(to, copyParts(r, buildInterface, ipConfig100));
}

function from040To040(r: Result040, to: string): Result040 {
  return build040(
    to,
    copyParts(r, interface040, (ip) => ipConfig040(ip, ip.version)),
  );
}

function from020To020(r: Result020, to: string): Result020 {
  return build020(to, {
    ip4: copyIpConfig020(r.ip4),
    ip6: copyIpConfig020(r.ip6),
    dns: copyDns(r.dns),
  });
}

/** types100 convertTo04x. */
function from100To040(r: Result100, to: string): Result040 {
  return build040(
    to,
    copyParts(r, interface040, (ip) => ipConfig040(ip, versionOf(ip.address))),
  );
}

/** types100 convertFrom04x. */
function from040To100(r: Result040, to: string): Result100 {
  return build100(to, copyParts(r, interface040, ipConfig100));
}

/** types040 convertTo02x. */
function from040To020(r: Result040, to: string): Result020 {
  let ip4: IPConfig020 | undefined;
  let ip6: IPConfig020 | undefined;
  // 0.2.0 holds one address per family: the first of each, chosen by the `version` field.
  for (const ip of r.ips ?? []) {
    if (ip.version === "4" && !ip4) ip4 = ipConfig020(ip);
    else if (ip.version === "6" && !ip6) ip6 = ipConfig020(ip);
    if (ip4 && ip6) break;
  }
  if (!ip4 && !ip6) {
    // libcni returns a plain error here; a plugin's skel reports any error that
    // is not a *types.Error as ErrInternal (999), and so do we.
    throw new CniError(ErrorCode.Internal, "cannot convert: no valid IP addresses");
  }
  for (const route of r.routes ?? []) {
    const target = ipFamily(route.dst) === 4 ? ip4 : ip6;
    if (!target) continue;
    const copy: Route = { dst: route.dst };
    if (route.gw) copy.gw = route.gw;
    target.routes = [...(target.routes ?? []), copy];
  }
  return build020(to, { ip4, ip6, dns: copyDns(r.dns) });
}

/** types040 convertFrom02x. */
function from020To040(r: Result020, to: string): Result040 {
  const ips: IPConfig040[] = [];
  const routes: Route[] = [];
  for (const [ip, version] of [
    [r.ip4, "4"],
    [r.ip6, "6"],
  ] as const) {
    if (!ip) continue;
    ips.push(ipConfig040({ address: ip.ip, gateway: ip.gateway }, version));
    for (const route of (ip.routes ?? []) as Route[]) routes.push(buildRoute(route));
  }
  return build040(to, {
    ips: nonEmpty(ips),
    routes: nonEmpty(routes),
    dns: copyDns(r.dns),
  });
}

/**
 * Converts a result to another version, following libcni's converters for
 * every pair of supported versions. Throws CniError 1 for a version we do not
 * speak, and 999 (libcni's plain error, as skel reports it) when a result
 * without any IP is asked for as 0.1.0/0.2.0.
 */
export function convertResult(result: AnyResult, to: CniVersion): AnyResult {
  const from = familyOf(result);
  if (!isSupportedVersion(to)) throw unsupportedVersion(to);
  const target = resultFamily(to);
  switch (`${from}>${target}`) {
    case "1>1":
      return from100To100(result as Result100, to);
    case "1>0.3":
      return from100To040(result as Result100, to);
    case "1>0.1":
      // libcni goes through 0.4.0, so the "4"/"6" choice is by address family here.
      return from040To020(from100To040(result as Result100, "0.4.0"), to);
    case "0.3>1":
      return from040To100(result as Result040, to);
    case "0.3>0.3":
      return from040To040(result as Result040, to);
    case "0.3>0.1":
      return from040To020(result as Result040, to);
    case "0.1>1":
      return from040To100(from020To040(result as Result020, "0.4.0"), to);
    case "0.1>0.3":
      return from020To040(result as Result020, to);
    default:
      return from020To020(result as Result020, to);
  }
}

/**
 * Any result in the 1.x shape, the one the driver works with. A 1.0.0 or
 * 1.1.0 result keeps its version; an older one becomes 1.1.0, the version
 * libcni's types100.GetResult converts to. Callers convert back to the version
 * they were asked for when they answer.
 */
export function toResult100(result: AnyResult): Result100 {
  const from = familyOf(result);
  const to = from === "1" ? (result.cniVersion as CniVersion) : LATEST_VERSION;
  return convertResult(result, to) as Result100;
}
