/**
 * The image, run as the manifests say. The DaemonSet and the MidoNet controller's
 * Deployment are read from `kubectl kustomize daemonset/` and run with podman by
 * test/support/pod-spec-podman.ts: host network, the hostPath and ConfigMap
 * mounts, the user, capabilities and read-only settings of the pod spec.
 *
 * The DaemonSet runs on a "node" made of a private mount namespace whose
 * /etc/cni/net.d, /opt/cni/bin, /var/lib/cni, /var/lib/cni-driver and
 * /run/cni-driver are a temporary root's (test/support/node-mount-namespace.ts):
 * first install-cni, then the driver; then podman with the CNI backend, pointed at
 * that root's conf and bin dirs, starts containers through the installed shim.
 *
 * What the test changes of the manifests, and why:
 * - the ConfigMap's bridge gets a unique name, and driver.json `"masquerade": false`
 *   (the driver shares this machine's network namespace, host network);
 * - the driver runs without the Kubernetes API (there is none for it here): so no
 *   CNI_DRIVER_CONFIGMAP (the API copy; the mounted directory is what is read), and
 *   CNI_DRIVER_POD_CIDR gives the unique pod CIDR the Node's spec.podCIDRs would;
 * - each health endpoint listens on a free port, not the manifest's, on this
 *   machine's loopback; the probes' paths are the manifest's;
 * - the controller gets the fake API server by a mounted kubeconfig
 *   (CNI_DRIVER_KUBECONFIG): it speaks plain HTTP, which in-cluster config does not,
 *   and the MidoNet API is the simulator's address.
 */
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect } from "chai";
import {
  DEFAULT_INSTALLED_PLUGINS,
  HOST_CONFLIST_NAME,
} from "../../src/driver/lifecycle/host-install.js";
import { ensureImage, HOST_IMAGE_STORE, hostStorageDriver } from "../support/cni-driver-image.js";
import { type ConfigMapData, ConfigMapDir } from "../support/configmap-dir.js";
import { sleep } from "../support/driver-harness.js";
import { type FakeKubeApiServer, startFakeKubeApiServer } from "../support/fake-kube-apiserver.js";
import { HOSTS } from "../support/midonet-cluster.js";
import { nodesAnnotated, populateCluster } from "../support/midonet-controller-process.js";
import { type MidonetSimulator, startMidonetSimulator } from "../support/midonet-simulator.js";
import { uniqueTag } from "../support/netns.js";
import { NODE_DIRS, NodeMountNamespace } from "../support/node-mount-namespace.js";
import {
  containerOf,
  findObject,
  type K8sPodSpec,
  type PodRunContext,
  podmanRunArgs,
  podSpecOf,
  probeUrl,
  renderManifests,
} from "../support/pod-spec-podman.js";
import { requireCommand, requireRoot } from "../support/requirements.js";
import { Podman, removeRoot, runCommand, waitFor } from "../support/runtimes.js";
import { until } from "../support/until.js";

/** The network the driver's host conflist names (its `name`). */
const HOST_NETWORK = "cni-driver";

function requireImageTools(ctx: Mocha.Context): void {
  requireRoot(ctx);
  requireCommand(ctx, "podman", "podman");
  requireCommand(ctx, "runc", "runc");
  requireCommand(ctx, "kubectl", "kubernetes-client");
  requireCommand(ctx, "debootstrap", "debootstrap");
}

/** A TCP port free on 127.0.0.1 now. */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (!address || typeof address === "string") throw new Error("no port");
  return address.port;
}

/** The HTTP status of a GET, or undefined when nothing answers. */
async function httpStatus(url: string): Promise<number | undefined> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(2_000) });
    await res.arrayBuffer();
    return res.status;
  } catch {
    return undefined;
  }
}

/** Waits until `url` answers 200 (bounded), checking that the container still runs. */
async function until200(url: string, running: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    if ((await httpStatus(url)) === 200) return;
    if (!running()) throw new Error(`${what} stopped before ${url} answered 200`);
    if (Date.now() > deadline) throw new Error(`${url} did not answer 200 within 60 s`);
    await sleep(250);
  }
}

