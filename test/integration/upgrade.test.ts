/**
 * Upgrade and rollback with pods churning, as a DaemonSet's rolling update
 * does them on one node: the previous release (CHANGELOG.md's, built from its
 * commit: test/support/previous-release.ts) serves; pods are set up; its driver
 * gets SIGTERM and exits, the current release's init container (`install-cni`)
 * puts its shim into the bin dir, and its driver starts on the same socket,
 * state, cache, lease directory and ConfigMap; later the same back (rollback).
 *
 * Throughout, a steady stream of pod ADDs and DELs goes through the installed
 * shim, exec'd as a runtime execs it (test/support/shim-runtime.ts), with real
 * network namespaces and host-local's lease files. What a runtime must see: no
 * ADD fails (the shim waits through the switch), no DEL is lost (queued while
 * no driver serves, replayed by the next), every pod set up before keeps its
 * address and connectivity, the host conflist is there at every moment, and at
 * the end no lease, veth, cache entry or deletion record is left. The longest
 * single shim exec during each switch is printed: what a runtime waits at most.
 */
import { existsSync } from "node:fs";
import { performance } from "node:perf_hooks";
import { expect } from "chai";
import {
  DriverHarness,
  forEachHostLocalMode,
  REPO_ROOT,
  sleep,
} from "../support/driver-harness.js";
import {
  createNetns,
  deleteNetns,
  linkIn,
  listHostLinks,
  listNetns,
  pingFrom,
} from "../support/netns.js";
import { previousRelease, type ReleaseBuild } from "../support/previous-release.js";
import {
  requireGitHistory,
  requireReferencePlugins,
  requireRoot,
} from "../support/requirements.js";
import { ensureShimBuilt } from "../support/runtimes.js";
import { resultAddress, type ShimCall, ShimRuntime } from "../support/shim-runtime.js";
import { until } from "../support/until.js";

/** Runtimes adding and deleting pods at once, all the time. */
const CHURN_WORKERS = 4;
/** How long the stream runs with one driver serving, before and after each switch. */
const SETTLE_MS = 2_500;

/** The pods each phase sets up and keeps, by the release that set them up. */
const KEPT = { old: ["kept-old-1", "kept-old-2", "kept-old-3"], new: ["kept-new-1", "kept-new-2"] };
/** Pods deleted by the runtime while no driver serves, at each switch. */
const LEAVING = 2;

/** A pod ADD or DEL that did not succeed, with what the shim said. */
interface Failure {
  verb: string;
  pod: string;
  status: number | null;
  output: string;
}

/**
 * Runtimes that keep making pods and taking them down through the installed
 * shim until stopped: each worker ADDs a fresh pod, then DELs it and removes its
 * netns, as kubelet does with a short-lived pod.
 */
class Churn {
  readonly failures: Failure[] = [];
  readonly pods: string[] = [];
  private stopping = false;
  private readonly workers: Promise<void>[] = [];
  private next = 0;

  constructor(
    private readonly h: DriverHarness,
    private readonly rt: ShimRuntime,
  ) {}

  start(): void {
    for (let w = 0; w < CHURN_WORKERS; w++) this.workers.push(this.work(w));
  }

  async stop(): Promise<void> {
    this.stopping = true;
    await Promise.all(this.workers);
  }

  private async work(w: number): Promise<void> {
    while (!this.stopping) {
      const pod = `churn-${w}-${this.next++}`;
      this.pods.push(pod);
      createNetns(this.h.netnsName(pod));
      try {
        await this.call("ADD", pod);
        await sleep(20 + w * 10);
        await this.call("DEL", pod);
      } finally {
        deleteNetns(this.h.netnsName(pod));
      }
    }
  }

  private async call(verb: "ADD" | "DEL", pod: string): Promise<void> {
    try {
      const r = await this.rt.exec(verb, pod);
      const ok = r.status === 0 && (verb === "DEL" ? r.stdout === "" : resultAddress(r) !== "");
      if (!ok) this.failures.push({ verb, pod, status: r.status, output: r.stdout + r.stderr });
    } catch (err) {
      this.failures.push({ verb, pod, status: null, output: String(err) });
    }
  }
}

/** Watches that the host conflist is there at every moment (the shim's DEL path needs it). */
class ConflistWatch {
  missingAt: number[] = [];
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly path: string) {}

  start(): void {
    this.timer = setInterval(() => {
      if (!existsSync(this.path)) this.missingAt.push(performance.now());
    }, 2);
  }

  stop(): void {
    clearInterval(this.timer);
  }
}

