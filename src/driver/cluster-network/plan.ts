/**
 * What this node's kernel should hold to reach every other node's pods, and
 * the masquerade table: pure functions from the settings and the Nodes to
 * routes, VXLAN entries and nftables text. The reconciler (reconciler.ts) lists
 * what is there and makes it so.
 *
 * Per peer Node and family:
 * - host-gw: `<peer pod CIDR> via <peer node address>` — the peer must be on a
 *   subnet of this node (one L2 segment), else the kernel refuses the route;
 * - vxlan: `<peer pod CIDR> via <peer VTEP address> dev midokube-vxlan
 *   onlink`, the neighbour `<peer VTEP address> lladdr <peer VTEP MAC>` and the
 *   forwarding entry `<peer VTEP MAC> dst <peer node address>`. A node's VTEP
 *   address is its pod CIDR's network address (flannel's choice: unique per
 *   node, never a pod's), its MAC the one its Node's annotation publishes. The
 *   tunnel runs over the nodes' IPv4 addresses and carries both families: an
 *   IPv6 pod CIDR gets its own VTEP address (its network address) and
 *   neighbour, and shares the peer's forwarding entry;
 * - auto: host-gw for peers on a subnet of this node, vxlan for the others.
 */
import { cidrContains, cidrNetwork, formatIp, parseCidr, parseIp } from "../../net/ip.js";
import { derivedMac } from "../../net/mac.js";
import type { PeerRoute } from "../../plumbing/cluster-routes.js";
import type { FdbEntry, NeighbourEntry } from "../../plumbing/vxlan.js";
import type { ClusterNode } from "./nodes.js";
import { type ClusterNetworkSettings, VXLAN_DEVICE } from "./settings.js";

/** The route protocol number of the driver's routes (rtnetlink's RTPROT_*: none uses it). */
export const ROUTE_PROTOCOL = 157;

/** The nftables table the driver owns (family inet), rewritten whole on every change. */
export const MASQUERADE_TABLE = "cni-driver";

/** VXLAN's encapsulation over IPv4: outer IP 20 + UDP 8 + VXLAN 8 + inner Ethernet 14. */
export const VXLAN_OVERHEAD = 50;

/** A node's VTEP MAC, derived from its name: the same across restarts and re-creations of the device. */
export function vtepMacOf(nodeName: string): string {
  return derivedMac(`cni-driver vtep ${nodeName}`);
}

/** The network address of a pod CIDR: the node's VTEP address. */
function vtepAddressOf(podCidr: string): string {
  return formatIp(cidrNetwork(parseCidr(podCidr) as NonNullable<ReturnType<typeof parseCidr>>));
}

export interface VxlanDevicePlan {
  name: string;
  vni: number;
  port: number;
  local: string;
  mac: string;
  /** The VTEP addresses: "10.244.1.0/32", and "fd00:10:244:1::/128" with an IPv6 pod CIDR. */
  addresses: string[];
}

export interface CrossNodePlan {
  routes: PeerRoute[];
  /** Undefined: no VXLAN device (and any left is removed). */
  vxlan?: VxlanDevicePlan;
  fdb: FdbEntry[];
  neighbours: NeighbourEntry[];
  /** Peers (or families of peers) not reached, and why: logged, never fatal. */
  skipped: { node: string; reason: string }[];
  /** The Node of the peer whose pod CIDR each route leads to (for the log). */
  nodeOf: Map<string, string>;
}

interface CrossNodeInputs {
  settings: ClusterNetworkSettings;
  selfName: string;
  nodes: readonly ClusterNode[];
  /** This node's IPv4 pod CIDR when its Node has none (`--pod-cidr`). */
  localPodCidrV4?: string;
  /** Whether a node address is on a subnet of this node (`ip route get`); asked only in auto and host-gw. */
  onLink: (address: string) => boolean;
}

function overlaps(a: string, b: string): boolean {
  const ca = parseCidr(a);
  const cb = parseCidr(b);
  if (!ca || !cb || ca.family !== cb.family) return false;
  return cidrContains(ca, cidrNetwork(cb)) || cidrContains(cb, cidrNetwork(ca));
}

