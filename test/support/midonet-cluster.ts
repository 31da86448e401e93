/**
 * A small cluster for the MidoNet reconciler and controller tests: three nodes
 * (each with a MidoNet host of the same name), a deployment's pods on them, and
 * a Service whose EndpointSlice lists three endpoints. Plain JSON, so the same
 * objects feed the mapping directly and the fake kube-apiserver.
 *
 * `topologyOf` turns a simulator snapshot into keys and objects the way the
 * mapping keys its resources, written against the snapshot's own shape (not
 * the reconciler's reading of the API), so it checks the reconciler rather than
 * repeating it.
 */
import { expect } from "chai";
import { compareHeld } from "../../src/midonet/actual-state.js";
import type { DesiredState } from "../../src/midonet/mapping/desired-state.js";
import type { EndpointSlice, Node, Pod, Service } from "../../src/midonet/mapping/k8s.js";
import { type DesiredResource, resourceKey } from "../../src/midonet/mapping/model.js";
import { ANNOTATION_HOST_ID, ANNOTATION_MAC_ADDRESS } from "../../src/midonet/node-contract.js";
import type { MidonetObject } from "../../src/midonet/resources.js";
import type { CallRecord, SimulatorSnapshot } from "./midonet-simulator.js";

export const TENANT = "midonetkube";

export const HOSTS: Record<string, string> = {
  node1: "0b7c3a4e-1111-4a1a-8a1a-000000000001",
  node2: "0b7c3a4e-2222-4a2a-8a2a-000000000002",
  node3: "0b7c3a4e-3333-4a3a-8a3a-000000000003",
};

export const NODE_NAMES = ["node1", "node2", "node3"] as const;

export function node(name: string, index: number, annotations: Record<string, string> = {}): Node {
  return {
    metadata: { name, annotations },
    spec: { podCIDR: `10.1.${index}.0/24` },
    status: { addresses: [{ type: "InternalIP", address: `192.168.0.${10 + index}` }] },
  };
}

/** node1..3; with `hostIds` each carries its MidoNet host id annotation. */
export function nodes(hostIds = true): Node[] {
  return NODE_NAMES.map((name, i) =>
    node(name, i + 1, hostIds ? { [ANNOTATION_HOST_ID]: HOSTS[name] as string } : {}),
  );
}

/** Pod `web-<i>` on node<(i % 3) + 1>, with its MAC annotation and address. */
export function pod(i: number): Pod {
  const n = (i % 3) + 1;
  return {
    metadata: {
      namespace: "default",
      name: `web-${i}`,
      annotations: { [ANNOTATION_MAC_ADDRESS]: podMac(i) },
      labels: { app: "web" },
    },
    spec: { nodeName: `node${n}` },
    status: { phase: "Running", podIP: podIp(i) },
  };
}

export function podMac(i: number): string {
  return `0a:58:0a:01:0${(i % 3) + 1}:${(10 + i).toString(16).padStart(2, "0")}`;
}

export function podIp(i: number): string {
  return `10.1.${(i % 3) + 1}.${10 + i}`;
}

export function service(name = "web", clusterIP = "10.96.0.10"): Service {
  return {
    metadata: { namespace: "default", name },
    spec: {
      type: "ClusterIP",
      clusterIP,
      clusterIPs: [clusterIP],
      ports: [{ name: "http", protocol: "TCP", port: 80 }],
    },
  };
}

/** The Service's slice listing the pods `indices` as ready endpoints on port 8080. */
export function slice(indices: number[], serviceName = "web"): EndpointSlice {
  return {
    metadata: {
      namespace: "default",
      name: `${serviceName}-abcde`,
      labels: { "kubernetes.io/service-name": serviceName },
    },
    addressType: "IPv4",
    endpoints: indices.map((i) => ({
      addresses: [podIp(i)],
      conditions: { ready: true },
      nodeName: `node${(i % 3) + 1}`,
    })),
    ports: [{ name: "http", protocol: "TCP", port: 8080 }],
  };
}

// ---------------------------------------------------------------------------
// The simulator's contents as keyed objects
// ---------------------------------------------------------------------------

export interface Topology {
  objects: Map<string, MidonetObject>;
  /** chain id → rule ids in chain order */
  chains: Map<string, string[]>;
}

