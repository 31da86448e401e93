/**
 * A driver meeting files a newer driver (or shim) wrote, in formats it does not
 * know: it says so in an error naming each file and both versions, and leaves
 * them as they are. A deletion record of an unknown kind is kept, not replayed
 * and not dropped; a result cache entry of an unknown kind is neither read nor
 * removed, and start-up clean-up keeps its hands off the leases, since it can
 * no longer tell which attachment holds one. The uninstall refuses rather than
 * guess at a newer install-cni's record.
 */
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { expect } from "chai";
import { INSTALLED_RECORD } from "../../src/driver/lifecycle/host-install.js";
import { DELETION_QUEUE_DIR } from "../../src/wire/deletion-record.js";
import { DriverHarness, runDriverCli } from "../support/driver-harness.js";
import { installCniArgs, uninstallArgs } from "../support/node-cli.js";
import { requireReferencePlugins, requireRoot } from "../support/requirements.js";

const OCTET = 173;

/** The driver's JSON log lines at level error. */
function errorLines(
  logs: string,
): Array<{ msg: string; path?: string; err?: string; files?: string[] }> {
  return logs
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l))
    .filter((l) => l.level === 50 || l.level === "error");
}

describe("cni-driver serve: files of a newer format are refused and kept (integration)", function () {
  this.timeout(60_000);
  let h: DriverHarness;

  before(async function () {
    requireRoot(this);
    requireReferencePlugins(this, "host-local");
    h = new DriverHarness({ subnetOctet: OCTET });
    await h.writeDefaultConfig();
  });

  after(async () => {
    await h?.cleanup();
  });

  it("keeps a deletion record of a later or unknown kind, naming it, and replays the known ones", async () => {
    const queue = join(h.stateDir, DELETION_QUEUE_DIR);
    mkdirSync(queue, { recursive: true, mode: 0o700 });
    const later = join(queue, `_default-${h.containerId(1)}-eth0.json`);
    const unknown = join(queue, `_default-${h.containerId(2)}-eth0.json`);
    const laterText = `${JSON.stringify({ kind: "cniDriverDeletionV2", attachment: { containerId: h.containerId(1) } })}\n`;
    const unknownText = `${JSON.stringify({ kind: "somethingElse", containerId: h.containerId(2), ifName: "eth0" })}\n`;
    writeFileSync(later, laterText);
    writeFileSync(unknown, unknownText);
    h.queueDeletion(3);

    await h.start();
    expect(h.queuedDeletions().sort()).to.deep.equal(
      [`_default-${h.containerId(1)}-eth0.json`, `_default-${h.containerId(2)}-eth0.json`].sort(),
    );
    expect(readFileSync(later, "utf8")).to.equal(laterText);
    expect(readFileSync(unknown, "utf8")).to.equal(unknownText);
    const refused = errorLines(h.logs).filter(
      (l) => l.msg === "deletion record of a format this driver does not know; kept",
    );
    expect(refused.map((l) => l.path).sort()).to.deep.equal([later, unknown].sort());
    expect(refused.find((l) => l.path === later)?.err).to.equal(
      `${later}: a deletion record of kind "cniDriverDeletionV2", which this cni-driver does not know (it knows up to kind "cniDriverDeletionV1"); left as it is for a cni-driver that knows it`,
    );
  });

  it("neither reads nor removes a cache entry of a later kind, and releases no lease at start", async () => {
    await h.stop();
    const results = join(h.cacheDir, "results");
    mkdirSync(results, { recursive: true, mode: 0o700 });
    const entry = join(results, `${h.network}-${h.containerId(4)}-eth0`);
    const entryText = JSON.stringify({
      kind: "cniCacheV2",
      containerId: h.containerId(4),
      ifName: "eth0",
      networkName: h.network,
    });
    writeFileSync(entry, entryText, { mode: 0o600 });
    // The address that attachment holds: with no cache entry it reads, recovery would release it.
    mkdirSync(join(h.dataDir, h.network), { recursive: true });
    const lease = `10.244.${OCTET}.200`;
    writeFileSync(join(h.dataDir, h.network, lease), `${h.containerId(4)}\r\neth0`);

    await h.start();
    expect(h.leases()).to.include(lease);
    const skipped = errorLines(h.logs).find((l) => l.files !== undefined);
    expect(skipped?.msg).to.contain("files of a newer format");
    expect(skipped?.files).to.deep.equal([entry]);

    const del = await h.client.tearDownPod(h.podRequest(4));
    expect(del.error?.code).to.equal(6);
    expect(del.error?.msg).to.equal(
      `${entry}: a result cache entry of kind "cniCacheV2", which this cni-driver does not know (it knows up to kind "cniCacheV1"); left as it is for a cni-driver that knows it`,
    );
    expect(readFileSync(entry, "utf8")).to.equal(entryText);
    expect(h.leases()).to.include(lease);
  });

  it("uninstall refuses a newer install-cni's record, naming it, and removes nothing", async () => {
    await h.stop();
    const binDir = join(h.root, "host-bin");
    const confDir = join(h.root, "host-net.d");
    mkdirSync(binDir, { recursive: true });
    mkdirSync(confDir, { recursive: true });
    const record = join(binDir, INSTALLED_RECORD);
    writeFileSync(record, '{"version":2,"installed":{"portmap":{}}}\n');
    writeFileSync(join(binDir, "portmap"), "");
    writeFileSync(join(confDir, "10-cni-driver.conflist"), "{}");
    const args = uninstallArgs(h, confDir, binDir);
    const r = runDriverCli(args);
    expect(r.status, r.stderr).to.equal(1);
    expect(r.stderr).to.contain(
      `${record}: a record of the plugins install-cni installed of version 2, which this cni-driver does not know (it knows up to version 1)`,
    );
    expect(readFileSync(join(confDir, "10-cni-driver.conflist"), "utf8")).to.equal("{}");
    expect(readFileSync(join(binDir, "portmap"), "utf8")).to.equal("");
    expect(h.leases()).to.include(`10.244.${OCTET}.200`);

    // Without the record, the cache entry of a later kind (left by the test before) counts as a pod still attached.
    rmSync(record);
    const again = runDriverCli(args);
    expect(again.status, again.stderr).to.equal(1);
    expect(again.stderr).to.contain(
      `pods are still attached: an attachment of a newer cni-driver (${join(h.cacheDir, "results", `${h.network}-${h.containerId(4)}-eth0`)})`,
    );
    expect(readFileSync(join(confDir, "10-cni-driver.conflist"), "utf8")).to.equal("{}");
  });

  it("install-cni refuses a newer record before it installs anything", () => {
    const binDir = join(h.root, "host-bin-2");
    mkdirSync(binDir, { recursive: true });
    const record = join(binDir, INSTALLED_RECORD);
    const newer = '{"version":2,"installed":{}}\n';
    writeFileSync(record, newer);
    const shim = join(h.root, "new-shim");
    writeFileSync(shim, "#!/bin/sh\n", { mode: 0o755 });
    const r = runDriverCli(installCniArgs(binDir, shim, "portmap"));
    expect(r.status).to.equal(1);
    expect(r.stderr).to.contain(
      `${record}: a record of the plugins install-cni installed of version 2`,
    );
    expect(readFileSync(record, "utf8")).to.equal(newer);
    expect(() => readFileSync(join(binDir, "cni-driver-shim"))).to.throw(/ENOENT/);
  });
});
