/**
 * The reconciler against the MidoNet API simulator: a cluster's topology made
 * in dependency order with the scheme's ids, exactly the right objects going
 * when pods, services and nodes go, no write at all on a restart against a
 * converged MidoNet, orphans of a downtime found by listing, make-before-break
 * for replaced rules, drift and rule order repaired, failures (500s,
 * timeouts) retried with backoff until it converges, never a create twice,
 * MAC and ARP entries the datapath learned told from ours, and tunnel zone
 * memberships followed across a downtime through the Nodes' records of the
 * zone joined.
 */
import { expect } from "chai";
import { MidonetClient } from "../../src/midonet/api.js";
import { idForKey, macForKey, subId } from "../../src/midonet/ids.js";
import { ClusterMapper, isEmpty, type ResourceChanges } from "../../src/midonet/mapping/index.js";
import { nodeOwner } from "../../src/midonet/mapping/model.js";
import { nodeIds } from "../../src/midonet/mapping/node.js";
import { podPortId } from "../../src/midonet/mapping/pod.js";
import { servicePortChainId } from "../../src/midonet/mapping/service.js";
import {
  type FlushReport,
  Reconciler,
  type TunnelZoneRecords,
  type WriteOp,
} from "../../src/midonet/reconciler.js";
import type { ResourceKind } from "../../src/midonet/resources.js";
import {
  duplicateCreates,
  expectTopology,
  HOSTS,
  NODE_NAMES,
  node,
  nodes,
  pod,
  podIp,
  podMac,
  service,
  slice,
  TENANT,
  topologyOf,
} from "../support/midonet-cluster.js";
import { type MidonetSimulator, startMidonetSimulator } from "../support/midonet-simulator.js";
import { until } from "../support/until.js";

const PODS = [0, 1, 2, 3, 4, 5];

/** A logger that keeps the messages logged at info. */
function infoLogger(info: string[]) {
  const none = () => {};
  return {
    debug: none,
    warn: none,
    error: none,
    info: (_: unknown, msg?: string) => void info.push(msg ?? ""),
  };
}

function fullCluster(mapper: ClusterMapper): ResourceChanges[] {
  const out: ResourceChanges[] = [];
  for (const n of nodes()) out.push(mapper.upsertNode(n));
  for (const i of PODS) out.push(mapper.upsertPod(pod(i)));
  out.push(mapper.upsertService(service()));
  out.push(mapper.upsertEndpointSlice(slice([0, 1, 2])));
  return out;
}

interface Harness {
  mapper: ClusterMapper;
  reconciler: Reconciler;
  client: MidonetClient;
  writes: { op: WriteOp; kind: ResourceKind }[];
  failures: string[];
  /** Feeds changes and flushes until nothing is due (or `max` flushes). */
  apply(...changes: ResourceChanges[]): Promise<FlushReport>;
  settle(max?: number): Promise<FlushReport>;
}

