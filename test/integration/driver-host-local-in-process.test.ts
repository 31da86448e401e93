/**
 * `--host-local in-process`: host-local's allocator inside the driver, on the
 * lease files and lock of the binary. Pods get working addresses from it; its
 * files are the binary's, byte for byte; a node switches between it and the
 * exec'd binary across a restart without losing or reusing a lease; a crash
 * loses nothing (110 pods at once: driver-scale.test.ts); without the flock addon
 * the driver falls back to the binary; a bad `--host-local` value stops `serve`.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect } from "chai";
import type { PodResponse } from "../../src/wire/types.js";
import {
  DriverHarness,
  driverCommand,
  expectNoCniError,
  REPO_ROOT,
} from "../support/driver-harness.js";
import {
  createNetns,
  deleteNetns,
  linkIn,
  listHostLinks,
  listNetns,
  pingFrom,
} from "../support/netns.js";
import {
  REFERENCE_PLUGIN_DIR,
  requireReferencePlugins,
  requireRoot,
} from "../support/requirements.js";

const IN_PROCESS = ["--host-local", "in-process"];
const EXEC = ["--host-local", "exec"];

/** The pod's IPv4 address without its prefix, from a SetUpPod answer. */
function podIp(res: PodResponse): string {
  const address = res.result?.ips[0]?.address;
  if (!address) throw new Error(`no address in ${JSON.stringify(res)}`);
  return address.split("/")[0] as string;
}

/** The address after `ip` (IPv4, within its /24 here). */
function nextIp(ip: string): string {
  const parts = ip.split(".").map(Number);
  parts[3] = (parts[3] as number) + 1;
  return parts.join(".");
}

/** The `host_local` label of the driver's `cni_driver_info` sample. */
async function hostLocalLabel(h: DriverHarness): Promise<string | undefined> {
  const { body } = await h.httpGet("/metrics");
  const line = body.split("\n").find((l) => l.startsWith("cni_driver_info{"));
  expect(line, "cni_driver_info in /metrics").to.match(
    /^cni_driver_info\{version="[^"]+",node="[^"]+",plumbing="[^"]+",spawn="[^"]+",host_local="[^"]+"\} 1$/,
  );
  return /host_local="([^"]+)"/.exec(line ?? "")?.[1];
}

/** What the lease file of `ip` holds. */
function leaseContent(h: DriverHarness, ip: string, dataDir = h.dataDir): string {
  return readFileSync(join(dataDir, h.network, ip), "utf8");
}

/** The host veths among the host's links (none should be left after DEL). */
function hostVethsLeft(h: DriverHarness, indexes: number[]): string[] {
  const all = new Set(listHostLinks(""));
  return indexes.map((i) => h.hostVeth(i)).filter((v) => all.has(v));
}

/** Sets up pods one after the other (round robin makes their addresses predictable). */
async function setUpInOrder(h: DriverHarness, indexes: number[]): Promise<string[]> {
  const ips: string[] = [];
  for (const i of indexes) {
    createNetns(h.netnsName(i));
    const res = await h.client.setUpPod(h.podRequest(i));
    expectNoCniError(res);
    ips.push(podIp(res));
  }
  return ips;
}

async function tearDownAll(h: DriverHarness, indexes: number[]): Promise<void> {
  const results = await Promise.all(indexes.map((i) => h.client.tearDownPod(h.podRequest(i))));
  const failed = results.flatMap((r) => r.error ?? []);
  expect(failed, JSON.stringify(failed.slice(0, 3))).to.deep.equal([]);
  for (const i of indexes) deleteNetns(h.netnsName(i));
}

/** Nothing of the harness's pods is left: no lease, cache file, bridge port, veth or netns. */
async function expectNothingLeft(h: DriverHarness, indexes: number[]): Promise<void> {
  expect(h.leases(), "lease files").to.deep.equal([]);
  expect(h.cacheFiles(), "cache files").to.deep.equal([]);
  expect(h.bridgePorts(), "bridge ports").to.deep.equal([]);
  expect(hostVethsLeft(h, indexes), "host veths").to.deep.equal([]);
  expect(listNetns(h.netnsPrefix), "namespaces").to.deep.equal([]);
  expect((await h.client.cniStatus()).attachments, "attachments").to.equal(0);
}

