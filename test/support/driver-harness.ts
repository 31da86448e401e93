/**
 * Runs a real `cni-driver serve` process under a temporary root: its own socket,
 * config dir (laid out as kubelet mounts a ConfigMap), state, cache, host-local
 * data dir, bridge name and pod subnet, so suites never touch the host's CNI
 * paths or each other. `cleanup()` removes everything, even after a failure.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import http from "node:http";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect } from "chai";
import { execaSync } from "execa";
import { DriverClient } from "../../src/driver/rpc/client.js";
import { hostVethName, podVethKey } from "../../src/midonet/host-veth-name.js";
import { DELETION_QUEUE_DIR } from "../../src/wire/deletion-record.js";
import type { CniStatusResponse, PodRequest } from "../../src/wire/types.js";
import { writeConfigMapDir } from "./configmap-dir.js";
import { queueDeletion } from "./deletion-queue.js";
import { undoOnInterrupt } from "./interrupt-cleanup.js";
import { deleteHostLink, deleteNetns, listNetns, uniqueTag } from "./netns.js";
import { patient } from "./patience.js";
import { REFERENCE_PLUGIN_DIR } from "./requirements.js";

export const REPO_ROOT = new URL("../../", import.meta.url).pathname;

/** The Node flags of a package's driver shebang (src/driver/cli.ts): the driver runs with them, as in the image. */
function driverNodeFlags(packageRoot: string): string[] {
  return (readFileSync(join(packageRoot, "src/driver/cli.ts"), "utf8").split("\n")[0] ?? "")
    .split(/\s+/)
    .filter((a) => a.startsWith("--"));
}

/** The Node flags of this checkout's driver. */
export const DRIVER_NODE_FLAGS: readonly string[] = driverNodeFlags(REPO_ROOT);

export interface DriverCommand {
  node: string;
  args: string[];
  env: NodeJS.ProcessEnv;
}

/**
 * How a test runs `cni-driver <args>`: the sources through tsx on the test's
 * own Node, or with `nodeBinary` the compiled `dist/` on that Node (as the image
 * does). With `packageRoot` (another build of the package: a previous release,
 * test/support/previous-release.ts) that build's compiled `dist/`, on
 * `nodeBinary` or the test's own Node. The environment is the test's, less
 * NODE_EXTRA_CA_CERTS (it costs every Node start ~60 ms).
 */
export function driverCommand(
  args: readonly string[],
  nodeBinary?: string,
  packageRoot?: string,
): DriverCommand {
  const entry =
    nodeBinary || packageRoot
      ? [join(packageRoot ?? REPO_ROOT, "dist/src/driver/cli.js")]
      : ["--import", "tsx", join(REPO_ROOT, "src/driver/cli.ts")];
  entry.unshift(...(packageRoot ? driverNodeFlags(packageRoot) : DRIVER_NODE_FLAGS));
  const env = { ...process.env };
  delete env.NODE_EXTRA_CA_CERTS;
  // The suites choose the host-local mode by flag (none: the default); an env twin must not.
  delete env.CNI_DRIVER_HOST_LOCAL;
  return { node: nodeBinary ?? process.execPath, args: [...entry, ...args], env };
}

/** Runs `cni-driver <args>` to its end (killed after `timeoutMs`): a client command, install-cni. */
export function runDriverCli(
  args: readonly string[],
  opts: { nodeBinary?: string; timeoutMs?: number; packageRoot?: string } = {},
): { status: number | null; stdout: string; stderr: string } {
  const c = driverCommand(args, opts.nodeBinary, opts.packageRoot);
  const r = execaSync(c.node, c.args, {
    cwd: opts.packageRoot ?? REPO_ROOT,
    env: c.env,
    extendEnv: false,
    timeout: patient(opts.timeoutMs ?? 30_000),
    killSignal: "SIGKILL",
    stripFinalNewline: false,
    reject: false,
  });
  return { status: r.exitCode ?? null, stdout: r.stdout, stderr: r.stderr };
}

/** How the driver runs host-local: `--host-local`. */
export type HostLocalMode = "in-process" | "exec";

