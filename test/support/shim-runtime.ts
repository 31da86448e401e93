/**
 * A runtime as libcni is one, for the pods of a DriverHarness: it execs the shim
 * installed in its bin dir (whatever `cni-driver install-cni` last put there)
 * with the CNI environment, and stdin built from the host conflist the driver
 * wrote into its conf dir (`--host-cni-conf-dir`), read afresh at every call;
 * it keeps each ADD's result and hands it to CHECK and DEL as `prevResult`, as
 * libcni's result cache does. Every exec is recorded with its start and end, so
 * a test can tell how long a runtime waited at any moment.
 *
 * The bin and conf dirs live under the harness's temporary root: never the
 * host's /opt/cni/bin or /etc/cni/net.d.
 */
import { mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { type NetworkConfigList, parseNetworkConfigList } from "../../src/cni/conflist.js";
import { buildPluginStdin, buildStatusStdin } from "../../src/cni/plugin-config.js";
import { HOST_CONFLIST_NAME, SHIM_TYPE } from "../../src/driver/lifecycle/host-install.js";
import { type DriverHarness, runDriverCli } from "./driver-harness.js";
import { REFERENCE_PLUGIN_DIR } from "./requirements.js";
import { execShim, type ShimRun } from "./shim-exec.js";

export type ShimVerb = "ADD" | "CHECK" | "DEL" | "STATUS" | "GC" | "VERSION";

/** One exec of the shim, as the runtime saw it (performance.now() times). */
export interface ShimCall {
  verb: ShimVerb;
  pod: string;
  startedAt: number;
  endedAt: number;
  run: ShimRun;
}

export interface ShimCallOptions {
  /** Exec this binary instead of the installed one. */
  shim?: string;
  /** The version the runtime speaks instead of the conflist's pick. */
  cniVersion?: string;
  /** Keys set over the plugin's stdin object (GC's `cni.dev/valid-attachments`). */
  extra?: Record<string, unknown>;
  /** Kills the exec after this long (default 60 s: more than the shim's own 30 s wait). */
  timeoutMs?: number;
}

export class ShimRuntime {
  readonly binDir: string;
  readonly confDir: string;
  /** Every exec so far, in the order they ended. */
  readonly calls: ShimCall[] = [];
  /** The runtime's result cache: each pod's ADD result, until its DEL succeeds. */
  readonly results = new Map<string, Record<string, unknown>>();

  constructor(readonly h: DriverHarness) {
    this.binDir = join(h.root, "opt-cni-bin");
    this.confDir = join(h.root, "etc-cni-net.d");
    mkdirSync(this.binDir, { recursive: true });
    mkdirSync(this.confDir, { recursive: true });
  }

  /** The flags that make the harness's driver write its host conflist where this runtime reads it. */
  get driverFlags(): string[] {
    return ["--host-cni-conf-dir", this.confDir];
  }

  get installedShim(): string {
    return join(this.binDir, SHIM_TYPE);
  }

  get conflistPath(): string {
    return join(this.confDir, HOST_CONFLIST_NAME);
  }

  /** The host conflist as the runtime loads it; throws when it is missing or unreadable. */
  hostConflist(): NetworkConfigList {
    return parseNetworkConfigList(readFileSync(this.conflistPath));
  }

  /**
   * The DaemonSet's init container: `cni-driver install-cni` of the package at
   * `packageRoot` (default this checkout) puts `shim` into the bin dir; no other plugin.
   */
  install(shim: string, packageRoot?: string): void {
    const r = runDriverCli(
      ["install-cni", "--bin-dir", this.binDir, "--shim", shim, "--plugins", ""],
      packageRoot ? { packageRoot } : {},
    );
    if (r.status !== 0) throw new Error(`install-cni exited ${r.status}: ${r.stderr}`);
  }

  /** The CNI environment of `verb` for the harness's pod `pod`. */
  env(verb: ShimVerb, pod: string): Record<string, string> {
    const env: Record<string, string> = {
      PATH: process.env.PATH ?? "/usr/sbin:/usr/bin:/sbin:/bin",
      CNI_COMMAND: verb,
      CNI_PATH: `${this.binDir}:${REFERENCE_PLUGIN_DIR}`,
    };
    if (verb === "VERSION" || verb === "STATUS" || verb === "GC") return env;
    return {
      ...env,
      CNI_CONTAINERID: this.h.containerId(pod),
      CNI_NETNS: this.h.netnsPath(pod),
      CNI_IFNAME: "eth0",
      CNI_ARGS: `IgnoreUnknown=1;K8S_POD_NAMESPACE=${this.h.podNamespace};K8S_POD_NAME=${this.h.podName(pod)};K8S_POD_INFRA_CONTAINER_ID=${this.h.containerId(pod)}`,
    };
  }

  /** The shim's stdin for `verb` on `pod`, from the host conflist (prevResult from the runtime's cache). */
  stdin(verb: ShimVerb, pod: string, opts: ShimCallOptions = {}): string {
    if (verb === "VERSION") return "";
    const loaded = this.hostConflist();
    const list = opts.cniVersion
      ? ({ ...loaded, cniVersion: opts.cniVersion } as NetworkConfigList)
      : loaded;
    let text: string;
    if (verb === "STATUS" || verb === "GC") text = buildStatusStdin(list, 0);
    else {
      // libcni hands the cached result on to CHECK and DEL from 0.4.0 on.
      const prev =
        verb !== "ADD" && !list.cniVersion.startsWith("0.3") ? this.results.get(pod) : undefined;
      text = buildPluginStdin(
        prev ? { list, pluginIndex: 0, prevResult: prev } : { list, pluginIndex: 0 },
      );
    }
    return opts.extra ? JSON.stringify({ ...JSON.parse(text), ...opts.extra }) : text;
  }

  /** Execs the shim (the installed one unless told) for `verb` on `pod`, and records the call. */
  async exec(verb: ShimVerb, pod: string, opts: ShimCallOptions = {}): Promise<ShimRun> {
    const startedAt = performance.now();
    const run = await execShim(
      opts.shim ?? this.installedShim,
      this.env(verb, pod),
      this.stdin(verb, pod, opts),
      opts.timeoutMs ?? 60_000,
    );
    this.calls.push({ verb, pod, startedAt, endedAt: performance.now(), run });
    if (run.status === 0 && verb === "ADD" && run.json) this.results.set(pod, run.json);
    if (run.status === 0 && verb === "DEL") this.results.delete(pod);
    return run;
  }
}

/** The first address of an ADD result, without its prefix length ("" when there is none). */
export function resultAddress(run: ShimRun): string {
  const ips = (run.json as { ips?: Array<{ address?: string }> } | undefined)?.ips;
  return (ips?.[0]?.address ?? "").split("/")[0] ?? "";
}
