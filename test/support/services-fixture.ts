/**
 * A small cluster of Services and EndpointSlices as API objects, and the
 * scripts the driver would load for node-a: what the packet-flow suite
 * (test/unit/services-packet-flow.test.ts) traces and the netlink suite
 * (test/integration/services-netlink.test.ts) loads into a kernel both ways.
 *
 * node-a: pod CIDRs 10.0.1.0/24 and fd00:10:1::/64. node-b: 10.0.2.0/24 and
 * fd00:10:2::/64.
 */
import { type Block, hairpinElements, planBlock } from "../../src/driver/services/ruleset.js";
import { changeScript, fullScript } from "../../src/driver/services/ruleset-diff.js";
import type { SliceView } from "../../src/services/endpoints.js";
import {
  type PortPlan,
  planService,
  serviceFromApi,
  sliceService,
} from "../../src/services/model.js";

export const NODE = "node-a";
export const POD_CIDRS = { 4: ["10.0.1.0/24"], 6: ["fd00:10:1::/64"] };
/** node-a's own IPs (its Node's InternalIPs). */
export const NODE_IPS = { 4: "192.168.0.2", 6: "fd00:192::2" };
/** node-a's zone (its topology.kubernetes.io/zone label). */
export const NODE_ZONE = "zone-a";

export type State = "ready" | "serving-terminating" | "terminating" | "unready";
/** An endpoint: its address, its node, its state, and the zones hinted for it (PreferSameZone). */
export type Ep = [ip: string, node: string, state?: State, zones?: string[]];

export interface SvcOpts {
  type?: "ClusterIP" | "NodePort" | "LoadBalancer";
  ips: string[];
  ports: Array<{ name: string; port: number; protocol?: string; nodePort?: number }>;
  externalIPs?: string[];
  lb?: string[];
  /** spec.loadBalancerSourceRanges. */
  sourceRanges?: string[];
  etp?: "Local";
  itp?: "Local";
  affinity?: number;
}

export function service(name: string, o: SvcOpts): Record<string, unknown> {
  return {
    metadata: { namespace: "default", name },
    spec: {
      type: o.type ?? "ClusterIP",
      clusterIP: o.ips[0],
      clusterIPs: o.ips,
      ports: o.ports.map((p) => ({ protocol: "TCP", ...p, targetPort: p.name })),
      ...(o.externalIPs ? { externalIPs: o.externalIPs } : {}),
      ...(o.sourceRanges ? { loadBalancerSourceRanges: o.sourceRanges } : {}),
      ...(o.etp ? { externalTrafficPolicy: o.etp } : {}),
      ...(o.itp ? { internalTrafficPolicy: o.itp } : {}),
      ...(o.affinity
        ? {
            sessionAffinity: "ClientIP",
            sessionAffinityConfig: { clientIP: { timeoutSeconds: o.affinity } },
          }
        : {}),
    },
    ...(o.lb ? { status: { loadBalancer: { ingress: o.lb.map((ip) => ({ ip })) } } } : {}),
  };
}

export type ApiSlice = SliceView & {
  metadata: { namespace: string; name: string; labels: Record<string, string> };
};

/** A slice of Service `svc`; ports [name, port, protocol] default to http 8080/TCP. */
export function slice(
  svc: string,
  eps: Ep[],
  ports: Array<[string, number, string?]> = [["http", 8080]],
  id = "",
): ApiSlice {
  const ipv6 = eps.some(([ip]) => ip.includes(":"));
  return {
    metadata: {
      namespace: "default",
      name: `${svc}-${ipv6 ? "v6" : "v4"}${id}`,
      labels: { "kubernetes.io/service-name": svc },
    },
    addressType: ipv6 ? "IPv6" : "IPv4",
    ports: ports.map(([name, port, protocol = "TCP"]) => ({ name, port, protocol })),
    endpoints: eps.map(([ip, nodeName, state = "ready", zones]) => ({
      addresses: [ip],
      nodeName,
      ...(zones ? { hints: { forZones: zones.map((name) => ({ name })) } } : {}),
      conditions: {
        ready: state === "ready",
        serving: state === "ready" || state === "serving-terminating",
        terminating: state === "serving-terminating" || state === "terminating",
      },
    })),
  };
}

export const http = (nodePort?: number) => [
  { name: "http", port: 80, ...(nodePort ? { nodePort } : {}) },
];