/** Runs the host-local binary itself, as a runtime's chain would. */
function execHostLocal(
  command: "ADD" | "DEL",
  conf: Record<string, unknown>,
  env: { containerId: string; netns: string; ifName: string },
): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(join(REFERENCE_PLUGIN_DIR, "host-local"), [], {
    input: JSON.stringify(conf),
    encoding: "utf8",
    timeout: 10_000,
    env: {
      PATH: process.env.PATH ?? "/usr/sbin:/usr/bin:/sbin:/bin",
      CNI_COMMAND: command,
      CNI_CONTAINERID: env.containerId,
      CNI_NETNS: env.netns,
      CNI_IFNAME: env.ifName,
      CNI_PATH: REFERENCE_PLUGIN_DIR,
    },
  });
  return { status: r.status, stdout: r.stdout ?? "", stderr: r.stderr ?? "" };
}

describe("cni-driver serve --host-local in-process: pods and lease files (integration)", function () {
  this.timeout(60_000);
  let h: DriverHarness;
  let ipA = "";
  let ipB = "";

  before(async function () {
    requireRoot(this);
    requireReferencePlugins(this, "host-local", "portmap");
    h = new DriverHarness({ subnetOctet: 30, extraFlags: IN_PROCESS });
    await h.writeDefaultConfig();
    await h.start();
  });

  after(async () => {
    await h?.cleanup();
  });

  it('says host_local="in-process" in /metrics', async () => {
    expect(await hostLocalLabel(h)).to.equal("in-process");
  });

  it("gives two pods distinct addresses in the pod subnet; they ping each other and the gateway", async () => {
    [ipA, ipB] = (await setUpInOrder(h, [1, 2])) as [string, string];
    expect(ipA).to.not.equal(ipB);
    for (const [i, ip] of [
      [1, ipA],
      [2, ipB],
    ] as const) {
      expect(ip.startsWith("10.244.30."), ip).to.equal(true);
      expect(ip).to.not.equal(h.gateway);
      expect(linkIn(h.netnsName(i), "eth0")?.ipv4, `pod ${i}`).to.deep.equal([`${ip}/24`]);
    }
    expect(h.bridgePorts()).to.have.members([h.hostVeth(1), h.hostVeth(2)]);
    expect(pingFrom(h.netnsName(1), ipB), "pod 1 -> pod 2").to.equal(true);
    expect(pingFrom(h.netnsName(2), ipA), "pod 2 -> pod 1").to.equal(true);
    expect(pingFrom(h.netnsName(1), h.gateway), "pod 1 -> gateway").to.equal(true);
    expect(pingFrom(h.netnsName(2), h.gateway), "pod 2 -> gateway").to.equal(true);
  });

  it("writes host-local's lease files: named by the address, holding <id>\\r\\neth0, last_reserved_ip.0 the last one", () => {
    expect(h.leases()).to.have.members([ipA, ipB]);
    expect(leaseContent(h, ipA)).to.equal(`${h.containerId(1)}\r\neth0`);
    expect(leaseContent(h, ipB)).to.equal(`${h.containerId(2)}\r\neth0`);
    const dir = join(h.dataDir, h.network);
    expect(readFileSync(join(dir, "last_reserved_ip.0"), "utf8")).to.equal(ipB);
    expect(readdirSync(dir).sort()).to.deep.equal([ipA, ipB, "last_reserved_ip.0", "lock"].sort());
  });

  it("leaves the same files, with the same modes, as the host-local binary given the same ADDs", () => {
    const refDataDir = join(h.root, "reference-networks");
    const conf = {
      cniVersion: "1.0.0",
      name: h.network,
      ipam: { type: "host-local", ranges: [[{ subnet: h.subnet }]], dataDir: refDataDir },
    };
    for (const i of [1, 2]) {
      const r = execHostLocal("ADD", conf, {
        containerId: h.containerId(i),
        netns: h.netnsPath(i),
        ifName: "eth0",
      });
      expect(r.status, r.stderr || r.stdout).to.equal(0);
    }
    const ours = join(h.dataDir, h.network);
    const ref = join(refDataDir, h.network);
    const names = readdirSync(ref).sort();
    expect(readdirSync(ours).sort(), "file names").to.deep.equal(names);
    for (const name of names) {
      expect(readFileSync(join(ours, name), "utf8"), `${name}'s content`).to.equal(
        readFileSync(join(ref, name), "utf8"),
      );
      expect((statSync(join(ours, name)).mode & 0o7777).toString(8), `${name}'s mode`).to.equal(
        (statSync(join(ref, name)).mode & 0o7777).toString(8),
      );
    }
    expect((statSync(ours).mode & 0o7777).toString(8), "the network directory's mode").to.equal(
      (statSync(ref).mode & 0o7777).toString(8),
    );
  });

  it("passes CHECK right after ADD", async () => {
    expectNoCniError(await h.client.checkPod(h.podRequest(1)));
    expectNoCniError(await h.client.checkPod(h.podRequest(2)));
  });

  it("releases the lease on DEL (the file is gone), and a second DEL succeeds too", async () => {
    expectNoCniError(await h.client.tearDownPod(h.podRequest(1)));
    expect(h.leases(), "after pod 1's DEL").to.deep.equal([ipB]);
    expectNoCniError(await h.client.tearDownPod(h.podRequest(1)));
    expect(h.leases(), "after pod 1's second DEL").to.deep.equal([ipB]);

    expectNoCniError(await h.client.tearDownPod(h.podRequest(2)));
    expectNoCniError(await h.client.tearDownPod(h.podRequest(2)));
    for (const i of [1, 2]) deleteNetns(h.netnsName(i));
    await expectNothingLeft(h, [1, 2]);
  });
});

