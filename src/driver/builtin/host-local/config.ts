/**
 * What host-local reads from its stdin and CNI_ARGS (allocator.LoadIPAMConfig):
 * the range sets, the addresses the runtime asks for, where the leases live.
 * Every failure is a plain Error, as host-local's are (the plugin answers 999).
 */
import { loadArgs, parseCniArgs } from "../../../cni/args.js";
import type { CniError } from "../../../cni/errors.js";
import { type IpFamily, parseCidr, parseIp } from "../../../cni/ip.js";
import { versionAtLeast } from "../../../cni/versions.js";
import { bigToIp, ipToBig, type RangeSet, rangeSetsOf, requireNoOverlaps } from "./ranges.js";

/** host-local's default when the config names no dataDir. */
export const DEFAULT_DATA_DIR = "/var/lib/cni/networks";

/** Where an `ipam` section's leases live: its dataDir, else host-local's default. */
export function dataDirOf(ipam: Record<string, unknown>): string {
  return typeof ipam.dataDir === "string" && ipam.dataDir !== "" ? ipam.dataDir : DEFAULT_DATA_DIR;
}

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

type JsonObject = Record<string, unknown>;
const isObject = (v: unknown): v is JsonObject =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * pkg/ip's ParseIP, which CNI_ARGS `IP`, `args.cni.ips` and runtimeConfig `ips`
 * are all decoded with: an address, or an address with a prefix
 * ("10.1.0.5/24"), of which host-local takes the address.
 */
function parseRequested(text: string): RequestedIp | undefined {
  const ip = text.includes("/") ? parseCidr(text) : parseIp(text);
  if (!ip) return undefined;
  const value = ipToBig(ip.bytes);
  return { family: ip.family, value, text: bigToIp(value, ip.family) };
}

/** An entry of `args.cni.ips` or runtimeConfig `ips`, refused as ip.IP's UnmarshalText refuses it. */
function requestedFromJson(value: unknown, from: string): RequestedIp {
  if (typeof value !== "string")
    throw new Error(`${from}: cannot unmarshal ${JSON.stringify(value)} into an IP address`);
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
  if (!Array.isArray(value)) return value;
  return value.map((route) => {
    if (!isObject(route)) return route;
    const { dst, gw } = route;
    if (typeof dst === "string" && !parseCidr(dst)) throw new Error(`invalid CIDR address: ${dst}`);
    if (typeof gw === "string" && gw !== "" && !parseIp(gw))
      throw new Error(`invalid IP address: ${gw}`);
    return { dst, ...(gw !== undefined && gw !== null && gw !== "" ? { gw } : {}) };
  });
}

/** LoadIPAMConfig, for the plugin's stdin object and CNI_ARGS text. */
export function loadHostLocalConfig(stdin: JsonObject, cniArgs: string): HostLocalConfig {
  const ipam = stdin.ipam;
  // What Go's json.Unmarshal of the whole stdin refuses is reported first.
  const args = isObject(stdin.args) && isObject(stdin.args.cni) ? stdin.args.cni : undefined;
  const fromArgs = Array.isArray(args?.ips)
    ? args.ips.map((ip) => requestedFromJson(ip, "args.cni.ips"))
    : [];
  const runtime = isObject(stdin.runtimeConfig) ? stdin.runtimeConfig : {};
  const fromRuntime = Array.isArray(runtime.ips)
    ? runtime.ips.map((ip) => requestedFromJson(ip, "runtimeConfig.ips"))
    : [];
  const routes = isObject(ipam) ? routesOf(ipam.routes) : undefined;
  if (!isObject(ipam)) throw new Error("IPAM config missing 'ipam' key");

  const asked: RequestedIp[] = [];
  // host-local keeps the requested addresses in a map keyed by their text: one address asked twice is one.
  const ask = (ip: RequestedIp) => {
    if (!asked.some((a) => a.family === ip.family && a.value === ip.value)) asked.push(ip);
  };
  if (cniArgs !== "") {
    let ip: string | undefined;
    try {
      ip = loadArgs(parseCniArgs(cniArgs), ["IP"]).IP;
    } catch (err) {
      throw new Error((err as CniError).message);
    }
    // An empty IP= is no address, as Go's net.IP reads "".
    if (ip !== undefined && ip !== "") {
      const parsed = parseRequested(ip);
      if (!parsed) {
        throw new Error(
          `ARGS: error parsing value of pair ${JSON.stringify(`IP=${ip}`)}: invalid IP address ${ip}`,
        );
      }
      ask(parsed);
    }
  }
  for (const ip of [...fromArgs, ...fromRuntime]) ask(ip);

  const rangeSets = rangeSetsOf(ipam, { runtimeIpRanges: runtime.ipRanges, checkOverlaps: false });
  if (rangeSets.length === 0) throw new Error("no IP ranges specified");
  const cniVersion = typeof stdin.cniVersion === "string" ? stdin.cniVersion : "";
  const perFamily = (f: IpFamily) => rangeSets.filter((s) => s[0]!.family === f).length;
  if ((perFamily(4) > 1 || perFamily(6) > 1) && !versionAtLeast(cniVersion || "0.1.0", "0.3.0")) {
    throw new Error(`CNI version ${cniVersion} does not support more than 1 address per family`);
  }
  requireNoOverlaps(rangeSets);
  return {
    name: typeof stdin.name === "string" ? stdin.name : "",
    cniVersion,
    dataDir: dataDirOf(ipam),
    ...(typeof ipam.resolvConf === "string" && ipam.resolvConf !== ""
      ? { resolvConf: ipam.resolvConf }
      : {}),
    ...(routes !== undefined && routes !== null ? { routes } : {}),
    rangeSets,
    requested: asked,
  };
}
