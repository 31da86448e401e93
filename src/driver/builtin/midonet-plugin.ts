/**
 * The built-in plugin `"type": "midonet"`: the pod's veth pair, addresses and routes,
 * done in-process through src/plumbing, with IPAM delegated to the `ipam` section
 * as ptp or bridge would delegate it: through `RunPlugin`, which runs host-local
 * in-process (`--host-local`, the default) or execs the named binary.
 *
 * Datapaths: "kernel" (default) puts the host end on a per-node Linux bridge that
 * holds the gateway addresses, so pods reach each other, the gateway and the host;
 * "midonet" leaves the host end up and unbridged for the MidoNet agent to bind.
 */
import { parseCniArgs, podIdentityFromArgs } from "../../cni/args.js";
import { CniError, ErrorCode } from "../../cni/errors.js";
import { cidrNetwork, formatIp, ipFamily, parseCidr, parseIp } from "../../cni/ip.js";
import { convertResult, parseResult, toResult100 } from "../../cni/result.js";
import type { IPConfig, Result100, Route } from "../../cni/types.js";
import { requireSupportedVersion, versionAtLeast } from "../../cni/versions.js";
import { HOST_VETH_PREFIX, hostVethName, podVethKey } from "../../midonet/host-veth-name.js";
import { ensureBridge } from "../../plumbing/bridge.js";
import { IpCommandError } from "../../plumbing/ip-batch.js";
import { normalizeMac, randomMac } from "../../plumbing/mac.js";
import {
  configureContainerSide,
  createVethPairReplacingStale,
  deletePodInterface,
  inspectPodInterface,
  type PodRoute,
} from "../../plumbing/pod-interface.js";
import type { BuiltinPlugin, PluginInvocation, RunPlugin } from "../chain/plugin-runner.js";
import { DriverErrorCode } from "./error-codes.js";

export const MIDONET_PLUGIN_TYPE = "midonet";
export const DEFAULT_BRIDGE = "midokube-br0";
export const DEFAULT_MTU = 1500;

export type Datapath = "kernel" | "midonet";

export interface MidonetPluginConfig {
  datapath: Datapath;
  bridge: string;
  mtu: number;
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
  if (typeof ipam !== "object" || ipam === null || Array.isArray(ipam))
    throw bad("ipam", "is required (an object)");
  const ipamType = (ipam as Record<string, unknown>).type;
  if (typeof ipamType !== "string" || ipamType === "" || ipamType.includes("/")) {
    throw bad("ipam.type", `must be a plugin file name, not ${JSON.stringify(ipamType)}`);
  }
  return { datapath, bridge, mtu, ipam: ipam as MidonetPluginConfig["ipam"] };
}

export interface MidonetPluginOptions {
  /** Told when an ADD replaced the host end an older sandbox of the same pod left. */
  onStaleHostEnd?: (hostIfName: string, containerId: string) => void;
  /** What the plugin remembers of its bridges; shared with whoever removes their gateways. */
  bridges?: BridgeCache;
}

export function createMidonetPlugin(opts: MidonetPluginOptions = {}): BuiltinPlugin {
  const bridges = opts.bridges ?? new BridgeCache();

  return {
    validate(conf) {
      readMidonetConfig(conf);
    },
    async run(inv, delegate) {
      const conf = readMidonetConfig(inv.config);
      switch (inv.command) {
        case "ADD":
          return add(inv, conf, delegate, bridges, opts);
        case "DEL":
          await del(inv, conf, delegate);
          return undefined;
        case "CHECK":
          await check(inv, conf, delegate);
          return undefined;
        case "STATUS":
        case "GC":
          await statusOrGc(inv, conf, delegate);
          return undefined;
        default:
          throw new CniError(
            ErrorCode.InvalidEnvironment,
            `midonet plugin: unsupported command ${inv.command}`,
          );
      }
    },
  };
}

/**
 * Whether the IPAM plugin speaks the network's CNI version, by its VERSION
 * answer (as libcni asks a plugin's versions). Debian's host-local 1.1.1
 * predates CNI 1.1: it refuses a 1.1.0 network's ADD ("incompatible CNI
 * versions") and fails STATUS and GC with "missing containerID".
 */
