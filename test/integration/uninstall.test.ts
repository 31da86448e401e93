/**
 * `cni-driver uninstall` on a node that ran the driver with everything on:
 * VXLAN to a second node, the masquerade, NetworkPolicy and Services tables,
 * a bridge with a pod, the host conflist, the shim and the reference plugins
 * install-cni added. It refuses while the driver serves and while a pod is
 * attached (naming it); once both are gone it leaves the node's links,
 * routes, nftables and the host's CNI directories as they were before the
 * driver came.
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect } from "chai";
import { execaSync } from "execa";
import {
  type ClusterMember,
  ClusterUnderlay,
  inNs,
  printMemberLogs,
  startMembers,
  tearDownCluster,
} from "../support/cluster-nodes.js";
import { DriverHarness, driverCommand, expectNoCniError } from "../support/driver-harness.js";
import { type FakeKubeApiServer, startFakeKubeApiServer } from "../support/fake-kube-apiserver.js";
import { uninstallArgs } from "../support/node-cli.js";
import { requireCommand, requireRoot } from "../support/requirements.js";
import { until } from "../support/until.js";

/** What the driver could change in a node's netns, as text to compare. */
function nodeState(ns: string): { links: string[]; routes: string[]; nft: string } {
  const links = (
    JSON.parse(inNs(ns, ["ip", "-j", "-d", "link", "show"]).stdout) as Array<{
      ifname: string;
      linkinfo?: { info_kind?: string };
    }>
  ).map((l) => `${l.ifname} ${l.linkinfo?.info_kind ?? ""}`);
  const routes = ["-4", "-6"].flatMap((f) =>
    (
      JSON.parse(inNs(ns, ["ip", "-j", f, "route", "show", "table", "all"]).stdout) as Array<
        Record<string, unknown>
      >
    ).map((r) => `${r.dst} ${r.gateway ?? ""} ${r.dev ?? ""} ${r.protocol ?? ""} ${r.table ?? ""}`),
  );
  const nft = inNs(ns, ["nft", "list", "ruleset"]).stdout;
  // The kernel's own IPv6 link-local routes come and go with DAD on its links, whatever the driver does.
  const ours = routes.filter((r) => !r.startsWith("fe80:"));
  return { links: links.sort(), routes: ours.sort(), nft };
}

const listDir = (dir: string) => (existsSync(dir) ? readdirSync(dir).sort() : []);

