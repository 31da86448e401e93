/**
 * NetworkPolicy truth tables, in the shape of kubernetes'
 * test/e2e/network/netpol, for any datapath that can answer "does this
 * connection get through?" (an Oracle): the policy model itself, and the
 * MidoNet chains mapped from it. The cases: namespaces x, y, z with pods a,
 * b, c each, every pod serving 80 and 81 over TCP and UDP under the names
 * serve-<port>-<proto>.
 * A case applies policies and states the expected reachability for one
 * (protocol, port); a connection from → to passes when the destination's
 * ingress allows the source's address and the source's egress allows the
 * destination's address. A pod talking to itself is left out, as upstream
 * does (ignoreLoopback). A mismatch prints both tables, rows from, columns to.
 */
import { expect } from "chai";
import { PolicyModel } from "../../src/policy/model.js";
import type {
  LabelSelector,
  NamedPort,
  NetworkPolicy,
  PolicyPod,
  PolicyRule,
  Protocol,
} from "../../src/policy/types.js";

/** Answers, for the cluster as it is now, whether from may open a connection to to. */
export type Oracle = (
  c: Cluster,
) => (from: string, to: string, protocol: Protocol, port: number, family: Family) => boolean;

const NAMESPACES = ["x", "y", "z"] as const;
const POD_NAMES = ["a", "b", "c"] as const;
const NS_LABEL = "kubernetes.io/metadata.name";

const SERVE_PORTS: NamedPort[] = [
  { name: "serve-80-tcp", protocol: "TCP", port: 80 },
  { name: "serve-81-tcp", protocol: "TCP", port: 81 },
  { name: "serve-80-udp", protocol: "UDP", port: 80 },
  { name: "serve-81-udp", protocol: "UDP", port: 81 },
];

export type Family = 4 | 6;

/** x/a is 10.0.1.1 (and fd00::1:1 when dual-stack), z/c is 10.0.3.3. */
function fixturePod(ns: string, name: string, dualStack: boolean): PolicyPod {
  const i = NAMESPACES.indexOf(ns as (typeof NAMESPACES)[number]) + 1;
  const j = POD_NAMES.indexOf(name as (typeof POD_NAMES)[number]) + 1;
  return {
    namespace: ns,
    name,
    labels: { pod: name },
    ips: [`10.0.${i}.${j}`, ...(dualStack ? [`fd00::${i}:${j}`] : [])],
    namedPorts: SERVE_PORTS,
    hostNetwork: false,
  };
}

/** The model and what was fed to it, so a probe asks about the pods as they are now. */
export class Cluster {
  readonly model = new PolicyModel();
  readonly pods = new Map<string, PolicyPod>();

  constructor(opts: { dualStack?: boolean } = {}) {
    for (const ns of NAMESPACES) {
      this.setNamespace(ns);
      for (const name of POD_NAMES) this.setPod(fixturePod(ns, name, opts.dualStack ?? false));
    }
  }

  setNamespace(name: string, extra: Record<string, string> = {}): void {
    this.model.upsertNamespace({ name, labels: { ns: name, [NS_LABEL]: name, ...extra } });
  }

  setPod(pod: PolicyPod): void {
    this.pods.set(`${pod.namespace}/${pod.name}`, pod);
    this.model.upsertPod(pod);
  }

  get(key: string): PolicyPod {
    const pod = this.pods.get(key);
    if (!pod) throw new Error(`no pod ${key} in the cluster`);
    return pod;
  }

  /** Replaces a pod's labels (an update event for the same pod). */
  relabelPod(key: string, labels: Record<string, string>): void {
    this.setPod({ ...this.get(key), labels });
  }

  deletePod(key: string): void {
    const pod = this.get(key);
    this.pods.delete(key);
    this.model.deletePod(pod.namespace, pod.name);
  }

  /** Adds or replaces policies; each must be one the model can apply. */
  apply(...policies: NetworkPolicy[]): void {
    for (const p of policies)
      expect(this.model.upsertPolicy(p), `${p.namespace}/${p.name}`).to.equal(undefined);
  }

  keys(): string[] {
    return [...this.pods.keys()];
  }
}

interface Peer {
  ns?: string;
  pod?: string;
}

const peerOf = (key: string): Peer => {
  const [ns, pod] = key.split("/");
  return { ns, pod };
};

const inPeer = (key: string, peer: Peer): boolean => {
  const p = peerOf(key);
  return (
    (peer.ns === undefined || peer.ns === p.ns) && (peer.pod === undefined || peer.pod === p.pod)
  );
};

/** upstream's Reachability: a full matrix of expectations, edited by peer patterns. */
class Reachability {
  readonly expected = new Map<string, Map<string, boolean>>();

  constructor(
    readonly pods: string[],
    defaultValue = true,
  ) {
    for (const from of pods)
      this.expected.set(from, new Map(pods.map((to) => [to, defaultValue] as const)));
  }

  expectPeer(from: Peer, to: Peer, value: boolean): this {
    let touched = 0;
    for (const f of this.pods)
      for (const t of this.pods)
        if (inPeer(f, from) && inPeer(t, to)) {
          this.expected.get(f)?.set(t, value);
          touched++;
        }
    // A pattern that matches no pair is a typo in the case, not an expectation.
    if (touched === 0)
      throw new Error(`no pair matches ${JSON.stringify(from)} → ${JSON.stringify(to)}`);
    return this;
  }

  expect(from: string, to: string, value: boolean): this {
    if (!this.pods.includes(from) || !this.pods.includes(to))
      throw new Error(`unknown pod in ${from} → ${to}`);
    this.expected.get(from)?.set(to, value);
    return this;
  }

  expectAllIngress(to: string, value: boolean): this {
    return this.expectPeer({}, peerOf(to), value);
  }

  expectAllEgress(from: string, value: boolean): this {
    return this.expectPeer(peerOf(from), {}, value);
  }

  get(from: string, to: string): boolean {
    const v = this.expected.get(from)?.get(to);
    if (v === undefined) throw new Error(`no expectation for ${from} → ${to}`);
    return v;
  }
}

export function ipOf(pod: PolicyPod, family: Family): string {
  const ip = pod.ips.find((a) => (family === 6) === a.includes(":"));
  if (!ip) throw new Error(`${pod.namespace}/${pod.name} has no IPv${family} address`);
  return ip;
}

/** The policy model's own answer: the destination's ingress and the source's egress allow it. */
export const modelOracle: Oracle = (c) => (from, to, protocol, port, family) => {
  const src = c.get(from);
  const dst = c.get(to);
  return (
    c.model.allows(dst, "ingress", ipOf(src, family), protocol, port) &&
    c.model.allows(src, "egress", ipOf(dst, family), protocol, port)
  );
};

function renderTable(pods: string[], cell: (from: string, to: string) => string): string {
  const w = Math.max(4, ...pods.map((p) => p.length));
  const lines = [`${"".padEnd(w)} | ${pods.map((p) => p.padEnd(w)).join(" ")}`];
  lines.push("-".repeat(lines[0]?.length ?? 0));
  for (const from of pods)
    lines.push(`${from.padEnd(w)} | ${pods.map((to) => cell(from, to).padEnd(w)).join(" ")}`);
  return lines.join("\n");
}

