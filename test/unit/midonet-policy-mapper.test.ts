/**
 * NetworkPolicy followed one event at a time (src/midonet/mapping/policy-mapper.ts
 * and its rule index) against the whole cluster mapped afresh: after every
 * event of a long deterministic sequence (pod relabels, moves of address,
 * deletions and returns, namespace relabels, policies written, rewritten and
 * deleted), the incremental desired state holds exactly what mapCluster makes
 * of the objects as they are then. An event that skips a rule it concerns
 * leaves a stale peer chain, and fails here.
 */
import { expect } from "chai";
import { ClusterMapper, mapCluster } from "../../src/midonet/mapping/cluster.js";
import type { DesiredState } from "../../src/midonet/mapping/desired-state.js";
import type { Pod } from "../../src/midonet/mapping/k8s.js";
import { nodes, TENANT } from "../support/midonet-cluster.js";

const NAMESPACES = ["x", "y", "z"];
const APPS = ["a", "b", "c"];

function namespace(name: string, team: string): unknown {
  return { metadata: { name, labels: { "kubernetes.io/metadata.name": name, team } } };
}

function pod(ns: string, app: string, n: number, extra: Record<string, string> = {}): Pod {
  const i = NAMESPACES.indexOf(ns) * 3 + APPS.indexOf(app);
  const ip = `10.1.${(i % 3) + 1}.${10 + i + n * 20}`;
  return {
    metadata: { namespace: ns, name: `${app}-${n}`, labels: { app, ...extra } },
    spec: {
      nodeName: `node${(i % 3) + 1}`,
      containers: [
        { name: "c", ports: [{ name: "http", containerPort: 8080 + i, protocol: "TCP" }] },
      ],
    } as Pod["spec"],
    status: { phase: "Running", podIP: ip },
  };
}

function policy(ns: string, name: string, spec: object): unknown {
  return { metadata: { namespace: ns, name }, spec };
}

const POLICIES = [
  policy("x", "from-b", {
    podSelector: { matchLabels: { app: "a" } },
    ingress: [
      { from: [{ podSelector: { matchLabels: { app: "b" } } }], ports: [{ port: "http" }] },
    ],
  }),
  policy("x", "from-team", {
    podSelector: {},
    ingress: [
      {
        from: [
          {
            namespaceSelector: { matchLabels: { team: "red" } },
            podSelector: { matchLabels: { role: "client" } },
          },
        ],
      },
    ],
  }),
  policy("y", "egress-named", {
    podSelector: { matchLabels: { app: "c" } },
    policyTypes: ["Egress"],
    egress: [
      { to: [{ namespaceSelector: {} }], ports: [{ port: "http" }] },
      {
        to: [{ ipBlock: { cidr: "10.1.0.0/16", except: ["10.1.2.0/24"] } }],
        ports: [{ port: "http" }, { protocol: "UDP", port: 53 }],
      },
    ],
  }),
  policy("z", "deny-all", { podSelector: {}, policyTypes: ["Ingress", "Egress"] }),
];

class World {
  namespaces = new Map<string, unknown>(
    NAMESPACES.map((n, i) => [n, namespace(n, i === 1 ? "red" : "blue")]),
  );
  pods = new Map<string, Pod>();
  policies = new Map<string, unknown>();
  readonly mapper = new ClusterMapper({ tenant: TENANT });

  constructor() {
    for (const n of nodes(true)) this.mapper.upsertNode(n);
    for (const ns of this.namespaces.values()) this.mapper.upsertNamespace(ns);
  }

  putPod(p: Pod): void {
    this.pods.set(`${p.metadata.namespace}/${p.metadata.name}`, p);
    this.mapper.upsertPod(p);
  }

  deletePod(key: string): void {
    const [ns, name] = key.split("/") as [string, string];
    this.pods.delete(key);
    this.mapper.deletePod(ns, name);
  }

  putPolicy(p: unknown): void {
    const m = (p as { metadata: { namespace: string; name: string } }).metadata;
    this.policies.set(`${m.namespace}/${m.name}`, p);
    this.mapper.upsertNetworkPolicy(p);
  }

  deletePolicy(key: string): void {
    const [ns, name] = key.split("/") as [string, string];
    this.policies.delete(key);
    this.mapper.deleteNetworkPolicy(ns, name);
  }

  putNamespace(name: string, team: string): void {
    const ns = namespace(name, team);
    this.namespaces.set(name, ns);
    this.mapper.upsertNamespace(ns);
  }

