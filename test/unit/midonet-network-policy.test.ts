/**
 * NetworkPolicy on MidoNet: the truth tables the policy model and the kernel
 * datapath answer (test/support/netpol-truth-tables.ts), answered instead by
 * the chains src/midonet/mapping/network-policy.ts maps the cluster to,
 * evaluated as MidoNet's agent evaluates them (test/support/midonet-chain-evaluator.ts):
 * a connection counts when its first packet crosses the source port's inbound
 * filter and the destination port's outbound filter, and its reply crosses
 * them back. IPv4 only: MidoNet's rule conditions take no IPv6 address, so the
 * dual-stack cases are left out (docs/midonet.md says what an isolated pod's
 * IPv6 traffic meets).
 */
import { expect } from "chai";
import { resolveConfig } from "../../src/midonet/mapping/config.js";
import { DesiredState } from "../../src/midonet/mapping/desired-state.js";
import { PolicyMapper } from "../../src/midonet/mapping/policy-mapper.js";
import { PROTOCOL_NUMBERS } from "../../src/midonet/mapping/service.js";
import type { Rule } from "../../src/midonet/resources.js";
import { PolicyModel } from "../../src/policy/model.js";
import type { PolicyPod } from "../../src/policy/types.js";
import { type ChainSource, MidonetFilterPath } from "../support/midonet-chain-evaluator.js";
import {
  type Cluster,
  describePolicyTruthTables,
  ipOf,
  type Oracle,
} from "../support/netpol-truth-tables.js";

const CONFIG = resolveConfig({ tenant: "netpol-test" });
const EPHEMERAL = 40_000;

/** A model's pods mapped to chains, as the reconciler would order them in MidoNet. */
function mapped(model: PolicyModel, pods: Iterable<PolicyPod>) {
  const state = new DesiredState();
  const mapper = new PolicyMapper(state, CONFIG, model);
  mapper.mapPods(pods);
  const chains: ChainSource = {
    rules: (chainId) => state.chainRules(chainId).map((key) => state.get(key)?.body as Rule),
  };
  const filters = (pod: PolicyPod) => mapper.filtersOf(pod.namespace, pod.name);
  return { state, mapper, chains, filters };
}

const midonetOracle: Oracle = (c: Cluster) => {
  const { chains, filters } = mapped(c.model, c.pods.values());
  return (from, to, protocol, port, family) => {
    const src = c.get(from);
    const dst = c.get(to);
    // A fresh tracker per probe: one probe's flow must not open another's reply.
    const path = new MidonetFilterPath(chains);
    const r = path.connect(
      {
        dlType: 0x0800,
        src: ipOf(src, family),
        dst: ipOf(dst, family),
        nwProto: PROTOCOL_NUMBERS[protocol],
        tpSrc: EPHEMERAL,
        tpDst: port,
      },
      filters(src),
      filters(dst),
    );
    return r.forward && r.reply;
  };
};

describePolicyTruthTables(
  "MidoNet chains: truth tables after kubernetes' netpol e2e",
  midonetOracle,
  {
    ipv6: false,
  },
);