export interface HostLocalVariant {
  hostLocal: HostLocalMode;
  /** The driver's flags for it: none for the default, so the default itself is what runs. */
  flags: string[];
  /** The suite's subnet octet in this mode. */
  octet: number;
}

/**
 * Defines a suite once per way the driver runs host-local: its default
 * (in-process) and Debian's binary exec'd. Each mode gets a subnet octet of its
 * own, so the two never share addresses, bridges or lease files.
 */
export function forEachHostLocalMode(
  octets: Record<HostLocalMode, number>,
  suite: (variant: HostLocalVariant) => void,
): void {
  for (const hostLocal of ["in-process", "exec"] as const) {
    suite({
      hostLocal,
      flags: hostLocal === "exec" ? ["--host-local", "exec"] : [],
      octet: octets[hostLocal],
    });
  }
}

export interface HarnessOptions {
  /** Third octet of the pod subnet 10.244.<octet>.0/24; unique per suite. */
  subnetOctet: number;
  mtu?: number;
  /** Extra plugins after the built-in one (e.g. portmap). */
  chain?: Array<Record<string, unknown>>;
  cniVersion?: string;
  extraFlags?: string[];
  /**
   * Runs the compiled driver (`dist/src/driver/cli.js`) on this Node binary, as the
   * image does, instead of the sources through tsx on the test's own Node.
   */
  nodeBinary?: string;
  /**
   * Runs the compiled driver of another build of the package instead (a previous
   * release: test/support/previous-release.ts). Set between a stop and a start, it
   * switches the harness's socket, config, state and cache to that build, as a
   * DaemonSet's rolling update does.
   */
  driverRoot?: string;
  /**
   * Runs the driver inside this network namespace (a name under /run/netns), a
   * throwaway "node": what it does to its own namespace happens there.
   */
  netns?: string;
}

export class DriverHarness {
  readonly tag = uniqueTag();
  readonly root = mkdtempSync(join(tmpdir(), "cni-driver-test-"));
  readonly socket = join(this.root, "run", "driver.sock");
  readonly configDir = join(this.root, "etc-cni-driver");
  readonly stateDir = join(this.root, "state");
  readonly cacheDir = join(this.root, "cache");
  readonly dataDir = join(this.root, "networks");
  readonly bridge = `cdt${this.tag}`;
  readonly netnsPrefix = `cdt-${this.tag}-`;
  readonly network = "pod-network";
  readonly subnet: string;
  readonly gateway: string;
  /** The Kubernetes namespace of the harness's pods (their host veth names derive from it). */
  readonly podNamespace = "default";
  private child: ChildProcess | undefined;
  private stderr = "";
  private health = "";
  client: DriverClient;

  /** Takes back the undo of what the harness made, registered for an interrupted run. */
  private readonly keepOnInterrupt = undoOnInterrupt(() => this.removeMade());

  constructor(readonly opts: HarnessOptions) {
    this.subnet = `10.244.${opts.subnetOctet}.0/24`;
    this.gateway = `10.244.${opts.subnetOctet}.1`;
    this.client = new DriverClient(this.socket);
  }

  conflist(
    overrides: { mtu?: number; chain?: Array<Record<string, unknown>>; cniVersion?: string } = {},
  ): Record<string, unknown> {
    return {
      cniVersion: overrides.cniVersion ?? this.opts.cniVersion ?? "1.0.0",
      name: this.network,
      plugins: [
        {
          type: "midonet",
          datapath: "kernel",
          bridge: this.bridge,
          mtu: overrides.mtu ?? this.opts.mtu ?? 1500,
          ipam: { type: "host-local", ranges: [[{ subnet: "usePodCidr" }]], dataDir: this.dataDir },
        },
        ...(overrides.chain ?? this.opts.chain ?? []),
      ],
    };
  }

  /** Writes (or atomically swaps) the config dir as kubelet would. */
  async writeConfig(files: Record<string, string>): Promise<void> {
    mkdirSync(this.configDir, { recursive: true });
    await writeConfigMapDir(this.configDir, files);
  }

  async writeDefaultConfig(
    overrides: Parameters<DriverHarness["conflist"]>[0] = {},
  ): Promise<void> {
    await this.writeConfig({
      "pod-network.conflist": JSON.stringify(this.conflist(overrides), null, 2),
    });
  }