  fresh(): DesiredState {
    return mapCluster(
      {
        nodes: nodes(true),
        namespaces: [...this.namespaces.values()],
        networkPolicies: [...this.policies.values()],
        pods: [...this.pods.values()],
      },
      { tenant: TENANT },
    ).state;
  }
}

function snapshot(state: DesiredState): string[] {
  return state
    .resources()
    .map((r) => `${r.owner} ${r.kind} ${r.key} ${JSON.stringify(r.body)} ${r.order ?? ""}`)
    .sort();
}

describe("MidoNet NetworkPolicy, event by event: the same as the cluster mapped afresh", () => {
  it("holds after every event of a long sequence", () => {
    const w = new World();
    const steps: Array<[string, () => void]> = [];
    for (const ns of NAMESPACES)
      for (const app of APPS) steps.push([`pod ${ns}/${app}-0`, () => w.putPod(pod(ns, app, 0))]);
    for (const p of POLICIES) steps.push(["a policy", () => w.putPolicy(p)]);
    steps.push(
      ["y/b becomes a client", () => w.putPod(pod("y", "b", 0, { role: "client" }))],
      ["z/a becomes a client (blue team)", () => w.putPod(pod("z", "a", 0, { role: "client" }))],
      ["z turns red", () => w.putNamespace("z", "red")],
      [
        "x/b moves address",
        () => w.putPod({ ...pod("x", "b", 0), status: { phase: "Running", podIP: "10.1.2.99" } }),
      ],
      [
        "x/b becomes c",
        () =>
          w.putPod({
            ...pod("x", "b", 0),
            metadata: { ...pod("x", "b", 0).metadata, labels: { app: "c" } },
          }),
      ],
      ["a second x/b", () => w.putPod(pod("x", "b", 1))],
      ["y/b goes", () => w.deletePod("y/b-0")],
      ["y turns blue", () => w.putNamespace("y", "blue")],
      [
        "x/a finishes",
        () => w.putPod({ ...pod("x", "a", 0), status: { phase: "Succeeded", podIP: "10.1.1.10" } }),
      ],
      [
        "from-b rewritten to ports 81",
        () =>
          w.putPolicy(
            policy("x", "from-b", {
              podSelector: { matchLabels: { app: "a" } },
              ingress: [
                { from: [{ podSelector: { matchLabels: { app: "b" } } }], ports: [{ port: 81 }] },
              ],
            }),
          ),
      ],
      ["a new x/a", () => w.putPod(pod("x", "a", 1))],
      ["deny-all goes", () => w.deletePolicy("z/deny-all")],
      ["y/b is back", () => w.putPod(pod("y", "b", 0, { role: "client" }))],
      ["from-team goes", () => w.deletePolicy("x/from-team")],
      ["egress-named goes", () => w.deletePolicy("y/egress-named")],
    );
    let npResources = 0;
    for (const [what, step] of steps) {
      step();
      const got = snapshot(w.mapper.state);
      expect(got, `after "${what}"`).to.deep.equal(snapshot(w.fresh()));
      npResources = Math.max(
        npResources,
        got.filter(
          (l) => l.startsWith("NetworkPolicyFilter/") || l.startsWith("NetworkPolicyPeers/"),
        ).length,
      );
    }
    // The sequence did exercise policy chains, and ends with none but from-b's.
    expect(npResources).to.be.greaterThan(20);
  });

  it("a policy's port change rewrites the rules it touches in place: no chain made, no port updated", () => {
    const w = new World();
    for (const ns of NAMESPACES) for (const app of APPS) w.putPod(pod(ns, app, 0));
    w.putPod(pod("x", "a", 1));
    for (const p of POLICIES) w.putPolicy(p);
    const fromB = (port: number) =>
      policy("x", "from-b", {
        podSelector: { matchLabels: { app: "a" } },
        ingress: [{ from: [{ podSelector: { matchLabels: { app: "b" } } }], ports: [{ port }] }],
      });
    w.putPolicy(fromB(81));
    const changes = w.mapper.upsertNetworkPolicy(fromB(82));
    const what = (rs: { kind: string; body: unknown }[]) =>
      rs.map((r) => `${r.kind} ${JSON.stringify((r.body as { tpDst?: unknown }).tpDst ?? null)}`);
    // x/a-0 and x/a-1 share one filter: one rule out, one in, for both.
    expect(what(changes.delete)).to.deep.equal(['Rule {"start":81,"end":81}']);
    expect(what(changes.create)).to.deep.equal(['Rule {"start":82,"end":82}']);
    expect(changes.update).to.deep.equal([]);
  });
});
