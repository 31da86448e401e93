/**
 * The Services tables: Service load-balancing in the shape
 * of kube-proxy's nftables mode (KEP-3866), written from the port plans of
 * src/services/model.ts.
 *
 * - `service-ips`/`service-ips6`: address . protocol . port -> the port's
 *   chain, one verdict-map lookup whatever the number of Services; node
 *   ports through `service-nodeports`/`-6` on any address of the node
 *   (`fib daddr type local`), never on loopback.
 * - A port's `svc-` chain picks an endpoint and DNATs in one rule per
 *   endpoint: the i-th of N taken when `numgen random mod (N-i) == 0` (no
 *   chain per endpoint, no set per Service). With ClientIP affinity each
 *   endpoint gets a chain and a timeout set remembering its clients, as
 *   kube-proxy does.
 * - `ext-` chains (node ports, externalIPs, load-balancer IPs): the node and
 *   its own pods go to the `svc-` chain; other clients are masqueraded under
 *   Cluster policy, kept under Local policy (local endpoints only, else drop).
 * - `fw-` chains: a load-balancer IP of a Service with loadBalancerSourceRanges
 *   leads there first; a source outside the ranges is dropped, as kube-proxy's
 *   firewall chain drops it (node ports and externalIPs are not filtered).
 * - Masquerade only where a reply would miss the node otherwise: off-node
 *   clients of external frontends with Cluster policy (the mark), and a pod
 *   reaching itself (the `hairpin` set of local endpoints, address . address).
 * - A port with no usable endpoint anywhere is rejected in the filter hooks
 *   (`no-endpoint-*` maps): TCP reset, ICMP port unreachable otherwise.
 *
 * Each port plan renders to a block (its chains, sets and map elements), so
 * a change rewrites only the blocks it touches (see ruleset-diff.ts). Pure.
 *
 * The blocks are spread over SERVICE_SHARDS tables of their own (each with
 * its frontend maps and nat hooks); the table named SERVICES_TABLE keeps
 * what is shared: the reject maps, the hairpin sets, masquerade. The kernel
 * checks the jump graph of every table a transaction touches, all of it:
 * with 100,000 rules in one table that check alone costs some 60 ms per
 * change, so a change pays for its shard only (docs/services.md).
 */
import { createHash } from "node:crypto";
import { cidrContains, parseCidr, parseIp } from "../../net/ip.js";
import type { ServiceEndpoint } from "../../services/endpoints.js";
import type { PortPlan } from "../../services/model.js";

export const SERVICES_TABLE = "cni-driver-services";
/** How many tables the Services' chains are spread over (a fixed number: a plan's shard is its hash's). */
export const SERVICE_SHARDS = 16;
/** The table of shard k. */
export const shardTable = (k: number) => `${SERVICES_TABLE}-${k}`;
/** Every table of the Services: the shared one first. */
export const SERVICES_TABLES: readonly string[] = [
  SERVICES_TABLE,
  ...Array.from({ length: SERVICE_SHARDS }, (_, k) => shardTable(k)),
];
/** The packet mark asking postrouting to masquerade (a bit kube-proxy's 0x4000 does not use). */
const MASQUERADE_MARK = 0x0010_0000;

/** One port plan's share of the tables. */
export interface Block {
  /** The shard whose table holds its chains, sets and frontend elements (from its plan's key). */
  shard: number;
  /** Chain name -> its rules, in order. */
  chains: Map<string, string[]>;
  /** Set name -> its declaration (inside `{ }`). */
  sets: Map<string, string>;
  /** Map name -> key -> value (a verdict); the reject maps are the shared table's (elementTable). */
  elements: Map<string, Map<string, string>>;
}

/** What the table needs to know of this node beyond the plans. */
export interface NodeView {
  /** This node's pod CIDRs: their traffic to external frontends is never masqueraded. */
  podCidrs: { 4: string[]; 6: string[] };
  /**
   * This node's IP of each family (its Node's InternalIP first): where a source
   * range holds it, the load-balancer IPs are let in as sources too, as kube-proxy
   * lets in a VIP-like load balancer's traffic looping back from the node.
   */
  nodeIps?: { 4?: string; 6?: string };
  /**
   * This node's zone (its topology.kubernetes.io/zone label): the plans' endpoints
   * depend on it through topology hints, the blocks only through the plans.
   */
  zone?: string;
}

/** Where a frontend goes when its port has no usable endpoint anywhere. */
export const NO_ENDPOINT_MAP: Readonly<Record<string, string>> = {
  "service-ips": "no-endpoint-services",
  "service-ips6": "no-endpoint-services6",
  "service-nodeports": "no-endpoint-nodeports",
  "service-nodeports6": "no-endpoint-nodeports6",
};

