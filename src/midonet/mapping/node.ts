/**
 * A Node maps to its own bridge, linked to the cluster router, plus the port the
 * host itself is plugged into (docs/midonet.md; midonet-kubernetes
 * pkg/converter/node). Ids hang off base = IDForKey("Node", <name>):
 *
 *   Bridge       base                            {name, tenantId, inboundFilterId: KUBE-MAIN}
 *   Port         SubID(base, "Bridge Port")      bridge side of the link to the router
 *   Port         SubID(base, "Router Port")      on the cluster router {networkAddress/Length pod CIDR, portAddress gateway, portMac MACForKey(node)}
 *   Route        SubID(base, "Route")            podCIDR via the router port
 *   PortLink     bridge port ↔ router port
 *   Chain        SubID(base, "Node Port Chain")  KUBE-NODE-<node>
 *   Port         SubID(base, "Node Port")        {outboundFilterId: the node chain}, bound to midokube-mido
 *   Rule         SubID(base, "Node Port SNAT Rule")  in the node chain: traffic from the node IP leaves as the gateway
 *   Route        IDForKey("Node Address", "<node>/<type>/<ip>")  each Internal/ExternalIP via the node IP
 *   TunnelZoneHost, HostInterfacePort, MacPort + IP4Mac (with the MAC annotation)
 *
 * Each resource is produced as soon as what it needs is known, so a node whose
 * host id is not annotated yet still gets its bridge (its pods' ports need it).
 *
 * The node link's names, the annotations and the pod CIDR's addressing are the
 * node contract's (../node-contract.ts), shared with the driver.
 *
 * IPv4 only inside MidoNet: the REST API validates route, router-port and rule
 * addresses as IPv4 (Route, RouterPort, Condition DTOs: @Pattern(IPv4.regex),
 * prefix ≤ 32). An IPv6 pod CIDR or address is reported as a warning; it still
 * reaches the node plumbing data (nodePlumbing), which is dual-stack.
 */

import { formatIp, parseIp } from "../../net/ip.js";
import { normalizeMac } from "../../net/mac.js";
import { idForKey, isUuid, macForKey, subId } from "../ids.js";
import {
  ANNOTATION_HOST_ID,
  ANNOTATION_MAC_ADDRESS,
  ANNOTATION_TUNNEL_ENDPOINT_IP,
  ANNOTATION_TUNNEL_ZONE_ID,
  NODE_INTERFACE,
  NODE_PEER_INTERFACE,
  type PodSubnet,
  podSubnet,
} from "../node-contract.js";
import { type MappingConfig, type ResolvedConfig, resolveConfig } from "./config.js";
import type { Node } from "./k8s.js";
import { MappingBuilder, nodeOwner, type ObjectMapping } from "./model.js";

export interface NodeIds {
  bridge: string;
  bridgePort: string;
  routerPort: string;
  route: string;
  chain: string;
  nodePort: string;
  snatRule: string;
}

/** The bridge of a node: what a pod's port hangs off. */
export function nodeBridgeId(config: ResolvedConfig, nodeName: string): string {
  return idForKey(config.tenant, "Node", nodeName, config.version);
}

export function nodeIds(config: ResolvedConfig, nodeName: string): NodeIds {
  const base = nodeBridgeId(config, nodeName);
  return {
    bridge: base,
    bridgePort: subId(base, "Bridge Port"),
    routerPort: subId(base, "Router Port"),
    route: subId(base, "Route"),
    chain: subId(base, "Node Port Chain"),
    nodePort: subId(base, "Node Port"),
    snatRule: subId(base, "Node Port SNAT Rule"),
  };
}

/** The node's MidoNet host (annotation midonet.org/host-id), lowercase; undefined when absent or not a UUID. */
export function nodeHostId(node: Node): string | undefined {
  const text = node.metadata.annotations?.[ANNOTATION_HOST_ID]?.trim();
  return text && isUuid(text) ? text.toLowerCase() : undefined;
}

/** spec.podCIDRs, or the single spec.podCIDR of a cluster without dual-stack. */
export function nodePodCidrs(node: Node): readonly string[] {
  const cidrs = node.spec?.podCIDRs;
  if (cidrs && cidrs.length > 0) return cidrs;
  const single = node.spec?.podCIDR;
  return single ? [single] : [];
}