async function ipamSpeaks(
  type: string,
  inv: PluginInvocation,
  delegate: RunPlugin,
): Promise<{ ok: boolean; supported: string[] }> {
  const answer = (await delegate({
    type,
    command: "VERSION",
    config: { cniVersion: inv.config.cniVersion },
  })) as { supportedVersions?: unknown } | undefined;
  const supported = Array.isArray(answer?.supportedVersions)
    ? answer.supportedVersions.filter((v): v is string => typeof v === "string")
    : [];
  return { ok: supported.includes(String(inv.config.cniVersion)), supported };
}

/**
 * STATUS and GC: nothing of our own to report or collect; the IPAM plugin gets
 * the verb when it speaks the network's version. When it does not, STATUS says
 * so (code 50: no ADD can work), rather than passing on the old plugin's
 * confusion, and GC leaves it out (the stale attachments' full DELs already ran).
 * An IPAM plugin that cannot run at all fails either, through VERSION.
 */
async function statusOrGc(
  inv: PluginInvocation,
  conf: MidonetPluginConfig,
  delegate: RunPlugin,
): Promise<void> {
  const type = conf.ipam.type;
  const { ok, supported } = await ipamSpeaks(type, inv, delegate);
  if (ok) {
    await delegate({ ...inv, type });
  } else if (inv.command === "STATUS") {
    throw new CniError(
      ErrorCode.PluginNotAvailable,
      `IPAM plugin ${type} speaks CNI ${supported.join(", ") || "(no version)"}, not this network's ${String(inv.config.cniVersion)}: no ADD can work`,
      type === "host-local" ? "host-local in-process (--host-local in-process) speaks 1.1.0" : "",
    );
  }
}

function hostNameFor(inv: PluginInvocation): string {
  const pod = podIdentityFromArgs(parseCniArgs(inv.cniArgs ?? ""));
  return hostVethName(podVethKey(pod, inv.containerId ?? "", inv.ifName ?? ""));
}

function containerMacFor(inv: PluginInvocation): string {
  const rc = inv.config.runtimeConfig as Record<string, unknown> | undefined;
  const requested =
    (typeof rc?.mac === "string" ? rc.mac : undefined) ??
    parseCniArgs(inv.cniArgs ?? "").find(([k]) => k === "MAC")?.[1];
  if (requested === undefined) return randomMac();
  const mac = normalizeMac(requested);
  if (!mac)
    throw new CniError(
      ErrorCode.InvalidNetworkConfig,
      `midonet plugin: invalid MAC address ${JSON.stringify(requested)}`,
    );
  return mac;
}

/** The gateway of an IPAM address: what IPAM said, else the network's first address. */
function gatewayOf(ip: IPConfig): string {
  if (ip.gateway) return ip.gateway;
  const net = cidrNetwork(parseCidr(ip.address)!);
  const bytes = Uint8Array.from(net.bytes);
  bytes[bytes.length - 1] = (bytes[bytes.length - 1] as number) + 1;
  return formatIp(bytes);
}

/**
 * The routes a pod gets when IPAM names none: a default route per family,
 * through the gateway, added only where the pod has none (its first interface
 * has it; a second attachment on another network, Multus' net1, does not take it).
 */
function defaultRoutes(ips: readonly IPConfig[]): Array<Route & { ifNoDefault: true }> {
  const routes: Array<Route & { ifNoDefault: true }> = [];
  for (const fam of [4, 6] as const) {
    const ip = ips.find((i) => ipFamily(i.address) === fam);
    if (ip)
      routes.push({ dst: fam === 4 ? "0.0.0.0/0" : "::/0", gw: gatewayOf(ip), ifNoDefault: true });
  }
  return routes;
}

