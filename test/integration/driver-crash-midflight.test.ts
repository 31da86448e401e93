/**
 * The driver killed (SIGKILL) while ADDs and DELs are in flight, at a random
 * moment, round after round, then restarted. Whatever the moment:
 *  - a pod whose ADD was answered with success keeps its whole attachment
 *    (address, lease, cache entry, host veth on the bridge) and passes CHECK;
 *  - a pod whose call got no answer is DEL'd, as a runtime does after a failed
 *    ADD or DEL, and that DEL succeeds;
 *  - after those DELs the node holds exactly the pods that are up: no lease,
 *    cache entry or host veth of any other;
 *  - in the end, DEL of every pod leaves nothing.
 * The kill moments come from a seeded generator; a failure names the seed
 * (CNI_DRIVER_TEST_SEED=<seed> replays it).
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { expect } from "chai";
import { DriverHarness, expectNoCniError, sleep } from "../support/driver-harness.js";
import { createNetns, linkIn, listHostLinks } from "../support/netns.js";
import { requireReferencePlugins, requireRoot } from "../support/requirements.js";

const PODS = 24;
const ROUNDS = 6;
/**
 * Calls go out spread over this many ms, and the kill lands at a moment within
 * it or a little after: some calls are answered by then, some are in flight and
 * some never reach the driver (24 concurrent ADDs take 50–100 ms here).
 */
const SPREAD_MS = 150;

type PodState = "down" | "up" | "unknown";

/** mulberry32: small, seedable, good enough to spread kill moments. */
function generator(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

for (const [hostLocal, octet] of [
  ["exec", 42],
  ["in-process", 43],
] as const) {
  describe(`cni-driver serve: SIGKILL with ADDs and DELs in flight, host-local ${hostLocal} (integration)`, function () {
    this.timeout(120_000);
    const seed = Number(process.env.CNI_DRIVER_TEST_SEED ?? Date.now() % 1_000_000);
    const random = generator(seed);
    const pods = Array.from({ length: PODS }, (_, i) => i + 1);
    const state = new Map<number, PodState>(pods.map((i) => [i, "down"]));
    const address = new Map<number, string>();
    let h: DriverHarness;

    before(async function () {
      requireRoot(this);
      requireReferencePlugins(this, "host-local");
      h = new DriverHarness({ subnetOctet: octet, extraFlags: ["--host-local", hostLocal] });
      await h.writeDefaultConfig();
      await h.start();
      for (const i of pods) createNetns(h.netnsName(i));
    });

    after(async () => {
      await h?.cleanup();
    });

    /** Lease file name (the address) → its owner's container id. */
    function leaseOwners(): Map<string, string> {
      const owners = new Map<string, string>();
      for (const ip of h.leases()) {
        const content = readFileSync(join(h.dataDir, h.network, ip), "utf8");
        owners.set(ip, content.split("\r\n")[0] ?? "");
      }
      return owners;
    }

    /** The node holds exactly the pods that are up: leases, cache entries, bridge ports. */
    function expectExactlyUpPods(when: string): void {
      const up = pods.filter((i) => state.get(i) === "up");
      const owners = leaseOwners();
      expect([...owners.values()].sort(), `lease owners ${when} (seed ${seed})`).to.deep.equal(
        up.map((i) => h.containerId(i)).sort(),
      );
      for (const i of up)
        expect(
          owners.get(address.get(i) ?? ""),
          `pod ${i}'s lease ${when} (seed ${seed})`,
        ).to.equal(h.containerId(i));
      expect(h.cacheFiles().sort(), `cache files ${when} (seed ${seed})`).to.deep.equal(
        up.map((i) => `${h.network}-${h.containerId(i)}-eth0`).sort(),
      );
      expect(h.bridgePorts().sort(), `bridge ports ${when} (seed ${seed})`).to.deep.equal(
        up.map((i) => h.hostVeth(i)).sort(),
      );
      for (const i of pods.filter((p) => state.get(p) !== "up"))
        expect(
          listHostLinks(h.hostVeth(i)),
          `pod ${i}'s host veth ${when} (seed ${seed})`,
        ).to.deep.equal([]);
    }

    it("keeps every answered ADD, and the runtime's DELs of unanswered calls leave exactly the pods that are up", async () => {
      for (let round = 1; round <= ROUNDS; round++) {
        const when = `after round ${round}`;
        // Pods that are down are set up; about half of those up are torn down.
        const calls = pods
          .filter((i) => state.get(i) === "down" || random() < 0.5)
          .map((i) => {
            const verb = state.get(i) === "down" ? "ADD" : "DEL";
            const call = sleep(Math.floor(random() * SPREAD_MS)).then(() =>
              verb === "ADD"
                ? h.client.setUpPod(h.podRequest(i), { timeoutMs: 5000 }).then((r) => {
                    if (r.error) return false;
                    address.set(i, (r.result?.ips[0]?.address ?? "").split("/")[0] as string);
                    return true;
                  })
                : h.client
                    .tearDownPod(h.podRequest(i), { timeoutMs: 5000 })
                    .then((r) => r.error === null),
            );
            return { i, verb, call: call.catch(() => false) };
          });
        await sleep(Math.floor(random() * SPREAD_MS * 1.2));
        await h.kill();
        for (const { i, verb, call } of calls) {
          const answered = await call;
          state.set(i, answered ? (verb === "ADD" ? "up" : "down") : "unknown");
        }

        await h.start();
        // Every pod set up with success is whole, and passes CHECK.
        for (const i of pods.filter((p) => state.get(p) === "up")) {
          expect(
            linkIn(h.netnsName(i), "eth0")?.ipv4,
            `pod ${i}'s eth0 ${when} (seed ${seed})`,
          ).to.deep.equal([`${address.get(i)}/24`]);
          expectNoCniError(await h.client.checkPod(h.podRequest(i)));
        }
        // What a runtime does with a call that failed: DEL, which must succeed.
        for (const i of pods.filter((p) => state.get(p) === "unknown")) {
          expectNoCniError(await h.client.tearDownPod(h.podRequest(i)));
          state.set(i, "down");
        }
        expectExactlyUpPods(when);
        expect((await h.client.cniStatus()).attachments, `attachments ${when}`).to.equal(
          pods.filter((i) => state.get(i) === "up").length,
        );
      }

      for (const i of pods) expectNoCniError(await h.client.tearDownPod(h.podRequest(i)));
      for (const i of pods) state.set(i, "down");
      expectExactlyUpPods("at the end");
      expect(h.leases(), "leases at the end").to.deep.equal([]);
    });
  });
}