/** What the host needs to plug itself into the pod network (both families). */
export interface NodePlumbing {
  interfaceName: typeof NODE_INTERFACE;
  peerName: typeof NODE_PEER_INTERFACE;
  /** The network's MTU; undefined leaves the kernel's default. */
  mtu?: number;
  /** One per pod CIDR: the node address with the CIDR's prefix, and its gateway. */
  addresses: { family: 4 | 6; address: string; gateway: string }[];
  /** Cluster and service CIDRs, each via the gateway of its family. */
  routes: { dst: string; via: string }[];
}

/** The node plumbing data; undefined until the node has a pod CIDR. */
export function nodePlumbing(
  node: Node,
  config: MappingConfig | ResolvedConfig,
): NodePlumbing | undefined {
  const c = resolveConfig(config);
  const subnets: PodSubnet[] = [];
  for (const cidr of nodePodCidrs(node)) {
    const r = podSubnet(cidr);
    if (r.ok) subnets.push(r.subnet);
  }
  if (subnets.length === 0) return undefined;
  const plumbing: NodePlumbing = {
    interfaceName: NODE_INTERFACE,
    peerName: NODE_PEER_INTERFACE,
    addresses: subnets.map((s) => ({
      family: s.family,
      address: `${s.nodeIp}/${s.prefix}`,
      gateway: s.gateway,
    })),
    routes: [],
  };
  if (c.mtu !== undefined) plumbing.mtu = c.mtu;
  for (const dst of [...c.clusterCidrs, ...c.serviceCidrs]) {
    const family = parseIp(dst.split("/")[0] ?? "")?.family;
    const via = subnets.find((s) => s.family === family)?.gateway;
    if (via) plumbing.routes.push({ dst, via });
  }
  return plumbing;
}

/** What every step of mapping one node shares. */
interface NodeMapping {
  node: Node;
  name: string;
  c: ResolvedConfig;
  ids: NodeIds;
  b: MappingBuilder;
}

/**
 * The resources of one node, each step adding what it can with what the node
 * has so far (see the header), in the order MidoNet needs them created.
 */
export function mapNode(node: Node, config: MappingConfig | ResolvedConfig): ObjectMapping {
  const c = resolveConfig(config);
  const name = node.metadata.name;
  const m: NodeMapping = {
    node,
    name,
    c,
    ids: nodeIds(c, name),
    b: new MappingBuilder(nodeOwner(name)),
  };
  const v4 = mappablePodSubnet(m);
  const hostId = annotatedHostId(m);
  addBridge(m);
  if (v4) addRouterLink(m, v4);
  addNodePort(m);
  if (v4) {
    addNodeSnat(m, v4);
    addNodeAddressRoutes(m, v4);
  }
  if (hostId) addHostBinding(m, hostId);
  addMacEntries(m, v4);
  return m.b.build();
}

/** The pod CIDR MidoNet carries: the first IPv4 one; the others are warned about. */
function mappablePodSubnet({ node, b }: NodeMapping): PodSubnet | undefined {
  let v4: PodSubnet | undefined;
  for (const cidr of nodePodCidrs(node)) {
    const r = podSubnet(cidr);
    if (!r.ok) {
      b.warn(
        r.reason === "invalid" ? "invalid-value" : "pod-cidr-too-small",
        `pod CIDR ${JSON.stringify(cidr)} ${r.reason === "invalid" ? "does not parse" : "has no room for gateway and node"}`,
      );
    } else if (r.subnet.family === 6) {
      b.warn(
        "ipv6-not-mappable",
        `pod CIDR ${r.subnet.cidr}: MidoNet routes and router ports are IPv4 only`,
      );
    } else if (!v4) {
      v4 = r.subnet;
    }
  }
  return v4;
}

