import { expect } from "chai";
import { DriverHarness, expectNoCniError } from "../support/driver-harness.js";
import { createNetns, deleteHostLink } from "../support/netns.js";
import { requireReferencePlugins, requireRoot } from "../support/requirements.js";
import { until } from "../support/until.js";

const OTHER_NETWORK = "fast-net";

/** The driver's one log line per call (JSON), from its stderr. */
function callLines(logs: string): Array<{ verb: string; containerId?: string; network?: string }> {
  return logs
    .split("\n")
    .filter((l) => l.startsWith("{") && l.includes('"verb"'))
    .map((l) => JSON.parse(l) as { verb: string; containerId?: string; network?: string });
}
const OTHER_SUBNET = "10.244.45.0/24";

describe("cni-driver serve: DEL and CHECK naming no network after the default changed (integration)", function () {
  this.timeout(30_000);
  let h: DriverHarness;
  const otherBridge = () => `${h.bridge}f`;

  before(async function () {
    requireRoot(this);
    requireReferencePlugins(this, "host-local");
    h = new DriverHarness({
      subnetOctet: 44,
      extraFlags: ["--deletion-queue-rescan", "1", "--log-level", "info"],
    });
    await h.writeDefaultConfig();
    await h.start();
  });

  after(async () => {
    await h?.cleanup();
    if (h) deleteHostLink(otherBridge());
  });

  it("tears down and checks each pod on its own network; new pods go to the new default", async () => {
    const ips: string[] = [];
    for (const i of [1, 2]) {
      createNetns(h.netnsName(i));
      const res = await h.client.setUpPod(h.podRequest(i, { network: "" }));
      expectNoCniError(res);
      ips.push((res.result?.ips[0]?.address ?? "").split("/")[0] as string);
    }
    expect(h.leases()).to.have.members(ips);

    // "a-fast.conflist" sorts before "pod-network.conflist": it becomes the default.
    const other = h.conflist();
    other.name = OTHER_NETWORK;
    Object.assign((other.plugins as Array<Record<string, unknown>>)[0] as object, {
      bridge: otherBridge(),
      ipam: { type: "host-local", ranges: [[{ subnet: OTHER_SUBNET }]], dataDir: h.dataDir },
    });
    await h.writeConfig({
      "pod-network.conflist": JSON.stringify(h.conflist()),
      "a-fast.conflist": JSON.stringify(other),
    });
    await until(
      async () => (await h.client.cniStatus()).config?.default_network === OTHER_NETWORK,
      "the new default network",
    );

    expectNoCniError(await h.client.checkPod(h.podRequest(1, { network: "" })));
    expectNoCniError(await h.client.tearDownPod(h.podRequest(1, { network: "" })));
    expect(h.leases(), "pod-network's leases after pod 1's DEL").to.deep.equal([ips[1]]);
    expect(h.cacheFiles()).to.deep.equal([`${h.network}-${h.containerId(2)}-eth0`]);

    // A DEL the shim queued (naming no network) while the driver runs: replayed within the rescan.
    h.queueDeletion(2);
    await until(() => h.queuedDeletions().length === 0, "the queued DEL to be replayed", 5_000);
    expect(h.leases(), "pod-network's leases after the replay").to.deep.equal([]);
    expect(h.cacheFiles()).to.deep.equal([]);
    expect(h.bridgePorts()).to.deep.equal([]);
    expect((await h.client.cniStatus()).attachments).to.equal(0);

    createNetns(h.netnsName(3));
    const res = await h.client.setUpPod(h.podRequest(3, { network: "" }));
    expectNoCniError(res);
    expect(res.result?.ips[0]?.address.startsWith("10.244.45.")).to.equal(true);
    expect(h.leases(OTHER_NETWORK)).to.have.length(1);
    expectNoCniError(await h.client.tearDownPod(h.podRequest(3, { network: "" })));
    expect(h.leases(OTHER_NETWORK)).to.deep.equal([]);

    // Each call's log line names the network it went to, though the request named none.
    const calls = callLines(h.logs);
    const networkOf = (verb: string, i: number) =>
      calls
        .filter((c) => c.verb === verb && c.containerId === h.containerId(i))
        .map((c) => c.network);
    expect(networkOf("ADD", 1)).to.deep.equal([h.network]);
    expect(networkOf("CHECK", 1)).to.deep.equal([h.network]);
    expect(networkOf("DEL", 1)).to.deep.equal([h.network]);
    expect(networkOf("ADD", 3)).to.deep.equal([OTHER_NETWORK]);
    expect(networkOf("DEL", 3)).to.deep.equal([OTHER_NETWORK]);
  });
});
