/**
 * containerd's `ctr run --cni` execs the shim: the container gets its address from
 * the driver, and its removal releases it. containerd runs by hand under a
 * temporary root in a private mount namespace where the test's conf and bin dirs
 * are /etc/cni/net.d and /opt/cni/bin (test/support/runtimes.ts).
 *
 * containerd 1.6's ctr tears the network down only in a foreground `ctr run`, after
 * the task exits (a detached container's `ctr tasks kill` / `ctr containers rm` never
 * call CNI DEL), so the test keeps `ctr run --cni --rm` in the foreground and ends
 * the container with `ctr tasks kill -s SIGKILL` (busybox `sleep` as PID 1 ignores
 * SIGTERM).
 */
import type { ChildProcess } from "node:child_process";
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { expect } from "chai";
import { DriverHarness } from "../support/driver-harness.js";
import { requireCommand, requireRoot } from "../support/requirements.js";
import {
  Containerd,
  ensureShimBuilt,
  SHIM_TYPE,
  shimPlugin,
  waitFor,
} from "../support/runtimes.js";

const SUBNET_OCTET = 61;

function listDir(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

describe("e2e: containerd (ctr run --cni) execs the shim", function () {
  this.timeout(60_000);
  let h: DriverHarness | undefined;
  let ctrd: Containerd | undefined;
  /** The foreground `ctr run` and what it printed. */
  let run: { child: ChildProcess; output: string; exit: Promise<number | null> } | undefined;
  let id = "";
  let ip = "";

  before(async function () {
    this.timeout(240_000);
    requireRoot(this);
    requireCommand(this, "containerd", "containerd");
    requireCommand(this, "ctr", "containerd");
    requireCommand(this, "runc", "runc");
    requireCommand(this, "busybox", "busybox-static");
    requireCommand(this, "unshare", "util-linux");
    requireCommand(this, "nsenter", "util-linux");
    const shim = ensureShimBuilt();
    h = new DriverHarness({ subnetOctet: SUBNET_OCTET });
    await h.writeDefaultConfig();
    await h.start();
    ctrd = new Containerd();
    ctrd.installPlugin(SHIM_TYPE, shim);
    // The shim's deletion queue is the driver's state dir, as on a node; its log
    // stays under containerd's root for a failed run to be read.
    ctrd.writeNetwork(`cdt-${ctrd.tag}`, [
      shimPlugin(h.socket, {
        stateDir: h.stateDir,
        logFile: join(ctrd.root, "shim.log"),
        timeoutSeconds: 15,
      }),
    ]);
    await ctrd.start();
    ctrd.importBusybox();
  });

  after(async () => {
    await ctrd?.cleanup();
    if (run && run.child.exitCode === null && run.child.signalCode === null) {
      run.child.kill("SIGKILL");
    }
    await h?.cleanup();
  });

  it("gives the container its address from the driver", async () => {
    const c = ctrd as Containerd;
    const harness = h as DriverHarness;
    id = `cdt${c.tag}c1`;
    const child = c.spawnCtr(c.runArgs(id, ["sleep", "120"]));
    const started = {
      child,
      output: "",
      exit: new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code))),
    };
    run = started;
    child.stdout?.on("data", (b: Buffer) => {
      started.output += b.toString();
    });
    child.stderr?.on("data", (b: Buffer) => {
      started.output += b.toString();
    });

    // ctr sets the network up between creating the task and starting it.
    await waitFor(
      "the container to run with a lease",
      () => {
        if (child.exitCode !== null) {
          throw new Error(`ctr run exited ${child.exitCode}: ${started.output}`);
        }
        return harness.leases().length === 1 && c.tasks().get(id) === "RUNNING" ? true : undefined;
      },
      30_000,
    );
    ip = harness.leases()[0] as string;
    expect(ip).to.match(new RegExp(`^10\\.244\\.${SUBNET_OCTET}\\.\\d+$`));

    const r = c.exec(id, ["ip", "-4", "-o", "addr", "show", "dev", "eth0"]);
    expect(r.status, r.stderr).to.equal(0);
    expect(r.stdout).to.include(`inet ${ip}/24`);
    // The driver ran the chain for ctr's container id (`<namespace>-<id>`); its
    // built-in plugin put the host veth on the harness bridge; libcni's cache of
    // the shim's result landed in the private /var/lib/cni.
    expect(harness.cacheFiles().some((f) => f.includes(`${c.namespace}-${id}`))).to.equal(true);
    expect(harness.bridgePorts()).to.have.length(1);
    expect(listDir(join(c.cniCacheDir, "results")).some((f) => f.includes(id))).to.equal(true);
  });

  it("releases it when the container is removed: no lease, no veth, no cached result", async () => {
    const c = ctrd as Containerd;
    const harness = h as DriverHarness;
    expect(run, "the foreground ctr run of the first test").to.not.equal(undefined);
    const started = run as NonNullable<typeof run>;
    expect(started.child.exitCode, started.output).to.equal(null);

    c.must(["tasks", "kill", "-s", "SIGKILL", id]);
    let timer: NodeJS.Timeout | undefined;
    const code = await Promise.race([
      started.exit,
      new Promise<string>((resolve) => {
        timer = setTimeout(() => resolve("still running after 30 s"), 30_000);
      }),
    ]);
    clearTimeout(timer);
    // ctr exits with the task's status: 128 + SIGKILL.
    expect(code, started.output).to.equal(137);

    expect(c.containers()).to.not.include(id);
    expect(harness.leases()).to.deep.equal([]);
    // ctr's DEL carries no netns (the task is gone): the veth pair dies with the
    // netns, which the kernel reaps asynchronously, so the bridge empties soon after.
    await waitFor(
      "no ports on the harness bridge",
      () => (harness.bridgePorts().length === 0 ? true : undefined),
      10_000,
    );
    expect(harness.cacheFiles().some((f) => f.includes(id))).to.equal(false);
    expect(listDir(join(c.cniCacheDir, "results")).some((f) => f.includes(id))).to.equal(false);
  });
});
