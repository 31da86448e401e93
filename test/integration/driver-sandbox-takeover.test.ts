/**
 * A pod's new sandbox takes over its host veth name while the old sandbox's DEL
 * has not come; the old sandbox's late DEL, its netns already gone, must spare
 * the new link also when no prevResult tells it the MAC it made: on a 0.3.x
 * network (libcni hands plugins no prevResult below 0.4.0) and when its cache
 * entry is lost.
 */
import { rmSync } from "node:fs";
import { join } from "node:path";
import { expect } from "chai";
import type { PodResponse } from "../../src/wire/types.js";
import { DriverHarness, expectNoCniError } from "../support/driver-harness.js";
import { createNetns, deleteNetns, listHostLinks, pingFrom } from "../support/netns.js";
import { requireReferencePlugins, requireRoot } from "../support/requirements.js";

for (const [what, cniVersion, octet, loseCache] of [
  ["a 0.3.1 network", "0.3.1", 48, false],
  ["a 1.0.0 network whose cache entry for the old sandbox is lost", "1.0.0", 49, true],
] as const) {
  describe(`cni-driver serve: an old sandbox's late DEL on ${what} (integration)`, function () {
    this.timeout(30_000);
    let h: DriverHarness;

    before(async function () {
      requireRoot(this);
      requireReferencePlugins(this, "host-local");
      h = new DriverHarness({ subnetOctet: octet, cniVersion });
      await h.writeDefaultConfig();
      await h.start();
    });

    after(async () => {
      await h?.cleanup();
    });

    it("spares the new sandbox's veth, and releases only the old sandbox's address", async () => {
      const pod = { namespace: h.podNamespace, name: h.podName("t"), uid: "" };
      const sandbox = (s: "a" | "b") => h.podRequest(`t${s}`, { pod });
      const ipOf = (r: PodResponse) => (r.result?.ips[0]?.address ?? "").split("/")[0] as string;
      createNetns(h.netnsName("ta"));
      createNetns(h.netnsName("tb"));
      const a = await h.client.setUpPod(sandbox("a"));
      expectNoCniError(a);
      const b = await h.client.setUpPod(sandbox("b"));
      expectNoCniError(b);
      const hostEnd = b.result?.interfaces.find((i) => !i.sandbox)?.name as string;
      expect(listHostLinks(hostEnd)).to.have.length(1);

      // The old sandbox is gone from the node before its DEL comes.
      deleteNetns(h.netnsName("ta"));
      if (loseCache)
        rmSync(join(h.cacheDir, "results", `${h.network}-${h.containerId("ta")}-eth0`));
      expectNoCniError(await h.client.tearDownPod(sandbox("a")));

      expect(listHostLinks(hostEnd), "the new sandbox's host end").to.have.length(1);
      expect(pingFrom(h.netnsName("tb"), h.gateway), "new sandbox -> gateway").to.equal(true);
      expect(h.leases()).to.deep.equal([ipOf(b)]);

      expectNoCniError(await h.client.tearDownPod(sandbox("b")));
      expect(listHostLinks(hostEnd)).to.deep.equal([]);
      expect(h.leases()).to.deep.equal([]);
      expect(h.cacheFiles()).to.deep.equal([]);
      expect(ipOf(a)).to.not.equal(ipOf(b));
    });
  });
}