describe("cni-driver uninstall: a node left as it was found", function () {
  this.timeout(180_000);
  let root: string;
  let ul: ClusterUnderlay;
  let server: FakeKubeApiServer;
  const members: ClusterMember[] = [];
  let confDir: string;
  let binDir: string;
  let found: ReturnType<typeof nodeState>;

  const a = () => members[0] as ClusterMember;

  /** `cni-driver uninstall` in node-a's netns: exit code and stderr. */
  function uninstall(...extra: string[]): { code: number; stderr: string } {
    const h = a().h;
    const cmd = driverCommand(uninstallArgs(h, confDir, binDir, ...extra));
    const r = execaSync("ip", ["netns", "exec", a().node.netns, cmd.node, ...cmd.args], {
      env: cmd.env,
      extendEnv: false,
      reject: false,
      timeout: 60_000,
    });
    return { code: r.exitCode ?? -1, stderr: r.stderr };
  }

  before(async function () {
    requireRoot(this);
    requireCommand(this, "nft", "nftables");
    root = mkdtempSync(join(tmpdir(), "cni-driver-uninstall-"));
    confDir = join(root, "net.d");
    binDir = join(root, "bin");
    mkdirSync(confDir);
    ul = new ClusterUnderlay(root);
    server = await startFakeKubeApiServer();
    const kubeconfig = await ul.exposeApi(Number(new URL(server.url).port), server.kubeconfig());
    for (const [i, name] of ["node-a", "node-b"].entries()) {
      const node = ul.addNode(name, 51 + i);
      const h = new DriverHarness({
        subnetOctet: 201 + i,
        netns: node.netns,
        mtu: 1450,
        extraFlags: [
          "--kubeconfig",
          kubeconfig,
          "--node-name",
          name,
          "--node-link-resync",
          "1",
          ...(i === 0 ? ["--host-cni-conf-dir", confDir] : []),
        ],
      });
      members.push({ node, h, pod: "" });
    }
    found = nodeState(a().node.netns);
    const install = driverCommand(["install-cni", "--bin-dir", binDir]);
    const r = execaSync(install.node, install.args, {
      env: install.env,
      extendEnv: false,
      reject: false,
    });
    expect(r.exitCode, r.stderr).to.equal(0);
    for (const m of members) {
      await m.h.writeConfig({
        "pod-network.conflist": JSON.stringify(m.h.conflist()),
        "driver.json": JSON.stringify({
          crossNode: "vxlan",
          clusterCidr: "10.244.0.0/16",
          services: "driver",
        }),
      });
      server.put("nodes", {
        metadata: { name: m.node.name },
        spec: { podCIDR: m.h.subnet, podCIDRs: [m.h.subnet] },
        status: { addresses: [{ type: "InternalIP", address: m.node.address }] },
      });
    }
    server.put("services", {
      metadata: { namespace: "default", name: "web" },
      spec: {
        clusterIP: "10.96.5.1",
        clusterIPs: ["10.96.5.1"],
        ports: [{ port: 80, protocol: "TCP" }],
      },
    });
    await startMembers(members);
  });

  afterEach(function () {
    if (this.currentTest?.state === "failed") printMemberLogs(members);
  });

  after(() => tearDownCluster(members, ul, server, root));

  it("the driver made its links, routes, tables and host files", async () => {
    const ns = a().node.netns;
    await until(
      () => {
        const t = inNs(ns, ["nft", "list", "tables"]).stdout;
        return ["cni-driver", "cni-driver-policy", "cni-driver-services"].every((n) =>
          t.includes(`table inet ${n}\n`),
        );
      },
      "the three tables",
      30_000,
    );
    await until(
      () => nodeState(ns).routes.some((r) => r.includes(members[1]?.h.subnet ?? "?")),
      "the route to node-b",
      30_000,
    );
    expect(nodeState(ns).links).to.include.members([
      "midokube-vxlan vxlan",
      `${a().h.bridge} bridge`,
    ]);
    await until(
      () => listDir(confDir).includes("10-cni-driver.conflist"),
      "the host conflist",
      30_000,
    );
    expect(listDir(binDir)).to.include.members(["cni-driver-shim", ".cni-driver-installed.json"]);
  });

  it("refuses while the driver serves, then while a pod is attached, naming it", async () => {
    const serving = uninstall();
    expect(serving.code).to.equal(1);
    expect(serving.stderr).to.include(`a driver still serves ${a().h.socket}`);
    await a().h.stop();
    const attached = uninstall();
    expect(attached.code).to.equal(1);
    expect(attached.stderr).to.include(`pods are still attached: default/${a().h.podName(1)}`);
    expect(listDir(confDir), "nothing removed by a refusal").to.include("10-cni-driver.conflist");
  });

  it("with the pod gone and the driver stopped, leaves the node as it was before the driver came", async () => {
    await a().h.start();
    expectNoCniError(await a().h.client.tearDownPod(a().h.podRequest(1)));
    await a().h.stop();
    const r = uninstall();
    expect(r.code, r.stderr).to.equal(0);
    expect(r.stderr).to.include("nftables table inet cni-driver-services");
    const after = nodeState(a().node.netns);
    expect(after.links).to.deep.equal(found.links);
    expect(after.routes).to.deep.equal(found.routes);
    expect(after.nft).to.equal(found.nft);
    expect(listDir(confDir)).to.deep.equal([]);
    expect(listDir(binDir)).to.deep.equal([]);
    for (const dir of [a().h.stateDir, a().h.cacheDir, join(a().h.dataDir, a().h.network)])
      expect(existsSync(dir), dir).to.equal(false);
    // Again: nothing left to remove, and still exit 0.
    expect(uninstall().stderr).to.include("nothing to remove");
  });
});
