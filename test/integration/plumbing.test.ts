import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect } from "chai";
import { ensureBridge, listBridgePorts } from "../../src/plumbing/bridge.js";
import { netnsName } from "../../src/plumbing/netns.js";
import {
  configureContainerSide,
  createVethPair,
  deleteHostLink,
  deletePodInterface,
  inspectPodInterface,
  netnsLinkRef,
  showLink,
} from "../../src/plumbing/pod-interface.js";
import { createNetns, deleteNetns, uniqueTag } from "../support/netns.js";
import { requireRoot } from "../support/requirements.js";

describe("plumbing: netns references", () => {
  for (const [path, ref] of [
    ["/run/netns/cni-1234", "cni-1234"],
    ["/var/run/netns/abc", "abc"],
    ["/proc/4242/ns/net", "4242"],
    ["/proc/self/ns/net", undefined],
    ["/tmp/elsewhere/ns", undefined],
    ["/run/netns/a/b", undefined],
  ] as const) {
    it(`${path} is named ${ref ?? "(not nameable)"} for ip link … netns`, () => {
      expect(netnsLinkRef(path)).to.equal(ref);
    });
  }
  it("only /run/netns names are usable with ip -n", () => {
    expect(netnsName("/run/netns/x")).to.equal("x");
    expect(netnsName("/proc/1/ns/net")).to.equal(undefined);
  });
});

