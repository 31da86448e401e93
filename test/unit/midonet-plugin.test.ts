/**
 * The built-in midonet plugin's logic through its seams: a fake PodPlumbing
 * that records each call and answers as the test scripts it, and a fake IPAM
 * delegate. No netns, no link is made: what is asserted is what the plugin asks
 * of the kernel, what it asks of IPAM, and what it answers (result or CNI
 * error). The kernel side is tested in test/integration/plumbing.test.ts.
 */
import { expect } from "chai";
import pino from "pino";
import { parseNetworkConfigList } from "../../src/cni/conflist.js";
import { CniError, ErrorCode } from "../../src/cni/errors.js";
import { DriverErrorCode } from "../../src/driver/builtin/error-codes.js";
import { BridgeCache } from "../../src/driver/builtin/midonet/bridge-cache.js";
import { createMidonetPlugin } from "../../src/driver/builtin/midonet/plugin.js";
import type { PluginInvocation } from "../../src/driver/chain/plugin-runner.js";
import { hostVethName } from "../../src/midonet/host-veth-name.js";
import type {
  ContainerSideSpec,
  HostAttachment,
  LinkInfo,
  PodInterfaceRef,
  PodInterfaceState,
  PodRoute,
  VethSpec,
} from "../../src/plumbing/pod-interface-types.js";
import type { PodPlumbing } from "../../src/plumbing/pod-plumbing.js";
import { cniRejectionOf } from "../support/cni-error.js";

const NETNS = "/run/netns/unit-mido-pod";
const BRIDGE = "unit-mido-br0";
const HOST_END = hostVethName("unit-mido/p");

/** The plugin's stdin as the executor builds it: the list's name and version written in. */
function pluginConfig(cniVersion: string, extra: Record<string, unknown> = {}) {
  return {
    cniVersion,
    name: "unit-mido",
    type: "midonet",
    bridge: BRIDGE,
    mtu: 1450,
    ipam: { type: "host-local", ranges: [[{ subnet: "10.9.0.0/24" }]] },
    ...extra,
  };
}

function invocation(command: PluginInvocation["command"], o: Partial<PluginInvocation> = {}) {
  return {
    type: "midonet",
    command,
    containerId: "unit-mido-c1",
    netns: NETNS,
    ifName: "eth0",
    cniArgs: "IgnoreUnknown=1;K8S_POD_NAMESPACE=unit-mido;K8S_POD_NAME=p",
    config: pluginConfig("1.0.0"),
    ...o,
  } satisfies PluginInvocation;
}

/** Records every call, in order; each method answers what the test set. */
class FakePlumbing implements PodPlumbing {
  readonly calls: Array<[string, ...unknown[]]> = [];
  fail: Partial<Record<keyof PodPlumbing, Error>> = {};
  /** What configureContainerSide says it left out (the pod had a default route). */
  skipped: PodRoute[] = [];
  state: PodInterfaceState | undefined;
  ports: Record<string, string[]> = {};
  links: Record<string, LinkInfo> = {};

  private async step(name: keyof PodPlumbing, ...args: unknown[]): Promise<void> {
    this.calls.push([name, ...structuredClone(args)]);
    const err = this.fail[name];
    if (err) throw err;
  }
  ensureBridge = async (
    name: string,
    cidrs: readonly string[],
    mtu?: number,
    netfilter?: boolean,
  ) => this.step("ensureBridge", name, cidrs, mtu, ...(netfilter === false ? [false] : []));
  listBridgePorts = async (name: string) => {
    await this.step("listBridgePorts", name);
    return this.ports[name] ?? [];
  };
  createVethPair = async (spec: VethSpec, host: HostAttachment) =>
    this.step("createVethPair", spec, host);
  createVethPairReplacingStale = async (spec: VethSpec, host: HostAttachment) => {
    await this.step("createVethPairReplacingStale", spec, host);
    return false;
  };
  configureContainerSide = async (spec: ContainerSideSpec) => {
    await this.step("configureContainerSide", spec);
    return this.skipped;
  };
  deletePodInterface = async (ref: PodInterfaceRef) => {
    await this.step("deletePodInterface", ref);
    return true;
  };
  deleteHostLink = async (name: string) => this.step("deleteHostLink", name);
  showLink = async (name: string, netns?: string) => {
    await this.step("showLink", name, netns);
    return this.links[name];
  };
  inspectPodInterface = async (netns: string, ifName: string, v6: boolean) => {
    await this.step("inspectPodInterface", netns, ifName, v6);
    return this.state;
  };

