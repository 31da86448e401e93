/**
 * Every body the controller sends carries only fields its resource accepts.
 * MidoNet ignores an unknown field (and so does the simulator, to be true to
 * it), so a typo such as nwDstAdress would silently drop a match condition:
 * this test, not an API answer, is what catches it. The schema is the one
 * the simulator reads bodies with (test/support/midonet-simulator/accepted-fields.ts).
 */
import { expect } from "chai";
import { ClusterMapper } from "../../src/midonet/mapping/cluster.js";
import type { DesiredResource } from "../../src/midonet/mapping/model.js";
import { mergedPutBody } from "../../src/midonet/owned-fields.js";
import { nodes, pod, service, slice, TENANT } from "../support/midonet-cluster.js";
import { ACCEPTED_FIELDS, ruleFields } from "../support/midonet-simulator/accepted-fields.js";

/** The fields `r`'s body may carry, and the schema's name. */
function schemaOf(r: { kind: string; body: object }): { name: string; fields: readonly string[] } {
  const type = (r.body as { type?: string }).type ?? "";
  if (r.kind === "Port")
    return { name: `${type}Port`, fields: ACCEPTED_FIELDS[`${type}Port` as "BridgePort"] };
  if (r.kind === "Rule") return { name: `Rule(${type})`, fields: ruleFields(type) };
  return { name: r.kind, fields: ACCEPTED_FIELDS[r.kind as keyof typeof ACCEPTED_FIELDS] ?? [] };
}

/** Each field of `body` (and of its port ranges and NAT targets) the schema lacks. */
function unknownFields(r: { kind: string; body: object }): string[] {
  const { name, fields } = schemaOf(r);
  const out: string[] = [];
  const check = (obj: object, allowed: readonly string[], where: string) => {
    for (const key of Object.keys(obj)) if (!allowed.includes(key)) out.push(`${where}.${key}`);
  };
  check(r.body, fields, name);
  const body = r.body as Record<string, unknown>;
  for (const key of ["tpSrc", "tpDst"]) {
    if (body[key]) check(body[key] as object, ACCEPTED_FIELDS.PortRange, `${name}.${key}`);
  }
  for (const t of (body.natTargets as object[] | undefined) ?? []) {
    check(t, ACCEPTED_FIELDS.NatTarget, `${name}.natTargets`);
  }
  return out;
}

function mappedCluster(): DesiredResource[] {
  const mapper = new ClusterMapper({ tenant: TENANT });
  for (const n of nodes()) mapper.upsertNode(n);
  for (const i of [0, 1, 2, 3]) mapper.upsertPod(pod(i));
  mapper.upsertService(service());
  mapper.upsertEndpointSlice(slice([0, 1, 2]));
  mapper.upsertNamespace({ metadata: { name: "default", labels: { team: "a" } } });
  mapper.upsertNetworkPolicy({
    metadata: { namespace: "default", name: "web" },
    spec: {
      podSelector: { matchLabels: { app: "web" } },
      policyTypes: ["Ingress", "Egress"],
      ingress: [{ from: [{ podSelector: {} }], ports: [{ protocol: "TCP", port: 8080 }] }],
      egress: [{ to: [{ ipBlock: { cidr: "10.0.0.0/8", except: ["10.9.0.0/16"] } }] }],
    },
  });
  return [...mapper.state.resources()];
}

describe("midonet: the fields the client sends, against what each resource accepts", () => {
  it("every resource of a mapped cluster (nodes, pods, a service, a NetworkPolicy) sends only accepted fields", () => {
    const resources = mappedCluster();
    const kinds = new Set(resources.map((r) => schemaOf(r).name));
    // The mapping exercises every kind it can send, rules of each type it uses among them.
    for (const k of ["Router", "Bridge", "BridgePort", "RouterPort", "Route", "Chain"]) {
      expect(kinds, k).to.include(k);
    }
    for (const k of ["Rule(jump)", "Rule(dnat)", "Rule(snat)", "Rule(accept)", "Rule(drop)"]) {
      expect(kinds, k).to.include(k);
    }
    expect(resources.flatMap(unknownFields)).to.deep.equal([]);
  });

  it("a PUT's body (an object as read, with the owned fields set) sends only accepted fields", () => {
    const router = {
      kind: "Router" as const,
      body: { id: "21607839-c6b4-5b98-8aa1-89a1aab61bca", name: "ClusterRouter", tenantId: TENANT },
    };
    const read = {
      ...router.body,
      uri: "http://midonet/routers/x",
      adminStateUp: false,
      loadBalancerId: null,
      inboundMirrorIds: ["0b7c3a4e-5555-4a5a-8a5a-000000000005"],
    };
    expect(unknownFields({ kind: "Router", body: mergedPutBody(router, read) })).to.deep.equal([]);
  });

  it("catches a typo", () => {
    expect(
      unknownFields({ kind: "Rule", body: { type: "accept", nwDstAdress: "10.0.0.1" } }),
    ).to.deep.equal(["Rule(accept).nwDstAdress"]);
  });
});
