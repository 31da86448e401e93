/**
 * A node's worth of pods at once (kubelet's default maxPods is 110): set up
 * concurrently through one client, then torn down concurrently, with nothing
 * left; with host-local exec'd and in-process alike.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { expect } from "chai";
import { DriverHarness } from "../support/driver-harness.js";
import { createNetns, deleteNetns, linkIn, listNetns } from "../support/netns.js";
import { requireReferencePlugins, requireRoot } from "../support/requirements.js";

const PODS = 110;

for (const { hostLocal, octet } of [
  { hostLocal: "exec", octet: 13 },
  { hostLocal: "in-process", octet: 33 },
] as const)
  describe(`cni-driver serve --host-local ${hostLocal}: 110 pods at once (integration)`, function () {
    this.timeout(180_000);
    let h: DriverHarness;
    const indexes = Array.from({ length: PODS }, (_, i) => i + 1);

    before(async function () {
      requireRoot(this);
      requireReferencePlugins(this, "host-local", "portmap");
      h = new DriverHarness({ subnetOctet: octet, extraFlags: ["--host-local", hostLocal] });
      await h.writeDefaultConfig();
      await h.start();
      for (const i of indexes) createNetns(h.netnsName(i));
    });

    after(async () => {
      await h?.cleanup();
    });

    it("gives 110 concurrent SetUpPods 110 distinct addresses, each leased to its own pod", async () => {
      const results = await Promise.all(indexes.map((i) => h.client.setUpPod(h.podRequest(i))));
      const failed = results.flatMap((r) => r.error ?? []);
      expect(failed, JSON.stringify(failed.slice(0, 3))).to.deep.equal([]);

      const addresses = results.map((r) => r.result?.ips[0]?.address ?? "");
      expect(new Set(addresses).size).to.equal(PODS);
      for (const [k, i] of indexes.entries()) {
        const address = addresses[k] as string;
        expect(linkIn(h.netnsName(i), "eth0")?.ipv4, `pod ${i}`).to.deep.equal([address]);
        const lease = join(h.dataDir, h.network, address.split("/")[0] as string);
        expect(readFileSync(lease, "utf8"), `pod ${i}'s lease`).to.equal(
          `${h.containerId(i)}\r\neth0`,
        );
      }
      expect(h.leases()).to.have.length(PODS);
      expect(h.cacheFiles()).to.have.length(PODS);
      expect(h.bridgePorts()).to.have.length(PODS);
      expect((await h.client.cniStatus()).attachments).to.equal(PODS);
    });

    it("tears the 110 down concurrently and leaves no veth, lease, cache file or netns", async () => {
      const results = await Promise.all(indexes.map((i) => h.client.tearDownPod(h.podRequest(i))));
      const failed = results.flatMap((r) => r.error ?? []);
      expect(failed, JSON.stringify(failed.slice(0, 3))).to.deep.equal([]);
      for (const i of indexes) deleteNetns(h.netnsName(i));

      expect(h.bridgePorts(), "ports on the bridge").to.deep.equal([]);
      expect(h.leases(), "lease files").to.deep.equal([]);
      expect(h.cacheFiles(), "cache files").to.deep.equal([]);
      expect(listNetns(h.netnsPrefix), "namespaces").to.deep.equal([]);
      expect((await h.client.cniStatus()).attachments).to.equal(0);
    });
  });
