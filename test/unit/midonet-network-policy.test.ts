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
import {
  mapClusterPolicy,
  mapPodPolicy,
  podPortFilters,
} from "../../src/midonet/mapping/network-policy.js";
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

/** The cluster's mapped chains, as the reconciler would order them in MidoNet. */
function chainsOf(model: PolicyModel, pods: Iterable<PolicyPod>): ChainSource {
  const state = new DesiredState();
  state.load(mapClusterPolicy(model, pods, CONFIG));
  return {
    rules: (chainId) => state.chainRules(chainId).map((key) => state.get(key)?.body as Rule),
  };
}

const midonetOracle: Oracle = (c: Cluster) => {
  const chains = chainsOf(c.model, c.pods.values());
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
      podPortFilters(c.model, src, CONFIG),
      podPortFilters(c.model, dst, CONFIG),
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

  /** The changes bringing `state` to the cluster's current mapping, applied. */
  function remap(state: DesiredState, model: PolicyModel, pods: PolicyPod[]) {
    const changes = { create: 0, update: 0, delete: 0, owners: new Set<string>() };
    const mappings = mapClusterPolicy(model, pods, CONFIG);
    const owners = new Set(mappings.map((m) => m.owner));
    const gone = state
      .resources()
      .filter((r) => !owners.has(r.owner))
      .map((r) => r.owner);
    for (const m of [
      ...mappings.map((m) => state.apply(m)),
      ...[...new Set(gone)].map((o) => state.remove(o)),
    ])
      for (const kind of ["create", "update", "delete"] as const) {
        changes[kind] += m[kind].length;
        for (const r of kind === "update" ? m.update.map((u) => u.after) : m[kind])
          changes.owners.add(r.owner);
      }
    return changes;
  }

  it("a pod no policy isolates has no filters and maps to nothing", () => {
    const model = modelWith(server, client);
    expect(podPortFilters(model, client, CONFIG)).to.deep.equal({});
    expect(mapPodPolicy(model, client, CONFIG).resources).to.deep.equal([]);
    const filters = podPortFilters(model, server, CONFIG);
    expect(filters.inboundFilterId).to.be.a("string");
    expect(filters.outboundFilterId).to.be.a("string").and.not.equal(filters.inboundFilterId);
  });

  it("maps the same cluster to the same resources: a second mapping writes nothing", () => {
    const pods = [server, { ...client, labels: { role: "client" } }, other];
    const model = modelWith(...pods);
    const state = new DesiredState();
    const first = remap(state, model, pods);
    expect(first.create).to.be.greaterThan(0);
    const again = remap(state, model, pods);
    expect([again.create, again.update, again.delete]).to.deep.equal([0, 0, 0]);
  });

  it("a new peer rewrites only the rule's peer chain, by one rule; the pods' filters stay", () => {
    const before = [server, { ...client, labels: { role: "client" } }, other];
    const model = modelWith(...before);
    const state = new DesiredState();
    remap(state, model, before);
    const after = [server, before[1] as PolicyPod, { ...other, labels: { role: "client" } }];
    model.upsertPod(after[2] as PolicyPod);
    const changes = remap(state, model, after);
    expect([changes.create, changes.update, changes.delete]).to.deep.equal([1, 0, 0]);
    expect([...changes.owners]).to.deep.equal(["NetworkPolicyRule/x/clients-to-server/ingress/0"]);
  });

  it("lets ARP through an isolated pod's filters both ways", () => {
    const pods = [server, client];
    const model = modelWith(...pods);
    const path = new MidonetFilterPath(chainsOf(model, pods));
    const arp = { dlType: 0x0806 };
    const [s, c] = [podPortFilters(model, server, CONFIG), podPortFilters(model, client, CONFIG)];
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
    const model = modelWith(...pods);
    const path = new MidonetFilterPath(chainsOf(model, pods));
    const f = (p: PolicyPod) => podPortFilters(model, p, CONFIG);
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
    const mappings = mapClusterPolicy(model, [server, client], CONFIG);
    const rule = mappings.find((m) => m.owner === "NetworkPolicyRule/x/blocks/ingress/0");
    expect(rule?.warnings.map((w) => w.code)).to.deep.equal(["ipv6-not-mappable"]);
    const peers = rule?.resources
      .filter((r) => r.kind === "Rule")
      .map((r) => `${(r.body as Rule).nwSrcAddress}/${(r.body as Rule).nwSrcLength}`);
    expect(peers).to.deep.equal(["192.0.2.0/25"]);
  });
});
