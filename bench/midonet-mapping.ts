/**
 * bench/midonet-mapping: the Kubernetes → MidoNet translation at scale.
 *
 * A synthetic cluster, generated deterministically (no randomness): 5,000 nodes
 * (InternalIP + ExternalIP, host id and MAC annotations, one /24 pod CIDR
 * each), 150,000 running pods (30 per node, MAC annotated, addressed), and
 * 10,000 ClusterIP services (one TCP port; every fifth one also a UDP port)
 * whose EndpointSlices list 100,000 ready endpoints, each a pod's address, and
 * NetworkPolicy: 50 labelled namespaces, pods labelled by app and tier with a
 * named container port, 10,000 policies (bench/policy-cluster.ts, the kernel
 * policy bench's own).
 *
 * Measured in one process:
 * - full translation: mapCluster (every object mapped, indexed, chain
 *   positions assigned) plus the flat creation-ordered list of all resources;
 *   wall time, and peak memory: RSS sampled between steps and the kernel's
 *   maxRSS for the process when the translation is done, heap sampled the
 *   same way (the process's peak after the events is printed too: their
 *   garbage, which V8 lets the heap grow into);
 * - one incremental pod event: median and p99 over 1,000 events against the
 *   full state (pod created, pod given its MAC annotation, pod finished, pod
 *   deleted, in turn);
 * - one policy event: median and p99 over 200 events (a policy's port
 *   changed, a policy deleted and put back, in turn), and one pod relabel
 *   that makes it a peer of rules.
 *
 * Targets: whole set ≤ 10 s and ≤ 1.5 GiB; ≤ 1 ms per pod event; a policy event
 * within the same 1 ms.
 * Run: `npm run bench:midonet-mapping`.
 */
import { performance } from "node:perf_hooks";
import { uuid5 } from "../src/midonet/ids.js";
import {
  type EndpointSlice,
  mapCluster,
  type Node,
  type Pod,
  type Service,
} from "../src/midonet/mapping/index.js";
import { ANNOTATION_HOST_ID, ANNOTATION_MAC_ADDRESS } from "../src/midonet/node-contract.js";
import { clusterPodLabels, clusterPolicy, namespaceObject, nsName } from "./policy-cluster.js";

const NODES = 5_000;
const PODS_PER_NODE = 30;
const SERVICES = 10_000;
const ENDPOINTS_PER_SERVICE = 10;
const EVENTS = 1_000;
const NAMESPACES = 50;
/** `--policies N` runs with fewer (0: the mapping without NetworkPolicy, for comparison). */
const POLICIES = process.argv.includes("--policies")
  ? Number(process.argv[process.argv.indexOf("--policies") + 1])
  : 10_000;
const POLICY_EVENTS = 200;

const TARGETS = { seconds: 10, bytes: 1.5 * 1024 ** 3, eventMs: 1 };

const HOST_SPACE = "9b2fa3c4-0d1e-4f6a-8b7c-1d2e3f4a5b6c";
const MIB = 1024 ** 2;

function nodeName(i: number): string {
  return `node-${String(i).padStart(5, "0")}`;
}

function mac(prefix: number, n: number): string {
  const b = [0x02, prefix, (n >> 16) & 0xff, (n >> 8) & 0xff, n & 0xff, 0x01];
  return b.map((x) => x.toString(16).padStart(2, "0")).join(":");
}

/** Pod j of node i lives at 10.<i/256>.<i%256>.<j+3> (.1 gateway, .2 node). */
function podIp(i: number, j: number): string {
  return `10.${i >> 8}.${i & 0xff}.${j + 3}`;
}

function makeNodes(): Node[] {
  const nodes: Node[] = [];
  for (let i = 0; i < NODES; i++) {
    const name = nodeName(i);
    nodes.push({
      metadata: {
        name,
        annotations: {
          [ANNOTATION_HOST_ID]: uuid5(HOST_SPACE, name),
          [ANNOTATION_MAC_ADDRESS]: mac(0xaa, i),
        },
      },
      spec: { podCIDR: `10.${i >> 8}.${i & 0xff}.0/24` },
      status: {
        addresses: [
          { type: "InternalIP", address: `192.168.${i >> 8}.${i & 0xff}` },
          { type: "ExternalIP", address: `203.0.${i >> 8}.${i & 0xff}` },
          { type: "Hostname", address: name },
        ],
      },
    });
  }
  return nodes;
}

function makePod(i: number, j: number, extra = ""): Pod {
  return {
    metadata: {
      namespace: nsName(i % NAMESPACES),
      name: `pod-${i}-${j}${extra}`,
      annotations: { [ANNOTATION_MAC_ADDRESS]: mac(0xbb, i * PODS_PER_NODE + j) },
      labels: clusterPodLabels(i * PODS_PER_NODE + j),
    },
    // The named port NetworkPolicy resolves: the policy model reads containers, the mapping's Pod type does not.
    spec: {
      nodeName: nodeName(i),
      containers: [
        { name: "main", ports: [{ name: "http", containerPort: 8080, protocol: "TCP" }] },
      ],
    } as Pod["spec"],
    status: { phase: "Running", podIP: podIp(i, j), podIPs: [{ ip: podIp(i, j) }] },
  };
}

