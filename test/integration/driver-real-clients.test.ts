/**
 * The verbs as real clients send them:
 * - CRI-O CHECKs right after every ADD, at its own (host conflist's) version,
 *   also on a driver network below 0.4.0, which has no CHECK of its own;
 * - Multus and libcni's multi-network callers attach one pod to a second
 *   network as net1, after eth0 has the pod's default route.
 */
import { spawnSync } from "node:child_process";
import { expect } from "chai";
import { ErrorCode } from "../../src/cni/errors.js";
import {
  DriverHarness,
  expectNoCniError,
  forEachHostLocalMode,
} from "../support/driver-harness.js";
import { createNetns, execIn } from "../support/netns.js";
import { requireReferencePlugins, requireRoot } from "../support/requirements.js";

/** The pod's main-table routes, as `ip -j route` prints them (one family). */
function routesIn(netns: string): Array<{ dst: string; gateway?: string; dev: string }> {
  const r = spawnSync("ip", ["-j", "-4", "-n", netns, "route", "show"], { encoding: "utf8" });
  return (
    JSON.parse(r.stdout || "[]") as Array<{ dst: string; gateway?: string; dev: string }>
  ).map(({ dst, gateway, dev }) => ({ dst, ...(gateway ? { gateway } : {}), dev }));
}