/** Probes every ordered pair and fails with both truth tables on any difference. */
function checkWith(
  oracle: Oracle,
  c: Cluster,
  want: Reachability,
  protocol: Protocol,
  port: number,
  family: Family = 4,
): void {
  const pods = c.keys();
  expect([...want.pods].sort(), "the expectation covers the cluster's pods").to.deep.equal(
    [...pods].sort(),
  );
  const reachable = oracle(c);
  const got = new Map<string, boolean>();
  const wrong: string[] = [];
  for (const from of pods)
    for (const to of pods) {
      if (from === to) continue;
      const r = reachable(from, to, protocol, port, family);
      got.set(`${from}>${to}`, r);
      if (r !== want.get(from, to))
        wrong.push(
          `  ${from} -> ${to}: expected ${want.get(from, to) ? "allowed" : "denied"}, got ${r ? "allowed" : "denied"}`,
        );
    }
  if (wrong.length === 0) return;
  const mark = (v: boolean) => (v ? "." : "X");
  const message = [
    `${protocol}/${port} over IPv${family}: ${wrong.length} of ${pods.length * (pods.length - 1)} pairs differ (rows from, columns to; . allowed, X denied)`,
    "expected:",
    renderTable(pods, (f, t) => (f === t ? "-" : mark(want.get(f, t)))),
    "actual:",
    renderTable(pods, (f, t) => (f === t ? "-" : mark(got.get(`${f}>${t}`) as boolean))),
    "differences:",
    ...wrong,
  ].join("\n");
  expect.fail(message);
}

// --- policy builders ---

const labels = (matchLabels: Record<string, string>): LabelSelector => ({ matchLabels });
const podIs = (name: string) => labels({ pod: name });
const nsIs = (name: string) => labels({ [NS_LABEL]: name });

function policy(
  namespace: string,
  name: string,
  podSelector: LabelSelector,
  spec: {
    policyTypes?: NetworkPolicy["policyTypes"];
    ingress?: PolicyRule[];
    egress?: PolicyRule[];
  },
): NetworkPolicy {
  return { namespace, name, podSelector, ...spec };
}

const denyIngress = (ns: string) =>
  policy(ns, "deny-ingress", {}, { policyTypes: ["Ingress"], ingress: [] });
const denyAll = (ns: string) =>
  policy(ns, "deny-all", {}, { policyTypes: ["Ingress", "Egress"], ingress: [], egress: [] });

/**
 * Every case, run against `oracle`. `ipv6`: the dual-stack cases too (a
 * datapath that cannot match IPv6 leaves them out, and says so where it is used).
 */
