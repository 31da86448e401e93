/**
 * podman 4 with the CNI backend execs the shim: a network whose conflist holds only
 * the shim gives two containers addresses from the driver, they ping each other,
 * and `podman rm` releases both. podman runs with a private configuration under a
 * temporary root (test/support/runtimes.ts); the driver is a real `cni-driver serve`.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { expect } from "chai";
import { DriverHarness } from "../support/driver-harness.js";
import { requireCommand, requireRoot } from "../support/requirements.js";
import { ensureShimBuilt, Podman, SHIM_TYPE, shimPlugin } from "../support/runtimes.js";

const SUBNET_OCTET = 60;

describe("e2e: podman (CNI backend) execs the shim", function () {
  this.timeout(60_000);
  let h: DriverHarness | undefined;
  let podman: Podman | undefined;
  let network = "";
  /** The two containers: full id and the address podman reports. */
  const pods: Array<{ name: string; id: string; ip: string; sandboxKey: string }> = [];

  before(async function () {
    this.timeout(240_000);
    requireRoot(this);
    requireCommand(this, "podman", "podman");
    requireCommand(this, "runc", "runc");
    requireCommand(this, "busybox", "busybox-static");
    const shim = ensureShimBuilt();
    h = new DriverHarness({ subnetOctet: SUBNET_OCTET });
    await h.writeDefaultConfig();
    await h.start();
    podman = new Podman();
    network = `cdt-${podman.tag}`;
    podman.installPlugin(SHIM_TYPE, shim);
    // The shim's deletion queue is the driver's state dir, as on a node; its log
    // stays under the runtime's root for a failed run to be read.
    podman.writeNetwork(network, [
      shimPlugin(h.socket, {
        stateDir: h.stateDir,
        logFile: join(podman.root, "shim.log"),
        timeoutSeconds: 15,
      }),
    ]);
    podman.importBusybox();
  });

  after(async () => {
    await podman?.cleanup();
    await h?.cleanup();
  });

  it("gives two containers on the shim's network addresses from the driver, and they ping each other", () => {
    const p = podman as Podman;
    const harness = h as DriverHarness;
    for (const suffix of ["a", "b"]) {
      const name = `cdt${p.tag}${suffix}`;
      const id = p.runDetached(name, network, ["sleep", "120"]);
      const attachment = p.attachment(id, network);
      expect(attachment, `podman inspect ${name}: no attachment to ${network}`).to.not.equal(
        undefined,
      );
      pods.push({ name, id, ip: attachment?.ipAddress ?? "", sandboxKey: p.sandboxKey(id) });
    }
    const [a, b] = pods as [(typeof pods)[0], (typeof pods)[0]];

    // The addresses are the driver's: host-local leases in the harness's data dir.
    for (const pod of pods)
      expect(pod.ip).to.match(new RegExp(`^10\\.244\\.${SUBNET_OCTET}\\.\\d+$`));
    expect(a.ip).to.not.equal(b.ip);
    expect(harness.leases()).to.have.members([a.ip, b.ip]);
    // The driver ran the chain for each (its cache is keyed by podman's container id),
    // and its built-in plugin put each host veth on the harness bridge.
    for (const pod of pods) {
      expect(harness.cacheFiles().some((f) => f.includes(pod.id))).to.equal(true);
    }
    expect(harness.bridgePorts()).to.have.length(2);

    // Inside each container eth0 carries that address.
    for (const pod of pods) {
      const r = p.exec(pod.id, ["ip", "-4", "-o", "addr", "show", "dev", "eth0"]);
      expect(r.status, r.stderr).to.equal(0);
      expect(r.stdout).to.include(`inet ${pod.ip}/24`);
    }
    // busybox ping, as root in the container, both ways.
    for (const [from, to] of [
      [a, b],
      [b, a],
    ] as const) {
      const r = p.exec(from.id, ["ping", "-c", "1", "-W", "2", to.ip]);
      expect(r.status, `ping ${from.name} -> ${to.ip}: ${r.stdout}${r.stderr}`).to.equal(0);
    }
  });

  it("podman rm releases both: no lease, no bridge port, no cached result, no netns", async () => {
    const p = podman as Podman;
    const harness = h as DriverHarness;
    expect(pods, "the containers of the first test").to.have.length(2);
    expect(harness.leases()).to.have.length(2);

    const r = p.remove(...pods.map((pod) => pod.id));
    expect(r.status, r.stderr).to.equal(0);

    expect(p.containerIds()).to.deep.equal([]);
    expect(harness.leases()).to.deep.equal([]);
    // DEL ran in each live netns: the driver removed the veth pair before answering.
    expect(harness.bridgePorts()).to.deep.equal([]);
    for (const pod of pods) {
      expect(harness.cacheFiles().some((f) => f.includes(pod.id))).to.equal(false);
      if (pod.sandboxKey) expect(existsSync(pod.sandboxKey), pod.sandboxKey).to.equal(false);
    }
  });
});