  podName(i: number | string): string {
    return `pod-${this.tag}-${i}`;
  }

  /** The sandbox id of pod `i`: carries the tag, so host-wide state (iptables) can be traced to this run. */
  containerId(i: number | string): string {
    return `cdt${this.tag}ctr${i}`;
  }

  /** `/run/netns/<netnsName(i)>`, the netns path a runtime would pass. */
  netnsPath(i: number | string): string {
    return `/run/netns/${this.netnsName(i)}`;
  }

  /** A SetUpPod/TearDownPod/CheckPod request for pod `i` (eth0 in netns `i`), fields overridable. */
  podRequest(i: number | string, overrides: Partial<PodRequest> = {}): Partial<PodRequest> {
    return {
      container_id: this.containerId(i),
      netns: this.netnsPath(i),
      ifname: "eth0",
      pod: { namespace: this.podNamespace, name: this.podName(i), uid: "" },
      ...overrides,
    };
  }

  /** The host end of pod `i`'s veth, as the built-in plugin names it. */
  hostVeth(i: number | string, ifName = "eth0"): string {
    return hostVethName(
      podVethKey(
        { namespace: this.podNamespace, name: this.podName(i) },
        this.containerId(i),
        ifName,
      ),
    );
  }

  /** host-local's lease files of the harness network: one per address handed out. */
  leases(network = this.network): string[] {
    return listDir(join(this.dataDir, network)).filter(
      (n) => n !== "lock" && !n.startsWith("last_reserved_ip"),
    );
  }

  /**
   * The container ids holding host-local's leases of the harness network (each lease file's first line).
   * A lease released between the listing and the read (pods churning beside the check) holds nothing.
   */
  leaseHolders(network = this.network): string[] {
    return this.leases(network).flatMap((ip) => {
      const holder = readIfPresent(join(this.dataDir, network, ip));
      return holder === undefined ? [] : [holder.split(/\r?\n/)[0] ?? ""];
    });
  }

  /** Queues pod `i`'s DEL as the shim does when the driver cannot take it: naming no network. */
  queueDeletion(i: number | string): void {
    queueDeletion(this.stateDir, {
      kind: "cniDriverDeletionV1",
      network: "",
      containerId: this.containerId(i),
      ifName: "eth0",
      netns: this.netnsPath(i),
      cniArgs: [
        ["K8S_POD_NAMESPACE", this.podNamespace],
        ["K8S_POD_NAME", this.podName(i)],
      ],
      cniVersion: "1.0.0",
      queuedAtUnixMs: Date.now(),
    });
  }

  /** The records in the deletion queue. */
  queuedDeletions(): string[] {
    return listDir(join(this.stateDir, DELETION_QUEUE_DIR)).filter((n) => n.endsWith(".json"));
  }

  /** The driver's result cache files (libcni layout: `<cacheDir>/results/<net>-<id>-<if>`). */
  cacheFiles(): string[] {
    return listDir(join(this.cacheDir, "results"));
  }

  /** The interfaces enslaved to the harness bridge (the pods' host veths). */
  bridgePorts(): string[] {
    const out =
      spawnSync("ip", ["-o", "link", "show", "master", this.bridge], { encoding: "utf8" }).stdout ??
      "";
    return out
      .split("\n")
      .map((line) => (line.split(": ")[1] ?? "").split("@")[0] ?? "")
      .filter(Boolean);
  }

  /** The driver's health/metrics address ("127.0.0.1:<port>"), chosen free before each start. */
  get healthAddress(): string {
    return this.health;
  }