/** Every object in the snapshot but the hosts and MidoNet's own Local routes. */
export function topologyOf(s: SimulatorSnapshot): Topology {
  const objects = new Map<string, MidonetObject>();
  const add = (o: MidonetObject) => objects.set(resourceKey(o), o);
  for (const z of s.tunnelZones) add({ kind: "TunnelZone", body: z });
  for (const m of s.tunnelZoneHosts) {
    add({ kind: "TunnelZoneHost", parentId: m.tunnelZoneId as string, body: m });
  }
  for (const r of s.routers) add({ kind: "Router", body: r });
  for (const b of s.bridges) add({ kind: "Bridge", body: b });
  for (const p of s.ports) {
    add({ kind: "Port", parentId: p.deviceId as string, body: p });
    // One link per pair: from the bridge side, as the mapping names it.
    if (p.peerId && p.type === "Bridge") {
      add({ kind: "PortLink", parentId: p.id as string, body: { peerId: p.peerId } });
    }
  }
  for (const r of s.routes) {
    if (r.type !== "Local") add({ kind: "Route", parentId: r.routerId as string, body: r });
  }
  for (const c of s.chains) add({ kind: "Chain", body: c });
  const chains = new Map<string, string[]>();
  const rules = [...s.rules].sort((a, b) => (a.position ?? 0) - (b.position ?? 0));
  for (const r of rules) {
    add({ kind: "Rule", parentId: r.chainId as string, body: r });
    const list = chains.get(r.chainId as string) ?? [];
    list.push(r.id as string);
    chains.set(r.chainId as string, list);
  }
  for (const b of s.hostInterfacePorts)
    add({ kind: "HostInterfacePort", parentId: b.hostId, body: b });
  for (const m of s.macTable) {
    add({ kind: "MacPort", parentId: m.bridgeId, body: { macAddr: m.macAddr, portId: m.portId } });
  }
  for (const a of s.arpTable)
    add({ kind: "IP4Mac", parentId: a.bridgeId, body: { ip: a.ip, mac: a.mac } });
  return { objects, chains };
}

/** The desired resources whose dependencies are all desired (what a reconciler can make). */
export function makeable(state: DesiredState): DesiredResource[] {
  const all = state.resources();
  const ok = new Map<string, boolean>();
  const byKey = new Map(all.map((r) => [r.key, r]));
  const check = (key: string, seen: Set<string>): boolean => {
    const known = ok.get(key);
    if (known !== undefined) return known;
    const r = byKey.get(key);
    if (!r || seen.has(key)) return false;
    seen.add(key);
    const result = r.dependsOn.every((d) => check(d, seen));
    ok.set(key, result);
    return result;
  };
  return all.filter((r) => check(r.key, new Set()));
}

/**
 * The simulator holds exactly what `state` wants: every makeable resource with
 * the wanted content, rules in the wanted order, and nothing else.
 */
export function expectTopology(snapshot: SimulatorSnapshot, state: DesiredState): void {
  const { objects, chains } = topologyOf(snapshot);
  const wanted = makeable(state);
  expect([...objects.keys()].sort(), "keys MidoNet holds").to.deep.equal(
    wanted.map((r) => r.key).sort(),
  );
  for (const r of wanted) {
    const held = objects.get(r.key) as MidonetObject;
    expect(compareHeld(r, held), `${r.kind} ${r.key}`).to.deep.equal({
      comparison: "same",
      fields: [],
    });
  }
  for (const [chain, order] of chains) {
    expect(order, `rules of chain ${chain}`).to.deep.equal(state.chainRules(chain));
  }
}

/** What each successful create made (its Location path), in call order. */
export function createdPaths(calls: readonly CallRecord[]): string[] {
  return calls
    .filter((c) => c.method === "POST" && c.status === 201 && c.location !== undefined)
    .map((c) => c.location as string);
}

/** Objects created more than once: a create repeated after its object already existed. */
export function duplicateCreates(calls: readonly CallRecord[]): string[] {
  const seen = new Map<string, number>();
  for (const path of createdPaths(calls)) seen.set(path, (seen.get(path) ?? 0) + 1);
  return [...seen].filter(([, n]) => n > 1).map(([path]) => path);
}