export const SERVICES: Record<string, SvcOpts> = {
  web: { ips: ["172.30.0.10"], ports: http() },
  empty: {
    type: "NodePort",
    ips: ["172.30.0.20"],
    ports: [...http(30020), { name: "dns", port: 53, protocol: "UDP" }],
  },
  "np-cluster": { type: "NodePort", ips: ["172.30.0.30"], ports: http(30030) },
  "np-local": { type: "NodePort", ips: ["172.30.0.40"], ports: http(30040), etp: "Local" },
  "np-local-remote": { type: "NodePort", ips: ["172.30.0.50"], ports: http(30050), etp: "Local" },
  "external-ip": { ips: ["172.30.0.60"], ports: http(), externalIPs: ["198.51.100.10"] },
  lb: {
    type: "LoadBalancer",
    ips: ["172.30.0.61"],
    ports: http(30061),
    lb: ["198.51.100.20"],
    etp: "Local",
  },
  "itp-local": { ips: ["172.30.0.70"], ports: http(), itp: "Local" },
  "itp-local-remote": { ips: ["172.30.0.71"], ports: http(), itp: "Local" },
  terminating: { ips: ["172.30.0.80"], ports: http() },
  "terminating-local": { type: "NodePort", ips: ["172.30.0.82"], ports: http(30082), etp: "Local" },
  named: { ips: ["172.30.0.90"], ports: http() },
  self: { ips: ["172.30.0.100"], ports: http() },
  sticky: { type: "NodePort", ips: ["172.30.0.110"], ports: http(30110), affinity: 600 },
  dual: { type: "NodePort", ips: ["172.30.0.120", "fd00:30::120"], ports: http(30120) },
  "itp-local-np-cluster": {
    type: "NodePort",
    ips: ["172.30.0.150"],
    ports: http(30150),
    itp: "Local",
  },
  // A range written loosely (spaces, host bits) and one that does not parse (left out).
  "lb-ranges": {
    type: "LoadBalancer",
    ips: ["172.30.0.160"],
    ports: http(30160),
    lb: ["198.51.100.30"],
    sourceRanges: [" 203.0.113.5/24 ", "not-a-cidr"],
    externalIPs: ["198.51.100.32"],
  },
  // Dual stack: each family's load-balancer IPs filter by that family's ranges.
  "lb-ranges-dual": {
    type: "LoadBalancer",
    ips: ["172.30.0.162", "fd00:30::162"],
    ports: http(),
    lb: ["198.51.100.33", "2001:db8:5::33"],
    sourceRanges: ["203.0.113.0/24", "2001:db8::/64"],
  },
  // A range holding the node's IP: the load-balancer IP is let in as a source too.
  "lb-ranges-node": {
    type: "LoadBalancer",
    ips: ["172.30.0.161"],
    ports: http(),
    lb: ["198.51.100.31"],
    sourceRanges: ["192.168.0.0/24"],
  },
  // Hinted by the EndpointSlice controller for trafficDistribution: PreferSameZone.
  zonal: { type: "NodePort", ips: ["172.30.0.170"], ports: http(30170) },
  protocols: {
    ips: ["172.30.0.130"],
    ports: [
      { name: "sctp", port: 5000, protocol: "SCTP" },
      { name: "dns", port: 53, protocol: "UDP" },
      { name: "dns-tcp", port: 53 },
    ],
  },
};