  named(name: keyof PodPlumbing): unknown[][] {
    return this.calls.filter((c) => c[0] === name).map((c) => c.slice(1));
  }
  /** The pair ADD asked for. */
  veth(): VethSpec {
    return this.named("createVethPairReplacingStale")[0]?.[0] as VethSpec;
  }
  /** What ADD asked of the container side. */
  containerSide(): ContainerSideSpec | undefined {
    return this.named("configureContainerSide")[0]?.[0] as ContainerSideSpec | undefined;
  }
}

/** What removes a pair ADD made: the host end's name and MAC, the container end's netns and name. */
const refOf = (v: VethSpec) => ({
  netns: v.netns,
  ifName: v.ifName,
  hostIfName: v.hostIfName,
  hostMac: v.hostMac,
});

/** The IPAM plugin: records each call; ADD answers one IPv4 address, unless told to fail. */
class FakeIpam {
  readonly calls: PluginInvocation[] = [];
  fail: Partial<Record<string, CniError>> = {};
  /** What ADD answers besides the cniVersion. */
  answer: Record<string, unknown> = { ips: [{ address: "10.9.0.5/24", gateway: "10.9.0.1" }] };
  run = async (inv: PluginInvocation): Promise<unknown> => {
    this.calls.push(structuredClone(inv));
    const err = this.fail[inv.command];
    if (err) throw err;
    if (inv.command !== "ADD") return undefined;
    return { cniVersion: inv.config.cniVersion, ...this.answer };
  };
  commands(): string[] {
    return this.calls.map((c) => `${c.command} ${c.type}`);
  }
}

