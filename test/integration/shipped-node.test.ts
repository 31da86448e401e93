/**
 * The driver, its command-line client and the MidoNet controller on the Node the
 * image ships (Node 24 LTS, scripts/node24.sh), compiled as the image runs them
 * (`dist/`), with the native addons built here. The other suites run the
 * sources through tsx on the same Node (scripts/use-node24.sh).
 */
import { type ChildProcess, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect } from "chai";
import type { PodResponse } from "../../src/wire/types.js";
import { DriverHarness, expectNoCniError, runDriverCli } from "../support/driver-harness.js";
import { type FakeKubeApiServer, startFakeKubeApiServer } from "../support/fake-kube-apiserver.js";
import { expectTopology, HOSTS } from "../support/midonet-cluster.js";
import {
  desiredOf,
  nodesAnnotated,
  populateCluster,
  spawnControllerProcess,
} from "../support/midonet-controller-process.js";
import { type MidonetSimulator, startMidonetSimulator } from "../support/midonet-simulator.js";
import { createNetns, deleteNetns, linkIn, listHostLinks, pingFrom } from "../support/netns.js";
import { requireReferencePlugins, requireRoot } from "../support/requirements.js";
import { ensureDistBuilt, ensureShippedNode } from "../support/shipped-node.js";
import { until } from "../support/until.js";

const SHIPPED_MAJOR = 24;

/** The pod's IPv4 address without its prefix, from a SetUpPod answer. */
function podIp(res: PodResponse): string {
  const address = res.result?.ips[0]?.address;
  if (!address) throw new Error(`no address in ${JSON.stringify(res)}`);
  return address.split("/")[0] as string;
}

/** Fetches the shipped Node and compiles dist/ when needed: minutes on a cold machine. */
function prepare(ctx: Mocha.Context): string {
  ctx.timeout(240_000);
  const node = ensureShippedNode();
  ensureDistBuilt();
  const version = spawnSync(node, ["--version"], { encoding: "utf8" }).stdout.trim();
  expect(version, `${node} --version`).to.match(new RegExp(`^v${SHIPPED_MAJOR}\\.`));
  return node;
}