describe("plumbing: a pod's veth pair (root)", function () {
  this.timeout(30_000);
  const tag = uniqueTag();
  const bridge = `cpb${tag}`;
  const ns = `cpl-${tag}`;
  let sleeper: ChildProcess | undefined;
  let tmp = "";
  const bindPath = () => join(tmp, "netns-bind");

  before(function () {
    requireRoot(this);
    tmp = mkdtempSync(join(tmpdir(), "cni-driver-plumbing-"));
    createNetns(ns);
  });

  after(() => {
    sleeper?.kill("SIGKILL");
    if (tmp) {
      spawnSync("umount", [bindPath()], { stdio: "ignore" });
      rmSync(tmp, { recursive: true, force: true });
    }
    for (const l of [`mph${tag}1`, `mph${tag}2`, `mph${tag}3`, bridge])
      spawnSync("ip", ["link", "del", l], { stdio: "ignore" });
    deleteNetns(ns);
  });

  const spec = (netns: string, i: number) => ({
    netns,
    ifName: `eth${i}`,
    hostIfName: `mph${tag}${i}`,
    mtu: 1450,
    containerMac: `02:00:00:00:0${i}:01`,
    hostMac: `02:00:00:00:0${i}:02`,
  });

  it("creates the pair from the host for a /run/netns path, on the bridge, then configures the pod side", async () => {
    await ensureBridge(bridge, ["10.244.233.1/24"], 1450);
    const s = spec(`/run/netns/${ns}`, 1);
    await createVethPair(s, { bridge });
    expect(await listBridgePorts(bridge)).to.include(s.hostIfName);
    const host = await showLink(s.hostIfName);
    expect(host?.address).to.equal(s.hostMac);
    expect(host?.mtu).to.equal(1450);
    await configureContainerSide({
      netns: s.netns,
      ifName: s.ifName,
      addresses: [{ cidr: "10.244.233.5/24" }],
      routes: [{ dst: "0.0.0.0/0", gw: "10.244.233.1" }],
    });
    const state = await inspectPodInterface(s.netns, s.ifName, false);
    expect(state?.link.address).to.equal(s.containerMac);
    expect(state?.link.linkinfo?.info_kind).to.equal("veth");
    expect(state?.addresses.map((a) => `${a.local}/${a.prefixlen}`)).to.include("10.244.233.5/24");
    expect(state?.routes.some((r) => r.dst === "default" && r.gateway === "10.244.233.1")).to.equal(
      true,
    );
    const ping = spawnSync("ip", ["netns", "exec", ns, "ping", "-c1", "-W2", "10.244.233.1"], {
      encoding: "utf8",
    });
    expect(ping.status, ping.stdout + ping.stderr).to.equal(0);
  });

  it("creates the pair for a /proc/<pid>/ns/net path (containerd's ctr run --cni)", async () => {
    sleeper = spawn("ip", ["netns", "exec", ns, "sleep", "60"], { stdio: "ignore" });
    // The child is `ip`, which execs sleep inside the namespace: wait until it did.
    const deadline = Date.now() + 5000;
    let path = "";
    while (Date.now() < deadline) {
      const out = spawnSync("ip", ["netns", "pids", ns], { encoding: "utf8" }).stdout.trim();
      if (out) {
        path = `/proc/${out.split("\n")[0]}/ns/net`;
        break;
      }
      await new Promise((r) => setTimeout(r, 20));
    }
    expect(path).to.match(/^\/proc\/\d+\/ns\/net$/);
    const s = spec(path, 2);
    await createVethPair(s, {});
    expect((await showLink(s.hostIfName))?.operstate).to.not.equal(undefined);
    expect(await inspectPodInterface(`/run/netns/${ns}`, s.ifName, false)).to.not.equal(undefined);
    expect(
      await deletePodInterface({ netns: path, ifName: s.ifName, hostIfName: s.hostIfName }),
    ).to.equal(true);
    expect(await showLink(s.hostIfName)).to.equal(undefined);
  });

  it("creates the pair from inside the netns for a path ip cannot name (a bind mount)", async () => {
    writeFileSync(bindPath(), "");
    const m = spawnSync("mount", ["--bind", `/run/netns/${ns}`, bindPath()], { encoding: "utf8" });
    expect(m.status, m.stderr).to.equal(0);
    const s = spec(bindPath(), 3);
    await createVethPair(s, { bridge });
    expect(await listBridgePorts(bridge)).to.include(s.hostIfName);
    expect((await inspectPodInterface(bindPath(), s.ifName, false))?.link.address).to.equal(
      s.containerMac,
    );
  });

  it("DEL removes the pair through the netns, and is idempotent", async () => {
    const s = spec(`/run/netns/${ns}`, 1);
    expect(
      await deletePodInterface({ netns: s.netns, ifName: s.ifName, hostIfName: s.hostIfName }),
    ).to.equal(true);
    expect(await showLink(s.hostIfName)).to.equal(undefined);
    expect(
      await deletePodInterface({ netns: s.netns, ifName: s.ifName, hostIfName: s.hostIfName }),
    ).to.equal(false);
  });

  it("DEL with a vanished netns removes the host end, unless its MAC says another sandbox owns it", async () => {
    const s = spec(bindPath(), 3);
    expect(
      await deletePodInterface({
        netns: "/run/netns/gone-for-good",
        ifName: s.ifName,
        hostIfName: s.hostIfName,
        hostMac: "02:ff:ff:ff:ff:ff",
      }),
    ).to.equal(false);
    expect(await showLink(s.hostIfName)).to.not.equal(undefined);
    expect(
      await deletePodInterface({
        netns: "",
        ifName: s.ifName,
        hostIfName: s.hostIfName,
        hostMac: s.hostMac,
      }),
    ).to.equal(true);
    expect(await showLink(s.hostIfName)).to.equal(undefined);
    await deleteHostLink(s.hostIfName);
  });

  it("a failing pod-side step names the command and the netns", async () => {
    try {
      await configureContainerSide({
        netns: `/run/netns/${ns}`,
        ifName: "nosuch0",
        addresses: [{ cidr: "10.0.0.1/24" }],
        routes: [],
      });
      expect.fail("should throw");
    } catch (e) {
      expect((e as Error).message)
        .to.contain("addr add 10.0.0.1/24 dev nosuch0")
        .and.to.contain(ns);
    }
  });
});
