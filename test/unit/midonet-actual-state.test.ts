/**
 * How an object MidoNet holds compares with the wanted resource (what fixes a
 * difference: nothing, a PUT, delete and create, or leave it and report), and
 * which rules of a chain must be re-made to restore the wanted order.
 */
import { expect } from "chai";
import { type Comparison, compareHeld, misorderedRules } from "../../src/midonet/actual-state.js";
import type { DesiredResource } from "../../src/midonet/mapping/model.js";
import type { MidonetObject } from "../../src/midonet/resources.js";

const A = "00000000-0000-4000-8000-00000000000a";
const B = "00000000-0000-4000-8000-00000000000b";
const C = "00000000-0000-4000-8000-00000000000c";
const R = "00000000-0000-4000-8000-0000000000aa";

function want(object: MidonetObject, key: string): DesiredResource {
  return { ...object, key, owner: "Node/n", dependsOn: [] } as DesiredResource;
}

interface Row {
  what: string;
  wanted: MidonetObject;
  held: MidonetObject;
  comparison: Comparison;
  fields: string[];
}

/** Router port A on R, on the /24 `prefix`.0 with the gateway `prefix`.1. */
function routerPort(prefix: string, extra: object): MidonetObject {
  const body = { id: A, type: "Router", networkAddress: `${prefix}.0`, networkLength: 24 };
  return {
    kind: "Port",
    parentId: R,
    body: { ...body, portAddress: `${prefix}.1`, ...extra },
  } as MidonetObject;
}

const ROWS: Row[] = [
  {
    what: "a bridge as the API renders it (uri, adminStateUp, null filters)",
    wanted: { kind: "Bridge", body: { id: A, name: "n", tenantId: "t", inboundFilterId: B } },
    held: {
      kind: "Bridge",
      body: {
        id: A,
        name: "n",
        tenantId: "t",
        inboundFilterId: B.toUpperCase(),
        outboundFilterId: null,
        adminStateUp: true,
        uri: "http://x/bridges/a",
      },
    },
    comparison: "same",
    fields: [],
  },
  {
    what: "a bridge whose filter was cleared",
    wanted: { kind: "Bridge", body: { id: A, name: "n", tenantId: "t", inboundFilterId: B } },
    held: { kind: "Bridge", body: { id: A, name: "n", tenantId: "t", inboundFilterId: null } },
    comparison: "update",
    fields: ["inboundFilterId"],
  },
  {
    what: "a bridge with a filter the mapping does not set",
    wanted: { kind: "Bridge", body: { id: A, name: "n", tenantId: "t" } },
    held: { kind: "Bridge", body: { id: A, name: "n", tenantId: "t", outboundFilterId: C } },
    comparison: "update",
    fields: ["outboundFilterId"],
  },
  {
    what: "a router port whose MAC was cleared by a PUT without it",
    wanted: routerPort("10.1.0", { portMac: "ac:ca:ba:00:00:01" }),
    held: routerPort("10.1.0", { deviceId: R, portMac: null }),
    comparison: "update",
    fields: ["portMac"],
  },
  {
    what: "a router port at another address: a new port (MidoNet makes its Local route on create only)",
    wanted: routerPort("10.1.9", { portMac: "ac:ca:ba:00:00:01" }),
    held: routerPort("10.1.0", { deviceId: R, portMac: "ac:ca:ba:00:00:01" }),
    comparison: "replace",
    fields: ["networkAddress", "portAddress"],
  },
  {
    what: "a port on another device (a pod re-created on another node)",
    wanted: { kind: "Port", parentId: B, body: { id: A, type: "Bridge" } },
    held: { kind: "Port", parentId: C, body: { id: A, type: "Bridge", deviceId: C } },
    comparison: "replace",
    fields: ["parent"],
  },
  {
    what: "a route whose next hop gateway changed (routes cannot be updated)",
    wanted: {
      kind: "Route",
      parentId: R,
      body: {
        id: A,
        type: "Normal",
        srcNetworkAddr: "0.0.0.0",
        srcNetworkLength: 0,
        dstNetworkAddr: "192.168.0.10",
        dstNetworkLength: 32,
        nextHopPort: B,
        nextHopGateway: "10.1.0.2",
        weight: 0,
      },
    },
    held: {
      kind: "Route",
      parentId: R,
      body: {
        id: A,
        routerId: R,
        type: "Normal",
        srcNetworkAddr: "0.0.0.0",
        srcNetworkLength: 0,
        dstNetworkAddr: "192.168.0.10",
        dstNetworkLength: 32,
        nextHopPort: B,
        nextHopGateway: "10.1.0.3",
        weight: 0,
        learned: false,
      },
    },
    comparison: "replace",
    fields: ["nextHopGateway"],
  },
  {
    what: "a rule as GET renders it (position, chainId and defaults aside)",
    wanted: {
      kind: "Rule",
      parentId: B,
      body: {
        id: A,
        type: "jump",
        jumpChainId: C,
        dlType: 2048,
        nwDstAddress: "10.96.0.10",
        nwDstLength: 32,
        tpDst: { start: 80, end: 80 },
        position: 3,
      },
    },
    held: {
      kind: "Rule",
      parentId: B,
      body: {
        id: A,
        chainId: B,
        position: 1,
        type: "jump",
        jumpChainId: C,
        dlType: 2048,
        nwDstAddress: "10.96.0.10",
        nwDstLength: 32,
        tpDst: { start: 80, end: 80 },
        invNwDst: false,
        condInvert: false,
      },
    },
    comparison: "same",
    fields: [],
  },
  {
    what: "a rule matching another port (rules cannot be updated)",
    wanted: {
      kind: "Rule",
      parentId: B,
      body: { id: A, type: "jump", jumpChainId: C, tpDst: { start: 80, end: 80 } },
    },
    held: {
      kind: "Rule",
      parentId: B,
      body: { id: A, chainId: B, type: "jump", jumpChainId: C, tpDst: { start: 81, end: 81 } },
    },
    comparison: "replace",
    fields: ["tpDst"],
  },
  {
    what: "a chain renamed by hand: left alone (deleting a chain drops its rules and the jumps to it)",
    wanted: { kind: "Chain", body: { id: A, name: "KUBE-MAIN", tenantId: "t" } },
    held: { kind: "Chain", body: { id: A, name: "renamed", tenantId: "t" } },
    comparison: "drift",
    fields: ["name"],
  },
  {
    what: "a tunnel zone of another type: left alone (MidoNet refuses a PUT keeping its name)",
    wanted: { kind: "TunnelZone", body: { id: A, name: "DefaultTunnelZone", type: "vxlan" } },
    held: { kind: "TunnelZone", body: { id: A, name: "DefaultTunnelZone", type: "gre" } },
    comparison: "drift",
    fields: ["type"],
  },
  {
    what: "a tunnel zone membership at another address",
    wanted: { kind: "TunnelZoneHost", parentId: A, body: { hostId: B, ipAddress: "192.168.0.11" } },
    held: {
      kind: "TunnelZoneHost",
      parentId: A,
      body: { hostId: B, ipAddress: "192.168.0.99", tunnelZoneId: A },
    },
    comparison: "replace",
    fields: ["ipAddress"],
  },
  {
    what: "a binding to another interface name",
    wanted: {
      kind: "HostInterfacePort",
      parentId: A,
      body: { hostId: A, portId: B, interfaceName: "mido17cdeaefa5c" },
    },
    held: {
      kind: "HostInterfacePort",
      parentId: A,
      body: { hostId: A, portId: B, interfaceName: "eth9" },
    },
    comparison: "replace",
    fields: ["interfaceName"],
  },
  {
    what: "a link to another peer",
    wanted: { kind: "PortLink", parentId: A, body: { peerId: B } },
    held: { kind: "PortLink", parentId: A, body: { peerId: C } },
    comparison: "replace",
    fields: ["peerId"],
  },
  {
    what: "a MAC entry (its key is all of it)",
    wanted: { kind: "MacPort", parentId: A, body: { macAddr: "0a:58:0a:01:00:05", portId: B } },
    held: {
      kind: "MacPort",
      parentId: A,
      body: { macAddr: "0a:58:0a:01:00:05", portId: B, vlanId: 0 },
    },
    comparison: "same",
    fields: [],
  },
];