function makePods(): Pod[] {
  const pods: Pod[] = [];
  for (let i = 0; i < NODES; i++) for (let j = 0; j < PODS_PER_NODE; j++) pods.push(makePod(i, j));
  return pods;
}

function makeServices(): { services: Service[]; slices: EndpointSlice[] } {
  const services: Service[] = [];
  const slices: EndpointSlice[] = [];
  const totalPods = NODES * PODS_PER_NODE;
  for (let s = 0; s < SERVICES; s++) {
    const namespace = `ns-${s % 50}`;
    const name = `svc-${s}`;
    const withUdp = s % 5 === 0;
    services.push({
      metadata: { namespace, name },
      spec: {
        type: "ClusterIP",
        clusterIP: `10.96.${s >> 8}.${s & 0xff}`,
        ports: withUdp
          ? [
              { name: "http", protocol: "TCP", port: 80 },
              { name: "dns", protocol: "UDP", port: 53 },
            ]
          : [{ name: "http", protocol: "TCP", port: 80 }],
      },
    });
    const endpoints = [];
    for (let e = 0; e < ENDPOINTS_PER_SERVICE; e++) {
      // Spread over the nodes: endpoint e of service s is a pod 15 pods apart from the last.
      const p = (s * ENDPOINTS_PER_SERVICE + e) * 15 + (s % 15);
      const n = p % totalPods;
      endpoints.push({
        addresses: [podIp(Math.floor(n / PODS_PER_NODE), n % PODS_PER_NODE)],
        conditions: { ready: true },
      });
    }
    slices.push({
      metadata: {
        namespace,
        name: `${name}-abcde`,
        labels: { "kubernetes.io/service-name": name },
      },
      addressType: "IPv4",
      endpoints,
      ports: withUdp
        ? [
            { name: "http", protocol: "TCP", port: 8080 },
            { name: "dns", protocol: "UDP", port: 5353 },
          ]
        : [{ name: "http", protocol: "TCP", port: 8080 }],
    });
  }
  return { services, slices };
}

let peakRss = 0;
let peakHeap = 0;
function sample(): void {
  const m = process.memoryUsage();
  peakRss = Math.max(peakRss, m.rss);
  peakHeap = Math.max(peakHeap, m.heapUsed);
}

function verdict(ok: boolean): string {
  return ok ? "PASS" : "MISS";
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length - 1) * p))] as number;
}

