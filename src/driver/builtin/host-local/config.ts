/**
 * What host-local reads from its stdin and CNI_ARGS (allocator.LoadIPAMConfig):
 * the range sets, the addresses the runtime asks for, where the leases live.
 * Every failure is a plain Error, as host-local's are (the plugin answers 999).
 */
import { loadArgs, parseCniArgs } from "../../../cni/args.js";
import type { CniError } from "../../../cni/errors.js";
import { goField } from "../../../cni/go-json.js";
import { versionAtLeast } from "../../../cni/versions.js";
import { isObject, type JsonObject } from "../../../common/json.js";
import { bigIntToIp, type IpFamily, ipToBigInt, parseCidr, parseIp } from "../../../net/ip.js";
import { type RangeSet, rangeSetsOf, requireNoOverlaps } from "./ranges.js";

/** host-local's default when the config names no dataDir. */
const DEFAULT_DATA_DIR = "/var/lib/cni/networks";

/** Where an `ipam` section's leases live: its dataDir, else host-local's default. */
export function dataDirOf(ipam: Record<string, unknown>): string {
  const dir = goField(ipam, "dataDir");
  return typeof dir === "string" && dir !== "" ? dir : DEFAULT_DATA_DIR;
}

/** An entry of `args.cni.ips` or runtimeConfig `ips` that is "": Go's nil net.IP, refused after CNI_ARGS. */
const NIL_IP = "nil";

export interface RequestedIp {
  family: IpFamily;
  value: bigint;
  /** As Go prints it, for messages. */
  text: string;
}

export interface HostLocalConfig {
  /** The network's name: the leases' directory under dataDir. */
  name: string;
  cniVersion: string;
  dataDir: string;
  resolvConf?: string;
  /** `ipam.routes` as the binary decodes them (`dst` and `gw`), for the result. */
  routes?: unknown;
  rangeSets: RangeSet[];
  /** From CNI_ARGS `IP`, then `args.cni.ips`, then runtimeConfig `ips`; in that order. */
  requested: RequestedIp[];
}

/**
 * pkg/ip's ParseIP, which CNI_ARGS `IP`, `args.cni.ips` and runtimeConfig `ips`
 * are all decoded with: an address, or an address with a prefix
 * ("10.1.0.5/24"), of which host-local takes the address.
 */
function parseRequested(text: string): RequestedIp | undefined {
  const ip = text.includes("/") ? parseCidr(text) : parseIp(text);
  if (!ip) return undefined;
  const value = ipToBigInt(ip.bytes);
  return { family: ip.family, value, text: bigIntToIp(value, ip.family) };
}

/** An entry of `args.cni.ips` or runtimeConfig `ips`, refused as ip.IP's UnmarshalText refuses it. */
function requestedFromJson(value: unknown, from: string): RequestedIp | typeof NIL_IP {
  if (typeof value !== "string")
    throw new Error(`${from}: cannot unmarshal ${JSON.stringify(value)} into an IP address`);
  if (value === "") return NIL_IP;
  const ip = parseRequested(value);
  if (!ip) throw new Error(`invalid IP address ${value}`);
  return ip;
}

/**
 * `ipam.routes` as the binary's libcni (1.0) decodes them into types.Route:
 * `dst` and `gw` only (mtu, priority and the rest came with libcni 1.2), with
 * net.ParseCIDR's and net.IP's complaints.
 */
function routesOf(value: unknown): unknown {
  if (value === undefined || value === null) return value;
  if (!Array.isArray(value)) throw jsonTypeError(value, "IPAMConfig.ipam.routes", "[]*types.Route");
  return value.map((route) => {
    if (route === null) return route;
    if (!isObject(route)) throw jsonTypeError(route, "IPAMConfig.ipam.routes", "types.route");
    const dst = goField(route, "dst");
    const gw = goField(route, "gw");
    // types.IPNet decodes null as "", which net.ParseCIDR refuses.
    if ((typeof dst === "string" || dst === null) && !parseCidr(dst ?? ""))
      throw new Error(`invalid CIDR address: ${dst ?? ""}`);
    if (typeof gw === "string" && gw !== "" && !parseIp(gw))
      throw new Error(`invalid IP address: ${gw}`);
    return { dst, ...(gw !== undefined && gw !== null && gw !== "" ? { gw } : {}) };
  });
}

/** Go's encoding/json words for a value of the wrong JSON type. */
function jsonTypeError(value: unknown, field: string, type: string): Error {
  const kind = Array.isArray(value)
    ? "array"
    : typeof value === "object"
      ? "object"
      : typeof value === "boolean"
        ? "bool"
        : typeof value;
  return new Error(`json: cannot unmarshal ${kind} into Go struct field ${field} of type ${type}`);
}

/** A key Go decodes into a struct: an object, null, or absent. */
function structField(
  obj: JsonObject,
  key: string,
  field: string,
  type: string,
): JsonObject | undefined {
  const v = goField(obj, key);
  if (v === undefined || v === null) return undefined;
  if (!isObject(v)) throw jsonTypeError(v, field, type);
  return v;
}