describe("cni-driver serve --host-local: switching modes across a restart (integration)", function () {
  this.timeout(90_000);
  let h: DriverHarness;
  const first = [1, 2, 3];
  const second = [4, 5, 6];
  let firstIps: string[] = [];

  before(async function () {
    requireRoot(this);
    requireReferencePlugins(this, "host-local", "portmap");
    h = new DriverHarness({ subnetOctet: 31, extraFlags: EXEC });
    await h.writeDefaultConfig();
    await h.start();
  });

  after(async () => {
    await h?.cleanup();
  });

  it("sets up 3 pods through the exec'd binary", async () => {
    expect(await hostLocalLabel(h)).to.equal("exec");
    firstIps = await setUpInOrder(h, first);
    expect(new Set(firstIps).size).to.equal(3);
    expect(h.leases()).to.have.members(firstIps);
    expect(await h.stop(), "exit code on SIGTERM").to.equal(0);
  });

  it("restarted in-process on the same root, keeps the 3 and gives 3 more pods new addresses, following the binary's last one", async () => {
    h.opts.extraFlags = IN_PROCESS;
    await h.start();
    expect(await hostLocalLabel(h)).to.equal("in-process");
    const status = await h.client.cniStatus();
    expect(status.attachments).to.equal(3);
    expect(h.leases(), "leases kept by start-up recovery").to.have.members(firstIps);
    for (const i of first) expectNoCniError(await h.client.checkPod(h.podRequest(i)));

    const secondIps = await setUpInOrder(h, second);
    expect(new Set([...firstIps, ...secondIps]).size, "no address reused").to.equal(6);
    // Round robin from the binary's last_reserved_ip.0.
    expect(secondIps[0]).to.equal(nextIp(firstIps[2] as string));
    expect(h.leases()).to.have.members([...firstIps, ...secondIps]);
    for (const [k, i] of [...first, ...second].entries()) {
      const ip = [...firstIps, ...secondIps][k] as string;
      expect(leaseContent(h, ip), `pod ${i}'s lease`).to.equal(`${h.containerId(i)}\r\neth0`);
    }
    expect(pingFrom(h.netnsName(1), secondIps[0] as string), "old pod -> new pod").to.equal(true);
    expect(pingFrom(h.netnsName(4), firstIps[0] as string), "new pod -> old pod").to.equal(true);
  });

  it("tears all 6 down through the in-process driver, leaving no lease, cache file or bridge port", async () => {
    await tearDownAll(h, [...first, ...second]);
    await expectNothingLeft(h, [...first, ...second]);
  });

  it("the other way: a pod set up in-process is checked and released by the binary after a restart in exec mode", async () => {
    const [ip7] = (await setUpInOrder(h, [7])) as [string];
    expect(await h.stop(), "exit code on SIGTERM").to.equal(0);

    h.opts.extraFlags = EXEC;
    await h.start();
    expect(await hostLocalLabel(h)).to.equal("exec");
    expect((await h.client.cniStatus()).attachments).to.equal(1);
    expect(h.leases()).to.deep.equal([ip7]);
    expectNoCniError(await h.client.checkPod(h.podRequest(7)));

    const [ip8] = (await setUpInOrder(h, [8])) as [string];
    expect(ip8, "the binary follows the in-process last_reserved_ip.0").to.equal(nextIp(ip7));
    expect(h.leases()).to.have.members([ip7, ip8]);
    expect(pingFrom(h.netnsName(8), ip7), "pod 8 -> pod 7").to.equal(true);

    await tearDownAll(h, [7, 8]);
    await expectNothingLeft(h, [7, 8]);
  });
});