async function add(
  inv: PluginInvocation,
  conf: MidonetPluginConfig,
  delegate: RunPlugin,
  bridges: BridgeCache,
  opts: MidonetPluginOptions,
): Promise<unknown> {
  const { containerId, netns, ifName } = required(inv);
  const cniVersion = requireSupportedVersion(inv.config.cniVersion);
  const veth = {
    netns,
    ifName,
    hostIfName: hostNameFor(inv),
    mtu: conf.mtu,
    containerMac: containerMacFor(inv),
    hostMac: randomMac(),
  };
  const bridge = conf.datapath === "kernel" ? conf.bridge : undefined;
  // IPAM and the veth pair overlap: the pair needs no address until phase 2.
  const [ipamOut, pair] = await Promise.allSettled([
    delegate({ ...inv, type: conf.ipam.type }),
    (async () => {
      if (bridge) await bridges.exists(bridge, conf.mtu);
      if (await createVethPairReplacingStale(veth, { bridge }))
        opts.onStaleHostEnd?.(veth.hostIfName, containerId);
    })(),
  ]);
  const undo = async (ipamAllocated: boolean) => {
    if (pair.status === "fulfilled") {
      await deletePodInterface({
        netns,
        ifName,
        hostIfName: veth.hostIfName,
        hostMac: veth.hostMac,
      }).catch(() => false);
    }
    // Give the address back before answering: the runtime may never call DEL.
    if (ipamAllocated)
      await delegate({ ...inv, type: conf.ipam.type, command: "DEL" }).catch(() => undefined);
  };
  if (ipamOut.status === "rejected" || pair.status === "rejected") {
    await undo(ipamOut.status === "fulfilled");
    if (pair.status === "rejected") bridges.forget();
    const err =
      ipamOut.status === "rejected" ? ipamOut.reason : (pair as PromiseRejectedResult).reason;
    throw plumbingError(err, `setting up ${ifName} in ${netns} for ${containerId}`);
  }
  try {
    const ipam = toResult100(parseResult(ipamOut.value, cniVersion));
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
      await bridges.gateways(
        bridge,
        ips.map((ip) => `${gatewayOf(ip)}/${parseCidr(ip.address)!.prefix}`),
        conf.mtu,
      );
    }
    const skipped = await configureContainerSide({
      netns,
      ifName,
      addresses: ips.map((ip) => ({ cidr: ip.address })),
      routes: routes.map(
        (r): PodRoute => ({
          dst: r.dst,
          gw: r.gw,
          ...(r.ifNoDefault ? { ifNoDefault: true } : {}),
        }),
      ),
    });
    const result: Result100 = {
      cniVersion: "1.1.0",
      interfaces: [
        { name: veth.hostIfName, mac: veth.hostMac },
        { name: ifName, mac: veth.containerMac, sandbox: netns, mtu: conf.mtu },
      ],
      ips: ips.map((ip) => ({ address: ip.address, gateway: gatewayOf(ip), interface: 1 })),
      routes: routes
        .filter((r) => !skipped.some((s) => s.dst === r.dst && s.gw === r.gw))
        .map(({ ifNoDefault: _, ...r }): Route => r),
      ...(ipam.dns && Object.keys(ipam.dns).length > 0 ? { dns: ipam.dns } : {}),
    };
    return convertResult(result, cniVersion);
  } catch (err) {
    await undo(true);
    throw plumbingError(err, `setting up ${ifName} in ${netns} for ${containerId}`);
  }
}

/**
 * The node's bridge is set up once and then trusted: one promise per bridge for
 * its existence, one per gateway set for its addresses, shared by concurrent ADDs.
 * Forgotten on any failure, so a bridge removed behind our back is made again.
 */
export class BridgeCache {
  private readonly done = new Map<string, Promise<void>>();

  exists(name: string, mtu: number): Promise<void> {
    return this.once(name, () => ensureBridge(name, [], mtu));
  }

  gateways(name: string, cidrs: string[], mtu: number): Promise<void> {
    return this.once(`${name} ${cidrs.join(",")}`, () => ensureBridge(name, cidrs, mtu));
  }

  forget(): void {
    this.done.clear();
  }

  private once(key: string, make: () => Promise<void>): Promise<void> {
    let p = this.done.get(key);
    if (!p) {
      p = make().catch((err) => {
        this.done.delete(key);
        throw err;
      });
      this.done.set(key, p);
    }
    return p;
  }
}

function gatewayForFamily(ips: readonly IPConfig[], dst: string): string | undefined {
  const fam = ipFamily(dst);
  const ip = ips.find((i) => ipFamily(i.address) === fam);
  return ip ? gatewayOf(ip) : undefined;
}

