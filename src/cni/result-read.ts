/**
 * Reading a CNI result of any version (cni-spec §3), as a plugin prints it or
 * a cache keeps it, the way libcni's decoders read it: checked field by field,
 * unknown keys dropped, addresses in the text Go writes.
 *
 * It stands apart from converting (result-convert.ts) and writing
 * (result-json.ts) because it alone trusts nothing: its input is whatever a
 * plugin or a file holds, and each failure must name its field as a CNI error.
 * What it gives back is built by result-shape.ts, as converted results are.
 */

import { messageOf } from "../common/errors.js";
import { isObject, type JsonObject } from "../common/json.js";
import { canonicalCidr, canonicalIp } from "../net/ip.js";
import { CniError, ErrorCode } from "./errors.js";
import {
  build020,
  build040,
  build100,
  buildInterface,
  buildRoute,
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
  Interface,
  IPConfig,
  IPConfig020,
  IPConfig040,
  Result020,
  Result040,
  Result100,
  Route,
} from "./types.js";
import { type CniVersion, isSupportedVersion, resultFamily } from "./versions.js";

// ---- fields, as Go's decoder takes them ----------------------------------------------

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

/** A JSON object where Go's decoder needs one: an entry of a list. */
function requiredObject(v: unknown, path: string): JsonObject {
  const o = optObject(v, path);
  if (!o) throw bad(path, "must be an object");
  return o;
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

// ---- the parts of a result -------------------------------------------------------------

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
  const o = requiredObject(v, path);
  return buildRoute({
    dst: requiredCidr(o.dst, `${path}.dst`),
    gw: optIp(o.gw, `${path}.gw`),
    mtu: optInt(o.mtu, `${path}.mtu`),
    advmss: optInt(o.advmss, `${path}.advmss`),
    priority: optInt(o.priority, `${path}.priority`),
    table: optInt(o.table, `${path}.table`),
    scope: optInt(o.scope, `${path}.scope`),
  });
}

function readRoutes(v: unknown, path: string): Route[] | undefined {
  return nonEmpty(optArray(v, path)?.map((r, i) => readRoute(r, `${path}[${i}]`)));
}

function readInterface(v: unknown, path: string, full: boolean): Interface {
  const o = requiredObject(v, path);
  const name = optString(o.name, `${path}.name`) ?? "";
  const mac = optString(o.mac, `${path}.mac`);
  if (!full) {
    // 0.3.x/0.4.0 interfaces have no mtu, socketPath or pciID: Go ignores them.
    return interface040({ name, mac, sandbox: optString(o.sandbox, `${path}.sandbox`) });
  }
  return buildInterface({
    name,
    mac,
    mtu: optInt(o.mtu, `${path}.mtu`),
    sandbox: optString(o.sandbox, `${path}.sandbox`),
    socketPath: optString(o.socketPath, `${path}.socketPath`),
    pciID: optString(o.pciID, `${path}.pciID`),
  });
}

function readInterfaces(v: unknown, path: string, full: boolean): Interface[] | undefined {
  return nonEmpty(optArray(v, path)?.map((x, i) => readInterface(x, `${path}[${i}]`, full)));
}

function readIpConfig(o: JsonObject, path: string): IPConfig {
  return ipConfig100({
    address: requiredCidr(o.address, `${path}.address`),
    gateway: optIp(o.gateway, `${path}.gateway`),
    interface: optInt(o.interface, `${path}.interface`),
  });
}

function readIpConfig040(o: JsonObject, path: string): IPConfig040 {
  const base = readIpConfig(o, path);
  const version = optString(o.version, `${path}.version`);
  if (version !== undefined && version !== "" && version !== "4" && version !== "6") {
    throw bad(`${path}.version`, `must be "4" or "6", not ${JSON.stringify(version)}`);
  }
  // A missing version is taken from the address, which is what every reader of
  // the 1.x form (where libcni drops the field) sees anyway.
  return ipConfig040(base, version ? (version as "4" | "6") : versionOf(base.address));
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

// ---- a whole result, by the family its version names ------------------------------------

/**
 * What 0.3.x and later results hold alike: interfaces, ips, routes and dns.
 * `full` reads the 1.x interface; `readIp` an entry of ips as its version has it.
 */
function readParts<T>(
  o: JsonObject,
  full: boolean,
  readIp: (ip: JsonObject, path: string) => T,
): { interfaces?: Interface[]; ips?: T[]; routes?: Route[]; dns: DNS } {
  // ips are read first: that order decides which field a result bad in both is reported by.
  const ips = optArray(o.ips, "ips")?.map((x, i) =>
    readIp(requiredObject(x, `ips[${i}]`), `ips[${i}]`),
  );
  return {
    interfaces: readInterfaces(o.interfaces, "interfaces", full),
    ips,
    routes: readRoutes(o.routes, "routes"),
    dns: readDns(o.dns, "dns"),
  };
}

function readResult100(o: JsonObject, cniVersion: string): Result100 {
  return build100(cniVersion, readParts(o, true, readIpConfig));
}

function readResult040(o: JsonObject, cniVersion: string): Result040 {
  return build040(cniVersion, readParts(o, false, readIpConfig040));
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
