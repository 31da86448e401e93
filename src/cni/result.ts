/**
 * CNI results: reading them in any version, converting between every pair of
 * versions, and writing the JSON a Go plugin prints (cni-spec §3).
 *
 * The rules are libcni's (pkg/types/100, 040, 020 and internal/convert):
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
 * Results are plain data. Nothing here mutates its input; every function
 * returns fresh objects.
 */

import { messageOf } from "../common/errors.js";
import { isObject, type JsonObject } from "../common/json.js";
import { canonicalCidr, canonicalIp, ipFamily } from "../net/ip.js";
import { CniError, ErrorCode } from "./errors.js";
import type {
  AnyResult,
  DNS,
  Interface,
  Interface040,
  IPConfig,
  IPConfig020,
  IPConfig040,
  Result020,
  Result040,
  Result100,
  Route,
} from "./types.js";
import {
  type CniVersion,
  isSupportedVersion,
  LATEST_VERSION,
  type ResultFamily,
  resultFamily,
  SUPPORTED_VERSIONS,
} from "./versions.js";

// ---- which shape a result has ----------------------------------------------------

function familyOf(result: AnyResult): ResultFamily {
  const v = result.cniVersion;
  if (!isSupportedVersion(v)) throw unsupportedVersion(v);
  return resultFamily(v);
}

function unsupportedVersion(v: unknown): CniError {
  // libcni's convert.Create words it this way; the code is the spec's "incompatible version".
  return new CniError(
    ErrorCode.IncompatibleVersion,
    `unsupported CNI result version ${JSON.stringify(v)}`,
    `supported versions ${SUPPORTED_VERSIONS.join(", ")}`,
  );
}

// ---- reading ---------------------------------------------------------------------

/** A decoding failure naming the field, as a CNI error with code 6. */
function bad(path: string, problem: string): CniError {
  return new CniError(ErrorCode.DecodingFailure, `failed to decode result: ${path}: ${problem}`);
}

/** A JSON object, or undefined for missing/null (Go leaves the zero value). */
function optObject(v: unknown, path: string): JsonObject | undefined {
  if (v === undefined || v === null) return undefined;
  if (!isObject(v)) throw bad(path, "must be an object");
  return v as JsonObject;
}

function optArray(v: unknown, path: string): unknown[] | undefined {
  if (v === undefined || v === null) return undefined;
  if (!Array.isArray(v)) throw bad(path, "must be an array");
  return v;
}

function optString(v: unknown, path: string): string | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "string") throw bad(path, "must be a string");
  return v;
}

function optInt(v: unknown, path: string): number | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "number" || !Number.isSafeInteger(v)) throw bad(path, "must be an integer");
  return v;
}

function optStrings(v: unknown, path: string): string[] | undefined {
  const arr = optArray(v, path);
  return arr?.map((s, i) => optString(s, `${path}[${i}]`) ?? "");
}

function requiredCidr(v: unknown, path: string): string {
  const text = optString(v, path);
  if (text === undefined) throw bad(path, "missing");
  const canonical = canonicalCidr(text);
  if (canonical === undefined) throw bad(path, `invalid CIDR address: ${text}`);
  return canonical;
}

/** Go's net.IP: "" is no address; anything else must parse. */
function optIp(v: unknown, path: string): string | undefined {
  const text = optString(v, path);
  if (!text) return undefined;
  const canonical = canonicalIp(text);
  if (canonical === undefined) throw bad(path, `invalid IP address: ${text}`);
  return canonical;
}

function nonEmpty<T>(items: T[] | undefined): T[] | undefined {
  return items && items.length > 0 ? items : undefined;
}

/**
 * Sets the optional fields whose value is present, in the order given, so the
 * object's own key order is Go's field order and Go's omitempty holds in the data.
 */
function withOptional<T extends object>(base: T, fields: Partial<T>): T {
  const out = base as Record<string, unknown>;
  for (const [k, v] of Object.entries(fields)) {
    if (v === undefined || v === "" || (Array.isArray(v) && v.length === 0)) continue;
    out[k] = v;
  }
  return base;
}

