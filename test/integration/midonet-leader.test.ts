/**
 * Leader election on a coordination.k8s.io Lease against the fake
 * kube-apiserver: one leader among candidates, takeover only after expiry (or
 * at once after a release), optimistic concurrency (a 409 ends leadership at
 * once), and a leader cut off from the API server stepping down before its
 * lease can expire for the others.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { CoordinationV1Api, KubeConfig, type V1Lease, V1MicroTime } from "@kubernetes/client-node";
import { expect } from "chai";
import { LeaderElector } from "../../src/midonet/controller/leader.js";
import { type FakeKubeApiServer, startFakeKubeApiServer } from "../support/fake-kube-apiserver.js";
import { until } from "../support/until.js";

const NS = "kube-system";
const NAME = "cni-driver-midonet-controller";

describe("midonet controller leader election (Lease)", function () {
  this.timeout(20_000);
  let kube: FakeKubeApiServer;
  let api: CoordinationV1Api;
  const electors: LeaderElector[] = [];
  let log: string[];

  beforeEach(async () => {
    kube = await startFakeKubeApiServer();
    const kc = new KubeConfig();
    kc.loadFromString(kube.kubeconfig());
    api = kc.makeApiClient(CoordinationV1Api);
    log = [];
  });

  afterEach(async () => {
    for (const e of electors.splice(0)) await e.stop();
    await kube.close();
  });

  function candidate(
    identity: string,
    timing: Partial<Record<"lease" | "renew" | "deadline", number>> = {},
  ) {
    const e = new LeaderElector({
      api,
      namespace: NS,
      name: NAME,
      identity,
      leaseDurationMs: timing.lease ?? 1000,
      renewPeriodMs: timing.renew ?? 100,
      renewDeadlineMs: timing.deadline ?? 600,
      onStartedLeading: () => log.push(`${identity} leads`),
      onStoppedLeading: (reason) => log.push(`${identity} stops: ${reason}`),
    });
    electors.push(e);
    return e;
  }

  const lease = () => kube.get("leases", NS, NAME) as V1Lease | undefined;

  it("of two candidates exactly one leads, and the Lease names it (duration in whole seconds)", async () => {
    const a = candidate("a");
    const b = candidate("b");
    a.start();
    b.start();
    await until(() => a.isLeader || b.isLeader, "a leader");
    await new Promise((r) => setTimeout(r, 400)); // several renew periods
    expect([a.isLeader, b.isLeader].filter(Boolean)).to.have.length(1);
    const leader = a.isLeader ? "a" : "b";
    expect(lease()?.spec).to.deep.include({ holderIdentity: leader, leaseDurationSeconds: 1 });
    expect(log).to.deep.equal([`${leader} leads`]);
    expect(b.holder ?? a.holder).to.equal(leader);
  });

  it("the leader renews (renewTime moves, same holder, no transition)", async () => {
    const a = candidate("a");
    a.start();
    await until(() => a.isLeader, "a to lead");
    const first = lease();
    await new Promise((r) => setTimeout(r, 300));
    const later = lease();
    expect(later?.spec?.holderIdentity).to.equal("a");
    expect(later?.spec?.leaseTransitions).to.equal(0);
    expect(later?.spec?.renewTime).to.not.equal(first?.spec?.renewTime);
    expect(later?.spec?.acquireTime).to.equal(first?.spec?.acquireTime);
  });

  it("stop() releases the Lease: another candidate takes over at once, not after the lease duration", async () => {
    // An hour's lease: b taking over within the test at all means a released it.
    const a = candidate("a", { lease: 3_600_000, renew: 100, deadline: 3000 });
    a.start();
    await until(() => a.isLeader, "a to lead");
    const b = candidate("b", { lease: 3_600_000, renew: 100, deadline: 3000 });
    b.start();
    await new Promise((r) => setTimeout(r, 200));
    expect(b.isLeader).to.equal(false);
    await a.stop();
    expect(log).to.include("a stops: stopping");
    await until(() => b.isLeader, "b to take over");
    expect(lease()?.spec).to.deep.include({ holderIdentity: "b", leaseTransitions: 1 });
  });

  it("a Lease held by a candidate that died is taken over only once it has not changed for its duration", async () => {
    await api.createNamespacedLease({
      namespace: NS,
      body: {
        metadata: { name: NAME, namespace: NS },
        spec: {
          holderIdentity: "dead",
          leaseDurationSeconds: 1,
          renewTime: new V1MicroTime(),
          acquireTime: new V1MicroTime(),
          leaseTransitions: 3,
        },
      },
    });
    const b = candidate("b");
    const started = Date.now();
    b.start();
    await until(() => b.isLeader, "b to take over");
    expect(Date.now() - started).to.be.at.least(900);
    expect(lease()?.spec).to.deep.include({ holderIdentity: "b", leaseTransitions: 4 });
  });

  it("a renewal refused with 409 (someone else wrote the Lease) ends leadership at once", async () => {
    // An hour's renew deadline: stepping down within the test at all is the 409's doing.
    const a = candidate("a", { lease: 7_200_000, renew: 100, deadline: 3_600_000 });
    a.start();
    await until(() => a.isLeader, "a to lead");
    kube.injectFault({
      method: "PUT",
      path: `/apis/coordination.k8s.io/v1/namespaces/${NS}/leases/${NAME}`,
      status: 409,
    });
    await until(() => !a.isLeader, "a to step down");
    expect(log.at(-1)).to.match(/^a stops: the lease was taken/);
  });

  it("refuses timings where the deadline is not shorter than the lease", () => {
    expect(
      () =>
        new LeaderElector({
          api,
          namespace: NS,
          name: NAME,
          identity: "x",
          leaseDurationMs: 1000,
          renewPeriodMs: 100,
          renewDeadlineMs: 1000,
          onStartedLeading: () => {},
          onStoppedLeading: () => {},
        }),
    ).to.throw(/shorter than the lease duration/);
  });
});

describe("midonet controller leader election through an API that withholds, fails or delays answers", function () {
  this.timeout(20_000);
  let kube: FakeKubeApiServer;
  let proxy: http.Server;
  /** "hold": requests are never answered; "fail": answered 500; a number: answers come that many ms late. */
  let mode: "pass" | "hold" | "fail" | number = "pass";
  const held: http.ServerResponse[] = [];
  const electors: LeaderElector[] = [];

  beforeEach(async () => {
    mode = "pass";
    kube = await startFakeKubeApiServer();
    const target = new URL(kube.url);
    proxy = http.createServer((req, res) => {
      if (mode === "hold") {
        held.push(res);
        return;
      }
      if (mode === "fail") {
        res.writeHead(500, { "content-type": "application/json" });
        res.end(
          JSON.stringify({
            kind: "Status",
            apiVersion: "v1",
            status: "Failure",
            message: "injected",
            reason: "InternalError",
            code: 500,
          }),
        );
        return;
      }
      const delay = typeof mode === "number" ? mode : 0;
      const up = http.request(
        {
          host: target.hostname,
          port: target.port,
          path: req.url,
          method: req.method,
          headers: req.headers,
        },
        (r) => {
          const chunks: Buffer[] = [];
          r.on("data", (c: Buffer) => chunks.push(c));
          r.on("end", () =>
            setTimeout(() => {
              res.writeHead(r.statusCode ?? 502, r.headers);
              res.end(Buffer.concat(chunks));
            }, delay),
          );
        },
      );
      req.pipe(up);
    });
    await new Promise<void>((r) => proxy.listen(0, "127.0.0.1", () => r()));
  });

  afterEach(async () => {
    mode = "pass";
    for (const r of held.splice(0)) r.destroy();
    for (const e of electors.splice(0)) await e.stop();
    proxy.closeAllConnections();
    await new Promise((r) => proxy.close(r));
    await kube.close();
  });

  function candidate(
    identity: string,
    through: "proxy" | "direct",
    timing: { lease: number; renew: number; deadline: number },
    log: string[],
  ): LeaderElector {
    const kc = new KubeConfig();
    const url = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
    kc.loadFromString(
      through === "proxy" ? kube.kubeconfig().replace(kube.url, url) : kube.kubeconfig(),
    );
    const e = new LeaderElector({
      api: kc.makeApiClient(CoordinationV1Api),
      namespace: NS,
      name: NAME,
      identity,
      leaseDurationMs: timing.lease,
      renewPeriodMs: timing.renew,
      renewDeadlineMs: timing.deadline,
      onStartedLeading: () => log.push(`${identity} leads`),
      onStoppedLeading: (reason) => log.push(`${identity} stops: ${reason}`),
    });
    electors.push(e);
    return e;
  }

  /** a leading through the proxy, then b a standby that reaches the API directly. */
  async function leaderAndStandby(
    timing: { lease: number; renew: number; deadline: number },
    log: string[],
  ): Promise<{ a: LeaderElector; b: LeaderElector }> {
    const a = candidate("a", "proxy", timing, log);
    a.start();
    await until(() => a.isLeader, "a to lead");
    const b = candidate("b", "direct", timing, log);
    b.start();
    return { a, b };
  }

  it("a leader whose Lease call never answers steps down by the deadline, and leads again once the API answers", async () => {
    const log: string[] = [];
    const a = candidate("a", "proxy", { lease: 1000, renew: 100, deadline: 600 }, log);
    a.start();
    await until(() => a.isLeader, "leadership");
    mode = "hold";
    await until(() => !a.isLeader, "stepping down", 3000);
    mode = "pass";
    await until(() => a.isLeader, "leading again", 5000);
    expect(log).to.deep.equal(["a leads", "a stops: no renewal for 600 ms", "a leads"]);
  });

  it("a leader whose renewals fail (500s) steps down by the renew deadline, before the lease expires for the others", async () => {
    // b reaches the API directly and takes over once the Lease has not changed
    // for its duration: the order of the two, not how long either took, is the point.
    const log: string[] = [];
    const { b } = await leaderAndStandby({ lease: 1000, renew: 100, deadline: 500 }, log);
    mode = "fail";
    await until(() => b.isLeader, "b to take over the expired lease");
    expect(log).to.have.length(3);
    expect(log[0]).to.equal("a leads");
    expect(log[1]).to.match(/^a stops: no renewal/);
    expect(log[2]).to.equal("b leads");
  });

  it("stop() returns while a Lease call hangs (SIGTERM must not wait for the API)", async () => {
    const a = candidate("a", "proxy", { lease: 1000, renew: 100, deadline: 600 }, []);
    a.start();
    await until(() => a.isLeader, "leadership");
    mode = "hold";
    await until(() => held.length > 0, "a Lease call held");
    // The held call has no deadline of its own: a stop() that waited for it would never return.
    await a.stop();
    expect(
      held.some((r) => !r.writableEnded),
      "the Lease call still unanswered when stop() returned",
    ).to.equal(true);
  });

  it("never two leaders when the leader's Lease answers come late (its writes land at once)", async () => {
    const leading = new Set<string>();
    const log: string[] = [];
    const { a, b } = await leaderAndStandby({ lease: 3000, renew: 200, deadline: 2000 }, log);
    mode = 2500; // later than lease - deadline: the renewal lands, its answer too late to count
    let overlapMs = 0;
    const t0 = Date.now();
    while (Date.now() - t0 < 6000) {
      leading.clear();
      if (a.isLeader) leading.add("a");
      if (b.isLeader) leading.add("b");
      if (leading.size > 1) overlapMs += 20;
      await new Promise((r) => setTimeout(r, 20));
    }
    expect(overlapMs, `ms with two leaders (${log.join("; ")})`).to.equal(0);
  });
});
