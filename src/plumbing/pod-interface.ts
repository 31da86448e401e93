/**
 * A pod's veth pair: the container end named as the runtime asked, inside the
 * pod's netns, with its addresses and routes; the host end in the host netns.
 * Two `ip -batch` execs set a pod up; one tears it down.
 */
import { IpCommandError, ipBatch, parseJsonLines } from "./ip-batch.js";
import { netnsExists } from "./netns.js";

export interface PodAddress {
  /** CIDR with host bits, e.g. "10.1.0.5/24". */
  cidr: string;
}

export interface PodRoute {
  dst: string;
  gw?: string;
}

export interface PodInterfaceSpec {
  netns: string;
  ifName: string;
  hostIfName: string;
  mtu: number;
  containerMac: string;
  hostMac: string;
  addresses: readonly PodAddress[];
  routes: readonly PodRoute[];
}

export interface HostAttachment {
  /** Enslave the host end to this bridge; absent: leave it standalone (an agent binds it). */
  bridge?: string;
}

/**
 * Creates the pair from inside the netns, moving the host end out to our own
 * netns (identified by our pid, which nsenter leaves in place), then configures
 * the container end. If any step fails the pair is removed before the error is
 * returned, so a failed ADD leaves no link behind.
 */
export async function createPodInterface(
  spec: PodInterfaceSpec,
  host: HostAttachment,
): Promise<void> {
  const inNetns = [
    `link add ${spec.ifName} mtu ${spec.mtu} address ${spec.containerMac} type veth peer name ${spec.hostIfName} mtu ${spec.mtu} address ${spec.hostMac} netns ${process.pid}`,
    ...spec.addresses.map((a) => `addr add ${a.cidr} dev ${spec.ifName}`),
    `link set ${spec.ifName} up`,
    "link set lo up",
    ...spec.routes.map((r) => `route add ${r.dst}${r.gw ? ` via ${r.gw}` : ""} dev ${spec.ifName}`),
  ];
  try {
    await ipBatch(inNetns, { netns: spec.netns });
  } catch (err) {
    // The first command creates the pair; a later failure leaves it behind.
    if (err instanceof IpCommandError && !err.command.startsWith("link add")) {
      await deletePodInterface({
        netns: spec.netns,
        ifName: spec.ifName,
        hostIfName: spec.hostIfName,
      });
    }
    throw err;
  }
  const onHost = host.bridge
    ? [`link set ${spec.hostIfName} master ${host.bridge} up`]
    : [`link set ${spec.hostIfName} up`];
  try {
    await ipBatch(onHost);
  } catch (err) {
    await deletePodInterface({
      netns: spec.netns,
      ifName: spec.ifName,
      hostIfName: spec.hostIfName,
    });
    throw err;
  }
}

export interface PodInterfaceRef {
  netns?: string;
  ifName: string;
  hostIfName: string;
  /** When known, the host end is only deleted if it still has this MAC: a newer sandbox of the same pod may own the name by now. */
  hostMac?: string;
}

/**
 * Idempotent teardown. Deleting either end of a veth deletes both at once, so
 * the container end is removed when the netns is still there; otherwise the host
 * end is removed explicitly (netns teardown is asynchronous, and a stale host
 * veth would block the next sandbox of the same pod with "File exists").
 * Returns whether anything was removed.
 */
export async function deletePodInterface(ref: PodInterfaceRef): Promise<boolean> {
  if (await netnsExists(ref.netns)) {
    try {
      await ipBatch([`link del ${ref.ifName}`], { netns: ref.netns });
      return true;
    } catch (err) {
      if (!(err instanceof IpCommandError) || !err.notFound) throw err;
    }
  }
  const hostLink = await showLink(ref.hostIfName);
  if (!hostLink) return false;
  if (
    ref.hostMac &&
    hostLink.address &&
    hostLink.address.toLowerCase() !== ref.hostMac.toLowerCase()
  ) {
    return false;
  }
  try {
    await ipBatch([`link del ${ref.hostIfName}`]);
    return true;
  } catch (err) {
    if (err instanceof IpCommandError && err.notFound) return false;
    throw err;
  }
}

export interface LinkInfo {
  ifname: string;
  address?: string;
  mtu?: number;
  operstate?: string;
  flags?: string[];
  linkinfo?: { info_kind?: string };
  master?: string;
}

/** A link in the host (or in `netns`), undefined when it does not exist. */
export async function showLink(name: string, netns?: string): Promise<LinkInfo | undefined> {
  try {
    const lines = await ipBatch([`link show dev ${name}`], { json: true, details: true, netns });
    return parseJsonLines<LinkInfo>(lines)[0]?.[0];
  } catch (err) {
    if (err instanceof IpCommandError && err.notFound) return undefined;
    throw err;
  }
}

export interface AddrInfo {
  family: "inet" | "inet6";
  local: string;
  prefixlen: number;
}

export interface RouteInfo {
  dst: string;
  gateway?: string;
}

export interface PodInterfaceState {
  link: LinkInfo;
  addresses: AddrInfo[];
  routes: RouteInfo[];
}

/**
 * What the container end looks like now, for CHECK; undefined when it is missing.
 * One exec (link, addresses, IPv4 routes); a second for IPv6 routes only when asked,
 * because a batch lists routes of one family.
 */
export async function inspectPodInterface(
  netns: string,
  ifName: string,
  withIpv6Routes: boolean,
): Promise<PodInterfaceState | undefined> {
  let lines: string[];
  try {
    lines = await ipBatch([`addr show dev ${ifName}`, `route show dev ${ifName}`], {
      json: true,
      details: true,
      netns,
    });
  } catch (err) {
    if (err instanceof IpCommandError && err.notFound) return undefined;
    throw err;
  }
  const [links = [], routes4 = []] = parseJsonLines(lines);
  const link = links[0] as (LinkInfo & { addr_info?: AddrInfo[] }) | undefined;
  if (!link) return undefined;
  const routes6 = withIpv6Routes
    ? (parseJsonLines(
        await ipBatch([`route show dev ${ifName}`], { json: true, ipv6: true, netns }),
      )[0] ?? [])
    : [];
  return {
    link,
    addresses: (link.addr_info ?? []).filter((a) => a.family === "inet" || a.family === "inet6"),
    routes: [...routes4, ...routes6] as unknown as RouteInfo[],
  };
}
