/**
 * The `cni-driver` client commands against a real driver: what they print and
 * how they exit (docs/cli.md), and bad input answered as a plugin would
 * (the CNI error JSON on stdout, exit 1) or as a usage error (exit 2).
 */
import { join } from "node:path";
import { expect } from "chai";
import { DriverHarness, runDriverCli } from "../support/driver-harness.js";
import { createNetns, linkIn } from "../support/netns.js";
import { requireReferencePlugins, requireRoot } from "../support/requirements.js";

describe("cni-driver add|del|check|status|gc (integration)", function () {
  this.timeout(60_000);
  let h: DriverHarness;

  before(async function () {
    requireRoot(this);
    requireReferencePlugins(this, "host-local");
    h = new DriverHarness({ subnetOctet: 50 });
    await h.writeDefaultConfig();
    await h.start();
  });

  after(async () => {
    await h?.cleanup();
  });

  const cli = (...args: string[]) => runDriverCli(args);
  const pod = (i: number) => [
    "--socket",
    h.socket,
    "--container-id",
    h.containerId(i),
    "--ifname",
    "eth0",
    "--pod-namespace",
    h.podNamespace,
    "--pod-name",
    h.podName(i),
  ];

  it("status: exit 0 and CniStatus when ready; 1 when the network asked about cannot serve; 2 when no driver answers", () => {
    const ready = cli("status", "--socket", h.socket);
    expect(ready.status, ready.stderr).to.equal(0);
    expect(JSON.parse(ready.stdout)).to.include({ ready: true });
    const unknown = cli("status", "--socket", h.socket, "--network", "no-such-network");
    expect(unknown.status).to.equal(1);
    expect(JSON.parse(unknown.stdout).error.code).to.equal(7);
    const away = cli("status", "--socket", join(h.root, "nobody.sock"), "--timeout", "2");
    expect(away.status).to.equal(2);
  });

  it("add prints the result and exits 0; check exits 0; del exits 0; check then fails with the CNI error JSON", () => {
    createNetns(h.netnsName(1));
    const added = cli("add", ...pod(1), "--netns", h.netnsPath(1));
    expect(added.status, added.stdout + added.stderr).to.equal(0);
    const result = JSON.parse(added.stdout) as { cniVersion: string; ips: { address: string }[] };
    expect(result.cniVersion).to.equal("1.0.0");
    expect(linkIn(h.netnsName(1), "eth0")?.ipv4).to.deep.equal([result.ips[0]?.address]);
    expect(cli("check", ...pod(1), "--netns", h.netnsPath(1)).status).to.equal(0);
    expect(cli("del", ...pod(1), "--netns", h.netnsPath(1)).status).to.equal(0);
    const check = cli("check", ...pod(1), "--netns", h.netnsPath(1));
    expect(check.status).to.equal(1);
    // Nothing cached for it any more: libcni's "could not retrieve cached result".
    expect(JSON.parse(check.stdout).code).to.equal(3);
    expect(h.leases()).to.deep.equal([]);
  });

  it("add answers bad --capabilities or --args with the CNI error JSON on stdout (exit 1), and a bad --timeout as usage (exit 2)", () => {
    createNetns(h.netnsName(2));
    const caps = cli("add", ...pod(2), "--netns", h.netnsPath(2), "--capabilities", "{bad");
    expect(caps.status).to.equal(1);
    expect(JSON.parse(caps.stdout)).to.include({ code: 6 });
    expect(JSON.parse(caps.stdout).msg).to.match(/^--capabilities is not JSON/);
    const args = cli("add", ...pod(2), "--netns", h.netnsPath(2), "--args", "garbage");
    expect(args.status).to.equal(1);
    expect(JSON.parse(args.stdout).msg).to.contain("garbage");
    for (const t of ["abc", "0", ""]) {
      const bad = cli("add", ...pod(2), "--netns", h.netnsPath(2), "--timeout", t);
      expect(bad.status, `--timeout ${JSON.stringify(t)}`).to.equal(2);
      expect(bad.stderr).to.contain("--timeout must be a positive number of seconds");
    }
    expect(h.leases(), "nothing set up by the refused calls").to.deep.equal([]);
  });

  it("gc keeps the attachments --valid lists (repeated or comma-separated) and removes the rest; an ID/ with no interface is refused", () => {
    for (const i of [3, 4, 5]) {
      createNetns(h.netnsName(i));
      expect(cli("add", ...pod(i), "--netns", h.netnsPath(i)).status).to.equal(0);
    }
    const empty = cli("gc", "--socket", h.socket, "--valid", `${h.containerId(3)}/`);
    expect(empty.status).to.equal(2);
    expect(h.leases()).to.have.length(3);

    const gc = cli(
      "gc",
      "--socket",
      h.socket,
      "--valid",
      `${h.containerId(3)}/eth0,${h.containerId(4)}/eth0`,
    );
    expect(gc.status, gc.stdout + gc.stderr).to.equal(0);
    expect(gc.stderr).to.contain("removed 1 attachment(s)");
    expect(h.cacheFiles().sort()).to.deep.equal(
      [3, 4].map((i) => `${h.network}-${h.containerId(i)}-eth0`).sort(),
    );
    for (const i of [3, 4])
      expect(cli("del", ...pod(i), "--netns", h.netnsPath(i)).status).to.equal(0);
    expect(h.leases()).to.deep.equal([]);
  });
});