  /** GET on the health server (`/metrics`, `/readyz`, `/livez`): status and body. */
  async httpGet(path: string, timeoutMs = 5000): Promise<{ status: number; body: string }> {
    if (!this.health) throw new Error("the driver is not running");
    const i = this.health.lastIndexOf(":");
    const host = this.health.slice(0, i);
    const port = Number(this.health.slice(i + 1));
    return new Promise((resolve, reject) => {
      const req = http.get({ host, port, path, agent: false, timeout: timeoutMs }, (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => {
          body += c;
        });
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
      });
      req.on("timeout", () => req.destroy(new Error(`GET ${path}: no answer in ${timeoutMs} ms`)));
      req.on("error", reject);
    });
  }

  /** One sample of the driver's /metrics, e.g. `metric("cni_driver_config_reload_errors_total")`. */
  async metric(name: string): Promise<number | undefined> {
    const { body } = await this.httpGet("/metrics");
    for (const line of body.split("\n")) {
      const [key, value] = line.split(" ");
      if (key === name && value !== undefined) return Number(value);
    }
    return undefined;
  }

  /**
   * How this harness runs `cni-driver serve`: the Node, its arguments and
   * environment. `dirs` puts state and cache elsewhere (a second driver on the
   * same socket), `healthAddr` defaults to none.
   */
  serveCommand(
    dirs: { stateDir?: string; cacheDir?: string; healthAddr?: string } = {},
  ): DriverCommand {
    return driverCommand(
      [
        "serve",
        "--socket",
        this.socket,
        "--config-dir",
        this.configDir,
        "--state-dir",
        dirs.stateDir ?? this.stateDir,
        "--cache-dir",
        dirs.cacheDir ?? this.cacheDir,
        "--cni-bin-dir",
        REFERENCE_PLUGIN_DIR,
        "--host-local-data-dir",
        this.dataDir,
        "--pod-cidr",
        this.subnet,
        "--health-addr",
        dirs.healthAddr ?? "",
        "--log-level",
        process.env.CNI_DRIVER_TEST_LOG ?? "warn",
        ...(this.opts.extraFlags ?? []),
      ],
      this.opts.nodeBinary,
      this.opts.driverRoot,
    );
  }

  /** Starts the driver; waits until it is ready unless told not to (a driver that starts not ready). */
  async start(opts: { waitReady?: boolean } = {}): Promise<void> {
    this.stderr = "";
    this.health = `127.0.0.1:${await freePort()}`;
    const serve = this.serveCommand({ healthAddr: this.health });
    // `ip netns exec` execs the driver itself, so the child's pid stays the driver's.
    const { node, args } = this.opts.netns
      ? { node: "ip", args: ["netns", "exec", this.opts.netns, serve.node, ...serve.args] }
      : serve;
    const env = serve.env;
    const child = spawn(node, args, {
      cwd: this.opts.driverRoot ?? REPO_ROOT,
      env,
      stdio: ["ignore", "ignore", "pipe"],
    });
    this.child = child;
    child.once(
      "exit",
      undoOnInterrupt(() => child.kill("SIGKILL")),
    );
    child.stderr?.on("data", (b: Buffer) => {
      this.stderr += b.toString();
      if (process.env.CNI_DRIVER_TEST_LOG) process.stderr.write(b);
    });
    if (opts.waitReady ?? true) await this.waitReady();
  }

  /** Polls CniStatus until ready (bounded: 20 s, and at most one poll per 50 ms). */
  async waitReady(bound = 20_000): Promise<CniStatusResponse> {
    const timeoutMs = patient(bound);
    const deadline = Date.now() + timeoutMs;
    let last: CniStatusResponse | undefined;
    for (let n = 0; n < timeoutMs / 50 && Date.now() < deadline; n++) {
      if (this.child && this.child.exitCode !== null) {
        throw new Error(`driver exited with ${this.child.exitCode}: ${this.stderr.slice(-2000)}`);
      }
      last = await this.client.cniStatus({}, { timeoutMs: patient(1000) });
      if (last.ready) return last;
      await sleep(50);
    }
    throw new Error(
      `driver not ready after ${timeoutMs} ms: ${JSON.stringify(last)}; stderr: ${this.stderr.slice(-2000)}`,
    );
  }

  /** The driver process is alive. */
  get running(): boolean {
    return (
      this.child !== undefined && this.child.exitCode === null && this.child.signalCode === null
    );
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  get logs(): string {
    return this.stderr;
  }

  /** SIGTERM and wait for the exit; returns the exit code. */
  async stop(): Promise<number | null> {
    return this.signal("SIGTERM");
  }

  /** SIGKILL: a crash. */
  async kill(): Promise<void> {
    await this.signal("SIGKILL");
  }

  private async signal(sig: NodeJS.Signals): Promise<number | null> {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null)
      return child?.exitCode ?? null;
    const exited = new Promise<number | null>((resolve) =>
      child.once("exit", (code) => resolve(code)),
    );
    child.kill(sig);
    const timer = setTimeout(() => child.kill("SIGKILL"), patient(30_000));
    const code = await exited;
    clearTimeout(timer);
    this.child = undefined;
    this.health = "";
    return code;
  }

  netnsName(i: number | string): string {
    return `${this.netnsPrefix}${i}`;
  }

  /**
   * Kills the driver and removes what it and the suite made: the bridge and every
   * port on it, every netns named with `netnsPrefix`, portmap's per-container rules
   * of this run, and the temporary root. Safe to call after any failure.
   */
  async cleanup(): Promise<void> {
    await this.kill().catch(() => {});
    this.client.close();
    this.removeMade();
    this.keepOnInterrupt();
  }

  /** Host veths left on our bridge, then the bridge, our namespaces, portmap's rules, the root. */
  private removeMade(): void {
    for (const name of this.bridgePorts()) deleteHostLink(name);
    deleteHostLink(this.bridge);
    for (const ns of listNetns(this.netnsPrefix)) deleteNetns(ns);
    removePortmapRules(`cdt${this.tag}ctr`);
    rmSync(this.root, { recursive: true, force: true });
  }
}

