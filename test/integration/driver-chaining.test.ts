/**
 * Debian's `tuning` and `bandwidth` chained after the built-in plugin: tuning sets
 * a sysctl of the pod's interface inside its netns; bandwidth, given the
 * `bandwidth` capability in runtimeConfig, shapes the pod's ingress with a tbf
 * qdisc on the host veth (which it finds in prevResult, listed without a sandbox)
 * and its egress through an ifb device of its own. CHECK passes; DEL removes the
 * ifb device and leaves nothing else behind.
 */
import { spawnSync } from "node:child_process";
import { expect } from "chai";
import { DriverHarness, expectNoCniError } from "../support/driver-harness.js";
import { createNetns, deleteHostLink, execIn, linkIn } from "../support/netns.js";
import { requireReferencePlugins, requireRoot } from "../support/requirements.js";

/** Names of the host's ifb devices. */
function ifbDevices(): string[] {
  const out = spawnSync("ip", ["-j", "link", "show", "type", "ifb"], { encoding: "utf8" }).stdout;
  return (JSON.parse(out || "[]") as Array<{ ifname: string }>).map((l) => l.ifname);
}

/** The qdisc kinds on a host device. */
function qdiscKinds(dev: string): string[] {
  const out = spawnSync("tc", ["-j", "qdisc", "show", "dev", dev], { encoding: "utf8" }).stdout;
  return (JSON.parse(out || "[]") as Array<{ kind: string }>).map((q) => q.kind);
}

describe("cni-driver serve: tuning and bandwidth chained after the built-in plugin (integration)", function () {
  this.timeout(30_000);
  let h: DriverHarness;
  let ifbBefore: string[] = [];

  before(async function () {
    requireRoot(this);
    requireReferencePlugins(this, "host-local", "tuning", "bandwidth");
    h = new DriverHarness({
      subnetOctet: 52,
      chain: [
        { type: "tuning", sysctl: { "net.ipv4.conf.eth0.arp_notify": "1" } },
        { type: "bandwidth", capabilities: { bandwidth: true } },
      ],
    });
    await h.writeDefaultConfig();
    await h.start();
    ifbBefore = ifbDevices();
  });

  after(async () => {
    // An ifb device a failed test left (bandwidth names it "bwp" + a hash of the container id).
    for (const dev of ifbDevices()) if (!ifbBefore.includes(dev)) deleteHostLink(dev);
    await h?.cleanup();
  });

  it("sets the pod's sysctl, shapes both directions, passes CHECK, and DEL leaves nothing", async () => {
    const ns = createNetns(h.netnsName(1));
    const request = h.podRequest(1, {
      stdin_config: Buffer.from(
        JSON.stringify({
          runtimeConfig: {
            bandwidth: {
              ingressRate: 8_000_000,
              ingressBurst: 80_000,
              egressRate: 4_000_000,
              egressBurst: 40_000,
            },
          },
        }),
      ),
    });
    const res = await h.client.setUpPod(request);
    expectNoCniError(res);
    expect(linkIn(ns, "eth0")?.ipv4).to.have.length(1);

    const sysctl = execIn(ns, ["sysctl", "-n", "net.ipv4.conf.eth0.arp_notify"]);
    expect(sysctl.stdout.trim(), sysctl.stderr).to.equal("1");

    // Ingress: a tbf on the host veth. Egress: an ifb device, with its own tbf.
    expect(qdiscKinds(h.hostVeth(1))).to.include("tbf");
    const ifbs = ifbDevices().filter((d) => !ifbBefore.includes(d));
    expect(ifbs, "bandwidth's ifb device").to.have.length(1);
    expect(qdiscKinds(ifbs[0] as string)).to.include("tbf");

    expectNoCniError(await h.client.checkPod(request));

    expectNoCniError(await h.client.tearDownPod(request));
    expect(
      ifbDevices().filter((d) => !ifbBefore.includes(d)),
      "ifb devices after DEL",
    ).to.deep.equal([]);
    expect(linkIn(ns, "eth0"), "the pod's interface after DEL").to.equal(undefined);
    expect(h.leases()).to.deep.equal([]);
    expect(h.bridgePorts()).to.deep.equal([]);
    expect(h.cacheFiles()).to.deep.equal([]);
  });
});
