import { type ChildProcess, execFileSync, spawn, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect } from "chai";
import { choosePlumbing, type PlumbingBackendName } from "../../src/plumbing/backend.js";
import { setBridgeForKubeProxy } from "../../src/plumbing/bridge.js";
import { IpCommandError } from "../../src/plumbing/ip-batch.js";
import { iproute2Plumbing } from "../../src/plumbing/iproute2.js";
import { bridgeMac } from "../../src/plumbing/mac.js";
import type { RtnetlinkPlumbing } from "../../src/plumbing/netlink/index.js";
import { decodeLink, readExchange } from "../../src/plumbing/netlink/rtnetlink-decode.js";
import { encodeGetLink } from "../../src/plumbing/netlink/rtnetlink-encode.js";
import { netnsName } from "../../src/plumbing/netns.js";
import { netnsLinkRef } from "../../src/plumbing/pod-interface.js";
import type { LinkInfo } from "../../src/plumbing/pod-interface-types.js";
import type { PodPlumbing } from "../../src/plumbing/pod-plumbing.js";
import { createNetns, deleteNetns, uniqueTag } from "../support/netns.js";
import { patient } from "../support/patience.js";
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

/**
 * The implementation a suite runs on, chosen as the daemon chooses it with
 * CNI_DRIVER_PLUMBING=`backend`; the netlink one needs the native addon
 * (scripts/build-native.sh): skipped without it outside CI, a failure in CI.
 */
async function useBackend(ctx: Mocha.Context, backend: PlumbingBackendName): Promise<PodPlumbing> {
  try {
    const chosen = await choosePlumbing(backend);
    expect(chosen.name).to.equal(backend);
    return chosen.plumbing;
  } catch (err) {
    if (process.env.CI === "true") throw err;
    console.warn(`    [skipped: requirement missing: ${(err as Error).message}]`);
    ctx.skip();
  }
}

/** A link's kind-specific details, as `ip -d` shows them (bridge and bridge-port settings). */
function details(name: string) {
  return JSON.parse(
    spawnSync("ip", ["-j", "-d", "link", "show", name], { encoding: "utf8" }).stdout,
  )[0]?.linkinfo;
}

