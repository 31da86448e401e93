/**
 * NetworkPolicy on the kernel datapath, end to end, in the shape of upstream's
 * test/e2e/network/netpol: namespaces x, y, z × pods a, b, c on two nodes
 * (network namespaces on one underlay, host-gw routes, dual stack), each node
 * running its own `cni-driver serve` against the fake API server with
 * `"networkPolicy": true`. Pods a and c are on node-1, b on node-2, so every
 * matrix has same-node and cross-node pairs. A case puts policies into the API
 * and probes the whole from → to matrix for one port and protocol until it
 * matches (policy lands on remote nodes asynchronously; bounded), or fails
 * printing upstream's truth tables.
 *
 * Objects are written as a real cluster has them, in its order: Namespaces
 * (labelled `ns` and `kubernetes.io/metadata.name`), then each Pod bound to
 * its node before its SetUpPod, then the pod's status (podIP, podIPs, phase
 * Running) as kubelet patches it once SetUpPod has answered: another node's
 * driver learns a pod's addresses only from status.podIPs.
 *
 * SCTP, which upstream also probes, is not: Node has no SCTP sockets.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect } from "chai";
import { POLICY_TABLE } from "../../src/driver/network-policy/ruleset.js";
import {
  bridgeSettings,
  type ClusterMember,
  ClusterUnderlay,
  inNs,
  printMemberLogs,
  tearDownCluster,
  withoutNodeBrNetfilter,
} from "../support/cluster-nodes.js";
import { DriverHarness, expectNoCniError, sleep } from "../support/driver-harness.js";
import {
  type FakeKubeApiServer,
  type KubeObject,
  startFakeKubeApiServer,
} from "../support/fake-kube-apiserver.js";
import { kubeProxyNftables } from "../support/kube-proxy.js";
import { createNetns, deleteNetns } from "../support/netns.js";
import {
  allPodStrings,
  HeldConnection,
  NAMESPACE_NAME_LABEL,
  NAMESPACES,
  type NetworkPolicy,
  namespaceLabels,
  namespaceObject,
  networkPolicy,
  PORTS,
  PodAgent,
  type PodString,
  PROTOCOLS,
  type Prober,
  type Protocol,
  podLabels,
  podObject,
  Reachability,
  splitPodString,
  validateOrFail,
} from "../support/netpol-model.js";
import { patient } from "../support/patience.js";
import { requireCommand, requireRoot } from "../support/requirements.js";
import { until } from "../support/until.js";

const CLUSTER_CIDR = "10.244.0.0/16";
const CLUSTER_CIDR_V6 = "fd00:10:244::/48";
/** The node (index into the members) each pod name lands on: a and c on node-1, b on node-2. */
const NODE_OF: Record<string, number> = { a: 0, b: 1, c: 0 };

interface PodAddresses {
  v4: string;
  v6: string;
}

const XA = "x/a";
const XB = "x/b";
const XC = "x/c";
const YA = "y/a";
const YB = "y/b";
const ZB = "z/b";

/** Resolves with `p`, or fails naming `what` after `ms` (patience-scaled). */
async function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      p,
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`timed out after ${patient(ms)} ms waiting for ${what}`)),
          patient(ms),
        );
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** The IPv4 address after `address` (host-local hands addresses out in order). */
function nextIPv4(address: string): string {
  const n = address.split(".").reduce((acc, o) => acc * 256 + Number(o), 0) + 1;
  return [24, 16, 8, 0].map((s) => Math.floor(n / 2 ** s) % 256).join(".");
}

