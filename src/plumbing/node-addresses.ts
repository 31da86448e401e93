/**
 * The addresses on the interfaces of the driver's own namespace (the node's,
 * with hostNetwork), for the config load's pod range check. Not on the pod
 * path (once per load), so one `ip -j -d addr show` does it whichever backend
 * serves pods.
 */
import { ipBatch, parseJsonLines } from "./ip-batch.js";

export interface InterfaceAddress {
  ifName: string;
  /** "192.0.2.2/24". */
  cidr: string;
  /** The link's kind ("bridge", "veth", …), undefined for a plain device. */
  kind?: string;
  mac?: string;
}

interface AddrShow {
  ifname?: string;
  address?: string;
  linkinfo?: { info_kind?: string };
  addr_info?: { local?: string; prefixlen?: number }[];
}

export async function listNodeAddresses(): Promise<InterfaceAddress[]> {
  const lines = await ipBatch(["addr show"], { json: true, details: true });
  const out: InterfaceAddress[] = [];
  for (const link of parseJsonLines<AddrShow>(lines)[0] ?? []) {
    for (const a of link.addr_info ?? []) {
      if (!link.ifname || a.local === undefined || a.prefixlen === undefined) continue;
      out.push({
        ifName: link.ifname,
        cidr: `${a.local}/${a.prefixlen}`,
        ...(link.linkinfo?.info_kind ? { kind: link.linkinfo.info_kind } : {}),
        ...(link.address ? { mac: link.address } : {}),
      });
    }
  }
  return out;
}
