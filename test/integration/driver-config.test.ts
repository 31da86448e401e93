/**
 * The live configuration of a running driver: a ConfigMap swap (kubelet's atomic
 * `..data` rename) reaches the next pod within a second, pods set up before keep
 * what they were set up with, and a bad update keeps the last good config while
 * CniStatus and /metrics say what was wrong.
 */
import { expect } from "chai";
import type { CniStatusResponse } from "../../src/wire/types.js";
import { DriverHarness, expectNoCniError, sleep } from "../support/driver-harness.js";
import { createNetns, deleteNetns, linkIn, listHostLinks } from "../support/netns.js";
import { requireReferencePlugins, requireRoot } from "../support/requirements.js";

/** Polls CniStatus until `done` holds (bounded by count and time); returns the last answer. */
async function pollStatus(
  h: DriverHarness,
  done: (s: CniStatusResponse) => boolean,
  timeoutMs: number,
): Promise<{ status: CniStatusResponse; elapsedMs: number }> {
  const start = Date.now();
  let status = await h.client.cniStatus();
  for (let n = 0; n < 1000 && !done(status) && Date.now() - start < timeoutMs; n++) {
    await sleep(10);
    status = await h.client.cniStatus({}, { timeoutMs: 1000 });
  }
  return { status, elapsedMs: Date.now() - start };
}

describe("cni-driver serve: a ConfigMap swap (integration)", function () {
  this.timeout(30_000);
  let h: DriverHarness;

  before(async function () {
    requireRoot(this);
    requireReferencePlugins(this, "host-local", "portmap");
    h = new DriverHarness({ subnetOctet: 14 });
    await h.writeDefaultConfig({ mtu: 1500 });
    await h.start();
  });

  after(async () => {
    await h?.cleanup();
  });

  it("gives the next pod the new MTU within 1 s; the pod set up before keeps 1500 and tears down", async () => {
    createNetns(h.netnsName(1));
    const first = await h.client.setUpPod(h.podRequest(1));
    expectNoCniError(first);
    expect(linkIn(h.netnsName(1), "eth0")?.mtu).to.equal(1500);
    const before = (await h.client.cniStatus()).config?.generation ?? 0;
    expect(before).to.be.greaterThan(0);

    await h.writeDefaultConfig({ mtu: 1400 });
    const { status, elapsedMs } = await pollStatus(
      h,
      (s) => (s.config?.generation ?? 0) > before,
      1000,
    );
    expect(status.config?.generation, `generation after ${elapsedMs} ms`).to.be.greaterThan(before);
    expect(status.last_config_error).to.equal(null);

    createNetns(h.netnsName(2));
    const second = await h.client.setUpPod(h.podRequest(2));
    expectNoCniError(second);
    expect(linkIn(h.netnsName(2), "eth0")?.mtu, "new pod").to.equal(1400);
    expect(second.result?.interfaces.find((i) => i.name === "eth0")?.mtu).to.equal(1400);
    expect(linkIn(h.netnsName(1), "eth0")?.mtu, "old pod").to.equal(1500);
    expectNoCniError(await h.client.checkPod(h.podRequest(1)));

    expectNoCniError(await h.client.tearDownPod(h.podRequest(1)));
    expect(linkIn(h.netnsName(1), "eth0")).to.equal(undefined);
    expect(listHostLinks(h.hostVeth(1))).to.deep.equal([]);
    expectNoCniError(await h.client.tearDownPod(h.podRequest(2)));
    expect(h.leases()).to.deep.equal([]);
    expect(h.bridgePorts()).to.deep.equal([]);
    expect(h.cacheFiles()).to.deep.equal([]);
  });
});

describe("cni-driver serve: a bad ConfigMap update (integration)", function () {
  this.timeout(30_000);
  let h: DriverHarness;
  let pod = 0;

  before(async function () {
    requireRoot(this);
    requireReferencePlugins(this, "host-local", "portmap");
    h = new DriverHarness({ subnetOctet: 15 });
    await h.writeDefaultConfig();
    await h.start();
  });

  after(async () => {
    await h?.cleanup();
  });

  /** The harness conflist with the first plugin's host-local ranges replaced. */
  const withSubnet = (subnet: string): string => {
    const list = h.conflist() as { plugins: Array<Record<string, unknown>> };
    const first = list.plugins[0] as { ipam: Record<string, unknown> };
    first.ipam = { ...first.ipam, ranges: [[{ subnet }]] };
    return JSON.stringify(list);
  };

  const cases: Array<{ name: string; content: () => string; mentions: string[] }> = [
    {
      name: "invalid JSON",
      content: () => '{"cniVersion": "1.0.0", "name": "pod-network", "plugins": [',
      mentions: ["pod-network.conflist"],
    },
    {
      name: "an unknown plugin type",
      content: () => JSON.stringify(h.conflist({ chain: [{ type: "no-such-plugin" }] })),
      mentions: ["pod-network.conflist", "no-such-plugin"],
    },
    {
      name: "a type containing /",
      content: () => JSON.stringify(h.conflist({ chain: [{ type: "../sbin/portmap" }] })),
      mentions: ["pod-network.conflist", "../sbin/portmap"],
    },
    {
      name: "a subnet with host bits",
      content: () => withSubnet("10.244.15.5/24"),
      mentions: ["pod-network.conflist", "10.244.15.5/24"],
    },
    {
      name: "a subnet that is not a CIDR",
      content: () => withSubnet("not-a-cidr"),
      mentions: ["pod-network.conflist", "not-a-cidr"],
    },
  ];

  for (const c of cases) {
    it(`keeps the last good config after ${c.name}, and reports it in CniStatus and /metrics`, async () => {
      const good = await h.client.cniStatus();
      expect(good.ready).to.equal(true);
      expect(good.last_config_error).to.equal(null);
      const generation = good.config?.generation ?? 0;
      const errorsBefore = (await h.metric("cni_driver_config_reload_errors_total")) ?? -1;
      expect(errorsBefore).to.be.at.least(0);

      const writtenAt = Date.now();
      await h.writeConfig({ "pod-network.conflist": c.content() });
      const { status } = await pollStatus(h, (s) => s.last_config_error !== null, 5000);

      const err = status.last_config_error;
      expect(err, "last_config_error").to.not.equal(null);
      for (const m of c.mentions) expect(err?.message).to.contain(m);
      expect(err?.source).to.equal(h.configDir);
      expect(err?.at_unix_ms).to.be.at.least(writtenAt - 1000);
      expect(status.config?.generation, "generation kept").to.equal(generation);
      expect(status.ready).to.equal(true);
      expect(await h.metric("cni_driver_config_reload_errors_total")).to.be.greaterThan(
        errorsBefore,
      );
      expect(await h.metric("cni_driver_config_generation")).to.equal(generation);

      // A new pod is still served, by the last good config.
      pod += 1;
      createNetns(h.netnsName(pod));
      const add = await h.client.setUpPod(h.podRequest(pod));
      expectNoCniError(add);
      expect(add.result?.ips[0]?.address.startsWith("10.244.15.")).to.equal(true);
      expect(linkIn(h.netnsName(pod), "eth0")?.mtu).to.equal(1500);
      expectNoCniError(await h.client.tearDownPod(h.podRequest(pod)));
      deleteNetns(h.netnsName(pod));
      expect(h.leases()).to.deep.equal([]);

      // A good update clears the error.
      await h.writeDefaultConfig();
      const fixed = await pollStatus(h, (s) => s.last_config_error === null, 5000);
      expect(fixed.status.last_config_error).to.equal(null);
      expect(fixed.status.config?.generation).to.be.greaterThan(generation);
    });
  }
});
