/**
 * A network at CNI 1.1.0, where STATUS and GC reach the plugins. The built-in
 * plugin asks its IPAM plugin's VERSION first: Debian's host-local (1.1.1)
 * predates 1.1.0, refuses the network's ADD and would fail STATUS with
 * "missing containerID"; instead STATUS says plainly that the IPAM plugin does
 * not speak the network's version. host-local in-process does: STATUS is clean
 * and GC releases leases no attachment holds. An IPAM plugin that cannot run
 * at all fails STATUS, naming it.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { expect } from "chai";
import { DriverHarness, expectNoCniError } from "../support/driver-harness.js";
import { createNetns, deleteNetns } from "../support/netns.js";
import { requireReferencePlugins, requireRoot } from "../support/requirements.js";

/** A driver for one network at CNI 1.1.0. */
function cni11Harness(octet: number, flags: string[]): DriverHarness {
  return new DriverHarness({ subnetOctet: octet, cniVersion: "1.1.0", extraFlags: flags });
}

/** Writes its config (`ipamType` in place of host-local, when given) and starts it. */
async function start(h: DriverHarness, ipamType?: string): Promise<void> {
  const list = h.conflist() as { plugins: Array<{ ipam: Record<string, unknown> }> };
  if (ipamType) list.plugins[0]!.ipam = { ...list.plugins[0]!.ipam, type: ipamType };
  await h.writeConfig({ "pod-network.conflist": JSON.stringify(list) });
  await h.start();
}

describe("cni-driver serve --host-local exec: a CNI 1.1.0 network (integration)", function () {
  this.timeout(30_000);
  let h: DriverHarness;

  before(async function () {
    requireRoot(this);
    requireReferencePlugins(this, "host-local");
    h = cni11Harness(36, ["--host-local", "exec"]);
    await start(h);
  });

  after(async () => {
    deleteNetns(h?.netnsName(1));
    await h?.cleanup();
  });

  it("fails STATUS with code 50, saying the host-local binary does not speak 1.1.0", async () => {
    const status = await h.client.cniStatus({ network: h.network });
    expect(status.error?.code, JSON.stringify(status.error)).to.equal(50);
    expect(status.error?.msg)
      .to.contain("IPAM plugin host-local speaks CNI")
      .and.to.contain("1.0.0")
      .and.to.contain("not this network's 1.1.0");
    expect(status.error?.msg).to.not.contain("missing containerID");
  });

  it("refuses ADD with the binary's own version error, leaving nothing", async () => {
    createNetns(h.netnsName(1));
    const res = await h.client.setUpPod(h.podRequest(1));
    expect(res.error?.code).to.equal(1);
    expect(res.error?.msg).to.contain("incompatible CNI versions");
    expect(h.leases()).to.deep.equal([]);
    expect(h.cacheFiles()).to.deep.equal([]);
  });

  it("GCs without an error: the binary is not asked a verb it does not know", async () => {
    const gc = await h.client.garbageCollect({
      networks: [{ network: h.network, valid_attachments: [] }],
    });
    expect(gc.error, JSON.stringify(gc.error)).to.equal(null);
    expect(gc.errors).to.deep.equal([]);
  });
});

describe("cni-driver serve --host-local in-process: a CNI 1.1.0 network (integration)", function () {
  this.timeout(30_000);
  let h: DriverHarness;
  const pods = [1, 2];

  before(async function () {
    requireRoot(this);
    requireReferencePlugins(this, "host-local");
    h = cni11Harness(37, ["--host-local", "in-process"]);
    await start(h);
  });

  after(async () => {
    for (const i of pods) deleteNetns(h?.netnsName(i));
    await h?.cleanup();
  });

  it("answers STATUS without an error", async () => {
    const status = await h.client.cniStatus({ network: h.network });
    expect(status.error, JSON.stringify(status.error)).to.equal(null);
    expect(status.ready).to.equal(true);
  });

  it("GC tears down the attachment left out of the valid set, and IPAM's GC releases a lease no attachment holds", async () => {
    const ips: string[] = [];
    for (const i of pods) {
      createNetns(h.netnsName(i));
      const res = await h.client.setUpPod(h.podRequest(i));
      expectNoCniError(res);
      ips.push((res.result?.ips[0]?.address ?? "").split("/")[0] as string);
    }
    // A lease an ADD killed half-way left: no cache entry holds it.
    const ghost = "10.244.37.200";
    writeFileSync(join(h.dataDir, h.network, ghost), "ghost-sandbox\r\neth0");
    expect(h.leases()).to.have.members([...ips, ghost]);

    const gc = await h.client.garbageCollect({
      networks: [
        {
          network: h.network,
          valid_attachments: [{ container_id: h.containerId(1), ifname: "eth0" }],
        },
      ],
    });
    expect(gc.error, JSON.stringify(gc.error)).to.equal(null);
    expect(gc.errors).to.deep.equal([]);
    expect(gc.removed_attachments).to.equal(1);
    expect(h.leases()).to.deep.equal([ips[0]]);
    expect(h.cacheFiles()).to.have.length(1);
  });
});

describe("cni-driver serve: a CNI 1.1.0 network whose IPAM plugin is missing (integration)", function () {
  this.timeout(30_000);
  let h: DriverHarness;

  before(async function () {
    requireRoot(this);
    requireReferencePlugins(this, "host-local");
    h = cni11Harness(38, []);
    await start(h, "no-such-ipam");
  });

  after(async () => {
    await h?.cleanup();
  });

  it("fails STATUS, naming the plugin it cannot find", async () => {
    const status = await h.client.cniStatus({ network: h.network });
    expect(status.error).to.not.equal(null);
    expect(status.error?.msg).to.contain('failed to find plugin "no-such-ipam"');
  });
});