function readDns(v: unknown, path: string): DNS {
  const o = optObject(v, path) ?? {};
  return withOptional<DNS>(
    {},
    {
      nameservers: optStrings(o.nameservers, `${path}.nameservers`),
      domain: optString(o.domain, `${path}.domain`),
      search: optStrings(o.search, `${path}.search`),
      options: optStrings(o.options, `${path}.options`),
    },
  );
}

function readRoute(v: unknown, path: string): Route {
  const o = optObject(v, path);
  if (!o) throw bad(path, "must be an object");
  const zeroIsUnset = (n: number | undefined) => (n === 0 ? undefined : n);
  const route = withOptional<Route>(
    { dst: requiredCidr(o.dst, `${path}.dst`) },
    {
      gw: optIp(o.gw, `${path}.gw`),
      // Plain ints in Go (omitempty drops 0); table and scope are pointers, so 0 stays.
      mtu: zeroIsUnset(optInt(o.mtu, `${path}.mtu`)),
      advmss: zeroIsUnset(optInt(o.advmss, `${path}.advmss`)),
      priority: zeroIsUnset(optInt(o.priority, `${path}.priority`)),
    },
  );
  const table = optInt(o.table, `${path}.table`);
  if (table !== undefined) route.table = table;
  const scope = optInt(o.scope, `${path}.scope`);
  if (scope !== undefined) route.scope = scope;
  return route;
}

function readRoutes(v: unknown, path: string): Route[] | undefined {
  return nonEmpty(optArray(v, path)?.map((r, i) => readRoute(r, `${path}[${i}]`)));
}

function readInterface(v: unknown, path: string, full: boolean): Interface {
  const o = optObject(v, path);
  if (!o) throw bad(path, "must be an object");
  const name = optString(o.name, `${path}.name`) ?? "";
  const mac = optString(o.mac, `${path}.mac`);
  if (!full) {
    // 0.3.x/0.4.0 interfaces have no mtu, socketPath or pciID: Go ignores them.
    return withOptional<Interface>(
      { name },
      { mac, sandbox: optString(o.sandbox, `${path}.sandbox`) },
    );
  }
  const mtu = optInt(o.mtu, `${path}.mtu`);
  return withOptional<Interface>(
    { name },
    {
      mac,
      mtu: mtu === 0 ? undefined : mtu,
      sandbox: optString(o.sandbox, `${path}.sandbox`),
      socketPath: optString(o.socketPath, `${path}.socketPath`),
      pciID: optString(o.pciID, `${path}.pciID`),
    },
  );
}

function readInterfaces(v: unknown, path: string, full: boolean): Interface[] | undefined {
  return nonEmpty(optArray(v, path)?.map((x, i) => readInterface(x, `${path}[${i}]`, full)));
}

function readIpConfig(o: JsonObject, path: string): IPConfig {
  const ipc: IPConfig = { address: requiredCidr(o.address, `${path}.address`) };
  const gateway = optIp(o.gateway, `${path}.gateway`);
  if (gateway !== undefined) ipc.gateway = gateway;
  const index = optInt(o.interface, `${path}.interface`);
  if (index !== undefined) ipc.interface = index;
  return ipc;
}

function readResult100(o: JsonObject, cniVersion: string): Result100 {
  const ips = optArray(o.ips, "ips")?.map((x, i) => {
    const ip = optObject(x, `ips[${i}]`);
    if (!ip) throw bad(`ips[${i}]`, "must be an object");
    return readIpConfig(ip, `ips[${i}]`);
  });
  return build100(cniVersion, {
    interfaces: readInterfaces(o.interfaces, "interfaces", true),
    ips,
    routes: readRoutes(o.routes, "routes"),
    dns: readDns(o.dns, "dns"),
  });
}

