/**
 * ADD: IPAM and the veth pair at once (the pair needs no address until
 * phase 2), then the gateway on the bridge, addresses and routes. Any failure
 * after IPAM answered gives the address back and removes the pair before the
 * error goes back: the runtime may never call DEL.
 */
import { CniError } from "../../../cni/errors.js";
import { convertResult, toResult100 } from "../../../cni/result-convert.js";
import { parseResult } from "../../../cni/result-read.js";
import type { Result100, Route } from "../../../cni/types.js";
import { requireSupportedVersion } from "../../../cni/versions.js";
import { parseCidr } from "../../../net/ip.js";
import { randomMac } from "../../../plumbing/mac.js";
import type { PodInterfaceRef, PodRoute, VethSpec } from "../../../plumbing/pod-interface-types.js";
import type { PodPlumbing } from "../../../plumbing/pod-plumbing.js";
import type { PluginInvocation, RunPlugin } from "../../chain/plugin-runner.js";
import type { PodPolicyHook } from "../../network-policy/enforcer.js";
import { DriverErrorCode } from "../error-codes.js";
import type { BridgeCache } from "./bridge-cache.js";
import type { MidonetPluginConfig } from "./config.js";
import { defaultRoutes, gatewayForFamily, gatewayOf } from "./gateways.js";
import {
  containerMacFor,
  hostNameFor,
  plumbingError,
  podIdentityOf,
  required,
} from "./invocation.js";

/** What ADD, DEL and CHECK work with besides the invocation. */
export interface MidonetContext {
  delegate: RunPlugin;
  plumbing: PodPlumbing;
  bridges: BridgeCache;
  /** Told when an ADD replaced the host end an older sandbox of the same pod left. */
  onStaleHostEnd?: (hostIfName: string, containerId: string) => void;
  /** The MTU for a network that sets none (the cluster network's, over VXLAN); undefined: the default. */
  podMtu?: () => number | undefined;
  /** NetworkPolicy on the kernel datapath: told of each pod before it can send or receive. */
  podPolicy?: PodPolicyHook;
  /** Whether a port made now on `bridge` gets hairpin mode (default yes, as kube-proxy needs). */
  hairpin?: (bridge: string) => boolean;
}

export async function add(
  inv: PluginInvocation,
  conf: MidonetPluginConfig,
  ctx: MidonetContext,
): Promise<unknown> {
  const { containerId, netns, ifName } = required(inv);
  const cniVersion = requireSupportedVersion(inv.config.cniVersion);
  const step = `setting up ${ifName} in ${netns} for ${containerId}`;
  const mtu = conf.mtuSet ? conf.mtu : (ctx.podMtu?.() ?? conf.mtu);
  const veth: VethSpec = {
    netns,
    ifName,
    hostIfName: hostNameFor(inv),
    mtu,
    containerMac: containerMacFor(inv),
    hostMac: randomMac(),
  };
  const bridge = conf.datapath === "kernel" ? conf.bridge : undefined;
  // IPAM and the veth pair overlap: the pair needs no address until phase 2.
  const [ipamOut, pair] = await Promise.allSettled([
    ctx.delegate({ ...inv, type: conf.ipam.type }),
    createPair(veth, bridge, containerId, ctx),
  ]);
  const policy = bridge ? ctx.podPolicy : undefined;
  const undo = async (ipamAllocated: boolean) => {
    await policy?.detach(veth.hostIfName).catch(() => undefined);
    if (pair.status === "fulfilled")
      await ctx.plumbing.deletePodInterface(podInterfaceOf(veth)).catch(() => false);
    // Give the address back before answering: the runtime may never call DEL.
    if (ipamAllocated)
      await ctx.delegate({ ...inv, type: conf.ipam.type, command: "DEL" }).catch(() => undefined);
  };
  if (ipamOut.status === "rejected" || pair.status === "rejected") {
    await undo(ipamOut.status === "fulfilled");
    if (pair.status === "rejected") ctx.bridges.forget();
    const err =
      ipamOut.status === "rejected" ? ipamOut.reason : (pair as PromiseRejectedResult).reason;
    throw plumbingError(err, step);
  }
  try {
    const ipam = toResult100(parseResult(ipamOut.value, cniVersion));
    // The pod's rules are in force before its addresses are set and its link is up.
    await policy?.attach({
      hostIf: veth.hostIfName,
      ips: (ipam.ips ?? []).map((ip) => ip.address.split("/")[0] as string),
      ...podIdentityOf(inv),
    });
    const result = await configure(veth, bridge, conf, ipam, ctx);
    return convertResult(result, cniVersion);
  } catch (err) {
    await undo(true);
    throw plumbingError(err, step);
  }
}