/**
 * Drops the page cache of the image's Node binary (104 MB; `dd iflag=nocache`
 * is posix_fadvise DONTNEED, which overlayfs passes to the layer's file), so the
 * next container from the image starts Node as on a node just booted.
 *
 * Why the init container is started cold: install-cni used to hang in CI
 * (`podman run --rm`, then `podman wait`, killed after 120 s) whenever it was
 * the first process to run the image's Node since the page cache lost the
 * binary. The memory cgroup charges the pages a process reads in to that
 * process's cgroup, and Node's cold start reads ~90 MiB of its binary: the
 * container peaks at 112-135 MiB, against 26 MiB warm. Under the 64Mi limit the
 * manifest gave install-cni then, the kernel reclaimed the executable's pages as
 * fast as Node faulted them back in (millions of memory.failcnt and
 * workingset_refault_file, no OOM kill): Node stayed running in page faults, so
 * conmon and podman waited on it. Warm it exits in about a second, hence a test
 * that failed by chance. Cold every time, a limit too small for Node's start
 * fails this test every time (daemonset/daemonset.yaml says what it must hold).
 */
function dropNodePageCache(p: Podman, image: string): void {
  p.must(
    [
      ...["run", "--rm", "--network", "host", "--entrypoint", "dd", image],
      ...["if=/usr/local/bin/node", "iflag=nocache", "count=0", "status=none"],
    ],
    60_000,
  );
}

/**
 * podman's, conmon's and runc's processes with their descendants (the
 * container's own), with their state and kernel wait channel: whether a
 * container that seemed not to end was still running, a zombie, or gone
 * while conmon waited.
 */
function podmanProcesses(): string {
  const ps = runCommand("ps", ["-eo", "pid,ppid,stat,etime,wchan:20,args"], { timeoutMs: 10_000 });
  const rows = ps.stdout.split("\n").slice(1);
  const pidOf = (l: string) => l.trim().split(/\s+/)[0] ?? "";
  const ppidOf = (l: string) => l.trim().split(/\s+/)[1] ?? "";
  const shown = new Set(rows.filter((l) => /podman|conmon|runc/.test(l)).map(pidOf));
  for (let depth = 0; depth < 3; depth++)
    for (const l of rows) if (shown.has(ppidOf(l))) shown.add(pidOf(l));
  return rows.filter((l) => shown.has(pidOf(l))).join("\n");
}

/**
 * The memory cgroup of a running container as the kernel counts it (cgroup v1
 * or v2): a container at its limit with a growing failcnt and file refaults is
 * thrashing on its own page cache, not waiting on podman.
 */
function memoryCgroupReport(p: Podman, name: string): string {
  const path = p.run(["inspect", "--format", "{{.State.CgroupPath}}", name], 20_000).stdout.trim();
  if (!path) return "(no cgroup path)";
  const read = (file: string) => {
    try {
      return readFileSync(file, "utf8").trim();
    } catch {
      return undefined;
    }
  };
  const v1 = `/sys/fs/cgroup/memory${path}`;
  const dir = existsSync(v1) ? v1 : `/sys/fs/cgroup${path}`;
  const files = existsSync(v1)
    ? ["memory.usage_in_bytes", "memory.limit_in_bytes", "memory.failcnt"]
    : ["memory.current", "memory.max", "memory.events"];
  const stat = (read(join(dir, "memory.stat")) ?? "")
    .split("\n")
    .filter((l) => /^(cache|file|rss|anon|workingset_refault_file) /.test(l));
  return [...files.map((f) => `${f}: ${read(join(dir, f)) ?? "(none)"}`), ...stat].join("; ");
}

/**
 * Runs a container that exits at once (an init container) to completion, as
 * kubelet runs one, and answers its exit code ("" when it did not end within
 * 60 s). Started detached and polled, each step bounded; a container that does
 * not end is reported with podman's processes and its memory cgroup.
 */