forEachHostLocalMode({ "in-process": 162, exec: 163 }, (variant) => {
  describe(`driver, real clients' verbs (host-local ${variant.hostLocal})`, function () {
    this.timeout(60_000);
    let h: DriverHarness;
    /** The second network's subnet: the harness's octet + 10. */
    const second = `10.244.${variant.octet + 10}`;
    const third = `10.244.${variant.octet + 20}`;
    const old = `10.244.${variant.octet + 30}`;

    /** A network on a bridge of its own, with a subnet of its own (and ipam.routes when given). */
    const otherNetwork = (
      name: string,
      subnet: string,
      extra: { cniVersion?: string; routes?: unknown[]; chain?: unknown[] } = {},
    ) =>
      JSON.stringify({
        cniVersion: extra.cniVersion ?? "1.0.0",
        name,
        plugins: [
          {
            type: "midonet",
            datapath: "kernel",
            bridge: `${h.bridge}${name.slice(0, 1)}`,
            ipam: {
              type: "host-local",
              ranges: [[{ subnet }]],
              dataDir: h.dataDir,
              ...(extra.routes ? { routes: extra.routes } : {}),
            },
          },
          ...(extra.chain ?? []),
        ],
      });

    before(async function () {
      requireRoot(this);
      requireReferencePlugins(this, "host-local", "portmap");
      h = new DriverHarness({ subnetOctet: variant.octet, extraFlags: variant.flags });
      await h.writeConfig({
        "driver.json": JSON.stringify({ defaultNetwork: h.network }),
        "pod-network.conflist": JSON.stringify(h.conflist()),
        "second.conflist": otherNetwork("second", `${second}.0/24`),
        "third.conflist": otherNetwork("third", `${third}.0/24`, {
          routes: [{ dst: "10.99.0.0/16" }],
        }),
        "old.conflist": otherNetwork("old", `${old}.0/24`, {
          cniVersion: "0.3.0",
          chain: [{ type: "portmap", capabilities: { portMappings: true } }],
        }),
      });
      await h.start();
    });

    after(async () => {
      await h?.cleanup();
      for (const suffix of ["s", "t", "o"])
        spawnSync("ip", ["link", "del", `${h?.bridge}${suffix}`]);
    });

    it("net1 on a second network: no default route taken, eth0's stays, both CHECK and DEL", async () => {
      const pod = h.netnsName("multi");
      createNetns(pod);
      expectNoCniError(await h.client.setUpPod(h.podRequest("multi")));
      const net1 = await h.client.setUpPod(
        h.podRequest("multi", { ifname: "net1", network: "second" }),
      );
      expectNoCniError(net1);
      expect(net1.result?.ips[0]?.address).to.match(
        new RegExp(`^${second.replace(/\./g, "\\.")}\\.`),
      );
      // The answer lists only what was set up: no default route through net1.
      expect(net1.result?.routes.map((r) => r.dst)).to.deep.equal([]);
      const defaults = routesIn(pod).filter((r) => r.dst === "default");
      expect(defaults).to.deep.equal([{ dst: "default", gateway: h.gateway, dev: "eth0" }]);
      expect(routesIn(pod).some((r) => r.dst === `${second}.0/24` && r.dev === "net1")).to.equal(
        true,
      );

      // ipam.routes are the operator's: added on net2 as they are.
      const net2 = await h.client.setUpPod(
        h.podRequest("multi", { ifname: "net2", network: "third" }),
      );
      expectNoCniError(net2);
      expect(routesIn(pod).find((r) => r.dst === "10.99.0.0/16")).to.include({
        gateway: `${third}.1`,
        dev: "net2",
      });

      for (const [ifname, network] of [
        ["eth0", ""],
        ["net1", "second"],
        ["net2", "third"],
      ] as const)
        expectNoCniError(await h.client.checkPod(h.podRequest("multi", { ifname, network })));
      expectNoCniError(
        await h.client.tearDownPod(h.podRequest("multi", { ifname: "net1", network: "second" })),
      );
      expectNoCniError(
        await h.client.tearDownPod(h.podRequest("multi", { ifname: "net2", network: "third" })),
      );
      expect(routesIn(pod).filter((r) => r.dst === "default")).to.have.length(1);
      expectNoCniError(await h.client.tearDownPod(h.podRequest("multi")));
      expect(h.leases("second")).to.deep.equal([]);
    });

    it("a pod's first interface on the second network still gets its default route", async () => {
      const pod = h.netnsName("only2");
      createNetns(pod);
      const res = await h.client.setUpPod(h.podRequest("only2", { network: "second" }));
      expectNoCniError(res);
      expect(res.result?.routes.map((r) => [r.dst, r.gw])).to.deep.equal([
        ["0.0.0.0/0", `${second}.1`],
      ]);
      expect(routesIn(pod).filter((r) => r.dst === "default")).to.deep.equal([
        { dst: "default", gateway: `${second}.1`, dev: "eth0" },
      ]);
      expectNoCniError(await h.client.tearDownPod(h.podRequest("only2", { network: "second" })));
    });

    it("CHECK at the caller's 1.0.0 on a 0.3.0 network passes for a healthy pod, fails for a broken one", async () => {
      const pod = h.netnsName("crio");
      createNetns(pod);
      const req = h.podRequest("crio", { network: "old" });
      const added = await h.client.setUpPod({ ...req, cni_version: "1.0.0" });
      expectNoCniError(added);
      expectNoCniError(await h.client.checkPod({ ...req, cni_version: "1.0.0" }));
      expectNoCniError(await h.client.checkPod({ ...req, cni_version: "0.4.0" }));

      // A caller at the network's own version has no CHECK: refused as libcni refuses it.
      for (const cni_version of ["", "0.3.1"]) {
        const old = await h.client.checkPod({ ...req, cni_version });
        expect(old.error?.code, cni_version).to.equal(ErrorCode.IncompatibleVersion);
        expect(old.error?.msg).to.include("does not support the CHECK command");
      }

      // What the driver set up is really looked at: the pod's address gone fails CHECK.
      const address = added.result?.ips[0]?.address as string;
      expect(
        execIn({ name: pod, path: "" }, ["ip", "addr", "del", address, "dev", "eth0"]).status,
      ).to.equal(0);
      const broken = await h.client.checkPod({ ...req, cni_version: "1.0.0" });
      expect(broken.error?.msg).to.include(`address ${address} is missing`);
      expectNoCniError(await h.client.tearDownPod(req));
      expect(h.leases("old")).to.deep.equal([]);
    });
  });
});
