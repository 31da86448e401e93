/**
 * Runs a real `cni-driver serve` process under a temporary root: its own socket,
 * config dir (laid out as kubelet mounts a ConfigMap), state, cache, host-local
 * data dir, bridge name and pod subnet, so suites never touch the host's CNI
 * paths or each other. `cleanup()` removes everything, even after a failure.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DriverClient } from "../../src/driver/client.js";
import type { CniStatusResponse } from "../../src/wire/types.js";
import { writeConfigMapDir } from "./configmap-dir.js";
import { deleteHostLink, deleteNetns, listNetns, uniqueTag } from "./netns.js";
import { REFERENCE_PLUGIN_DIR } from "./requirements.js";

export const REPO_ROOT = new URL("../../", import.meta.url).pathname;

export interface HarnessOptions {
  /** Third octet of the pod subnet 10.244.<octet>.0/24; unique per suite. */
  subnetOctet: number;
  mtu?: number;
  /** Extra plugins after the built-in one (e.g. portmap). */
  chain?: Array<Record<string, unknown>>;
  cniVersion?: string;
  extraFlags?: string[];
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
  private child: ChildProcess | undefined;
  private stderr = "";
  client: DriverClient;

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

  async start(): Promise<void> {
    this.stderr = "";
    const args = [
      "--import",
      "tsx",
      join(REPO_ROOT, "src/driver/cli.ts"),
      "serve",
      "--socket",
      this.socket,
      "--config-dir",
      this.configDir,
      "--state-dir",
      this.stateDir,
      "--cache-dir",
      this.cacheDir,
      "--cni-bin-dir",
      REFERENCE_PLUGIN_DIR,
      "--host-local-data-dir",
      this.dataDir,
      "--pod-cidr",
      this.subnet,
      "--health-addr",
      "127.0.0.1:0",
      "--log-level",
      process.env.CNI_DRIVER_TEST_LOG ?? "warn",
      ...(this.opts.extraFlags ?? []),
    ];
    const env = { ...process.env };
    delete env.NODE_EXTRA_CA_CERTS;
    const child = spawn(process.execPath, args, {
      cwd: REPO_ROOT,
      env,
      stdio: ["ignore", "ignore", "pipe"],
    });
    this.child = child;
    child.stderr?.on("data", (b: Buffer) => {
      this.stderr += b.toString();
      if (process.env.CNI_DRIVER_TEST_LOG) process.stderr.write(b);
    });
    await this.waitReady();
  }

  /** Polls CniStatus until ready (bounded: 20 s). */
  async waitReady(timeoutMs = 20_000): Promise<CniStatusResponse> {
    const deadline = Date.now() + timeoutMs;
    let last: CniStatusResponse | undefined;
    while (Date.now() < deadline) {
      if (this.child && this.child.exitCode !== null) {
        throw new Error(`driver exited with ${this.child.exitCode}: ${this.stderr.slice(-2000)}`);
      }
      last = await this.client.cniStatus({}, { timeoutMs: 1000 });
      if (last.ready) return last;
      await sleep(50);
    }
    throw new Error(
      `driver not ready after ${timeoutMs} ms: ${JSON.stringify(last)}; stderr: ${this.stderr.slice(-2000)}`,
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
    const timer = setTimeout(() => child.kill("SIGKILL"), 30_000);
    const code = await exited;
    clearTimeout(timer);
    this.child = undefined;
    return code;
  }

  netnsName(i: number | string): string {
    return `${this.netnsPrefix}${i}`;
  }

  async cleanup(): Promise<void> {
    await this.kill().catch(() => {});
    this.client.close();
    // Host veths left on our bridge, then the bridge, then our namespaces.
    const ports =
      spawnSync("ip", ["-o", "link", "show", "master", this.bridge], { encoding: "utf8" }).stdout ??
      "";
    for (const line of ports.split("\n")) {
      const name = (line.split(": ")[1] ?? "").split("@")[0];
      if (name) deleteHostLink(name);
    }
    deleteHostLink(this.bridge);
    for (const ns of listNetns(this.netnsPrefix)) deleteNetns(ns);
    rmSync(this.root, { recursive: true, force: true });
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