function readResult040(o: JsonObject, cniVersion: string): Result040 {
  const ips = optArray(o.ips, "ips")?.map((x, i): IPConfig040 => {
    const path = `ips[${i}]`;
    const ip = optObject(x, path);
    if (!ip) throw bad(path, "must be an object");
    const base = readIpConfig(ip, path);
    const version = optString(ip.version, `${path}.version`);
    if (version !== undefined && version !== "" && version !== "4" && version !== "6") {
      throw bad(`${path}.version`, `must be "4" or "6", not ${JSON.stringify(version)}`);
    }
    // A missing version is taken from the address, which is what every reader of
    // the 1.x form (where libcni drops the field) sees anyway.
    return ipConfig040(base, version ? (version as "4" | "6") : versionOf(base.address));
  });
  return build040(cniVersion, {
    interfaces: readInterfaces(o.interfaces, "interfaces", false),
    ips,
    routes: readRoutes(o.routes, "routes"),
    dns: readDns(o.dns, "dns"),
  });
}

function readIpConfig020(v: unknown, path: string): IPConfig020 | undefined {
  const o = optObject(v, path);
  if (!o) return undefined;
  return withOptional<IPConfig020>(
    { ip: requiredCidr(o.ip, `${path}.ip`) },
    {
      gateway: optIp(o.gateway, `${path}.gateway`),
      routes: readRoutes(o.routes, `${path}.routes`),
    },
  );
}

function readResult020(o: JsonObject, cniVersion: string): Result020 {
  return build020(cniVersion, {
    ip4: readIpConfig020(o.ip4, "ip4"),
    ip6: readIpConfig020(o.ip6, "ip6"),
    dns: readDns(o.dns, "dns"),
  });
}

/**
 * Reads a result (an object, or its JSON text) as printed by a plugin or kept
 * in a cache, in the shape its `cniVersion` names. A result without
 * `cniVersion` is read as `defaultVersion`: libcni reads a cached or printed
 * result without one as 0.1.0 (create.DecodeVersion), and a prevResult without
 * one as the config's version (version.ParsePrevResult), so pass that there.
 * Unknown keys are dropped, as Go's decoder drops them. Addresses come back in
 * the text Go writes ("2001:db8::5/64").
 *
 * Throws CniError 6 naming the field for anything that is not a result, and 1
 * for a version we do not speak.
 */
export function parseResult(value: unknown, defaultVersion: CniVersion = "0.1.0"): AnyResult {
  let v = value;
  if (typeof v === "string") {
    try {
      v = JSON.parse(v);
    } catch (e) {
      throw new CniError(ErrorCode.DecodingFailure, `failed to decode result: ${messageOf(e)}`);
    }
  }
  if (!isObject(v)) {
    throw new CniError(ErrorCode.DecodingFailure, "failed to decode result: not a JSON object");
  }
  const o = v as JsonObject;
  const version = optString(o.cniVersion, "cniVersion") || defaultVersion;
  if (!isSupportedVersion(version)) throw unsupportedVersion(version);
  switch (resultFamily(version)) {
    case "1":
      return readResult100(o, version);
    case "0.3":
      return readResult040(o, version);
    case "0.1":
      return readResult020(o, version);
  }
}

// ---- building (data in Go's field order, omitempty applied) ------------------------

function build100(
  cniVersion: string,
  parts: { interfaces?: Interface[]; ips?: IPConfig[]; routes?: Route[]; dns?: DNS },
): Result100 {
  const out = withOptional<Result100>(
    { cniVersion },
    { interfaces: parts.interfaces, ips: parts.ips, routes: parts.routes },
  );
  // 1.x leaves an empty dns out entirely (libcni ≥ 1.2 Result.MarshalJSON).
  if (parts.dns && !dnsIsEmpty(parts.dns)) out.dns = parts.dns;
  return out;
}

function build040(
  cniVersion: string,
  parts: { interfaces?: Interface040[]; ips?: IPConfig040[]; routes?: Route[]; dns?: DNS },
): Result040 {
  // dns is a plain struct in types040: Go always writes it, "{}" when empty.
  const out = { cniVersion } as Result040;
  withOptional(out, { interfaces: parts.interfaces, ips: parts.ips, routes: parts.routes });
  out.dns = parts.dns ?? {};
  return out;
}