/** The node's host id, warning when it is missing or not a UUID. */
function annotatedHostId({ node, b }: NodeMapping): string | undefined {
  const hostText = node.metadata.annotations?.[ANNOTATION_HOST_ID];
  const hostId = nodeHostId(node);
  if (hostText === undefined || hostText.trim() === "") {
    b.warn("no-host-id", `no ${ANNOTATION_HOST_ID} annotation yet: node port not bound`);
  } else if (!hostId) {
    b.warn("invalid-value", `${ANNOTATION_HOST_ID} ${JSON.stringify(hostText)} is not a UUID`);
  }
  return hostId;
}

/** The node's bridge and its port towards the cluster router. */
function addBridge({ name, c, ids, b }: NodeMapping): void {
  const g = c.ids;
  b.add(
    {
      kind: "Bridge",
      body: { id: ids.bridge, name, tenantId: c.tenant, inboundFilterId: g.mainChain },
    },
    [g.mainChain],
  );
  b.add({ kind: "Port", parentId: ids.bridge, body: { id: ids.bridgePort, type: "Bridge" } }, [
    ids.bridge,
  ]);
}

/** The router's port on the pod CIDR (its gateway), the route to the CIDR, and the link to the bridge. */
function addRouterLink({ name, c, ids, b }: NodeMapping, v4: PodSubnet): void {
  const router = c.ids.clusterRouter;
  b.add(
    {
      kind: "Port",
      parentId: router,
      body: {
        id: ids.routerPort,
        type: "Router",
        networkAddress: v4.network,
        networkLength: v4.prefix,
        portAddress: v4.gateway,
        // Always sent: MidoNet picks a random MAC when it is missing on create
        // and clears it when missing on PUT.
        portMac: macForKey(name),
      },
    },
    [router],
  );
  b.add(
    {
      kind: "Route",
      parentId: router,
      body: {
        id: ids.route,
        type: "Normal",
        srcNetworkAddr: "0.0.0.0",
        srcNetworkLength: 0,
        dstNetworkAddr: v4.network,
        dstNetworkLength: v4.prefix,
        nextHopPort: ids.routerPort,
        weight: 0,
      },
    },
    [router, ids.routerPort],
  );
  b.add({ kind: "PortLink", parentId: ids.bridgePort, body: { peerId: ids.routerPort } }, [
    ids.bridgePort,
    ids.routerPort,
  ]);
}

/** The port the host plugs into, filtered outbound by the node's own chain. */
function addNodePort({ name, c, ids, b }: NodeMapping): void {
  b.add(
    { kind: "Chain", body: { id: ids.chain, name: `KUBE-NODE-${name}`, tenantId: c.tenant } },
    [],
  );
  b.add(
    {
      kind: "Port",
      parentId: ids.bridge,
      body: { id: ids.nodePort, type: "Bridge", outboundFilterId: ids.chain },
    },
    [ids.bridge, ids.chain],
  );
}

/**
 * Traffic from the node address leaves towards pods as the gateway, so the
 * replies come back through MidoNet (where the reverse NAT of services happens)
 * instead of straight to the host.
 */
function addNodeSnat({ c, ids, b }: NodeMapping, v4: PodSubnet): void {
  b.add(
    {
      kind: "Rule",
      parentId: ids.chain,
      body: {
        id: ids.snatRule,
        type: "snat",
        dlType: 0x0800,
        nwSrcAddress: v4.nodeIp,
        nwSrcLength: 32,
        natTargets: [
          {
            addressFrom: v4.gateway,
            addressTo: v4.gateway,
            portFrom: c.snatPorts.from,
            portTo: c.snatPorts.to,
          },
        ],
        flowAction: "continue",
      },
    },
    [ids.chain],
    "1",
  );
}

