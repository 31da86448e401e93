/**
 * The MidoNet controller end to end: the fake kube-apiserver (Nodes, Pods,
 * Services, EndpointSlices, the Lease) in, the MidoNet API simulator out.
 * Controllers run in-process with short lease timings, and as child processes
 * (`cni-driver midonet-controller`) where one is SIGKILLed midway.
 */
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { KubeConfig } from "@kubernetes/client-node";
import { expect } from "chai";
import { createLogger } from "../../src/common/logger.js";
import { MidonetClient } from "../../src/midonet/api.js";
import {
  type MidonetControllerOptions,
  type RunningMidonetController,
  startMidonetController,
} from "../../src/midonet/controller/controller.js";
import { mapCluster } from "../../src/midonet/mapping/cluster.js";
import type { DesiredState } from "../../src/midonet/mapping/desired-state.js";
import { nodeIds } from "../../src/midonet/mapping/node.js";
import { podPortId } from "../../src/midonet/mapping/pod.js";
import { servicePortChainId } from "../../src/midonet/mapping/service.js";
import type { Port } from "../../src/midonet/resources.js";
import { find, parseExposition } from "../support/exposition.js";
import {
  type FakeKubeApiServer,
  type KubeObject,
  startFakeKubeApiServer,
} from "../support/fake-kube-apiserver.js";
import { chainsHeld, MidonetFilterPath } from "../support/midonet-chain-evaluator.js";
import {
  duplicateCreates,
  expectTopology,
  HOSTS,
  pod,
  podIp,
  slice,
  TENANT,
  topologyOf,
} from "../support/midonet-cluster.js";
import {
  CLUSTER_PODS,
  desiredOf,
  nodesAnnotated,
  populateCluster,
  spawnControllerProcess,
} from "../support/midonet-controller-process.js";
import { type MidonetSimulator, startMidonetSimulator } from "../support/midonet-simulator.js";

const LEASE = { namespace: "kube-system", name: "cni-driver-midonet-controller" };