export function planCrossNode(i: CrossNodeInputs): CrossNodePlan {
  const plan: CrossNodePlan = {
    routes: [],
    fdb: [],
    neighbours: [],
    skipped: [],
    nodeOf: new Map(),
  };
  const mode = i.settings.crossNode;
  if (mode === "none") return plan;
  const self = i.nodes.find((n) => n.name === i.selfName);
  const ownV4 = self?.podCidrs.v4 ?? i.localPodCidrV4;
  const ownV6 = self?.podCidrs.v6;
  const own = [ownV4, ownV6].filter((c): c is string => c !== undefined);
  if ((mode === "vxlan" || mode === "auto") && self?.ipv4 && ownV4) {
    plan.vxlan = {
      name: VXLAN_DEVICE,
      vni: i.settings.vxlan.vni,
      port: i.settings.vxlan.port,
      local: self.ipv4,
      mac: vtepMacOf(i.selfName),
      addresses: [`${vtepAddressOf(ownV4)}/32`, ...(ownV6 ? [`${vtepAddressOf(ownV6)}/128`] : [])],
    };
  }
  const skip = (node: string, reason: string) => plan.skipped.push({ node, reason });
  if (!self) {
    skip(i.selfName, "this node's own Node is not listed");
    return { ...plan, vxlan: undefined };
  }

  for (const peer of [...i.nodes].sort((a, b) => a.name.localeCompare(b.name))) {
    if (peer.name === i.selfName) continue;
    for (const family of [4, 6] as const) {
      const dst = family === 4 ? peer.podCidrs.v4 : peer.podCidrs.v6;
      if (!dst) continue;
      const under = family === 4 ? peer.ipv4 : peer.ipv6;
      const clash = own.find((c) => overlaps(c, dst));
      if (clash) {
        skip(peer.name, `its pod CIDR ${dst} overlaps this node's ${clash}`);
        continue;
      }
      const direct = mode !== "vxlan" && under !== undefined && i.onLink(under);
      if (direct) {
        plan.routes.push({ dst, via: under });
        plan.nodeOf.set(dst, peer.name);
        continue;
      }
      if (mode === "host-gw") {
        skip(
          peer.name,
          under
            ? `${under} is not on a subnet of this node: host-gw cannot reach ${dst}`
            : `no IPv${family} address in its status.addresses to reach ${dst} by`,
        );
        continue;
      }
      // VXLAN, over the nodes' IPv4 addresses whatever the pod CIDR's family.
      if (!peer.ipv4) {
        skip(peer.name, `no IPv4 address in its status.addresses to reach ${dst} by`);
        continue;
      }
      if (!plan.vxlan) {
        skip(peer.name, "this node has no IPv4 address or pod CIDR for its VXLAN endpoint");
        continue;
      }
      if (!peer.vtepMac) {
        skip(peer.name, "its Node does not publish its VTEP MAC yet");
        continue;
      }
      const vtep = vtepAddressOf(dst);
      plan.routes.push({ dst, via: vtep, dev: VXLAN_DEVICE, onlink: true });
      plan.nodeOf.set(dst, peer.name);
      if (!plan.fdb.some((e) => e.mac === peer.vtepMac && e.dst === peer.ipv4))
        plan.fdb.push({ mac: peer.vtepMac, dst: peer.ipv4 });
      plan.neighbours.push({ ip: vtep, mac: peer.vtepMac });
    }
  }
  return plan;
}

/**
 * The masquerade table's body, or undefined when nothing is to be
 * masqueraded. Pod traffic from clusterCidr (IPv4) and clusterCidrIPv6 to
 * anywhere outside them and nonMasqueradeCidrs leaves with the node's address;
 * each family has its own set of exempt ranges.
 */
export function masqueradeTableBody(s: ClusterNetworkSettings): string | undefined {
  if (!s.masquerade || (!s.clusterCidr && !s.clusterCidrIPv6)) return undefined;
  const ofFamily = (f: 4 | 6) =>
    s.nonMasqueradeCidrs.filter((c) => parseIp(c.split("/")[0] ?? "")?.family === f);
  const families = [
    { cidr: s.clusterCidr, set: "no_masquerade_v4", type: "ipv4_addr", match: "ip", f: 4 as const },
    {
      cidr: s.clusterCidrIPv6,
      set: "no_masquerade_v6",
      type: "ipv6_addr",
      match: "ip6",
      f: 6 as const,
    },
  ].filter((x): x is typeof x & { cidr: string } => x.cidr !== undefined);
  return [
    '  comment "cni-driver: masquerade of pod traffic leaving the cluster CIDR; the driver rewrites this table whole"',
    ...families.flatMap((x) => [
      `  set ${x.set} {`,
      `    type ${x.type}`,
      "    flags interval",
      "    auto-merge",
      `    elements = { ${[x.cidr, ...ofFamily(x.f)].join(", ")} }`,
      "  }",
    ]),
    "  chain postrouting {",
    "    type nat hook postrouting priority srcnat; policy accept;",
    ...families.map(
      (x) => `    ${x.match} saddr ${x.cidr} ${x.match} daddr != @${x.set} masquerade`,
    ),
    "  }",
  ].join("\n");
}