/** Each IPv4 InternalIP and ExternalIP of the node, routed via the node's pod-network address. */
function addNodeAddressRoutes({ node, name, c, ids, b }: NodeMapping, v4: PodSubnet): void {
  const router = c.ids.clusterRouter;
  for (const a of node.status?.addresses ?? []) {
    if (a.type !== "InternalIP" && a.type !== "ExternalIP") continue;
    const ip = parseIp(a.address);
    if (!ip) {
      b.warn("invalid-value", `${a.type} ${JSON.stringify(a.address)} does not parse`);
      continue;
    }
    const address = formatIp(ip);
    if (ip.family === 6) {
      b.warn("ipv6-not-mappable", `${a.type} ${address}: MidoNet routes are IPv4 only`);
      continue;
    }
    b.add(
      {
        kind: "Route",
        parentId: router,
        body: {
          id: idForKey(c.tenant, "Node Address", `${name}/${a.type}/${address}`, c.version),
          type: "Normal",
          srcNetworkAddr: "0.0.0.0",
          srcNetworkLength: 0,
          dstNetworkAddr: address,
          dstNetworkLength: 32,
          nextHopPort: ids.routerPort,
          nextHopGateway: v4.nodeIp,
          weight: 0,
        },
      },
      [router, ids.routerPort],
    );
  }
}

/** The host's tunnel zone membership (when it has an endpoint) and the node port's binding. */
function addHostBinding(m: NodeMapping, hostId: string): void {
  const { ids, b } = m;
  const zone = tunnelZone(m);
  const endpoint = tunnelEndpoint(m);
  let membership: string | undefined;
  if (endpoint) {
    membership = b.add(
      { kind: "TunnelZoneHost", parentId: zone, body: { hostId, ipAddress: endpoint } },
      zone === m.c.ids.defaultTunnelZone ? [zone] : [],
    );
  }
  // MidoNet refuses a binding while the host is in no tunnel zone.
  b.add(
    {
      kind: "HostInterfacePort",
      parentId: hostId,
      body: { hostId, portId: ids.nodePort, interfaceName: NODE_PEER_INTERFACE },
    },
    membership ? [ids.nodePort, membership] : [ids.nodePort],
  );
}

/** The annotated tunnel zone, lowercase; the default zone when absent or not a UUID. */
function tunnelZone({ node, c, b }: NodeMapping): string {
  const zoneText = node.metadata.annotations?.[ANNOTATION_TUNNEL_ZONE_ID]?.trim();
  if (!zoneText) return c.ids.defaultTunnelZone;
  if (isUuid(zoneText)) return zoneText.toLowerCase();
  b.warn(
    "invalid-value",
    `${ANNOTATION_TUNNEL_ZONE_ID} ${JSON.stringify(zoneText)} is not a UUID; using the default zone`,
  );
  return c.ids.defaultTunnelZone;
}

/** The annotated tunnel endpoint, else the first IPv4 InternalIP. */
function tunnelEndpoint({ node, b }: NodeMapping): string | undefined {
  const annotated = node.metadata.annotations?.[ANNOTATION_TUNNEL_ENDPOINT_IP]?.trim();
  if (annotated) {
    const ip = parseIp(annotated);
    if (ip?.family === 4) return formatIp(ip);
    b.warn(
      "invalid-value",
      `${ANNOTATION_TUNNEL_ENDPOINT_IP} ${JSON.stringify(annotated)} is not an IPv4 address`,
    );
  }
  for (const a of node.status?.addresses ?? []) {
    if (a.type !== "InternalIP") continue;
    const ip = parseIp(a.address);
    if (ip?.family === 4) return formatIp(ip);
  }
  b.warn(
    "no-tunnel-endpoint",
    "no IPv4 InternalIP for the tunnel endpoint: host not added to the tunnel zone",
  );
  return undefined;
}

/** With the MAC annotation: the node port's MAC entry, and the node address's ARP entry. */
function addMacEntries({ node, ids, b }: NodeMapping, v4: PodSubnet | undefined): void {
  const macText = node.metadata.annotations?.[ANNOTATION_MAC_ADDRESS];
  if (macText === undefined) return;
  const mac = normalizeMac(macText);
  if (!mac) {
    b.warn("invalid-value", `${ANNOTATION_MAC_ADDRESS} ${JSON.stringify(macText)} is not a MAC`);
    return;
  }
  b.add({ kind: "MacPort", parentId: ids.bridge, body: { macAddr: mac, portId: ids.nodePort } }, [
    ids.bridge,
    ids.nodePort,
  ]);
  if (v4) {
    b.add({ kind: "IP4Mac", parentId: ids.bridge, body: { ip: v4.nodeIp, mac } }, [ids.bridge]);
  }
}