const hash = (s: string) => createHash("sha256").update(s).digest("hex").slice(0, 12);

/** The shard of a port plan, from its key's hash alone: a plan never moves while it exists. */
const shardOfHash = (h: string) => Number.parseInt(h.slice(0, 8), 16) % SERVICE_SHARDS;

const SHARED_MAPS = new Set([...Object.values(NO_ENDPOINT_MAP), "hairpin", "hairpin6"]);

/** The table a block's map lives in: the shared one for rejects and hairpin, else the block's shard. */
export const elementTable = (map: string, shard: number) =>
  SHARED_MAPS.has(map) ? SERVICES_TABLE : shardTable(shard);

const ipKw = (f: 4 | 6) => (f === 4 ? "ip" : "ip6");
const bracket = (f: 4 | 6, ip: string) => (f === 6 ? `[${ip}]` : ip);

/** The DNAT of one endpoint, after `cond` (a condition in the same rule, or ""). */
function dnatTo(plan: PortPlan, ep: ServiceEndpoint, cond = ""): string {
  return `meta l4proto ${plan.protocol} ${cond}dnat ${ipKw(plan.family)} to ${bracket(plan.family, ep.ip)}:${ep.port}`;
}

/**
 * The i-th of n picks: taken with probability 1/(n-i) when none before it
 * was, so each of the n is taken with probability 1/n; the last always.
 */
const pick = (i: number, n: number) => (i < n - 1 ? `numgen random mod ${n - i} == 0 ` : "");

/**
 * The rules choosing among `eps` and DNATing, adding endpoint chains and sets
 * to `b` for affinity. One rule per endpoint and no set: a set per Service
 * (even an anonymous map) costs the kernel a walk of all the table's sets to
 * create and to bind, so 10,000 of them load in seconds, not milliseconds
 * (bench/services); rules cost a constant each.
 */
function chooseRules(plan: PortPlan, eps: readonly ServiceEndpoint[], b: Block): string[] {
  if (eps.length === 0) return ["drop"];
  const sorted = [...eps].sort((x, y) => (x.ip === y.ip ? x.port - y.port : x.ip < y.ip ? -1 : 1));
  const n = sorted.length;
  if (plan.affinitySeconds === undefined)
    return sorted.map((ep, i) => dnatTo(plan, ep, pick(i, n)));
  const saddr = `${ipKw(plan.family)} saddr`;
  const remembered: string[] = [];
  const picks: string[] = [];
  sorted.forEach((ep, i) => {
    // The timeout in the name: a changed timeout is a new set, never one altered in place.
    const h = hash(`${plan.key}|${ep.ip}|${ep.port}|${plan.affinitySeconds}`);
    const chain = `ep-${h}`;
    const set = `aff-${h}`;
    b.sets.set(
      set,
      `type ${plan.family === 4 ? "ipv4_addr" : "ipv6_addr"}; flags dynamic,timeout; timeout ${plan.affinitySeconds}s;`,
    );
    b.chains.set(chain, [`update @${set} { ${saddr} }`, dnatTo(plan, ep)]);
    remembered.push(`${saddr} @${set} goto ${chain}`);
    picks.push(`${pick(i, n)}goto ${chain}`);
  });
  return [...remembered, ...picks];
}

const sameEndpoints = (a: readonly ServiceEndpoint[], b: readonly ServiceEndpoint[]) =>
  a.length === b.length && a.every((e, i) => e.ip === b[i]?.ip && e.port === b[i]?.port);

/** Sets `key` of `map` in an element table. */
export function addElement(
  els: Map<string, Map<string, string>>,
  map: string,
  key: string,
  value: string,
): void {
  const m = els.get(map) ?? new Map<string, string>();
  els.set(map, m);
  m.set(key, value);
}