describe("network policy: upstream's netpol truth tables (x, y, z × a, b, c on two nodes)", function () {
  this.timeout(120_000);
  let root: string | undefined;
  let ul: ClusterUnderlay | undefined;
  let server: FakeKubeApiServer | undefined;
  const members: ClusterMember[] = [];
  /** Each node's ConfigMap files as written at the start. */
  const configs = new Map<ClusterMember, Record<string, string>>();
  const nodeV6 = new Map<ClusterMember, string>();
  const agents = new Map<PodString, PodAgent>();
  const nodeAgents: PodAgent[] = [];
  const addresses = new Map<PodString, PodAddresses>();

  const api = (): FakeKubeApiServer => server as FakeKubeApiServer;
  const member = (pod: PodString): ClusterMember =>
    members[NODE_OF[splitPodString(pod).name] ?? 0] as ClusterMember;
  const agent = (pod: PodString): PodAgent => agents.get(pod) as PodAgent;
  const addr = (pod: PodString): PodAddresses => addresses.get(pod) as PodAddresses;
  const podId = (pod: PodString): string => pod.replace("/", "");
  const v6Cidr = (m: ClusterMember) => `fd00:10:244:${m.h.opts.subnetOctet}::/64`;

  function mustInNs(ns: string, cmd: string[]): void {
    const r = inNs(ns, cmd);
    if (r.status !== 0) throw new Error(`${cmd.join(" ")} in ${ns}: ${r.stderr}`);
  }

  // -- the API side ---------------------------------------------------------

  function putPolicy(p: NetworkPolicy): void {
    api().put("networkpolicies", { ...p });
  }

  function setPodLabels(pod: PodString, labels: Record<string, string>): void {
    const { namespace, name } = splitPodString(pod);
    const o = api().get("pods", namespace, name) as KubeObject;
    o.metadata = { ...o.metadata, labels };
    api().put("pods", o);
  }

  function setNamespaceLabels(ns: string, labels: Record<string, string>): void {
    const o = api().get("namespaces", undefined, ns) as KubeObject;
    o.metadata = { ...o.metadata, labels };
    api().put("namespaces", o);
  }

  /** What kubelet writes once the sandbox's network is up (its status patch). */
  function publishPodStatus(pod: PodString, m: ClusterMember, a: PodAddresses): void {
    const { namespace, name } = splitPodString(pod);
    const o = api().get("pods", namespace, name) as KubeObject;
    o.status = {
      phase: "Running",
      hostIP: m.node.address,
      hostIPs: [{ ip: m.node.address }, { ip: nodeV6.get(m) }],
      podIP: a.v4,
      podIPs: [{ ip: a.v4 }, { ip: a.v6 }],
      conditions: [{ type: "Ready", status: "True" }],
      startTime: new Date().toISOString().replace(/\.\d{3}Z$/, "Z"),
    };
    api().put("pods", o);
  }

  // -- pods -----------------------------------------------------------------

  /** The sandbox as a runtime makes it before CNI ADD: its netns (lo up), its servers, its Pod. */
  async function preparePod(pod: PodString, m: ClusterMember): Promise<string> {
    const { namespace, name } = splitPodString(pod);
    const netns = m.h.netnsName(podId(pod));
    createNetns(netns);
    mustInNs(netns, ["ip", "link", "set", "lo", "up"]);
    agents.set(pod, await PodAgent.start(netns, pod));
    const created = api().put("pods", podObject(namespace, name, m.node.name));
    return created.metadata?.uid ?? "";
  }

  /** SetUpPod, then the status kubelet publishes with the addresses of the result. */
  async function setUpPod(pod: PodString, m: ClusterMember, uid: string): Promise<PodAddresses> {
    const { namespace, name } = splitPodString(pod);
    const res = await m.h.client.setUpPod(
      m.h.podRequest(podId(pod), { pod: { namespace, name, uid } }),
    );
    expectNoCniError(res);
    const ips = (res.result?.ips ?? []).map((ip) => ip.address.split("/")[0] as string);
    const a = {
      v4: ips.find((i) => !i.includes(":")) ?? "",
      v6: ips.find((i) => i.includes(":")) ?? "",
    };
    expect(a.v4, `${pod}: an IPv4 address`).to.not.equal("");
    expect(a.v6, `${pod}: an IPv6 address`).to.not.equal("");
    addresses.set(pod, a);
    publishPodStatus(pod, m, a);
    return a;
  }

  /** A pod gone as kubelet removes it: its containers, TearDownPod, its object, its netns. */
  async function removePod(pod: PodString, m: ClusterMember): Promise<void> {
    const { namespace, name } = splitPodString(pod);
    await agents.get(pod)?.stop();
    agents.delete(pod);
    const res = await m.h.client.tearDownPod(
      m.h.podRequest(podId(pod), { pod: { namespace, name, uid: "" } }),
    );
    api().remove("pods", namespace, name);
    addresses.delete(pod);
    deleteNetns(m.h.netnsName(podId(pod)));
    expectNoCniError(res);
  }

  // -- probing --------------------------------------------------------------

  const prober =
    (family: 4 | 6): Prober =>
    (from, to, port, protocol) =>
      agent(from).probe({ host: family === 4 ? addr(to).v4 : addr(to).v6, port, protocol });

  async function validate(
    reachability: Reachability,
    port = 80,
    protocol: Protocol = "TCP",
    family: 4 | 6 = 4,
    withinMs?: number,
  ): Promise<void> {
    await validateOrFail(
      prober(family),
      { port, protocol, reachability, ...(family === 6 ? { label: "IPv6" } : {}) },
      withinMs,
    );
  }

  /** For a failure: each driver's last log lines and each node's policy table (and routes). */
  function printClusterState(withRoutes = false): void {
    printMemberLogs(members);
    for (const m of members) {
      const table = inNs(m.node.netns, ["nft", "list", "table", "inet", POLICY_TABLE]);
      console.error(
        `--- ${m.node.name} nft list table inet ${POLICY_TABLE}:\n${(table.stdout || table.stderr).slice(0, 12_000)}`,
      );
      if (!withRoutes) continue;
      for (const family of ["-4", "-6"])
        console.error(
          `--- ${m.node.name} ip ${family} route:\n${inNs(m.node.netns, ["ip", family, "route"]).stdout}`,
        );
    }
  }

  const denyIngress = (ns: string) =>
    networkPolicy(ns, "deny-ingress", { podSelector: {}, policyTypes: ["Ingress"] });

  // -- the cluster ----------------------------------------------------------

  before(async function () {
    requireRoot(this);
    requireCommand(this, "nft", "nftables");
    requireCommand(this, "bridge", "iproute2");
    root = mkdtempSync(join(tmpdir(), "cni-driver-netpol-"));
    ul = new ClusterUnderlay(root);
    server = await startFakeKubeApiServer();
    const kubeconfig = await ul.exposeApi(Number(new URL(server.url).port), server.kubeconfig());
    for (const [i, name] of ["node-1", "node-2"].entries()) {
      const node = ul.addNode(name, 41 + i);
      // Same-node traffic meets the policy through the bridge's own br_netfilter switch
      // (kube-proxy mode) or the driver's steering (services "driver"), never the node's.
      withoutNodeBrNetfilter(node.netns);
      const v6 = `2001:db8::${41 + i}`;
      mustInNs(node.netns, ["ip", "addr", "add", `${v6}/64`, "dev", "eth0", "nodad"]);
      // Routing pods' IPv6 traffic is the node's to allow (the driver leaves it to the operator).
      mustInNs(node.netns, ["sysctl", "-qw", "net.ipv6.conf.all.forwarding=1"]);
      const octet = 191 + i;
      const h = new DriverHarness({
        subnetOctet: octet,
        netns: node.netns,
        extraFlags: [
          // Both families (the harness gives the IPv4 one alone; the last --pod-cidr wins).
          "--pod-cidr",
          `10.244.${octet}.0/24,fd00:10:244:${octet}::/64`,
          "--kubeconfig",
          kubeconfig,
          "--node-name",
          name,
          "--node-link-resync",
          "1",
        ],
      });
      const m: ClusterMember = { node, h, pod: "" };
      members.push(m);
      nodeV6.set(m, v6);
    }
    for (const m of members) {
      const conflist = m.h.conflist() as { plugins: Array<{ ipam?: Record<string, unknown> }> };
      const ipam = conflist.plugins[0]?.ipam as Record<string, unknown>;
      ipam.ranges = [[{ subnet: "usePodCidr" }], [{ subnet: "usePodCidrIPv6" }]];
      configs.set(m, {
        "pod-network.conflist": JSON.stringify(conflist),
        "driver.json": JSON.stringify({
          // Both nodes share the underlay's subnets, IPv4 and IPv6: routes for both families.
          crossNode: "host-gw",
          clusterCidr: CLUSTER_CIDR,
          clusterCidrIPv6: CLUSTER_CIDR_V6,
          networkPolicy: true,
          networkPolicyUnknownPods: "deny",
        }),
      });
      await m.h.writeConfig(configs.get(m) as Record<string, string>);
      server.put("nodes", {
        metadata: { name: m.node.name },
        spec: { podCIDR: m.h.subnet, podCIDRs: [m.h.subnet, v6Cidr(m)] },
        status: {
          addresses: [
            { type: "InternalIP", address: m.node.address },
            { type: "InternalIP", address: nodeV6.get(m) },
            { type: "Hostname", address: m.node.name },
          ],
        },
      });
    }
    for (const ns of NAMESPACES) server.put("namespaces", namespaceObject(ns));
    for (const m of members) await m.h.start();
    for (const m of members)
      nodeAgents.push(await PodAgent.start(m.node.netns, m.node.name, { serve: false }));
    for (const pod of allPodStrings()) {
      const m = member(pod);
      await setUpPod(pod, m, await preparePod(pod, m));
    }
    // Routes between the nodes come with the Nodes' watch: wait for the whole matrix, once.
    try {
      await validate(new Reachability(), 80, "TCP", 4, patient(30_000));
      await validate(new Reachability(), 80, "TCP", 6, patient(30_000));
    } catch (e) {
      printClusterState(true);
      throw e;
    }
  });

  afterEach(async function () {
    if (this.currentTest?.state === "failed") printClusterState();
    if (!server) return;
    // Every case starts from no policy and the model's labels.
    for (const p of server.list("networkpolicies"))
      server.remove("networkpolicies", p.metadata?.namespace, p.metadata?.name ?? "");
    for (const pod of allPodStrings()) setPodLabels(pod, podLabels(splitPodString(pod).name));
    for (const ns of NAMESPACES) setNamespaceLabels(ns, namespaceLabels(ns));
    if (agents.size < allPodStrings().length) return;
    try {
      await validate(new Reachability());
    } catch (e) {
      console.warn(
        `    after "${this.currentTest?.title}": not back to all open:\n${(e as Error).message}`,
      );
      printClusterState();
    }
  });

  after(async () => {
    for (const a of [...agents.values(), ...nodeAgents]) await a.stop();
    await tearDownCluster(members, ul, server, root);
  });

  // -- the cases ------------------------------------------------------------

  it("with no policy every pod reaches every other: TCP and UDP, ports 80 and 81, IPv4 and IPv6", async () => {
    for (const protocol of PROTOCOLS)
      for (const port of PORTS) await validate(new Reachability(), port, protocol);
    for (const protocol of PROTOCOLS) await validate(new Reachability(), 80, protocol, 6);
  });

  it("a default-deny-ingress policy in x: nothing reaches x, x reaches everything else", async () => {
    putPolicy(denyIngress("x"));
    await validate(new Reachability().expectPeer({}, { namespace: "x" }, false));
  });

  it("a default-deny-egress policy in x: x reaches nothing, everything else reaches x", async () => {
    putPolicy(networkPolicy("x", "deny-egress", { podSelector: {}, policyTypes: ["Egress"] }));
    await validate(new Reachability().expectPeer({ namespace: "x" }, {}, false));
  });

  it("an allow-all ingress rule ({}) in x reopens both ports under a default deny", async () => {
    putPolicy(denyIngress("x"));
    await validate(new Reachability().expectPeer({}, { namespace: "x" }, false));
    putPolicy(networkPolicy("x", "allow-all", { podSelector: {}, ingress: [{}] }));
    for (const port of PORTS) await validate(new Reachability(), port);
  });

  it("deny all ingress in x, then allow from the same namespace only", async () => {
    putPolicy(denyIngress("x"));
    putPolicy(
      networkPolicy("x", "allow-same-namespace", {
        podSelector: {},
        ingress: [{ from: [{ podSelector: {} }] }],
      }),
    );
    await validate(
      new Reachability()
        .expectPeer({}, { namespace: "x" }, false)
        .expectPeer({ namespace: "x" }, { namespace: "x" }, true),
    );
  });

  it("x/a allows ingress from namespace y by label (namespaceSelector matchLabels ns: y)", async () => {
    putPolicy(
      networkPolicy("x", "allow-from-ns-y", {
        podSelector: { matchLabels: { pod: "a" } },
        ingress: [{ from: [{ namespaceSelector: { matchLabels: { ns: "y" } } }] }],
      }),
    );
    await validate(
      new Reachability()
        .expectAllIngress(XA, false)
        .expectPeer({ namespace: "y" }, { namespace: "x", pod: "a" }, true),
    );
  });

  it("podSelector matchExpressions In: x/a allows pod in (b) of its own namespace", async () => {
    putPolicy(
      networkPolicy("x", "x-a-allows-x-b", {
        podSelector: { matchLabels: { pod: "a" } },
        ingress: [
          {
            from: [
              {
                podSelector: { matchExpressions: [{ key: "pod", operator: "In", values: ["b"] }] },
              },
            ],
          },
        ],
      }),
    );
    await validate(new Reachability().expectAllIngress(XA, false).expect(XB, XA, true));
  });

  it("podSelector matchExpressions NotIn: x/a allows pod notin (b) of its own namespace", async () => {
    putPolicy(
      networkPolicy("x", "x-a-allows-not-b", {
        podSelector: { matchLabels: { pod: "a" } },
        ingress: [
          {
            from: [
              {
                podSelector: {
                  matchExpressions: [{ key: "pod", operator: "NotIn", values: ["b"] }],
                },
              },
            ],
          },
        ],
      }),
    );
    await validate(new Reachability().expectAllIngress(XA, false).expect(XC, XA, true));
  });

  it("namespaceSelector matchExpressions NotIn on kubernetes.io/metadata.name: x/a allows every namespace but its own", async () => {
    putPolicy(
      networkPolicy("x", "allow-other-namespaces", {
        podSelector: { matchLabels: { pod: "a" } },
        ingress: [
          {
            from: [
              {
                namespaceSelector: {
                  matchExpressions: [
                    { key: NAMESPACE_NAME_LABEL, operator: "NotIn", values: ["x"] },
                  ],
                },
              },
            ],
          },
        ],
      }),
    );
    await validate(
      new Reachability().expectPeer({ namespace: "x" }, { namespace: "x", pod: "a" }, false),
    );
  });

  it("podSelector matchExpressions Exists, then DoesNotExist, on a label only y/b carries", async () => {
    setPodLabels(YB, { ...podLabels("b"), role: "client" });
    const fromRole = (operator: "Exists" | "DoesNotExist") =>
      networkPolicy("x", "x-a-by-role", {
        podSelector: { matchLabels: { pod: "a" } },
        ingress: [
          {
            from: [
              {
                namespaceSelector: {},
                podSelector: { matchExpressions: [{ key: "role", operator }] },
              },
            ],
          },
        ],
      });
    putPolicy(fromRole("Exists"));
    await validate(new Reachability().expectAllIngress(XA, false).expect(YB, XA, true));
    putPolicy(fromRole("DoesNotExist"));
    await validate(new Reachability().expect(YB, XA, false));
  });

  it("podSelector AND namespaceSelector in one peer admits y/b alone; the two as separate peers (OR) admit y and x/b", async () => {
    putPolicy(
      networkPolicy("x", "x-a-peers", {
        podSelector: { matchLabels: { pod: "a" } },
        ingress: [
          {
            from: [
              {
                namespaceSelector: { matchLabels: { ns: "y" } },
                podSelector: { matchLabels: { pod: "b" } },
              },
            ],
          },
        ],
      }),
    );
    await validate(new Reachability().expectAllIngress(XA, false).expect(YB, XA, true));
    putPolicy(
      networkPolicy("x", "x-a-peers", {
        podSelector: { matchLabels: { pod: "a" } },
        ingress: [
          {
            from: [
              { namespaceSelector: { matchLabels: { ns: "y" } } },
              { podSelector: { matchLabels: { pod: "b" } } },
            ],
          },
        ],
      }),
    );
    await validate(
      new Reachability()
        .expectAllIngress(XA, false)
        .expectPeer({ namespace: "y" }, { namespace: "x", pod: "a" }, true)
        .expect(XB, XA, true),
    );
  });

  it("ipBlock ingress with except: x/a admits node-2's pod CIDR except y/b's /32", async () => {
    putPolicy(
      networkPolicy("x", "x-a-from-node-2", {
        podSelector: { matchLabels: { pod: "a" } },
        ingress: [
          {
            from: [
              {
                ipBlock: { cidr: members[1]?.h.subnet ?? "", except: [`${addr(YB).v4}/32`] },
              },
            ],
          },
        ],
      }),
    );
    await validate(
      new Reachability().expectAllIngress(XA, false).expect(XB, XA, true).expect(ZB, XA, true),
    );
  });

  it("ipBlock egress with except: x/a reaches node-1's pod CIDR except x/c's /32", async () => {
    putPolicy(
      networkPolicy("x", "x-a-to-node-1", {
        podSelector: { matchLabels: { pod: "a" } },
        policyTypes: ["Egress"],
        egress: [
          {
            to: [{ ipBlock: { cidr: members[0]?.h.subnet ?? "", except: [`${addr(XC).v4}/32`] } }],
          },
        ],
      }),
    );
    const r = new Reachability().expectAllEgress(XA, false);
    for (const pod of allPodStrings())
      if (NODE_OF[splitPodString(pod).name] === 0 && pod !== XC) r.expect(XA, pod, true);
    await validate(r);
  });

  it("a single port: ingress to x/a allowed on 80, not on 81", async () => {
    putPolicy(
      networkPolicy("x", "x-a-port-80", {
        podSelector: { matchLabels: { pod: "a" } },
        ingress: [{ from: [{ namespaceSelector: {} }], ports: [{ protocol: "TCP", port: 80 }] }],
      }),
    );
    await validate(new Reachability(), 80);
    await validate(new Reachability().expectAllIngress(XA, false), 81);
  });

  it("a named port for ingress: serve-80-tcp admits namespace y on TCP 80 only (not 81, not UDP 80)", async () => {
    putPolicy(
      networkPolicy("x", "x-a-named-80", {
        podSelector: { matchLabels: { pod: "a" } },
        ingress: [
          {
            from: [{ namespaceSelector: { matchLabels: { ns: "y" } } }],
            ports: [{ protocol: "TCP", port: "serve-80-tcp" }],
          },
        ],
      }),
    );
    await validate(
      new Reachability()
        .expectAllIngress(XA, false)
        .expectPeer({ namespace: "y" }, { namespace: "x", pod: "a" }, true),
      80,
    );
    await validate(new Reachability().expectAllIngress(XA, false), 81);
    await validate(new Reachability().expectAllIngress(XA, false), 80, "UDP");
  });

  it("a named port for egress: x may send to serve-80-tcp (the destination pod's port) and nothing else", async () => {
    putPolicy(
      networkPolicy("x", "x-egress-named-80", {
        podSelector: {},
        policyTypes: ["Egress"],
        egress: [{ ports: [{ protocol: "TCP", port: "serve-80-tcp" }] }],
      }),
    );
    await validate(new Reachability(), 80);
    await validate(new Reachability().expectPeer({ namespace: "x" }, {}, false), 81);
  });

  it("endPort: a range 80-81 admits both ports; 81-90 admits 81 alone", async () => {
    const range = (port: number, endPort: number) =>
      networkPolicy("x", "x-a-range", {
        podSelector: { matchLabels: { pod: "a" } },
        ingress: [{ ports: [{ protocol: "TCP", port, endPort }] }],
      });
    putPolicy(range(80, 81));
    for (const port of PORTS) await validate(new Reachability(), port);
    putPolicy(range(81, 90));
    await validate(new Reachability().expectAllIngress(XA, false), 80);
    await validate(new Reachability(), 81);
  });

  it("multiple policies add up: y on 81, then y on 80 too, then x/b on 80 as well", async () => {
    const fromY = (port: number) =>
      networkPolicy("x", `x-a-from-y-${port}`, {
        podSelector: { matchLabels: { pod: "a" } },
        ingress: [
          {
            from: [{ namespaceSelector: { matchLabels: { ns: "y" } } }],
            ports: [{ protocol: "TCP", port }],
          },
        ],
      });
    const yOnly = () =>
      new Reachability()
        .expectAllIngress(XA, false)
        .expectPeer({ namespace: "y" }, { namespace: "x", pod: "a" }, true);
    putPolicy(fromY(81));
    await validate(yOnly(), 81);
    await validate(new Reachability().expectAllIngress(XA, false), 80);
    putPolicy(fromY(80));
    await validate(yOnly(), 80);
    await validate(yOnly(), 81);
    putPolicy(
      networkPolicy("x", "x-a-from-x-b", {
        podSelector: { matchLabels: { pod: "a" } },
        ingress: [{ from: [{ podSelector: { matchLabels: { pod: "b" } } }] }],
      }),
    );
    await validate(yOnly().expect(XB, XA, true), 80);
  });

  it("seven single-port rules reach x/a through one port map (two share port 80): each admits only its peers on its port", async () => {
    const rule = (name: string, ns: string, protocol: "TCP" | "UDP", port: number) =>
      networkPolicy("x", name, {
        podSelector: { matchLabels: { pod: "a" } },
        ingress: [
          { from: [{ namespaceSelector: { matchLabels: { ns } } }], ports: [{ protocol, port }] },
        ],
      });
    putPolicy(rule("x-a-y-80", "y", "TCP", 80));
    putPolicy(rule("x-a-z-80", "z", "TCP", 80));
    putPolicy(rule("x-a-z-81", "z", "TCP", 81));
    putPolicy(rule("x-a-y-81-udp", "y", "UDP", 81));
    for (const port of [8080, 8081, 8082]) putPolicy(rule(`x-a-x-${port}`, "x", "TCP", port));
    const only = (...namespaces: string[]) => {
      const r = new Reachability().expectAllIngress(XA, false);
      for (const ns of namespaces)
        r.expectPeer({ namespace: ns }, { namespace: "x", pod: "a" }, true);
      return r;
    };
    await validate(only("y", "z"), 80);
    await validate(only("z"), 81);
    await validate(only("y"), 81, "UDP");
    await validate(only(), 80, "UDP");
    // What made it so: x/a's ingress chain looks the port up in a map, and port 80 fans out.
    const node = member(XA).node.netns;
    const table = inNs(node, ["nft", "list", "table", "inet", POLICY_TABLE]).stdout;
    expect(table).to.match(/meta l4proto \. th dport vmap \{[^}]*tcp \. 80 : jump q_\w+/);
  });

  it("a policy updated in the API changes the matrix; deleted, everything is open again", async () => {
    const fromNs = (ns: string) =>
      networkPolicy("x", "x-a-from-ns", {
        podSelector: { matchLabels: { pod: "a" } },
        ingress: [{ from: [{ namespaceSelector: { matchLabels: { ns } } }] }],
      });
    putPolicy(fromNs("y"));
    await validate(
      new Reachability()
        .expectAllIngress(XA, false)
        .expectPeer({ namespace: "y" }, { namespace: "x", pod: "a" }, true),
    );
    putPolicy(fromNs("z"));
    await validate(
      new Reachability()
        .expectAllIngress(XA, false)
        .expectPeer({ namespace: "z" }, { namespace: "x", pod: "a" }, true),
    );
    api().remove("networkpolicies", "x", "x-a-from-ns");
    await validate(new Reachability());
  });

  it("a pod's labels changed: it enters and leaves a policy's podSelector, and a peer's", async () => {
    putPolicy(
      networkPolicy("x", "deny-isolated", {
        podSelector: { matchLabels: { target: "isolated" } },
        policyTypes: ["Ingress"],
      }),
    );
    await validate(new Reachability());
    setPodLabels(XA, { ...podLabels("a"), target: "isolated" });
    await validate(new Reachability().expectAllIngress(XA, false));
    setPodLabels(XA, podLabels("a"));
    await validate(new Reachability());
    putPolicy(
      networkPolicy("x", "x-b-from-updated", {
        podSelector: { matchLabels: { pod: "b" } },
        ingress: [{ from: [{ podSelector: { matchLabels: { pod2: "updated" } } }] }],
      }),
    );
    await validate(new Reachability().expectAllIngress(XB, false));
    setPodLabels(XC, { ...podLabels("c"), pod2: "updated" });
    await validate(new Reachability().expectAllIngress(XB, false).expect(XC, XB, true));
  });

  it("a namespace's labels changed: namespace y enters, then leaves, a namespaceSelector", async () => {
    putPolicy(
      networkPolicy("x", "x-a-from-updated-ns", {
        podSelector: { matchLabels: { pod: "a" } },
        ingress: [{ from: [{ namespaceSelector: { matchLabels: { ns2: "updated" } } }] }],
      }),
    );
    await validate(new Reachability().expectAllIngress(XA, false));
    setNamespaceLabels("y", { ...namespaceLabels("y"), ns2: "updated" });
    await validate(
      new Reachability()
        .expectAllIngress(XA, false)
        .expectPeer({ namespace: "y" }, { namespace: "x", pod: "a" }, true),
    );
    setNamespaceLabels("y", namespaceLabels("y"));
    await validate(new Reachability().expectAllIngress(XA, false));
  });

  it("UDP: a port without protocol (TCP by default) leaves UDP 80 denied; one for UDP 80 admits it and not TCP", async () => {
    // As stored, after the API server's defaulting: protocol TCP.
    putPolicy(
      networkPolicy("x", "x-a-port-80", {
        podSelector: { matchLabels: { pod: "a" } },
        ingress: [{ ports: [{ port: 80 }] }],
      }),
    );
    await validate(new Reachability(), 80, "TCP");
    await validate(new Reachability().expectAllIngress(XA, false), 80, "UDP");
    putPolicy(
      networkPolicy("x", "x-a-port-80", {
        podSelector: { matchLabels: { pod: "a" } },
        ingress: [{ ports: [{ protocol: "UDP", port: 80 }] }],
      }),
    );
    await validate(new Reachability(), 80, "UDP");
    await validate(new Reachability().expectAllIngress(XA, false), 81, "UDP");
    await validate(new Reachability().expectAllIngress(XA, false), 80, "TCP");
  });

  it("IPv6: selectors apply to the pods' IPv6 addresses; an IPv6 ipBlock with except", async () => {
    putPolicy(denyIngress("x"));
    putPolicy(
      networkPolicy("x", "x-a-from-ns-y", {
        podSelector: { matchLabels: { pod: "a" } },
        ingress: [{ from: [{ namespaceSelector: { matchLabels: { ns: "y" } } }] }],
      }),
    );
    await validate(
      new Reachability()
        .expectPeer({}, { namespace: "x" }, false)
        .expectPeer({ namespace: "y" }, { namespace: "x", pod: "a" }, true),
      80,
      "TCP",
      6,
    );
    api().remove("networkpolicies", "x", "deny-ingress");
    putPolicy(
      networkPolicy("x", "x-a-from-ns-y", {
        podSelector: { matchLabels: { pod: "a" } },
        ingress: [
          {
            from: [
              {
                ipBlock: {
                  cidr: v6Cidr(members[1] as ClusterMember),
                  except: [`${addr(YB).v6}/128`],
                },
              },
            ],
          },
        ],
      }),
    );
    const fromNode2 = () =>
      new Reachability().expectAllIngress(XA, false).expect(XB, XA, true).expect(ZB, XA, true);
    await validate(fromNode2(), 80, "TCP", 6);
    // An IPv6 block admits no IPv4 source.
    await validate(new Reachability().expectAllIngress(XA, false), 80, "TCP", 4);
  });

  it("a new pod in a namespace under default deny ingress is unreachable from the moment SetUpPod returns", async () => {
    putPolicy(denyIngress("x"));
    await validate(new Reachability().expectPeer({}, { namespace: "x" }, false));
    const pod = "x/d";
    const m = members[0] as ClusterMember;
    // host-local hands addresses out in order after the last one it reserved.
    const last = readFileSync(join(m.h.dataDir, m.h.network, "last_reserved_ip.0"), "utf8").trim();
    const predicted = nextIPv4(last);
    // Who resolves the new address (the same-node prober, and the node for the
    // other one) asks again only every retrans_time (1 s): an ARP request sent
    // before the address existed would hide the pod for up to a second after
    // SetUpPod. Asked every 50 ms, the probes see the pod within ~50 ms.
    const arp = [
      { ns: member(YA).h.netnsName(podId(YA)), dev: "eth0" },
      { ns: m.node.netns, dev: m.h.bridge },
    ].map((a) => ({ ...a, key: `net.ipv4.neigh.${a.dev}.retrans_time_ms` }));
    const saved = arp.map((a) => inNs(a.ns, ["sysctl", "-n", a.key]).stdout.trim());
    for (const a of arp) mustInNs(a.ns, ["sysctl", "-qw", `${a.key}=50`]);
    try {
      const uid = await preparePod(pod, m);
      // From a pod on the same node and one on the other, several loops each, staggered.
      interface Seen {
        from: string;
        start: number;
        ok: boolean;
        err?: string;
      }
      const seen: Seen[] = [];
      let stop = false;
      const loops = [agent(YA), agent(YB)].flatMap((a) =>
        [0, 1, 2, 3].map(async (k) => {
          await sleep(k * 50);
          while (!stop) {
            const start = Date.now();
            const r = await a.probe({ host: predicted, port: 80, protocol: "TCP" }, 200);
            seen.push({ from: a.name, start, ok: r.ok, ...(r.err ? { err: r.err } : {}) });
            if (!r.ok && Date.now() - start < 50) await sleep(20);
          }
        }),
      );
      let returnedAt = 0;
      try {
        await sleep(300);
        const a = await setUpPod(pod, m, uid);
        returnedAt = Date.now();
        expect(a.v4, "the address host-local handed out").to.equal(predicted);
        await sleep(patient(2000));
      } finally {
        stop = true;
        await Promise.all(loops);
      }
      const after = seen.filter((s) => s.start >= returnedAt);
      const during = seen.filter((s) => s.start < returnedAt && s.ok);
      if (during.length > 0)
        console.warn(
          `    (${during.length} probes started during SetUpPod got through: no container listens then in a real pod)`,
        );
      expect(after.length, "probes after SetUpPod returned").to.be.greaterThan(20);
      const through = after.filter((s) => s.ok).map((s) => `${s.from} +${s.start - returnedAt} ms`);
      expect(
        through.length,
        `probes to the new pod ${predicted} started after SetUpPod returned that got through (of ${after.length}), the first: ${through.slice(0, 8).join(", ")}`,
      ).to.equal(0);
      // The pod was listening all along: without the deny, the same probe gets through.
      api().remove("networkpolicies", "x", "deny-ingress");
      await until(
        async () => (await agent(YA).probe({ host: predicted, port: 80, protocol: "TCP" })).ok,
        "x/d reachable once the deny is gone",
        5000,
      );
    } finally {
      await removePod(pod, m);
      for (const [i, a] of arp.entries()) inNs(a.ns, ["sysctl", "-qw", `${a.key}=${saved[i]}`]);
    }
  });

  it("a held TCP connection into x/a (same node and cross-node) stops once a policy denies it, and stays stopped", async () => {
    const held = [YA, YB].map((from) => ({
      from,
      c: new HeldConnection(member(from).h.netnsName(podId(from)), addr(XA).v4, 80),
    }));
    try {
      for (const { from, c } of held)
        expect(await within(c.greeted, 5000, `${from}'s connection to x/a`)).to.equal(XA);
      await until(() => held.every(({ c }) => c.echoes.length >= 5), "echoes on both", 5000);
      const t0 = Date.now();
      putPolicy(
        networkPolicy("x", "deny-to-a", {
          podSelector: { matchLabels: { pod: "a" } },
          policyTypes: ["Ingress"],
        }),
      );
      // The outcome, not its speed (a loaded machine stretches it): the exchange stops
      // (a quiet second), then no echo comes for two more. How fast is printed.
      const lastEcho = (c: HeldConnection) => c.echoes.at(-1) ?? t0;
      await until(
        () => held.every(({ c }) => Date.now() - Math.max(lastEcho(c), t0) > 1000),
        "the held connections to stop",
        15_000,
      );
      const stoppedAt = held.map(({ c }) => lastEcho(c));
      await sleep(2000);
      for (const [i, { from, c }] of held.entries()) {
        expect(
          lastEcho(c),
          `${from} → x/a: echoes resumed after it stopped; the connection ${c.ended ?? "is still open"}`,
        ).to.equal(stoppedAt[i]);
        console.log(
          `    ${from} → x/a: last echo ${Math.max(0, lastEcho(c) - t0)} ms after the policy`,
        );
      }
    } finally {
      for (const { c } of held) await c.stop();
    }
  });

  it("each node reaches its own pods under default deny ingress (kubelet's probes), over both families", async () => {
    putPolicy(denyIngress("x"));
    await validate(new Reachability().expectPeer({}, { namespace: "x" }, false));
    for (const pod of [XA, XB, XC]) {
      const nodeAgent = nodeAgents[NODE_OF[splitPodString(pod).name] ?? 0] as PodAgent;
      for (const host of [addr(pod).v4, addr(pod).v6]) {
        const r = await nodeAgent.probe({ host, port: 80, protocol: "TCP" });
        expect(r, `${nodeAgent.name} → ${pod} at ${host}`).to.deep.include({
          ok: true,
          reply: pod,
        });
      }
    }
  });

  for (const dnat of [
    "kube-proxy's DNAT rules",
    `the driver's own DNAT ("services": "driver")`,
  ] as const)
    it(`egress to a Service's ClusterIP through ${dnat} is judged by the endpoint it reaches`, async () => {
      const byDriver = dnat.includes("driver");
      const client = member(YA).node.netns;
      const clusterIp = "10.96.100.10";
      const endpoint = addr(XB).v4;
      api().put("services", {
        metadata: { name: "s-x-b", namespace: "x" },
        spec: {
          type: "ClusterIP",
          clusterIP: clusterIp,
          clusterIPs: [clusterIp],
          selector: { pod: "b" },
          ports: [{ name: "service-port-tcp-80", protocol: "TCP", port: 80, targetPort: 80 }],
        },
      });
      api().put("endpointslices", {
        metadata: {
          name: "s-x-b-1",
          namespace: "x",
          labels: { "kubernetes.io/service-name": "s-x-b" },
        },
        addressType: "IPv4",
        endpoints: [
          {
            addresses: [endpoint],
            conditions: { ready: true, serving: true, terminating: false },
            nodeName: member(XB).node.name,
            targetRef: { kind: "Pod", namespace: "x", name: "b" },
          },
        ],
        ports: [{ name: "service-port-tcp-80", protocol: "TCP", port: 80 }],
      });
      if (byDriver) {
        for (const [m, files] of configs) {
          const settings = JSON.parse(files["driver.json"] as string);
          await m.h.writeConfig({
            ...files,
            "driver.json": JSON.stringify({ ...settings, services: "driver" }),
          });
        }
        await until(
          () =>
            inNs(client, ["nft", "list", "ruleset"]).stdout.includes(`dnat ip to ${endpoint}:80`),
          "the driver's Service rules on the client's node",
          patient(30_000),
        );
        // From here same-node pod traffic is routed by the host: no br_netfilter on the bridges.
        for (const [m] of configs)
          await until(
            () => bridgeSettings(m.node.netns, m.h.bridge).netfilter === "0",
            `${m.node.name}'s bridge without br_netfilter`,
            patient(30_000),
          );
      } else {
        // kube-proxy's rules on the client's node (where its traffic is DNATed).
        const nft = spawnSync("ip", ["netns", "exec", client, "nft", "-f", "-"], {
          input: kubeProxyNftables([
            { name: "x-b", clusterIp, port: 80, endpoint, targetPort: 80 },
          ]),
          encoding: "utf8",
        });
        expect(nft.status, nft.stderr).to.equal(0);
      }
      const viaService = () => agent(YA).probe({ host: clusterIp, port: 80, protocol: "TCP" });
      try {
        expect(await viaService(), "no policy").to.deep.include({ ok: true, reply: XB });
        const egressTo = (pod: string) =>
          networkPolicy("y", "y-a-egress", {
            podSelector: { matchLabels: { pod: "a" } },
            policyTypes: ["Egress"],
            egress: [
              {
                to: [
                  {
                    namespaceSelector: { matchLabels: { ns: "x" } },
                    podSelector: { matchLabels: { pod } },
                  },
                ],
                ports: [{ protocol: "TCP", port: 80 }],
              },
            ],
          });
        putPolicy(egressTo("b"));
        await validate(new Reachability().expectAllEgress(YA, false).expect(YA, XB, true));
        expect(await viaService(), "egress allowed to x/b").to.deep.include({
          ok: true,
          reply: XB,
        });
        putPolicy(egressTo("c"));
        await validate(new Reachability().expectAllEgress(YA, false).expect(YA, XC, true));
        for (let i = 0; i < 3; i++)
          expect((await viaService()).ok, "egress allowed only to x/c").to.equal(false);
      } finally {
        if (byDriver) for (const [m, files] of configs) await m.h.writeConfig(files);
        else inNs(client, ["nft", "delete", "table", "ip", "kube-proxy"]);
        api().remove("endpointslices", "x", "s-x-b-1");
        api().remove("services", "x", "s-x-b");
      }
    });
});