async function runToCompletion(p: Podman, name: string, args: string[]): Promise<string> {
  const started = p.run(["run", "-d", ...args], 40_000);
  const deadline = Date.now() + 60_000;
  while (started.status === 0 && Date.now() < deadline) {
    const state = p.run(
      ["inspect", "--format", "{{.State.Status}} {{.State.ExitCode}}", name],
      20_000,
    );
    const [status, exit] = state.stdout.trim().split(" ");
    if (status === "exited" || status === "stopped") return exit ?? "";
    await sleep(250);
  }
  console.warn(
    `    [${name} did not end (run -d: exit ${started.status} ${started.stderr.trim()}); its memory cgroup: ${memoryCgroupReport(p, name)}; podman's processes:\n${podmanProcesses()}]`,
  );
  return "";
}

describe("e2e: the image runs as the DaemonSet says", function () {
  this.timeout(120_000);
  const tag = uniqueTag();
  const bridge = `cdti${tag}`;
  const octet = 16 + (Number.parseInt(tag.slice(0, 2), 16) % 200);
  const podCidr = `10.197.${octet}.0/24`;
  const addressIn = new RegExp(`^10\\.197\\.${octet}\\.\\d+$`);
  let root = "";
  let image = "";
  let spec: K8sPodSpec;
  let configMapData: ConfigMapData = {};
  let node: NodeMountNamespace | undefined;
  let config: ConfigMapDir | undefined;
  let driverSide: Podman | undefined;
  let runtime: Podman | undefined;
  let healthPort = 0;
  const driverName = `cdti${tag}-driver`;
  const pods: Array<{ name: string; id: string; ip: string; sandboxKey: string }> = [];

  /** The pod network's conflist as the ConfigMap has it, with the test's bridge and `range`. */
  function withBridge(data: ConfigMapData, range: Record<string, unknown> = {}): ConfigMapData {
    const conflist = JSON.parse(String(data["pod-network.conflist"] ?? "{}")) as {
      plugins: Array<Record<string, unknown> & { ipam?: { ranges?: unknown } }>;
    };
    const midonet = conflist.plugins.find((p) => p.type === "midonet");
    if (!midonet?.ipam)
      throw new Error("the ConfigMap's pod-network has no midonet plugin with ipam");
    midonet.bridge = bridge;
    midonet.ipam.ranges = [[{ subnet: "usePodCidr", ...range }]];
    // No masquerade table in this machine's network namespace, whatever the ConfigMap's clusterCidr.
    const driver = {
      ...(JSON.parse(String(data["driver.json"] ?? "{}")) as object),
      masquerade: false,
    };
    return {
      ...data,
      "driver.json": JSON.stringify(driver, null, 2),
      "pod-network.conflist": JSON.stringify(conflist, null, 2),
    };
  }

  /** The node's hostPath volumes: the node dirs under the root, /run's from the namespace. */
  function hostPath(path: string, type: string | undefined): string {
    const n = node as NodeMountNamespace;
    if ((NODE_DIRS as readonly string[]).includes(path)) return n.path(path);
    if (path === "/run/netns") return path;
    if (path === "/run/xtables.lock" && type === "FileOrCreate") {
      runCommand(n.wrap()[0] as string, [...n.wrap().slice(1), "touch", path]);
      return path;
    }
    throw new Error(`hostPath ${path}: the test does not know where it is on its node`);
  }

  function runContext(name: string): PodRunContext {
    return {
      image,
      name,
      hostPath,
      configMaps: { "cni-driver-config": (config as ConfigMapDir).dir },
      fieldRefs: { "spec.nodeName": `cdti-node-${tag}` },
      envOverrides: {
        CNI_DRIVER_CONFIGMAP: undefined,
        CNI_DRIVER_POD_CIDR: podCidr,
        CNI_DRIVER_HEALTH_ADDR: `127.0.0.1:${healthPort}`,
      },
    };
  }

  function startDriver(): void {
    const p = driverSide as Podman;
    const args = podmanRunArgs(spec, containerOf(spec, "cni-driver"), runContext(driverName));
    p.must(["run", "-d", ...args], 120_000);
  }

  function driverRunning(): boolean {
    const r = (driverSide as Podman).run(["inspect", "--format", "{{.State.Running}}", driverName]);
    return r.stdout.trim() === "true";
  }

  async function driverReady(): Promise<void> {
    const url = probeUrl(containerOf(spec, "cni-driver").readinessProbe, healthPort);
    await until200(url, driverRunning, "the driver's container");
  }

  function driverLogs(): string {
    const r = (driverSide as Podman).run(["logs", driverName]);
    return r.stdout + r.stderr;
  }

  const leases = (): string[] => {
    const dir = (node as NodeMountNamespace).path("/var/lib/cni/networks/pod-network");
    return existsSync(dir) ? readdirSync(dir).filter((f) => /^\d+\.\d+\.\d+\.\d+$/.test(f)) : [];
  };
  const bridgePorts = (): string[] =>
    runCommand("ip", ["-o", "link", "show", "master", bridge]).stdout.split("\n").filter(Boolean);
  const listed = (dir: string): string[] => (existsSync(dir) ? readdirSync(dir) : []);
  const inNode = (command: string[]) => {
    const w = (node as NodeMountNamespace).wrap();
    return runCommand(w[0] as string, [...w.slice(1), ...command]);
  };

  function startPod(suffix: string): (typeof pods)[0] {
    const p = runtime as Podman;
    const name = `cdti${tag}${suffix}`;
    const id = p.runDetached(name, HOST_NETWORK, ["sleep", "600"]);
    const attachment = p.attachment(id, HOST_NETWORK);
    expect(attachment, `podman inspect ${name}: no attachment to ${HOST_NETWORK}`).to.not.equal(
      undefined,
    );
    const pod = { name, id, ip: attachment?.ipAddress ?? "", sandboxKey: p.sandboxKey(id) };
    pods.push(pod);
    return pod;
  }

  function expectPing(from: (typeof pods)[0], to: (typeof pods)[0]): void {
    const r = (runtime as Podman).exec(from.id, ["ping", "-c", "1", "-W", "2", to.ip]);
    expect(r.status, `ping ${from.name} -> ${to.ip}: ${r.stdout}${r.stderr}`).to.equal(0);
  }

  before(async function () {
    // The first build on a machine debootstraps Debian and compiles the image.
    this.timeout(45 * 60_000);
    requireImageTools(this);
    requireCommand(this, "busybox", "busybox-static");
    image = ensureImage().image;
    const objects = renderManifests();
    spec = podSpecOf(findObject(objects, "DaemonSet", "cni-driver"));
    configMapData = findObject(objects, "ConfigMap", "cni-driver-config").data ?? {};
    root = mkdtempSync(join(tmpdir(), "cdt-image-"));
    node = new NodeMountNamespace(root);
    await node.start();
    config = await ConfigMapDir.create(root);
    await config.write(withBridge(configMapData));
    healthPort = await freePort();
    driverSide = new Podman({
      wrap: node.wrap(),
      storageDriver: hostStorageDriver(),
      additionalImageStores: [HOST_IMAGE_STORE],
    });
    runtime = new Podman({
      wrap: node.wrap(),
      confDir: node.path("/etc/cni/net.d"),
      binDir: node.path("/opt/cni/bin"),
    });
    runtime.importBusybox();
  });

  after(async () => {
    await runtime?.cleanup();
    await driverSide?.cleanup();
    await node?.stop();
    // The driver's bridge lives on in this machine's network namespace (host network).
    runCommand("ip", ["link", "del", bridge]);
    if (root) removeRoot(root);
  });

  it("install-cni, the init container, puts the shim and the reference plugins into the node's bin dir", async function () {
    // Room for each bounded step: the cache drop, the start (40 s) and the end (60 s).
    this.timeout(180_000);
    const p = driverSide as Podman;
    const name = `${driverName}-init`;
    const args = podmanRunArgs(spec, containerOf(spec, "install-cni"), runContext(name));
    // Cold, as on a node just booted: install-cni must fit its memory limit then too.
    dropNodePageCache(p, image);
    const waited = await runToCompletion(p, name, args);
    const logs = p.run(["logs", name]);
    p.run(["rm", "-f", name]);
    expect(waited, `install-cni's exit code; its output: ${logs.stdout}${logs.stderr}`).to.equal(
      "0",
    );
    const bin = (node as NodeMountNamespace).path("/opt/cni/bin");
    expect(readdirSync(bin)).to.include.members(["cni-driver-shim", ...DEFAULT_INSTALLED_PLUGINS]);
    // The shim is the static program: it answers VERSION on the host, outside the image.
    const v = runCommand(join(bin, "cni-driver-shim"), [], { env: { CNI_COMMAND: "VERSION" } });
    expect(v.status, v.stderr).to.equal(0);
    expect(JSON.parse(v.stdout).supportedVersions).to.include("1.0.0");
  });

  it("the driver becomes ready and installs the host conflist pointing at its socket", async () => {
    startDriver();
    await driverReady();
    const n = node as NodeMountNamespace;
    // Written once the driver is ready, by temp file and rename: it follows readiness, maybe a moment later.
    const path = n.path(`/etc/cni/net.d/${HOST_CONFLIST_NAME}`);
    await until(() => existsSync(path), "the host conflist after readiness");
    const conflist = JSON.parse(readFileSync(path, "utf8")) as {
      name: string;
      plugins: Array<{ type: string; socket: string }>;
    };
    expect(conflist.name).to.equal(HOST_NETWORK);
    expect(conflist.plugins[0]?.type).to.equal("cni-driver-shim");
    expect(conflist.plugins[0]?.socket).to.equal("/run/cni-driver/driver.sock");
    expect(existsSync(n.path("/run/cni-driver/driver.sock"))).to.equal(true);
  });

  it("podman on the node starts two containers through the shim: addresses from the pod CIDR, and they ping each other", () => {
    const a = startPod("a");
    const b = startPod("b");
    for (const pod of [a, b]) expect(pod.ip).to.match(addressIn);
    expect(a.ip).to.not.equal(b.ip);
    expect(leases()).to.have.members([a.ip, b.ip]);
    expect(bridgePorts()).to.have.length(2);
    expectPing(a, b);
    expectPing(b, a);
  });

  it("an edit of the ConfigMap directory is in effect for the next container", async () => {
    const loads = () => driverLogs().split("network configuration loaded").length - 1;
    const before = loads();
    const first = 200 + 10 * Math.floor(Math.random() * 5);
    const rangeStart = `10.197.${octet}.${first}`;
    const rangeEnd = `10.197.${octet}.${first + 9}`;
    await (config as ConfigMapDir).write(withBridge(configMapData, { rangeStart, rangeEnd }));
    await waitFor("the driver to load the edited ConfigMap", () =>
      loads() > before ? true : undefined,
    ).catch((err: Error) => {
      throw new Error(`${err.message}; the driver's log ends: ${driverLogs().slice(-3000)}`);
    });
    const c = startPod("c");
    const last = Number(c.ip.split(".")[3]);
    expect(last, c.ip).to.be.within(first, first + 9);
    expectPing(c, pods[0] as (typeof pods)[0]);
  });

  it("a restart of the driver's container leaves the pods up, and the new driver serves them", async () => {
    const p = driverSide as Podman;
    const grace = spec.terminationGracePeriodSeconds ?? 30;
    // As kubelet restarts a container: stopped within the grace period, then a new one.
    p.must(["rm", "-f", "-t", String(grace), driverName], (grace + 30) * 1000);
    expect(pods).to.have.length(3);
    const [a, b, c] = pods as [(typeof pods)[0], (typeof pods)[0], (typeof pods)[0]];
    expectPing(a, b);
    startDriver();
    await driverReady();
    expect(leases()).to.have.members([a.ip, b.ip, c.ip]);
    expectPing(b, c);
    expectPing(c, a);
    expect(bridgePorts()).to.have.length(3);
  });

  it("after the containers are removed nothing is left: no lease, veth, cached result or netns", () => {
    const p = runtime as Podman;
    const n = node as NodeMountNamespace;
    expect(pods).to.have.length(3);
    const r = p.remove(...pods.map((pod) => pod.id));
    expect(r.status, r.stderr).to.equal(0);
    expect(p.containerIds()).to.deep.equal([]);
    expect(leases()).to.deep.equal([]);
    expect(bridgePorts()).to.deep.equal([]);
    for (const pod of pods) {
      for (const dir of ["/var/lib/cni-driver/results", "/var/lib/cni/results"]) {
        const left = listed(n.path(dir)).filter((f) => f.includes(pod.id));
        expect(left, `${dir} for ${pod.name}`).to.deep.equal([]);
      }
      if (pod.sandboxKey) {
        expect(inNode(["test", "-e", pod.sandboxKey]).status, pod.sandboxKey).to.not.equal(0);
      }
    }
    expect(driverRunning()).to.equal(true);
  });
});

