import { expect } from "chai";
import { idForKey, subId } from "../../src/midonet/ids.js";
import {
  ClusterMapper,
  type DesiredResource,
  DesiredState,
  diffMappings,
  type EndpointSlice,
  insertPosition,
  mapCluster,
  mapPod,
  type Node,
  type Pod,
  parentOf,
  type ResourceChanges,
  resolveConfig,
  type Service,
} from "../../src/midonet/mapping/index.js";
import type { Rule } from "../../src/midonet/resources.js";

/** The rule body of a resource the test expects to exist. */
function ruleOf(r: DesiredResource | undefined): Rule {
  if (!r) throw new Error("expected rule missing");
  return r.body as Rule;
}

const TENANT = "midonetkube";
const config = resolveConfig({ tenant: TENANT });
const G = config.ids;

function hostOf(i: number): string {
  return `00000000-0000-4000-8000-${String(i).padStart(12, "0")}`;
}

function node(i: number, host = hostOf(i), podCidr = `10.1.${i}.0/24`): Node {
  return {
    metadata: {
      name: `node${i}`,
      annotations: {
        "midonet.org/host-id": host,
        "midonet.org/mac-address": `02:00:00:00:00:${String(i).padStart(2, "0")}`,
      },
    },
    spec: { podCIDR: podCidr },
    status: { addresses: [{ type: "InternalIP", address: `192.168.0.${i}` }] },
  };
}

function pod(i: number, j: number, extra: Partial<Pod["status"]> = {}, mac = true): Pod {
  return {
    metadata: {
      namespace: `ns${j % 2}`,
      name: `pod-${i}-${j}`,
      annotations: mac
        ? {
            "midonet.org/mac-address": `0a:58:0a:01:${String(i).padStart(2, "0")}:${String(j).padStart(2, "0")}`,
          }
        : {},
    },
    spec: { nodeName: `node${i}` },
    status: { phase: "Running", podIP: `10.1.${i}.${j + 3}`, ...extra },
  };
}

function service(k: number, ports = [{ name: "http", protocol: "TCP", port: 80 }]): Service {
  return {
    metadata: { namespace: "default", name: `svc${k}` },
    spec: { type: "ClusterIP", clusterIP: `10.96.0.${k}`, ports },
  };
}

function slice(k: number, ips: string[], name = `svc${k}-a`): EndpointSlice {
  return {
    metadata: { namespace: "default", name, labels: { "kubernetes.io/service-name": `svc${k}` } },
    addressType: "IPv4",
    endpoints: ips.map((ip) => ({ addresses: [ip] })),
    ports: [{ name: "http", protocol: "TCP", port: 8080 }],
  };
}

/** A small cluster: 3 nodes, 4 pods each, 3 services with endpoints on those pods. */
function cluster() {
  const nodes = [1, 2, 3].map((i) => node(i));
  const pods = nodes.flatMap((_, n) => [0, 1, 2, 3].map((j) => pod(n + 1, j)));
  const services = [1, 2, 3].map((k) => service(k));
  const endpointSlices = [
    slice(1, ["10.1.1.3", "10.1.2.3", "10.1.3.3"]),
    slice(2, ["10.1.1.4"]),
    slice(3, ["10.1.2.5", "10.1.3.5"]),
  ];
  return { nodes, pods, services, endpointSlices };
}

/** Reverses, then interleaves: a fixed permutation, no randomness. */
function shuffled<T>(items: readonly T[]): T[] {
  const r = [...items].reverse();
  const out: T[] = [];
  for (let i = 0; i < r.length; i += 2) out.push(r[i] as T);
  for (let i = 1; i < r.length; i += 2) out.push(r[i] as T);
  return out;
}

function kinds(list: DesiredResource[]): string[] {
  return list.map((r) => r.kind);
}

function keys(list: DesiredResource[]): string[] {
  return list.map((r) => r.key);
}

function count(changes: ResourceChanges): [number, number, number] {
  return [changes.create.length, changes.update.length, changes.delete.length];
}

