/**
 * SIGTERM: the driver stops being ready, drains its in-flight calls, and exits 0,
 * bounded by --drain-timeout: a plugin still running after that is killed, so a
 * slow chain cannot hold the process up to --plugin-timeout (past the kubelet's
 * grace period). A SIGTERM during start-up recovery is kept until the start is
 * done, then drains the same way. A chained plugin that sleeps on command shows it.
 */
import { chmodSync, mkdirSync, writeFileSync } from "node:fs";
import { type AddressInfo, createServer, type Socket } from "node:net";
import { join } from "node:path";
import { expect } from "chai";
import { DriverHarness, expectNoCniError, sleep } from "../support/driver-harness.js";
import { createNetns } from "../support/netns.js";
import {
  REFERENCE_PLUGIN_DIR,
  requireReferencePlugins,
  requireRoot,
} from "../support/requirements.js";
import { until } from "../support/until.js";

/** A plugin that sleeps `<bin>/<verb>.sleep` seconds, then answers an empty 1.0.0 result (ADD) or nothing. */
const SLOW_PLUGIN = `#!/bin/sh
cat >/dev/null
d=$(dirname "$0")
case "$CNI_COMMAND" in
  ADD) sleep "$(cat "$d/add.sleep" 2>/dev/null || echo 0)"; echo '{"cniVersion":"1.0.0"}' ;;
  DEL) sleep "$(cat "$d/del.sleep" 2>/dev/null || echo 0)" ;;
  VERSION) echo '{"cniVersion":"1.0.0","supportedVersions":["0.4.0","1.0.0"]}' ;;
esac
`;