describe("e2e: the image runs the MidoNet controller as its Deployment says", function () {
  this.timeout(120_000);
  const tag = uniqueTag();
  let kube: FakeKubeApiServer | undefined;
  let sim: MidonetSimulator | undefined;
  let podman: Podman | undefined;
  let dir = "";

  before(async function () {
    this.timeout(45 * 60_000);
    requireImageTools(this);
    ensureImage();
    kube = await startFakeKubeApiServer();
    sim = await startMidonetSimulator({
      hosts: Object.entries(HOSTS).map(([name, id]) => ({ id, name })),
    });
    populateCluster(kube);
    dir = mkdtempSync(join(tmpdir(), "cdt-image-ctl-"));
    podman = new Podman({
      storageDriver: hostStorageDriver(),
      additionalImageStores: [HOST_IMAGE_STORE],
    });
  });

  after(async () => {
    await podman?.cleanup();
    await sim?.close();
    await kube?.close();
    if (dir) removeRoot(dir);
  });

  it("starts from the same image, answers its health endpoints and maps the cluster onto MidoNet", async () => {
    const p = podman as Podman;
    const objects = renderManifests();
    const spec = podSpecOf(findObject(objects, "Deployment", "cni-driver-midonet-controller"));
    const container = containerOf(spec, "midonet-controller");
    // The controller runs as nobody: the kubeconfig must be readable by it.
    chmodSync(dir, 0o755);
    (kube as FakeKubeApiServer).kubeconfig(join(dir, "kubeconfig"));
    chmodSync(join(dir, "kubeconfig"), 0o644);
    const port = await freePort();
    const name = `cdti${tag}-controller`;
    const args = podmanRunArgs(spec, container, {
      image: ensureImage().image,
      name,
      hostPath: (path) => {
        throw new Error(`the controller mounts no hostPath (${path})`);
      },
      configMaps: {},
      fieldRefs: { "metadata.name": name },
      secrets: {
        "midonet-credentials/user": "admin",
        "midonet-credentials/password": "admin",
        "midonet-credentials/project": "admin",
      },
      envOverrides: {
        CNI_DRIVER_MIDONET_API: (sim as MidonetSimulator).baseUrl,
        CNI_DRIVER_HEALTH_ADDR: `127.0.0.1:${port}`,
        CNI_DRIVER_KUBECONFIG: "/etc/cni-driver-test/kubeconfig",
      },
      extraVolumes: [`${dir}:/etc/cni-driver-test:ro`],
    });
    p.must(["run", "-d", ...args], 120_000);
    const running = () =>
      p.run(["inspect", "--format", "{{.State.Running}}", name]).stdout.trim() === "true";
    await until200(probeUrl(container.livenessProbe, port), running, "the controller's container");
    await until200(probeUrl(container.readinessProbe, port), running, "the controller's container");
    await waitFor(
      "the controller to annotate every Node with its MidoNet host",
      () => (nodesAnnotated(kube as FakeKubeApiServer) ? true : undefined),
      60_000,
    );
    // It runs as the Deployment says: as nobody, on a read-only root (even /tmp,
    // writable by anyone on a writable root, is not).
    const who = p.run([
      "exec",
      name,
      "sh",
      "-c",
      "id -u; touch /tmp/x 2>/dev/null || echo read-only",
    ]);
    expect(who.stdout).to.equal("65534\nread-only\n");
  });
});
