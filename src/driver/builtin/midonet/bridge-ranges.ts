/**
 * Which host-local ranges the kernel datapath serves on which bridge, from the
 * networks' `midonet` plugins: what the gateways' pruning keeps
 * (lifecycle/bridge-gateways.ts) and which pod subnets the Services steering
 * routes (services/bridge-steering.ts).
 */
import type { NetworkConfigList } from "../../../cni/conflist.js";
import type { ParsedCidr } from "../../../net/ip.js";
import { rangeSetsOf } from "../host-local/ranges.js";
import { kernelDatapathPlugins } from "./config.js";

/** A range a kernel-datapath network serves on a bridge. */
export interface BridgeRange {
  bridge: string;
  /** Undefined: the network's IPAM is not host-local, so its ranges are unknown (any counts). */
  subnet?: ParsedCidr;
}

/** The bridges and host-local ranges of the kernel-datapath `midonet` plugins of these networks. */
export function bridgeRangesOf(networks: Iterable<NetworkConfigList>): BridgeRange[] {
  const out: BridgeRange[] = [];
  for (const conf of kernelDatapathPlugins(networks)) {
    if (conf.ipam.type !== "host-local") {
      out.push({ bridge: conf.bridge });
      continue;
    }
    try {
      for (const set of rangeSetsOf(conf.ipam, { strict: false }))
        for (const r of set) out.push({ bridge: conf.bridge, subnet: r.subnet });
    } catch {
      // A cached config the current code cannot read names no bridge it could act on.
    }
  }
  return out;
}
