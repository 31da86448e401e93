/**
 * Routes to other nodes' pod ranges, in the main table, each carrying a route
 * protocol number of the caller's (`proto N`): that number is how a route is
 * known to be ours, so listing by it finds exactly what we made and nothing an
 * operator, a routing daemon or the kernel put there.
 */
import { IpCommandError, ipBatch, parseJsonLines } from "./ip-batch.js";

/** One route to a pod range: via a next hop on the underlay, or through a device (VXLAN). */
export interface PeerRoute {
  /** "10.244.2.0/24". */
  dst: string;
  /** The next hop: the node's address (host-gw), or the peer's VXLAN endpoint address. */
  via: string;
  /** The device, when the route must leave through it (VXLAN); else the kernel picks. */
  dev?: string;
  /** `onlink`: the next hop is on the device even though no address of ours covers it. */
  onlink?: boolean;
}

/** A route of the main table as listed, with its protocol ("kernel", "boot", "157", …). */
export interface TableRoute {
  dst: string;
  protocol: string;
  via?: string;
  dev?: string;
}

interface RouteJson {
  dst?: string;
  gateway?: string;
  dev?: string;
  protocol?: string;
  /** Absent for a unicast route ("unreachable", "blackhole", … otherwise). */
  type?: string;
  flags?: string[];
}

const familyOf = (cidr: string): 4 | 6 => (cidr.includes(":") ? 6 : 4);

/** iproute2 prints a host route without its prefix ("10.1.2.3"); ours always carry one. */
function withPrefix(dst: string): string {
  if (dst === "default" || dst.includes("/")) return dst;
  return `${dst}/${dst.includes(":") ? 128 : 32}`;
}

/** Every route of `family` in the main table (iproute2 omits the protocol of "boot" routes). */
export async function listMainRoutes(family: 4 | 6): Promise<TableRoute[]> {
  const lines = await ipBatch(["route show table main"], { json: true, ipv6: family === 6 });
  return (parseJsonLines<RouteJson>(lines)[0] ?? [])
    .filter((r) => r.dst !== undefined)
    .map((r) => ({
      dst: withPrefix(r.dst as string),
      protocol: r.protocol ?? "boot",
      ...(r.gateway ? { via: r.gateway } : {}),
      ...(r.dev ? { dev: r.dev } : {}),
    }));
}

/** The routes of `family` in the main table that carry `protocol`: ours. */
export async function listRoutesByProtocol(protocol: number, family: 4 | 6): Promise<PeerRoute[]> {
  const lines = await ipBatch([`route show table main proto ${protocol}`], {
    json: true,
    ipv6: family === 6,
  });
  return (parseJsonLines<RouteJson>(lines)[0] ?? [])
    .filter((r) => r.dst !== undefined && r.gateway !== undefined)
    .map((r) => ({
      dst: withPrefix(r.dst as string),
      via: r.gateway as string,
      ...(r.dev ? { dev: r.dev } : {}),
      ...(r.flags?.includes("onlink") ? { onlink: true } : {}),
    }));
}

function routeSpec(r: PeerRoute): string {
  return `${r.dst} via ${r.via}${r.dev ? ` dev ${r.dev}` : ""}${r.onlink ? " onlink" : ""}`;
}

/**
 * Adds each route, or replaces the route to the same destination (which must
 * be ours: the caller checks). Several routes of one family in one `ip -batch` (one exec, not one each:
 * a thousand Nodes appearing at once are a thousand routes). It stops at the
 * first refused line, the ones before it applied; the caller's next run
 * finishes the rest.
 */
export async function replacePeerRoutes(routes: PeerRoute[], protocol: number): Promise<void> {
  if (routes.length === 0) return;
  await ipBatch(
    routes.map((r) => `route replace ${routeSpec(r)} table main proto ${protocol}`),
    { ipv6: familyOf(routes[0]?.dst ?? "") === 6 },
  );
}

/** Deletes our route to `dst` (only one of `protocol`); one already gone is fine. */
export async function deletePeerRoute(dst: string, protocol: number): Promise<void> {
  try {
    await ipBatch([`route del ${dst} table main proto ${protocol}`], {
      ipv6: familyOf(dst) === 6,
    });
  } catch (err) {
    if (err instanceof IpCommandError && /No such process|not found/i.test(err.reason)) return;
    throw err;
  }
}

/**
 * The subnets this node reaches without a gateway: the main table's
 * link-scope routes (an interface's connected subnet, and any route an
 * operator added as on-link; for IPv6, every unicast route without a
 * gateway), leaving out those through `exceptDev` (the VXLAN device's own).
 * One listing answers for every peer.
 */
export async function listOnLinkSubnets(family: 4 | 6, exceptDev?: string): Promise<string[]> {
  // IPv6 routes all have global scope, connected ones included: there, on-link is "no gateway".
  const lines = await ipBatch([`route show table main${family === 4 ? " scope link" : ""}`], {
    json: true,
    ipv6: family === 6,
  });
  return (parseJsonLines<RouteJson>(lines)[0] ?? [])
    .filter(
      (r) =>
        r.dst !== undefined &&
        r.gateway === undefined &&
        r.type === undefined &&
        r.dev !== undefined &&
        r.dev !== exceptDev,
    )
    .map((r) =>
      withPrefix(r.dst === "default" ? (family === 6 ? "::/0" : "0.0.0.0/0") : (r.dst as string)),
    );
}
