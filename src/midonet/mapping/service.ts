/**
 * A Service with a cluster IP, together with its EndpointSlices, maps to one
 * chain per service port and the rules that steer its traffic:
 *
 *   Chain  IDForKey("ServicePort", "<ns>/<name>/<port name>")   KUBE-SVC-<ns>/<name>/<port name>
 *   Rule   in KUBE-SERVICES: jump to that chain
 *          {dlType 0x0800, nwDst clusterIP/32, nwProto 6|17|132, tpDst port..port}
 *          IDForKey("ServicePortSub", "<ns>/<name>/<port name>/<clusterIP>/<nwProto>/<port>")
 *   Rules  in the service port chain, in this order:
 *          1..n  one SNAT per endpoint address {nwSrc ep/32 → clusterIP:30000-60000, continue}
 *                (hairpin: a pod reaching its own Service must see replies come back
 *                through MidoNet, so its source becomes the cluster IP)
 *          n+1   one DNAT {natTargets: every usable endpoint (ready; else serving and terminating), accept}
 *          or, with no usable endpoint, a drop: the traffic ends here instead of
 *          leaving for an address nobody holds.
 *
 * Load-balancing. MidoNet's forward NAT picks, for each new flow, one of the
 * rule's natTargets uniformly at random, then an address and a port at random
 * within that target's ranges, and keeps the choice in its flow state for the
 * life of the connection (midolman NatState.tryAllocateNatBinding →
 * chooseRandomNatTarget). So one DNAT rule with one target per endpoint
 * {ep, ep, targetPort, targetPort} spreads connections evenly over every ready
 * endpoint. (Merging neighbouring addresses into one range target would skew
 * the share: a target is chosen first, whatever its width.) The original
 * instead put one jump per endpoint in the chain, and the first always won.
 *
 * MidoNet rules cannot be updated, only created and deleted. The DNAT rule's id
 * is derived from its targets and the jump rule's from what it matches, so a
 * change is a new rule beside the old one (make before break), and the service
 * port chain keeps its id so nothing inside it is dropped when the jump changes.
 *
 * What MidoNet cannot do, reported as warnings and left out:
 * - IPv6: rule addresses are validated as IPv4 by the REST API (Condition DTO:
 *   @Pattern(IPv4.regex), prefix ≤ 32) and NAT applies to IPv4 packets only
 *   (NatState.isNatSupported); a v6 rule without its address would capture every
 *   service's v6 traffic on that port, so none is made. IPv6 cluster IPs and
 *   IPv6 EndpointSlices are skipped.
 * - SCTP: the rules are made (nwProto 132), but the agent's NAT translates only
 *   TCP, UDP and ICMP, so SCTP services do not reach their endpoints.
 * - Any other protocol: the port is skipped.
 * Also not mapped: node ports, load-balancer and external IPs (only the cluster
 * IP of a ClusterIP, NodePort or LoadBalancer Service is), session affinity.
 */
import { formatIp, type ParsedIp, parseIp } from "../../net/ip.js";
import { categorizeEndpoints, slicePortEndpoints } from "../../services/endpoints.js";
import { idForKey, subId } from "../ids.js";
import type { NatTarget } from "../resources.js";
import { type MappingConfig, type ResolvedConfig, resolveConfig } from "./config.js";
import type { EndpointSlice, Service, ServicePort } from "./k8s.js";
import { MappingBuilder, type ObjectMapping, serviceOwner } from "./model.js";

/** IP protocol numbers of the Service protocols MidoNet rules can match. */
export const PROTOCOL_NUMBERS: Readonly<Record<string, number>> = {
  TCP: 6,
  UDP: 17,
  SCTP: 132,
};

/** The chain of one service port. */
export function servicePortChainId(
  config: ResolvedConfig,
  namespace: string,
  name: string,
  portName: string,
): string {
  return idForKey(config.tenant, "ServicePort", `${namespace}/${name}/${portName}`, config.version);
}

/** One endpoint of one service port. */
interface Target {
  ip: string;
  port: number;
  sortKey: string;
}

/** Every node alike: the mapping is the cluster's, not one node's. */
const CLUSTER_POLICY = { internalLocal: false, externalLocal: false, externallyAccessible: false };