/** The chains, sets and map elements of one port plan. */
export function planBlock(plan: PortPlan, node: NodeView): Block {
  const h = hash(plan.key);
  const b: Block = {
    shard: shardOfHash(h),
    chains: new Map(),
    sets: new Map(),
    elements: new Map(),
  };
  const six = plan.family === 6 ? "6" : "";
  const proto = plan.protocol;
  const external: Array<{ map: string; key: string; ip?: string }> = [
    ...plan.externalIps.map((ip) => ({
      map: `service-ips${six}`,
      key: `${ip} . ${proto} . ${plan.port}`,
      ip,
    })),
    ...(plan.nodePort
      ? [{ map: `service-nodeports${six}`, key: `${proto} . ${plan.nodePort}` }]
      : []),
  ];
  const cluster = plan.clusterIps.map((ip) => ({
    map: `service-ips${six}`,
    key: `${ip} . ${proto} . ${plan.port}`,
  }));
  if (plan.reject) {
    for (const f of [...cluster, ...external])
      addElement(b.elements, NO_ENDPOINT_MAP[f.map] as string, f.key, "goto reject-service");
    return b;
  }
  const svc = `svc-${h}`;
  const ipk = ipKw(plan.family);
  const mark = `meta mark set meta mark | 0x${MASQUERADE_MARK.toString(16)}`;
  const podCidrs = node.podCidrs[plan.family];
  const fromPods = (c: string) => `${ipk} saddr ${c}`;
  // A client neither a pod of this node nor the node itself (a router sending the Service range
  // here): an endpoint elsewhere would answer it directly, so it is masqueraded, as kube-proxy does.
  // Plain matches, no `{ … }`: an anonymous set per Service costs the kernel what a named one does.
  const notPods = podCidrs.map((c) => `${ipk} saddr != ${c} `).join("");
  const offCluster =
    podCidrs.length > 0
      ? plan.clusterIps.map((ip) => `${ipk} daddr ${ip} ${notPods}fib saddr type != local ${mark}`)
      : [];
  b.chains.set(svc, [...offCluster, ...chooseRules(plan, plan.internal, b)]);
  for (const f of cluster) addElement(b.elements, f.map, f.key, `goto ${svc}`);
  if (external.length === 0) return b;

  const ext = `ext-${h}`;
  let rules: string[];
  if (plan.masqueradeExternal) {
    // Cluster policy: every client to the cluster's endpoints; all but this node's pods masqueraded.
    let target = svc;
    if (!sameEndpoints(plan.external, plan.internal)) {
      target = `xep-${h}`;
      b.chains.set(target, chooseRules(plan, plan.external, b));
    }
    rules = [...podCidrs.map((c) => `${fromPods(c)} goto ${target}`), `${mark} goto ${target}`];
  } else {
    // Local policy: outside clients keep their address and reach this node's endpoints only.
    // This node's pods and the node itself go to the cluster's endpoints when the Service has
    // them (internalTrafficPolicy Cluster), the node masqueraded, as kube-proxy does.
    const shortCircuit = plan.internalLocal
      ? []
      : [
          ...podCidrs.map((c) => `${fromPods(c)} goto ${svc}`),
          `fib saddr type local ${mark} goto ${svc}`,
        ];
    rules = [...shortCircuit, ...chooseRules(plan, plan.external, b)];
  }
  b.chains.set(ext, rules);
  const fw = firewall(plan, node, ext);
  for (const f of external) {
    const filtered = fw && f.ip !== undefined && fw.ips.has(f.ip);
    addElement(b.elements, f.map, f.key, `goto ${filtered ? fw.chain : ext}`);
  }
  if (fw) b.chains.set(fw.chain, fw.rules);
  return b;
}

/**
 * The `fw-` chain of a plan whose load-balancer IPs filter by source: each range
 * (and, where a range holds this node's IP, the load-balancer IPs themselves)
 * goes on to `ext`, anything else is dropped. Undefined when nothing filters.
 */
function firewall(
  plan: PortPlan,
  node: NodeView,
  ext: string,
): { chain: string; ips: Set<string>; rules: string[] } | undefined {
  if (plan.loadBalancerIps.length === 0 || plan.sourceRanges.length === 0) return undefined;
  const saddr = `${ipKw(plan.family)} saddr`;
  const nodeIp = parseIp(node.nodeIps?.[plan.family] ?? "");
  const fromNode =
    nodeIp !== undefined &&
    plan.sourceRanges.some((r) => {
      const c = parseCidr(r);
      return c !== undefined && cidrContains(c, nodeIp);
    });
  const sources = [...plan.sourceRanges, ...(fromNode ? plan.loadBalancerIps : [])];
  return {
    chain: `fw-${hash(plan.key)}`,
    ips: new Set(plan.loadBalancerIps),
    rules: [...sources.map((src) => `${saddr} ${src} goto ${ext}`), "drop"],
  };
}

const vmap = (name: string, key: string) => `  map ${name} {\n    type ${key} : verdict\n  }`;

