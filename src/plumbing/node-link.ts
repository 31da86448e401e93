/**
 * The node's own port on the MidoNet datapath: a veth pair in the host netns.
 * The node end carries the node IP and the routes to the cluster and service
 * CIDRs via the gateway; the peer is left up and unaddressed for the MidoNet
 * agent to bind, as a pod's host veth is. The names and addresses come from
 * the caller (the driver takes them from MidoNet's node contract).
 *
 * Not on the pod path (it runs once per config load), so iproute2 batches do
 * the changes whichever plumbing backend serves pods.
 */
import { readFile, writeFile } from "node:fs/promises";
import { normalizeMac } from "../net/mac.js";
import { IpCommandError, ipBatch, parseJsonLines } from "./ip-batch.js";
import { showLink } from "./pod-interface.js";
import type { LinkInfo } from "./pod-interface-types.js";

const IPV4_FORWARD_SYSCTL = "/proc/sys/net/ipv4/ip_forward";

export interface NodeRoute {
  /** A CIDR. */
  dst: string;
  gw: string;
}

export interface NodeLinkSpec {
  /** The addressed end in the host. */
  nodeIf: string;
  /** The agent's end. */
  peerIf: string;
  mtu: number;
  /** The node IP with the pod CIDR's prefix, e.g. "10.244.3.2/24". */
  addressCidr: string;
  routes: readonly NodeRoute[];
}

interface AddrShow {
  addr_info?: { family?: string; local?: string; prefixlen?: number }[];
}

interface RouteShow {
  dst?: string;
  gateway?: string;
}

/**
 * Makes the host match `spec` and answers the MAC of the node end. Idempotent:
 * the pair is created only when missing (re-created when the node end is there
 * without its peer), MTUs and up-state are set every time, the wanted address
 * and routes are `replace`d, and IPv4 addresses and gateway routes on the node
 * end that the spec no longer names (a pod CIDR or a service CIDR that changed)
 * are removed. The whole change is one batch that stops at the failing step.
 *
 * `changes`, when given, receives what the host did not already match (empty
 * when everything was in place), so that a periodic re-application can tell a
 * repair from a no-op.
 */
export async function ensureNodeLink(spec: NodeLinkSpec, changes?: string[]): Promise<string> {
  const { nodeIf, peerIf } = spec;
  const found: string[] = [];
  const cmds: string[] = [];
  let node = await showVeth(nodeIf);
  const peer = await showVeth(peerIf);
  if (node && !peer) {
    // Half a pair (the peer moved away or renamed): start over.
    cmds.push(`link del ${nodeIf}`);
    found.push(`${peerIf} missing: pair re-created`);
    node = undefined;
  }
  if (!node) {
    if (peer) cmds.push(`link del ${peerIf}`);
    cmds.push(`link add ${nodeIf} mtu ${spec.mtu} type veth peer name ${peerIf} mtu ${spec.mtu}`);
    if (found.length === 0) found.push(`${nodeIf} missing: pair created`);
  }
  cmds.push(`link set ${nodeIf} mtu ${spec.mtu} up`, `link set ${peerIf} mtu ${spec.mtu} up`);
  if (node && peer) {
    for (const l of [node, peer]) {
      if (!l.flags?.includes("UP")) found.push(`${l.ifname} was down`);
      if (l.mtu !== spec.mtu) found.push(`${l.ifname} had mtu ${l.mtu}`);
    }
  }

  const want = spec.addressCidr;
  const wantRoutes = new Set(spec.routes.map((r) => `${r.dst} ${r.gw}`));
  if (node) {
    const [addrs, routes] = parseJsonLines<AddrShow & RouteShow>(
      await ipBatch([`addr show dev ${nodeIf}`, `route show dev ${nodeIf}`], { json: true }),
    );
    let hasWanted = false;
    for (const a of addrs?.[0]?.addr_info ?? []) {
      if (a.family !== "inet" || !a.local) continue;
      const have = `${a.local}/${a.prefixlen}`;
      if (have === want) hasWanted = true;
      else {
        cmds.push(`addr del ${have} dev ${nodeIf}`);
        found.push(`address ${have} removed`);
      }
    }
    if (!hasWanted) found.push(`address ${want} missing`);
    const haveRoutes = new Set<string>();
    for (const r of routes ?? []) {
      if (!r.gateway || !r.dst) continue;
      // iproute2 prints a host route's destination without its /32.
      const dst = /^\d+\.\d+\.\d+\.\d+$/.test(r.dst) ? `${r.dst}/32` : r.dst;
      haveRoutes.add(`${dst} ${r.gateway}`);
      if (!wantRoutes.has(`${dst} ${r.gateway}`)) {
        cmds.push(`route del ${dst} via ${r.gateway} dev ${nodeIf}`);
        found.push(`route ${dst} via ${r.gateway} removed`);
      }
    }
    for (const r of spec.routes)
      if (!haveRoutes.has(`${r.dst} ${r.gw}`)) found.push(`route ${r.dst} via ${r.gw} missing`);
  }
  cmds.push(`addr replace ${want} dev ${nodeIf}`);
  for (const r of spec.routes) cmds.push(`route replace ${r.dst} via ${r.gw} dev ${nodeIf}`);
  await ipBatch(cmds);

  const link = await showLink(nodeIf);
  const mac = link?.address ? normalizeMac(link.address) : undefined;
  if (!mac)
    throw new IpCommandError(`link show ${nodeIf}`, "no MAC address after setup", undefined);
  changes?.push(...found);
  return mac;
}

/** A link that must be a veth when it exists. */
async function showVeth(name: string): Promise<LinkInfo | undefined> {
  const link = await showLink(name);
  const kind = link?.linkinfo?.info_kind;
  if (kind && kind !== "veth")
    throw new IpCommandError(`link show ${name}`, `exists but is a ${kind}, not a veth`, undefined);
  return link;
}

/** Removes the pair (deleting either end removes both); missing is fine. Answers whether it was there. */
export async function removeNodeLink(nodeIf: string, peerIf: string): Promise<boolean> {
  let removed = false;
  for (const name of [nodeIf, peerIf]) {
    try {
      await ipBatch([`link del ${name}`]);
      removed = true;
    } catch (err) {
      if (!(err instanceof IpCommandError && err.notFound)) throw err;
    }
  }
  return removed;
}

/**
 * Turns IPv4 forwarding on (the node routes between its link and the rest of
 * the host); answers whether it had to (false when it already was).
 */
export async function enableIpv4Forwarding(path: string = IPV4_FORWARD_SYSCTL): Promise<boolean> {
  if ((await readFile(path, "utf8")).trim() === "1") return false;
  try {
    await writeFile(path, "1\n");
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    // A container that is not privileged gets /proc/sys read-only, even with the host's network.
    if (code === "EROFS" || code === "EACCES" || code === "EPERM") {
      throw new Error(
        `net.ipv4.ip_forward is 0 on this node and ${path} cannot be written here (${code}): the midonet datapath needs it on; set it on the node (sysctl -w net.ipv4.ip_forward=1, kept in /etc/sysctl.d) or let the driver's container write /proc/sys`,
      );
    }
    throw err;
  }
  return true;
}