/**
 * The IPv4 endpoints a service port sends to, as kube-proxy picks them
 * cluster-wide (src/services/endpoints.ts): the ready ones; when none is, the
 * serving ones that are terminating. Sorted, without repeats.
 */
function portTargets(
  slices: readonly EndpointSlice[],
  portName: string,
  protocol: string,
): Target[] {
  const eps = slicePortEndpoints(slices, portName, protocol, 4);
  const targets = new Map<string, Target>();
  for (const ep of categorizeEndpoints(eps, CLUSTER_POLICY, { name: "" }).cluster ?? []) {
    const parsed = parseIp(ep.ip);
    if (parsed?.family !== 4) continue;
    const ip = formatIp(parsed);
    const id = `${ip}:${ep.port}`;
    if (!targets.has(id))
      targets.set(id, { ip, port: ep.port, sortKey: `${ipv4SortKey(parsed)}:${ep.port}` });
  }
  return [...targets.values()].sort((x, y) =>
    x.sortKey < y.sortKey ? -1 : x.sortKey > y.sortKey ? 1 : 0,
  );
}

/**
 * A sort key that orders IPv4 addresses numerically with plain string
 * comparison ("10.0.0.9" before "10.0.0.10"): eight hex digits.
 */
function ipv4SortKey(ip: ParsedIp): string {
  let key = "";
  for (const octet of ip.bytes) key += octet.toString(16).padStart(2, "0");
  return key;
}

/**
 * Maps a Service and the EndpointSlices labelled with its name (slices of other
 * Services are the caller's mistake and are not filtered out here).
 */
export function mapService(
  service: Service,
  slices: readonly EndpointSlice[],
  config: MappingConfig | ResolvedConfig,
): ObjectMapping {
  const c = resolveConfig(config);
  const { namespace, name } = service.metadata;
  const b = new MappingBuilder(serviceOwner(namespace, name));
  const spec = service.spec ?? {};
  if (spec.type === "ExternalName") return b.build("not-cluster-ip");

  const clusterIps = spec.clusterIPs?.length
    ? spec.clusterIPs
    : spec.clusterIP
      ? [spec.clusterIP]
      : [];
  if (clusterIps.length === 0 || clusterIps[0] === "None") return b.build("headless");
  const vip = firstIpv4ClusterIp(clusterIps, b);
  if (!vip) return b.build("no-ipv4-cluster-ip");

  const s: ServiceMapping = { c, b, namespace, name, vip };
  let sctpWarned = false;
  for (const p of sortedPorts(spec.ports ?? [])) {
    const protocol = p.protocol ?? "TCP";
    const nwProto = PROTOCOL_NUMBERS[protocol];
    const portName = p.name ?? "";
    if (nwProto === undefined) {
      b.warn(
        "unknown-protocol",
        `port ${JSON.stringify(portName)} (${p.port}): protocol ${JSON.stringify(protocol)} not mapped`,
      );
      continue;
    }
    if (protocol === "SCTP" && !sctpWarned) {
      sctpWarned = true;
      b.warn(
        "sctp-not-translated",
        "SCTP port: rules made, but MidoNet's NAT translates only TCP, UDP and ICMP",
      );
    }
    const targets = portTargets(slices, portName, protocol);
    addServicePort(s, { name: portName, port: p.port, nwProto }, targets);
  }
  return b.build();
}

/** What every port of one Service shares. */
interface ServiceMapping {
  c: ResolvedConfig;
  b: MappingBuilder;
  namespace: string;
  name: string;
  /** The cluster IP the rules match and SNAT to. */
  vip: string;
}

/** The first IPv4 cluster IP, canonical; the others are warned about. */
function firstIpv4ClusterIp(texts: readonly string[], b: MappingBuilder): string | undefined {
  let vip: string | undefined;
  for (const text of texts) {
    const parsed = parseIp(text);
    if (!parsed) {
      b.warn("invalid-value", `cluster IP ${JSON.stringify(text)} does not parse`);
      continue;
    }
    const ip = formatIp(parsed);
    if (parsed.family === 6)
      b.warn("ipv6-not-mappable", `cluster IP ${ip}: MidoNet rules and NAT are IPv4 only`);
    else vip ??= ip;
  }
  return vip;
}