describe("midonet plugin through fake plumbing and a fake IPAM delegate", () => {
  let plumbing: FakePlumbing;
  let ipam: FakeIpam;
  const plugin = () => createMidonetPlugin({ plumbing });

  beforeEach(() => {
    plumbing = new FakePlumbing();
    ipam = new FakeIpam();
  });

  describe("ADD", () => {
    it("makes the pair on the bridge, puts the gateway there and the address and default route in the pod, and answers in the config's version", async () => {
      const out = await plugin().run(
        invocation("ADD", { config: pluginConfig("0.4.0") }),
        ipam.run,
      );

      expect(ipam.commands()).to.deep.equal(["ADD host-local"]);
      // IPAM gets the invocation as the plugin got it, its own type in place of midonet's.
      expect(ipam.calls[0]).to.include({ containerId: "unit-mido-c1", netns: NETNS });
      const veth = plumbing.veth();
      expect(veth).to.include({ netns: NETNS, ifName: "eth0", hostIfName: HOST_END, mtu: 1450 });
      expect(plumbing.calls.map((c) => c[0])).to.deep.equal([
        "ensureBridge",
        "createVethPairReplacingStale",
        "ensureBridge",
        "configureContainerSide",
      ]);
      expect(plumbing.named("ensureBridge")).to.deep.equal([
        [BRIDGE, [], 1450],
        [BRIDGE, ["10.9.0.1/24"], 1450],
      ]);
      expect(plumbing.named("createVethPairReplacingStale")[0]?.[1]).to.deep.equal({
        bridge: BRIDGE,
        hairpin: true,
      });
      expect(plumbing.named("configureContainerSide")).to.deep.equal([
        [
          {
            netns: NETNS,
            ifName: "eth0",
            addresses: [{ cidr: "10.9.0.5/24" }],
            routes: [{ dst: "0.0.0.0/0", gw: "10.9.0.1", ifNoDefault: true }],
          },
        ],
      ]);
      expect(out).to.deep.equal({
        cniVersion: "0.4.0",
        interfaces: [
          { name: HOST_END, mac: veth.hostMac },
          { name: "eth0", mac: veth.containerMac, sandbox: NETNS },
        ],
        ips: [{ version: "4", address: "10.9.0.5/24", gateway: "10.9.0.1", interface: 1 }],
        routes: [{ dst: "0.0.0.0/0", gw: "10.9.0.1" }],
        dns: {},
      });
    });

    it("takes the cluster network's MTU when the network sets none, and keeps a network's own", async () => {
      const withPodMtu = createMidonetPlugin({ plumbing, podMtu: () => 1400 });
      const { mtu: _, ...noMtu } = pluginConfig("1.0.0");
      const out = (await withPodMtu.run(invocation("ADD", { config: noMtu }), ipam.run)) as {
        interfaces: Array<{ mtu?: number; sandbox?: string }>;
      };
      expect(plumbing.veth().mtu).to.equal(1400);
      expect(out.interfaces.find((i) => i.sandbox)?.mtu).to.equal(1400);

      plumbing = new FakePlumbing();
      await createMidonetPlugin({ plumbing, podMtu: () => 1400 }).run(
        invocation("ADD", { containerId: "unit-mido-c2" }),
        ipam.run,
      );
      expect(plumbing.veth().mtu, "the network's own mtu").to.equal(1450);

      plumbing = new FakePlumbing();
      await createMidonetPlugin({ plumbing, podMtu: () => undefined }).run(
        invocation("ADD", { containerId: "unit-mido-c3", config: noMtu }),
        ipam.run,
      );
      expect(plumbing.veth().mtu, "no cluster MTU: the default").to.equal(1500);
    });

    it("gives the container end the MAC the runtime asked for, and leaves out a default route the pod already had", async () => {
      plumbing.skipped = [{ dst: "0.0.0.0/0", gw: "10.9.0.1", ifNoDefault: true }];
      const out = (await plugin().run(
        invocation("ADD", {
          config: { ...pluginConfig("1.0.0"), runtimeConfig: { mac: "0A:58:0A:09:00:63" } },
        }),
        ipam.run,
      )) as { interfaces: Array<{ mac: string; mtu?: number }>; routes?: unknown[] };
      expect(plumbing.veth().containerMac).to.equal("0a:58:0a:09:00:63");
      expect(out.interfaces[1]?.mac).to.equal("0a:58:0a:09:00:63");
      expect(out.routes ?? []).to.deep.equal([]);
    });

    it("dual stack: both gateways on the bridge (network + 1 when IPAM names none), a default route per family", async () => {
      ipam.answer = { ips: [{ address: "fd00:10::5/64" }, { address: "10.9.0.5/24" }] };
      const out = (await plugin().run(invocation("ADD"), ipam.run)) as { routes?: unknown[] };
      expect(plumbing.named("ensureBridge")[1]).to.deep.equal([
        BRIDGE,
        ["fd00:10::1/64", "10.9.0.1/24"],
        1450,
      ]);
      const routes = [
        { dst: "0.0.0.0/0", gw: "10.9.0.1" },
        { dst: "::/0", gw: "fd00:10::1" },
      ];
      expect(plumbing.containerSide()?.routes).to.deep.equal(
        routes.map((r) => ({ ...r, ifNoDefault: true })),
      );
      expect(out.routes).to.deep.equal(routes);
    });

    it("adds the routes IPAM names as they are, through the gateway of their family, and no default route", async () => {
      ipam.answer = {
        ips: [{ address: "fd00:10::5/64" }, { address: "10.9.0.5/24", gateway: "10.9.0.254" }],
        routes: [{ dst: "192.168.0.0/16" }, { dst: "fd01::/64", gw: "fd00:10::fe" }],
      };
      await plugin().run(invocation("ADD"), ipam.run);
      expect(plumbing.containerSide()?.routes).to.deep.equal([
        { dst: "192.168.0.0/16", gw: "10.9.0.254" },
        { dst: "fd01::/64", gw: "fd00:10::fe" },
      ]);
    });

    it("on the midonet datapath leaves the host end off any bridge and makes none", async () => {
      await plugin().run(
        invocation("ADD", { config: pluginConfig("1.0.0", { datapath: "midonet" }) }),
        ipam.run,
      );
      expect(plumbing.named("ensureBridge")).to.deep.equal([]);
      expect(plumbing.named("createVethPairReplacingStale")[0]?.[1]).to.deep.equal({
        bridge: undefined,
        hairpin: undefined,
      });
    });

    it("makes the bridge and the port without kube-proxy's settings when the driver steers the bridge", async () => {
      const steered = (b: string) => b !== BRIDGE;
      await createMidonetPlugin({
        plumbing,
        bridges: new BridgeCache(plumbing, steered),
        hairpin: steered,
      }).run(invocation("ADD"), ipam.run);
      expect(plumbing.named("ensureBridge")).to.deep.equal([
        [BRIDGE, [], 1450, false],
        [BRIDGE, ["10.9.0.1/24"], 1450, false],
      ]);
      expect(plumbing.named("createVethPairReplacingStale")[0]?.[1]).to.deep.equal({
        bridge: BRIDGE,
        hairpin: false,
      });
    });

    it("removes the pair when IPAM fails, and passes IPAM's error on", async () => {
      ipam.fail.ADD = new CniError(ErrorCode.TryAgainLater, "no addresses left in 10.9.0.0/24");
      const err = await cniRejectionOf(plugin().run(invocation("ADD"), ipam.run));

      expect(err.code).to.equal(ErrorCode.TryAgainLater);
      expect(err.message).to.equal("no addresses left in 10.9.0.0/24");
      const veth = plumbing.veth();
      expect(plumbing.named("deletePodInterface")).to.deep.equal([[refOf(veth)]]);
      expect(plumbing.named("configureContainerSide")).to.deep.equal([]);
      // Nothing was allocated: no IPAM DEL.
      expect(ipam.commands()).to.deep.equal(["ADD host-local"]);
    });

    it("gives the address back and removes the pair when the container side fails: code 100 naming the step", async () => {
      plumbing.fail.configureContainerSide = new Error("RTNETLINK answers: File exists");
      const err = await cniRejectionOf(plugin().run(invocation("ADD"), ipam.run));

      expect(err.code).to.equal(DriverErrorCode.PlumbingFailed);
      expect(err.message).to.equal(
        `setting up eth0 in ${NETNS} for unit-mido-c1: RTNETLINK answers: File exists`,
      );
      expect(ipam.commands()).to.deep.equal(["ADD host-local", "DEL host-local"]);
      expect(ipam.calls[1]).to.include({ containerId: "unit-mido-c1", ifName: "eth0" });
      expect(plumbing.named("deletePodInterface")).to.deep.equal([[refOf(plumbing.veth())]]);
    });

    it("gives the address back when the pair cannot be made: code 100 naming the step", async () => {
      plumbing.fail.createVethPairReplacingStale = new Error("RTNETLINK answers: No such device");
      const err = await cniRejectionOf(plugin().run(invocation("ADD"), ipam.run));
      expect(err.code).to.equal(DriverErrorCode.PlumbingFailed);
      expect(err.message).to.equal(
        `setting up eth0 in ${NETNS} for unit-mido-c1: RTNETLINK answers: No such device`,
      );
      expect(ipam.commands()).to.deep.equal(["ADD host-local", "DEL host-local"]);
      expect(plumbing.named("deletePodInterface")).to.deep.equal([]);
    });

    it("asks for the bridge once across ADDs while it is known to be there, and again after a failure", async () => {
      const p = plugin();
      await p.run(invocation("ADD"), ipam.run);
      await p.run(invocation("ADD", { containerId: "unit-mido-c2", cniArgs: "" }), ipam.run);
      expect(plumbing.named("ensureBridge")).to.have.length(2); // the bridge, then its gateway

      plumbing.fail.createVethPairReplacingStale = new Error("gone");
      await cniRejectionOf(p.run(invocation("ADD", { containerId: "unit-mido-c3" }), ipam.run));
      delete plumbing.fail.createVethPairReplacingStale;
      plumbing.calls.length = 0;
      await p.run(invocation("ADD", { containerId: "unit-mido-c4" }), ipam.run);
      expect(plumbing.named("ensureBridge")).to.deep.equal([
        [BRIDGE, [], 1450],
        [BRIDGE, ["10.9.0.1/24"], 1450],
      ]);
    });

    it("fails with code 102 and removes everything when IPAM answers no address", async () => {
      const empty = async (inv: PluginInvocation) => {
        await ipam.run(inv);
        return inv.command === "ADD" ? { cniVersion: "1.0.0", ips: [] } : undefined;
      };
      const err = await cniRejectionOf(plugin().run(invocation("ADD"), empty));
      expect(err.code).to.equal(DriverErrorCode.IpamFailed);
      expect(err.message).to.equal("IPAM plugin host-local returned no IP addresses");
      expect(ipam.commands()).to.deep.equal(["ADD host-local", "DEL host-local"]);
      expect(plumbing.named("deletePodInterface")).to.have.length(1);
    });
  });

  describe("DEL", () => {
    const cached = (hostName: string) => ({
      cniVersion: "1.0.0",
      interfaces: [
        { name: hostName, mac: "0a:58:0a:09:00:aa" },
        { name: "eth0", mac: "0a:58:0a:09:00:05", sandbox: NETNS },
      ],
      ips: [{ address: "10.9.0.5/24", gateway: "10.9.0.1", interface: 1 }],
    });

    it("removes the host end by the name and MAC the prevResult holds, and releases the address", async () => {
      // The name ADD used (another pod identity than this DEL's CNI_ARGS would give).
      const config = { ...pluginConfig("1.0.0"), prevResult: cached("midoa1b2c3d4e5f") };
      await plugin().run(invocation("DEL", { config }), ipam.run);
      expect(plumbing.named("deletePodInterface")).to.deep.equal([
        [
          {
            netns: NETNS,
            ifName: "eth0",
            hostIfName: "midoa1b2c3d4e5f",
            hostMac: "0a:58:0a:09:00:aa",
          },
        ],
      ]);
      expect(ipam.commands()).to.deep.equal(["DEL host-local"]);
    });

    it("below 0.4.0 takes the host end from the cached result handed aside", async () => {
      await plugin().run(
        invocation("DEL", {
          config: pluginConfig("0.3.1"),
          cachedResult: cached("midoa1b2c3d4e5f"),
        }),
        ipam.run,
      );
      expect(plumbing.named("deletePodInterface")[0]?.[0]).to.include({
        hostIfName: "midoa1b2c3d4e5f",
        hostMac: "0a:58:0a:09:00:aa",
      });
    });

    it("without any result, removes the host end named from the pod, with no MAC to match", async () => {
      await plugin().run(invocation("DEL", { netns: "" }), ipam.run);
      expect(plumbing.named("deletePodInterface")).to.deep.equal([
        [{ netns: "", ifName: "eth0", hostIfName: HOST_END, hostMac: undefined }],
      ]);
      expect(ipam.commands()).to.deep.equal(["DEL host-local"]);
    });

    it("fails with code 100 naming the step when the link cannot be removed", async () => {
      plumbing.fail.deletePodInterface = new Error("Operation not permitted");
      const err = await cniRejectionOf(plugin().run(invocation("DEL"), ipam.run));
      expect(err.code).to.equal(DriverErrorCode.PlumbingFailed);
      expect(err.message).to.equal("removing eth0 of unit-mido-c1: Operation not permitted");
      // The address is released all the same.
      expect(ipam.commands()).to.deep.equal(["DEL host-local"]);
    });
  });

  describe("CHECK", () => {
    const PREV = {
      cniVersion: "1.0.0",
      interfaces: [
        { name: HOST_END, mac: "0a:58:0a:09:00:aa" },
        { name: "eth0", mac: "0a:58:0a:09:00:05", sandbox: NETNS, mtu: 1450 },
      ],
      ips: [{ address: "10.9.0.5/24", gateway: "10.9.0.1", interface: 1 }],
      routes: [{ dst: "0.0.0.0/0", gw: "10.9.0.1" }],
    };
    const healthy = (): PodInterfaceState => ({
      link: {
        ifname: "eth0",
        address: "0a:58:0a:09:00:05",
        mtu: 1450,
        linkinfo: { info_kind: "veth" },
      },
      addresses: [{ family: "inet", local: "10.9.0.5", prefixlen: 24 }],
      routes: [{ dst: "10.9.0.0/24" }, { dst: "default", gateway: "10.9.0.1" }],
    });
    const check = () =>
      plugin().run(
        invocation("CHECK", { config: { ...pluginConfig("1.0.0"), prevResult: PREV } }),
        ipam.run,
      );

    it("passes when the interface is as the prevResult says, and asks IPAM too", async () => {
      plumbing.state = healthy();
      await check();
      expect(plumbing.named("inspectPodInterface")).to.deep.equal([[NETNS, "eth0", false]]);
      expect(ipam.commands()).to.deep.equal(["CHECK host-local"]);
    });

    it("reports a missing address with code 101", async () => {
      plumbing.state = { ...healthy(), addresses: [] };
      const err = await cniRejectionOf(check());
      expect(err.code).to.equal(DriverErrorCode.CheckFailed);
      expect(err.message).to.equal(`CHECK eth0 in ${NETNS}: address 10.9.0.5/24 is missing`);
    });

    it("reports a missing interface and a missing default route with code 101", async () => {
      plumbing.state = undefined;
      const gone = await cniRejectionOf(check());
      expect(gone.code).to.equal(DriverErrorCode.CheckFailed);
      expect(gone.message).to.equal(`CHECK eth0 in ${NETNS}: interface not found`);

      plumbing.state = { ...healthy(), routes: [{ dst: "10.9.0.0/24" }] };
      const noRoute = await cniRejectionOf(check());
      expect(noRoute.code).to.equal(DriverErrorCode.CheckFailed);
      expect(noRoute.message).to.equal(
        `CHECK eth0 in ${NETNS}: route 0.0.0.0/0 via 10.9.0.1 is missing`,
      );
    });
  });

  describe("recover()", () => {
    const networks = [
      parseNetworkConfigList(
        JSON.stringify({
          cniVersion: "1.0.0",
          name: "unit-mido",
          plugins: [pluginConfig("1.0.0")],
        }),
      ),
      // The midonet datapath has no bridge of ours: nothing of it is looked at.
      parseNetworkConfigList(
        JSON.stringify({
          cniVersion: "1.0.0",
          name: "unit-mido-agent",
          plugins: [pluginConfig("1.0.0", { datapath: "midonet", bridge: "unit-mido-br1" })],
        }),
      ),
    ];

    it("removes the mido… ports of the kernel bridges that no cached attachment lists, and leaves the others", async () => {
      plumbing.ports = {
        [BRIDGE]: ["midoaaaaaaaaaaa", "midobbbbbbbbbbb", "veth1234abcd", "unit-mido-node"],
        "unit-mido-br1": ["midoccccccccccc"],
      };
      await plugin().recover?.({
        networks,
        attachments: [
          {
            networkName: "unit-mido",
            containerId: "unit-mido-c1",
            ifName: "eth0",
            result: { interfaces: [{ name: "midoaaaaaaaaaaa" }, { name: "eth0", sandbox: NETNS }] },
          },
        ],
        logger: pino({ level: "silent" }),
      });
      expect(plumbing.named("listBridgePorts")).to.deep.equal([[BRIDGE]]);
      expect(plumbing.named("deleteHostLink")).to.deep.equal([["midobbbbbbbbbbb"]]);
    });

    it("goes on past a port it cannot remove", async () => {
      plumbing.ports = { [BRIDGE]: ["midobbbbbbbbbbb", "midoddddddddddd"] };
      plumbing.fail.deleteHostLink = new Error("Device or resource busy");
      await plugin().recover?.({ networks, attachments: [], logger: pino({ level: "silent" }) });
      expect(plumbing.named("deleteHostLink")).to.deep.equal([
        ["midobbbbbbbbbbb"],
        ["midoddddddddddd"],
      ]);
    });
  });
});