function build020(
  cniVersion: string,
  parts: { ip4?: IPConfig020; ip6?: IPConfig020; dns?: DNS },
): Result020 {
  const out = withOptional<Result020>({ cniVersion }, { ip4: parts.ip4, ip6: parts.ip6 });
  // Like 0.4.0, types020 writes dns always.
  out.dns = parts.dns ?? {};
  return out;
}

function dnsIsEmpty(dns: DNS): boolean {
  return !dns.nameservers?.length && !dns.domain && !dns.search?.length && !dns.options?.length;
}

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

function copyRoute(r: Route): Route {
  const out = withOptional<Route>(
    { dst: r.dst },
    {
      gw: r.gw,
      mtu: r.mtu || undefined,
      advmss: r.advmss || undefined,
      priority: r.priority || undefined,
    },
  );
  if (r.table !== undefined) out.table = r.table;
  if (r.scope !== undefined) out.scope = r.scope;
  return out;
}

function copyRoutes(routes: Route[] | undefined): Route[] | undefined {
  return nonEmpty(routes?.map(copyRoute));
}

function copyInterface(i: Interface): Interface {
  return withOptional<Interface>(
    { name: i.name },
    {
      mac: i.mac,
      mtu: i.mtu || undefined,
      sandbox: i.sandbox,
      socketPath: i.socketPath,
      pciID: i.pciID,
    },
  );
}

/** The 0.3.x/0.4.0 interface: name, mac and sandbox only (types100 convertInterfaceTo040). */
function interface040(i: Interface | Interface040): Interface040 {
  return withOptional<Interface040>({ name: i.name }, { mac: i.mac, sandbox: i.sandbox });
}

function ipConfig100(ip: IPConfig | IPConfig040): IPConfig {
  const out: IPConfig = { address: ip.address };
  if (ip.gateway) out.gateway = ip.gateway;
  if (ip.interface !== undefined) out.interface = ip.interface;
  return out;
}

function ipConfig040(ip: IPConfig, version: "4" | "6"): IPConfig040 {
  const out: IPConfig040 = { version, address: ip.address };
  if (ip.gateway) out.gateway = ip.gateway;
  if (ip.interface !== undefined) out.interface = ip.interface;
  return out;
}

/** "4" or "6" as types100 convertIPConfigTo040 decides it: "4" when Go's To4 succeeds. */
function versionOf(address: string): "4" | "6" {
  return ipFamily(address) === 4 ? "4" : "6";
}

function copyIpConfig020(ip: IPConfig020 | undefined): IPConfig020 | undefined {
  if (!ip) return undefined;
  return withOptional<IPConfig020>(
    { ip: ip.ip },
    { gateway: ip.gateway, routes: copyRoutes(ip.routes as Route[] | undefined) },
  );
}

// ---- the converters, one per pair of shapes ------------------------------------------

function from100To100(r: Result100, to: string): Result100 {
  return build100(to, {
    interfaces: r.interfaces?.map(copyInterface),
    ips: r.ips?.map(ipConfig100),
    routes: copyRoutes(r.routes),
    dns: copyDns(r.dns),
  });
}

function from040To040(r: Result040, to: string): Result040 {
  return build040(to, {
    interfaces: r.interfaces?.map(interface040),
    ips: r.ips?.map((ip) => ipConfig040(ip, ip.version)),
    routes: copyRoutes(r.routes),
    dns: copyDns(r.dns),
  });
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
  return build040(to, {
    interfaces: r.interfaces?.map(interface040),
    ips: r.ips?.map((ip) => ipConfig040(ip, versionOf(ip.address))),
    routes: copyRoutes(r.routes),
    dns: copyDns(r.dns),
  });
}