/** What removes the pair again: the host end by name only while it has the MAC ADD gave it. */
function podInterfaceOf(veth: VethSpec): PodInterfaceRef {
  return {
    netns: veth.netns,
    ifName: veth.ifName,
    hostIfName: veth.hostIfName,
    hostMac: veth.hostMac,
  };
}

/** Phase 1: the pair, its host end on the bridge when there is one. */
async function createPair(
  veth: VethSpec,
  bridge: string | undefined,
  containerId: string,
  ctx: MidonetContext,
): Promise<void> {
  if (bridge) await ctx.bridges.exists(bridge, veth.mtu);
  const hairpin = bridge ? (ctx.hairpin?.(bridge) ?? true) : undefined;
  if (await ctx.plumbing.createVethPairReplacingStale(veth, { bridge, hairpin }))
    ctx.onStaleHostEnd?.(veth.hostIfName, containerId);
}

/** Phase 2, once IPAM answered: the gateways on the bridge, the container side; the result. */
async function configure(
  veth: VethSpec,
  bridge: string | undefined,
  conf: MidonetPluginConfig,
  ipam: Result100,
  ctx: MidonetContext,
): Promise<Result100> {
  const ips = ipam.ips ?? [];
  if (ips.length === 0) {
    throw new CniError(
      DriverErrorCode.IpamFailed,
      `IPAM plugin ${conf.ipam.type} returned no IP addresses`,
    );
  }
  // Routes IPAM names (the network's ipam.routes) are the operator's: added as they are.
  const routes: Array<Route & Pick<PodRoute, "ifNoDefault">> =
    ipam.routes && ipam.routes.length > 0
      ? ipam.routes.map((r) => ({ ...r, gw: r.gw ?? gatewayForFamily(ips, r.dst) }))
      : defaultRoutes(ips);
  if (bridge) {
    await ctx.bridges.gateways(
      bridge,
      ips.map((ip) => `${gatewayOf(ip)}/${parseCidr(ip.address)!.prefix}`),
      veth.mtu,
    );
  }
  const skipped = await ctx.plumbing.configureContainerSide({
    netns: veth.netns,
    ifName: veth.ifName,
    addresses: ips.map((ip) => ({ cidr: ip.address })),
    routes: routes.map(
      (r): PodRoute => ({ dst: r.dst, gw: r.gw, ...(r.ifNoDefault ? { ifNoDefault: true } : {}) }),
    ),
  });
  return {
    cniVersion: "1.1.0",
    interfaces: [
      { name: veth.hostIfName, mac: veth.hostMac },
      { name: veth.ifName, mac: veth.containerMac, sandbox: veth.netns, mtu: veth.mtu },
    ],
    ips: ips.map((ip) => ({ address: ip.address, gateway: gatewayOf(ip), interface: 1 })),
    routes: routes
      .filter((r) => !skipped.some((s) => s.dst === r.dst && s.gw === r.gw))
      .map(({ ifNoDefault: _, ...r }): Route => r),
    ...(ipam.dns && Object.keys(ipam.dns).length > 0 ? { dns: ipam.dns } : {}),
  };
}