describe("midonet actual state", () => {
  describe("compareHeld", () => {
    for (const row of ROWS) {
      it(`${row.what}: ${row.comparison}${row.fields.length ? ` (${row.fields.join(", ")})` : ""}`, () => {
        const key = (row.wanted.body as { id?: string }).id ?? "k";
        expect(compareHeld(want(row.wanted, key), row.held)).to.deep.equal({
          comparison: row.comparison,
          fields: row.fields,
        });
      });
    }
  });

  describe("misorderedRules: the fewest rules to re-make so the chain is in the wanted order", () => {
    const table: { actual: string; desired: string; remake: string }[] = [
      { desired: "abcd", actual: "abcd", remake: "" },
      { desired: "abcd", actual: "bacd", remake: "b" },
      { desired: "abcd", actual: "dabc", remake: "d" },
      { desired: "abcd", actual: "bcda", remake: "a" },
      { desired: "abcd", actual: "dcba", remake: "dcb" },
      // Rules not desired (orphans, foreign) do not count; missing ones neither.
      { desired: "abcd", actual: "xbyaz", remake: "b" },
      { desired: "abc", actual: "ca", remake: "c" },
      { desired: "", actual: "ab", remake: "" },
    ];
    for (const t of table) {
      it(`desired ${t.desired || "(none)"}, held ${t.actual}: re-make ${t.remake || "nothing"}`, () => {
        expect(misorderedRules([...t.desired], [...t.actual]).join("")).to.equal(t.remake);
      });
    }

    it("what stays is in the wanted order, and as long as it can be", () => {
      const desired = [..."abcdefghij"];
      const actual = [..."jcaebdihgf"];
      const remake = new Set(misorderedRules(desired, actual));
      const kept = actual.filter((id) => !remake.has(id));
      expect(kept).to.deep.equal([...kept].sort());
      expect(kept).to.have.length(4); // e.g. a, b, d and one of i, h, g, f
    });
  });
});
