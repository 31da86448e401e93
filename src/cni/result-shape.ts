/**
 * CNI results as values in the shape Go's types give them (libcni's
 * pkg/types/100, 040 and 020): each object's keys in its struct's field order,
 * with Go's omitempty already applied to the data.
 *
 * Reading a result (result-read.ts) and converting one (result-convert.ts)
 * both build results, and a result read from a plugin must be the very data a
 * conversion gives, so both build them here. Which version family a result is,
 * needed by those two and by writing (result-json.ts), is told here too.
 *
 * Results are plain data: nothing here mutates its input, and every function
 * returns fresh objects.
 */

import { ipFamily } from "../net/ip.js";
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
  isSupportedVersion,
  type ResultFamily,
  resultFamily,
  SUPPORTED_VERSIONS,
} from "./versions.js";

// ---- which shape a result has ----------------------------------------------------

export function familyOf(result: AnyResult): ResultFamily {
  const v = result.cniVersion;
  if (!isSupportedVersion(v)) throw unsupportedVersion(v);
  return resultFamily(v);
}

export function unsupportedVersion(v: unknown): CniError {
  // libcni's convert.Create words it this way; the code is the spec's "incompatible version".
  return new CniError(
    ErrorCode.IncompatibleVersion,
    `unsupported CNI result version ${JSON.stringify(v)}`,
    `supported versions ${SUPPORTED_VERSIONS.join(", ")}`,
  );
}

// ---- Go's omitempty ----------------------------------------------------------------

/** The items, or undefined when there are none (an empty slice omitempty leaves out). */
export function nonEmpty<T>(items: T[] | undefined): T[] | undefined {
  return items && items.length > 0 ? items : undefined;
}

/**
 * Sets the optional fields whose value is present, in the order given, so the
 * object's own key order is Go's field order and Go's omitempty holds in the data.
 */
export function withOptional<T extends object>(base: T, fields: Partial<T>): T {
  const out = base as Record<string, unknown>;
  for (const [k, v] of Object.entries(fields)) {
    if (v === undefined || v === "" || (Array.isArray(v) && v.length === 0)) continue;
    out[k] = v;
  }
  return base;
}

// ---- building (data in Go's field order, omitempty applied) ------------------------

export function build100(
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

export function build040(
  cniVersion: string,
  parts: { interfaces?: Interface040[]; ips?: IPConfig040[]; routes?: Route[]; dns?: DNS },
): Result040 {
  // dns is a plain struct in types040: Go always writes it, "{}" when empty.
  const out = { cniVersion } as Result040;
  withOptional(out, { interfaces: parts.interfaces, ips: parts.ips, routes: parts.routes });
  out.dns = parts.dns ?? {};
  return out;
}

export function build020(
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

/** types.Route, one type in every version. */
export function buildRoute(r: Route): Route {
  // Plain ints in Go (omitempty drops 0); table and scope are pointers, so 0 stays.
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

/** The 1.x interface. */
export function buildInterface(i: Interface): Interface {
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
export function interface040(i: Interface | Interface040): Interface040 {
  return withOptional<Interface040>({ name: i.name }, { mac: i.mac, sandbox: i.sandbox });
}

export function ipConfig100(ip: IPConfig | IPConfig040): IPConfig {
  const out: IPConfig = { address: ip.address };
  if (ip.gateway) out.gateway = ip.gateway;
  if (ip.interface !== undefined) out.interface = ip.interface;
  return out;
}

export function ipConfig040(ip: IPConfig, version: "4" | "6"): IPConfig040 {
  return { version, ...ipConfig100(ip) };
}

/** "4" or "6" as types100 convertIPConfigTo040 decides it: "4" when Go's To4 succeeds. */
export function versionOf(address: string): "4" | "6" {
  return ipFamily(address) === 4 ? "4" : "6";
}
