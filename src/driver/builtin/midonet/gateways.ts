/** The gateways and default routes a pod gets from its IPAM addresses. */

import type { IPConfig, Route } from "../../../cni/types.js";
import { cidrNetwork, formatIp, ipFamily, parseCidr } from "../../../net/ip.js";

/** The gateway of an IPAM address: what IPAM said, else the network's first address. */
export function gatewayOf(ip: IPConfig): string {
  if (ip.gateway) return ip.gateway;
  const net = cidrNetwork(parseCidr(ip.address)!);
  const bytes = Uint8Array.from(net.bytes);
  bytes[bytes.length - 1] = (bytes[bytes.length - 1] as number) + 1;
  return formatIp(bytes);
}

export function gatewayForFamily(ips: readonly IPConfig[], dst: string): string | undefined {
  const fam = ipFamily(dst);
  const ip = ips.find((i) => ipFamily(i.address) === fam);
  return ip ? gatewayOf(ip) : undefined;
}

/**
 * The routes a pod gets when IPAM names none: a default route per family,
 * through the gateway, added only where the pod has none (its first interface
 * has it; a second attachment on another network, Multus' net1, does not take it).
 */
export function defaultRoutes(ips: readonly IPConfig[]): Array<Route & { ifNoDefault: true }> {
  const routes: Array<Route & { ifNoDefault: true }> = [];
  for (const fam of [4, 6] as const) {
    const ip = ips.find((i) => ipFamily(i.address) === fam);
    if (ip)
      routes.push({ dst: fam === 4 ? "0.0.0.0/0" : "::/0", gw: gatewayOf(ip), ifNoDefault: true });
  }
  return routes;
}