function main(): void {
  const t0 = performance.now();
  const nodes = makeNodes();
  const pods = makePods();
  const { services, slices } = makeServices();
  const namespaces = Array.from({ length: NAMESPACES }, (_, n) => namespaceObject(nsName(n), n));
  const policies = Array.from({ length: POLICIES }, (_, k) => clusterPolicy(k, NAMESPACES));
  const genMs = performance.now() - t0;
  sample();
  const rssBefore = process.memoryUsage().rss;

  const cpuStart = process.cpuUsage();
  const start = performance.now();
  const mapper = mapCluster(
    { nodes, pods, services, endpointSlices: slices, namespaces, networkPolicies: policies },
    {
      tenant: "midonetkube",
      clusterCidrs: ["10.0.0.0/8"],
      serviceCidrs: ["10.96.0.0/12"],
      mtu: 1450,
    },
  );
  const mappedMs = performance.now() - start;
  sample();
  const all = mapper.state.resources();
  const totalMs = performance.now() - start;
  const cpu = process.cpuUsage(cpuStart);
  sample();
  // The translation's peak, before the events below add their garbage to the heap.
  const translationMaxRss = process.resourceUsage().maxRSS * 1024;
  const translationPeakRss = peakRss;
  const translationPeakHeap = peakHeap;

  const byKind = new Map<string, number>();
  for (const r of all) byKind.set(r.kind, (byKind.get(r.kind) ?? 0) + 1);
  const warnings = mapper.warnings().length;

  // Incremental pod events against the full state.
  const times: number[] = [];
  for (let e = 0; e < EVENTS; e++) {
    const i = (e * 37) % NODES;
    const j = e % PODS_PER_NODE;
    let pod: Pod;
    const t = performance.now();
    switch (e % 4) {
      case 0: // a new pod, scheduled and addressed
        pod = makePod(i, j, "-new");
        mapper.upsertPod(pod);
        break;
      case 1: // an existing pod's MAC annotation changes
        pod = makePod(i, j);
        (pod.metadata.annotations as Record<string, string>)[ANNOTATION_MAC_ADDRESS] = mac(0xcc, e);
        mapper.upsertPod(pod);
        break;
      case 2: // a pod finishes
        pod = makePod(i, j);
        (pod.status as { phase: string }).phase = "Succeeded";
        mapper.upsertPod(pod);
        break;
      default: // a pod is deleted
        mapper.deletePod(nsName(i % NAMESPACES), `pod-${i}-${j}`);
    }
    times.push(performance.now() - t);
  }
  sample();
  times.sort((a, b) => a - b);
  const median = percentile(times, 0.5);
  const p99 = percentile(times, 0.99);

  // Policy events against the full state.
  const policyTimes: number[] = [];
  for (let e = 0; e < POLICY_EVENTS; e++) {
    const k = (e * 53) % POLICIES;
    const policy = clusterPolicy(k, NAMESPACES) as { spec: { ingress: { ports: unknown[] }[] } };
    const t = performance.now();
    if (e % 2 === 0) {
      (policy.spec.ingress[0] as { ports: unknown[] }).ports = [
        { protocol: "TCP", port: 9000 + e },
      ];
      mapper.upsertNetworkPolicy(policy);
    } else {
      const { namespace, name } = (
        policy as unknown as { metadata: { namespace: string; name: string } }
      ).metadata;
      mapper.deleteNetworkPolicy(namespace, name);
      mapper.upsertNetworkPolicy(clusterPolicy(k, NAMESPACES));
    }
    policyTimes.push(performance.now() - t);
  }
  sample();
  policyTimes.sort((a, b) => a - b);
  const policyMedian = percentile(policyTimes, 0.5);
  const policyP99 = percentile(policyTimes, 0.99);
  const policyResources = mapper.state
    .resources()
    .filter(
      (r) =>
        r.owner.startsWith("NetworkPolicyFilter/") || r.owner.startsWith("NetworkPolicyPeers/"),
    ).length;

  const maxRss = process.resourceUsage().maxRSS * 1024;
  const peak = Math.max(translationPeakRss, translationMaxRss);
  const seconds = totalMs / 1000;

  console.log("bench/midonet-mapping");
  console.log(
    `input: ${nodes.length} nodes, ${pods.length} pods, ${services.length} services, ${slices.length} EndpointSlices, ${slices.reduce((n, s) => n + (s.endpoints?.length ?? 0), 0)} endpoints (generated in ${(genMs / 1000).toFixed(2)} s)`,
  );
  console.log(`output: ${all.length} resources, ${warnings} warnings`);
  console.log(
    `  ${[...byKind.entries()]
      .sort()
      .map(([k, n]) => `${k} ${n}`)
      .join(", ")}`,
  );
  console.log("");
  console.log("full translation");
  console.log(
    `  time        ${seconds.toFixed(2)} s (map + index ${(mappedMs / 1000).toFixed(2)} s, ordered list ${((totalMs - mappedMs) / 1000).toFixed(2)} s)   target ≤ ${TARGETS.seconds} s   ${verdict(seconds <= TARGETS.seconds)}`,
  );
  console.log(
    `  peak RSS    ${(peak / MIB).toFixed(0)} MiB (sampled ${(translationPeakRss / MIB).toFixed(0)} MiB, kernel maxRSS ${(translationMaxRss / MIB).toFixed(0)} MiB; input alone ${(rssBefore / MIB).toFixed(0)} MiB)   target ≤ ${(TARGETS.bytes / MIB).toFixed(0)} MiB   ${verdict(peak <= TARGETS.bytes)}`,
  );
  console.log(
    `  CPU time    ${((cpu.user + cpu.system) / 1e6).toFixed(2)} s (user ${(cpu.user / 1e6).toFixed(2)} s, system ${(cpu.system / 1e6).toFixed(2)} s; above the wall time when the GC's helper threads work)`,
  );
  console.log(`  peak heap   ${(translationPeakHeap / MIB).toFixed(0)} MiB (sampled)`);
  console.log(
    `  after the events below: peak RSS ${(Math.max(peakRss, maxRss) / MIB).toFixed(0)} MiB, heap ${(peakHeap / MIB).toFixed(0)} MiB (their garbage, which V8 lets the heap grow into before collecting; not the target's figure)`,
  );
  console.log("");
  console.log(`incremental pod event (${EVENTS} events: create, re-annotate, finish, delete)`);
  console.log(
    `  median      ${(median * 1000).toFixed(1)} µs (p99 ${(p99 * 1000).toFixed(1)} µs)   target ≤ ${TARGETS.eventMs} ms   ${verdict(median <= TARGETS.eventMs)}`,
  );
  console.log("");
  console.log(
    `NetworkPolicy: ${policies.length} policies in ${namespaces.length} namespaces → ${policyResources} chains and rules (part of the full translation above)`,
  );
  console.log(`policy event (${POLICY_EVENTS} events: a port changed, deleted and put back)`);
  console.log(
    `  median      ${policyMedian.toFixed(2)} ms (p99 ${policyP99.toFixed(2)} ms)   target ≤ ${TARGETS.eventMs} ms   ${verdict(policyMedian <= TARGETS.eventMs)}`,
  );
}

main();
