/**
 * Start-up recovery from local truth: what an ADD killed half-way leaves (a lease
 * and a host veth with no cached attachment) is released at start, and DELs the
 * shim queued while the driver had no config are replayed once a config loads.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { expect } from "chai";
import { DELETION_QUEUE_DIR, deletionRecordTempName } from "../../src/wire/deletion-record.js";
import {
  DriverHarness,
  expectNoCniError,
  forEachHostLocalMode,
  sleep,
} from "../support/driver-harness.js";
import { createNetns, uniqueTag } from "../support/netns.js";
import { requireReferencePlugins, requireRoot } from "../support/requirements.js";

forEachHostLocalMode({ "in-process": 18, exec: 28 }, ({ hostLocal, flags, octet }) => {
  describe(`cni-driver serve, host-local ${hostLocal}: start-up recovery (integration)`, function () {
    this.timeout(60_000);
    let h: DriverHarness;
    const orphanVeth = `mido${uniqueTag(5).slice(0, 11)}`;
    const orphanPeer = `cdo${uniqueTag()}`;

    before(async function () {
      requireRoot(this);
      requireReferencePlugins(this, "host-local");
      h = new DriverHarness({ subnetOctet: octet, extraFlags: flags });
      await h.writeDefaultConfig();
      await h.start();
    });

    after(async () => {
      spawnSync("ip", ["link", "del", orphanVeth], { stdio: "ignore" });
      await h?.cleanup();
    });

    it("releases a lease and removes a host veth that no cached attachment holds, keeping the live pod's", async () => {
      createNetns(h.netnsName(1));
      const res = await h.client.setUpPod(h.podRequest(1));
      expectNoCniError(res);
      const live = res.result?.ips[0]?.address.split("/")[0] as string;
      await h.kill();
      // What an ADD killed after IPAM and the veth, before the cache, leaves behind.
      const orphanIp = `10.244.${octet}.200`;
      writeFileSync(join(h.dataDir, h.network, orphanIp), "deadbeef\r\neth0");
      execFileSync("ip", [
        "link",
        "add",
        orphanVeth,
        "master",
        h.bridge,
        "type",
        "veth",
        "peer",
        "name",
        orphanPeer,
      ]);
      expect(h.bridgePorts()).to.include(orphanVeth);

      await h.start();
      expect(h.leases()).to.deep.equal([live]);
      expect(h.bridgePorts()).to.deep.equal([h.hostVeth(1)]);
    });

    it("replays a DEL queued while the driver had no config as soon as a config loads", async () => {
      await h.stop();
      await h.writeConfig({ "pod-network.conflist": "{ broken" });
      await h.start({ waitReady: false });
      h.queueDeletion(1);
      const queue = join(h.stateDir, DELETION_QUEUE_DIR);
      await sleep(300);
      expect(readdirSync(queue).filter((n) => n.endsWith(".json"))).to.have.length(1);
      expect(h.leases()).to.have.length(1);

      await h.writeDefaultConfig();
      const queued = () =>
        existsSync(queue) ? readdirSync(queue).filter((n) => n.endsWith(".json")) : [];
      // The record goes last, once the whole DEL succeeded.
      for (let i = 0; i < 100 && queued().length > 0; i++) await sleep(50);
      expect(h.leases()).to.deep.equal([]);
      expect(h.bridgePorts()).to.deep.equal([]);
      expect(h.cacheFiles()).to.deep.equal([]);
      expect(
        existsSync(queue) ? readdirSync(queue).filter((n) => n.endsWith(".json")) : [],
      ).to.deep.equal([]);
    });

    it("removes the temporary files of writes a crash cut short: the cache's, and the shims' once a minute old", async () => {
      await h.kill();
      const results = join(h.cacheDir, "results");
      const queue = join(h.stateDir, DELETION_QUEUE_DIR);
      mkdirSync(results, { recursive: true });
      mkdirSync(queue, { recursive: true });
      const record = { network: "", containerId: h.containerId(7), ifName: "eth0" };
      const cacheTemp = `.tmp-${h.network}-${h.containerId(7)}-eth0-0badf00d`;
      const deadShim = deletionRecordTempName(record, 999_991);
      const writingShim = deletionRecordTempName(record, 999_992);
      writeFileSync(join(results, cacheTemp), '{"kind":"cniCach');
      writeFileSync(join(queue, deadShim), '{"kind":"cniDriverDel');
      writeFileSync(join(queue, writingShim), '{"kind":"cniDriverDel');
      const twoMinutesAgo = new Date(Date.now() - 120_000);
      utimesSync(join(queue, deadShim), twoMinutesAgo, twoMinutesAgo);

      await h.start();
      expect(readdirSync(results), "cache dir").to.not.include(cacheTemp);
      expect(readdirSync(queue), "deletion queue").to.deep.equal([writingShim]);
      expect(h.logs).to.contain("removed a cache file a crash left half-written");
      expect(h.logs).to.contain("removed a deletion record a shim left half-written");
    });
  });
});
