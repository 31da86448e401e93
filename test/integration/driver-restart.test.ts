/**
 * The driver process dies and comes back: a crash (SIGKILL) after pods were set up
 * loses nothing — the restarted driver rebuilds its attachments from the result
 * cache and tears every pod down cleanly — and SIGTERM is a clean exit.
 */
import { expect } from "chai";
import {
  DriverHarness,
  expectNoCniError,
  forEachHostLocalMode,
} from "../support/driver-harness.js";
import { createNetns, deleteNetns, linkIn, listNetns, pingFrom } from "../support/netns.js";
import { requireReferencePlugins, requireRoot } from "../support/requirements.js";

const PODS = 10;

forEachHostLocalMode({ "in-process": 16, exec: 26 }, ({ hostLocal, flags, octet }) => {
  describe(`cni-driver serve, host-local ${hostLocal}: restart after a crash (integration)`, function () {
    this.timeout(60_000);
    let h: DriverHarness;
    const indexes = Array.from({ length: PODS }, (_, i) => i + 1);
    let addresses: string[] = [];

    before(async function () {
      requireRoot(this);
      requireReferencePlugins(this, "host-local", "portmap");
      h = new DriverHarness({ subnetOctet: octet, extraFlags: flags });
      await h.writeDefaultConfig();
      await h.start();
    });

    after(async () => {
      await h?.cleanup();
    });

    it("sets up 10 pods, and they keep their network while the driver is killed with SIGKILL", async () => {
      for (const i of indexes) createNetns(h.netnsName(i));
      const results = await Promise.all(indexes.map((i) => h.client.setUpPod(h.podRequest(i))));
      for (const r of results) expectNoCniError(r);
      addresses = results.map((r) => r.result?.ips[0]?.address ?? "");
      expect(new Set(addresses).size).to.equal(PODS);

      const pid = h.pid;
      await h.kill();
      expect(pid && processAlive(pid), "driver process").to.equal(false);
      expect(pingFrom(h.netnsName(1), h.gateway), "pod 1 -> gateway, driver down").to.equal(true);
      expect(h.leases()).to.have.length(PODS);
      expect(h.cacheFiles()).to.have.length(PODS);
    });

    it("restarts, reports the 10 attachments in CniStatus, and keeps every lease and veth", async () => {
      await h.start();
      const status = await h.client.cniStatus();
      expect(status.ready).to.equal(true);
      expect(status.attachments).to.equal(PODS);
      // Start-up recovery releases only leases no attachment holds: none here.
      expect(h.leases()).to.have.members(addresses.map((a) => a.split("/")[0] as string));
      expect(h.bridgePorts()).to.have.members(indexes.map((i) => h.hostVeth(i)));
      for (const [k, i] of indexes.entries()) {
        expect(linkIn(h.netnsName(i), "eth0")?.ipv4, `pod ${i}`).to.deep.equal([addresses[k]]);
      }
      expectNoCniError(await h.client.checkPod(h.podRequest(PODS)));
    });

    it("tears the 10 down through DEL after the restart, leaving no lease, veth or cache file", async () => {
      const results = await Promise.all(indexes.map((i) => h.client.tearDownPod(h.podRequest(i))));
      for (const r of results) expectNoCniError(r);
      for (const i of indexes) deleteNetns(h.netnsName(i));

      expect(h.leases(), "lease files").to.deep.equal([]);
      expect(h.bridgePorts(), "host veths").to.deep.equal([]);
      expect(h.cacheFiles(), "cache files").to.deep.equal([]);
      expect(listNetns(h.netnsPrefix)).to.deep.equal([]);
      expect((await h.client.cniStatus()).attachments).to.equal(0);
    });

    it("exits with code 0 on SIGTERM", async () => {
      const pid = h.pid;
      expect(await h.stop()).to.equal(0);
      expect(pid && processAlive(pid)).to.equal(false);
      const after = await h.client.cniStatus({}, { timeoutMs: 1000 });
      expect(after.error?.code, "no driver on the socket").to.equal(11);
    });
  });
});

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
