/**
 * The midonet plugin's own keys in a network's config, read and checked
 * once at load (code 7 naming the key) and again at each call.
 */
import type { NetworkConfigList } from "../../../cni/conflist.js";
import { CniError, ErrorCode } from "../../../cni/errors.js";
import { isObject } from "../../../common/json.js";

export const MIDONET_PLUGIN_TYPE = "midonet";
export const DEFAULT_BRIDGE = "midokube-br0";
export const DEFAULT_MTU = 1500;

export type Datapath = "kernel" | "midonet";

export interface MidonetPluginConfig {
  datapath: Datapath;
  bridge: string;
  mtu: number;
  /** Whether the network said its MTU; if not, the cluster network may choose it (VXLAN). */
  mtuSet: boolean;
  ipam: Record<string, unknown> & { type: string };
}

/** Reads and checks the plugin's own keys; code 7 naming the key. */
export function readMidonetConfig(conf: Record<string, unknown>): MidonetPluginConfig {
  const bad = (key: string, why: string) =>
    new CniError(ErrorCode.InvalidNetworkConfig, `midonet plugin: "${key}" ${why}`);
  const datapath = conf.datapath ?? "kernel";
  if (datapath !== "kernel" && datapath !== "midonet")
    throw bad("datapath", `must be "kernel" or "midonet", not ${JSON.stringify(datapath)}`);
  const bridge = conf.bridge ?? DEFAULT_BRIDGE;
  if (typeof bridge !== "string" || !/^[A-Za-z0-9_.-]{1,15}$/.test(bridge)) {
    throw bad(
      "bridge",
      `must be an interface name of 1-15 characters, not ${JSON.stringify(bridge)}`,
    );
  }
  const mtu = conf.mtu ?? DEFAULT_MTU;
  if (typeof mtu !== "number" || !Number.isInteger(mtu) || mtu < 576 || mtu > 65535) {
    throw bad("mtu", `must be an integer from 576 to 65535, not ${JSON.stringify(mtu)}`);
  }
  const ipam = conf.ipam;
  if (!isObject(ipam)) throw bad("ipam", "is required (an object)");
  const ipamType = (ipam as Record<string, unknown>).type;
  if (typeof ipamType !== "string" || ipamType === "" || ipamType.includes("/")) {
    throw bad("ipam.type", `must be a plugin file name, not ${JSON.stringify(ipamType)}`);
  }
  return {
    datapath,
    bridge,
    mtu,
    mtuSet: conf.mtu !== undefined,
    ipam: ipam as MidonetPluginConfig["ipam"],
  };
}

/**
 * The configs of the networks' `midonet` plugins on the kernel datapath. A
 * plugin that does not read (a cached config older code wrote) is skipped:
 * it names nothing this code could act on.
 */
export function kernelDatapathPlugins(
  networks: Iterable<NetworkConfigList>,
): MidonetPluginConfig[] {
  const out: MidonetPluginConfig[] = [];
  for (const list of networks) {
    for (const p of list.plugins) {
      if (p.type !== MIDONET_PLUGIN_TYPE) continue;
      try {
        const conf = readMidonetConfig(p.raw as Record<string, unknown>);
        if (conf.datapath === "kernel") out.push(conf);
      } catch {
        // not ours to act on
      }
    }
  }
  return out;
}
