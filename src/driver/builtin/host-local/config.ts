/**
 * What host-local reads from its stdin and CNI_ARGS (allocator.LoadIPAMConfig):
 * the range sets, the addresses the runtime asks for, where the leases live.
 * Every failure is a plain Error, as host-local's are (the plugin answers 999).
 */
import { loadArgs, parseCniArgs } from "../../../cni/args.js";
import type { CniError } from "../../../cni/errors.js";
import type { IpFamily } from "../../../cni/ip.js";
import { versionAtLeast } from "../../../cni/versions.js";
import { parseAddress, type RangeSet, rangeSetsOf } from "./ranges.js";

/** host-local's default when the config names no dataDir. */
export const DEFAULT_DATA_DIR = "/var/lib/cni/networks";

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
  /** `ipam.routes` as given; they go into the result unchanged. */
  routes?: unknown;
  rangeSets: RangeSet[];
  /** From CNI_ARGS `IP`, then `args.cni.ips`, then runtimeConfig `ips`; in that order. */
  requested: RequestedIp[];
}

type JsonObject = Record<string, unknown>;
const isObject = (v: unknown): v is JsonObject =>
  typeof v === "object" && v !== null && !Array.isArray(v);

function requested(text: unknown, from: string): RequestedIp {
  // runtimeConfig.ips may carry a prefix ("10.1.0.5/24"): host-local takes the address.
  const raw = typeof text === "string" ? text.split("/")[0]! : undefined;
  const ip = raw === undefined ? undefined : parseAddress(raw);
  if (!ip) throw new Error(`cannot understand ip: ${from} ${JSON.stringify(text)}`);
  return { ...ip, text: raw! };
}

/** LoadIPAMConfig, for the plugin's stdin object and CNI_ARGS text. */
export function loadHostLocalConfig(stdin: JsonObject, cniArgs: string): HostLocalConfig {
  const ipam = stdin.ipam;
  if (!isObject(ipam)) throw new Error("IPAM config missing 'ipam' key");
  const asked: RequestedIp[] = [];
  if (cniArgs !== "") {
    let ip: string | undefined;
    try {
      ip = loadArgs(parseCniArgs(cniArgs), ["IP"]).IP;
    } catch (err) {
      throw new Error((err as CniError).message);
    }
    // An empty IP= is no address, as Go's net.IP reads "".
    if (ip !== undefined && ip !== "") {
      if (!parseAddress(ip))
        throw new Error(`ARGS: error parsing value of pair "IP=${ip}": invalid IP address ${ip}`);
      asked.push(requested(ip, "IP"));
    }
  }
  const args = isObject(stdin.args) && isObject(stdin.args.cni) ? stdin.args.cni : undefined;
  if (Array.isArray(args?.ips))
    for (const ip of args.ips) asked.push(requested(ip, "args.cni.ips"));
  const runtime = isObject(stdin.runtimeConfig) ? stdin.runtimeConfig : {};
  if (Array.isArray(runtime.ips)) {
    for (const ip of runtime.ips) asked.push(requested(ip, "runtimeConfig.ips"));
  }

  const rangeSets = rangeSetsOf(ipam, runtime.ipRanges);
  if (rangeSets.length === 0) throw new Error("no IP ranges specified");
  const cniVersion = typeof stdin.cniVersion === "string" ? stdin.cniVersion : "";
  const perFamily = (f: IpFamily) => rangeSets.filter((s) => s[0]!.family === f).length;
  if ((perFamily(4) > 1 || perFamily(6) > 1) && !versionAtLeast(cniVersion || "0.1.0", "0.3.0")) {
    throw new Error(`CNI version ${cniVersion} does not support more than 1 address per family`);
  }
  const dataDir = typeof ipam.dataDir === "string" && ipam.dataDir !== "" ? ipam.dataDir : "";
  return {
    name: typeof stdin.name === "string" ? stdin.name : "",
    cniVersion,
    dataDir: dataDir || DEFAULT_DATA_DIR,
    ...(typeof ipam.resolvConf === "string" && ipam.resolvConf !== ""
      ? { resolvConf: ipam.resolvConf }
      : {}),
    ...(ipam.routes !== undefined && ipam.routes !== null ? { routes: ipam.routes } : {}),
    rangeSets,
    requested: asked,
  };
}
