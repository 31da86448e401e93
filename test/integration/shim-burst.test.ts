/**
 * A burst through the shim, as a node sees when a deployment scales up: 110
 * pods (the kubelet's default maxPods) ADDed at once through 110 concurrent
 * execs of the built shim against a real driver, each into a real netns, then
 * all 110 DELed at once.
 *
 * Under load the driver must take every call once: an ADD the shim gave up on
 * (its timeout ran out, so it retried or failed) and that the driver ran all the
 * same would show as a second ADD line in the driver's log, and a DEL the shim
 * could not deliver would be queued. So: every ADD exits 0 with a result; the
 * driver logs exactly one ADD and one DEL per pod, each ok; the deletion queue
 * stays empty; after the DELs nothing is left (leases, host veths, the pods'
 * eth0, cache files).
 */
import { spawnSync } from "node:child_process";
import { expect } from "chai";
import { DriverHarness } from "../support/driver-harness.js";
import { createNetns, deleteNetns } from "../support/netns.js";
import {
  REFERENCE_PLUGIN_DIR,
  requireReferencePlugins,
  requireRoot,
} from "../support/requirements.js";
import { ensureShimBuilt } from "../support/runtimes.js";
import { execShim, type ShimRun } from "../support/shim-exec.js";

const PODS = 110;
/** Far more than a loaded 2-core machine needs for the whole burst: the shim never gives up. */
const TIMEOUT_SECONDS = 600;

interface CallLine {
  verb?: string;
  containerId?: string;
  outcome?: string;
  msg?: string;
}

describe("cni-driver-shim: a burst of 110 pods (integration)", function () {
  this.timeout(900_000);
  let h: DriverHarness;
  let shimPath = "";
  const pods = Array.from({ length: PODS }, (_, i) => `b${i}`);

  before(async function () {
    this.timeout(300_000);
    requireRoot(this);
    requireReferencePlugins(this, "host-local");
    shimPath = ensureShimBuilt();
    // info: one line per call, which is what the test counts.
    h = new DriverHarness({ subnetOctet: 93, extraFlags: ["--log-level", "info"] });
    await h.writeDefaultConfig();
    await h.start();
    for (const i of pods) createNetns(h.netnsName(i));
  });

  after(async () => {
    if (h) for (const i of pods) deleteNetns(h.netnsName(i));
    await h?.cleanup();
  });

  const stdin = (): string =>
    JSON.stringify({
      cniVersion: "1.0.0",
      name: "burst",
      type: "cni-driver-shim",
      socket: h.socket,
      stateDir: h.stateDir,
      timeoutSeconds: TIMEOUT_SECONDS,
    });
  const env = (command: string, i: string): Record<string, string> => ({
    CNI_COMMAND: command,
    CNI_CONTAINERID: h.containerId(i),
    CNI_NETNS: h.netnsPath(i),
    CNI_IFNAME: "eth0",
    CNI_PATH: REFERENCE_PLUGIN_DIR,
    CNI_ARGS: `IgnoreUnknown=1;K8S_POD_NAMESPACE=${h.podNamespace};K8S_POD_NAME=${h.podName(i)};K8S_POD_INFRA_CONTAINER_ID=${h.containerId(i)}`,
  });

  function burst(command: string): Promise<ShimRun[]> {
    const input = stdin();
    return Promise.all(
      pods.map((i) => execShim(shimPath, env(command, i), input, (TIMEOUT_SECONDS + 60) * 1000)),
    );
  }

  /** The driver's call lines for `verb`, by container id. */
  function callLines(verb: string): Map<string, CallLine[]> {
    const byId = new Map<string, CallLine[]>();
    for (const text of h.logs.split("\n")) {
      let line: CallLine;
      try {
        line = JSON.parse(text) as CallLine;
      } catch {
        continue;
      }
      if (line.verb !== verb || !line.containerId) continue;
      byId.set(line.containerId, [...(byId.get(line.containerId) ?? []), line]);
    }
    return byId;
  }

  function eth0In(i: string): boolean {
    const r = spawnSync("ip", ["-n", h.netnsName(i), "link", "show", "dev", "eth0"], {
      stdio: "ignore",
    });
    return r.status === 0;
  }

  it("110 concurrent ADDs: each exits 0 with its result, and the driver ran each once", async () => {
    const runs = await burst("ADD");
    const addresses = new Set<string>();
    runs.forEach((r, n) => {
      expect(r.status, `pod ${pods[n]}: ${r.stdout}${r.stderr}`).to.equal(0);
      expect(r.stderr).to.equal("");
      const result = r.json as { cniVersion?: string; ips?: Array<{ address: string }> };
      expect(result?.cniVersion, r.stdout).to.equal("1.0.0");
      const address = result.ips?.[0]?.address ?? "";
      expect(address, r.stdout).to.match(/^10\.244\.93\.\d+\/24$/);
      addresses.add(address);
    });
    expect(addresses.size, "distinct addresses").to.equal(PODS);
    expect(h.leases()).to.have.length(PODS);

    const lines = callLines("ADD");
    for (const i of pods) {
      const mine = lines.get(h.containerId(i)) ?? [];
      expect(
        mine.map((l) => l.outcome),
        `the driver's ADD lines for ${i}`,
      ).to.deep.equal(["ok"]);
    }
    expect(lines.size, "ADD lines for other containers").to.equal(PODS);
  });

  it("110 concurrent DELs: each exits 0, none queued, and nothing is left", async () => {
    const runs = await burst("DEL");
    runs.forEach((r, n) => {
      expect(r.status, `pod ${pods[n]}: ${r.stdout}${r.stderr}`).to.equal(0);
      expect(r.stdout).to.equal("");
      expect(r.stderr).to.equal("");
    });
    expect(h.queuedDeletions(), "DELs the shim queued instead of delivering").to.deep.equal([]);

    const lines = callLines("DEL");
    for (const i of pods) {
      const mine = lines.get(h.containerId(i)) ?? [];
      expect(
        mine.map((l) => l.outcome),
        `the driver's DEL lines for ${i}`,
      ).to.deep.equal(["ok"]);
    }

    expect(h.leases(), "leases").to.deep.equal([]);
    expect(h.bridgePorts(), "host veths on the bridge").to.deep.equal([]);
    expect(h.cacheFiles(), "cache files").to.deep.equal([]);
    expect(pods.filter(eth0In), "pods that still have eth0").to.deep.equal([]);
  });
});