describe("cni-driver serve --host-local in-process: a crash (integration)", function () {
  this.timeout(60_000);
  const PODS = 10;
  const indexes = Array.from({ length: PODS }, (_, i) => i + 1);
  let h: DriverHarness;
  let addresses: string[] = [];

  before(async function () {
    requireRoot(this);
    requireReferencePlugins(this, "host-local", "portmap");
    h = new DriverHarness({ subnetOctet: 32, extraFlags: IN_PROCESS });
    await h.writeDefaultConfig();
    await h.start();
  });

  after(async () => {
    await h?.cleanup();
  });

  it("sets up 10 pods, then the driver is killed with SIGKILL", async () => {
    expect(await hostLocalLabel(h)).to.equal("in-process");
    for (const i of indexes) createNetns(h.netnsName(i));
    const results = await Promise.all(indexes.map((i) => h.client.setUpPod(h.podRequest(i))));
    for (const r of results) expectNoCniError(r);
    addresses = results.map(podIp);
    expect(new Set(addresses).size).to.equal(PODS);
    await h.kill();
    expect(h.running).to.equal(false);
    expect(h.leases()).to.have.members(addresses);
    expect(h.cacheFiles()).to.have.length(PODS);
  });

  it("restarts in-process with the 10 attachments, every lease and veth kept", async () => {
    await h.start();
    expect(await hostLocalLabel(h)).to.equal("in-process");
    const status = await h.client.cniStatus();
    expect(status.ready).to.equal(true);
    expect(status.attachments).to.equal(PODS);
    expect(h.leases()).to.have.members(addresses);
    expect(h.bridgePorts()).to.have.members(indexes.map((i) => h.hostVeth(i)));
    for (const [k, i] of indexes.entries()) {
      expect(leaseContent(h, addresses[k] as string), `pod ${i}'s lease`).to.equal(
        `${h.containerId(i)}\r\neth0`,
      );
    }
    expectNoCniError(await h.client.checkPod(h.podRequest(PODS)));
  });

  it("tears the 10 down cleanly, leaving nothing", async () => {
    await tearDownAll(h, indexes);
    await expectNothingLeft(h, indexes);
  });
});

