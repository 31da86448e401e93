/**
 * The host's network namespace is never a pod's. Everything here runs against
 * namespaces the test made: the driver itself runs inside a throwaway "node"
 * namespace, so "the driver's own namespace" is that one; PID 1's is played by
 * a test namespace through the guard's injectable list. The one real
 * /proc/1/ns/net case goes to a network whose only plugin records that it ran
 * and fails, so even a broken guard could set nothing up in the host.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { expect } from "chai";
import { ErrorCode } from "../../src/cni/errors.js";
import { HOST_NETNS, HostNetnsGuard } from "../../src/driver/rpc/host-netns-guard.js";
import { DriverHarness, expectNoCniError } from "../support/driver-harness.js";
import { createNetns, createNodeNetns, deleteNetns, linkIn, uniqueTag } from "../support/netns.js";
import {
  REFERENCE_PLUGIN_DIR,
  requireReferencePlugins,
  requireRoot,
} from "../support/requirements.js";

describe("host network namespace guard: identities", () => {
  const tag = uniqueTag();
  const node = `hnsg-${tag}-node`;
  const pod = `hnsg-${tag}-pod`;
  const alias = `/run/netns/hnsg-${tag}-alias`;
  const root = `/tmp/hnsg-${tag}`;
  let guard: HostNetnsGuard;

  before(function () {
    requireRoot(this);
    createNetns(node);
    createNetns(pod);
    mkdirSync(root, { recursive: true });
    // A second bind mount of the node namespace under /run/netns, as `ip netns attach` makes.
    writeFileSync(alias, "");
    execFileSync("mount", ["--bind", `/run/netns/${node}`, alias]);
    symlinkSync(`/run/netns/${node}`, join(root, "to-node"));
    symlinkSync(join(root, "to-node"), join(root, "to-to-node"));
    symlinkSync(alias, join(root, "to-alias"));
    // The test namespace stands in for PID 1's: the host's own is never at stake.
    guard = new HostNetnsGuard([
      HOST_NETNS[0]!,
      { path: `/run/netns/${node}`, what: "the stand-in for PID 1's" },
    ]);
  });

  after(() => {
    spawnSync("umount", [alias], { stdio: "ignore" });
    spawnSync("rm", ["-rf", alias, root], { stdio: "ignore" });
    deleteNetns(node);
    deleteNetns(pod);
  });

  it("knows a namespace under every name: its path, a bind mount, symlinks", async () => {
    for (const path of [
      `/run/netns/${node}`,
      alias,
      join(root, "to-node"),
      join(root, "to-to-node"),
      join(root, "to-alias"),
    ]) {
      expect((await guard.which(path))?.what, path).to.equal("the stand-in for PID 1's");
    }
  });

  it("knows the process's own namespace by /proc/self and /proc/<pid>", async () => {
    for (const path of ["/proc/self/ns/net", `/proc/${process.pid}/ns/net`]) {
      expect((await guard.which(path))?.path, path).to.equal("/proc/self/ns/net");
    }
  });

  it("lets any other namespace, a missing path and a plain file through", async () => {
    expect(await guard.which(`/run/netns/${pod}`)).to.equal(undefined);
    expect(await guard.which(join(root, "missing"))).to.equal(undefined);
    writeFileSync(join(root, "plain"), "");
    expect(await guard.which(join(root, "plain"))).to.equal(undefined);
    await guard.refuse("ADD", `/run/netns/${pod}`);
  });

  it("refuses with code 4 naming the path as given", async () => {
    const path = join(root, "to-alias");
    const err = await guard.refuse("ADD", path).then(
      () => undefined,
      (e: unknown) => e as { code: number; message: string },
    );
    expect(err?.code).to.equal(ErrorCode.InvalidEnvironment);
    expect(err?.message).to.include(JSON.stringify(path));
    expect(err?.message).to.include("stand-in for PID 1's");
  });

  it("refuses PID 1's real namespace, by stat alone (nothing is entered)", async () => {
    const real = new HostNetnsGuard([HOST_NETNS[1]!]);
    const err = await real.refuse("ADD", "/proc/1/ns/net").then(
      () => undefined,
      (e: unknown) => e as { code: number; message: string },
    );
    expect(err?.code).to.equal(ErrorCode.InvalidEnvironment);
    expect(err?.message).to.include('"/proc/1/ns/net"');
    // Where ptrace rules hide /proc/1 (this machine's PID 1 may be another user's), it is refused unexamined.
    expect(err?.message).to.match(pid1Words);
    expect(await real.which(`/run/netns/${pod}`)).to.equal(undefined);
  });
});

/** How a refusal of PID 1's namespace reads: by identity, or unexamined where /proc/1 is hidden. */
const pid1Words = /PID 1|may not look at \(EACCES|may not look at \(EPERM/;

describe("host network namespace guard: the driver in a throwaway node namespace", function () {
  this.timeout(60_000);
  let h: DriverHarness;
  let node: string;
  let nodePath: string;
  let binDir: string;
  let record: string;

  /** What the recorder plugin was run for: one "COMMAND NETNS" line per run. */
  const recorded = (): string[] =>
    existsSync(record) ? readFileSync(record, "utf8").trim().split("\n").filter(Boolean) : [];

  before(async function () {
    requireRoot(this);
    requireReferencePlugins(this, "host-local");
    const tag = uniqueTag();
    const netns = `cdt-hn${tag}-node`;
    binDir = `/tmp/cdt-hn${tag}-bin`;
    h = new DriverHarness({
      subnetOctet: 160,
      netns,
      extraFlags: ["--cni-bin-dir", `${binDir}:${REFERENCE_PLUGIN_DIR}`],
    });
    nodePath = `/run/netns/${netns}`;
    // Its eth0 is named as a pod's would be: a DEL naming the node must leave it alone.
    createNodeNetns(netns);
    node = netns;
    record = join(h.root, "recorded");
    mkdirSync(binDir, { recursive: true });
    writeFileSync(
      join(binDir, "recorder"),
      `#!/bin/sh\necho "$CNI_COMMAND $CNI_NETNS" >> ${record}\n` +
        `echo '{"cniVersion":"1.0.0","code":100,"msg":"recorder refuses everything"}'\nexit 1\n`,
      { mode: 0o755 },
    );
    await h.writeConfig({
      "pod-network.conflist": JSON.stringify(h.conflist()),
      "recorder.conflist": JSON.stringify({
        cniVersion: "1.0.0",
        name: "recorder",
        plugins: [{ type: "recorder" }],
      }),
    });
    await h.start();
  });

  after(async () => {
    await h?.cleanup();
    if (node) deleteNetns(node);
    spawnSync("rm", ["-rf", binDir], { stdio: "ignore" });
  });

  /** Asserts a refusal: code 4, the path named, nothing set up (no lease, cache or host end). */
  function expectRefused(
    res: { error: { code: number; msg: string } | null },
    path: string,
    what: string | RegExp,
  ): void {
    expect(res.error?.code, JSON.stringify(res.error)).to.equal(ErrorCode.InvalidEnvironment);
    expect(res.error?.msg).to.include(JSON.stringify(path));
    if (typeof what === "string") expect(res.error?.msg).to.include(what);
    else expect(res.error?.msg).to.match(what);
    expect(h.leases()).to.deep.equal([]);
    expect(h.cacheFiles()).to.deep.equal([]);
    const ports = spawnSync("ip", ["-n", node, "-o", "link", "show", "master", h.bridge], {
      encoding: "utf8",
    });
    expect(ports.stdout.trim()).to.equal("");
  }

  it("refuses ADD into the driver's own namespace under each of its names", async () => {
    const link = join(h.root, "node-link");
    symlinkSync(nodePath, link);
    for (const path of [nodePath, `/proc/${h.pid}/ns/net`, "/proc/self/ns/net", link]) {
      const res = await h.client.setUpPod(h.podRequest("own", { netns: path }));
      expectRefused(res, path, "the driver's own network namespace");
    }
    expect(linkIn(node, "eth0")?.ipv4).to.deep.equal([]);
  });

  it("refuses CHECK there too", async () => {
    const res = await h.client.checkPod(h.podRequest("own", { netns: nodePath }));
    expectRefused(res, nodePath, "the driver's own network namespace");
  });

  it("refuses PID 1's real namespace before any plugin runs", async () => {
    const link = join(h.root, "pid1-link");
    symlinkSync("/proc/1/ns/net", link);
    for (const path of ["/proc/1/ns/net", link]) {
      const res = await h.client.setUpPod(
        h.podRequest("pid1", { netns: path, network: "recorder" }),
      );
      expectRefused(res, path, pid1Words);
      const check = await h.client.checkPod(
        h.podRequest("pid1", { netns: path, network: "recorder" }),
      );
      expectRefused(check, path, pid1Words);
    }
    expect(recorded()).to.deep.equal([]);
  });

  it("still serves a pod in a namespace of its own (the recorder does run for one)", async () => {
    const pod = h.netnsName("p1");
    createNetns(pod);
    const res = await h.client.setUpPod(h.podRequest("p1"));
    expectNoCniError(res);
    expect(linkIn(pod, "eth0")?.ipv4).to.deep.equal([res.result?.ips[0]?.address]);
    expectNoCniError(await h.client.checkPod(h.podRequest("p1")));
    expectNoCniError(await h.client.tearDownPod(h.podRequest("p1")));

    const other = await h.client.setUpPod(h.podRequest("p1", { network: "recorder" }));
    expect(other.error?.code).to.equal(100);
    expect(recorded()[0]).to.equal(`ADD /run/netns/${pod}`);
    deleteNetns(pod);
  });

  it("DEL naming the node's namespace leaves the node's links alone", async () => {
    const res = await h.client.tearDownPod(h.podRequest("own", { netns: nodePath }));
    expectNoCniError(res);
    expect(linkIn(node, "eth0"), "the node's eth0").to.not.equal(undefined);
    expect(h.logs).to.include("DEL names the host's network namespace");
  });
});