async function until<T>(
  probe: () => T | undefined | null | false | Promise<T | undefined | null | false>,
  what: string,
  ms = 10_000,
): Promise<T> {
  const deadline = Date.now() + ms;
  let last: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined && value !== null && value !== false) return value;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out waiting for ${what}${last ? `: ${(last as Error).message}` : ""}`);
    }
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** One series' value in the controller's /metrics text (0 while absent). */
async function metricValue(
  c: RunningMidonetController,
  name: string,
  labels: Record<string, string>,
): Promise<number> {
  const [sample] = find(parseExposition(await c.metrics.render()), name, labels);
  return sample?.value ?? 0;
}

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("midonet controller (fake kube-apiserver + MidoNet simulator)", function () {
  this.timeout(60_000);
  let kube: FakeKubeApiServer;
  let sim: MidonetSimulator;
  let kubeConfig: KubeConfig;
  let dir: string;
  const running: RunningMidonetController[] = [];
  const children: ChildProcess[] = [];

  beforeEach(async () => {
    kube = await startFakeKubeApiServer();
    sim = await startMidonetSimulator({
      hosts: Object.entries(HOSTS).map(([name, id]) => ({ id, name })),
    });
    kubeConfig = new KubeConfig();
    kubeConfig.loadFromString(kube.kubeconfig());
    dir = mkdtempSync(join(tmpdir(), "midonet-controller-"));
  });

  afterEach(async () => {
    for (const c of running.splice(0)) await c.stop();
    for (const child of children.splice(0)) {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill("SIGKILL");
        await new Promise((r) => child.once("exit", r));
      }
    }
    await sim.close();
    await kube.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const populate = (options: { pods?: number[]; endpoints?: number[] } = {}): void =>
    populateCluster(kube, options);
  const desired = (): DesiredState => desiredOf(kube);

  /** MidoNet holds what the API server's objects map to (all nodes annotated by then). */
  async function convergedTopology(ms = 15_000): Promise<void> {
    await until(
      () => {
        if (!nodesAnnotated(kube)) return false;
        expectTopology(sim.snapshot(), desired());
        return true;
      },
      "MidoNet to hold the desired topology",
      ms,
    );
  }

  function options(
    identity: string,
    overrides: Partial<MidonetControllerOptions> = {},
  ): MidonetControllerOptions {
    return {
      kubeConfig,
      midonet: {
        baseUrl: sim.baseUrl,
        user: "admin",
        password: "admin",
        project: "admin",
        timeoutMs: 1000,
        retries: 0,
      },
      mapping: { tenant: TENANT },
      lease: {
        ...LEASE,
        identity,
        durationMs: 1000,
        renewPeriodMs: 100,
        renewDeadlineMs: 600,
      },
      healthAddr: "127.0.0.1:0",
      resyncPeriodMs: 0,
      hostRefreshMs: 200,
      backoffMs: 20,
      maxBackoffMs: 200,
      logger: createLogger({ level: "silent" }),
      ...overrides,
    };
  }

  async function start(
    identity: string,
    overrides: Partial<MidonetControllerOptions> = {},
  ): Promise<RunningMidonetController> {
    const c = await startMidonetController(options(identity, overrides));
    running.push(c);
    return c;
  }

  async function stop(c: RunningMidonetController): Promise<void> {
    running.splice(running.indexOf(c), 1);
    await c.stop();
  }

  const writes = () => sim.writes();
  const keysHeld = () => new Set(topologyOf(sim.snapshot()).objects.keys());

  it("three nodes, their pods and a service with three endpoints: nodes annotated from /hosts, exactly the expected topology", async () => {
    populate();
    const c = await start("a");
    await convergedTopology();
    await until(() => c.status().converged, "the converged status");
    for (const name of ["node1", "node2", "node3"]) {
      expect(kube.get("nodes", undefined, name)?.metadata?.annotations).to.deep.include({
        "midonet.org/host-id": HOSTS[name],
        "midonet.org/tunnel-zone-id": "51329ede-9b0f-5923-98ee-bf4ef08af54f",
        "midonet.org/tunnel-endpoint-ip": `192.168.0.1${name.slice(-1)}`,
      });
    }
    const snapshot = sim.snapshot();
    expect(snapshot.hostInterfacePorts).to.have.length(3 + CLUSTER_PODS.length); // node ports + pods
    expect(duplicateCreates(sim.calls)).to.deep.equal([]);

    // Health and metrics, as the driver serves them.
    const readyz = await fetch(`http://${c.healthAddress}/readyz`);
    expect(readyz.status).to.equal(200);
    const metrics = await (await fetch(`http://${c.healthAddress}/metrics`)).text();
    expect(metrics).to.match(/^midonet_controller_leader 1$/m);
    expect(metrics).to.match(/^midonet_controller_converged 1$/m);
    expect(metrics).to.match(/^midonet_controller_writes_total\{op="create",kind="Bridge"\} 3$/m);
    expect(metrics).to.match(/^midonet_controller_node_annotations_total\{outcome="ok"\} 3$/m);
    expect(metrics).to.include("midonet_controller_api_request_duration_seconds_bucket");
  });

  it("scaling a deployment, deleting a service, deleting a node: exactly the right objects go", async () => {
    populate();
    const c = await start("a");
    await convergedTopology();
    const cfg = mapCluster({}, { tenant: TENANT }).config;

    // Scale down: web-2 goes, and with it its endpoint.
    let before = keysHeld();
    kube.remove("pods", "default", "web-2");
    kube.put("endpointslices", slice([0, 1]) as unknown as KubeObject);
    await convergedTopology();
    let gone = [...before].filter((k) => !keysHeld().has(k));
    const port2 = podPortId(cfg, "default", "web-2");
    expect(gone).to.include(port2);
    expect(gone.filter((k) => k.includes(port2)).length).to.equal(3); // binding, MAC entry, + port
    expect(gone).to.have.length(
      1 /* port */ + 3 /* binding, MAC, ARP */ + 2 /* old DNAT, hairpin */,
    );

    // Scale up again: web-6 comes.
    kube.put("pods", pod(6) as unknown as KubeObject);
    await convergedTopology();
    expect(keysHeld().has(podPortId(cfg, "default", "web-6"))).to.equal(true);

    // Delete the service: its chain, rules and jump go.
    before = keysHeld();
    kube.remove("services", "default", "web");
    await convergedTopology();
    gone = [...before].filter((k) => !keysHeld().has(k));
    const svcChain = servicePortChainId(cfg, "default", "web", "http");
    expect(gone).to.include(svcChain);
    expect(gone).to.have.length(1 /* chain */ + 1 /* jump */ + 2 /* SNATs */ + 1 /* DNAT */);

    // Delete a node with its pods.
    before = keysHeld();
    for (const i of [1, 4]) kube.remove("pods", "default", `web-${i}`);
    kube.remove("nodes", undefined, "node2");
    await convergedTopology();
    gone = [...before].filter((k) => !keysHeld().has(k));
    const n2 = nodeIds(cfg, "node2");
    for (const key of [n2.bridge, n2.nodePort, n2.routerPort, n2.chain, n2.snatRule]) {
      expect(gone).to.include(key);
    }
    expect(gone).to.include(podPortId(cfg, "default", "web-1"));
    expect(gone.some((k) => k.includes(nodeIds(cfg, "node1").bridge))).to.equal(false);
    expect(c.status().leader).to.equal(true);
  });

  it("a node whose MidoNet host appears later is annotated then, and its pods are re-evaluated: their ports get bound", async () => {
    await sim.close();
    sim = await startMidonetSimulator({
      hosts: [
        { id: HOSTS.node1 as string, name: "node1" },
        { id: HOSTS.node2 as string, name: "node2" },
      ],
    });
    populate();
    const c = await start("a");
    const cfg = mapCluster({}, { tenant: TENANT }).config;
    const pod2Port = podPortId(cfg, "default", "web-2"); // on node3
    await until(() => c.status().converged && keysHeld().has(pod2Port), "node3's pods' ports");
    expect(kube.get("nodes", undefined, "node3")?.metadata?.annotations).to.deep.equal({});
    expect(sim.snapshot().hostInterfacePorts.map((b) => b.portId)).to.not.include(pod2Port);

    sim.addHost({ id: HOSTS.node3 as string, name: "node3" });
    await convergedTopology();
    const binding = sim.snapshot().hostInterfacePorts.find((b) => b.portId === pod2Port);
    expect(binding?.hostId).to.equal(HOSTS.node3);
  });

  /** Converges a controller on what the API server holds, stops it, and restarts another: it must read and write nothing. */
  async function expectRestartWritesNothing(): Promise<void> {
    const a = await start("a");
    await convergedTopology();
    await until(() => a.status().converged, "convergence");
    await stop(a);
    sim.clearCalls();
    const b = await start("b");
    await until(() => b.status().converged, "the restarted controller to converge");
    await pause(200);
    expect(writes()).to.deep.equal([]);
    expect(sim.calls.filter((x) => x.method === "GET").length).to.be.greaterThan(0);
  }

  it("a controller restarted against a converged MidoNet reads and writes nothing", async () => {
    populate();
    await expectRestartWritesNothing();
  });

  it("killed (SIGKILL) midway and restarted as a process: it converges with no duplicate writes", async () => {
    populate();
    const kubeconfigFile = join(dir, "kubeconfig");
    kube.kubeconfig(kubeconfigFile);
    // Slow creates down so the kill lands midway.
    sim.injectFault({ method: "POST", path: /^\/(?!login)/, delayMs: 25 });
    const spawnController = (identity: string): ChildProcess => {
      const child = spawnControllerProcess({
        kubeconfigFile,
        midonetApi: sim.baseUrl,
        identity,
      });
      children.push(child);
      return child;
    };
    const first = spawnController("first");
    const created = () =>
      sim.calls.filter((x) => x.method === "POST" && x.status === 201 && x.location).length;
    await until(() => created() >= 15, "the first controller to be midway", 20_000);
    first.kill("SIGKILL");
    await new Promise((r) => first.once("exit", r));
    const midway = created();
    expect(midway).to.be.lessThan(desired().size);

    spawnController("second");
    await convergedTopology(30_000);
    await pause(300);
    expectTopology(sim.snapshot(), desired());
    expect(duplicateCreates(sim.calls)).to.deep.equal([]);
    // No create was repeated against an object that was there: MidoNet refused none.
    expect(sim.calls.filter((x) => x.method === "POST" && x.status === 409)).to.deep.equal([]);
    expect(created()).to.be.greaterThan(midway);
  });

  it("the simulator answering 500s and timing out for a while: it converges afterwards, every object created once", async () => {
    populate();
    // Counted, not timed: a window of time could close before a loaded machine started the controller.
    sim.injectFault({ method: "POST", path: "/bridges*", status: 500, times: 3 });
    sim.injectFault({ method: "POST", path: "/chains/*/rules", hang: true, times: 2 });
    sim.injectFault({ method: "GET", path: "/hosts", status: 503, times: 2 });
    const c = await start("a", {
      midonet: {
        baseUrl: sim.baseUrl,
        user: "admin",
        password: "admin",
        project: "admin",
        timeoutMs: 200,
        retries: 0,
      },
    });
    await until(
      async () =>
        (await metricValue(c, "midonet_controller_errors_total", {
          op: "create",
          kind: "Bridge",
          code: "500",
        })) > 0,
      "a failed bridge create",
    );
    expect(c.status().converged).to.equal(false);
    await convergedTopology(20_000);
    await until(() => c.status().converged, "the converged status");
    const timeouts = await metricValue(c, "midonet_controller_errors_total", {
      op: "create",
      kind: "Rule",
      code: "timeout",
    });
    expect(timeouts).to.be.greaterThan(0);
    expect(duplicateCreates(sim.calls)).to.deep.equal([]);
  });

  it("two controllers at once: only the leader writes; when it stops, the other takes over without rewriting anything", async () => {
    populate();
    const a = await start("a");
    const b = await start("b");
    await convergedTopology();
    await until(() => a.status().converged || b.status().converged, "the leader to converge");
    const [leader, follower] = a.status().leader ? [a, b] : [b, a];
    expect(follower.status().leader).to.equal(false);
    expect(follower.status().synced).to.equal(true);
    // The follower never spoke to MidoNet at all.
    const followerCalls = (await follower.metrics.render()).match(
      /^midonet_controller_api_requests_total\{/m,
    );
    expect(followerCalls).to.equal(null);
    const lease = kube.get("leases", LEASE.namespace, LEASE.name) as {
      spec?: { holderIdentity?: string };
    };
    expect(lease.spec?.holderIdentity).to.equal(leader === a ? "a" : "b");

    sim.clearCalls();
    await stop(leader);
    await until(() => follower.status().converged, "the follower to lead and converge", 5_000);
    expect(writes()).to.deep.equal([]);

    // And it follows changes from then on.
    kube.put("pods", pod(6) as unknown as KubeObject);
    await convergedTopology();
  });

  it("a leader whose renewal is refused (409) stops writing at once, and writes again only once it holds the lease", async () => {
    populate();
    const a = await start("a");
    await convergedTopology();
    await until(() => a.status().converged, "convergence");
    // Its renewals refused for a while (as if another replica had written the Lease).
    kube.injectFault({ method: "PUT", path: /\/leases\//, status: 409, times: 8 });
    await until(() => !a.status().leader, "a to step down");
    const writesAtStepDown = writes().length;
    // Nobody leads for now: a change is not written...
    kube.put("pods", pod(6) as unknown as KubeObject);
    const port6 = podPortId(mapCluster({}, { tenant: TENANT }).config, "default", "web-6");
    await pause(300);
    expect(a.status().leader).to.equal(false);
    expect(writes().length).to.equal(writesAtStepDown);
    expect(keysHeld().has(port6)).to.equal(false);
    // ...until a holds the lease again (its tries find the lease still its own).
    await until(() => a.status().leader, "a to lead again");
    await convergedTopology();
    expect(keysHeld().has(port6)).to.equal(true);
  });

  it("nodes moved to another tunnel zone while it was down (X→default, X→Y, default→X): restarted, the old memberships go, the new ones come, the records on the Nodes follow", async () => {
    const ZONE_X = "7a5e0000-0000-4000-8000-00000000000a";
    const ZONE_Y = "7a5e0000-0000-4000-8000-00000000000b";
    const defaultZone = mapCluster({}, { tenant: TENANT }).config.ids.defaultTunnelZone;
    const client = new MidonetClient({
      baseUrl: sim.baseUrl,
      user: "admin",
      password: "admin",
      project: "admin",
    });
    const zoneName = new Map([
      [ZONE_X, "X"],
      [ZONE_Y, "Y"],
      [defaultZone, "default"],
    ]);
    const nodeOf = new Map(Object.entries(HOSTS).map(([name, id]) => [id, name]));
    /** "<zone>/<node>" for each membership MidoNet holds, and each Node's record. */
    const zones = () => ({
      members: sim
        .snapshot()
        .tunnelZoneHosts.map(
          (m) => `${zoneName.get(m.tunnelZoneId as string)}/${nodeOf.get(m.hostId)}`,
        )
        .sort(),
      records: Object.fromEntries(
        ["node1", "node2", "node3"].map((n) => {
          const zone = kube.get("nodes", undefined, n)?.metadata?.annotations?.[
            "midonet.org/tunnel-zone-joined"
          ];
          return [n, zoneName.get(zone as string)];
        }),
      ),
    });
    const annotate = (name: string, annotations: Record<string, string | undefined>): void => {
      const n = structuredClone(kube.get("nodes", undefined, name) as KubeObject);
      const current = { ...(n.metadata?.annotations ?? {}) } as Record<string, string>;
      for (const [k, v] of Object.entries(annotations)) {
        if (v === undefined) delete current[k];
        else current[k] = v;
      }
      kube.put("nodes", { ...n, metadata: { ...n.metadata, annotations: current } } as KubeObject);
    };
    const settled = async (c: RunningMidonetController, want: ReturnType<typeof zones>) =>
      until(() => {
        if (!c.status().converged) return false;
        expect(zones()).to.deep.equal(want);
        return true;
      }, "the memberships and records");

    populate();
    const a = await start("a");
    await convergedTopology();
    // Zones an operator made (after the check above: they are not the controller's).
    await client.tunnelZones.create({ id: ZONE_X, name: "zone-x", type: "vxlan" });
    await client.tunnelZones.create({ id: ZONE_Y, name: "zone-y", type: "vxlan" });
    annotate("node1", { "midonet.org/tunnel-zone-id": ZONE_X });
    annotate("node2", { "midonet.org/tunnel-zone-id": ZONE_X });
    await settled(a, {
      members: ["X/node1", "X/node2", "default/node3"],
      records: { node1: "X", node2: "X", node3: "default" },
    });
    await stop(a);

    annotate("node1", { "midonet.org/tunnel-zone-id": undefined }); // empty: the default zone
    annotate("node2", { "midonet.org/tunnel-zone-id": ZONE_Y });
    annotate("node3", { "midonet.org/tunnel-zone-id": ZONE_X });
    const b = await start("b");
    await settled(b, {
      members: ["X/node3", "Y/node2", "default/node1"],
      records: { node1: "default", node2: "Y", node3: "X" },
    });
    expect(
      kube.get("nodes", undefined, "node1")?.metadata?.annotations?.["midonet.org/tunnel-zone-id"],
    ).to.equal(defaultZone);
    // No membership was POSTed where one already was.
    expect(sim.calls.filter((x) => x.method === "POST" && x.status === 409)).to.deep.equal([]);
  });

  it("the informers relist after their history is compacted (410): a pod deleted while no watch was open loses its port", async () => {
    populate();
    const a = await start("a");
    await convergedTopology();
    const cfg = mapCluster({}, { tenant: TENANT }).config;
    const port2 = podPortId(cfg, "default", "web-2");
    expect(keysHeld().has(port2)).to.equal(true);
    const podLists = () =>
      kube.requests.filter((r) => r.path === "/api/v1/pods" && !r.watch).length;
    expect(podLists()).to.equal(1);
    // Every watch ends; before any is back, web-2 and its endpoint go and the history is compacted.
    kube.endWatches();
    kube.remove("pods", "default", "web-2");
    kube.put("endpointslices", slice([0, 1]) as unknown as KubeObject);
    kube.compact();
    await convergedTopology();
    expect(keysHeld().has(port2)).to.equal(false);
    expect(podLists(), "the pods were listed again").to.equal(2);
    expect(a.status().synced).to.equal(true);
  });

  it("the informers survive API errors: a watch answered 500 is restarted and the events after it are mapped", async () => {
    populate();
    const a = await start("a");
    await convergedTopology();
    kube.injectFault({ path: "/api/v1/pods", watch: true, status: 500, times: 2 });
    kube.endWatches();
    kube.put("pods", pod(6) as unknown as KubeObject);
    await convergedTopology();
    expect(
      await metricValue(a, "midonet_controller_kube_errors_total", { op: "watch-pods" }),
    ).to.be.greaterThan(0);
  });

  describe("NetworkPolicy as port filters", () => {
    const cfg = mapCluster({}, { tenant: TENANT }).config;

    /** Whether a TCP connection from one pod of the cluster to another gets through the chains MidoNet holds, and its reply back. */
    function reaches(from: number, to: number, port: number): boolean {
      const snapshot = sim.snapshot();
      const path = new MidonetFilterPath(chainsHeld(snapshot));
      const portOf = (i: number) => {
        const id = podPortId(cfg, "default", `web-${i}`);
        return snapshot.ports.find((p) => p.id === id) as Port;
      };
      const r = path.connect(
        {
          dlType: 0x0800,
          src: podIp(from),
          dst: podIp(to),
          nwProto: 6,
          tpSrc: 40_000,
          tpDst: port,
        },
        portOf(from),
        portOf(to),
      );
      return r.forward && r.reply;
    }

    const clientsOnly = (...extra: object[]): KubeObject =>
      ({
        metadata: { namespace: "default", name: "clients-to-web-0" },
        spec: {
          podSelector: { matchLabels: { app: "web", role: "server" } },
          ingress: [
            {
              from: [{ podSelector: { matchLabels: { role: "client" } } }, ...extra],
              ports: [{ port: 80 }],
            },
          ],
        },
      }) as unknown as KubeObject;
    const relabel = (i: number, labels: Record<string, string>) =>
      kube.put("pods", {
        ...pod(i),
        metadata: { ...pod(i).metadata, labels },
      } as unknown as KubeObject);

    it("the chains MidoNet holds let through what the policies allow, and follow policy and label changes", async () => {
      populate();
      relabel(0, { app: "web", role: "server" });
      kube.put("networkpolicies", clientsOnly());
      const a = await start("a");
      await convergedTopology();
      await until(() => a.status().converged, "convergence");
      expect(reaches(1, 0, 80), "web-1 (no role) → web-0").to.equal(false);
      expect(reaches(0, 1, 80), "web-0 → web-1 (not isolated)").to.equal(true);
      // A pod label makes web-1 a client: one peer rule more, nothing else rewritten.
      sim.clearCalls();
      relabel(1, { app: "web", role: "client" });
      await convergedTopology();
      expect(
        writes().map(
          (w) =>
            `${w.method} ${w.path.replace(/[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}/g, "{id}")}`,
        ),
      ).to.deep.equal(["POST /chains/{id}/rules"]);
      expect(reaches(1, 0, 80), "web-1 (client) → web-0:80").to.equal(true);
      expect(reaches(1, 0, 81), "web-1 (client) → web-0:81").to.equal(false);
      expect(reaches(2, 0, 80), "web-2 → web-0").to.equal(false);
      // The policy gains a peer by namespace label: every pod of the labelled namespace.
      kube.put("namespaces", {
        metadata: { name: "default", labels: { team: "web" } },
      } as unknown as KubeObject);
      kube.put(
        "networkpolicies",
        clientsOnly({ namespaceSelector: { matchLabels: { team: "web" } } }),
      );
      await convergedTopology();
      expect(reaches(2, 0, 80), "web-2 (in the team's namespace) → web-0").to.equal(true);
      // Deleted, the policy leaves no chain behind and the port no filter.
      kube.remove("networkpolicies", "default", "clients-to-web-0");
      await convergedTopology();
      expect(
        sim
          .snapshot()
          .chains.map((c) => c.name)
          .filter((n) => n?.startsWith("KUBE-NP")),
      ).to.deep.equal([]);
      expect(reaches(1, 0, 81)).to.equal(true);
    });

    it("a controller restarted with policies in force reads and writes nothing", async () => {
      populate();
      relabel(0, { app: "web", role: "server" });
      relabel(1, { app: "web", role: "client" });
      kube.put("networkpolicies", clientsOnly());
      await expectRestartWritesNothing();
      const npChains = sim.snapshot().chains.filter((c) => c.name?.startsWith("KUBE-NP"));
      expect(npChains.length, "the policy's chains").to.be.greaterThan(0);
    });
  });
});
