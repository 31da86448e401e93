/**
 * A pod's veth pair through iproute2: the container end named as the runtime
 * asked, inside the pod's netns, with its addresses and routes; the host end in
 * the host netns. Two `ip -batch` execs set a pod up (the first can overlap
 * IPAM) and one tears it down. Stateless functions, assembled with bridge.ts's
 * into iproute2Plumbing (iproute2.ts), the fallback implementation of
 * PodPlumbing; showLink also serves the node link (node-link.ts), which is
 * iproute2's whichever implementation serves pods.
 */
import { IpCommandError, ipBatch, parseJsonLines } from "./ip-batch.js";
import { hostMacStillMatches } from "./mac.js";
import { netnsExists, netnsName } from "./netns.js";
import type {
  AddrInfo,
  ContainerSideSpec,
  HostAttachment,
  LinkInfo,
  PodInterfaceRef,
  PodInterfaceState,
  PodRoute,
  RouteInfo,
  VethSpec,
} from "./pod-interface-types.js";

/**
 * How `ip link … netns X` can name the pod's namespace: a name under /run/netns,
 * or the pid of /proc/<pid>/ns/net. Other nsfs paths (bind mounts elsewhere) have
 * no such name; the pair is then created from inside the namespace instead.
 */
// Exported for its tests only (integration/plumbing.test.ts).
export function netnsLinkRef(path: string): string | undefined {
  const named = netnsName(path);
  if (named) return named;
  const byPid = /^\/proc\/(\d+)\/ns\/net$/.exec(path);
  return byPid ? byPid[1] : undefined;
}

/**
 * Phase 1: the veth pair, its host end up (on the bridge when asked) and its
 * container end, named as the runtime asked, inside the pod's netns, without
 * addresses, so it can run while IPAM is still choosing them. Through netlink
 * the container end and the pod's lo come up now too, which leaves phase 2
 * only addresses and routes; through iproute2 (one exec from the host for a
 * nameable netns) they come up in phase 2. On failure nothing is left behind.
 */
export async function createVethPair(spec: VethSpec, host: HostAttachment): Promise<void> {
  const ref = netnsLinkRef(spec.netns);
  const master = host.bridge ? ` master ${host.bridge}` : "";
  const hairpin =
    host.bridge && host.hairpin !== false
      ? [`link set dev ${spec.hostIfName} type bridge_slave hairpin on`]
      : [];
  if (ref !== undefined) {
    try {
      await ipBatch([
        `link add name ${spec.hostIfName} mtu ${spec.mtu} address ${spec.hostMac}${master} up type veth peer name ${spec.ifName} mtu ${spec.mtu} address ${spec.containerMac} netns ${ref}`,
        ...hairpin,
      ]);
    } catch (err) {
      // The pair made, hairpin refused: nothing left behind.
      if (!(err instanceof IpCommandError && err.command.includes("hairpin"))) throw err;
      await ipBatch([`link del ${spec.hostIfName}`]).catch(() => undefined);
      throw err;
    }
    return;
  }
  // Created inside the netns, the host end moved out to our own netns (named by
  // our pid, which nsenter leaves in place); then attached from the host.
  await ipBatch(
    [
      `link add name ${spec.ifName} mtu ${spec.mtu} address ${spec.containerMac} type veth peer name ${spec.hostIfName} mtu ${spec.mtu} address ${spec.hostMac} netns ${process.pid}`,
    ],
    { netns: spec.netns },
  );
  try {
    await ipBatch([`link set dev ${spec.hostIfName}${master} up`, ...hairpin]);
  } catch (err) {
    await deletePodInterface({
      netns: spec.netns,
      ifName: spec.ifName,
      hostIfName: spec.hostIfName,
      hostMac: spec.hostMac,
    });
    throw err;
  }
}

/**
 * Phase 2, once IPAM has answered: addresses, the interface and lo up (if
 * phase 1 has not), routes. One exec inside the netns through iproute2 (one
 * more per family for an `ifNoDefault` route). The caller removes the pair if
 * it fails. Answers the `ifNoDefault` routes left out: the pod had one already.
 */
export async function configureContainerSide(spec: ContainerSideSpec): Promise<PodRoute[]> {
  const skipped: PodRoute[] = [];
  const routes: PodRoute[] = [];
  for (const r of spec.routes) {
    if (r.ifNoDefault && (await hasDefaultRoute(spec.netns, r.dst.includes(":") ? 6 : 4)))
      skipped.push(r);
    else routes.push(r);
  }
  await ipBatch(
    [
      // nodad for IPv6, as the netlink path: no 2 s of a tentative address after ADD answered.
      ...spec.addresses.map(
        (a) => `addr add ${a.cidr} dev ${spec.ifName}${a.cidr.includes(":") ? " nodad" : ""}`,
      ),
      `link set dev ${spec.ifName} up`,
      "link set lo up",
      ...routes.map((r) => `route add ${r.dst}${r.gw ? ` via ${r.gw}` : ""} dev ${spec.ifName}`),
    ],
    { netns: spec.netns },
  );
  return skipped;
}

/** Whether the netns's main table has a default route of the family (iproute2 path). */
async function hasDefaultRoute(netns: string, family: 4 | 6): Promise<boolean> {
  const lines = await ipBatch(["route show default"], { netns, json: true, ipv6: family === 6 });
  return (parseJsonLines<unknown>(lines)[0] ?? []).length > 0;
}

/**
 * Idempotent teardown. Deleting either end of a veth deletes both at once, so
 * the container end is removed when the netns is still there; otherwise the host
 * end is removed explicitly (netns teardown is asynchronous, and a stale host
 * veth would block the next sandbox of the same pod with "File exists").
 * Returns whether anything was removed.
 */
export async function deletePodInterface(ref: PodInterfaceRef): Promise<boolean> {
  if (netnsExists(ref.netns)) {
    try {
      await ipBatch([`link del dev ${ref.ifName}`], { netns: ref.netns });
      return true;
    } catch (err) {
      if (!(err instanceof IpCommandError) || !err.notFound) throw err;
    }
  }
  const hostLink = await showLink(ref.hostIfName);
  if (!hostLink) return false;
  if (!hostMacStillMatches(ref.hostMac, hostLink.address)) return false;
  try {
    await ipBatch([`link del dev ${ref.hostIfName}`]);
    return true;
  } catch (err) {
    if (err instanceof IpCommandError && err.notFound) return false;
    throw err;
  }
}

/** Removes one host link by name; missing is fine. */
export async function deleteHostLink(name: string): Promise<void> {
  try {
    await ipBatch([`link del dev ${name}`]);
  } catch (err) {
    if (!(err instanceof IpCommandError && err.notFound)) throw err;
  }
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