// The same checks, whole, against each implementation of PodPlumbing.
for (const backend of ["netlink", "iproute2"] as const)
  describe(`plumbing: a pod's veth pair through ${backend} (root)`, function () {
    this.timeout(30_000);
    let p: PodPlumbing;
    const tag = uniqueTag();
    const bridge = `cpb${tag}`;
    const ns = `cpl-${tag}`;
    let sleeper: ChildProcess | undefined;
    let tmp = "";
    const bindPath = () => join(tmp, "netns-bind");

    before(async function () {
      requireRoot(this);
      p = await useBackend(this, backend);
      tmp = mkdtempSync(join(tmpdir(), "cni-driver-plumbing-"));
      createNetns(ns);
    });

    after(async () => {
      sleeper?.kill("SIGKILL");
      if (tmp) {
        spawnSync("umount", [bindPath()], { stdio: "ignore" });
        rmSync(tmp, { recursive: true, force: true });
      }
      for (const l of [
        `mph${tag}1`,
        `mph${tag}2`,
        `mph${tag}3`,
        `mph${tag}6`,
        bridge,
        `${bridge}m`,
      ])
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

    it("makes a bridge and a port without kube-proxy's settings when asked (the driver steers), and sets them again", async () => {
      const b2 = `${bridge}m`;
      await p.ensureBridge(b2, [], 1450, false);
      const s = spec(`/run/netns/${ns}`, 6);
      await p.createVethPair(s, { bridge: b2, hairpin: false });
      expect(details(s.hostIfName)?.info_slave_data?.hairpin, "hairpin").to.equal(false);
      expect(details(b2)?.info_data?.nf_call_iptables, "nf_call_iptables").to.equal(0);
      await setBridgeForKubeProxy(b2, { netfilter: true, hairpin: true });
      expect(details(s.hostIfName)?.info_slave_data?.hairpin, "hairpin").to.equal(true);
      expect(details(b2)?.info_data?.nf_call_iptables, "nf_call_iptables").to.equal(1);
      await p.deletePodInterface({
        netns: s.netns,
        ifName: s.ifName,
        hostIfName: s.hostIfName,
        hostMac: s.hostMac,
      });
    });

    it("creates the pair from the host for a /run/netns path, on the bridge, then configures the pod side", async () => {
      await p.ensureBridge(bridge, ["10.244.233.1/24"], 1450);
      const s = spec(`/run/netns/${ns}`, 1);
      await p.createVethPair(s, { bridge });
      expect(await p.listBridgePorts(bridge)).to.include(s.hostIfName);
      // Services: a pod reaching itself (hairpin), replies across the bridge un-NATed (br_netfilter).
      expect(details(s.hostIfName)?.info_slave_data?.hairpin, "hairpin").to.equal(true);
      expect(details(bridge)?.info_data?.nf_call_iptables, "nf_call_iptables").to.equal(1);
      const host = await p.showLink(s.hostIfName);
      expect(host?.address).to.equal(s.hostMac);
      expect(host?.mtu).to.equal(1450);
      await p.configureContainerSide({
        netns: s.netns,
        ifName: s.ifName,
        addresses: [{ cidr: "10.244.233.5/24" }],
        routes: [{ dst: "0.0.0.0/0", gw: "10.244.233.1" }],
      });
      const state = await p.inspectPodInterface(s.netns, s.ifName, false);
      expect(state?.link.address).to.equal(s.containerMac);
      expect(state?.link.linkinfo?.info_kind).to.equal("veth");
      expect(state?.addresses.map((a) => `${a.local}/${a.prefixlen}`)).to.include(
        "10.244.233.5/24",
      );
      expect(
        state?.routes.some((r) => r.dst === "default" && r.gateway === "10.244.233.1"),
      ).to.equal(true);
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
      await p.createVethPair(s, {});
      expect((await p.showLink(s.hostIfName))?.operstate).to.not.equal(undefined);
      expect(await p.inspectPodInterface(`/run/netns/${ns}`, s.ifName, false)).to.not.equal(
        undefined,
      );
      expect(
        await p.deletePodInterface({ netns: path, ifName: s.ifName, hostIfName: s.hostIfName }),
      ).to.equal(true);
      expect(await p.showLink(s.hostIfName)).to.equal(undefined);
    });

    it("creates the pair from inside the netns for a path ip cannot name (a bind mount)", async () => {
      writeFileSync(bindPath(), "");
      const m = spawnSync("mount", ["--bind", `/run/netns/${ns}`, bindPath()], {
        encoding: "utf8",
      });
      expect(m.status, m.stderr).to.equal(0);
      const s = spec(bindPath(), 3);
      await p.createVethPair(s, { bridge });
      expect(await p.listBridgePorts(bridge)).to.include(s.hostIfName);
      expect((await p.inspectPodInterface(bindPath(), s.ifName, false))?.link.address).to.equal(
        s.containerMac,
      );
    });

    it("DEL removes the pair through the netns, and is idempotent", async () => {
      const s = spec(`/run/netns/${ns}`, 1);
      expect(
        await p.deletePodInterface({ netns: s.netns, ifName: s.ifName, hostIfName: s.hostIfName }),
      ).to.equal(true);
      expect(await p.showLink(s.hostIfName)).to.equal(undefined);
      expect(
        await p.deletePodInterface({ netns: s.netns, ifName: s.ifName, hostIfName: s.hostIfName }),
      ).to.equal(false);
    });

    it("DEL with a vanished netns removes the host end, unless its MAC says another sandbox owns it", async () => {
      const s = spec(bindPath(), 3);
      expect(
        await p.deletePodInterface({
          netns: "/run/netns/gone-for-good",
          ifName: s.ifName,
          hostIfName: s.hostIfName,
          hostMac: "02:ff:ff:ff:ff:ff",
        }),
      ).to.equal(false);
      expect(await p.showLink(s.hostIfName)).to.not.equal(undefined);
      expect(
        await p.deletePodInterface({
          netns: "",
          ifName: s.ifName,
          hostIfName: s.hostIfName,
          hostMac: s.hostMac,
        }),
      ).to.equal(true);
      expect(await p.showLink(s.hostIfName)).to.equal(undefined);
      await p.deleteHostLink(s.hostIfName);
    });

    it("DEL with a vanished netns and no recorded MAC leaves the host end: it may be a newer sandbox's", async () => {
      const s = spec(`/run/netns/${ns}`, 6);
      await p.createVethPair(s, {});
      try {
        expect(
          await p.deletePodInterface({
            netns: "/run/netns/gone-for-good",
            ifName: s.ifName,
            hostIfName: s.hostIfName,
          }),
        ).to.equal(false);
        expect((await p.showLink(s.hostIfName))?.address).to.equal(s.hostMac);
        expect(await p.inspectPodInterface(s.netns, s.ifName, false)).to.not.equal(undefined);
      } finally {
        await p.deleteHostLink(s.hostIfName);
      }
    });

    it("DEL with a netns path left as an empty file (unmounted, not unlinked) takes it for gone", async () => {
      const s = spec(`/run/netns/${ns}`, 6);
      await p.createVethPair(s, {});
      const unmounted = join(tmp, "unmounted-netns");
      writeFileSync(unmounted, "");
      expect(
        await p.deletePodInterface({
          netns: unmounted,
          ifName: s.ifName,
          hostIfName: s.hostIfName,
          hostMac: s.hostMac,
        }),
      ).to.equal(true);
      expect(await p.showLink(s.hostIfName)).to.equal(undefined);
    });

    it("creates a bridge with a MAC of its own, which a port with a lower MAC does not change", async () => {
      const br = `${bridge}m`;
      await p.ensureBridge(br, ["10.244.234.1/24"], 1500);
      expect((await p.showLink(br))?.address).to.equal(bridgeMac(br));
      const s = { ...spec(`/run/netns/${ns}`, 6), hostMac: "02:00:00:00:00:00" };
      await p.createVethPair(s, { bridge: br });
      try {
        expect(await p.listBridgePorts(br)).to.deep.equal([s.hostIfName]);
        expect((await p.showLink(br))?.address).to.equal(bridgeMac(br));
      } finally {
        await p.deleteHostLink(s.hostIfName);
        await p.deleteHostLink(br);
      }
    });

    it("adds an IPv6 address without duplicate address detection: usable when ADD answers", async () => {
      const s = spec(`/run/netns/${ns}`, 6);
      await p.createVethPair(s, {});
      try {
        await p.configureContainerSide({
          netns: s.netns,
          ifName: s.ifName,
          addresses: [{ cidr: "fd98:6::6/64" }],
          routes: [],
        });
        const shown = spawnSync("ip", ["-n", ns, "-6", "addr", "show", "dev", s.ifName], {
          encoding: "utf8",
        }).stdout;
        const line = shown.split("\n").find((l) => l.includes("fd98:6::6/64")) ?? "";
        expect(line, shown).to.contain("nodad").and.not.contain("tentative");
      } finally {
        await p.deleteHostLink(s.hostIfName);
      }
    });

    it("replaces a host end left by another sandbox of the pod, but never takes a name the pod's own netns holds", async () => {
      const old = `cpo-${tag}`;
      createNetns(old);
      try {
        // The older sandbox: the same host name, its peer in another netns.
        const stale = { ...spec(`/run/netns/${old}`, 4), hostMac: "02:00:00:00:04:99" };
        await p.createVethPair(stale, { bridge });
        const s = spec(`/run/netns/${ns}`, 4);
        expect(await p.createVethPairReplacingStale(s, { bridge })).to.equal(true);
        expect((await p.showLink(s.hostIfName))?.address).to.equal(s.hostMac);
        expect(await p.listBridgePorts(bridge)).to.include(s.hostIfName);
        expect(await p.inspectPodInterface(s.netns, s.ifName, false)).to.not.equal(undefined);
        expect(await p.inspectPodInterface(stale.netns, stale.ifName, false)).to.equal(undefined);

        // Again for the same netns: its eth4 is there, so the host end is not stale.
        const again = { ...s, hostMac: "02:00:00:00:04:98" };
        const err = await p.createVethPairReplacingStale(again, { bridge }).catch((e) => e);
        expect(err).to.be.instanceOf(IpCommandError);
        expect((err as IpCommandError).exists).to.equal(true);
        expect((await p.showLink(s.hostIfName))?.address, "the pod's host end kept").to.equal(
          s.hostMac,
        );
        // A fresh name is no replacement at all.
        const fresh = { ...spec(`/run/netns/${old}`, 5), hostIfName: `mph${tag}5` };
        expect(await p.createVethPairReplacingStale(fresh, {})).to.equal(false);
      } finally {
        for (const l of [`mph${tag}4`, `mph${tag}5`])
          spawnSync("ip", ["link", "del", l], { stdio: "ignore" });
        deleteNetns(old);
      }
    });

    it("takes an interface name iproute2 reads as a keyword (up), and says plainly what batch mode cannot carry (#)", async () => {
      const keyword = { ...spec(`/run/netns/${ns}`, 6), ifName: "up" };
      await p.createVethPair(keyword, {});
      await p.configureContainerSide({
        netns: keyword.netns,
        ifName: "up",
        addresses: [{ cidr: "10.244.235.6/24" }],
        routes: [],
      });
      expect((await p.inspectPodInterface(keyword.netns, "up", false))?.link.address).to.equal(
        keyword.containerMac,
      );
      expect(
        await p.deletePodInterface({
          netns: keyword.netns,
          ifName: "up",
          hostIfName: keyword.hostIfName,
          hostMac: keyword.hostMac,
        }),
      ).to.equal(true);
      expect(await p.showLink(keyword.hostIfName)).to.equal(undefined);

      const hash = { ...spec(`/run/netns/${ns}`, 6), ifName: "net#1" };
      const made = await p.createVethPair(hash, {}).then(
        () => undefined,
        (e: unknown) => e as Error,
      );
      if (backend === "netlink") {
        expect(made).to.equal(undefined);
        await p.deleteHostLink(hash.hostIfName);
      } else {
        expect(made?.message).to.contain("cannot carry a '#'");
        expect(await p.showLink(hash.hostIfName)).to.equal(undefined);
      }
    });

    it("a failing pod-side step names the command and the netns", async () => {
      try {
        await p.configureContainerSide({
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

describe("plumbing: netlink specifics (root)", function () {
  this.timeout(120_000);
  /** This suite's own implementation, its worker and sockets apart from any other suite's. */
  let nl: RtnetlinkPlumbing;
  const tag = uniqueTag();
  const bridge = `cnb${tag}`;
  const ns = `cnl-${tag}`;
  const nsPath = `/run/netns/${ns}`;
  const many = Array.from({ length: 200 }, (_, i) => `cnm-${tag}-${i}`);
  const hostLinks = [1, 2, 3, 4, 5, 6, 7, 8, 9].map((i) => `mnl${tag}${i}`);

  const ipBatch = (lines: string[]) => {
    const r = spawnSync("ip", ["-force", "-batch", "-"], {
      input: `${lines.join("\n")}\n`,
      encoding: "utf8",
    });
    if (r.status !== 0) throw new Error(`ip -batch: ${r.stderr}`);
  };

  /** Imports RtnetlinkPlumbing in a script run by runModule. */
  const importNetlink = `const { RtnetlinkPlumbing } = await import(${JSON.stringify(new URL("../../src/plumbing/netlink/index.ts", import.meta.url).href)});`;

  /**
   * Runs an ES module `script` in a Node process of its own (with `env`);
   * answers its last line of output, parsed as JSON.
   */
  const runModule = (script: string, env: NodeJS.ProcessEnv = {}, what = "script"): unknown => {
    const r = spawnSync(
      process.execPath,
      ["--import", "tsx", "--input-type=module", "-e", script],
      {
        encoding: "utf8",
        cwd: new URL("../../", import.meta.url).pathname,
        env: { ...process.env, ...env },
        timeout: patient(60_000),
      },
    );
    expect(r.status, `${what}: ${r.signal ?? ""} ${r.stderr}`).to.equal(0);
    return JSON.parse(r.stdout.trim().split("\n").pop() ?? "null");
  };

  before(async function () {
    requireRoot(this);
    nl = (await useBackend(this, "netlink")) as RtnetlinkPlumbing;
    createNetns(ns);
  });

  after(async () => {
    for (const l of [...hostLinks, bridge])
      spawnSync("ip", ["link", "del", l], { stdio: "ignore" });
    deleteNetns(ns);
    spawnSync("ip", ["-force", "-batch", "-"], {
      input: many.map((n) => `netns del ${n}`).join("\n"),
      stdio: ["pipe", "ignore", "ignore"],
    });
  });

  const spec = (netns: string, i: number) => ({
    netns,
    ifName: `eth${i}`,
    hostIfName: `mnl${tag}${i}`,
    mtu: 1400,
    containerMac: `02:00:00:00:1${i}:01`,
    hostMac: `02:00:00:00:1${i}:02`,
  });

  /** What both backends must report alike, in a stable order. */
  const comparable = (l: LinkInfo | undefined) =>
    l && {
      ifname: l.ifname,
      address: l.address,
      mtu: l.mtu,
      operstate: l.operstate,
      flags: l.flags,
      kind: l.linkinfo?.info_kind,
      master: l.master,
    };

  async function snapshot(p: PodPlumbing, s: ReturnType<typeof spec>) {
    const pod = await p.inspectPodInterface(s.netns, s.ifName, true);
    return {
      host: comparable(await p.showLink(s.hostIfName)),
      bridge: comparable(await p.showLink(bridge)),
      ports: (await p.listBridgePorts(bridge)).sort(),
      pod: comparable(pod?.link),
      podLo: comparable(await p.showLink("lo", s.netns)),
      addresses: pod?.addresses.map((a) => `${a.family} ${a.local}/${a.prefixlen}`).sort(),
      routes: pod?.routes.map((r) => `${r.dst} via ${r.gateway ?? "-"}`).sort(),
    };
  }

  it("reads links, addresses and routes exactly as the iproute2 backend does", async () => {
    await nl.ensureBridge(bridge, ["10.244.234.1/24", "fd00:234::1/64"], 1400);
    const s = spec(nsPath, 1);
    await nl.createVethPair(s, { bridge });
    await nl.configureContainerSide({
      netns: s.netns,
      ifName: s.ifName,
      addresses: [{ cidr: "10.244.234.5/24" }, { cidr: "fd00:234::5/64" }],
      routes: [
        { dst: "0.0.0.0/0", gw: "10.244.234.1" },
        { dst: "10.96.0.0/12", gw: "10.244.234.1" },
        { dst: "::/0", gw: "fd00:234::1" },
      ],
    });
    // The kernel sets operstate asynchronously (linkwatch): compare once both ends settled.
    const deadline = Date.now() + 5000;
    while (Date.now() < deadline) {
      const [h, p] = [await nl.showLink(s.hostIfName), await nl.showLink(s.ifName, s.netns)];
      if (h?.operstate === "UP" && p?.operstate === "UP") break;
      await new Promise((r) => setTimeout(r, 50));
    }
    const viaNetlink = await snapshot(nl, s);
    const viaIproute2 = await snapshot(iproute2Plumbing, s);
    expect(viaNetlink).to.deep.equal(viaIproute2);
    expect(viaNetlink.host?.master).to.equal(bridge);
    expect(viaNetlink.addresses).to.include.members([
      "inet 10.244.234.5/24",
      "inet6 fd00:234::5/64",
    ]);
    expect(viaNetlink.routes).to.include.members([
      "default via 10.244.234.1",
      "10.96.0.0/12 via 10.244.234.1",
      "10.244.234.0/24 via -",
      "default via fd00:234::1",
    ]);
    const ping = spawnSync("ip", ["netns", "exec", ns, "ping", "-c1", "-W2", "10.244.234.1"], {
      encoding: "utf8",
    });
    expect(ping.status, ping.stdout + ping.stderr).to.equal(0);
  });

  it("exits cleanly while the kernel still finishes deletions it answered early", () => {
    const specs = [4, 5, 6, 7, 8, 9].map((i) => spec(nsPath, i));
    // Every pair deleted at once; the process ends as soon as the answers are in.
    const script = `
      ${importNetlink}
      const nl = new RtnetlinkPlumbing();
      const specs = ${JSON.stringify(specs)};
      for (const s of specs) await nl.createVethPair(s, {});
      const removed = await Promise.all(specs.map((s) =>
        nl.deletePodInterface({ netns: s.netns, ifName: s.ifName, hostIfName: s.hostIfName })));
      console.log(JSON.stringify(removed));
    `;
    for (let run = 1; run <= 3; run++) {
      expect(runModule(script, {}, `run ${run}`)).to.deep.equal(specs.map(() => true));
    }
  });

  it("closes the pod netns socket when the pod's interface is deleted", async () => {
    const s = spec(nsPath, 1);
    await nl.sweep();
    expect(await nl.inspectPodInterface(s.netns, s.ifName, false)).to.not.equal(undefined);
    const before = (await nl.stats()).cached;
    expect(before).to.be.at.least(1);
    expect(
      await nl.deletePodInterface({ netns: s.netns, ifName: s.ifName, hostIfName: s.hostIfName }),
    ).to.equal(true);
    expect((await nl.stats()).cached).to.equal(before - 1);
  });

  it("sets a pod up and down without exec'ing anything (ip and nsenter unavailable)", () => {
    const s = spec(nsPath, 2);
    const script = `
      ${importNetlink}
      const nl = new RtnetlinkPlumbing();
      const s = ${JSON.stringify(s)};
      await nl.ensureBridge(${JSON.stringify(bridge)}, ["10.244.234.1/24"], 1400);
      await nl.createVethPair(s, { bridge: ${JSON.stringify(bridge)} });
      await nl.configureContainerSide({ netns: s.netns, ifName: s.ifName,
        addresses: [{ cidr: "10.244.234.6/24" }], routes: [{ dst: "0.0.0.0/0", gw: "10.244.234.1" }] });
      const state = await nl.inspectPodInterface(s.netns, s.ifName, false);
      const ports = await nl.listBridgePorts(${JSON.stringify(bridge)});
      const removed = await nl.deletePodInterface({ netns: s.netns, ifName: s.ifName, hostIfName: s.hostIfName });
      console.log(JSON.stringify({ mac: state?.link.address, onBridge: ports.includes(s.hostIfName), removed }));
    `;
    const out = runModule(script, {
      CNI_DRIVER_IP_BIN: "/nonexistent/ip",
      CNI_DRIVER_NSENTER_BIN: "/nonexistent/nsenter",
    });
    expect(out).to.deep.equal({
      mac: s.containerMac,
      onBridge: true,
      removed: true,
    });
  });

  it("ends the worker after a quiet time, with its sockets closed, and starts another at the next call", () => {
    // In a process of its own: the quiet time is shortened there, not in this one's worker.
    const script = `
      import { readdirSync, readFileSync, readlinkSync } from "node:fs";
      ${importNetlink}
      const threads = () => Number(/^Threads:\\s+(\\d+)$/m.exec(readFileSync("/proc/self/status", "utf8"))[1]);
      // The netlink sockets and netns files open: what the worker opens. Node opens and
      // closes fds of its own (pipes, other sockets) around start-up, which are not counted.
      const netlinkInodes = () => new Set(readFileSync("/proc/self/net/netlink", "utf8").trim().split("\\n").slice(1).map((l) => l.trim().split(/\\s+/).at(-1)));
      const fds = () => {
        const inodes = netlinkInodes();
        return readdirSync("/proc/self/fd").filter((fd) => {
          try {
            const target = readlinkSync("/proc/self/fd/" + fd);
            return target.startsWith("net:") || inodes.has(/^socket:\\[(\\d+)\\]$/.exec(target)?.[1]);
          } catch { return false; }
        }).length;
      };
      const until = async (what, ok) => {
        const tries = 400 * Number(process.env.CNI_DRIVER_TEST_PATIENCE || 1);
        for (let i = 0; i < tries; i++) { if (ok()) return; await new Promise((r) => setTimeout(r, 50)); }
        throw new Error("still waiting for " + what);
      };
      const nl = new RtnetlinkPlumbing({ quietMs: 300 });
      const before = { threads: threads(), fds: fds() };
      const first = (await nl.showLink("lo", ${JSON.stringify(nsPath)}))?.ifname;
      const during = { threads: threads(), sockets: (await nl.stats()).cached };
      await until("the worker to end", () => threads() === before.threads);
      const after = { threads: threads(), fds: fds() };
      const again = (await nl.showLink("lo", ${JSON.stringify(nsPath)}))?.ifname;
      console.log(JSON.stringify({ before, first, during, after, again }));
      process.exit(0);
    `;
    const out = runModule(script) as {
      first: string;
      during: { threads: number; sockets: number };
      after: { fds: number };
      before: { threads: number; fds: number };
      again: string;
    };
    expect(out.first).to.equal("lo");
    expect(out.during.threads).to.be.greaterThan(out.before.threads);
    expect(out.during.sockets).to.equal(1);
    // Nothing the worker opened is left: the host socket and the netns one are closed.
    expect(out.after.fds).to.equal(out.before.fds);
    expect(out.again).to.equal("lo");
  });

  it("keeps at most 64 netns sockets and leaks no fd: 200 pods' netns opened, then removed", async () => {
    ipBatch(many.map((n) => `netns add ${n}`));
    await nl.sweep();
    const base = await nl.stats();
    for (const n of many)
      expect((await nl.showLink("lo", `/run/netns/${n}`))?.ifname).to.equal("lo");
    const full = await nl.stats();
    expect(full.cached).to.equal(64);
    expect(full.opened - base.opened).to.equal(200);
    expect(full.processFds - base.processFds).to.equal(64 - base.cached);
    ipBatch(many.map((n) => `netns del ${n}`));
    await nl.sweep();
    const after = await nl.stats();
    expect(after.cached).to.equal(0);
    expect(after.opened - after.closed).to.equal(1); // the host socket
    expect(after.processFds).to.equal(base.processFds - base.cached);
  });

  it("a netns deleted and made again at the same path is not answered by the old one's socket", async () => {
    const path = `/run/netns/${many[0]}`;
    ipBatch([`netns add ${many[0]}`]);
    execFileSync("ip", [
      "-n",
      `${many[0]}`,
      "link",
      "add",
      "probe0",
      "type",
      "veth",
      "peer",
      "name",
      "probe1",
    ]);
    expect((await nl.showLink("probe0", path))?.linkinfo?.info_kind).to.equal("veth");
    ipBatch([`netns del ${many[0]}`, `netns add ${many[0]}`]);
    expect(await nl.showLink("probe0", path)).to.equal(undefined);
    expect((await nl.showLink("lo", path))?.ifname).to.equal("lo");
  });

  it("a missing netns is an error naming it (ENOENT), not a missing link", async () => {
    const gone = `/run/netns/cnl-gone-${tag}`;
    try {
      await nl.showLink("lo", gone);
      expect.fail("should throw");
    } catch (e) {
      expect(e).to.be.instanceOf(IpCommandError);
      expect(e).to.include({ code: "ENOENT", notFound: false });
      expect((e as Error).message).to.contain(gone);
    }
    try {
      await nl.createVethPair(spec(gone, 3), {});
      expect.fail("should throw");
    } catch (e) {
      expect((e as Error).message)
        .to.contain(gone)
        .and.to.contain("ENOENT");
    }
    expect(await nl.showLink(`mnl${tag}3`)).to.equal(undefined);
  });

  it("a name already taken: exists, named in the message, nothing left behind", async () => {
    const s = spec(nsPath, 3);
    await nl.createVethPair(s, {});
    try {
      await nl.createVethPair({ ...s, ifName: "eth9", containerMac: "02:00:00:00:19:01" }, {});
      expect.fail("should throw");
    } catch (e) {
      expect(e).to.be.instanceOf(IpCommandError);
      expect((e as IpCommandError).exists).to.equal(true);
      expect((e as Error).message).to.contain(`link add ${s.hostIfName}`);
    }
    expect(await nl.showLink("eth9", nsPath)).to.equal(undefined);
    expect(
      await nl.deletePodInterface({ netns: nsPath, ifName: s.ifName, hostIfName: s.hostIfName }),
    ).to.equal(true);
  });

  it("a raw exchange crosses to the worker and back", async () => {
    const answer = await nl.request(undefined, encodeGetLink(77, { name: "lo" }));
    const out = readExchange(answer, 77);
    expect(out.error).to.equal(undefined);
    expect(decodeLink(out.messages[0]!)).to.include({ ifname: "lo", index: 1 });
  });
});
