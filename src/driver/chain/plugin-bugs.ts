/**
 * Bugs of the reference plugins that fail a healthy pod, recognised narrowly:
 * the plugin, the verb, its own words, and the condition that makes the failure
 * the plugin's bug rather than a finding about the pod. Anything else a plugin
 * says is passed on as libcni would.
 */
import type { CniError } from "../../cni/errors.js";
import { toResult100 } from "../../cni/result-convert.js";
import type { AnyResult } from "../../cni/types.js";
import { ipFamily } from "../../net/ip.js";

/** portmap's words when its IPv6 check fails (plugins/meta/portmap/portmap.go, checkPorts). */
const PORTMAP_IPV6_CHECK_FAILED = "could not check ipv6 dnat";

/**
 * Why a failed CHECK of plugin `type` is to be let through, or undefined when
 * it is a real failure.
 *
 * portmap 1.1.x (Debian 12 ships 1.1.1) checks a pod's DNAT chain in ip6tables
 * too whenever ip6tables works on the host, though for an IPv4-only pod it made
 * IPv4 rules only: CHECK then fails with "could not check ipv6 dnat", after the
 * IPv4 rules passed (a missing IPv4 rule fails first, "could not check ipv4
 * dnat", and is not excused). CRI-O runs CHECK right after every ADD, so no
 * IPv4-only pod with a host port could start under it.
 * containernetworking/plugins#819, fixed upstream since.
 */
export function toleratedCheckFailure(
  type: string,
  err: CniError,
  prevResult: AnyResult | undefined,
): string | undefined {
  if (type !== "portmap" || !err.message.includes(PORTMAP_IPV6_CHECK_FAILED)) return undefined;
  let ips: { address: string }[];
  try {
    ips = prevResult ? (toResult100(prevResult).ips ?? []) : [];
  } catch {
    return undefined;
  }
  if (ips.length === 0 || ips.some((ip) => ipFamily(ip.address) === 6)) return undefined;
  return "portmap checked IPv6 rules of an IPv4-only pod (containernetworking/plugins#819); its IPv4 rules are in place";
}
