/**
 * A "node" for running the DaemonSet on this machine without touching its CNI
 * setup: a private mount namespace (held open by a sleeping process) where a
 * temporary root's directories are bound over the node paths the DaemonSet's
 * hostPath volumes name (/etc/cni/net.d, /opt/cni/bin, /var/lib/cni,
 * /var/lib/cni-driver, /run/cni-driver). Both sides run in it: the driver's
 * containers (podman with host network: same network namespace as the machine,
 * the node's mounts) and the runtime that execs the shim, so the shim finds the
 * driver's socket at /run/cni-driver/driver.sock as on a node. A path missing on
 * the host gets room through an overlay over its nearest ancestor, whose writes
 * land under the root too. /run/netns is made a shared mount there, so the pod
 * netns the runtime mounts reach the driver's container (HostToContainer).
 * Nothing of it is seen outside; it ends with its last process.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { bindOverScript, runtimeEnv, waitFor } from "./runtimes.js";

/** The node paths the DaemonSet mounts from the host and a test must not touch for real. */
export const NODE_DIRS = [
  "/etc/cni/net.d",
  "/opt/cni/bin",
  "/var/lib/cni",
  "/var/lib/cni-driver",
  "/run/cni-driver",
] as const;

export class NodeMountNamespace {
  private holder: ChildProcess | undefined;
  private log = "";

  /** `root`: the temporary root; node path P is `<root>/node/P`. */
  constructor(readonly root: string) {
    for (const d of NODE_DIRS) mkdirSync(this.path(d), { recursive: true });
  }

  /** Where node path `p` is on the machine (outside the namespace). */
  path(p: string): string {
    return join(this.root, "node", p);
  }

  get pid(): number {
    const pid = this.holder?.pid;
    if (!pid || this.holder?.exitCode !== null)
      throw new Error("the node namespace is not running");
    return pid;
  }

  /** The argv prefix that runs a command inside the namespace. */
  wrap(): string[] {
    return ["nsenter", "-t", String(this.pid), "-m", "--"];
  }

  async start(): Promise<void> {
    const scratch = join(this.root, "mnt");
    const script = [
      "set -e",
      ...NODE_DIRS.map((d, i) => bindOverScript(d, this.path(d), `${scratch}/${i}`)),
      "mkdir -p /run/netns",
      "mount --bind /run/netns /run/netns",
      "mount --make-shared /run/netns",
      "echo ready",
      "exec sleep infinity",
    ].join("\n");
    const child = spawn("unshare", ["--mount", "--propagation", "private", "sh", "-c", script], {
      env: runtimeEnv(),
      stdio: ["ignore", "pipe", "pipe"],
    });
    this.holder = child;
    let ready = false;
    child.stdout?.on("data", (b: Buffer) => {
      if (b.toString().includes("ready")) ready = true;
    });
    child.stderr?.on("data", (b: Buffer) => {
      this.log = (this.log + b.toString()).slice(-20_000);
    });
    await waitFor("the node mount namespace", () => {
      if (child.exitCode !== null)
        throw new Error(`the node namespace's setup exited ${child.exitCode}: ${this.log}`);
      return ready ? true : undefined;
    });
  }

  /** Ends the holder; the namespace and its mounts go with the last process in it. */
  async stop(): Promise<void> {
    const child = this.holder;
    this.holder = undefined;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
    child.kill("SIGKILL");
    await exited;
  }
}