async function del(
  inv: PluginInvocation,
  conf: MidonetPluginConfig,
  delegate: RunPlugin,
): Promise<void> {
  const ifName = inv.ifName ?? "";
  // Below 0.4.0 there is no prevResult: the cached result tells the host end's MAC all the same.
  const prev = prevResultOf(inv) ?? cachedResultOf(inv);
  // The host end as ADD named it (prevResult lists it without a sandbox); the name
  // is derived again only without one, since a DEL may carry other CNI_ARGS than ADD.
  const cachedHost = prev?.interfaces?.find(
    (i) => !i.sandbox && i.name.startsWith(HOST_VETH_PREFIX),
  );
  const hostIfName = cachedHost?.name ?? hostNameFor(inv);
  const hostMac = cachedHost?.mac;
  // Both are idempotent and independent, so they overlap; IPAM's error wins, and
  // the runtime's retry of DEL finds the link already gone.
  const [ipam, link] = await Promise.allSettled([
    delegate({ ...inv, type: conf.ipam.type }),
    deletePodInterface({ netns: inv.netns, ifName, hostIfName, hostMac }),
  ]);
  if (ipam.status === "rejected") throw ipam.reason;
  if (link.status === "rejected")
    throw plumbingError(link.reason, `removing ${ifName} of ${inv.containerId}`);
}

async function check(
  inv: PluginInvocation,
  conf: MidonetPluginConfig,
  delegate: RunPlugin,
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
  if (canAskIpam) await delegate({ ...inv, type: conf.ipam.type });
  const fail = (what: string) =>
    new CniError(DriverErrorCode.CheckFailed, `CHECK ${ifName} in ${netns}: ${what}`);
  const ifIndex = (prev.interfaces ?? []).findIndex((i) => i.name === ifName && i.sandbox);
  const want = prev.interfaces?.[ifIndex];
  if (!want) throw fail(`prevResult lists no interface ${ifName} with a sandbox`);
  if (want.sandbox !== netns) throw fail(`prevResult has sandbox ${want.sandbox}, not ${netns}`);
  const wantsV6 = (prev.ips ?? []).some((ip) => ipFamily(ip.address) === 6);
  const state = await inspectPodInterface(netns, ifName, wantsV6).catch((err) => {
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
  for (const ip of prev.ips ?? []) {
    if (ip.interface !== undefined && ip.interface !== ifIndex) continue;
    const cidr = parseCidr(ip.address);
    if (!cidr) throw fail(`prevResult address ${ip.address} is not a CIDR`);
    const present = state.addresses.some((a) => {
      const have = parseIp(a.local);
      return have && a.prefixlen === cidr.prefix && formatIp(have) === formatIp(cidr.bytes);
    });
    if (!present) throw fail(`address ${ip.address} is missing`);
    // The subnet route the kernel adds with the address.
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

function prevResultOf(inv: PluginInvocation): Result100 | undefined {
  const prev = inv.config.prevResult;
  if (prev === undefined || prev === null) return undefined;
  return toResult100(parseResult(prev));
}

/** The cached result the executor hands built-in plugins on DEL; undefined when absent or unreadable. */
function cachedResultOf(inv: PluginInvocation): Result100 | undefined {
  if (inv.cachedResult === undefined || inv.cachedResult === null) return undefined;
  try {
    return toResult100(parseResult(inv.cachedResult));
  } catch {
    return undefined;
  }
}

function required(inv: PluginInvocation): { containerId: string; netns: string; ifName: string } {
  const { containerId, netns, ifName } = inv;
  if (!containerId || !netns || !ifName) {
    throw new CniError(
      ErrorCode.InvalidEnvironment,
      `midonet plugin: ${inv.command} needs a container id, netns and ifname`,
    );
  }
  return { containerId, netns, ifName };
}

/** Linux failures get the driver's plumbing code and say which step failed. */
function plumbingError(err: unknown, step: string): CniError {
  if (err instanceof CniError) return err;
  if (err instanceof IpCommandError)
    return new CniError(DriverErrorCode.PlumbingFailed, `${step}: ${err.message}`);
  return new CniError(
    DriverErrorCode.PlumbingFailed,
    `${step}: ${err instanceof Error ? err.message : String(err)}`,
  );
}