describe("midonet reconciler (against the API simulator)", function () {
  this.timeout(30_000);
  let sim: MidonetSimulator;
  /** The Nodes' tunnel zone records: they outlive a controller, as the Nodes do. */
  let recorded: Map<string, string>;
  /** Each record write, with how many MidoNet calls came before it. */
  let recordWrites: { node: string; zone: string | undefined; at: number }[];
  /** Record writes that broke the rule (moved while the membership it named was held). */
  let recordViolations: string[];

  beforeEach(async () => {
    sim = await startMidonetSimulator({
      hosts: Object.entries(HOSTS).map(([name, id]) => ({ id, name })),
    });
    recorded = new Map();
    recordWrites = [];
    recordViolations = [];
  });

  /** The node's host as its mapping has it (its node port's binding). */
  function hostOf(mapper: ClusterMapper, name: string): string | undefined {
    for (const r of mapper.state.mapping(nodeOwner(name))?.resources ?? []) {
      if (r.kind === "HostInterfacePort") return r.body.hostId;
    }
    return undefined;
  }

  /** The records as the controller keeps them on the Nodes of `mapper` (a deleted node's go with it). */
  function recordsOf(mapper: ClusterMapper, afterRecord?: () => void): TunnelZoneRecords {
    return {
      zoneOf: (name) => recorded.get(name),
      *all() {
        for (const [name, zone] of recorded) {
          const hostId = hostOf(mapper, name);
          if (hostId) yield { node: name, zone, hostId };
        }
      },
      write: async (name, zone) => {
        const before = recorded.get(name);
        const host = hostOf(mapper, name);
        const stillIn = sim
          .snapshot()
          .tunnelZoneHosts.some((m) => m.tunnelZoneId === before && m.hostId === host);
        if (before !== undefined && before !== zone && stillIn) {
          recordViolations.push(
            `${name}: record moved ${before} → ${zone} while its host is in ${before}`,
          );
        }
        if (zone === undefined) recorded.delete(name);
        else recorded.set(name, zone);
        recordWrites.push({ node: name, zone, at: sim.calls.length });
        afterRecord?.();
      },
    };
  }

  afterEach(async () => {
    await sim.close();
    expect(recordViolations, "tunnel zone records moved too early").to.deep.equal([]);
  });

  function harness(
    clientOptions: { timeoutMs?: number; retries?: number } = {},
    life: {
      signal?: AbortSignal;
      afterWrite?: (op: WriteOp) => void;
      info?: string[];
      /** Runs once a record is written; throwing fails the write after it happened. */
      afterRecord?: () => void;
    } = {},
  ): Harness {
    const mapper = new ClusterMapper({ tenant: TENANT });
    const client = new MidonetClient({
      baseUrl: sim.baseUrl,
      user: "admin",
      password: "admin",
      project: "admin",
      timeoutMs: clientOptions.timeoutMs ?? 2000,
      retries: clientOptions.retries ?? 1,
      backoffMs: 5,
      maxBackoffMs: 20,
    });
    const writes: Harness["writes"] = [];
    const failures: string[] = [];
    const reconciler = new Reconciler({
      client,
      state: mapper.state,
      config: mapper.config,
      backoffMs: 20,
      maxBackoffMs: 100,
      records: recordsOf(mapper, life.afterRecord),
      ...(life.signal ? { signal: life.signal } : {}),
      ...(life.info ? { logger: infoLogger(life.info) } : {}),
      observer: {
        write: (op, kind) => {
          writes.push({ op, kind });
          life.afterWrite?.(op);
        },
        failure: (op, kind, err) => failures.push(`${op} ${kind}: ${(err as Error).message}`),
      },
    });
    const settle = async (max = 40): Promise<FlushReport> => {
      let report = await reconciler.flush();
      for (let i = 0; i < max && !reconciler.converged; i++) {
        const due = reconciler.nextDue() ?? Date.now();
        await new Promise((r) => setTimeout(r, Math.max(0, due - Date.now())));
        report = await reconciler.flush();
      }
      return report;
    };
    return {
      mapper,
      reconciler,
      client,
      writes,
      failures,
      settle,
      apply: async (...changes) => {
        for (const c of changes) reconciler.enqueue(c);
        return settle();
      },
    };
  }

  /** A converged cluster, and the call log cleared. */
  async function converged(): Promise<Harness> {
    const h = harness();
    fullCluster(h.mapper);
    expect((await h.reconciler.resync()).ok).to.equal(true);
    await h.settle();
    expect(h.reconciler.converged).to.equal(true);
    expectTopology(sim.snapshot(), h.mapper.state);
    sim.clearCalls();
    h.writes.length = 0;
    return h;
  }

  const writeCalls = () => sim.writes().map((c) => `${c.method} ${c.location ?? c.path}`);

  /** The cluster less node3 and its pods (web-2, web-5), as a mapper fed from scratch sees it. */
  function withoutNode3(mapper: ClusterMapper): void {
    fullCluster(mapper);
    mapper.deleteNode("node3");
    for (const i of [2, 5]) mapper.deletePod("default", `web-${i}`);
  }

  /** A controller started anew (resync, then settled) on the cluster less node3. */
  async function restartedWithoutNode3(): Promise<Harness> {
    const restarted = harness();
    withoutNode3(restarted.mapper);
    expect((await restarted.reconciler.resync()).ok).to.equal(true);
    await restarted.settle();
    expect(restarted.failures).to.deep.equal([]);
    return restarted;
  }

  it("three nodes, their pods and a service with three endpoints: exactly the expected topology, with the scheme's ids", async () => {
    const h = harness();
    fullCluster(h.mapper);
    expect(await h.reconciler.resync()).to.deep.include({ ok: true, orphans: 0 });
    const report = await h.settle();
    expect(h.failures).to.deep.equal([]);
    expect(report).to.include({ failures: 0, pending: 0 });
    const snapshot = sim.snapshot();
    expectTopology(snapshot, h.mapper.state);

    // The ids, spelled out independently of the mapping code.
    const g = h.mapper.config.ids;
    expect(g.clusterRouter).to.equal("21607839-c6b4-5b98-8aa1-89a1aab61bca");
    expect(snapshot.routers.map((r) => r.id)).to.deep.equal([g.clusterRouter]);
    expect(snapshot.tunnelZones.map((z) => z.id)).to.deep.equal([
      "51329ede-9b0f-5923-98ee-bf4ef08af54f",
    ]);
    expect(snapshot.bridges.map((b) => b.id).sort()).to.deep.equal(
      NODE_NAMES.map((n) => idForKey(TENANT, "Node", n)).sort(),
    );
    expect(snapshot.bridges.map((b) => b.id)).to.include("d1c5f0f1-d501-5330-b521-b2daaf3d238b");
    const svcChain = servicePortChainId(h.mapper.config, "default", "web", "http");
    expect(snapshot.chains.map((c) => c.name).sort()).to.deep.equal(
      [
        "KUBE-MAIN",
        "KUBE-PRE",
        "KUBE-SERVICES",
        "KUBE-NODE-node1",
        "KUBE-NODE-node2",
        "KUBE-NODE-node3",
        "KUBE-SVC-default/web/http",
      ].sort(),
    );
    // Per node: bridge port, node port, one pod port per pod on it; one router port each.
    expect(snapshot.ports.filter((p) => p.type === "Bridge")).to.have.length(3 * 2 + PODS.length);
    expect(snapshot.ports.filter((p) => p.type === "Router")).to.have.length(3);
    for (const i of PODS) {
      const port = podPortId(h.mapper.config, "default", `web-${i}`);
      const bound = snapshot.hostInterfacePorts.find((b) => b.portId === port);
      expect(bound?.hostId, `web-${i}`).to.equal(HOSTS[`node${(i % 3) + 1}`]);
    }
    expect(snapshot.tunnelZoneHosts.map((m) => [m.hostId, m.ipAddress]).sort()).to.deep.equal(
      [
        [HOSTS.node1, "192.168.0.11"],
        [HOSTS.node2, "192.168.0.12"],
        [HOSTS.node3, "192.168.0.13"],
      ].sort(),
    );
    // The service chain: a hairpin SNAT per endpoint, then one DNAT over all three.
    const rules = topologyOf(snapshot).chains.get(svcChain) ?? [];
    const types = rules.map((id) => snapshot.rules.find((r) => r.id === id)?.type);
    expect(types).to.deep.equal(["snat", "snat", "snat", "dnat"]);
    const dnat = snapshot.rules.find((r) => r.type === "dnat");
    expect(dnat?.natTargets?.map((t) => t.addressFrom)).to.deep.equal([
      podIp(0),
      podIp(1),
      podIp(2),
    ]);
    // Every object created once, in dependency order (MidoNet refuses otherwise: no 4xx).
    expect(duplicateCreates(sim.calls)).to.deep.equal([]);
    // (401s aside: the first calls go without a token and log in.)
    expect(sim.calls.filter((c) => c.status >= 400 && c.status !== 401)).to.deep.equal([]);
    expect(h.writes.filter((w) => w.op !== "create")).to.deep.equal([]);
  });

  it("a restart against a converged MidoNet reads (GETs only) and writes nothing", async () => {
    await converged();
    const restarted = harness();
    fullCluster(restarted.mapper);
    const report = await restarted.reconciler.resync();
    expect(report).to.deep.equal({ ok: true, missing: 0, differing: 0, orphans: 0 });
    await restarted.settle();
    expect(sim.calls.filter((c) => c.method !== "GET" && c.path !== "/login")).to.deep.equal([]);
    expect(sim.calls.filter((c) => c.method === "GET").length).to.be.greaterThan(0);
    expect(restarted.reconciler.converged).to.equal(true);
  });

  it("scaling the deployment down: exactly the pod's port, binding, MAC and ARP entries go, and the DNAT is replaced make-before-break", async () => {
    const h = await converged();
    const cfg = h.mapper.config;
    const port = podPortId(cfg, "default", "web-2");
    const bridge = nodeIds(cfg, "node3").bridge;
    const svcChain = servicePortChainId(cfg, "default", "web", "http");
    const oldDnat = subId(svcChain, `DNAT ${podIp(0)}:8080 ${podIp(1)}:8080 ${podIp(2)}:8080`);
    const newDnat = subId(svcChain, `DNAT ${podIp(0)}:8080 ${podIp(1)}:8080`);
    const hairpin = subId(svcChain, `Hairpin SNAT 10.96.0.10 ${podIp(2)}`);
    const mac = "0a-58-0a-01-03-0c";

    await h.apply(
      h.mapper.upsertEndpointSlice(slice([0, 1])),
      h.mapper.deletePod("default", "web-2"),
    );
    expect(h.failures).to.deep.equal([]);
    expectTopology(sim.snapshot(), h.mapper.state);
    const calls = writeCalls();
    expect([...calls].sort()).to.deep.equal(
      [
        `POST /rules/${newDnat}`,
        `DELETE /rules/${oldDnat}`,
        `DELETE /rules/${hairpin}`,
        `DELETE /hosts/${HOSTS.node3}/ports/${port}`,
        `DELETE /bridges/${bridge}/mac_table/${mac}_${port}`,
        `DELETE /bridges/${bridge}/arp_table/${podIp(2)}_${mac}`,
        `DELETE /ports/${port}`,
      ].sort(),
    );
    expect(calls.indexOf(`POST /rules/${newDnat}`)).to.be.lessThan(
      calls.indexOf(`DELETE /rules/${oldDnat}`),
    );
    // The new DNAT took the old one's place: after the hairpin SNATs.
    const order = topologyOf(sim.snapshot()).chains.get(svcChain);
    expect(order?.at(-1)).to.equal(newDnat);
  });

  it("scaling up: the new pod's objects and the wider DNAT are created, nothing else changes", async () => {
    const h = await converged();
    await h.apply(h.mapper.upsertPod(pod(6)), h.mapper.upsertEndpointSlice(slice([0, 1, 2, 6])));
    expectTopology(sim.snapshot(), h.mapper.state);
    const calls = writeCalls();
    const port = podPortId(h.mapper.config, "default", "web-6");
    expect(calls).to.include(`POST /ports/${port}`);
    expect(calls.filter((c) => c.startsWith("POST"))).to.have.length(
      1 /* port */ + 1 /* binding */ + 2 /* MAC, ARP */ + 2 /* hairpin SNAT, DNAT */,
    );
    expect(calls.filter((c) => c.startsWith("DELETE"))).to.have.length(1); // the old DNAT
    expect(calls.filter((c) => c.startsWith("PUT"))).to.deep.equal([]);
  });

  it("deleting a service: its chain, its rules and its jump go, nothing else", async () => {
    const h = await converged();
    const cfg = h.mapper.config;
    const svcChain = servicePortChainId(cfg, "default", "web", "http");
    const before = topologyOf(sim.snapshot());
    await h.apply(h.mapper.deleteService("default", "web"));
    const after = topologyOf(sim.snapshot());
    expectTopology(sim.snapshot(), h.mapper.state);
    const gone = [...before.objects.keys()].filter((k) => !after.objects.has(k));
    const jump = idForKey(TENANT, "ServicePortSub", "default/web/http/10.96.0.10/6/80");
    expect(gone.sort()).to.deep.equal(
      [svcChain, jump, ...(before.chains.get(svcChain) ?? [])].sort(),
    );
    expect(writeCalls().every((c) => c.startsWith("DELETE"))).to.equal(true);
  });

  it("deleting a node with its pods: exactly the node's and the pods' objects go", async () => {
    const h = await converged();
    const before = topologyOf(sim.snapshot());
    const changes = [h.mapper.deleteNode("node2"), h.mapper.deletePod("default", "web-1")];
    changes.push(h.mapper.deletePod("default", "web-4"));
    changes.push(h.mapper.upsertEndpointSlice(slice([0, 2])));
    await h.apply(...changes);
    expect(h.failures).to.deep.equal([]);
    expectTopology(sim.snapshot(), h.mapper.state);
    const after = topologyOf(sim.snapshot());
    const gone = [...before.objects.keys()].filter((k) => !after.objects.has(k));
    const n = nodeIds(h.mapper.config, "node2");
    for (const key of [
      n.bridge,
      n.bridgePort,
      n.routerPort,
      n.route,
      n.chain,
      n.nodePort,
      n.snatRule,
    ]) {
      expect(gone, key).to.include(key);
    }
    expect(gone).to.include(
      `/tunnel_zones/${h.mapper.config.ids.defaultTunnelZone}/hosts/${HOSTS.node2}`,
    );
    expect(gone).to.include(podPortId(h.mapper.config, "default", "web-1"));
    // Nothing of node1 or node3 went.
    for (const name of ["node1", "node3"]) {
      const ids = nodeIds(h.mapper.config, name);
      expect(after.objects.has(ids.bridge) && after.objects.has(ids.nodePort), name).to.equal(true);
    }
  });

  it("a node deleted while its pods stay: their ports wait for it (held back, not failing) and come back with it", async () => {
    const h = await converged();
    await h.apply(h.mapper.deleteNode("node2"));
    expect(h.failures).to.deep.equal([]);
    expectTopology(sim.snapshot(), h.mapper.state);
    expect(h.reconciler.heldBack).to.be.greaterThan(0);
    expect(h.reconciler.converged).to.equal(true);
    await h.apply(
      h.mapper.upsertNode(node("node2", 2, { "midonet.org/host-id": HOSTS.node2 as string })),
    );
    expect(h.reconciler.heldBack).to.equal(0);
    expectTopology(sim.snapshot(), h.mapper.state);
    const port = podPortId(h.mapper.config, "default", "web-1");
    expect(topologyOf(sim.snapshot()).objects.has(port)).to.equal(true);
  });

  it("a node's MidoNet host changing: its and its pods' bindings and membership move (old ones deleted first)", async () => {
    const h = await converged();
    const newHost = "0b7c3a4e-4444-4a4a-8a4a-000000000004";
    sim.addHost({ id: newHost, name: "node1-reinstalled" });
    await h.apply(h.mapper.upsertNode(node("node1", 1, { "midonet.org/host-id": newHost })));
    expect(h.failures).to.deep.equal([]);
    expectTopology(sim.snapshot(), h.mapper.state);
    const snapshot = sim.snapshot();
    const port = podPortId(h.mapper.config, "default", "web-0");
    expect(snapshot.hostInterfacePorts.find((b) => b.portId === port)?.hostId).to.equal(newHost);
    expect(snapshot.tunnelZoneHosts.map((m) => m.hostId)).to.not.include(HOSTS.node1);
    const calls = writeCalls();
    expect(calls.indexOf(`DELETE /hosts/${HOSTS.node1}/ports/${port}`)).to.be.lessThan(
      calls.indexOf(`POST /hosts/${newHost}/ports/${port}`),
    );
  });

  /** The addresses ClusterRouter routes locally through `port` (MidoNet's Local /32 routes). */
  function localRoutesThrough(port: string): string[] {
    return sim
      .snapshot()
      .routes.filter((r) => r.type === "Local" && r.nextHopPort === port)
      .map((r) => `${r.dstNetworkAddr}/${r.dstNetworkLength}`);
  }

  /** node1 as registered again with the pod CIDR 10.1.9.0/24 (and its pods gone with it). */
  function node1WithNewPodCidr(mapper: ClusterMapper): ResourceChanges[] {
    return [
      mapper.deletePod("default", "web-0"),
      mapper.deletePod("default", "web-3"),
      mapper.upsertNode({
        ...node("node1", 1, { "midonet.org/host-id": HOSTS.node1 as string }),
        spec: { podCIDR: "10.1.9.0/24" },
      }),
    ];
  }

  it("a node registered again with another pod CIDR while it was down: its router port gets the new address's Local route and loses the old one", async () => {
    const h = await converged();
    const routerPort = nodeIds(h.mapper.config, "node1").routerPort;
    expect(localRoutesThrough(routerPort)).to.deep.equal(["10.1.1.1/32"]);
    const restarted = harness();
    fullCluster(restarted.mapper);
    node1WithNewPodCidr(restarted.mapper);
    expect((await restarted.reconciler.resync()).ok).to.equal(true);
    await restarted.settle();
    expect(restarted.failures).to.deep.equal([]);
    expectTopology(sim.snapshot(), restarted.mapper.state);
    const port = sim.snapshot().ports.find((p) => p.id === routerPort);
    expect(
      port?.type === "Router" && [port.networkAddress, port.networkLength, port.portAddress],
    ).to.deep.equal(["10.1.9.0", 24, "10.1.9.1"]);
    expect(localRoutesThrough(routerPort)).to.deep.equal(["10.1.9.1/32"]);
  });

  it("a node's pod CIDR changing while running: the same, and its pod route and link come back with the port", async () => {
    const h = await converged();
    const ids = nodeIds(h.mapper.config, "node1");
    await h.apply(...node1WithNewPodCidr(h.mapper));
    expect(h.failures).to.deep.equal([]);
    expectTopology(sim.snapshot(), h.mapper.state);
    expect(localRoutesThrough(ids.routerPort)).to.deep.equal(["10.1.9.1/32"]);
    const podRoute = sim.snapshot().routes.find((r) => r.id === ids.route);
    expect(podRoute).to.include({ dstNetworkAddr: "10.1.9.0", nextHopPort: ids.routerPort });
    expect(sim.snapshot().ports.find((p) => p.id === ids.bridgePort)?.peerId).to.equal(
      ids.routerPort,
    );
  });

  it("orphans of a downtime (a service and a node deleted while it was down) are found by listing and deleted at resync", async () => {
    await converged();
    const restarted = harness();
    withoutNode3(restarted.mapper);
    restarted.mapper.deleteService("default", "web");
    const report = await restarted.reconciler.resync();
    expect(report.ok).to.equal(true);
    expect(report.missing).to.equal(0);
    expect(report.orphans).to.be.greaterThan(10);
    await restarted.settle();
    expect(restarted.failures).to.deep.equal([]);
    expectTopology(sim.snapshot(), restarted.mapper.state);
    expect(writeCalls().every((c) => c.startsWith("DELETE"))).to.equal(true);
  });

  it("a host an operator put in the default tunnel zone (a gateway, no node's) is left there at resync; a deleted node's membership goes", async () => {
    const h = await converged();
    const gateway = "0b7c3a4e-9999-4a9a-8a9a-000000000009";
    sim.addHost({ id: gateway, name: "gateway1" });
    const zone = h.mapper.config.ids.defaultTunnelZone;
    await h.client.tunnelZoneHosts.create(zone, { hostId: gateway, ipAddress: "192.168.1.250" });
    sim.clearCalls();

    await restartedWithoutNode3();
    const members = (await h.client.tunnelZoneHosts.list(zone)).map((m) => m.hostId.toLowerCase());
    expect(members).to.include(gateway);
    expect(members).to.not.include(HOSTS.node3);
    expect(writeCalls().filter((c) => c.includes(gateway))).to.deep.equal([]);
  });

  it("an operator's uplink on ClusterRouter (port, binding to a gateway in the zone, default route) and a rule in a service chain survive a restart's resync", async () => {
    const h = await converged();
    const router = h.mapper.config.ids.clusterRouter;
    const zone = h.mapper.config.ids.defaultTunnelZone;
    const gateway = "0b7c3a4e-9999-4a9a-8a9a-000000000009";
    sim.addHost({ id: gateway, name: "gateway1" });
    await h.client.tunnelZoneHosts.create(zone, { hostId: gateway, ipAddress: "192.168.1.250" });
    // Made without ids, as an operator does: MidoNet gives them random (version 4) ones.
    await h.client.ports.createOnRouter(router, {
      type: "Router",
      networkAddress: "172.16.0.0",
      networkLength: 30,
      portAddress: "172.16.0.2",
      portMac: "02:00:00:00:00:01",
    } as never);
    const uplink = (await h.client.ports.listOnRouter(router)).find(
      (p) => p.portMac === "02:00:00:00:00:01",
    )?.id as string;
    await h.client.hostInterfacePorts.create({
      hostId: gateway,
      portId: uplink,
      interfaceName: "uplink0",
    });
    await h.client.routes.create(router, {
      type: "Normal",
      srcNetworkAddr: "0.0.0.0",
      srcNetworkLength: 0,
      dstNetworkAddr: "0.0.0.0",
      dstNetworkLength: 0,
      nextHopPort: uplink,
      nextHopGateway: "172.16.0.1",
      weight: 100,
    } as never);
    const chain = servicePortChainId(h.mapper.config, "default", "web", "http");
    await h.client.rules.create(chain, { type: "accept", position: 1 } as never);
    const snapshotBefore = sim.snapshot();
    sim.clearCalls();

    const restarted = harness();
    fullCluster(restarted.mapper);
    expect((await restarted.reconciler.resync()).ok).to.equal(true);
    await restarted.settle();
    expect(writeCalls(), "writes at the restart").to.deep.equal([]);
    const after = sim.snapshot();
    expect(after.ports.map((p) => p.id)).to.include(uplink);
    expect(after.routes.length).to.equal(snapshotBefore.routes.length);
    expect(after.rules.length).to.equal(snapshotBefore.rules.length);
    expect(after.hostInterfacePorts.some((b) => b.portId === uplink)).to.equal(true);
    expect(after.tunnelZoneHosts.some((m) => m.hostId === gateway)).to.equal(true);
  });

  it("a node's deletion removes its tunnel zone membership first: a crash right after leaves nothing a restart cannot recognise", async () => {
    await converged();
    const zone = `/tunnel_zones/${new ClusterMapper({ tenant: TENANT }).config.ids.defaultTunnelZone}/hosts`;
    // The process dies right after its first write.
    const crash = new AbortController();
    const dying = harness({}, { signal: crash.signal, afterWrite: () => crash.abort() });
    fullCluster(dying.mapper);
    expect((await dying.reconciler.resync()).ok).to.equal(true);
    dying.reconciler.enqueue(dying.mapper.deleteNode("node3"));
    for (const i of [2, 5]) dying.reconciler.enqueue(dying.mapper.deletePod("default", `web-${i}`));
    await dying.reconciler.flush();
    expect(writeCalls()).to.deep.equal([`DELETE ${zone}/${HOSTS.node3}`]);

    // Restarted: node3's ports and bindings are still ours by their ids, and go.
    const restarted = await restartedWithoutNode3();
    expectTopology(sim.snapshot(), restarted.mapper.state);
    const snapshot = sim.snapshot();
    expect(snapshot.tunnelZoneHosts.map((m) => m.hostId)).to.not.include(HOSTS.node3);
    expect(snapshot.hostInterfacePorts.map((b) => b.hostId)).to.not.include(HOSTS.node3);
  });

  it("drift is repaired at resync: a bridge's filter cleared by hand is PUT back, a rule out of order re-made in place", async () => {
    const h = await converged();
    const cfg = h.mapper.config;
    const bridge = nodeIds(cfg, "node1").bridge;
    await h.client.bridges.update({ id: bridge, name: "node1", tenantId: TENANT });
    // rev_snat moved after rev_dnat in KUBE-PRE: hairpin replies would miss it.
    await h.client.rules.delete(cfg.ids.reverseSnat);
    await h.client.rules.create(cfg.ids.preChain, {
      id: cfg.ids.reverseSnat,
      type: "rev_snat",
      flowAction: "continue",
      position: 2,
    });
    sim.clearCalls();
    const report = await h.reconciler.resync();
    expect(report).to.include({ ok: true, missing: 0, differing: 2, orphans: 0 });
    await h.settle();
    expectTopology(sim.snapshot(), h.mapper.state);
    // One of the two rules is re-made at its place (either restores the order).
    const calls = writeCalls();
    expect(calls[0]).to.equal(`PUT /bridges/${bridge}`);
    const remade = calls[1]?.replace("DELETE /rules/", "");
    expect([cfg.ids.reverseSnat, cfg.ids.reverseDnat]).to.include(remade);
    expect(calls.slice(1)).to.deep.equal([`DELETE /rules/${remade}`, `POST /rules/${remade}`]);
  });

  it("an operator's settings on ClusterRouter, a node's bridge and its node port (load balancer, chains, mirrors, QoS policy, admin state) survive the PUTs that repair drift", async () => {
    const h = await converged();
    const cfg = h.mapper.config;
    const ids = nodeIds(cfg, "node1");
    const mirror = "0b7c3a4e-5555-4a5a-8a5a-000000000005";
    const loadBalancer = "0b7c3a4e-6666-4a6a-8a6a-000000000006";
    const forward = "0b7c3a4e-7777-4a7a-8a7a-000000000007";
    await h.client.chains.create({ id: forward, name: "operator-forward", tenantId: "ops" });
    const routerSettings = {
      loadBalancerId: loadBalancer,
      forwardChainId: forward,
      localRedirectChainId: forward,
      inboundMirrorIds: [mirror],
      qosPolicyId: loadBalancer,
      adminStateUp: false,
    };
    const bridgeSettings = { outboundMirrorIds: [mirror], qosPolicyId: loadBalancer };
    const portSettings = { inboundMirrorIds: [mirror], adminStateUp: false };
    // Each set with a drift the controller repairs by a PUT: a name, a filter cleared.
    const router = await h.client.routers.get(cfg.ids.clusterRouter);
    await h.client.routers.update({
      ...router,
      ...routerSettings,
      id: cfg.ids.clusterRouter,
      name: "renamed",
    });
    const bridge = await h.client.bridges.get(ids.bridge);
    await h.client.bridges.update({
      ...bridge,
      ...bridgeSettings,
      id: ids.bridge,
      inboundFilterId: null,
    });
    const port = await h.client.ports.get(ids.nodePort);
    await h.client.ports.update({
      ...port!,
      ...portSettings,
      id: ids.nodePort,
      outboundFilterId: null,
    });
    sim.clearCalls();

    const restarted = harness();
    fullCluster(restarted.mapper);
    expect(await restarted.reconciler.resync()).to.include({ ok: true, differing: 3 });
    await restarted.settle();
    expect(restarted.failures).to.deep.equal([]);
    expect(
      writeCalls()
        .filter((c) => c.startsWith("PUT"))
        .sort(),
    ).to.deep.equal(
      [
        `PUT /routers/${cfg.ids.clusterRouter}`,
        `PUT /bridges/${ids.bridge}`,
        `PUT /ports/${ids.nodePort}`,
      ].sort(),
    );
    const after = sim.snapshot();
    expect(after.routers.find((r) => r.id === cfg.ids.clusterRouter)).to.deep.include({
      ...routerSettings,
      name: "ClusterRouter",
    });
    expect(after.bridges.find((b) => b.id === ids.bridge)).to.deep.include(bridgeSettings);
    expect(after.ports.find((p) => p.id === ids.nodePort)).to.deep.include({
      ...portSettings,
      outboundFilterId: ids.chain,
    });
  });

  it("the simulator answering 500s for a while: failures are retried with backoff, it converges afterwards with every object created once", async () => {
    const h = harness({ retries: 0 });
    // The outage lasts until the test ends it, not for a window of time that a loaded
    // machine could let close before the first flush.
    const outage = sim.injectFault({ method: "POST", path: "/bridges/*", status: 500 });
    sim.injectFault({ method: "POST", path: "/chains/*/rules", status: 503, times: 5 });
    fullCluster(h.mapper);
    expect((await h.reconciler.resync()).ok).to.equal(true);
    const first = await h.reconciler.flush();
    expect(first.failures).to.be.greaterThan(0);
    expect(first.pending).to.be.greaterThan(0);
    expect(h.failures.some((f) => f.includes("500"))).to.equal(true);
    outage.remove();
    await h.settle(200);
    expect(h.reconciler.converged).to.equal(true);
    expectTopology(sim.snapshot(), h.mapper.state);
    expect(duplicateCreates(sim.calls)).to.deep.equal([]);
  });

  it("timeouts (answers that never come, and answers that come too late after the create happened): it converges without a duplicate create", async () => {
    const h = harness({ timeoutMs: 150, retries: 0 });
    // Creates of ports happen server-side but answer too late; rule creates hang for a while.
    sim.injectFault({ method: "POST", path: "/bridges/*/ports", delayMs: 300, times: 4 });
    sim.injectFault({ method: "POST", path: "/chains/*/rules", hang: true, times: 2 });
    fullCluster(h.mapper);
    expect((await h.reconciler.resync()).ok).to.equal(true);
    await h.settle(200);
    expect(h.failures.some((f) => f.includes("timed out"))).to.equal(true);
    expect(h.reconciler.converged).to.equal(true);
    expectTopology(sim.snapshot(), h.mapper.state);
    expect(duplicateCreates(sim.calls)).to.deep.equal([]);
    // The late-answered creates were looked up, not POSTed again.
    const posts = sim.calls.filter((c) => c.method === "POST" && c.path.endsWith("/ports"));
    expect(posts.filter((c) => c.status === 409)).to.deep.equal([]);
  });

  it("a rule create whose answer came too late: later rules of that chain still go before its DNAT", async () => {
    const h = harness({ timeoutMs: 100, retries: 0 });
    for (const n of nodes()) h.mapper.upsertNode(n);
    for (const i of [0, 1, 2]) h.mapper.upsertPod(pod(i));
    h.mapper.upsertService(service());
    h.mapper.upsertEndpointSlice(slice([0]));
    expect((await h.reconciler.resync()).ok).to.equal(true);
    await h.settle();
    const chain = servicePortChainId(h.mapper.config, "default", "web", "http");
    const order = () =>
      sim
        .snapshot()
        .rules.filter((r) => r.chainId === chain)
        .sort((a, b) => (a.position ?? 0) - (b.position ?? 0))
        .map((r) => (r.type === "snat" ? `snat ${r.nwSrcAddress}` : r.type));
    expect(order()).to.deep.equal([`snat ${podIp(0)}`, "dnat"]);

    // The second endpoint's SNAT is made, but its answer comes after the client gave up.
    sim.injectFault({ method: "POST", path: `/chains/${chain}/rules`, delayMs: 300, times: 1 });
    await h.apply(h.mapper.upsertEndpointSlice(slice([0, 1])));
    await h.apply(h.mapper.upsertEndpointSlice(slice([0, 1, 2])));
    expect(h.reconciler.converged).to.equal(true);
    expect(order()).to.deep.equal([
      `snat ${podIp(0)}`,
      `snat ${podIp(1)}`,
      `snat ${podIp(2)}`,
      "dnat",
    ]);
  });

  // -- tunnel zones named by the nodes' annotations --------------------------

  const ZONE_X = "7a5e0000-0000-4000-8000-00000000000a";
  const ZONE_Y = "7a5e0000-0000-4000-8000-00000000000b";
  const GATEWAY = "0b7c3a4e-9999-4a9a-8a9a-000000000009";

  /** Zones X and Y as an operator makes them, with a gateway (no node's host) in X. */
  async function operatorZones(client: MidonetClient): Promise<void> {
    await client.tunnelZones.create({ id: ZONE_X, name: "zone-x", type: "vxlan" });
    await client.tunnelZones.create({ id: ZONE_Y, name: "zone-y", type: "vxlan" });
    sim.addHost({ id: GATEWAY, name: "gateway1" });
    await client.tunnelZoneHosts.create(ZONE_X, { hostId: GATEWAY, ipAddress: "192.168.1.250" });
  }

  /** The full cluster, each node annotated with its zone (undefined: none, the default). */
  function clusterInZones(mapper: ClusterMapper, zones: Record<string, string | undefined>) {
    fullCluster(mapper);
    for (const [i, name] of NODE_NAMES.entries()) {
      const annotations: Record<string, string> = { "midonet.org/host-id": HOSTS[name] as string };
      const zone = zones[name];
      if (zone) annotations["midonet.org/tunnel-zone-id"] = zone;
      mapper.upsertNode(node(name, i + 1, annotations));
    }
  }

  /** "<zone>/<node>" for every membership MidoNet holds, the gateway as "gateway". */
  const memberships = (): string[] => {
    const nodeOf = new Map(Object.entries(HOSTS).map(([name, id]) => [id, name]));
    nodeOf.set(GATEWAY, "gateway");
    const zoneName = (id: string | undefined) =>
      id === ZONE_X ? "X" : id === ZONE_Y ? "Y" : "default";
    return sim
      .snapshot()
      .tunnelZoneHosts.map((m) => `${zoneName(m.tunnelZoneId)}/${nodeOf.get(m.hostId)}`)
      .sort();
  };

  async function convergedInZones(zones: Record<string, string | undefined>): Promise<Harness> {
    const h = harness();
    await operatorZones(h.client);
    clusterInZones(h.mapper, zones);
    expect((await h.reconciler.resync()).ok).to.equal(true);
    await h.settle();
    expect(h.failures).to.deep.equal([]);
    return h;
  }

  /** A restart in these zones finds nothing to do and writes nothing to MidoNet. */
  async function restartWritesNothing(zones: Record<string, string | undefined>): Promise<void> {
    sim.clearCalls();
    const restarted = harness();
    clusterInZones(restarted.mapper, zones);
    expect(await restarted.reconciler.resync()).to.deep.equal({
      ok: true,
      missing: 0,
      differing: 0,
      orphans: 0,
    });
    await restarted.settle();
    expect(writeCalls()).to.deep.equal([]);
  }

  it("nodes moved to another tunnel zone while it was down (X→default, X→Y, default→X): the old memberships go, the new ones come, the records follow", async () => {
    const h = await convergedInZones({ node1: ZONE_X, node2: ZONE_X, node3: undefined });
    const defaultZone = h.mapper.config.ids.defaultTunnelZone;
    expect(memberships()).to.deep.equal(["X/gateway", "X/node1", "X/node2", "default/node3"]);
    expect(Object.fromEntries(recorded)).to.deep.equal({
      node1: ZONE_X,
      node2: ZONE_X,
      node3: defaultZone,
    });

    const restarted = harness();
    clusterInZones(restarted.mapper, { node1: undefined, node2: ZONE_Y, node3: ZONE_X });
    const report = await restarted.reconciler.resync();
    expect(report).to.deep.include({ ok: true, orphans: 3 });
    await restarted.settle();
    expect(restarted.failures).to.deep.equal([]);
    expect(restarted.reconciler.converged).to.equal(true);
    // The gateway an operator put in X stays: only a node's own recorded membership is ours.
    expect(memberships()).to.deep.equal(["X/gateway", "X/node3", "Y/node2", "default/node1"]);
    expect(Object.fromEntries(recorded)).to.deep.equal({
      node1: defaultZone,
      node2: ZONE_Y,
      node3: ZONE_X,
    });
    // And a restart after that has nothing left to do.
    await restartWritesNothing({ node1: undefined, node2: ZONE_Y, node3: ZONE_X });
  });

  it("a node's zone changed while running: the old membership goes, then the record moves, then the new one is POSTed", async () => {
    const h = await convergedInZones({ node1: ZONE_X, node2: undefined, node3: undefined });
    sim.clearCalls();
    const start = recordWrites.length;
    await h.apply(
      h.mapper.upsertNode(
        node("node1", 1, {
          "midonet.org/host-id": HOSTS.node1 as string,
          "midonet.org/tunnel-zone-id": ZONE_Y,
        }),
      ),
    );
    expect(h.failures).to.deep.equal([]);
    expect(memberships()).to.deep.equal(["X/gateway", "Y/node1", "default/node2", "default/node3"]);
    const writes = recordWrites.slice(start);
    expect(writes.map((w) => [w.node, w.zone])).to.deep.equal([["node1", ZONE_Y]]);
    const at = writes[0]?.at as number;
    const calls = sim.calls.map((c) => `${c.method} ${c.path}`);
    const deleted = calls.indexOf(`DELETE /tunnel_zones/${ZONE_X}/hosts/${HOSTS.node1}`);
    const posted = calls.indexOf(`POST /tunnel_zones/${ZONE_Y}/hosts`);
    expect(deleted).to.be.within(0, at - 1);
    expect(posted).to.be.at.least(at);
  });

  it("a membership whose POST was made but whose answer was lost as the controller died: its record names it, and a restart removes it once the node moved", async () => {
    await convergedInZones({ node1: undefined, node2: undefined, node3: undefined });
    // node1 goes to X; its POST is made late, after the client gave up, and then the process dies.
    const dying = harness({ timeoutMs: 100, retries: 0 });
    clusterInZones(dying.mapper, { node1: undefined, node2: undefined, node3: undefined });
    expect((await dying.reconciler.resync()).ok).to.equal(true);
    await dying.settle();
    sim.injectFault({
      method: "POST",
      path: `/tunnel_zones/${ZONE_X}/hosts`,
      delayMs: 300,
      times: 1,
    });
    dying.reconciler.enqueue(
      dying.mapper.upsertNode(
        node("node1", 1, {
          "midonet.org/host-id": HOSTS.node1 as string,
          "midonet.org/tunnel-zone-id": ZONE_X,
        }),
      ),
    );
    await dying.reconciler.flush();
    expect(dying.failures.some((f) => f.includes("timed out"))).to.equal(true);
    // The late POST lands in its own time: wait for it, not for a span of time.
    await until(() => memberships().includes("X/node1"), "the late POST to land");
    expect(recorded.get("node1")).to.equal(ZONE_X);

    // Restarted with node1 back in the default zone: the membership in X is found and goes.
    const restarted = harness();
    clusterInZones(restarted.mapper, { node1: undefined, node2: undefined, node3: undefined });
    expect(await restarted.reconciler.resync()).to.deep.include({ ok: true, orphans: 1 });
    await restarted.settle();
    expect(restarted.failures).to.deep.equal([]);
    expect(memberships()).to.deep.equal([
      "X/gateway",
      "default/node1",
      "default/node2",
      "default/node3",
    ]);
    expect(recorded.get("node1")).to.equal(restarted.mapper.config.ids.defaultTunnelZone);
  });

  it("a crash between the record write and the POST: the record names a zone the host is not in, and a restart goes on from it", async () => {
    await convergedInZones({ node1: undefined, node2: undefined, node3: undefined });
    const crash = new AbortController();
    const dying = harness({}, { signal: crash.signal, afterRecord: () => crash.abort() });
    clusterInZones(dying.mapper, { node1: ZONE_X, node2: undefined, node3: undefined });
    expect((await dying.reconciler.resync()).ok).to.equal(true);
    await dying.reconciler.flush();
    // The old membership went, the record moved to X, nothing was POSTed to X.
    expect(recorded.get("node1")).to.equal(ZONE_X);
    expect(memberships()).to.deep.equal(["X/gateway", "default/node2", "default/node3"]);

    const restarted = harness();
    clusterInZones(restarted.mapper, { node1: ZONE_Y, node2: undefined, node3: undefined });
    expect((await restarted.reconciler.resync()).ok).to.equal(true);
    await restarted.settle();
    expect(restarted.failures).to.deep.equal([]);
    expect(memberships()).to.deep.equal(["X/gateway", "Y/node1", "default/node2", "default/node3"]);
    expect(recorded.get("node1")).to.equal(ZONE_Y);
  });

  it("a recorded zone deleted while it was down (404): nothing to read there, the node joins its new zone and the record follows", async () => {
    const h = await convergedInZones({ node1: ZONE_X, node2: undefined, node3: undefined });
    await h.client.tunnelZones.delete(ZONE_X);
    const restarted = harness();
    clusterInZones(restarted.mapper, { node1: undefined, node2: undefined, node3: undefined });
    expect((await restarted.reconciler.resync()).ok).to.equal(true);
    await restarted.settle();
    expect(restarted.failures).to.deep.equal([]);
    expect(memberships()).to.deep.equal(["default/node1", "default/node2", "default/node3"]);
    expect(recorded.get("node1")).to.equal(restarted.mapper.config.ids.defaultTunnelZone);
  });

  it("a node that no longer has a tunnel endpoint (no IPv4 address): its membership goes and its record with it", async () => {
    const h = await convergedInZones({ node1: ZONE_X, node2: undefined, node3: undefined });
    const n1 = node("node1", 1, {
      "midonet.org/host-id": HOSTS.node1 as string,
      "midonet.org/tunnel-zone-id": ZONE_X,
    });
    await h.apply(h.mapper.upsertNode({ ...n1, status: { addresses: [] } }));
    expect(h.failures).to.deep.equal([]);
    expect(memberships()).to.deep.equal(["X/gateway", "default/node2", "default/node3"]);
    expect(recorded.has("node1")).to.equal(false);
  });

  it("memberships made before records were kept get their record at the next resync, with no MidoNet write", async () => {
    await convergedInZones({ node1: ZONE_X, node2: undefined, node3: undefined });
    const defaultZone = new ClusterMapper({ tenant: TENANT }).config.ids.defaultTunnelZone;
    recorded.clear();
    await restartWritesNothing({ node1: ZONE_X, node2: undefined, node3: undefined });
    expect(Object.fromEntries(recorded)).to.deep.equal({
      node1: ZONE_X,
      node2: defaultZone,
      node3: defaultZone,
    });
  });

  it("a mapping change that comes back to where it was before the flush makes no write", async () => {
    const h = await converged();
    h.reconciler.enqueue(h.mapper.deleteService("default", "web"));
    h.reconciler.enqueue(h.mapper.upsertService(service()));
    const changes = h.mapper.upsertEndpointSlice(slice([0, 1, 2]));
    expect(isEmpty(changes)).to.equal(true);
    await h.settle();
    expect(writeCalls()).to.deep.equal([]);
  });

  describe("MAC and ARP entries the datapath learned", () => {
    // node1: pod CIDR 10.1.1.0/24, gateway 10.1.1.1, node IP 10.1.1.2; web-0 and web-3 on it.
    const NODE_IP = "10.1.1.2";
    const OLD_MAC = "02:00:00:00:01:01";
    const NEW_MAC = "02:00:00:00:01:02";
    const dashed = (mac: string) => mac.replaceAll(":", "-");
    const node1 = (mac?: string) =>
      node("node1", 1, {
        "midonet.org/host-id": HOSTS.node1 as string,
        ...(mac ? { "midonet.org/mac-address": mac } : {}),
      });

    /** A converged cluster whose node1 carries `mac` (its MAC entry and ARP entry made), calls cleared. */
    async function convergedWithNodeMac(mac: string): Promise<Harness> {
      const h = await converged();
      await h.apply(h.mapper.upsertNode(node1(mac)));
      expect(h.failures).to.deep.equal([]);
      sim.clearCalls();
      return h;
    }

    /** A controller started anew on the full cluster (`tweak` applied), resynced once. */
    async function restart(tweak: (m: ClusterMapper) => void = () => {}, info?: string[]) {
      const h = harness({}, info ? { info } : {});
      fullCluster(h.mapper);
      tweak(h.mapper);
      return h;
    }

    async function resyncAndSettle(h: Harness) {
      const report = await h.reconciler.resync();
      expect(report.ok).to.equal(true);
      await h.settle();
      expect(h.failures).to.deep.equal([]);
      expect(h.reconciler.converged).to.equal(true);
      return report;
    }

    const listed = async (h: Harness, bridge: string) => [
      ...(await h.client.macTable.list(bridge)).map((e) => `${e.macAddr} ${e.portId}`),
      ...(await h.client.arpTable.list(bridge)).map((e) => `${e.ip} ${e.mac}`),
    ];

    it("where the controller puts no entry (the router's MAC on the link port, an operator's port, the gateway, another subnet) they are left alone across resyncs", async () => {
      const h = await converged();
      const ids = nodeIds(h.mapper.config, "node1");
      const before = new Set(sim.snapshot().ports.map((p) => p.id));
      await h.client.create({ kind: "Port", parentId: ids.bridge, body: { type: "Bridge" } });
      const operatorPort = sim.snapshot().ports.find((p) => !before.has(p.id))?.id as string;
      const webPort = podPortId(h.mapper.config, "default", "web-0");
      const learned = [
        () => sim.learnMac(ids.bridge, macForKey("node1"), ids.bridgePort),
        () => sim.learnMac(ids.bridge, "02:00:00:00:00:99", operatorPort),
        () => sim.learnArp(ids.bridge, "10.1.1.1", macForKey("node1")),
        () => sim.learnArp(ids.bridge, "192.168.0.1", "02:00:00:00:00:98"),
        // Learned as the controller made them: nothing to do either.
        () => sim.learnMac(ids.bridge, podMac(0), webPort),
        () => sim.learnArp(ids.bridge, podIp(0), podMac(0)),
      ];
      for (const learn of learned) learn();
      const shown = await listed(h, ids.bridge);
      sim.clearCalls();

      const restarted = await restart();
      expect(await resyncAndSettle(restarted)).to.include({ missing: 0, orphans: 0 });
      expect(await resyncAndSettle(restarted)).to.include({ missing: 0, orphans: 0 });
      expect(writeCalls()).to.deep.equal([]);
      expect((await listed(h, ids.bridge)).sort()).to.deep.equal([...shown].sort());
    });

    it("where the controller puts entries (a pod's or a node's port, the pod subnet) a learned one is deleted once, then left alone while it stays listed", async () => {
      const h = await converged();
      const ids = nodeIds(h.mapper.config, "node1");
      const webPort = podPortId(h.mapper.config, "default", "web-0");
      // A second MAC behind a pod's port (a VM in the pod), the host's MAC on a node
      // port with no MAC annotation yet, an address in the pod subnet no pod has.
      sim.learnMac(ids.bridge, "02:00:00:00:00:97", webPort);
      sim.learnMac(ids.bridge, "02:00:00:00:00:96", ids.nodePort);
      sim.learnArp(ids.bridge, "10.1.1.99", "02:00:00:00:00:95");
      sim.clearCalls();

      const info: string[] = [];
      const restarted = await restart(() => {}, info);
      expect(await resyncAndSettle(restarted)).to.include({ orphans: 3 });
      expect([...writeCalls()].sort()).to.deep.equal(
        [
          `DELETE /bridges/${ids.bridge}/mac_table/02-00-00-00-00-97_${webPort}`,
          `DELETE /bridges/${ids.bridge}/mac_table/02-00-00-00-00-96_${ids.nodePort}`,
          `DELETE /bridges/${ids.bridge}/arp_table/10.1.1.99_02-00-00-00-00-95`,
        ].sort(),
      );
      sim.clearCalls();
      for (let i = 0; i < 2; i++) {
        expect(await resyncAndSettle(restarted)).to.include({ missing: 0, orphans: 0 });
      }
      expect(writeCalls()).to.deep.equal([]);
      expect(info.filter((m) => m.includes("still listed after its DELETE"))).to.have.length(3);
      expectTopology(sim.snapshot(), restarted.mapper.state);

      // Aged out, and learned again later: one DELETE again, no more.
      sim.forgetMac(ids.bridge, "02:00:00:00:00:97");
      await resyncAndSettle(restarted);
      sim.learnMac(ids.bridge, "02:00:00:00:00:97", webPort);
      await resyncAndSettle(restarted);
      await resyncAndSettle(restarted);
      expect(writeCalls()).to.deep.equal([
        `DELETE /bridges/${ids.bridge}/mac_table/02-00-00-00-00-97_${webPort}`,
      ]);
    });

    it("stale entries of its own are removed at resync (a node's MAC changed and a pod deleted while it was down), learned ones beside them left", async () => {
      const h = await convergedWithNodeMac(OLD_MAC);
      const ids = nodeIds(h.mapper.config, "node1");
      const webPort = podPortId(h.mapper.config, "default", "web-0");
      sim.learnMac(ids.bridge, macForKey("node1"), ids.bridgePort);
      sim.learnArp(ids.bridge, "10.1.1.1", macForKey("node1"));
      sim.learnMac(ids.bridge, podMac(3), podPortId(h.mapper.config, "default", "web-3"));
      sim.clearCalls();

      const restarted = await restart((m) => {
        m.upsertNode(node1(NEW_MAC));
        m.upsertEndpointSlice(slice([1, 2]));
        m.deletePod("default", "web-0");
      });
      await resyncAndSettle(restarted);
      expectTopology(sim.snapshot(), restarted.mapper.state);
      const tables = writeCalls().filter((c) => /mac_table|arp_table/.test(c));
      expect([...tables].sort()).to.deep.equal(
        [
          `DELETE /bridges/${ids.bridge}/mac_table/${dashed(OLD_MAC)}_${ids.nodePort}`,
          `DELETE /bridges/${ids.bridge}/arp_table/${NODE_IP}_${dashed(OLD_MAC)}`,
          `DELETE /bridges/${ids.bridge}/mac_table/${dashed(podMac(0))}_${webPort}`,
          `DELETE /bridges/${ids.bridge}/arp_table/${podIp(0)}_${dashed(podMac(0))}`,
          `POST /bridges/${ids.bridge}/mac_table/${dashed(NEW_MAC)}_${ids.nodePort}`,
          `POST /bridges/${ids.bridge}/arp_table/${NODE_IP}_${dashed(NEW_MAC)}`,
        ].sort(),
      );
      sim.clearCalls();
      expect(await resyncAndSettle(restarted)).to.include({ missing: 0, orphans: 0 });
      expect(writeCalls()).to.deep.equal([]);
    });

    it("a desired entry hidden behind a learned value (its MAC learned on another port, its IP with another MAC) is found by a GET: no create, converged", async () => {
      const h = await convergedWithNodeMac(OLD_MAC);
      const ids = nodeIds(h.mapper.config, "node1");
      const webPort = podPortId(h.mapper.config, "default", "web-0");
      sim.learnMac(ids.bridge, OLD_MAC, webPort);
      sim.learnArp(ids.bridge, NODE_IP, NEW_MAC);
      expect(await listed(h, ids.bridge)).to.not.include(`${OLD_MAC} ${ids.nodePort}`);
      sim.clearCalls();

      const restarted = await restart((m) => m.upsertNode(node1(OLD_MAC)));
      expect(await resyncAndSettle(restarted)).to.include({ missing: 0 });
      expect(await resyncAndSettle(restarted)).to.include({ missing: 0, orphans: 0 });
      expect(await resyncAndSettle(restarted)).to.include({ missing: 0, orphans: 0 });
      expect(sim.writes().filter((c) => c.method === "POST")).to.deep.equal([]);
      // The learned values were taken for ours once (inside its bounds), and only once.
      expect([...writeCalls()].sort()).to.deep.equal(
        [
          `DELETE /bridges/${ids.bridge}/mac_table/${dashed(OLD_MAC)}_${webPort}`,
          `DELETE /bridges/${ids.bridge}/arp_table/${NODE_IP}_${dashed(NEW_MAC)}`,
        ].sort(),
      );
      expectTopology(sim.snapshot(), restarted.mapper.state);
    });
  });
});
