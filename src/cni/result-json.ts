/**
 * Writing a CNI result as the JSON a Go plugin prints for its version, to
 * the byte: keys in the order libcni's types marshal them (sorted at every
 * level for 1.x), Go's omitempty, addresses in Go's text, and the escapes
 * Go's encoding/json adds inside strings.
 *
 * It stands apart from reading (result-read.ts) and converting
 * (result-convert.ts) because none of this is about what a result holds, only
 * about the text: a runtime or a cache that compares bytes must get exactly
 * what a Go plugin would have written.
 */

import { canonicalCidr, canonicalIp } from "../net/ip.js";
import { familyOf, nonEmpty } from "./result-shape.js";
import type {
  AnyResult,
  DNS,
  Interface,
  Interface040,
  IPConfig,
  IPConfig020,
  Result020,
  Result040,
  Result100,
  Route,
} from "./types.js";

type Ordered = Record<string, unknown>;
type Fields = ReadonlyArray<readonly [string, unknown]>;

/** Fields in order, leaving out the undefined ones (the caller's omitempty). */
function ordered(fields: Fields): Ordered {
  const out: Ordered = {};
  for (const [k, v] of fields) if (v !== undefined) out[k] = v;
  return out;
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
    ["nameservers", nonEmpty(d?.nameservers)],
    ["domain", text(d?.domain)],
    ["search", nonEmpty(d?.search)],
    ["options", nonEmpty(d?.options)],
  ]);
}

function routesJson(routes: Route[] | undefined): Ordered[] | undefined {
  return nonEmpty(routes?.map(routeJson));
}

/** types100 Interface's JSON: name, mac, mtu, sandbox, socketPath, pciID. */
function interfaceJson(i: Interface): Ordered {
  return ordered([
    ["name", i.name ?? ""],
    ["mac", text(i.mac)],
    ["mtu", int(i.mtu)],
    ["sandbox", text(i.sandbox)],
    ["socketPath", text(i.socketPath)],
    ["pciID", text(i.pciID)],
  ]);
}

/** types040 Interface's JSON: name, mac, sandbox. */
function interface040Json(i: Interface040): Ordered {
  return ordered([
    ["name", i.name ?? ""],
    ["mac", text(i.mac)],
    ["sandbox", text(i.sandbox)],
  ]);
}

/** The fields both versions of ipConfig write, in their order: interface, address, gateway. */
function ipConfigFields(ip: IPConfig): Fields {
  return [
    ["interface", ip.interface],
    ["address", cidrText(ip.address)],
    ["gateway", ipText(ip.gateway)],
  ];
}

function json100(r: Result100): Ordered {
  const dns = dnsJson(r.dns);
  const struct = ordered([
    ["cniVersion", r.cniVersion],
    ["interfaces", nonEmpty(r.interfaces?.map(interfaceJson))],
    ["ips", nonEmpty(r.ips?.map((ip) => ordered(ipConfigFields(ip))))],
    ["routes", routesJson(r.routes)],
    ["dns", Object.keys(dns).length > 0 ? dns : undefined],
  ]);
  // libcni ≥ 1.2 (the first to speak 1.1.0) writes a 1.x result by marshalling
  // the struct, decoding it into a map[string]interface{} to drop an empty dns,
  // and marshalling the map: every object therefore comes out with sorted keys.
  return sortKeysDeep(struct) as Ordered;
}

function json040(r: Result040): Ordered {
  // types040 field order; its ipConfig puts version before the fields 1.x has.
  return ordered([
    ["cniVersion", r.cniVersion],
    ["interfaces", nonEmpty(r.interfaces?.map(interface040Json))],
    [
      "ips",
      nonEmpty(r.ips?.map((ip) => ordered([["version", ip.version ?? ""], ...ipConfigFields(ip)]))),
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
// Exported for its tests only (unit/result.test.ts).
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