/** The longest single shim exec that overlapped [from, to], with its verb. */
function longestExecDuring(calls: readonly ShimCall[], from: number, to: number): ShimCall {
  const during = calls.filter((c) => c.startedAt <= to && c.endedAt >= from);
  const longest = during.reduce<ShimCall | undefined>(
    (a, c) => (!a || c.endedAt - c.startedAt > a.endedAt - a.startedAt ? c : a),
    undefined,
  );
  if (!longest) throw new Error("no shim exec overlapped the switch: the stream stalled");
  return longest;
}

forEachHostLocalMode({ "in-process": 141, exec: 142 }, ({ hostLocal, flags, octet }) => {
  describe(`upgrade and rollback with pods churning, host-local ${hostLocal} (integration)`, function () {
    this.timeout(120_000);
    let release: ReleaseBuild;
    let currentShim = "";
    let h: DriverHarness;
    let rt: ShimRuntime;
    let churn: Churn | undefined;
    let conflist: ConflistWatch | undefined;
    /** Each kept pod's address, as its ADD answered. */
    const kept = new Map<string, string>();

    before(async function () {
      requireRoot(this);
      requireReferencePlugins(this, "host-local");
      requireGitHistory(this, REPO_ROOT);
      // The first run builds the previous release (npm ci, addons, shim, dist): minutes.
      this.timeout(20 * 60_000);
      release = await previousRelease();
      currentShim = ensureShimBuilt();
      h = new DriverHarness({ subnetOctet: octet, driverRoot: release.root });
      rt = new ShimRuntime(h);
      h.opts.extraFlags = [...flags, ...rt.driverFlags];
    });

    after(async () => {
      await churn?.stop();
      conflist?.stop();
      await h?.cleanup();
    });

    /** Every kept pod still has its address on eth0, answers CHECK, and reaches the next one. */
    async function expectKeptPodsWhole(when: string): Promise<void> {
      const pods = [...kept.keys()];
      for (const [k, pod] of pods.entries()) {
        expect(linkIn(h.netnsName(pod), "eth0")?.ipv4, `${pod}'s eth0 ${when}`).to.deep.equal([
          `${kept.get(pod)}/24`,
        ]);
        const next = pods[(k + 1) % pods.length] as string;
        expect(
          pingFrom(h.netnsName(pod), kept.get(next) as string),
          `${pod} -> ${next} ${when}`,
        ).to.equal(true);
        const check = await rt.exec("CHECK", pod);
        expect(check.status, `CHECK of ${pod} ${when}: ${check.stdout}`).to.equal(0);
      }
    }

    async function setUpKept(pods: readonly string[]): Promise<void> {
      for (const pod of pods) {
        createNetns(h.netnsName(pod));
        const add = await rt.exec("ADD", pod);
        expect(add.status, `ADD of ${pod}: ${add.stdout}`).to.equal(0);
        kept.set(pod, resultAddress(add));
      }
    }

    /**
     * The rolling update of one node: SIGTERM to the serving driver and its exit,
     * the next release's install-cni, its driver started; the stream runs on.
     * Prints the longest exec a runtime saw meanwhile.
     */
    async function rollTo(to: { name: string; shim: string; driverRoot?: string }): Promise<void> {
      // Pods the runtime deletes while no driver serves: their DELs go through the
      // outgoing release's shim into the queue, and the incoming driver replays them.
      const leaving = Array.from({ length: LEAVING }, (_, i) => `${to.name}-leaving-${i}`);
      for (const pod of leaving) {
        createNetns(h.netnsName(pod));
        const add = await rt.exec("ADD", pod);
        expect(add.status, `ADD of ${pod}: ${add.stdout}`).to.equal(0);
      }
      await sleep(SETTLE_MS);

      const from = performance.now();
      expect(await h.stop(), "the outgoing driver's exit code").to.equal(0);
      const stopped = performance.now();
      // A runtime's STATUS meanwhile: network not ready, at once (it does not wait).
      const status = await rt.exec("STATUS", "");
      expect(status.status, status.stdout).to.equal(1);
      expect(status.json?.code, status.stdout).to.equal(50);
      for (const pod of leaving) {
        const del = await rt.exec("DEL", pod);
        expect(del.status, `DEL of ${pod} with no driver: ${del.stdout}`).to.equal(0);
        deleteNetns(h.netnsName(pod));
      }
      expect(
        h.queuedDeletions().filter((f) => leaving.some((p) => f.includes(h.containerId(p)))),
        "the DELs queued while no driver serves",
      ).to.have.length(LEAVING);
      const installing = performance.now();
      rt.install(to.shim, to.driverRoot);
      h.opts.driverRoot = to.driverRoot;
      const starting = performance.now();
      await h.start();
      const ready = performance.now();

      // Replayed at start, before the driver said it was ready.
      for (const pod of leaving) {
        expect(
          h.queuedDeletions().filter((f) => f.includes(h.containerId(pod))),
          pod,
        ).to.deep.equal([]);
        expect(h.leaseHolders(), `${pod}'s lease after the replay`).not.to.include(
          h.containerId(pod),
        );
        expect(
          h.cacheFiles().filter((f) => f.includes(h.containerId(pod))),
          pod,
        ).to.deep.equal([]);
        expect(listHostLinks(h.hostVeth(pod)), `${pod}'s host veth`).to.deep.equal([]);
      }
      await sleep(SETTLE_MS);
      const longest = longestExecDuring(rt.calls, from, ready);
      const ms = (a: number, b: number) => Math.round(b - a);
      console.log(
        `      ${to.name}: no driver ready for ${ms(from, ready)} ms (SIGTERM to exit ${ms(from, stopped)} ms, install-cni ${ms(installing, starting)} ms, start to ready ${ms(starting, ready)} ms); the longest shim exec meanwhile: ${ms(longest.startedAt, longest.endedAt)} ms (${longest.verb}, exit ${longest.run.status})`,
      );
      expect(churn?.failures, "failed ADDs and DELs").to.deep.equal([]);
    }

    it(`the previous release serves: its shim installed, ${KEPT.old.length} pods set up through it`, async () => {
      rt.install(release.shim, release.root);
      await h.writeDefaultConfig();
      await h.start();
      await until(() => existsSync(rt.conflistPath), "the host conflist");
      conflist = new ConflistWatch(rt.conflistPath);
      conflist.start();
      await setUpKept(KEPT.old);
      await expectKeptPodsWhole("under the previous release");
      churn = new Churn(h, rt);
      churn.start();
    });

    it("upgrade: the current release takes over; no ADD fails, the pods keep their network", async () => {
      await rollTo({ name: "upgrade", shim: currentShim });
      await expectKeptPodsWhole("after the upgrade");
      await setUpKept(KEPT.new);
      await expectKeptPodsWhole("with pods of both releases");
    });

    it("rollback: the previous release takes over again; no ADD fails, the pods keep their network", async () => {
      await rollTo({ name: "rollback", shim: release.shim, driverRoot: release.root });
      await expectKeptPodsWhole("after the rollback");
    });

    it("no DEL is lost: once the pods are gone, no lease, veth, cache entry or deletion record is left", async () => {
      await churn?.stop();
      expect(churn?.failures, "failed ADDs and DELs").to.deep.equal([]);
      for (const pod of kept.keys()) {
        const del = await rt.exec("DEL", pod);
        expect(del.status, `DEL of ${pod}: ${del.stdout}`).to.equal(0);
        deleteNetns(h.netnsName(pod));
      }
      conflist?.stop();
      expect(conflist?.missingAt, "moments the host conflist was missing").to.deep.equal([]);
      // A DEL queued while the next driver was starting is replayed at its next rescan.
      await until(() => h.queuedDeletions().length === 0, "the deletion queue to drain", 20_000);
      const pods = [...(churn?.pods ?? []), ...kept.keys()];
      for (const name of ["upgrade", "rollback"])
        for (let i = 0; i < LEAVING; i++) pods.push(`${name}-leaving-${i}`);
      expect(h.leases(), "host-local leases").to.deep.equal([]);
      expect(h.cacheFiles(), "the driver's result cache").to.deep.equal([]);
      expect(h.bridgePorts(), "host veths on the bridge").to.deep.equal([]);
      expect(
        pods.flatMap((p) => listHostLinks(h.hostVeth(p))),
        "host veths of the test's pods",
      ).to.deep.equal([]);
      expect((await h.client.cniStatus()).attachments, "the driver's attachments").to.equal(0);
      expect(listNetns(h.netnsPrefix)).to.deep.equal([]);
      expect(churn?.pods.length, "pods the stream went through").to.be.above(CHURN_WORKERS * 3);
      const adds = rt.calls
        .filter((c) => c.verb === "ADD")
        .map((c) => c.endedAt - c.startedAt)
        .sort((a, b) => a - b);
      console.log(
        `      ${churn?.pods.length} pods came and went meanwhile; ${rt.calls.length} shim execs; ADD p50 ${Math.round(adds[Math.floor(adds.length / 2)] ?? 0)} ms`,
      );
    });
  });
});
