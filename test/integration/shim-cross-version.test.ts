/**
 * The shim and the driver of different releases, as a node has them for a
 * moment in every rolling update (the init container installs the incoming
 * shim while the outgoing driver may still serve, and a rollback does the
 * reverse): the previous release's shim (CHANGELOG.md's, built from its commit:
 * test/support/previous-release.ts) against the current driver, and the current
 * shim against the previous release's driver, for every verb the shim has —
 * VERSION, ADD, CHECK, DEL, STATUS, GC, at every result version — and for a DEL
 * queued by the one while no driver serves and replayed by the other. Real
 * network namespaces, host-local's lease files, stdin built from the host
 * conflist the driver wrote (test/support/shim-runtime.ts).
 */
import { existsSync } from "node:fs";
import { expect } from "chai";
import { DriverHarness, REPO_ROOT } from "../support/driver-harness.js";
import { createNetns, deleteNetns, execInNetns, linkIn, listHostLinks } from "../support/netns.js";
import { previousRelease } from "../support/previous-release.js";
import {
  requireGitHistory,
  requireReferencePlugins,
  requireRoot,
} from "../support/requirements.js";
import { ensureShimBuilt } from "../support/runtimes.js";
import type { ShimRun } from "../support/shim-exec.js";
import {
  resultAddress,
  type ShimCallOptions,
  ShimRuntime,
  type ShimVerb,
} from "../support/shim-runtime.js";
import { until } from "../support/until.js";

const RESULT_VERSIONS = ["0.3.1", "0.4.0", "1.0.0", "1.1.0"] as const;

interface Pairing {
  shim: "previous" | "current";
  driver: "previous" | "current";
  octet: number;
}

const PAIRINGS: Pairing[] = [
  { shim: "previous", driver: "current", octet: 143 },
  { shim: "current", driver: "previous", octet: 144 },
];

/** A silent success: exit 0, nothing on stdout (CHECK, DEL, STATUS, GC). */
function expectSilentSuccess(r: ShimRun, what: string): void {
  expect(r.status, `${what}: exit status; stdout ${r.stdout} stderr ${r.stderr}`).to.equal(0);
  expect(r.stdout, what).to.equal("");
}

