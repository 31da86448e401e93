/**
 * CHECK: the container end is still what the previous result says: a veth
 * with its MAC and MTU, each address with its subnet route, each route.
 */
import { CniError, ErrorCode } from "../../../cni/errors.js";
import type { Result100 } from "../../../cni/types.js";
import { versionAtLeast } from "../../../cni/versions.js";
import { cidrNetwork, formatIp, ipFamily, parseCidr, parseIp } from "../../../net/ip.js";
import type { PodInterfaceState } from "../../../plumbing/pod-interface-types.js";
import type { PluginInvocation } from "../../chain/plugin-runner.js";
import { DriverErrorCode } from "../error-codes.js";
import type { MidonetContext } from "./add.js";
import type { MidonetPluginConfig } from "./config.js";
import { cachedResultOf, plumbingError, prevResultOf, required } from "./invocation.js";

type Fail = (what: string) => CniError;

export async function check(
  inv: PluginInvocation,
  conf: MidonetPluginConfig,
  ctx: Pick<MidonetContext, "delegate" | "plumbing">,
): Promise<void> {
  const { netns, ifName } = required(inv);
  // Below 0.4.0 (a caller that has CHECK on a network that has not) the executor
  // hands the cached result aside; the IPAM plugin cannot be asked at that version.
  const canAskIpam = versionAtLeast(String(inv.config.cniVersion), "0.4.0");
  const prev = prevResultOf(inv) ?? (canAskIpam ? undefined : cachedResultOf(inv));
  if (!prev)
    throw new CniError(
      ErrorCode.InvalidNetworkConfig,
      "midonet plugin: CHECK needs prevResult, and none was given",
    );
  if (canAskIpam) await ctx.delegate({ ...inv, type: conf.ipam.type });
  const fail: Fail = (what) =>
    new CniError(DriverErrorCode.CheckFailed, `CHECK ${ifName} in ${netns}: ${what}`);
  const ifIndex = (prev.interfaces ?? []).findIndex((i) => i.name === ifName && i.sandbox);
  const want = prev.interfaces?.[ifIndex];
  if (!want) throw fail(`prevResult lists no interface ${ifName} with a sandbox`);
  if (want.sandbox !== netns) throw fail(`prevResult has sandbox ${want.sandbox}, not ${netns}`);
  const wantsV6 = (prev.ips ?? []).some((ip) => ipFamily(ip.address) === 6);
  const state = await ctx.plumbing.inspectPodInterface(netns, ifName, wantsV6).catch((err) => {
    throw plumbingError(err, `inspecting ${ifName} in ${netns}`);
  });
  if (!state) throw fail("interface not found");
  if (state.link.linkinfo?.info_kind !== "veth")
    throw fail(`is a ${state.link.linkinfo?.info_kind ?? "device of unknown kind"}, not a veth`);
  if (want.mac && state.link.address?.toLowerCase() !== want.mac.toLowerCase()) {
    throw fail(`MAC is ${state.link.address}, expected ${want.mac}`);
  }
  if (want.mtu && state.link.mtu !== want.mtu)
    throw fail(`MTU is ${state.link.mtu}, expected ${want.mtu}`);
  checkAddresses(prev, ifIndex, state, fail);
  checkRoutes(prev, state, fail);
}

/** Each address of the interface is there, with the subnet route the kernel adds with it. */
function checkAddresses(prev: Result100, ifIndex: number, state: PodInterfaceState, fail: Fail) {
  for (const ip of prev.ips ?? []) {
    if (ip.interface !== undefined && ip.interface !== ifIndex) continue;
    const cidr = parseCidr(ip.address);
    if (!cidr) throw fail(`prevResult address ${ip.address} is not a CIDR`);
    const present = state.addresses.some((a) => {
      const have = parseIp(a.local);
      return have && a.prefixlen === cidr.prefix && formatIp(have) === formatIp(cidr.bytes);
    });
    if (!present) throw fail(`address ${ip.address} is missing`);
    const net = cidrNetwork(cidr);
    const netText = `${formatIp(net.bytes)}/${net.prefix}`;
    if (
      !state.routes.some(
        (r) => r.dst === netText || (net.prefix === 32 && r.dst === formatIp(net.bytes)),
      )
    ) {
      throw fail(`no route to ${netText}`);
    }
  }
}

/** Each route of the result is there; a default route by family, as the kernel lists it. */
function checkRoutes(prev: Result100, state: PodInterfaceState, fail: Fail) {
  for (const route of prev.routes ?? []) {
    const isDefault = route.dst === "0.0.0.0/0" || route.dst === "::/0";
    const dstCidr = parseCidr(route.dst);
    const found = state.routes.some((r) => {
      if (
        isDefault
          ? r.dst !== "default"
          : r.dst !== route.dst &&
            !(dstCidr && canonicalRouteDst(r.dst) === canonicalRouteDst(route.dst))
      )
        return false;
      if (isDefault && ipFamily(route.gw ?? route.dst) !== ipFamily(r.gateway ?? route.dst))
        return false;
      return !route.gw || r.gateway === route.gw;
    });
    if (!found) throw fail(`route ${route.dst}${route.gw ? ` via ${route.gw}` : ""} is missing`);
  }
}

function canonicalRouteDst(dst: string): string {
  const c = parseCidr(dst.includes("/") ? dst : `${dst}/${ipFamily(dst) === 6 ? 128 : 32}`);
  return c ? `${formatIp(c.bytes)}/${c.prefix}` : dst;
}