// biome-ignore format: one slice a line
export const SLICES: ApiSlice[] = [
  slice("web", [["10.0.1.5", "node-a"], ["10.0.2.5", "node-b"], ["10.0.2.6", "node-b", "unready"]]),
  slice("empty", [["10.0.2.20", "node-b", "unready"]], [["http", 8080], ["dns", 53, "UDP"]]),
  slice("np-cluster", [["10.0.1.30", "node-a"], ["10.0.2.30", "node-b"]]),
  slice("np-local", [["10.0.1.40", "node-a"], ["10.0.2.40", "node-b"]]),
  slice("np-local-remote", [["10.0.2.50", "node-b"]]),
  slice("external-ip", [["10.0.1.60", "node-a"], ["10.0.2.60", "node-b"]]),
  slice("lb", [["10.0.1.61", "node-a"], ["10.0.2.61", "node-b"]]),
  slice("itp-local", [["10.0.1.70", "node-a"], ["10.0.2.70", "node-b"]]),
  slice("itp-local-remote", [["10.0.2.71", "node-b"]]),
  slice("terminating", [["10.0.1.80", "node-a", "serving-terminating"], ["10.0.2.80", "node-b", "terminating"], ["10.0.2.81", "node-b", "unready"]]),
  slice("terminating-local", [["10.0.1.82", "node-a", "serving-terminating"], ["10.0.2.82", "node-b"]]),
  // targetPort by name: each slice says what it resolved to on its pods.
  slice("named", [["10.0.1.90", "node-a"]], [["http", 8080]], "-1"),
  slice("named", [["10.0.2.90", "node-b"]], [["http", 9090]], "-2"),
  slice("self", [["10.0.1.101", "node-a"]]),
  slice("sticky", [["10.0.1.110", "node-a"], ["10.0.2.110", "node-b"]]),
  slice("dual", [["10.0.1.120", "node-a"], ["10.0.2.120", "node-b"]]),
  slice("itp-local-np-cluster", [["10.0.2.150", "node-b"]]),
  slice("lb-ranges", [["10.0.1.160", "node-a"], ["10.0.2.160", "node-b"]]),
  slice("lb-ranges-node", [["10.0.2.161", "node-b"]]),
  slice("zonal", [["10.0.1.170", "node-a", "ready", ["zone-a"]], ["10.0.2.170", "node-b", "ready", ["zone-b"]], ["10.0.2.171", "node-b", "ready", ["zone-a"]]]),
  slice("lb-ranges-dual", [["10.0.2.162", "node-b"]]),
  slice("lb-ranges-dual", [["fd00:10:2::162", "node-b"]]),
  slice("dual", [["fd00:10:1::120", "node-a"], ["fd00:10:2::120", "node-b"]]),
  slice("protocols", [["10.0.2.130", "node-b"]], [["sctp", 5000, "SCTP"], ["dns", 5353, "UDP"], ["dns-tcp", 5354]]),
];
/** web with its unready endpoint become ready. */
export const WEB_3 = slice("web", [
  ["10.0.1.5", "node-a"],
  ["10.0.2.5", "node-b"],
  ["10.0.2.6", "node-b"],
]);

export interface Rendered {
  plans: PortPlan[];
  blocks: Map<string, Block>;
  hairpin: Map<string, Map<string, string>>;
  script: string;
}

export function render(services: Record<string, SvcOpts>, slices: readonly ApiSlice[]): Rendered {
  const plans = Object.entries(services).flatMap(([name, o]) => {
    const spec = serviceFromApi(service(name, o));
    if (!spec) throw new Error(`${name}: not proxied`);
    return planService(
      spec,
      slices.filter((s) => sliceService(s)?.name === name),
      { name: NODE, zone: NODE_ZONE },
    );
  });
  const blocks = new Map(
    plans.map((p) => [p.key, planBlock(p, { podCidrs: POD_CIDRS, nodeIps: NODE_IPS })]),
  );
  const hairpin = hairpinElements(plans, NODE);
  return { plans, blocks, hairpin, script: fullScript(blocks.values(), hairpin) };
}

/** State two: several Services changed at once. */
export const SERVICES_2: Record<string, SvcOpts> = Object.fromEntries([
  ...Object.entries(SERVICES).filter(([n]) => n !== "np-local"),
  ["sticky", { ...SERVICES.sticky, affinity: 900 }],
  ["lb", { ...SERVICES.lb, etp: undefined }],
  ["added", { type: "NodePort", ips: ["172.30.0.140"], ports: http(30140) }],
]);
export const GONE_2 = ["web", "empty", "self", "itp-local-remote"];
// biome-ignore format: one slice a line
export const SLICES_2: ApiSlice[] = [
  ...SLICES.filter((s) => !GONE_2.includes(sliceService(s)?.name ?? "")),
  WEB_3,
  slice("empty", [["10.0.2.20", "node-b"]], [["http", 8080], ["dns", 53, "UDP"]]),
  slice("self", [["10.0.1.101", "node-a", "unready"]]),
  slice("itp-local-remote", [["10.0.1.71", "node-a"], ["10.0.2.71", "node-b"]]),
  slice("added", [["10.0.1.140", "node-a"]]),
];

/** Every plan key of either state: what changed is changeScript's to find. */
export function changes(from: Rendered, to: Rendered): string {
  const keys = new Set([...from.blocks.keys(), ...to.blocks.keys()]);
  const changed = new Map([...keys].map((k) => [k, to.blocks.get(k)]));
  return changeScript(from.blocks, changed, { before: from.hairpin, after: to.hairpin });
}