export function describePolicyTruthTables(
  title: string,
  oracle: Oracle,
  opts: { ipv6: boolean },
): void {
  const check = (
    c: Cluster,
    want: Reachability,
    protocol: Protocol,
    port: number,
    family: Family = 4,
  ): void => checkWith(oracle, c, want, protocol, port, family);

  describe(title, () => {
    describe("the harness", () => {
      it("lays out the fixture as upstream's model: 3 namespaces × 3 pods, one IPv4 each", () => {
        const c = new Cluster();
        expect(c.keys()).to.deep.equal([
          "x/a",
          "x/b",
          "x/c",
          "y/a",
          "y/b",
          "y/c",
          "z/a",
          "z/b",
          "z/c",
        ]);
        expect(c.get("y/c").ips).to.deep.equal(["10.0.2.3"]);
        expect(new Cluster({ dualStack: true }).get("z/b").ips).to.deep.equal([
          "10.0.3.2",
          "fd00::3:2",
        ]);
      });

      it("fails a wrong expectation, printing both truth tables and the differing pairs", () => {
        const c = new Cluster();
        c.apply(denyIngress("x"));
        const wrong = new Reachability(c.keys(), true); // forgets the deny
        expect(() => check(c, wrong, "TCP", 80)).to.throw(
          /TCP\/80 over IPv4: 24 of 72 pairs differ[\s\S]*expected:[\s\S]*actual:[\s\S]*y\/a -> x\/b: expected allowed, got denied/,
        );
      });

      it("refuses an expectation naming a pod or pattern the cluster does not have", () => {
        const c = new Cluster();
        expect(() => new Reachability(c.keys()).expect("x/q", "x/a", false)).to.throw(
          /unknown pod/,
        );
        expect(() => new Reachability(c.keys()).expectPeer({ ns: "w" }, {}, false)).to.throw(
          /no pair matches/,
        );
        expect(() => check(c, new Reachability(["x/a", "x/b"]), "TCP", 80)).to.throw(
          /covers the cluster's pods/,
        );
      });

      it("with no policy every pod reaches every other, on every protocol and port", () => {
        const c = new Cluster();
        for (const protocol of ["TCP", "UDP", "SCTP"] as const)
          for (const port of [80, 81, 1, 65535])
            check(c, new Reachability(c.keys(), true), protocol, port);
      });
    });

    describe("isolation", () => {
      it("should support a 'default-deny-ingress' policy (TCP, UDP and SCTP)", () => {
        const c = new Cluster();
        c.apply(denyIngress("x"));
        const want = new Reachability(c.keys()).expectPeer({}, { ns: "x" }, false);
        for (const protocol of ["TCP", "UDP", "SCTP"] as const) check(c, want, protocol, 80);
      });

      it("should support a 'default-deny-all' policy", () => {
        const c = new Cluster();
        c.apply(denyAll("x"));
        const want = new Reachability(c.keys())
          .expectPeer({}, { ns: "x" }, false)
          .expectPeer({ ns: "x" }, {}, false);
        check(c, want, "TCP", 80);
      });

      it("should deny egress from all pods in a namespace (policyTypes [Egress], no rules)", () => {
        const c = new Cluster();
        c.apply(policy("x", "deny-egress-ns-x", {}, { policyTypes: ["Egress"], egress: [] }));
        check(c, new Reachability(c.keys()).expectPeer({ ns: "x" }, {}, false), "TCP", 80);
      });

      it("should deny egress from pods based on PodSelector", () => {
        const c = new Cluster();
        c.apply(policy("x", "deny-egress-pod-a", podIs("a"), { policyTypes: ["Egress"] }));
        check(c, new Reachability(c.keys()).expectAllEgress("x/a", false), "TCP", 80);
      });

      it("should support allow-all policy (one empty rule `{}`), on both ports", () => {
        const c = new Cluster();
        c.apply(denyIngress("x"), policy("x", "allow-all", {}, { ingress: [{}] }));
        for (const port of [80, 81]) check(c, new Reachability(c.keys(), true), "TCP", port);
        // Allowed because of the rule, not because nothing selects the pods.
        expect(c.model.podPolicy(c.get("x/a")).ingress).to.have.length(1);
      });

      it("should enforce policy to allow ingress traffic for a target", () => {
        const c = new Cluster();
        c.apply(
          denyIngress("x"),
          policy("x", "allow-all-to-a", podIs("a"), {
            ingress: [{ peers: [{ podSelector: {}, namespaceSelector: {} }] }],
          }),
        );
        const want = new Reachability(c.keys())
          .expectPeer({}, { ns: "x" }, false)
          .expectAllIngress("x/a", true);
        check(c, want, "TCP", 80);
      });

      it("should deny ingress from pods on other namespaces (podSelector {} is the policy's namespace)", () => {
        const c = new Cluster();
        c.apply(
          policy("x", "deny-empty-policy", {}, { ingress: [{ peers: [{ podSelector: {} }] }] }),
        );
        const want = new Reachability(c.keys())
          .expectPeer({ ns: "y" }, { ns: "x" }, false)
          .expectPeer({ ns: "z" }, { ns: "x" }, false);
        check(c, want, "TCP", 80);
      });

      it("should enforce policy to allow ingress traffic from pods in all namespaces (namespaceSelector {})", () => {
        const c = new Cluster();
        c.apply(
          denyIngress("x"),
          policy("x", "allow-from-another-ns", podIs("a"), {
            ingress: [{ peers: [{ namespaceSelector: {} }] }],
          }),
        );
        const want = new Reachability(c.keys())
          .expectPeer({}, { ns: "x" }, false)
          .expectAllIngress("x/a", true);
        check(c, want, "TCP", 80);
      });
    });

    describe("peers by label", () => {
      it("should enforce policy to allow traffic from pods within server namespace based on PodSelector", () => {
        const c = new Cluster();
        c.apply(
          policy("x", "x-a-allows-x-b", podIs("a"), {
            ingress: [{ peers: [{ podSelector: podIs("b") }] }],
          }),
        );
        const want = new Reachability(c.keys())
          .expectAllIngress("x/a", false)
          .expect("x/b", "x/a", true);
        check(c, want, "TCP", 80);
      });

      for (const [title, selector] of [
        ["matchLabels ns=y", labels({ ns: "y" })],
        ["matchLabels on the default label kubernetes.io/metadata.name", nsIs("y")],
        [
          "matchExpressions In",
          { matchExpressions: [{ key: NS_LABEL, operator: "In", values: ["y"] }] },
        ],
      ] as const) {
        it(`should enforce policy to allow traffic only from a different namespace, by NamespaceSelector ${title}`, () => {
          const c = new Cluster();
          c.apply(
            policy("x", "allow-client-a-via-ns-selector", podIs("a"), {
              ingress: [{ peers: [{ namespaceSelector: selector as LabelSelector }] }],
            }),
          );
          const want = new Reachability(c.keys())
            .expectPeer({ ns: "x" }, { ns: "x", pod: "a" }, false)
            .expectPeer({ ns: "z" }, { ns: "x", pod: "a" }, false);
          check(c, want, "TCP", 80);
        });
      }

      it("should enforce policy based on NamespaceSelector with MatchExpressions NotIn (egress)", () => {
        const c = new Cluster();
        c.apply(
          policy("x", "allow-ns-not-y", podIs("a"), {
            policyTypes: ["Egress"],
            egress: [
              {
                peers: [
                  {
                    namespaceSelector: {
                      matchExpressions: [{ key: NS_LABEL, operator: "NotIn", values: ["y"] }],
                    },
                  },
                ],
              },
            ],
          }),
        );
        const want = new Reachability(c.keys()).expectPeer(
          { ns: "x", pod: "a" },
          { ns: "y" },
          false,
        );
        check(c, want, "TCP", 80);
      });

      describe("podSelector operators (in every namespace, namespaceSelector {})", () => {
        // x/b and y/c carry tier=web; nobody else has a tier.
        const cases: Array<[string, LabelSelector, string[]]> = [
          ["matchLabels pod=b", podIs("b"), ["x/b", "y/b", "z/b"]],
          [
            "In [b, c]",
            { matchExpressions: [{ key: "pod", operator: "In", values: ["b", "c"] }] },
            ["x/b", "x/c", "y/b", "y/c", "z/b", "z/c"],
          ],
          [
            "NotIn [b]",
            { matchExpressions: [{ key: "pod", operator: "NotIn", values: ["b"] }] },
            ["x/c", "y/a", "y/c", "z/a", "z/c"],
          ],
          [
            "NotIn on a key most pods lack (holds for a missing key)",
            { matchExpressions: [{ key: "tier", operator: "NotIn", values: ["web"] }] },
            ["x/c", "y/a", "y/b", "z/a", "z/b", "z/c"],
          ],
          [
            "Exists tier",
            { matchExpressions: [{ key: "tier", operator: "Exists" }] },
            ["x/b", "y/c"],
          ],
          [
            "DoesNotExist tier",
            { matchExpressions: [{ key: "tier", operator: "DoesNotExist" }] },
            ["x/c", "y/a", "y/b", "z/a", "z/b", "z/c"],
          ],
          [
            "matchLabels and matchExpressions together (AND)",
            {
              matchLabels: { tier: "web" },
              matchExpressions: [{ key: "pod", operator: "In", values: ["c"] }],
            },
            ["y/c"],
          ],
        ];
        for (const [title, selector, allowed] of cases) {
          it(`x/a admits exactly the pods matching ${title}`, () => {
            const c = new Cluster();
            c.relabelPod("x/b", { pod: "b", tier: "web" });
            c.relabelPod("y/c", { pod: "c", tier: "web" });
            c.apply(
              policy("x", "by-pod-label", podIs("a"), {
                ingress: [{ peers: [{ namespaceSelector: {}, podSelector: selector }] }],
              }),
            );
            const want = new Reachability(c.keys()).expectAllIngress("x/a", false);
            for (const from of allowed) want.expect(from, "x/a", true);
            check(c, want, "TCP", 80);
          });
        }
      });

      it("should enforce policy based on PodSelector with MatchExpressions (own namespace only)", () => {
        const c = new Cluster();
        c.apply(
          policy("x", "x-a-allows-x-b", podIs("a"), {
            ingress: [
              {
                peers: [
                  {
                    podSelector: {
                      matchExpressions: [{ key: "pod", operator: "In", values: ["b"] }],
                    },
                  },
                ],
              },
            ],
          }),
        );
        const want = new Reachability(c.keys())
          .expectAllIngress("x/a", false)
          .expect("x/b", "x/a", true);
        check(c, want, "TCP", 80);
      });

      it("should enforce policy based on PodSelector or NamespaceSelector (two peers: OR)", () => {
        const c = new Cluster();
        c.apply(
          policy("x", "or", podIs("a"), {
            ingress: [
              {
                peers: [
                  {
                    namespaceSelector: {
                      matchExpressions: [{ key: NS_LABEL, operator: "NotIn", values: ["x"] }],
                    },
                  },
                  { podSelector: podIs("b") },
                ],
              },
            ],
          }),
        );
        check(c, new Reachability(c.keys()).expect("x/c", "x/a", false), "TCP", 80);
      });

      it("should enforce policy based on PodSelector and NamespaceSelector (one peer: AND)", () => {
        const c = new Cluster();
        c.apply(
          policy("x", "and", podIs("a"), {
            ingress: [
              {
                peers: [
                  {
                    namespaceSelector: {
                      matchExpressions: [{ key: NS_LABEL, operator: "NotIn", values: ["x"] }],
                    },
                    podSelector: podIs("b"),
                  },
                ],
              },
            ],
          }),
        );
        const want = new Reachability(c.keys())
          .expectAllIngress("x/a", false)
          .expect("y/b", "x/a", true)
          .expect("z/b", "x/a", true);
        check(c, want, "TCP", 80);
      });

      it("should enforce policy based on Multiple PodSelectors and NamespaceSelectors", () => {
        const c = new Cluster();
        c.apply(
          policy("x", "allow-ns-y-z-pod-b-c", podIs("a"), {
            ingress: [
              {
                peers: [
                  {
                    namespaceSelector: {
                      matchExpressions: [{ key: NS_LABEL, operator: "NotIn", values: ["x"] }],
                    },
                    podSelector: {
                      matchExpressions: [{ key: "pod", operator: "In", values: ["b", "c"] }],
                    },
                  },
                ],
              },
            ],
          }),
        );
        const want = new Reachability(c.keys())
          .expectPeer({ ns: "x" }, { ns: "x", pod: "a" }, false)
          .expect("y/a", "x/a", false)
          .expect("z/a", "x/a", false);
        check(c, want, "TCP", 80);
      });

      it("should enforce policy based on any PodSelectors", () => {
        const c = new Cluster();
        c.apply(
          policy("x", "allow-ns-x-pod-b-c", podIs("a"), {
            ingress: [{ peers: [{ podSelector: podIs("b") }, { podSelector: podIs("c") }] }],
          }),
        );
        const want = new Reachability(c.keys())
          .expectAllIngress("x/a", false)
          .expect("x/b", "x/a", true)
          .expect("x/c", "x/a", true);
        check(c, want, "TCP", 80);
      });

      it("should enforce policy to allow traffic only from a pod in a different namespace (TCP, UDP, SCTP)", () => {
        const c = new Cluster();
        c.apply(
          policy("x", "allow-ns-y-pod-a", podIs("a"), {
            ingress: [{ peers: [{ namespaceSelector: nsIs("y"), podSelector: podIs("a") }] }],
          }),
        );
        const want = new Reachability(c.keys())
          .expectAllIngress("x/a", false)
          .expect("y/a", "x/a", true);
        for (const protocol of ["TCP", "UDP", "SCTP"] as const) check(c, want, protocol, 80);
      });

      it("should enforce egress policy allowing traffic to a server in a different namespace based on PodSelector and NamespaceSelector", () => {
        const c = new Cluster();
        c.apply(
          policy("x", "allow-to-ns-y-pod-a", podIs("a"), {
            policyTypes: ["Egress"],
            egress: [{ peers: [{ namespaceSelector: nsIs("y"), podSelector: podIs("a") }] }],
          }),
        );
        const want = new Reachability(c.keys())
          .expectAllEgress("x/a", false)
          .expect("x/a", "y/a", true);
        check(c, want, "TCP", 80);
      });

      it("should support denying of egress traffic on the client side (even if the server explicitly allows this traffic)", () => {
        const c = new Cluster();
        const fromXA = { peers: [{ namespaceSelector: nsIs("x"), podSelector: podIs("a") }] };
        c.apply(
          policy("x", "allow-to-ns-y-pod-a", podIs("a"), {
            policyTypes: ["Egress"],
            egress: [{ peers: [{ namespaceSelector: nsIs("y"), podSelector: podIs("a") }] }],
          }),
          policy("y", "allow-from-xa-on-ya", podIs("a"), { ingress: [fromXA] }),
          policy("y", "allow-from-xa-on-yb", podIs("b"), { ingress: [fromXA] }),
        );
        const want = new Reachability(c.keys())
          .expectPeer({ ns: "x", pod: "a" }, {}, false)
          .expectPeer({}, { ns: "y", pod: "a" }, false)
          .expectPeer({ ns: "x", pod: "a" }, { ns: "y", pod: "a" }, true)
          .expectPeer({}, { ns: "y", pod: "b" }, false);
        check(c, want, "TCP", 80);
      });
    });

    describe("ipBlock", () => {
      it("should allow egress access to server in CIDR block (/32)", () => {
        const c = new Cluster();
        c.apply(
          policy("x", "allow-client-a-via-cidr-egress-rule", podIs("a"), {
            policyTypes: ["Egress"],
            egress: [{ peers: [{ ipBlock: { cidr: "10.0.2.2/32" } }] }],
          }),
        );
        const want = new Reachability(c.keys())
          .expectAllEgress("x/a", false)
          .expect("x/a", "y/b", true);
        check(c, want, "TCP", 80);
      });

      it("should enforce except clause while egress access to server in CIDR block", () => {
        const c = new Cluster();
        c.apply(
          policy("x", "allow-client-a-via-cidr-egress-rule", podIs("a"), {
            policyTypes: ["Egress"],
            egress: [{ peers: [{ ipBlock: { cidr: "10.0.0.0/16", except: ["10.0.1.2/32"] } }] }],
          }),
        );
        check(c, new Reachability(c.keys()).expect("x/a", "x/b", false), "TCP", 80);
      });

      it("should ensure an IP overlapping both IPBlock.CIDR and IPBlock.Except is allowed (after an update)", () => {
        const c = new Cluster();
        const egress = (peers: PolicyRule["peers"]) =>
          policy("x", "allow-client-a-via-cidr-egress-rule", podIs("a"), {
            policyTypes: ["Egress"],
            egress: [{ peers }],
          });
        c.apply(egress([{ ipBlock: { cidr: "10.0.0.0/16", except: ["10.0.1.2/32"] } }]));
        check(c, new Reachability(c.keys()).expect("x/a", "x/b", false), "TCP", 80);
        c.apply(egress([{ ipBlock: { cidr: "10.0.1.2/32" } }]));
        const want = new Reachability(c.keys())
          .expectAllEgress("x/a", false)
          .expect("x/a", "x/b", true);
        check(c, want, "TCP", 80);
      });

      it("an except carved out of one peer is still allowed by another peer of the rule (peers OR)", () => {
        const c = new Cluster();
        c.apply(
          policy("x", "cidr-or-pod", podIs("a"), {
            ingress: [
              {
                peers: [
                  { ipBlock: { cidr: "10.0.2.0/24", except: ["10.0.2.2/31"] } },
                  { namespaceSelector: nsIs("y"), podSelector: podIs("c") },
                ],
              },
            ],
          }),
        );
        // 10.0.2.2/31 cuts y/b (.2) and y/c (.3); the pod peer brings y/c back.
        const want = new Reachability(c.keys())
          .expectAllIngress("x/a", false)
          .expect("y/a", "x/a", true)
          .expect("y/c", "x/a", true);
        check(c, want, "TCP", 80);
      });

      it("a CIDR with host bits set means its network", () => {
        const c = new Cluster();
        c.apply(
          policy("x", "cidr", podIs("a"), {
            ingress: [{ peers: [{ ipBlock: { cidr: "10.0.3.77/24" } }] }],
          }),
        );
        const want = new Reachability(c.keys())
          .expectAllIngress("x/a", false)
          .expectPeer({ ns: "z" }, { ns: "x", pod: "a" }, true);
        check(c, want, "TCP", 80);
      });
    });

    describe("ports", () => {
      it("should enforce policy based on Ports (one numeric port, TCP/UDP/SCTP)", () => {
        const c = new Cluster();
        for (const protocol of ["TCP", "UDP", "SCTP"] as const) {
          c.apply(
            policy("x", "allow-port-81", podIs("a"), {
              ingress: [
                { peers: [{ namespaceSelector: nsIs("y") }], ports: [{ protocol, port: 81 }] },
              ],
            }),
          );
          const allow81 = new Reachability(c.keys())
            .expectPeer({ ns: "x" }, { ns: "x", pod: "a" }, false)
            .expectPeer({ ns: "z" }, { ns: "x", pod: "a" }, false);
          check(c, allow81, protocol, 81);
          check(c, new Reachability(c.keys()).expectAllIngress("x/a", false), protocol, 80);
        }
      });

      it("should enforce multiple, stacked policies with overlapping podSelectors", () => {
        const c = new Cluster();
        const allowPort = (port: number) =>
          policy("x", `allow-${port}`, podIs("a"), {
            ingress: [
              { peers: [{ namespaceSelector: nsIs("y") }], ports: [{ protocol: "TCP", port }] },
            ],
          });
        c.apply(allowPort(81));
        const allow = new Reachability(c.keys())
          .expectPeer({ ns: "x" }, { ns: "x", pod: "a" }, false)
          .expectPeer({ ns: "z" }, { ns: "x", pod: "a" }, false);
        check(c, allow, "TCP", 81);
        check(c, new Reachability(c.keys()).expectAllIngress("x/a", false), "TCP", 80);
        c.apply(allowPort(80));
        check(c, allow, "TCP", 80);
        check(c, allow, "TCP", 81);
      });

      it("should allow ingress access on one named port", () => {
        const c = new Cluster();
        c.apply(
          policy("x", "allow-81-named", {}, { ingress: [{ ports: [{ port: "serve-81-tcp" }] }] }),
        );
        check(c, new Reachability(c.keys()), "TCP", 81);
        const closed = new Reachability(c.keys()).expectPeer({}, { ns: "x" }, false);
        check(c, closed, "TCP", 80);
        // The name is serve-81-tcp's: UDP 81 is another port.
        check(c, closed, "UDP", 81);
      });

      it("should allow ingress access from namespace on one named port", () => {
        const c = new Cluster();
        c.apply(
          policy("x", "allow-client-a-via-ns-selector-80", podIs("a"), {
            ingress: [
              {
                peers: [{ namespaceSelector: nsIs("y") }],
                ports: [{ protocol: "TCP", port: "serve-80-tcp" }],
              },
            ],
          }),
        );
        const want = new Reachability(c.keys())
          .expectPeer({ ns: "x" }, { ns: "x", pod: "a" }, false)
          .expectPeer({ ns: "z" }, { ns: "x", pod: "a" }, false);
        check(c, want, "TCP", 80);
        check(c, new Reachability(c.keys()).expectAllIngress("x/a", false), "TCP", 81);
      });

      it("should allow egress access on one named port", () => {
        const c = new Cluster();
        c.apply(
          policy(
            "x",
            "allow-egress",
            {},
            {
              policyTypes: ["Egress"],
              egress: [{ ports: [{ port: "serve-80-tcp" }] }],
            },
          ),
        );
        check(c, new Reachability(c.keys()), "TCP", 80);
        check(c, new Reachability(c.keys()).expectPeer({ ns: "x" }, {}, false), "TCP", 81);
      });

      it("a named egress port is resolved on each destination pod", () => {
        const c = new Cluster();
        // y/b serves serve-80-tcp on 8080; everyone else on 80.
        c.setPod({
          ...c.get("y/b"),
          namedPorts: SERVE_PORTS.map((p) =>
            p.name === "serve-80-tcp" ? { ...p, port: 8080 } : p,
          ),
        });
        c.apply(
          policy("x", "egress-named", podIs("a"), {
            policyTypes: ["Egress"],
            egress: [{ ports: [{ port: "serve-80-tcp" }] }],
          }),
        );
        check(c, new Reachability(c.keys()).expect("x/a", "y/b", false), "TCP", 80);
        const only8080 = new Reachability(c.keys())
          .expectAllEgress("x/a", false)
          .expect("x/a", "y/b", true);
        check(c, only8080, "TCP", 8080);
        // A named port of another protocol: serve-81-udp is UDP 81, not TCP 81.
        c.apply(
          policy("x", "egress-named", podIs("a"), {
            policyTypes: ["Egress"],
            egress: [{ ports: [{ protocol: "UDP", port: "serve-81-udp" }] }],
          }),
        );
        check(c, new Reachability(c.keys()), "UDP", 81);
        check(c, new Reachability(c.keys()).expectAllEgress("x/a", false), "TCP", 81);
      });

      it("a named ingress port is resolved on the selected pod itself", () => {
        const c = new Cluster();
        c.setPod({
          ...c.get("y/b"),
          namedPorts: SERVE_PORTS.map((p) =>
            p.name === "serve-80-tcp" ? { ...p, port: 8080 } : p,
          ),
        });
        c.apply(
          policy("y", "ingress-named", {}, { ingress: [{ ports: [{ port: "serve-80-tcp" }] }] }),
        );
        const to80 = new Reachability(c.keys()).expectAllIngress("y/b", false);
        check(c, to80, "TCP", 80);
        const to8080 = new Reachability(c.keys())
          .expectPeer({}, { ns: "y" }, false)
          .expectAllIngress("y/b", true);
        check(c, to8080, "TCP", 8080);
      });

      it("a pod without the named port matches nothing for it; the rule's other ports still work", () => {
        const c = new Cluster();
        c.setPod({
          ...c.get("x/c"),
          namedPorts: SERVE_PORTS.filter((p) => p.name !== "serve-81-tcp"),
        });
        c.apply(
          policy(
            "x",
            "named-and-numeric",
            {},
            {
              ingress: [{ ports: [{ port: "serve-81-tcp" }, { port: 80 }] }],
            },
          ),
        );
        check(c, new Reachability(c.keys()).expectAllIngress("x/c", false), "TCP", 81);
        check(c, new Reachability(c.keys()), "TCP", 80);
      });

      it("an egress named port the destination lacks opens nothing towards it", () => {
        const c = new Cluster();
        c.setPod({
          ...c.get("x/c"),
          namedPorts: SERVE_PORTS.filter((p) => p.name !== "serve-81-tcp"),
        });
        c.apply(
          policy("y", "egress-named-81", podIs("a"), {
            policyTypes: ["Egress"],
            egress: [{ ports: [{ port: "serve-81-tcp" }] }],
          }),
        );
        check(c, new Reachability(c.keys()).expect("y/a", "x/c", false), "TCP", 81);
        check(c, new Reachability(c.keys()).expectAllEgress("y/a", false), "TCP", 80);
      });

      it("a port name no pod has closes the selected pods entirely", () => {
        const c = new Cluster();
        c.apply(
          policy("x", "nobody-serves", {}, { ingress: [{ ports: [{ port: "serve-99-tcp" }] }] }),
        );
        const closed = new Reachability(c.keys()).expectPeer({}, { ns: "x" }, false);
        for (const port of [80, 81, 99]) check(c, closed, "TCP", port);
      });

      it("endPort opens the whole range port..endPort and nothing else", () => {
        const c = new Cluster();
        c.apply(
          policy("x", "range", podIs("a"), {
            ingress: [{ ports: [{ protocol: "TCP", port: 80, endPort: 82 }] }],
          }),
        );
        for (const port of [80, 81, 82]) check(c, new Reachability(c.keys()), "TCP", port);
        const closed = new Reachability(c.keys()).expectAllIngress("x/a", false);
        for (const port of [79, 83]) check(c, closed, "TCP", port);
        check(c, closed, "UDP", 81);
      });

      it("endPort on an egress rule", () => {
        const c = new Cluster();
        c.apply(
          policy("x", "range-out", podIs("a"), {
            policyTypes: ["Egress"],
            egress: [
              {
                peers: [{ namespaceSelector: nsIs("z") }],
                ports: [{ port: 32000, endPort: 32768 }],
              },
            ],
          }),
        );
        const toZ = new Reachability(c.keys())
          .expectAllEgress("x/a", false)
          .expectPeer({ ns: "x", pod: "a" }, { ns: "z" }, true);
        for (const port of [32000, 32500, 32768]) check(c, toZ, "TCP", port);
        check(c, new Reachability(c.keys()).expectAllEgress("x/a", false), "TCP", 32769);
      });
    });

    describe("protocols", () => {
      it("should enforce ingress policy allowing any port traffic to a server on a specific protocol", () => {
        const c = new Cluster();
        c.apply(
          policy("x", "allow-ingress-by-proto", podIs("a"), {
            ingress: [{ ports: [{ protocol: "TCP" }] }],
          }),
        );
        for (const port of [80, 81, 12345]) check(c, new Reachability(c.keys()), "TCP", port);
        check(c, new Reachability(c.keys()).expectAllIngress("x/a", false), "UDP", 80);
      });

      it("should not allow access by TCP when a policy specifies only UDP", () => {
        const c = new Cluster();
        c.apply(
          policy("x", "allow-only-udp-ingress-on-port-81", podIs("a"), {
            ingress: [{ ports: [{ protocol: "UDP", port: 81 }] }],
          }),
        );
        check(c, new Reachability(c.keys()).expectAllIngress("x/a", false), "TCP", 81);
        check(c, new Reachability(c.keys()), "UDP", 81);
      });

      it("should not mistakenly treat 'protocol: SCTP' as 'protocol: TCP'", () => {
        const c = new Cluster();
        c.apply(
          denyIngress("x"),
          policy("x", "allow-only-sctp-ingress-on-port-81", podIs("a"), {
            ingress: [{ ports: [{ protocol: "SCTP", port: 81 }] }],
          }),
        );
        check(c, new Reachability(c.keys()).expectPeer({}, { ns: "x" }, false), "TCP", 81);
        const sctp = new Reachability(c.keys())
          .expectPeer({}, { ns: "x" }, false)
          .expectAllIngress("x/a", true);
        check(c, sctp, "SCTP", 81);
      });

      it("should properly isolate pods that are selected by a policy allowing SCTP", () => {
        const c = new Cluster();
        c.apply(
          policy("x", "allow-only-sctp-ingress-on-port-80", podIs("a"), {
            ingress: [{ ports: [{ protocol: "SCTP", port: 80 }] }],
          }),
        );
        check(c, new Reachability(c.keys()).expectAllIngress("x/a", false), "TCP", 81);
        check(c, new Reachability(c.keys()).expectAllIngress("x/a", false), "TCP", 80);
      });

      it("a port without protocol is TCP", () => {
        const c = new Cluster();
        c.apply(policy("x", "tcp-81", podIs("a"), { ingress: [{ ports: [{ port: 81 }] }] }));
        check(c, new Reachability(c.keys()), "TCP", 81);
        for (const protocol of ["UDP", "SCTP"] as const)
          check(c, new Reachability(c.keys()).expectAllIngress("x/a", false), protocol, 81);
      });
    });

    describe("policy types", () => {
      it("should work with Ingress, Egress specified together", () => {
        const c = new Cluster();
        c.apply(
          policy("x", "allow-client-a-via-pod-selector", podIs("a"), {
            policyTypes: ["Egress", "Ingress"],
            ingress: [{ peers: [{ podSelector: podIs("b") }] }],
            egress: [{ ports: [{ port: 80 }] }],
          }),
        );
        const port80 = new Reachability(c.keys())
          .expectAllIngress("x/a", false)
          .expect("x/b", "x/a", true);
        check(c, port80, "TCP", 80);
        const port81 = new Reachability(c.keys())
          .expectAllIngress("x/a", false)
          .expectAllEgress("x/a", false)
          .expect("x/b", "x/a", true);
        check(c, port81, "TCP", 81);
      });

      it("implicit policyTypes: a policy with only egress rules is Ingress+Egress", () => {
        const c = new Cluster();
        c.apply(
          policy("x", "egress-only-rules", podIs("a"), {
            egress: [{ peers: [{ namespaceSelector: nsIs("y") }] }],
          }),
        );
        const want = new Reachability(c.keys())
          .expectAllIngress("x/a", false)
          .expectAllEgress("x/a", false)
          .expectPeer({ ns: "x", pod: "a" }, { ns: "y" }, true);
        check(c, want, "TCP", 80);
      });

      it("explicit policyTypes [Egress]: the same rules leave ingress open", () => {
        const c = new Cluster();
        c.apply(
          policy("x", "egress-only-rules", podIs("a"), {
            policyTypes: ["Egress"],
            egress: [{ peers: [{ namespaceSelector: nsIs("y") }] }],
          }),
        );
        const want = new Reachability(c.keys())
          .expectAllEgress("x/a", false)
          .expectPeer({ ns: "x", pod: "a" }, { ns: "y" }, true);
        check(c, want, "TCP", 80);
      });

      it("implicit policyTypes: no rules at all is Ingress only (egress stays open)", () => {
        const c = new Cluster();
        c.apply(policy("x", "bare", {}, {}));
        check(c, new Reachability(c.keys()).expectPeer({}, { ns: "x" }, false), "TCP", 80);
      });

      it("explicit policyTypes [Ingress]: egress rules are ignored", () => {
        const c = new Cluster();
        c.apply(
          policy(
            "x",
            "ingress-typed",
            {},
            {
              policyTypes: ["Ingress"],
              ingress: [{}],
              egress: [{ peers: [{ podSelector: podIs("nobody") }] }],
            },
          ),
        );
        check(c, new Reachability(c.keys()), "TCP", 80);
      });

      it("should enforce policies to check ingress and egress policies can be controlled independently based on PodSelector", () => {
        const c = new Cluster();
        c.apply(
          policy("x", "allow-egress-for-target", podIs("a"), {
            policyTypes: ["Egress"],
            egress: [{}],
          }),
        );
        check(c, new Reachability(c.keys()), "TCP", 80);
        c.apply(
          policy("x", "deny-ingress-via-label-selector", podIs("a"), { policyTypes: ["Ingress"] }),
        );
        check(c, new Reachability(c.keys()).expectAllIngress("x/a", false), "TCP", 80);
      });
    });

    describe("changes", () => {
      it("should enforce multiple ingress policies with ingress allow-all policy taking precedence", () => {
        const c = new Cluster();
        c.apply(policy("x", "allow-ingress-port-80", {}, { ingress: [{ ports: [{ port: 80 }] }] }));
        check(c, new Reachability(c.keys()).expectPeer({}, { ns: "x" }, false), "TCP", 81);
        c.apply(policy("x", "allow-ingress", {}, { ingress: [{}] }));
        check(c, new Reachability(c.keys()), "TCP", 81);
      });

      it("should enforce multiple egress policies with egress allow-all policy taking precedence", () => {
        const c = new Cluster();
        c.apply(
          policy(
            "x",
            "allow-egress-port-80",
            {},
            { policyTypes: ["Egress"], egress: [{ ports: [{ port: 80 }] }] },
          ),
        );
        check(c, new Reachability(c.keys()).expectPeer({ ns: "x" }, {}, false), "TCP", 81);
        c.apply(policy("x", "allow-egress", {}, { policyTypes: ["Egress"], egress: [{}] }));
        check(c, new Reachability(c.keys()), "TCP", 81);
      });

      it("should enforce updated policy (allow-all upserted again as deny-all), then stop after delete", () => {
        const c = new Cluster();
        c.apply(policy("x", "allow-all-mutate-to-deny-all", {}, { ingress: [{}] }));
        check(c, new Reachability(c.keys()), "TCP", 81);
        c.apply(policy("x", "allow-all-mutate-to-deny-all", {}, { ingress: [] }));
        check(c, new Reachability(c.keys()).expectPeer({}, { ns: "x" }, false), "TCP", 81);
        c.model.deletePolicy("x", "allow-all-mutate-to-deny-all");
        check(c, new Reachability(c.keys()), "TCP", 81);
        expect(c.model.hasPolicies("x")).to.equal(false);
      });

      it("an update that changes a rule's peers replaces them (no peer of the old version lingers)", () => {
        const c = new Cluster();
        const from = (name: string) =>
          policy("x", "from", podIs("a"), {
            ingress: [{ peers: [{ namespaceSelector: {}, podSelector: podIs(name) }] }],
          });
        c.apply(from("b"));
        check(
          c,
          new Reachability(c.keys())
            .expectAllIngress("x/a", false)
            .expectPeer({ pod: "b" }, { ns: "x", pod: "a" }, true),
          "TCP",
          80,
        );
        c.apply(from("c"));
        check(
          c,
          new Reachability(c.keys())
            .expectAllIngress("x/a", false)
            .expectPeer({ pod: "c" }, { ns: "x", pod: "a" }, true),
          "TCP",
          80,
        );
      });

      it("should stop enforcing policies after they are deleted", () => {
        const c = new Cluster();
        c.apply(denyAll("x"));
        check(
          c,
          new Reachability(c.keys())
            .expectPeer({ ns: "x" }, {}, false)
            .expectPeer({}, { ns: "x" }, false),
          "TCP",
          80,
        );
        c.model.deletePolicy("x", "deny-all");
        check(c, new Reachability(c.keys()), "TCP", 80);
      });

      it("should allow ingress access from updated pod (upsertPod with new labels)", () => {
        const c = new Cluster();
        c.apply(
          policy("x", "allow-client-a-via-pod-selector", podIs("a"), {
            ingress: [{ peers: [{ podSelector: labels({ pod: "b", pod2: "updated" }) }] }],
          }),
        );
        check(c, new Reachability(c.keys()).expectAllIngress("x/a", false), "TCP", 80);
        c.relabelPod("x/b", { pod: "b", pod2: "updated" });
        check(
          c,
          new Reachability(c.keys()).expectAllIngress("x/a", false).expect("x/b", "x/a", true),
          "TCP",
          80,
        );
        c.relabelPod("x/b", { pod: "b" });
        check(c, new Reachability(c.keys()).expectAllIngress("x/a", false), "TCP", 80);
      });

      it("should deny ingress access to updated pod (labels bring it under a policy, then out)", () => {
        const c = new Cluster();
        c.apply(
          policy("x", "deny-ingress-via-label-selector", labels({ target: "isolated" }), {
            ingress: [],
          }),
        );
        check(c, new Reachability(c.keys()), "TCP", 80);
        c.relabelPod("x/a", { pod: "a", target: "isolated" });
        check(c, new Reachability(c.keys()).expectAllIngress("x/a", false), "TCP", 80);
        c.relabelPod("x/a", { pod: "a" });
        check(c, new Reachability(c.keys()), "TCP", 80);
      });

      it("should allow ingress access from updated namespace (upsertNamespace with new labels)", () => {
        const c = new Cluster();
        c.apply(
          policy("x", "allow-client-a-via-ns-selector", podIs("a"), {
            ingress: [{ peers: [{ namespaceSelector: labels({ ns2: "updated" }) }] }],
          }),
        );
        check(c, new Reachability(c.keys()).expectAllIngress("x/a", false), "TCP", 80);
        c.setNamespace("y", { ns2: "updated" });
        const fromY = new Reachability(c.keys())
          .expectAllIngress("x/a", false)
          .expectPeer({ ns: "y" }, { ns: "x", pod: "a" }, true);
        check(c, fromY, "TCP", 80);
        c.setNamespace("y");
        c.setNamespace("z", { ns2: "updated" });
        const fromZ = new Reachability(c.keys())
          .expectAllIngress("x/a", false)
          .expectPeer({ ns: "z" }, { ns: "x", pod: "a" }, true);
        check(c, fromZ, "TCP", 80);
      });

      it("a namespace relabel moves an egress rule with a named port (and an ipBlock) to the new namespace's pods", () => {
        const c = new Cluster();
        c.setNamespace("y", { egress: "ok" });
        c.apply(
          policy("x", "egress-named-by-ns", podIs("a"), {
            policyTypes: ["Egress"],
            egress: [
              {
                // The ipBlock (outside the pods' range) makes the rule read every pod for its named ports.
                peers: [
                  { namespaceSelector: labels({ egress: "ok" }) },
                  { ipBlock: { cidr: "192.168.0.0/16" } },
                ],
                ports: [{ port: "serve-80-tcp" }],
              },
            ],
          }),
        );
        const toY = new Reachability(c.keys())
          .expectAllEgress("x/a", false)
          .expectPeer({ ns: "x", pod: "a" }, { ns: "y" }, true);
        check(c, toY, "TCP", 80);
        c.setNamespace("y");
        c.setNamespace("z", { egress: "ok" });
        const toZ = new Reachability(c.keys())
          .expectAllEgress("x/a", false)
          .expectPeer({ ns: "x", pod: "a" }, { ns: "z" }, true);
        check(c, toZ, "TCP", 80);
      });

      it("a namespace relabel moves an egress rule with a named port (no ipBlock)", () => {
        const c = new Cluster();
        c.setNamespace("y", { egress: "ok" });
        c.apply(
          policy("x", "egress-named-by-ns", podIs("a"), {
            policyTypes: ["Egress"],
            egress: [
              {
                peers: [{ namespaceSelector: labels({ egress: "ok" }) }],
                ports: [{ port: "serve-80-tcp" }],
              },
            ],
          }),
        );
        check(
          c,
          new Reachability(c.keys())
            .expectAllEgress("x/a", false)
            .expectPeer({ ns: "x", pod: "a" }, { ns: "y" }, true),
          "TCP",
          80,
        );
        c.setNamespace("y");
        c.setNamespace("z", { egress: "ok" });
        check(
          c,
          new Reachability(c.keys())
            .expectAllEgress("x/a", false)
            .expectPeer({ ns: "x", pod: "a" }, { ns: "z" }, true),
          "TCP",
          80,
        );
      });

      it("a deleted pod disappears from the peers; a new pod with its address is not let in", () => {
        const c = new Cluster();
        c.apply(
          policy("x", "from-b", podIs("a"), {
            ingress: [{ peers: [{ podSelector: podIs("b") }] }],
          }),
        );
        check(
          c,
          new Reachability(c.keys()).expectAllIngress("x/a", false).expect("x/b", "x/a", true),
          "TCP",
          80,
        );
        const oldIp = c.get("x/b").ips[0] as string;
        c.deletePod("x/b");
        check(c, new Reachability(c.keys()).expectAllIngress("x/a", false), "TCP", 80);
        expect(c.model.allows(c.get("x/a"), "ingress", oldIp, "TCP", 80)).to.equal(false);
        // The address goes to a pod the policy does not name.
        c.setPod({ ...fixturePod("y", "a", false), name: "d", labels: { pod: "d" }, ips: [oldIp] });
        check(c, new Reachability(c.keys()).expectAllIngress("x/a", false), "TCP", 80);
        // x/b comes back at another address, and only that address is let in.
        c.setPod({ ...fixturePod("x", "b", false), ips: ["10.0.1.20"] });
        check(
          c,
          new Reachability(c.keys()).expectAllIngress("x/a", false).expect("x/b", "x/a", true),
          "TCP",
          80,
        );
        expect(c.model.allows(c.get("x/a"), "ingress", oldIp, "TCP", 80)).to.equal(false);
      });

      it("a deleted pod disappears from named egress targets", () => {
        const c = new Cluster();
        c.apply(
          policy("x", "egress-named", podIs("a"), {
            policyTypes: ["Egress"],
            egress: [
              { peers: [{ namespaceSelector: nsIs("y") }], ports: [{ port: "serve-80-tcp" }] },
            ],
          }),
        );
        const toY = () =>
          new Reachability(c.keys())
            .expectAllEgress("x/a", false)
            .expectPeer({ ns: "x", pod: "a" }, { ns: "y" }, true);
        check(c, toY(), "TCP", 80);
        const yb = c.get("y/b");
        c.deletePod("y/b");
        check(c, toY(), "TCP", 80);
        expect(c.model.allows(c.get("x/a"), "egress", yb.ips[0] as string, "TCP", 80)).to.equal(
          false,
        );
      });
    });

    describe("hostNetwork pods", () => {
      /** x/h: a hostNetwork pod labelled like x/a, at its node's address. */
      function withHostPod(): Cluster {
        const c = new Cluster();
        c.setPod({
          ...fixturePod("x", "a", false),
          name: "h",
          ips: ["192.168.0.10"],
          hostNetwork: true,
        });
        return c;
      }

      it("are never selected: a deny-all in their namespace leaves them open both ways", () => {
        const c = withHostPod();
        expect(c.get("x/h").labels).to.deep.equal({ pod: "a" });
        c.apply(denyAll("x"));
        const want = new Reachability(c.keys())
          .expectPeer({ ns: "x" }, {}, false)
          .expectPeer({}, { ns: "x" }, false)
          // x/h sends freely; what it reaches in x is closed by x's ingress.
          .expectPeer({ ns: "x", pod: "h" }, { ns: "y" }, true)
          .expectPeer({ ns: "x", pod: "h" }, { ns: "z" }, true)
          .expectPeer({ ns: "y" }, { ns: "x", pod: "h" }, true)
          .expectPeer({ ns: "z" }, { ns: "x", pod: "h" }, true);
        check(c, want, "TCP", 80);
        expect(c.model.podPolicy(c.get("x/h"))).to.deep.equal({});
      });

      it("are never pod peers, whatever their labels; an ipBlock holding the node's address lets them in", () => {
        const c = withHostPod();
        c.apply(
          policy(
            "y",
            "from-pod-a",
            {},
            { ingress: [{ peers: [{ namespaceSelector: {}, podSelector: podIs("a") }] }] },
          ),
        );
        const fromA = () =>
          new Reachability(c.keys())
            .expectPeer({}, { ns: "y" }, false)
            .expectPeer({ pod: "a" }, { ns: "y" }, true)
            .expectPeer({ ns: "x", pod: "h" }, { ns: "y" }, false);
        check(c, fromA(), "TCP", 80);
        c.apply(
          policy(
            "y",
            "from-nodes",
            {},
            { ingress: [{ peers: [{ ipBlock: { cidr: "192.168.0.0/24" } }] }] },
          ),
        );
        check(c, fromA().expectPeer({ ns: "x", pod: "h" }, { ns: "y" }, true), "TCP", 80);
      });

      it("a pod turning hostNetwork leaves the peers and the selection", () => {
        const c = new Cluster();
        c.apply(
          policy("x", "from-b", podIs("a"), {
            ingress: [{ peers: [{ podSelector: podIs("b") }] }],
          }),
          policy("x", "isolate-b", podIs("b"), { ingress: [] }),
        );
        check(
          c,
          new Reachability(c.keys())
            .expectAllIngress("x/a", false)
            .expect("x/b", "x/a", true)
            .expectAllIngress("x/b", false),
          "TCP",
          80,
        );
        c.setPod({ ...c.get("x/b"), hostNetwork: true });
        check(c, new Reachability(c.keys()).expectAllIngress("x/a", false), "TCP", 80);
      });
    });

    if (opts.ipv6)
      describe("dual-stack", () => {
        it("pod peers hold both addresses: the same table over IPv4 and IPv6", () => {
          const c = new Cluster({ dualStack: true });
          c.apply(
            policy("x", "from-b", podIs("a"), {
              ingress: [{ peers: [{ namespaceSelector: {}, podSelector: podIs("b") }] }],
            }),
          );
          const want = new Reachability(c.keys())
            .expectAllIngress("x/a", false)
            .expectPeer({ pod: "b" }, { ns: "x", pod: "a" }, true);
          check(c, want, "TCP", 80, 4);
          check(c, want, "TCP", 80, 6);
        });

        it("a named egress port resolves to every address of the destination pod", () => {
          const c = new Cluster({ dualStack: true });
          c.setPod({
            ...c.get("y/b"),
            namedPorts: SERVE_PORTS.map((p) =>
              p.name === "serve-80-tcp" ? { ...p, port: 8080 } : p,
            ),
          });
          c.apply(
            policy("x", "egress-named", podIs("a"), {
              policyTypes: ["Egress"],
              egress: [
                { peers: [{ namespaceSelector: nsIs("y") }], ports: [{ port: "serve-80-tcp" }] },
              ],
            }),
          );
          for (const family of [4, 6] as const) {
            const to80 = new Reachability(c.keys())
              .expectAllEgress("x/a", false)
              .expect("x/a", "y/a", true)
              .expect("x/a", "y/c", true);
            check(c, to80, "TCP", 80, family);
            const to8080 = new Reachability(c.keys())
              .expectAllEgress("x/a", false)
              .expect("x/a", "y/b", true);
            check(c, to8080, "TCP", 8080, family);
          }
        });

        it("an ipBlock is one family: an IPv4 block opens IPv4 only, an IPv6 block with except IPv6 only", () => {
          const c = new Cluster({ dualStack: true });
          c.apply(
            policy("x", "blocks", podIs("a"), {
              ingress: [
                {
                  peers: [
                    { ipBlock: { cidr: "10.0.2.0/24" } },
                    { ipBlock: { cidr: "fd00::3:0/112", except: ["fd00::3:2/127"] } },
                  ],
                },
              ],
            }),
          );
          check(
            c,
            new Reachability(c.keys())
              .expectAllIngress("x/a", false)
              .expectPeer({ ns: "y" }, { ns: "x", pod: "a" }, true),
            "TCP",
            80,
            4,
          );
          // fd00::3:2/127 is z/b (::3:2) and z/c (::3:3).
          check(
            c,
            new Reachability(c.keys()).expectAllIngress("x/a", false).expect("z/a", "x/a", true),
            "TCP",
            80,
            6,
          );
        });
      });
  });
}
