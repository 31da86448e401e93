import { expect } from "chai";
import pino from "pino";
import type { NetworkConfigList } from "../../src/cni/conflist.js";
import {
  type BridgeSettings,
  BridgeSteering,
  bridgesOf,
  STEERING_TABLE,
  steeringScript,
} from "../../src/driver/services/bridge-steering.js";

function network(name: string, plugin: Record<string, unknown>): NetworkConfigList {
  const raw = { type: "midonet", ...plugin };
  return { name, plugins: [{ type: "midonet", raw }] } as unknown as NetworkConfigList;
}

const hostLocal = (subnet: string) => ({ type: "host-local", ranges: [[{ subnet }]] });

const config = (services: string, ...networks: NetworkConfigList[]) => ({
  networks: new Map(networks.map((n) => [n.name, n])),
  settings: { services },
});

const pods = network("pods", {
  datapath: "kernel",
  bridge: "cni-a",
  ipam: hostLocal("10.1.0.0/24"),
});
const dual = network("dual", {
  datapath: "kernel",
  bridge: "cni-a",
  ipam: { type: "host-local", ranges: [[{ subnet: "10.1.0.0/24" }], [{ subnet: "fd00:1::/64" }]] },
});
const dhcp = network("other", { datapath: "kernel", bridge: "cni-b", ipam: { type: "dhcp" } });
const mido = network("mido", { datapath: "midonet", ipam: hostLocal("10.9.0.0/24") });

class Recorder {
  scripts: string[] = [];
  bridges: Array<[string, BridgeSettings]> = [];
  nodeNetfilter = false;
  datapath = {
    applyScript: async (s: string) => {
      this.scripts.push(s);
    },
    setBridge: async (b: string, s: BridgeSettings) => {
      this.bridges.push([b, s]);
    },
    nodeBridgeNetfilter: () => this.nodeNetfilter,
    bridgeMac: (b: string) => (b === "cni-a" ? "02:00:00:00:00:0a" : "02:00:00:00:00:0b"),
  };
}

describe("services/bridge-steering", () => {
  it("steers the kernel-datapath bridges whose subnets host-local names; not a MidoNet one or an unknown IPAM's", () => {
    const { steered, unsteered } = bridgesOf(config("driver", dual, dhcp, mido), () => "m");
    expect(steered).to.deep.equal([
      { bridge: "cni-a", mac: "m", subnets: ["10.1.0.0/24", "fd00:1::/64"] },
    ]);
    expect(unsteered).to.deep.equal(["cni-b"]);
  });

  it("writes one table that sends unicast IP to the bridge's pod subnets up to the host, ND left alone", () => {
    const script = steeringScript([
      { bridge: "cni-a", mac: "02:00:00:00:00:0a", subnets: ["10.1.0.0/24", "fd00:1::/64"] },
    ]);
    expect(script).to.contain(`delete table bridge ${STEERING_TABLE}`);
    expect(script).to.contain("type filter hook prerouting priority -300;");
    expect(script).to.contain("meta pkttype != other return");
    expect(script).to.contain("icmpv6 type { nd-neighbor-solicit, nd-neighbor-advert } return");
    expect(script).to.contain(
      "ip daddr 10.1.0.0/24 ether daddr set 02:00:00:00:00:0a meta pkttype set host",
    );
    expect(script).to.contain(
      "ip6 daddr fd00:1::/64 ether daddr set 02:00:00:00:00:0a meta pkttype set host",
    );
  });

  it("driver mode: the table, and bridges and their new ports without br_netfilter or hairpin; back: both again", async () => {
    const r = new Recorder();
    const s = new BridgeSteering(pino({ level: "silent" }), r.datapath);
    expect(s.settings("cni-a"), "before any config").to.deep.equal({
      netfilter: true,
      hairpin: true,
    });
    await s.apply(config("driver", pods, dhcp));
    expect(r.scripts.at(-1)).to.contain("ip daddr 10.1.0.0/24 ether daddr set 02:00:00:00:00:0a");
    expect(r.bridges).to.deep.include(["cni-a", { netfilter: false, hairpin: false }]);
    expect(s.settings("cni-a")).to.deep.equal({ netfilter: false, hairpin: false });
    expect(s.settings("cni-b"), "not steerable").to.deep.equal({ netfilter: true, hairpin: true });
    r.bridges = [];
    await s.apply(config("kube-proxy", pods, dhcp));
    expect(r.scripts.at(-1)).to.match(/^table bridge cni-driver-steer \{\}\ndelete table/);
    expect(r.scripts.at(-1)).not.to.contain("daddr");
    expect(r.bridges).to.deep.equal([["cni-a", { netfilter: true, hairpin: true }]]);
    expect(s.settings("cni-a")).to.deep.equal({ netfilter: true, hairpin: true });
  });

  it("keeps hairpin mode on the ports when br_netfilter is on for the whole node", async () => {
    const r = new Recorder();
    r.nodeNetfilter = true;
    const s = new BridgeSteering(pino({ level: "silent" }), r.datapath);
    await s.apply(config("driver", pods));
    expect(s.settings("cni-a")).to.deep.equal({ netfilter: false, hairpin: true });
  });

  it("at start in kube-proxy mode, removes what an earlier run in driver mode left: the table, the bridges' settings", async () => {
    const r = new Recorder();
    const s = new BridgeSteering(pino({ level: "silent" }), r.datapath);
    await s.apply(config("kube-proxy", pods));
    expect(r.scripts).to.have.length(1);
    expect(r.scripts[0]).to.contain(`delete table bridge ${STEERING_TABLE}`);
    expect(r.bridges).to.deep.equal([["cni-a", { netfilter: true, hairpin: true }]]);
    r.scripts = [];
    r.bridges = [];
    await s.apply(config("kube-proxy", pods));
    expect(r.scripts, "nothing more at the next load").to.deep.equal([]);
    expect(r.bridges).to.deep.equal([]);
  });
});