describe("midonet/mapping: desired state and events", () => {
  describe("full translation", () => {
    it("the same objects in another order give an identical list", () => {
      const c = cluster();
      const a = mapCluster(c, config).state.resources();
      const b = mapCluster(
        {
          nodes: shuffled(c.nodes),
          pods: shuffled(c.pods),
          services: shuffled(c.services),
          endpointSlices: shuffled(c.endpointSlices),
        },
        config,
      ).state.resources();
      expect(JSON.stringify(b)).to.equal(JSON.stringify(a));
    });

    it("lists every dependency before its dependent, and each chain's rules in position order", () => {
      const list = mapCluster(cluster(), config).state.resources();
      const at = new Map(list.map((r, i) => [r.key, i]));
      for (const [i, r] of list.entries()) {
        for (const dep of r.dependsOn) {
          const d = at.get(dep);
          if (d !== undefined) expect(d, `${r.kind} ${r.key} after ${dep}`).to.be.lessThan(i);
        }
      }
      const lastPosition = new Map<string, number>();
      for (const r of list) {
        if (r.kind !== "Rule") continue;
        const p = (r.body as Rule).position as number;
        const chain = parentOf(r) as string;
        expect(p).to.equal((lastPosition.get(chain) ?? 0) + 1);
        lastPosition.set(chain, p);
      }
    });

    it("every key is unique and every dependency of a mapped object is in the state", () => {
      const state = mapCluster(cluster(), config).state;
      const list = state.resources();
      expect(new Set(keys(list)).size).to.equal(list.length);
      expect(state.size).to.equal(list.length);
      for (const r of list)
        for (const dep of r.dependsOn) expect(state.get(dep), dep).to.not.equal(undefined);
    });

    it("positions in KUBE-SERVICES follow the rules' order, whoever owns them", () => {
      const state = mapCluster(cluster(), config).state;
      const jumps = state.chainRules(G.servicesChain).map((id) => state.get(id) as DesiredResource);
      expect(jumps.map((r) => (r.body as Rule).nwDstAddress)).to.deep.equal([
        "10.96.0.1",
        "10.96.0.2",
        "10.96.0.3",
      ]);
      expect(jumps.map((r) => (r.body as Rule).position)).to.deep.equal([1, 2, 3]);
      expect(state.position(jumps[1]?.key as string)).to.equal(2);
    });
  });

  describe("pod events", () => {
    const portId = idForKey(TENANT, "Pod", "ns1/pod-1-9");
    const bridge = idForKey(TENANT, "Node", "node1");

    it("a new pod: its port, binding, MAC and ARP entries, in creation order", () => {
      const m = mapCluster(cluster(), config);
      const changes = m.upsertPod(pod(1, 9, {}));
      expect(count(changes)).to.deep.equal([4, 0, 0]);
      expect(kinds(changes.create)).to.deep.equal([
        "Port",
        "HostInterfacePort",
        "IP4Mac",
        "MacPort",
      ]);
      expect(changes.create[0]?.key).to.equal(portId);
      expect(parentOf(changes.create[0] as DesiredResource)).to.equal(bridge);
    });

    it("the same pod again changes nothing", () => {
      const m = mapCluster(cluster(), config);
      m.upsertPod(pod(1, 9));
      expect(count(m.upsertPod(pod(1, 9)))).to.deep.equal([0, 0, 0]);
    });

    it("a pod that gets its address later gains only its ARP entry", () => {
      const m = mapCluster(cluster(), config);
      m.upsertPod(pod(1, 9, { podIP: null }));
      const changes = m.upsertPod(pod(1, 9));
      expect(kinds(changes.create)).to.deep.equal(["IP4Mac"]);
      expect(changes.create[0]?.body).to.deep.equal({ ip: "10.1.1.12", mac: "0a:58:0a:01:01:09" });
    });

    it("a pod that finishes loses everything, dependents first", () => {
      const m = mapCluster(cluster(), config);
      m.upsertPod(pod(1, 9));
      const changes = m.upsertPod(pod(1, 9, { phase: "Succeeded" }));
      expect(count(changes)).to.deep.equal([0, 0, 4]);
      expect(kinds(changes.delete)).to.deep.equal([
        "MacPort",
        "IP4Mac",
        "HostInterfacePort",
        "Port",
      ]);
    });

    it("a deleted pod goes; deleting it twice is harmless", () => {
      const m = mapCluster(cluster(), config);
      expect(count(m.deletePod("ns0", "pod-1-0"))).to.deep.equal([0, 0, 4]);
      expect(count(m.deletePod("ns0", "pod-1-0"))).to.deep.equal([0, 0, 0]);
      expect(m.state.get(idForKey(TENANT, "Pod", "ns0/pod-1-0"))).to.equal(undefined);
    });

    it("a pod scheduled before its node is known is bound once the node arrives", () => {
      const m = new ClusterMapper(config);
      const first = m.upsertPod(pod(7, 0));
      expect(kinds(first.create)).to.not.include("HostInterfacePort");
      const changes = m.upsertNode(node(7));
      const binding = changes.create.find(
        (r) => r.kind === "HostInterfacePort" && r.owner === "Pod/ns0/pod-7-0",
      );
      expect(binding?.body).to.deep.include({ hostId: hostOf(7) });
    });
  });

  describe("node events", () => {
    it("a node moving to another MidoNet host re-binds its pods", () => {
      const m = mapCluster(cluster(), config);
      const newHost = hostOf(42);
      const changes = m.upsertNode(node(1, newHost));
      const podBindings = (list: DesiredResource[]) =>
        list
          .filter((r) => r.kind === "HostInterfacePort" && r.owner.startsWith("Pod/"))
          .map((r) => parentOf(r));
      expect(podBindings(changes.create)).to.deep.equal([newHost, newHost, newHost, newHost]);
      expect(podBindings(changes.delete)).to.deep.equal([
        hostOf(1),
        hostOf(1),
        hostOf(1),
        hostOf(1),
      ]);
    });

    it("a changed pod CIDR updates the router port, route and SNAT rule in place", () => {
      const m = mapCluster(cluster(), config);
      const base = idForKey(TENANT, "Node", "node1");
      const changes = m.upsertNode(node(1, hostOf(1), "10.1.100.0/24"));
      const updated = changes.update.map((u) => u.after.key);
      expect(updated).to.include.members([
        subId(base, "Router Port"),
        subId(base, "Route"),
        subId(base, "Node Port SNAT Rule"),
      ]);
      const route = changes.update.find((u) => u.after.key === subId(base, "Route"));
      expect(route?.before.body).to.deep.include({ dstNetworkAddr: "10.1.1.0" });
      expect(route?.after.body).to.deep.include({ dstNetworkAddr: "10.1.100.0" });
      const snat = changes.update.find((u) => u.after.key === subId(base, "Node Port SNAT Rule"));
      expect(ruleOf(snat?.after).position).to.equal(1);
    });

    it("two nodes claiming one MidoNet host: a warning, the first owner holds the membership, the other takes over", () => {
      const m = mapCluster({ nodes: [node(2, hostOf(9)), node(1, hostOf(9))] }, config);
      const key = `/tunnel_zones/${G.defaultTunnelZone}/hosts/${hostOf(9)}`;
      expect(m.state.get(key)?.owner).to.equal("Node/node1");
      const dup = m.warnings().filter((w) => w.code === "duplicate-resource");
      expect(dup.map((w) => w.owner)).to.deep.equal(["Node/node2"]);
      const changes = m.deleteNode("node1");
      const handover = changes.update.find((u) => u.after.key === key);
      expect(handover?.after.owner).to.equal("Node/node2");
      expect(handover?.after.body).to.deep.include({ ipAddress: "192.168.0.2" });
      expect(m.warnings().filter((w) => w.code === "duplicate-resource")).to.deep.equal([]);
    });
  });

  describe("duplicates", () => {
    it("an unchanged object re-applied beside a duplicate claim keeps all its resources", () => {
      const m = mapCluster({ nodes: [node(1, hostOf(9)), node(2, hostOf(9))] }, config);
      const before = JSON.stringify(m.state.resources());
      expect(count(m.upsertNode(node(1, hostOf(9))))).to.deep.equal([0, 0, 0]);
      expect(count(m.upsertNode(node(2, hostOf(9))))).to.deep.equal([0, 0, 0]);
      expect(JSON.stringify(m.state.resources())).to.equal(before);
    });
  });

  describe("service and EndpointSlice events", () => {
    const chain = idForKey(TENANT, "ServicePort", "default/svc1/http");

    it("a new endpoint: the new DNAT and a hairpin SNAT are created, the old DNAT deleted (make before break)", () => {
      const m = mapCluster(cluster(), config);
      const oldDnat = subId(chain, "DNAT 10.1.1.3:8080 10.1.2.3:8080 10.1.3.3:8080");
      expect(m.state.get(oldDnat)).to.not.equal(undefined);
      const changes = m.upsertEndpointSlice(
        slice(1, ["10.1.1.3", "10.1.2.3", "10.1.3.3", "10.1.1.6"]),
      );
      const newDnat = subId(chain, "DNAT 10.1.1.3:8080 10.1.1.6:8080 10.1.2.3:8080 10.1.3.3:8080");
      expect(keys(changes.create)).to.deep.equal([
        subId(chain, "Hairpin SNAT 10.96.0.1 10.1.1.6"),
        newDnat,
      ]);
      expect(changes.create.map((r) => (r.body as Rule).position)).to.deep.equal([2, 5]);
      expect(keys(changes.delete)).to.deep.equal([oldDnat]);
      expect(m.state.chainRules(chain).at(-1)).to.equal(newDnat);
    });

    it("keeps no index entry for nodes and services whose pods and slices are all gone (churned names)", () => {
      const m = mapCluster(cluster(), config);
      const before = m.indexedKeys;
      for (let i = 100; i < 400; i++) {
        m.upsertPod(pod(i, 0));
        m.deletePod("ns0", `pod-${i}-0`);
        m.upsertEndpointSlice(slice(i, ["10.1.1.3"]));
        m.deleteEndpointSlice("default", `svc${i}-a`);
      }
      // A pod moving away from a node empties that node's entry too.
      m.upsertPod({ ...pod(500, 1), spec: { nodeName: "node-a" } });
      m.upsertPod({ ...pod(500, 1), spec: { nodeName: "node-b" } });
      m.deletePod("ns1", "pod-500-1");
      expect(m.indexedKeys).to.deep.equal(before);
    });

    it("a slice that arrives before its Service waits for it", () => {
      const m = new ClusterMapper(config);
      expect(count(m.upsertEndpointSlice(slice(5, ["10.1.1.3"])))).to.deep.equal([0, 0, 0]);
      const changes = m.upsertService(service(5));
      const dnat = changes.create.find((r) => (r.body as Rule).type === "dnat");
      expect(ruleOf(dnat).natTargets?.map((t) => t.addressFrom)).to.deep.equal(["10.1.1.3"]);
    });

    it("the last slice deleted: the DNAT gives way to a drop", () => {
      const m = mapCluster(cluster(), config);
      const changes = m.deleteEndpointSlice("default", "svc2-a");
      const c2 = idForKey(TENANT, "ServicePort", "default/svc2/http");
      expect(changes.create.map((r) => (r.body as Rule).type)).to.deep.equal(["drop"]);
      expect(changes.delete.map((r) => (r.body as Rule).type)).to.deep.equal(["dnat", "snat"]);
      expect(m.state.chainRules(c2)).to.deep.equal([subId(c2, "No Endpoints")]);
    });

    it("a deleted Service takes its rules before its chain, and KUBE-SERVICES closes the gap", () => {
      const m = mapCluster(cluster(), config);
      const changes = m.deleteService("default", "svc1");
      expect(kinds(changes.delete).at(-1)).to.equal("Chain");
      expect(
        kinds(changes.delete)
          .slice(0, -1)
          .every((k) => k === "Rule"),
      ).to.equal(true);
      const remaining = m.state.chainRules(G.servicesChain);
      expect(remaining).to.have.length(2);
      expect(m.state.position(remaining[0] as string)).to.equal(1);
    });

    it("a new Service's jump lands at its sorted place in KUBE-SERVICES", () => {
      const m = mapCluster(cluster(), config);
      const changes = m.upsertService(service(0));
      const jump = changes.create.find((r) => parentOf(r) === G.servicesChain);
      expect(ruleOf(jump).position).to.equal(1);
      expect(m.state.chainRules(G.servicesChain)).to.have.length(4);
    });
  });

  describe("incremental equals bulk", () => {
    it("replaying the objects as events gives the state mapCluster gives", () => {
      const c = cluster();
      const m = new ClusterMapper(config);
      // An awkward order: endpoints and pods before services and nodes.
      for (const s of c.endpointSlices) m.upsertEndpointSlice(s);
      for (const p of shuffled(c.pods)) m.upsertPod(p);
      m.upsertPod(pod(1, 9));
      m.deletePod("ns1", "pod-1-9");
      for (const s of c.services) m.upsertService(s);
      for (const n of shuffled(c.nodes)) m.upsertNode(n);
      expect(JSON.stringify(m.state.resources())).to.equal(
        JSON.stringify(mapCluster(c, config).state.resources()),
      );
    });
  });

  describe("diffMappings", () => {
    const nodeOf = () => ({ hostId: hostOf(1) });

    it("from nothing: everything created; to nothing: everything deleted in reverse", () => {
      const m = mapPod(pod(1, 0), config, nodeOf);
      const created = diffMappings(undefined, m);
      expect(kinds(created.create)).to.deep.equal([
        "Port",
        "HostInterfacePort",
        "IP4Mac",
        "MacPort",
      ]);
      const deleted = diffMappings(m, undefined);
      expect(kinds(deleted.delete)).to.deep.equal([
        "MacPort",
        "IP4Mac",
        "HostInterfacePort",
        "Port",
      ]);
    });

    it("a changed MAC replaces the entries keyed by it", () => {
      const a = mapPod(pod(1, 0), config, nodeOf);
      const changed = pod(1, 0);
      changed.metadata.annotations = { "midonet.org/mac-address": "0a:58:0a:01:01:ff" };
      const d = diffMappings(a, mapPod(changed, config, nodeOf));
      expect(count(d)).to.deep.equal([2, 0, 2]);
      expect(d.create.map((r) => r.kind).sort()).to.deep.equal(["IP4Mac", "MacPort"]);
    });
  });

  describe("DesiredState", () => {
    it("an owner's empty mapping removes it", () => {
      const state = new DesiredState();
      const m = mapPod(pod(1, 0), config, () => ({ hostId: hostOf(1) }));
      state.apply(m);
      expect(state.size).to.equal(4);
      expect(count(state.remove(m.owner))).to.deep.equal([0, 0, 4]);
      expect(state.size).to.equal(0);
      expect(state.mapping(m.owner)).to.equal(undefined);
    });
  });

  describe("insertPosition", () => {
    const table: [string[], string[], string, number][] = [
      [["a", "b", "c"], [], "a", 1],
      [["a", "b", "c"], ["a"], "b", 2],
      [["a", "b", "c"], ["a", "c"], "b", 2],
      // Rules about to be deleted still sit in the chain: land after the predecessor.
      [["n", "s"], ["d1", "d2", "s"], "n", 1],
      [["s", "n"], ["d1", "s", "d2"], "n", 3],
      [["a", "b", "c"], ["x", "b", "y"], "c", 3],
    ];
    for (const [desired, actual, rule, want] of table) {
      it(`${rule} into [${actual.join(",")}] (desired [${desired.join(",")}]) → ${want}`, () => {
        expect(insertPosition(desired, actual, rule)).to.equal(want);
      });
    }
  });
});