for (const pairing of PAIRINGS) {
  describe(`the ${pairing.shim} release's shim against the ${pairing.driver} release's driver (integration)`, function () {
    this.timeout(60_000);
    let h: DriverHarness;
    let rt: ShimRuntime;
    let shim = "";

    before(async function () {
      requireRoot(this);
      requireReferencePlugins(this, "host-local");
      requireGitHistory(this, REPO_ROOT);
      // The first run builds the previous release (npm ci, addons, shim, dist): minutes.
      this.timeout(20 * 60_000);
      const release = await previousRelease();
      shim = pairing.shim === "previous" ? release.shim : ensureShimBuilt();
      h = new DriverHarness({
        subnetOctet: pairing.octet,
        ...(pairing.driver === "previous" ? { driverRoot: release.root } : {}),
      });
      rt = new ShimRuntime(h);
      h.opts.extraFlags = rt.driverFlags;
      await h.writeDefaultConfig();
      await h.start();
      // The driver writes the host conflist just after it reports ready, as a runtime finds it.
      await until(() => existsSync(rt.conflistPath), "the host conflist");
    });

    after(async () => {
      await h?.cleanup();
    });

    const exec = (verb: ShimVerb, pod: string, opts: ShimCallOptions = {}) =>
      rt.exec(verb, pod, { shim, ...opts });

    /** Sets up `pod` through the shim; its address. */
    async function add(pod: string, opts: ShimCallOptions = {}): Promise<ShimRun> {
      createNetns(h.netnsName(pod));
      const r = await exec("ADD", pod, opts);
      expect(r.status, `ADD of ${pod}: ${r.stdout} ${r.stderr}`).to.equal(0);
      return r;
    }

    /** Whatever a failed case left: the driver's DEL, then the netns. */
    async function remove(pod: string): Promise<void> {
      if (h.running) await h.client.tearDownPod(h.podRequest(pod), { timeoutMs: 10_000 });
      deleteNetns(h.netnsName(pod));
    }

    it("VERSION: answered by the shim, naming every version both releases speak", async () => {
      const r = await exec("VERSION", "");
      expect(r.status, r.stderr).to.equal(0);
      expect((r.json as { supportedVersions?: string[] }).supportedVersions).to.include.members([
        ...RESULT_VERSIONS,
      ]);
    });

    for (const version of RESULT_VERSIONS) {
      it(`ADD answers in exactly ${version}; CHECK and DEL print nothing; DEL leaves nothing`, async () => {
        const pod = `v${version.replaceAll(".", "")}`;
        try {
          const r = await add(pod, { cniVersion: version });
          expect(r.json?.cniVersion).to.equal(version);
          const address = resultAddress(r);
          expect(address).to.match(new RegExp(`^10\\.244\\.${pairing.octet}\\.\\d+$`));
          expect(linkIn(h.netnsName(pod), "eth0")?.ipv4).to.deep.equal([`${address}/24`]);
          expect(h.leases()).to.include(address);
          expect(listHostLinks(h.hostVeth(pod))).to.deep.equal([h.hostVeth(pod)]);

          if (version !== "0.3.1")
            expectSilentSuccess(await exec("CHECK", pod, { cniVersion: version }), "CHECK");

          expectSilentSuccess(await exec("DEL", pod, { cniVersion: version }), "DEL");
          expect(linkIn(h.netnsName(pod), "eth0"), "eth0 after DEL").to.equal(undefined);
          expect(listHostLinks(h.hostVeth(pod)), "host veth after DEL").to.deep.equal([]);
          expect(h.leases()).not.to.include(address);
          expect(h.cacheFiles().filter((f) => f.includes(h.containerId(pod)))).to.deep.equal([]);
          expectSilentSuccess(await exec("DEL", pod, { cniVersion: version }), "a second DEL");
        } finally {
          await remove(pod);
        }
      });
    }

    it("CHECK of a pod whose eth0 lost its address fails with the driver's error, not the shim's", async () => {
      const pod = "check-diff";
      try {
        const r = await add(pod);
        expect(linkIn(h.netnsName(pod), "eth0")?.ipv4).to.deep.equal([`${resultAddress(r)}/24`]);
        execInNetns(h.netnsName(pod), ["ip", "addr", "flush", "dev", "eth0"]);
        const check = await exec("CHECK", pod);
        expect(check.status, check.stdout).to.equal(1);
        expect(check.json?.code, check.stdout).to.be.a("number").and.not.equal(11);
      } finally {
        await remove(pod);
      }
    });

    it("an ADD naming a network the driver lacks: the driver's code 7, passed through", async () => {
      const pod = "no-net";
      createNetns(h.netnsName(pod));
      try {
        const r = await exec("ADD", pod, { extra: { network: "no-such-network" } });
        expect(r.status, r.stdout).to.equal(1);
        expect(r.json?.code, r.stdout).to.equal(7);
        expect(String(r.json?.msg)).to.contain("no-such-network");
        expect(h.leases()).to.deep.equal([]);
      } finally {
        await remove(pod);
      }
    });

    it("STATUS: exit 0 with nothing on stdout while the driver is ready", async () => {
      expectSilentSuccess(await exec("STATUS", ""), "STATUS");
    });

    it("GC: the attachments outside the valid set are torn down, the others kept", async () => {
      const pods = ["gc-keep", "gc-drop"];
      try {
        const kept = resultAddress(await add("gc-keep"));
        const dropped = resultAddress(await add("gc-drop"));
        const gc = await exec("GC", "", {
          extra: {
            "cni.dev/valid-attachments": [
              { containerID: h.containerId("gc-keep"), ifname: "eth0" },
            ],
          },
        });
        expectSilentSuccess(gc, "GC");
        expect(h.leases()).to.deep.equal([kept]);
        expect(h.leases()).not.to.include(dropped);
        expect(linkIn(h.netnsName("gc-keep"), "eth0")?.ipv4).to.deep.equal([`${kept}/24`]);
        expect(listHostLinks(h.hostVeth("gc-drop"))).to.deep.equal([]);
        expectSilentSuccess(await exec("DEL", "gc-keep"), "DEL");
        expect(h.leases()).to.deep.equal([]);
      } finally {
        for (const pod of pods) await remove(pod);
      }
    });

    it("a DEL this shim queues while no driver serves is replayed by this driver at its start", async () => {
      const pod = "queued";
      try {
        const address = resultAddress(await add(pod));
        expect(await h.stop()).to.equal(0);
        expectSilentSuccess(await exec("DEL", pod), "DEL with no driver");
        expect(linkIn(h.netnsName(pod), "eth0"), "eth0 removed by the shim itself").to.equal(
          undefined,
        );
        expect(h.queuedDeletions()).to.have.length(1);
        expect(h.leases(), "the lease waits for the driver").to.include(address);

        await h.start();
        expect(h.queuedDeletions(), "records after the replay").to.deep.equal([]);
        expect(h.leases(), "leases after the replay").to.deep.equal([]);
        expect(h.cacheFiles(), "cache entries after the replay").to.deep.equal([]);
        expect(listHostLinks(h.hostVeth(pod))).to.deep.equal([]);
      } finally {
        if (!h.running) await h.start().catch(() => {});
        await remove(pod);
      }
    });
  });
}