/** types100 convertFrom04x. */
function from040To100(r: Result040, to: string): Result100 {
  return build100(to, {
    interfaces: r.interfaces?.map(interface040),
    ips: r.ips?.map(ipConfig100),
    routes: copyRoutes(r.routes),
    dns: copyDns(r.dns),
  });
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

function ipConfig020(ip: IPConfig040): IPConfig020 {
  const out: IPConfig020 = { ip: ip.address };
  if (ip.gateway) out.gateway = ip.gateway;
  return out;
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
    const entry: IPConfig040 = { version, address: ip.ip };
    if (ip.gateway) entry.gateway = ip.gateway;
    ips.push(entry);
    for (const route of (ip.routes ?? []) as Route[]) routes.push(copyRoute(route));
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

// ---- writing -------------------------------------------------------------------------

type Ordered = Record<string, unknown>;

/** Fields in order, leaving out the undefined ones (the caller's omitempty). */
function ordered(fields: ReadonlyArray<readonly [string, unknown]>): Ordered {
  const out: Ordered = {};
  for (const [k, v] of fields) if (v !== undefined) out[k] = v;
  return out;
}

function nonEmptyArray<T>(items: T[] | undefined): T[] | undefined {
  return items && items.length > 0 ? items : undefined;
}

function text(s: string | undefined): string | undefined {
  return s ? s : undefined;
}

function int(n: number | undefined): number | undefined {
  return n ? n : undefined;
}

/** Go's own text for an address when it parses; otherwise as it is. */
function cidrText(s: string): string {
  return canonicalCidr(s) ?? s;
}

function ipText(s: string | undefined): string | undefined {
  if (!s) return undefined;
  return canonicalIp(s) ?? s;
}

/** types.Route's JSON: dst, gw, mtu, advmss, priority, table, scope. */
function routeJson(r: Route): Ordered {
  return ordered([
    ["dst", cidrText(r.dst)],
    ["gw", ipText(r.gw)],
    ["mtu", int(r.mtu)],
    ["advmss", int(r.advmss)],
    ["priority", int(r.priority)],
    ["table", r.table],
    ["scope", r.scope],
  ]);
}

/** types.DNS's JSON: nameservers, domain, search, options. */
function dnsJson(d: DNS | undefined): Ordered {
  return ordered([
    ["nameservers", nonEmptyArray(d?.nameservers)],
    ["domain", text(d?.domain)],
    ["search", nonEmptyArray(d?.search)],
    ["options", nonEmptyArray(d?.options)],
  ]);
}

function routesJson(routes: Route[] | undefined): Ordered[] | undefined {
  return nonEmptyArray(routes?.map(routeJson));
}

function json100(r: Result100): Ordered {
  // types100 field order: cniVersion, interfaces, ips, routes, dns; Interface:
  // name, mac, mtu, sandbox, socketPath, pciID; ipConfig: interface, address, gateway.
  const dns = dnsJson(r.dns);
  const struct = ordered([
    ["cniVersion", r.cniVersion],
    [
      "interfaces",
      nonEmptyArray(
        r.interfaces?.map((i) =>
          ordered([
            ["name", i.name ?? ""],
            ["mac", text(i.mac)],
            ["mtu", int(i.mtu)],
            ["sandbox", text(i.sandbox)],
            ["socketPath", text(i.socketPath)],
            ["pciID", text(i.pciID)],
          ]),
        ),
      ),
    ],
    [
      "ips",
      nonEmptyArray(
        r.ips?.map((ip) =>
          ordered([
            ["interface", ip.interface],
            ["address", cidrText(ip.address)],
            ["gateway", ipText(ip.gateway)],
          ]),
        ),
      ),
    ],
    ["routes", routesJson(r.routes)],
    ["dns", Object.keys(dns).length > 0 ? dns : undefined],
  ]);
  // libcni ≥ 1.2 (the first to speak 1.1.0) writes a 1.x result by marshalling
  // the struct, decoding it into a map[string]interface{} to drop an empty dns,
  // and marshalling the map: every object therefore comes out with sorted keys.
  return sortKeysDeep(struct) as Ordered;
}

function json040(r: Result040): Ordered {
  // types040 field order; ipConfig is version, interface, address, gateway.
  return ordered([
    ["cniVersion", r.cniVersion],
    [
      "interfaces",
      nonEmptyArray(
        r.interfaces?.map((i) =>
          ordered([
            ["name", i.name ?? ""],
            ["mac", text(i.mac)],
            ["sandbox", text(i.sandbox)],
          ]),
        ),
      ),
    ],
    [
      "ips",
      nonEmptyArray(
        r.ips?.map((ip) =>
          ordered([
            ["version", ip.version ?? ""],
            ["interface", ip.interface],
            ["address", cidrText(ip.address)],
            ["gateway", ipText(ip.gateway)],
          ]),
        ),
      ),
    ],
    ["routes", routesJson(r.routes)],
    ["dns", dnsJson(r.dns)],
  ]);
}

function ipConfig020Json(ip: IPConfig020 | undefined): Ordered | undefined {
  if (!ip) return undefined;
  return ordered([
    ["ip", cidrText(ip.ip)],
    ["gateway", ipText(ip.gateway)],
    ["routes", routesJson(ip.routes as Route[] | undefined)],
  ]);
}

function json020(r: Result020): Ordered {
  return ordered([
    ["cniVersion", r.cniVersion],
    ["ip4", ipConfig020Json(r.ip4)],
    ["ip6", ipConfig020Json(r.ip6)],
    ["dns", dnsJson(r.dns)],
  ]);
}

function sortKeysDeep(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeysDeep);
  if (value === null || typeof value !== "object") return value;
  const obj = value as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  // Keys here are ASCII, where UTF-16 order is Go's byte order.
  for (const k of Object.keys(obj).sort()) out[k] = sortKeysDeep(obj[k]);
  return out;
}

/**
 * The result as the object Go writes for its version, keys in Go's order:
 * 1.x sorted at every level, with empty arrays and an empty dns left out;
 * 0.3.x/0.4.0 and 0.1.0/0.2.0 in struct order, `dns` always present.
 */
export function resultToJSON(result: AnyResult): Record<string, unknown> {
  switch (familyOf(result)) {
    case "1":
      return json100(result as Result100);
    case "0.3":
      return json040(result as Result040);
    case "0.1":
      return json020(result as Result020);
  }
}

export interface FormatOptions {
  /**
   * Indent by four spaces, as a plugin prints its result (types.Result.Print
   * uses json.MarshalIndent). Default true; false gives json.Marshal's form.
   */
  indent?: boolean;
}

/** Go's encoding/json escapes these inside strings; JSON.stringify does not. */
const GO_ESCAPED = /[<>&\u2028\u2029]/g;

/** The exact text a Go plugin prints for this result in its version. */
export function formatResult(result: AnyResult, options: FormatOptions = {}): string {
  const indent = options.indent ?? true;
  const textOut = JSON.stringify(resultToJSON(result), null, indent ? 4 : undefined);
  return textOut.replace(
    GO_ESCAPED,
    (c) => `\\u${(c.codePointAt(0) as number).toString(16).padStart(4, "0")}`,
  );
}

// ---- small helpers for the driver ------------------------------------------------------

/**
 * The IPs of the container interface `ifName`, by portmap's rule: an ip
 * counts unless its `interface` points at an existing entry that is another
 * interface or has no sandbox (a host-side link).
 */
export function containerIps(result: Result100, ifName: string): IPConfig[] {
  const interfaces = result.interfaces ?? [];
  return (result.ips ?? [])
    .filter((ip) => {
      const idx = ip.interface;
      if (idx === undefined || idx < 0 || idx >= interfaces.length) return true;
      const intf = interfaces[idx] as Interface;
      return intf.name === ifName && !!intf.sandbox;
    })
    .map(ipConfig100);
}

/** Index of the interface named `ifName` with a sandbox (the container side); -1 when none. */
export function containerInterfaceIndex(result: Result100, ifName: string): number {
  return (result.interfaces ?? []).findIndex((i) => i.name === ifName && !!i.sandbox);
}