/** A key Go decodes into a slice: a list, null, or absent ([]). */
function listField(obj: JsonObject, key: string, field: string, type: string): unknown[] {
  const v = goField(obj, key);
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) throw jsonTypeError(v, field, type);
  return v;
}

/** A key Go decodes into a string: a string, null, or absent (""). */
function stringField(obj: JsonObject, key: string, field: string): string {
  const v = goField(obj, key);
  if (v === undefined || v === null) return "";
  if (typeof v !== "string") throw jsonTypeError(v, field, "string");
  return v;
}

/** LoadIPAMConfig, for the plugin's stdin object and CNI_ARGS text. */
export function loadHostLocalConfig(stdin: JsonObject, cniArgs: string): HostLocalConfig {
  // What Go's json.Unmarshal of the whole stdin refuses is reported first.
  const ipam = structField(stdin, "ipam", "Net.ipam", "allocator.IPAMConfig");
  const argsKey = structField(
    stdin,
    "args",
    "Net.args",
    'struct { A *allocator.IPAMArgs "json:\\"cni\\"" }',
  );
  const args = argsKey && structField(argsKey, "cni", "Net.args.cni", "allocator.IPAMArgs");
  const fromArgs = (args ? listField(args, "ips", "Net.args.cni.ips", "[]*ip.IP") : []).map((ip) =>
    requestedFromJson(ip, "args.cni.ips"),
  );
  const runtime =
    structField(
      stdin,
      "runtimeConfig",
      "Net.runtimeConfig",
      'struct { IPRanges []allocator.RangeSet "json:\\"ipRanges,omitempty\\""; IPs []*ip.IP "json:\\"ips,omitempty\\"" }',
    ) ?? {};
  const fromRuntime = listField(runtime, "ips", "Net.runtimeConfig.ips", "[]*ip.IP").map((ip) =>
    requestedFromJson(ip, "runtimeConfig.ips"),
  );
  const runtimeIpRanges = listField(
    runtime,
    "ipRanges",
    "Net.runtimeConfig.ipRanges",
    "[]allocator.RangeSet",
  );
  const routes = ipam && routesOf(goField(ipam, "routes"));
  const dataDir = ipam && stringField(ipam, "dataDir", "IPAMConfig.ipam.dataDir");
  const resolvConf = ipam && stringField(ipam, "resolvConf", "IPAMConfig.ipam.resolvConf");
  if (!ipam) throw new Error("IPAM config missing 'ipam' key");

  const asked = requestedIps(cniArgs, [...fromArgs, ...fromRuntime]);

  const rangeSets = rangeSetsOf(ipam, {
    runtimeIpRanges,
    checkOverlaps: false,
  });
  if (rangeSets.length === 0) throw new Error("no IP ranges specified");
  const version = goField(stdin, "cniVersion");
  const cniVersion = typeof version === "string" ? version : "";
  const perFamily = (f: IpFamily) => rangeSets.filter((s) => s[0]!.family === f).length;
  if ((perFamily(4) > 1 || perFamily(6) > 1) && !versionAtLeast(cniVersion || "0.1.0", "0.3.0")) {
    throw new Error(`CNI version ${cniVersion} does not support more than 1 address per family`);
  }
  requireNoOverlaps(rangeSets);
  const name = goField(stdin, "name");
  return {
    name: typeof name === "string" ? name : "",
    cniVersion,
    dataDir: dataDir || DEFAULT_DATA_DIR,
    ...(resolvConf ? { resolvConf } : {}),
    ...(routes !== undefined && routes !== null ? { routes } : {}),
    rangeSets,
    requested: asked,
  };
}

/**
 * The addresses asked for: CNI_ARGS' IP first, then args.cni.ips and
 * runtimeConfig.ips. host-local keeps them in a map keyed by their text: one
 * address asked twice is one.
 */
function requestedIps(
  cniArgs: string,
  fromJson: ReadonlyArray<RequestedIp | typeof NIL_IP>,
): RequestedIp[] {
  const asked: RequestedIp[] = [];
  const ask = (ip: RequestedIp) => {
    if (!asked.some((a) => a.family === ip.family && a.value === ip.value)) asked.push(ip);
  };
  const fromCniArgs = ipFromCniArgs(cniArgs);
  if (fromCniArgs) ask(fromCniArgs);
  for (const ip of fromJson) {
    if (ip === NIL_IP) throw new Error("cannot understand ip: IP <nil> not v4 nor v6");
    ask(ip);
  }
  return asked;
}

/** CNI_ARGS' IP=; an empty IP= is no address, as Go's net.IP reads "". */
function ipFromCniArgs(cniArgs: string): RequestedIp | undefined {
  if (cniArgs === "") return undefined;
  let ip: string | undefined;
  try {
    ip = loadArgs(parseCniArgs(cniArgs), ["IP"]).IP;
  } catch (err) {
    throw new Error((err as CniError).message);
  }
  if (ip === undefined || ip === "") return undefined;
  const parsed = parseRequested(ip);
  if (!parsed)
    throw new Error(
      `ARGS: error parsing value of pair ${JSON.stringify(`IP=${ip}`)}: invalid IP address ${ip}`,
    );
  return parsed;
}