describe("MidoNet chains: how NetworkPolicy is mapped", () => {
  const pod = (namespace: string, name: string, ip: string, labels = { app: name }): PolicyPod => ({
    namespace,
    name,
    labels,
    ips: [ip],
    namedPorts: [{ name: "http", protocol: "TCP", port: 8080 }],
    hostNetwork: false,
  });
  const server = pod("x", "server", "10.0.1.1");
  const client = pod("x", "client", "10.0.1.2");
  const other = pod("x", "other", "10.0.1.9");

  function modelWith(...pods: PolicyPod[]): PolicyModel {
    const model = new PolicyModel();
    model.upsertNamespace({ name: "x", labels: { "kubernetes.io/metadata.name": "x" } });
    for (const p of pods) model.upsertPod(p);
    model.upsertPolicy({
      namespace: "x",
      name: "clients-to-server",
      podSelector: { matchLabels: { app: "server" } },
      ingress: [
        {
          peers: [{ podSelector: { matchLabels: { role: "client" } } }],
          ports: [{ port: "http" }],
        },
      ],
    });
    return model;
  }

  const chainNames = (state: DesiredState) =>
    state
      .resources()
      .filter((r) => r.kind === "Chain")
      .map((r) => (r.body as { name: string }).name)
      .sort();

  it("a pod no policy isolates has no filters; pods with the same rules share one filter", () => {
    const twin = pod("x", "server-2", "10.0.1.5", { app: "server" });
    const model = modelWith(server, client, twin);
    const { filters } = mapped(model, [server, client, twin]);
    expect(filters(client)).to.deep.equal({});
    const f = filters(server);
    expect(f.inboundFilterId).to.be.a("string");
    expect(f.outboundFilterId).to.be.a("string").and.not.equal(f.inboundFilterId);
    expect(filters(twin)).to.deep.equal(f);
  });

  it("rules with the same peers share one peer chain; the egress side is the shared return-flows filter", () => {
    const model = modelWith(server, client);
    model.upsertPolicy({
      namespace: "x",
      name: "clients-to-server-again",
      podSelector: { matchLabels: { app: "server" } },
      ingress: [
        { peers: [{ podSelector: { matchLabels: { role: "client" } } }], ports: [{ port: 81 }] },
      ],
    });
    const { state } = mapped(model, [server, client]);
    const names = chainNames(state);
    expect(names.filter((n) => n.startsWith("KUBE-NP-PEERS-"))).to.have.length(1);
    expect(names.filter((n) => n === "KUBE-NP-RETURN-FLOWS")).to.have.length(1);
    expect(names.filter((n) => n.startsWith("KUBE-NP-INGRESS-"))).to.have.length(1);
    expect(names).to.have.length(3);
  });

  it("lets ARP through an isolated pod's filters both ways", () => {
    const pods = [server, client];
    const { chains, filters } = mapped(modelWith(...pods), pods);
    const path = new MidonetFilterPath(chains);
    const arp = { dlType: 0x0806 };
    const [s, c] = [filters(server), filters(client)];
    expect(path.send(arp, c, s), "client → server").to.equal(true);
    expect(path.send(arp, s, c), "server → client").to.equal(true);
    // While IPv4 from the same pod is refused: not a peer.
    expect(
      path.send(
        {
          dlType: 0x0800,
          src: "10.0.1.2",
          dst: "10.0.1.1",
          nwProto: 6,
          tpSrc: EPHEMERAL,
          tpDst: 8080,
        },
        c,
        s,
      ),
    ).to.equal(false);
  });

  it("a reply gets back only for a connection that was let through", () => {
    const pods = [server, { ...client, labels: { role: "client" } }, other];
    const { chains, filters: f } = mapped(modelWith(...pods), pods);
    const path = new MidonetFilterPath(chains);
    // A packet posing as the server's reply, with no connection behind it, meets the drop.
    const forged = {
      dlType: 0x0800,
      src: "10.0.1.9",
      dst: "10.0.1.1",
      nwProto: 6,
      tpSrc: 8080,
      tpDst: EPHEMERAL,
    };
    expect(path.send(forged, f(other), f(server))).to.equal(false);
    expect(
      path.connect(
        { ...forged, src: "10.0.1.2", tpSrc: EPHEMERAL, tpDst: 8080 },
        f(pods[1] as PolicyPod),
        f(server),
      ),
    ).to.deep.equal({ forward: true, reply: true });
  });

  it("warns that an IPv6 ipBlock is not enforced, and maps its IPv4 part", () => {
    const model = modelWith(server, client);
    model.upsertPolicy({
      namespace: "x",
      name: "blocks",
      podSelector: { matchLabels: { app: "server" } },
      ingress: [
        {
          peers: [
            { ipBlock: { cidr: "192.0.2.0/24", except: ["192.0.2.128/25"] } },
            { ipBlock: { cidr: "2001:db8::/64" } },
          ],
        },
      ],
    });
    const { state } = mapped(model, [server, client]);
    const warned = state.warnings().filter((w) => w.code === "ipv6-not-mappable");
    expect(warned.map((w) => w.message)).to.have.length(1);
    const owner = warned[0]?.owner as string;
    const peers = state
      .resources()
      .filter((r) => r.owner === owner && r.kind === "Rule")
      .map((r) => `${(r.body as Rule).nwSrcAddress}/${(r.body as Rule).nwSrcLength}`);
    expect(peers).to.deep.equal(["192.0.2.0/25"]);
  });
});
