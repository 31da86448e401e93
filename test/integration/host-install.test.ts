import { spawn } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect } from "chai";
import { KNOWN_CAPABILITIES } from "../../src/cni/capabilities.js";
import { parseNetworkConfigList } from "../../src/cni/conflist.js";
import { buildPluginStdin } from "../../src/cni/plugin-config.js";
import { DEFAULT_STATE_DIR } from "../../src/cni/socket-path.js";
import { writeFileAtomic } from "../../src/common/atomic-write.js";
import {
  HOST_CONFLIST_NAME,
  hostConflist,
  installExecutable,
} from "../../src/driver/lifecycle/host-install.js";
import { DELETION_QUEUE_DIR } from "../../src/wire/deletion-record.js";
import { DriverHarness, runDriverCli, sleep } from "../support/driver-harness.js";
import { createNetns, deleteNetns, listHostLinks } from "../support/netns.js";
import { installCniArgs } from "../support/node-cli.js";
import {
  REFERENCE_PLUGIN_DIR,
  requireReferencePlugins,
  requireRoot,
} from "../support/requirements.js";
import { ensureShimBuilt } from "../support/runtimes.js";
import { execShim } from "../support/shim-exec.js";
import { withTmpfs } from "../support/tmpfs.js";

describe("host install: files by temp file + rename", () => {
  let dir = "";
  before(() => {
    dir = mkdtempSync(join(tmpdir(), "cni-driver-install-"));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it("the host conflist holds only the shim, declaring every capability the driver honours", () => {
    const list = parseNetworkConfigList(
      hostConflist({ socket: "/run/cni-driver/driver.sock", stateDir: "/var/lib/cni-driver" }),
    );
    expect(list.name).to.equal("cni-driver");
    expect(list.cniVersion).to.equal("1.1.0"); // picked from cniVersions by a 1.1.0 runtime
    expect(list.plugins.map((p) => p.type)).to.deep.equal(["cni-driver-shim"]);
    expect(list.plugins[0]?.raw.socket).to.equal("/run/cni-driver/driver.sock");
    expect(list.plugins[0]?.raw.stateDir).to.equal("/var/lib/cni-driver");
    expect(Object.keys(list.plugins[0]?.capabilities ?? {})).to.have.members([
      ...KNOWN_CAPABILITIES,
    ]);
    // for runtimes before 1.1.0
    expect(JSON.parse(hostConflist({ socket: "/s", stateDir: "/d" })).cniVersion).to.equal("1.0.0");
  });

  it("writeFileAtomic writes, then reports an unchanged file without rewriting it", async () => {
    const path = join(dir, "a.conflist");
    expect(await writeFileAtomic(path, "one")).to.equal(true);
    const ino = statSync(path).ino;
    expect(await writeFileAtomic(path, "one")).to.equal(false);
    expect(statSync(path).ino).to.equal(ino);
    expect(await writeFileAtomic(path, "two")).to.equal(true);
    expect(readFileSync(path, "utf8")).to.equal("two");
    expect(statSync(path).ino).to.not.equal(ino); // replaced by rename, never rewritten in place
  });

  it("removes the temporary files an install cut short left, once a minute old, and only its own", async () => {
    const src = join(dir, "plugin-x");
    writeFileSync(src, "#!/bin/sh\n", { mode: 0o755 });
    const binDir = join(dir, "bin-stale");
    mkdirSync(binDir);
    const old = new Date(Date.now() - 120_000);
    const names = {
      crashed: ".plugin-x.0123abcd.tmp", // an install killed mid-copy
      copying: ".plugin-x.89abcdef.tmp", // another installer, seconds ago
      otherName: ".plugin-y.0123abcd.tmp",
      notOurs: ".plugin-x.backup.tmp",
    };
    for (const n of Object.values(names)) writeFileSync(join(binDir, n), "x");
    for (const n of [names.crashed, names.otherName, names.notOurs])
      utimesSync(join(binDir, n), old, old);

    await installExecutable(src, binDir);
    expect(readdirSync(binDir).sort()).to.deep.equal(
      ["plugin-x", names.copying, names.otherName, names.notOurs].sort(),
    );

    writeFileSync(join(dir, ".net.conflist.fedcba98.tmp"), "{");
    utimesSync(join(dir, ".net.conflist.fedcba98.tmp"), old, old);
    await writeFileAtomic(join(dir, "net.conflist"), "{}");
    expect(existsSync(join(dir, ".net.conflist.fedcba98.tmp"))).to.equal(false);
  });

  it("an install cut short by a full disk leaves no partial temporary file, and the old plugin in place", async function () {
    requireRoot(this);
    // A 1 MiB tmpfs as the bin dir, and a 2 MiB plugin: the copy fails half-way with ENOSPC.
    const binDir = join(dir, "bin-full");
    await withTmpfs(binDir, "1m", async () => {
      writeFileSync(join(binDir, "plugin-big"), "old", { mode: 0o755 });
      const src = join(dir, "plugin-big");
      writeFileSync(src, Buffer.alloc(2 * 1024 * 1024, 1), { mode: 0o755 });
      const err = await installExecutable(src, binDir).then(
        () => undefined,
        (e: NodeJS.ErrnoException) => e,
      );
      expect(err?.code).to.equal("ENOSPC");
      expect(readdirSync(binDir)).to.deep.equal(["plugin-big"]);
      expect(readFileSync(join(binDir, "plugin-big"), "utf8")).to.equal("old");
    });
  });

  it("install-cni puts the shim in (replacing an older one) and the plugins the host lacks, keeping the host's own", () => {
    const binDir = join(dir, "host-bin");
    mkdirSync(binDir);
    writeFileSync(join(binDir, "loopback"), "#!/bin/sh\n# the host's own\n", { mode: 0o755 });
    writeFileSync(join(binDir, "cni-driver-shim"), "old shim", { mode: 0o755 });
    const shim = join(dir, "new-shim");
    writeFileSync(shim, "#!/bin/sh\n# new shim\n", { mode: 0o755 });
    const r = runDriverCli(installCniArgs(binDir, shim, "host-local,loopback"));
    expect(r.status, r.stderr).to.equal(0);
    expect(r.stderr).to.contain("kept the host's own loopback");
    expect(readFileSync(join(binDir, "loopback"), "utf8")).to.contain("the host's own");
    expect(readFileSync(join(binDir, "cni-driver-shim"), "utf8")).to.contain("new shim");
    expect(
      readFileSync(join(binDir, "host-local")).equals(readFileSync("/usr/lib/cni/host-local")),
    ).to.equal(true);
    expect(statSync(join(binDir, "host-local")).mode & 0o777).to.equal(0o755);
  });

  it("installs over an executable that is running (where cp fails with 'text file busy')", async () => {
    const src = join(dir, "fake-plugin");
    writeFileSync(src, "#!/bin/sh\nsleep 5\n", { mode: 0o755 });
    const binDir = join(dir, "bin");
    await installExecutable(src, binDir);
    const running = spawn(join(binDir, "fake-plugin"), [], { stdio: "ignore" });
    try {
      await sleep(100);
      writeFileSync(src, "#!/bin/sh\necho v2\n", { mode: 0o755 });
      await installExecutable(src, binDir);
      expect(readFileSync(join(binDir, "fake-plugin"), "utf8")).to.contain("v2");
      expect(statSync(join(binDir, "fake-plugin")).mode & 0o777).to.equal(0o755);
    } finally {
      running.kill("SIGKILL");
    }
  });
});

describe("host install: the host conflist only once the driver is ready (integration)", function () {
  this.timeout(60_000);
  let h: DriverHarness;
  let confDir = "";

  before(function () {
    requireRoot(this);
    requireReferencePlugins(this, "host-local");
    confDir = mkdtempSync(join(tmpdir(), "cni-driver-netd-"));
    h = new DriverHarness({ subnetOctet: 17, extraFlags: ["--host-cni-conf-dir", confDir] });
  });
  after(async () => {
    await h?.cleanup();
    if (confDir) rmSync(confDir, { recursive: true, force: true });
  });

  it("writes nothing while the driver has no valid config (not ready)", async () => {
    await h.writeConfig({ "pod-network.conflist": "{ not json" });
    await h.start({ waitReady: false });
    let status = await h.client.cniStatus({}, { timeoutMs: 2000 });
    for (let i = 0; i < 100 && status.api_version === 0; i++) {
      await sleep(50);
      status = await h.client.cniStatus({}, { timeoutMs: 2000 });
    }
    expect(status.api_version, "the driver answers").to.equal(1);
    expect(status.not_ready_reasons.join()).to.contain("no valid network configuration");
    expect(status.ready).to.equal(false);
    // Its refusal of a pod call says so in the proto's field, which the shim's DEL reads.
    const del = await h.client.tearDownPod(h.podRequest("not-ready"), { timeoutMs: 2000 });
    expect(del.error).to.deep.include({ code: 11, not_ready: true });
    await sleep(1500);
    expect(existsSync(join(confDir, HOST_CONFLIST_NAME))).to.equal(false);
    expect(h.running, "the driver is still running").to.equal(true);
  });

  it("writes it once a valid config makes the driver ready, pointing at the driver's socket and state dir", async () => {
    await h.writeDefaultConfig();
    await h.waitReady();
    const path = join(confDir, HOST_CONFLIST_NAME);
    for (let i = 0; i < 60 && !existsSync(path); i++) await sleep(50);
    const list = parseNetworkConfigList(readFileSync(path));
    expect(list.plugins[0]?.raw.socket).to.equal(h.socket);
    expect(list.plugins[0]?.raw.stateDir).to.equal(h.stateDir);
  });

  it("leaves it in place on shutdown (the shim's DEL path needs it while the driver is away)", async () => {
    expect(await h.stop()).to.equal(0);
    expect(existsSync(join(confDir, HOST_CONFLIST_NAME))).to.equal(true);
  });
});

describe("host install: a DEL the shim queues reaches a driver with its own --state-dir (integration)", function () {
  this.timeout(120_000);
  let h: DriverHarness;
  let confDir = "";
  let shimPath = "";

  before(async function () {
    this.timeout(300_000);
    requireRoot(this);
    requireReferencePlugins(this, "host-local");
    shimPath = ensureShimBuilt();
    confDir = mkdtempSync(join(tmpdir(), "cni-driver-netd-"));
    // The harness's --state-dir is under its temporary root: not the shim's default.
    h = new DriverHarness({ subnetOctet: 91, extraFlags: ["--host-cni-conf-dir", confDir] });
    await h.writeDefaultConfig();
    await h.start();
  });
  after(async () => {
    await h?.cleanup();
    if (confDir) rmSync(confDir, { recursive: true, force: true });
  });

  /** The shim's stdin as a runtime builds it from the host conflist the driver wrote. */
  async function shimStdinFromHostConflist(): Promise<string> {
    const path = join(confDir, HOST_CONFLIST_NAME);
    for (let i = 0; i < 100 && !existsSync(path); i++) await sleep(50);
    const list = parseNetworkConfigList(readFileSync(path));
    return buildPluginStdin({ list, pluginIndex: 0 });
  }

  const shimEnv = (command: string, i: string): Record<string, string> => ({
    CNI_COMMAND: command,
    CNI_CONTAINERID: h.containerId(i),
    CNI_NETNS: h.netnsPath(i),
    CNI_IFNAME: "eth0",
    CNI_PATH: REFERENCE_PLUGIN_DIR,
    CNI_ARGS: `IgnoreUnknown=1;K8S_POD_NAMESPACE=${h.podNamespace};K8S_POD_NAME=${h.podName(i)}`,
  });

  it("the driver replays at start the DEL the shim queued while it was stopped: lease and cache gone", async () => {
    const i = "away";
    const stdin = await shimStdinFromHostConflist();
    expect(h.stateDir).to.not.equal(DEFAULT_STATE_DIR);
    expect(JSON.parse(stdin).stateDir).to.equal(h.stateDir);
    createNetns(h.netnsName(i));
    try {
      const add = await execShim(shimPath, shimEnv("ADD", i), stdin);
      expect(add.status, add.stdout).to.equal(0);
      const address = String(
        (add.json as { ips: Array<{ address: string }> }).ips[0]?.address,
      ).split("/")[0];
      expect(h.leases()).to.include(address);
      expect(h.cacheFiles().filter((f) => f.includes(h.containerId(i)))).to.have.length(1);

      await h.stop();
      const del = await execShim(shimPath, shimEnv("DEL", i), stdin);
      expect(del.status, del.stdout).to.equal(0);
      expect(del.stdout).to.equal("");
      expect(h.queuedDeletions(), "queued in the driver's state dir").to.have.length(1);
      expect(
        existsSync(join(DEFAULT_STATE_DIR, DELETION_QUEUE_DIR, h.queuedDeletions()[0] ?? "-")),
      ).to.equal(false);
      expect(h.leases(), "the lease waits for the driver").to.include(address);

      await h.start();
      expect(h.queuedDeletions(), "records after the replay").to.deep.equal([]);
      expect(h.leases(), "the lease after the replay").to.not.include(address);
      expect(h.cacheFiles().filter((f) => f.includes(h.containerId(i)))).to.deep.equal([]);
      expect(listHostLinks(h.hostVeth(i))).to.deep.equal([]);
    } finally {
      if (!h.running) await h.start().catch(() => {});
      await h.client.tearDownPod(h.podRequest(i), { timeoutMs: 10_000 }).catch(() => {});
      deleteNetns(h.netnsName(i));
    }
  });
});
