/**
 * The per-node Linux bridge of the kernel datapath, through iproute2: it holds
 * the gateway addresses and the host veths. ensureBridge and listBridgePorts
 * are iproute2Plumbing's (iproute2.ts); the gateways' pruning
 * (lifecycle/bridge-gateways.ts) reads and removes addresses here, and the
 * Services steering (services/bridge-steering.ts) sets kube-proxy's settings
 * on existing bridges here, whichever implementation serves pods: both are
 * rare, and neither is a pod's path.
 */
import { readFileSync } from "node:fs";
import { IpCommandError, ipBatch, parseJsonLines } from "./ip-batch.js";
import { bridgeMac } from "./mac.js";
import { showLink } from "./pod-interface.js";

/**
 * Makes sure the bridge exists, is up and carries each gateway address (idempotent:
 * `addr replace`). Several networks may share one bridge, each adding its gateway.
 */
export async function ensureBridge(
  name: string,
  gatewayCidrs: readonly string[],
  mtu?: number,
  netfilter = true,
): Promise<void> {
  const link = await showLink(name);
  const cmds: string[] = [];
  if (!link)
    cmds.push(`link add ${name}${mtu ? ` mtu ${mtu}` : ""} address ${bridgeMac(name)} type bridge`);
  else if (link.linkinfo?.info_kind && link.linkinfo.info_kind !== "bridge") {
    throw new IpCommandError(
      `link show ${name}`,
      `exists but is a ${link.linkinfo.info_kind}, not a bridge`,
      undefined,
    );
  }
  // Bridged IP traffic through the IP hooks (br_netfilter), whatever the
  // node-wide sysctl: kube-proxy's DNAT to a pod on the same bridge needs the
  // reply un-NATed on its way back across the bridge.
  cmds.push(bridgeNetfilterCommand(name, netfilter));
  for (const cidr of gatewayCidrs)
    cmds.push(`addr replace ${cidr} dev ${name}${cidr.includes(":") ? " nodad" : ""}`);
  cmds.push(`link set ${name} up`);
  try {
    await ipBatch(cmds);
  } catch (err) {
    // Two networks ensuring the same bridge at once: the loser sees "File exists".
    if (err instanceof IpCommandError && err.exists && !link)
      return ensureBridge(name, gatewayCidrs, mtu, netfilter);
    throw err;
  }
}

function bridgeNetfilterCommand(name: string, on: boolean): string {
  const v = on ? 1 : 0;
  return `link set ${name} type bridge nf_call_iptables ${v} nf_call_ip6tables ${v}`;
}

/**
 * The settings kube-proxy needs on an existing bridge, made or unmade: its
 * IP traffic through br_netfilter, and hairpin mode on every port. A bridge
 * that does not exist is fine: whatever makes it later asks for the same.
 */
export async function setBridgeForKubeProxy(
  name: string,
  settings: { netfilter: boolean; hairpin: boolean },
): Promise<void> {
  let ports: string[];
  try {
    ports = await listBridgePorts(name);
    await ipBatch([
      bridgeNetfilterCommand(name, settings.netfilter),
      ...ports.map(
        (p) => `link set dev ${p} type bridge_slave hairpin ${settings.hairpin ? "on" : "off"}`,
      ),
    ]);
  } catch (err) {
    if (err instanceof IpCommandError && err.notFound) return;
    throw err;
  }
}

/**
 * Whether br_netfilter hands every bridge's IP traffic to the IP hooks on this
 * node (net.bridge.bridge-nf-call-iptables, in this network namespace): set
 * node-wide by whoever runs iptables on bridged traffic (kube-proxy's setup
 * guides ask for it). False when br_netfilter is not loaded.
 */
export function nodeBridgeNetfilter(): boolean {
  try {
    return readFileSync("/proc/sys/net/bridge/bridge-nf-call-iptables", "utf8").trim() === "1";
  } catch {
    return false;
  }
}

/** A host link's MAC as the kernel has it now; undefined when there is no such link. */
export function linkMac(name: string): string | undefined {
  try {
    return readFileSync(`/sys/class/net/${name}/address`, "utf8").trim();
  } catch {
    return undefined;
  }
}

/** The names of the links enslaved to the bridge; [] when it does not exist. */
export async function listBridgePorts(name: string): Promise<string[]> {
  try {
    const lines = await ipBatch([`link show master ${name}`], { json: true });
    return (parseJsonLines<{ ifname: string }>(lines)[0] ?? []).map((l) => l.ifname);
  } catch (err) {
    if (err instanceof IpCommandError && err.notFound) return [];
    throw err;
  }
}

/**
 * The global-scope addresses on the bridge ("10.244.1.1/24"): the gateways put
 * there; its IPv6 link-local address is the kernel's. Undefined when there is
 * no such bridge.
 */
export async function listBridgeAddresses(name: string): Promise<string[] | undefined> {
  try {
    const lines = await ipBatch([`addr show dev ${name}`], { json: true });
    const links = parseJsonLines<{
      addr_info?: { local?: string; prefixlen?: number; scope?: string }[];
    }>(lines)[0];
    if (!links || links.length === 0) return undefined;
    return (links[0]?.addr_info ?? [])
      .filter((a) => a.scope === "global" && a.local !== undefined)
      .map((a) => `${a.local}/${a.prefixlen}`);
  } catch (err) {
    if (err instanceof IpCommandError && err.notFound) return undefined;
    throw err;
  }
}

/** Removes addresses from the bridge; one already gone is fine. */
export async function removeBridgeAddresses(name: string, cidrs: readonly string[]): Promise<void> {
  for (const cidr of cidrs) {
    try {
      await ipBatch([`addr del ${cidr} dev ${name}`]);
    } catch (err) {
      // EADDRNOTAVAIL ("Cannot assign requested address"): removed meanwhile.
      if (
        !(
          err instanceof IpCommandError &&
          (err.notFound || /assign requested|Address not found/i.test(err.reason))
        )
      )
        throw err;
    }
  }
}