describe("cni-driver serve: SIGTERM (integration)", function () {
  this.timeout(60_000);
  let h: DriverHarness | undefined;
  let bin: string;

  const harness = (drainSeconds: number) => {
    const d = new DriverHarness({ subnetOctet: 47, chain: [{ type: "slow-plugin" }] });
    // The slow plugin lives in the harness's own root, removed with it.
    bin = join(d.root, "bin");
    mkdirSync(bin, { recursive: true });
    writeFileSync(join(bin, "slow-plugin"), SLOW_PLUGIN);
    chmodSync(join(bin, "slow-plugin"), 0o755);
    d.opts.extraFlags = [
      "--cni-bin-dir",
      `${REFERENCE_PLUGIN_DIR}:${bin}`,
      "--drain-timeout",
      String(drainSeconds),
    ];
    return d;
  };
  const sleepOn = (verb: "add" | "del", seconds: number) =>
    writeFileSync(join(bin, `${verb}.sleep`), String(seconds));

  before(function () {
    requireRoot(this);
    requireReferencePlugins(this, "host-local");
  });

  afterEach(async () => {
    await h?.cleanup();
    h = undefined;
  });

  it("drains an in-flight ADD within --drain-timeout: it is answered, then the driver exits 0", async () => {
    h = harness(10);
    await h.writeDefaultConfig();
    await h.start();
    sleepOn("add", 1.5);
    createNetns(h.netnsName(1));
    const t0 = Date.now();
    const add = h.client.setUpPod(h.podRequest(1), { timeoutMs: 20_000 }).then((r) => ({
      r,
      at: Date.now() - t0,
    }));
    await sleep(400);
    const exit = h.stop().then((code) => ({ code, at: Date.now() - t0 }));
    const [a, e] = await Promise.all([add, exit]);
    expectNoCniError(a.r);
    expect(e.code, "exit code").to.equal(0);
    expect(e.at, "exited after the ADD was answered").to.be.at.least(a.at);
    expect(h.cacheFiles(), "the answered ADD's cache entry").to.have.length(1);
  });

  it("past --drain-timeout, kills the plugin still running and exits 0", async () => {
    h = harness(1);
    await h.writeDefaultConfig();
    await h.start();
    sleepOn("add", 40); // shorter than --plugin-timeout (60 s): only the drain can end it
    createNetns(h.netnsName(1));
    const add = h.client.setUpPod(h.podRequest(1), { timeoutMs: 20_000 });
    await sleep(400);
    // The plugin sleeps 40 s: an exit 0 before the harness's SIGKILL (30 s), with the
    // ADD answered "canceled; plugin killed", means the drain killed it.
    const code = await h.stop();
    expect(code, "exit code").to.equal(0);
    const answer = await add;
    expect(answer.error?.code, JSON.stringify(answer.error)).to.equal(11);
    expect(answer.error?.msg).to.match(/canceled; plugin killed/);
    expect(h.cacheFiles(), "no cache entry for the canceled ADD").to.deep.equal([]);

    // What the canceled ADD had set up goes at the next start (or with the runtime's DEL).
    sleepOn("add", 0);
    await h.start();
    expect(h.leases()).to.deep.equal([]);
    expect(h.bridgePorts()).to.deep.equal([]);
  });

  it("a SIGTERM during start-up recovery waits for it, then drains and exits 0", async () => {
    h = harness(10);
    await h.writeDefaultConfig();
    await h.start();
    createNetns(h.netnsName(2));
    expectNoCniError(await h.client.setUpPod(h.podRequest(2)));
    await h.kill();
    // A DEL the shim queued while we were down: its replay (recovery) takes 2 s in the slow plugin.
    h.queueDeletion(2);
    sleepOn("del", 2);
    await h.start({ waitReady: false });
    await until(
      async () =>
        (await h?.client.cniStatus())?.not_ready_reasons.includes("start-up recovery in progress"),
      "recovery to be under way",
    );
    const code = await h.stop();
    expect(code, "exit code").to.equal(0);
    expect(h.queuedDeletions(), "replayed").to.deep.equal([]);
    expect(h.leases()).to.deep.equal([]);
  });

  it("exits 0 while the API server holds its connections and never answers", async () => {
    // A TCP server that accepts and then says nothing: every list, watch and patch hangs.
    const held: Socket[] = [];
    const blackhole = createServer((socket) => {
      held.push(socket);
    });
    await new Promise<void>((resolve) => blackhole.listen(0, "127.0.0.1", resolve));
    try {
      const { port } = blackhole.address() as AddressInfo;
      h = harness(10);
      const kubeconfig = join(h.root, "kubeconfig");
      writeFileSync(kubeconfig, blackholeKubeconfig(port), { mode: 0o600 });
      // The ConfigMap followed through the API: a list and watch from the start.
      h.opts.extraFlags?.push(
        "--kubeconfig",
        kubeconfig,
        "--node-name",
        "sigterm-node",
        "--configmap",
        "kube-system/cni-driver-config",
      );
      await h.writeDefaultConfig();
      await h.start();
      createNetns(h.netnsName(3));
      // A pod the driver will try to annotate: one more request the server holds.
      expectNoCniError(await h.client.setUpPod(h.podRequest(3)));
      await until(() => held.length > 0, "the driver to connect to the API server");
      // Exits by itself, before the harness's SIGKILL (30 s); how soon is for bench/.
      const code = await h.stop();
      expect(code, "exit code").to.equal(0);
    } finally {
      for (const socket of held) socket.destroy();
      await new Promise((resolve) => blackhole.close(resolve));
    }
  });
});

/** A kubeconfig naming a plain-http API server on 127.0.0.1:`port`. */
function blackholeKubeconfig(port: number): string {
  return [
    "apiVersion: v1",
    "kind: Config",
    "clusters:",
    "  - name: held",
    "    cluster:",
    `      server: http://127.0.0.1:${port}`,
    "      insecure-skip-tls-verify: true",
    "users:",
    "  - name: held",
    "    user:",
    "      token: t",
    "contexts:",
    "  - name: held",
    "    context: { cluster: held, user: held }",
    "current-context: held",
    "",
  ].join("\n");
}