/** Asserts a driver answer carries no CNI error (the message shows it when it does). */
export function expectNoCniError(res: { error: { code: number; msg: string } | null }): void {
  expect(res.error, `CNI error: ${JSON.stringify(res.error)}`).to.equal(null);
}

function listDir(dir: string): string[] {
  try {
    return readdirSync(dir).sort();
  } catch {
    return [];
  }
}

/** A file's text, or undefined when it is gone (ENOENT); any other error is thrown. */
function readIfPresent(path: string): string | undefined {
  try {
    return readFileSync(path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw err;
  }
}

/** A TCP port nobody listens on now (the kernel's pick for port 0). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as net.AddressInfo).port;
      server.close(() => resolve(port));
    });
  });
}

/** `iptables -t nat -S` lines that mention `needle` (portmap comments carry the container id). */
export function natRulesMentioning(needle: string): string[] {
  const out = spawnSync("iptables", ["-w", "-t", "nat", "-S"], { encoding: "utf8" }).stdout ?? "";
  return out.split("\n").filter((l) => l.includes(needle));
}

/**
 * After a failed test: the portmap rules of this run's containers, and the
 * per-container CNI-DN-* chains they jump to. The shared CNI-HOSTPORT-* chains
 * stay, as portmap itself leaves them.
 */
function removePortmapRules(containerIdPrefix: string): void {
  const chains = new Set<string>();
  for (const rule of natRulesMentioning(containerIdPrefix)) {
    if (!rule.startsWith("-A ")) continue;
    const target = /-j (CNI-DN-[0-9a-f]+)/.exec(rule)?.[1];
    if (target) chains.add(target);
    spawnSync("iptables", ["-w", "-t", "nat", "-D", ...shellWords(rule.slice(3))], {
      stdio: "ignore",
    });
  }
  for (const chain of chains) {
    spawnSync("iptables", ["-w", "-t", "nat", "-F", chain], { stdio: "ignore" });
    spawnSync("iptables", ["-w", "-t", "nat", "-X", chain], { stdio: "ignore" });
  }
}

/** Splits an `iptables -S` line as a shell would: `"…"` groups words, and `\"` in it is a quote. */
function shellWords(line: string): string[] {
  const words: string[] = [];
  let word = "";
  let inWord = false;
  let quoted = false;
  for (let i = 0; i < line.length; i++) {
    const ch = line[i] as string;
    if (quoted) {
      if (ch === "\\" && i + 1 < line.length) word += line[++i];
      else if (ch === '"') quoted = false;
      else word += ch;
    } else if (ch === '"') {
      quoted = true;
      inWord = true;
    } else if (ch === " ") {
      if (inWord) words.push(word);
      word = "";
      inWord = false;
    } else {
      word += ch;
      inWord = true;
    }
  }
  if (inWord) words.push(word);
  return words;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
