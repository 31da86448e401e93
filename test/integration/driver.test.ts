/**
 * `cni-driver serve` as a real process: pods in real network namespaces on a real
 * bridge, addresses from host-local (in-process, the default, and the Debian binary
 * exec'd: each suite runs both ways), packets between the namespaces.
 * Each suite has its own harness (socket, dirs, bridge, subnet) and cleans up after
 * itself even when a test fails.
 */
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { expect } from "chai";
import type { PodResponse } from "../../src/wire/types.js";
import {
  DriverHarness,
  expectNoCniError,
  forEachHostLocalMode,
} from "../support/driver-harness.js";
import {
  createNetns,
  deleteNetns,
  linkIn,
  listHostLinks,
  listNetns,
  pingFrom,
} from "../support/netns.js";
import { requireReferencePlugins, requireRoot } from "../support/requirements.js";

/** Where the tuning plugin keeps each attachment's backup (`<containerID>_<ifName>.json`). */
const TUNING_STATE_DIR = "/run/cni/tuning";

function listDir(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

/** The pod's IPv4 address without its prefix, from a SetUpPod answer. */
function podIp(res: PodResponse): string {
  const address = res.result?.ips[0]?.address;
  if (!address) throw new Error(`no address in ${JSON.stringify(res)}`);
  return address.split("/")[0] as string;
}

/** Pods a test made: torn down and their netns removed after it, whatever happened. */
class PodTracker {
  private readonly pods = new Set<number>();
  constructor(private readonly h: DriverHarness) {}

  async add(i: number): Promise<PodResponse> {
    createNetns(this.h.netnsName(i));
    this.pods.add(i);
    const res = await this.h.client.setUpPod(this.h.podRequest(i));
    expectNoCniError(res);
    return res;
  }

  async clear(): Promise<void> {
    for (const i of this.pods) {
      await this.h.client.tearDownPod(this.h.podRequest(i), { timeoutMs: 10_000 });
      deleteNetns(this.h.netnsName(i));
    }
    this.pods.clear();
  }
}

forEachHostLocalMode({ "in-process": 10, exec: 20 }, ({ hostLocal, flags, octet }) => {
  describe(`cni-driver serve, host-local ${hostLocal}: pods on a bridge (integration)`, function () {
    this.timeout(30_000);
    let h: DriverHarness;
    let pods: PodTracker;

    before(async function () {
      requireRoot(this);
      requireReferencePlugins(this, "host-local", "portmap");
      h = new DriverHarness({ subnetOctet: octet, extraFlags: flags });
      pods = new PodTracker(h);
      await h.writeDefaultConfig();
      await h.start();
    });

    afterEach(async () => {
      await pods?.clear();
    });

    after(async () => {
      await h?.cleanup();
    });

    it("gives two pods addresses in the pod subnet; they ping each other and the gateway", async () => {
      const a = await pods.add(1);
      const b = await pods.add(2);
      const ipA = podIp(a);
      const ipB = podIp(b);
      expect(ipA).to.not.equal(ipB);
      for (const [i, ip] of [
        [1, ipA],
        [2, ipB],
      ] as const) {
        const link = linkIn(h.netnsName(i), "eth0");
        expect(link?.ipv4).to.deep.equal([`${ip}/24`]);
        expect(ip.startsWith(`10.244.${octet}.`), `${ip} in ${h.subnet}`).to.equal(true);
      }
      expect(a.result?.ips[0]?.gateway).to.equal(h.gateway);
      expect(h.bridgePorts()).to.have.members([h.hostVeth(1), h.hostVeth(2)]);

      expect(pingFrom(h.netnsName(1), ipB), "pod 1 -> pod 2").to.equal(true);
      expect(pingFrom(h.netnsName(2), ipA), "pod 2 -> pod 1").to.equal(true);
      expect(pingFrom(h.netnsName(1), h.gateway), "pod 1 -> gateway").to.equal(true);
      expect(pingFrom(h.netnsName(2), h.gateway), "pod 2 -> gateway").to.equal(true);
    });

    it("answers SetUpPod with the CNI result JSON in the version asked for", async () => {
      createNetns(h.netnsName(3));
      const res = await h.client.setUpPod(h.podRequest(3, { cni_version: "0.4.0" }));
      try {
        expectNoCniError(res);
        expect(res.cni_version).to.equal("0.4.0");
        const json = JSON.parse(res.result_json) as {
          cniVersion: string;
          interfaces: Array<{ name: string; sandbox?: string }>;
          ips: Array<{ version: string; address: string; interface: number }>;
        };
        expect(json.cniVersion).to.equal("0.4.0");
        expect(json.ips[0]?.version).to.equal("4");
        expect(json.interfaces[json.ips[0]?.interface ?? -1]).to.deep.include({
          name: "eth0",
          sandbox: h.netnsPath(3),
        });
      } finally {
        expectNoCniError(await h.client.tearDownPod(h.podRequest(3)));
        deleteNetns(h.netnsName(3));
      }
    });

    it("passes CHECK right after ADD, and fails it with code 101 naming the address once it is gone", async () => {
      const res = await pods.add(4);
      expectNoCniError(await h.client.checkPod(h.podRequest(4)));

      const address = res.result?.ips[0]?.address as string;
      const del = spawnIp(["-n", h.netnsName(4), "addr", "del", address, "dev", "eth0"]);
      expect(del, "ip addr del").to.equal(0);

      const check = await h.client.checkPod(h.podRequest(4));
      expect(check.error?.code).to.equal(101);
      expect(check.error?.msg).to.contain(address);
    });

    it("sets a pod up again right after its DEL: its interfaces are gone when DEL answers, the host veth's name free", async () => {
      await pods.add(21);
      const hostVeth = h.hostVeth(21);
      expect(listHostLinks(hostVeth)).to.have.length(1);
      expectNoCniError(await h.client.tearDownPod(h.podRequest(21)));
      // Checked at once: DEL answers once the kernel has unlisted the pair.
      expect(listHostLinks(hostVeth), "host veth after DEL").to.deep.equal([]);
      expect(linkIn(h.netnsName(21), "eth0"), "eth0 after DEL").to.equal(undefined);
      const again = await h.client.setUpPod(h.podRequest(21));
      expectNoCniError(again);
      expect(listHostLinks(hostVeth)).to.have.length(1);
    });

    it("sets up a pod's new sandbox while the old one's veth still holds the name; the old one's late DEL spares the new one", async () => {
      // Two sandboxes of one pod: the same pod identity, so the same host veth name.
      const pod = { namespace: h.podNamespace, name: h.podName(23), uid: "" };
      const sandbox = (s: "a" | "b") => h.podRequest(`23${s}`, { pod });
      createNetns(h.netnsName("23a"));
      createNetns(h.netnsName("23b"));
      try {
        const a = await h.client.setUpPod(sandbox("a"));
        expectNoCniError(a);
        const hostEnd = a.result?.interfaces.find((i) => !i.sandbox)?.name as string;
        expect(listHostLinks(hostEnd), "A's host end").to.have.length(1);

        // A's DEL has not come: B takes the name, and the network.
        const b = await h.client.setUpPod(sandbox("b"));
        expectNoCniError(b);
        expect(b.result?.interfaces.find((i) => !i.sandbox)?.name).to.equal(hostEnd);
        expect(linkIn(h.netnsName("23a"), "eth0"), "A's eth0, its peer replaced").to.equal(
          undefined,
        );
        expect(pingFrom(h.netnsName("23b"), h.gateway), "B -> gateway").to.equal(true);
        expect(h.logs).to.contain("replaced a host veth an older sandbox of the same pod left");

        // A's DEL, late: its lease goes, B's link and lease stay.
        expectNoCniError(await h.client.tearDownPod(sandbox("a")));
        expect(h.leases()).to.have.members([podIp(b)]);
        expect(pingFrom(h.netnsName("23b"), h.gateway), "B -> gateway after A's DEL").to.equal(
          true,
        );
        expectNoCniError(await h.client.tearDownPod(sandbox("b")));
        expect(listHostLinks(hostEnd)).to.deep.equal([]);
        expect(h.leases()).to.deep.equal([]);
      } finally {
        deleteNetns(h.netnsName("23a"));
        deleteNetns(h.netnsName("23b"));
      }
    });

    it("answers a repeated ADD of an attachment that is up from the cache, leaving it whole; in another netns refuses it", async () => {
      const first = await pods.add(24);
      const again = await Promise.all([1, 2, 3].map(() => h.client.setUpPod(h.podRequest(24))));
      for (const r of again) {
        expectNoCniError(r);
        expect(r.result?.ips[0]?.address).to.equal(first.result?.ips[0]?.address);
      }
      expect(h.leases()).to.deep.equal([podIp(first)]);
      expect(linkIn(h.netnsName(24), "eth0")?.ipv4).to.deep.equal([first.result?.ips[0]?.address]);
      expectNoCniError(await h.client.checkPod(h.podRequest(24)));

      createNetns(h.netnsName("24b"));
      try {
        const elsewhere = await h.client.setUpPod(h.podRequest(24, { netns: h.netnsPath("24b") }));
        expect(elsewhere.error?.msg).to.contain(
          `is already set up on network ${h.network} in netns ${h.netnsPath(24)}`,
        );
        expect(linkIn(h.netnsName("24b"), "eth0")).to.equal(undefined);
        expectNoCniError(await h.client.checkPod(h.podRequest(24)));
      } finally {
        deleteNetns(h.netnsName("24b"));
      }
    });

    it("succeeds on a second DEL of the same pod", async () => {
      await pods.add(5);
      const lease = h.leases();
      expect(lease).to.have.length(1);
      expectNoCniError(await h.client.tearDownPod(h.podRequest(5)));
      expectNoCniError(await h.client.tearDownPod(h.podRequest(5)));
      expect(h.leases()).to.deep.equal([]);
      expect(h.cacheFiles()).to.deep.equal([]);
      expect(listHostLinks(h.hostVeth(5))).to.deep.equal([]);
    });

    it("succeeds on DEL after the netns vanished, releasing the lease and removing the host veth", async () => {
      const res = await pods.add(6);
      const ip = podIp(res);
      expect(existsSync(join(h.dataDir, h.network, ip))).to.equal(true);
      expect(h.bridgePorts()).to.include(h.hostVeth(6));

      deleteNetns(h.netnsName(6));
      expect(listNetns(h.netnsName(6))).to.deep.equal([]);
      expectNoCniError(await h.client.tearDownPod(h.podRequest(6)));

      expect(existsSync(join(h.dataDir, h.network, ip)), "lease file").to.equal(false);
      expect(h.leases()).to.deep.equal([]);
      expect(h.bridgePorts().filter((p) => p.startsWith("mido"))).to.deep.equal([]);
      expect(listHostLinks(h.hostVeth(6))).to.deep.equal([]);
      expect(h.cacheFiles()).to.deep.equal([]);
    });

    it("answers code 7 naming the network for SetUpPod on an unknown network", async () => {
      createNetns(h.netnsName(7));
      try {
        const res = await h.client.setUpPod(h.podRequest(7, { network: "no-such-network" }));
        expect(res.error?.code).to.equal(7);
        expect(res.error?.msg).to.contain("no-such-network");
        expect(linkIn(h.netnsName(7), "eth0")).to.equal(undefined);
        expect(h.leases()).to.deep.equal([]);
      } finally {
        deleteNetns(h.netnsName(7));
      }
    });

    it("answers code 4 for an invalid container id, and code 1 for api_version 2", async () => {
      createNetns(h.netnsName(8));
      try {
        const badId = await h.client.setUpPod(h.podRequest(8, { container_id: "bad id/../x" }));
        expect(badId.error?.code).to.equal(4);
        expect(badId.error?.msg).to.contain("bad id/../x");

        const v2 = await h.client.setUpPod(h.podRequest(8, { api_version: 2 }));
        expect(v2.error?.code).to.equal(1);
        expect(v2.error?.msg).to.contain("version 2");
        const v2status = await h.client.cniStatus({ api_version: 2 });
        expect(v2status.error?.code).to.equal(1);
        expect(v2status.api_version).to.equal(1);

        expect(linkIn(h.netnsName(8), "eth0")).to.equal(undefined);
        expect(h.leases()).to.deep.equal([]);
      } finally {
        deleteNetns(h.netnsName(8));
      }
    });

    it("counts the live attachments in CniStatus", async () => {
      const before = await h.client.cniStatus();
      expectNoCniError(before);
      expect(before.ready).to.equal(true);
      expect(before.attachments).to.equal(0);
      await pods.add(9);
      await pods.add(10);
      expect((await h.client.cniStatus()).attachments).to.equal(2);
      expectNoCniError(await h.client.tearDownPod(h.podRequest(9)));
      expect((await h.client.cniStatus()).attachments).to.equal(1);
      expect(await h.metric("cni_driver_attachments")).to.equal(1);
    });

    it("says in /metrics which version runs, on which Node, and which ways plumbing and plugin execs go", async () => {
      const { body } = await h.httpGet("/metrics");
      const line = body.split("\n").find((l) => l.startsWith("cni_driver_info{"));
      expect(line).to.match(
        /^cni_driver_info\{version="\d+\.\d+\.\d+[^"]*",node="v\d+\.\d+\.\d+",plumbing="(netlink|iproute2)",spawn="(native|node)",host_local="(in-process|exec)"\} 1$/,
      );
      expect(line).to.contain(`host_local="${hostLocal}"`);
      expect(line).to.contain(`node="${process.version}"`);
      // CI builds both native addons (scripts/setup.sh): there the fast ways must be in use.
      if (process.env.CI === "true")
        expect(line).to.contain('plumbing="netlink"').and.to.contain('spawn="native"');
    });

    it("GC with a valid list that leaves one of two pods out releases exactly that one", async () => {
      const kept = await pods.add(11);
      const gone = await pods.add(12);
      const res = await h.client.garbageCollect({
        networks: [
          {
            network: h.network,
            valid_attachments: [{ container_id: h.containerId(11), ifname: "eth0" }],
          },
        ],
      });
      expectNoCniError(res);
      expect(res.errors).to.deep.equal([]);
      expect(res.removed_attachments).to.equal(1);

      expect(h.leases()).to.deep.equal([podIp(kept)]);
      expect(h.bridgePorts()).to.deep.equal([h.hostVeth(11)]);
      expect(h.cacheFiles()).to.deep.equal([`${h.network}-${h.containerId(11)}-eth0`]);
      expect(linkIn(h.netnsName(11), "eth0")?.ipv4).to.deep.equal([`${podIp(kept)}/24`]);
      expect(linkIn(h.netnsName(12), "eth0"), "collected pod's interface").to.equal(undefined);
      expect(podIp(gone)).to.not.equal(podIp(kept));
      expect((await h.client.cniStatus()).attachments).to.equal(1);
    });
  });
});

forEachHostLocalMode({ "in-process": 11, exec: 21 }, ({ hostLocal, flags, octet }) => {
  describe(`cni-driver serve, host-local ${hostLocal}: an ADD failing in a chained plugin (integration)`, function () {
    this.timeout(30_000);
    let h: DriverHarness;

    before(async function () {
      requireRoot(this);
      requireReferencePlugins(this, "host-local", "portmap", "tuning");
      h = new DriverHarness({
        subnetOctet: octet,
        extraFlags: flags,
        chain: [{ type: "tuning", sysctl: { "net.ipv4.conf.eth0.no_such_sysctl": "1" } }],
      });
      await h.writeDefaultConfig();
      await h.start();
    });

    after(async () => {
      await h?.cleanup();
    });

    it("answers a CNI error naming the plugin and leaves no lease, veth, interface or cache", async () => {
      createNetns(h.netnsName(1));
      const res = await h.client.setUpPod(h.podRequest(1));
      expect(res.error?.code, JSON.stringify(res.error)).to.be.a("number").and.not.equal(0);
      expect(res.error?.msg).to.contain('type="tuning"');
      expect(res.error?.msg).to.contain("no_such_sysctl");
      expect(res.result).to.equal(null);

      expect(h.leases(), "lease files").to.deep.equal([]);
      expect(h.bridgePorts(), "host veths").to.deep.equal([]);
      expect(listHostLinks(h.hostVeth(1)), "host veth").to.deep.equal([]);
      expect(linkIn(h.netnsName(1), "eth0"), "container interface").to.equal(undefined);
      expect(h.cacheFiles(), "cache files").to.deep.equal([]);
      expect((await h.client.cniStatus()).attachments).to.equal(0);
      // tuning's own state (its backup of the interface's settings) went with the undo.
      expect(listDir(TUNING_STATE_DIR).filter((f) => f.includes(h.containerId(1)))).to.deep.equal(
        [],
      );

      // And the runtime's DEL after the failed ADD (no cached result) succeeds.
      expectNoCniError(await h.client.tearDownPod(h.podRequest(1)));
    });
  });
});

function spawnIp(args: string[]): number {
  return spawnSync("ip", args, { stdio: "ignore" }).status ?? -1;
}