describe("cni-driver serve --host-local in-process without the flock addon (integration)", function () {
  this.timeout(60_000);
  const ENV = "CNI_DRIVER_FLOCK_ADDON";
  const saved = process.env[ENV];
  const restoreEnv = () => {
    if (saved === undefined) delete process.env[ENV];
    else process.env[ENV] = saved;
  };
  let h: DriverHarness;

  before(async function () {
    requireRoot(this);
    requireReferencePlugins(this, "host-local", "portmap");
    h = new DriverHarness({
      subnetOctet: 34,
      extraFlags: [...IN_PROCESS, "--log-level", "info"],
    });
    await h.writeDefaultConfig();
    process.env[ENV] = "/nonexistent/flock.node";
    try {
      await h.start();
    } finally {
      restoreEnv();
    }
  });

  after(async () => {
    restoreEnv();
    await h?.cleanup();
  });

  it('logs why it falls back, and says host_local="exec" in /metrics', async () => {
    expect(h.logs).to.contain("in-process host-local unavailable: ");
    expect(h.logs).to.contain("/nonexistent/flock.node");
    expect(await hostLocalLabel(h)).to.equal("exec");
  });

  it("still gives a pod an address, through the binary, and releases it on DEL", async () => {
    const [ip] = (await setUpInOrder(h, [1])) as [string];
    expect(ip.startsWith("10.244.34."), ip).to.equal(true);
    expect(linkIn(h.netnsName(1), "eth0")?.ipv4).to.deep.equal([`${ip}/24`]);
    expect(leaseContent(h, ip)).to.equal(`${h.containerId(1)}\r\neth0`);
    expect(pingFrom(h.netnsName(1), h.gateway), "pod 1 -> gateway").to.equal(true);
    expectNoCniError(await h.client.checkPod(h.podRequest(1)));
    await tearDownAll(h, [1]);
    await expectNothingLeft(h, [1]);
  });
});

describe("cni-driver serve --host-local: the value (integration)", function () {
  this.timeout(60_000);
  let root: string | undefined;

  before(() => {
    root = mkdtempSync(join(tmpdir(), "cni-driver-test-"));
  });

  after(() => {
    if (root) rmSync(root, { recursive: true, force: true });
  });

  /** `cni-driver serve` on a temporary root; bounded: a driver that starts serving is killed. */
  function serve(
    flags: string[],
    env: Record<string, string> = {},
  ): { status: number | null; signal: string | null; stderr: string } {
    const dir = root as string;
    const c = driverCommand([
      "serve",
      "--socket",
      join(dir, "driver.sock"),
      "--config-dir",
      join(dir, "config"),
      "--state-dir",
      join(dir, "state"),
      "--cache-dir",
      join(dir, "cache"),
      "--cni-bin-dir",
      REFERENCE_PLUGIN_DIR,
      "--host-local-data-dir",
      join(dir, "networks"),
      "--pod-cidr",
      "10.244.35.0/24",
      "--health-addr",
      "",
      ...flags,
    ]);
    const childEnv: NodeJS.ProcessEnv = { ...c.env, ...env };
    if (!("CNI_DRIVER_HOST_LOCAL" in env)) delete childEnv.CNI_DRIVER_HOST_LOCAL;
    const r = spawnSync(c.node, c.args, {
      cwd: REPO_ROOT,
      env: childEnv,
      encoding: "utf8",
      timeout: 20_000,
      killSignal: "SIGKILL",
    });
    return { status: r.status, signal: r.signal, stderr: r.stderr ?? "" };
  }

  it("makes serve exit non-zero at start on --host-local bogus, naming the allowed values", () => {
    const r = serve(["--host-local", "bogus"]);
    expect(r.signal, `still running after 20 s: ${r.stderr.slice(-500)}`).to.equal(null);
    expect(r.status).to.be.a("number").and.not.equal(0);
    expect(r.stderr).to.contain('--host-local must be "exec" or "in-process", not "bogus"');
  });

  it("refuses the same value from the env twin CNI_DRIVER_HOST_LOCAL", () => {
    const r = serve([], { CNI_DRIVER_HOST_LOCAL: "bogus" });
    expect(r.signal, `still running after 20 s: ${r.stderr.slice(-500)}`).to.equal(null);
    expect(r.status).to.be.a("number").and.not.equal(0);
    expect(r.stderr).to.contain('--host-local must be "exec" or "in-process", not "bogus"');
  });
});