for (const [hostLocal, octet] of [
  ["exec", 40],
  ["in-process", 41],
] as const) {
  describe(`on the shipped Node (${SHIPPED_MAJOR} LTS): the compiled driver, host-local ${hostLocal}`, function () {
    this.timeout(30_000);
    let h: DriverHarness;
    let node: string;
    const made: number[] = [];

    before(async function () {
      requireRoot(this);
      requireReferencePlugins(this, "host-local");
      node = prepare(this);
      h = new DriverHarness({
        subnetOctet: octet,
        nodeBinary: node,
        extraFlags: ["--host-local", hostLocal],
      });
      await h.writeDefaultConfig({ mtu: 1500 });
      await h.start();
    });

    afterEach(async () => {
      for (const i of made.splice(0)) {
        await h.client.tearDownPod(h.podRequest(i), { timeoutMs: 10_000 }).catch(() => {});
        deleteNetns(h.netnsName(i));
      }
    });

    after(async () => {
      await h?.cleanup();
    });

    async function add(i: number): Promise<PodResponse> {
      createNetns(h.netnsName(i));
      made.push(i);
      const res = await h.client.setUpPod(h.podRequest(i));
      expectNoCniError(res);
      return res;
    }

    it("runs on that Node with its three native addons in use", async () => {
      const { body } = await h.httpGet("/metrics");
      const line = body.split("\n").find((l) => l.startsWith("cni_driver_info{")) ?? "";
      expect(line).to.match(new RegExp(`node="v${SHIPPED_MAJOR}\\.`));
      expect(line).to.contain('plumbing="netlink"');
      expect(line).to.contain('spawn="native"');
      // in-process needs the flock addon; without it the driver would fall back to exec.
      expect(line).to.contain(`host_local="${hostLocal}"`);
    });

    it("sets up two pods that ping each other and the gateway, passes CHECK, and DEL leaves nothing", async () => {
      const a = await add(1);
      const b = await add(2);
      expect(pingFrom(h.netnsName(1), podIp(b)), "pod 1 -> pod 2").to.equal(true);
      expect(pingFrom(h.netnsName(2), podIp(a)), "pod 2 -> pod 1").to.equal(true);
      expect(pingFrom(h.netnsName(1), h.gateway), "pod 1 -> gateway").to.equal(true);
      expectNoCniError(await h.client.checkPod(h.podRequest(1)));
      expect(h.leases()).to.have.members([podIp(a), podIp(b)]);

      for (const i of made.splice(0)) {
        expectNoCniError(await h.client.tearDownPod(h.podRequest(i)));
        deleteNetns(h.netnsName(i));
      }
      expect(h.leases(), "leases").to.deep.equal([]);
      expect(h.cacheFiles(), "cache files").to.deep.equal([]);
      expect(listHostLinks(h.hostVeth(1)), "host veth").to.deep.equal([]);
      expect(h.bridgePorts(), "bridge ports").to.deep.equal([]);
    });

    it("reloads a swapped ConfigMap: the next pod gets the new MTU", async () => {
      await add(3);
      const before = (await h.client.cniStatus()).config?.generation ?? 0;
      await h.writeDefaultConfig({ mtu: 1400 });
      await until(
        async () => ((await h.client.cniStatus()).config?.generation ?? 0) > before,
        "the reload",
      );
      await add(4);
      expect(linkIn(h.netnsName(4), "eth0")?.mtu, "new pod").to.equal(1400);
      expect(linkIn(h.netnsName(3), "eth0")?.mtu, "old pod").to.equal(1500);
      await h.writeDefaultConfig({ mtu: 1500 });
    });

    it("serves its command-line client, itself run on that Node", async () => {
      const cli = (...args: string[]) => runDriverCli(args, { nodeBinary: node });
      const status = cli("status", "--socket", h.socket);
      expect(status.status, status.stderr).to.equal(0);
      expect(JSON.parse(status.stdout)).to.include({ ready: true });

      createNetns(h.netnsName(5));
      made.push(5);
      const pod = ["--socket", h.socket, "--container-id", h.containerId(5), "--ifname", "eth0"];
      const added = cli("add", ...pod, "--netns", h.netnsPath(5), "--pod-name", h.podName(5));
      expect(added.status, added.stdout + added.stderr).to.equal(0);
      const address = (JSON.parse(added.stdout) as { ips: Array<{ address: string }> }).ips[0]
        ?.address as string;
      expect(linkIn(h.netnsName(5), "eth0")?.ipv4).to.deep.equal([address]);
      const deleted = cli("del", ...pod, "--netns", h.netnsPath(5), "--pod-name", h.podName(5));
      expect(deleted.status, deleted.stdout + deleted.stderr).to.equal(0);
      expect(h.leases()).to.deep.equal([]);
    });
  });
}

describe(`on the shipped Node (${SHIPPED_MAJOR} LTS): the compiled MidoNet controller`, function () {
  this.timeout(60_000);
  let kube: FakeKubeApiServer | undefined;
  let sim: MidonetSimulator | undefined;
  let dir: string | undefined;
  let child: ChildProcess | undefined;
  let node: string;

  before(function () {
    node = prepare(this);
  });

  afterEach(async () => {
    if (child && child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((r) => child?.once("exit", r));
      child.kill("SIGKILL");
      await exited;
    }
    await sim?.close();
    await kube?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("maps the cluster onto MidoNet: nodes annotated, exactly the expected topology", async () => {
    kube = await startFakeKubeApiServer();
    sim = await startMidonetSimulator({
      hosts: Object.entries(HOSTS).map(([name, id]) => ({ id, name })),
    });
    dir = mkdtempSync(join(tmpdir(), "shipped-node-controller-"));
    const kubeconfigFile = join(dir, "kubeconfig");
    kube.kubeconfig(kubeconfigFile);
    populateCluster(kube);
    child = spawnControllerProcess({
      kubeconfigFile,
      midonetApi: sim.baseUrl,
      identity: "shipped",
      nodeBinary: node,
    });
    const k = kube;
    const s = sim;
    let mismatch = "";
    await until(
      () => {
        if (child?.exitCode !== null) throw new Error(`controller exited ${child?.exitCode}`);
        if (!nodesAnnotated(k)) return false;
        try {
          expectTopology(s.snapshot(), desiredOf(k));
          return true;
        } catch (err) {
          mismatch = (err as Error).message;
          return false;
        }
      },
      "MidoNet to hold the desired topology",
      30_000,
    ).catch((err: Error) => {
      throw new Error(`${err.message}; last difference: ${mismatch}`);
    });
  });
});