/** The shared table's fixed part: the reject maps and chains, hairpin, masquerade. */
export function skeleton(): string {
  const mark = `0x${MASQUERADE_MARK.toString(16)}`;
  return [
    `table inet ${SERVICES_TABLE} {`,
    vmap("no-endpoint-services", "ipv4_addr . inet_proto . inet_service"),
    vmap("no-endpoint-services6", "ipv6_addr . inet_proto . inet_service"),
    vmap("no-endpoint-nodeports", "inet_proto . inet_service"),
    vmap("no-endpoint-nodeports6", "inet_proto . inet_service"),
    "  set hairpin {\n    type ipv4_addr . ipv4_addr\n  }",
    "  set hairpin6 {\n    type ipv6_addr . ipv6_addr\n  }",
    "  chain endpoints-check {",
    "    ip daddr . meta l4proto . th dport vmap @no-endpoint-services",
    "    ip6 daddr . meta l4proto . th dport vmap @no-endpoint-services6",
    "    fib daddr type local ip daddr != 127.0.0.0/8 meta l4proto . th dport vmap @no-endpoint-nodeports",
    "    fib daddr type local ip6 daddr != ::1 meta l4proto . th dport vmap @no-endpoint-nodeports6",
    "  }",
    "  chain reject-service {",
    "    meta l4proto tcp reject with tcp reset",
    "    reject",
    "  }",
    "  chain nat-postrouting {",
    "    type nat hook postrouting priority srcnat; policy accept;",
    "    ct status dnat ip saddr . ip daddr @hairpin masquerade",
    "    ct status dnat ip6 saddr . ip6 daddr @hairpin6 masquerade",
    `    meta mark & ${mark} == 0 return`,
    `    meta mark set meta mark and 0x${(~MASQUERADE_MARK >>> 0).toString(16)}`,
    "    masquerade fully-random",
    "  }",
    // Before the nat hooks of output (-100): a rejected ClusterIP is still its own address there.
    ...(["input", "forward", "output"] as const).map(
      (hook) =>
        `  chain filter-${hook} {\n    type filter hook ${hook} priority -110; policy accept;\n    ct state new jump endpoints-check\n  }`,
    ),
    "}",
    "",
  ].join("\n");
}

/**
 * A shard's fixed part: its frontend maps and the nat hooks looking them up.
 * Every shard's hooks see every new connection, so a miss is kept cheap: a
 * node port is looked up before `fib` asks whether the address is the
 * node's (the same match as `fib ... ip daddr != ... vmap`, in a cheaper order).
 */
export function shardSkeleton(k: number): string {
  return [
    `table inet ${shardTable(k)} {`,
    vmap("service-ips", "ipv4_addr . inet_proto . inet_service"),
    vmap("service-ips6", "ipv6_addr . inet_proto . inet_service"),
    vmap("service-nodeports", "inet_proto . inet_service"),
    vmap("service-nodeports6", "inet_proto . inet_service"),
    "  chain services {",
    "    ip daddr . meta l4proto . th dport vmap @service-ips",
    "    ip6 daddr . meta l4proto . th dport vmap @service-ips6",
    "    ip daddr != 127.0.0.0/8 meta l4proto . th dport @service-nodeports fib daddr type local meta l4proto . th dport vmap @service-nodeports",
    "    ip6 daddr != ::1 meta l4proto . th dport @service-nodeports6 fib daddr type local meta l4proto . th dport vmap @service-nodeports6",
    "  }",
    "  chain nat-prerouting {",
    "    type nat hook prerouting priority dstnat; policy accept;",
    "    jump services",
    "  }",
    "  chain nat-output {",
    "    type nat hook output priority -100; policy accept;",
    "    jump services",
    "  }",
    "}",
    "",
  ].join("\n");
}

/**
 * Whether an endpoint is on this node: its slice says so, or, when the slice
 * names no node, its address is in this node's pod CIDRs.
 */
export function localEndpointTest(
  nodeName: string,
  podCidrs: NodeView["podCidrs"] = { 4: [], 6: [] },
): (ep: ServiceEndpoint) => boolean {
  const cidrs = [...podCidrs[4], ...podCidrs[6]].flatMap((c) => parseCidr(c) ?? []);
  return (ep) => {
    if (ep.nodeName !== undefined) return ep.nodeName === nodeName;
    const a = parseIp(ep.ip);
    return a !== undefined && cidrs.some((c) => cidrContains(c, a));
  };
}

/** The hairpin elements of some plans, as `map key` pairs (a pair may come twice). */
export function hairpinPairs(
  plans: Iterable<PortPlan>,
  isLocal: (ep: ServiceEndpoint) => boolean,
): Array<[map: string, key: string]> {
  const out: Array<[string, string]> = [];
  for (const p of plans)
    for (const ep of [...p.internal, ...p.external])
      if (isLocal(ep)) out.push([p.family === 4 ? "hairpin" : "hairpin6", `${ep.ip} . ${ep.ip}`]);
  return out;
}

/** The `hairpin` sets' elements: every endpoint on this node, paired with itself. */
export function hairpinElements(
  plans: Iterable<PortPlan>,
  nodeName: string,
  podCidrs: NodeView["podCidrs"] = { 4: [], 6: [] },
): Map<string, Map<string, string>> {
  const sets = new Map([
    ["hairpin", new Map<string, string>()],
    ["hairpin6", new Map<string, string>()],
  ]);
  for (const [map, key] of hairpinPairs(plans, localEndpointTest(nodeName, podCidrs)))
    sets.get(map)?.set(key, "");
  return sets;
}