/** The Service's ports in a stable order: by name, protocol and port. */
function sortedPorts(ports: readonly ServicePort[]): ServicePort[] {
  return [...ports].sort((x, y) => {
    const kx = `${x.name ?? ""}/${x.protocol ?? "TCP"}/${x.port}`;
    const ky = `${y.name ?? ""}/${y.protocol ?? "TCP"}/${y.port}`;
    return kx < ky ? -1 : kx > ky ? 1 : 0;
  });
}

/**
 * One service port: its chain, the jump to it from KUBE-SERVICES, and inside
 * it the hairpin SNATs and the DNAT to the usable endpoints (or a drop when
 * there is none).
 */
function addServicePort(
  s: ServiceMapping,
  port: { name: string; port: number; nwProto: number },
  targets: readonly Target[],
): void {
  const { c, b, namespace, name, vip } = s;
  const servicesChain = c.ids.servicesChain;
  const portKey = `${namespace}/${name}/${port.name}`;
  const chain = servicePortChainId(c, namespace, name, port.name);
  b.add(
    { kind: "Chain", body: { id: chain, name: `KUBE-SVC-${portKey}`, tenantId: c.tenant } },
    [],
  );

  // The original's sub-resource key (pkg/converter/service/converter.go):
  // "<ns>/<name>/<port name>/<cluster IP>/<IP protocol number>/<port>", the
  // protocol as a number (6, 17), so a cluster moving from it keeps the id.
  const match = `${portKey}/${vip}/${port.nwProto}/${port.port}`;
  b.add(
    {
      kind: "Rule",
      parentId: servicesChain,
      body: {
        id: idForKey(c.tenant, "ServicePortSub", match, c.version),
        type: "jump",
        jumpChainId: chain,
        dlType: 0x0800,
        nwDstAddress: vip,
        nwDstLength: 32,
        nwProto: port.nwProto,
        tpDst: { start: port.port, end: port.port },
      },
    },
    [servicesChain, chain],
    match,
  );

  if (targets.length === 0) {
    b.add(
      { kind: "Rule", parentId: chain, body: { id: subId(chain, "No Endpoints"), type: "drop" } },
      [chain],
      "3",
    );
    return;
  }
  addHairpinSnats(s, chain, targets);
  addDnat(b, chain, targets);
}

/** One SNAT per endpoint address (targets are sorted): a pod reaching its own Service leaves as the cluster IP. */
function addHairpinSnats(
  { c, b, vip }: ServiceMapping,
  chain: string,
  targets: readonly Target[],
): void {
  let previousIp: string | undefined;
  for (const t of targets) {
    if (t.ip === previousIp) continue;
    previousIp = t.ip;
    b.add(
      {
        kind: "Rule",
        parentId: chain,
        body: {
          id: subId(chain, `Hairpin SNAT ${vip} ${t.ip}`),
          type: "snat",
          dlType: 0x0800,
          nwSrcAddress: t.ip,
          nwSrcLength: 32,
          natTargets: [
            {
              addressFrom: vip,
              addressTo: vip,
              portFrom: c.snatPorts.from,
              portTo: c.snatPorts.to,
            },
          ],
          flowAction: "continue",
        },
      },
      [chain],
      `1/${t.sortKey.slice(0, 8)}`,
    );
  }
}

/** One DNAT with a target per usable endpoint, which MidoNet picks among at random per connection. */
function addDnat(b: MappingBuilder, chain: string, targets: readonly Target[]): void {
  const natTargets: NatTarget[] = targets.map((t) => ({
    addressFrom: t.ip,
    addressTo: t.ip,
    portFrom: t.port,
    portTo: t.port,
  }));
  b.add(
    {
      kind: "Rule",
      parentId: chain,
      body: {
        id: subId(chain, `DNAT ${targets.map((t) => `${t.ip}:${t.port}`).join(" ")}`),
        type: "dnat",
        natTargets,
        flowAction: "accept",
      },
    },
    [chain],
    "2",
  );
}
