/**
 * The one list-watch (src/common/list-watch.ts) against the fake API server,
 * through client-node's list call and Watch: list then watch from the list's
 * resourceVersion, a relist after 410 (as an ERROR event and as an HTTP
 * status) that reports what changed meanwhile, restarts with backoff after
 * errors that resume from the last resourceVersion, a list that never answers
 * given up and retried, stop(), lists in pages (a 410 on a continue token
 * lists afresh), and a cache that keeps versions only.
 */
import { CoreV1Api, KubeConfig, type V1Node, Watch } from "@kubernetes/client-node";
import { expect } from "chai";
import { type ListPage, ListWatch, type ListWatchOptions } from "../../src/common/list-watch.js";
import {
  type FakeKubeApiServer,
  type FakeKubeApiServerOptions,
  type KubeObject,
  startFakeKubeApiServer,
} from "../support/fake-kube-apiserver.js";
import { until } from "../support/until.js";

const PREFIX = `lw-${process.pid}`;

describe("list-watch (src/common) against the fake API server", () => {
  let server: FakeKubeApiServer;
  let kc: KubeConfig;
  const running: ListWatch<V1Node>[] = [];

  async function serve(options: FakeKubeApiServerOptions = {}): Promise<void> {
    server = await startFakeKubeApiServer(options);
    kc = new KubeConfig();
    kc.loadFromString(server.kubeconfig());
  }

  function node(name: string, label = "a"): KubeObject {
    return { metadata: { name: `${PREFIX}-${name}`, labels: { v: label } } };
  }

  /** A list-watch on Nodes logging each event as "add x", "update x", "delete x". */
  /** The nodes, one page of them with `page` (client-node spells `continue` with an underscore). */
  async function listNodes(page?: ListPage) {
    const list = await kc
      .makeApiClient(CoreV1Api)
      .listNode(page ? { limit: page.limit, _continue: page.continue } : {});
    const { resourceVersion, _continue } = list.metadata ?? {};
    return { items: list.items, metadata: { resourceVersion, continue: _continue } };
  }

  function follow(
    tuning: Pick<ListWatchOptions<V1Node>, "startTimeoutMs" | "transform" | "pageSize" | "keep"> & {
      list?: (page?: ListPage) => Promise<{ items: V1Node[] }>;
      /** Also logged: the object update and delete hand over, as JSON. */
      verbose?: boolean;
    } = {},
  ) {
    const log: string[] = [];
    const errors: { status: unknown; retryInMs: number; message: string }[] = [];
    let syncs = 0;
    const short = (n: V1Node) => (n.metadata?.name ?? "").slice(PREFIX.length + 1);
    const json = (n: V1Node) => (tuning.verbose ? ` ${JSON.stringify(n)}` : "");
    const { list, verbose: _, ...options } = tuning;
    const lw = new ListWatch<V1Node>({
      path: "/api/v1/nodes",
      list: list ?? listNodes,
      watch: new Watch(kc),
      ...options,
      backoff: { baseMs: 20, maxMs: 1000 },
      random: () => 0.5, // no jitter: the delays are the policy's own
      handlers: {
        add: (n) => log.push(`add ${short(n)}`),
        update: (n, old) => log.push(`update ${short(n)}${json(old)}`),
        delete: (n) => log.push(`delete ${short(n)}${json(n)}`),
        synced: () => syncs++,
        error: (err, retryInMs) =>
          errors.push({
            status: (err as { statusCode?: number }).statusCode,
            retryInMs,
            message: (err as Error).message,
          }),
      },
    });
    running.push(lw);
    lw.start();
    return { lw, log, errors, syncs: () => syncs };
  }

  const lists = () => server.requests.filter((r) => r.path === "/api/v1/nodes" && !r.watch);
  const watches = () => server.requests.filter((r) => r.path === "/api/v1/nodes" && r.watch);

  afterEach(async () => {
    for (const lw of running.splice(0)) await lw.stop();
    await server?.close();
  });

  it("keeps only what transform leaves of each object, listed and watched, and hands that over", async () => {
    await serve();
    server.put("nodes", { ...node("a"), spec: { podCIDR: "10.244.1.0/24" } });
    const seen: V1Node[] = [];
    const { lw } = follow({
      transform: (n) => {
        seen.push(n);
        return {
          metadata: { name: n.metadata?.name, resourceVersion: n.metadata?.resourceVersion },
        };
      },
    });
    await lw.whenSynced();
    server.put("nodes", { ...node("b"), spec: { podCIDR: "10.244.2.0/24" } });
    await until(() => lw.get(`${PREFIX}-b`), "b watched");
    for (const name of ["a", "b"]) {
      const kept = lw.get(`${PREFIX}-${name}`) as V1Node;
      expect(kept.spec, `${name}: spec dropped`).to.equal(undefined);
      expect(kept.metadata?.resourceVersion).to.be.a("string");
    }
    expect(seen.map((n) => n.spec?.podCIDR)).to.deep.equal(["10.244.1.0/24", "10.244.2.0/24"]);
  });

  it("lists, then watches from the list's resourceVersion: adds, updates and deletes follow", async () => {
    await serve();
    server.put("nodes", node("a"));
    const { lw, log } = follow();
    await lw.whenSynced();
    expect(log).to.deep.equal(["add a"]);
    const listed = server.resourceVersion();
    await until(() => watches().length === 1, "the watch");
    expect(new URLSearchParams(watches()[0]!.query).get("resourceVersion")).to.equal(listed);
    server.put("nodes", node("b"));
    server.put("nodes", node("a", "changed"));
    server.remove("nodes", undefined, `${PREFIX}-b`);
    await until(() => log.length === 4, "three events");
    expect(log).to.deep.equal(["add a", "add b", "update a", "delete b"]);
    expect(lw.list().map((n) => n.metadata?.labels?.v)).to.deep.equal(["changed"]);
    expect(lw.get(`${PREFIX}-a`)?.metadata?.labels?.v).to.equal("changed");
    expect(lists()).to.have.length(1);
  });

  for (const expiredWatchAs of ["event", "status"] as const) {
    it(`relists after 410 Expired (${expiredWatchAs === "event" ? "an ERROR event" : "an HTTP 410"}), reporting what changed while it was away`, async () => {
      await serve({ expiredWatchAs });
      server.put("nodes", node("a"));
      server.put("nodes", node("b"));
      const { lw, log, errors } = follow();
      await lw.whenSynced();
      server.put("nodes", node("b", "seen"));
      await until(() => log.includes("update b"), "the update through the watch");
      // The watch ends; before it is back, a is deleted, c created and the history compacted.
      server.endWatches();
      server.remove("nodes", undefined, `${PREFIX}-a`);
      server.put("nodes", node("c"));
      server.compact();
      await until(() => log.includes("add c"), "the relist");
      expect(log).to.deep.equal(["add a", "add b", "update b", "delete a", "add c"]);
      expect(lists()).to.have.length(2);
      expect(errors, "a 410 is no failure").to.deep.equal([]);
      expect(lw.list().map((n) => n.metadata?.name)).to.have.members([
        `${PREFIX}-b`,
        `${PREFIX}-c`,
      ]);
      server.put("nodes", node("d"));
      await until(() => log.includes("add d"), "events after the relist");
    });
  }

  it("restarts after errors with backoff (20, then 40 ms), resuming from the last resourceVersion without a list", async () => {
    await serve();
    const { lw, log, errors, syncs } = follow();
    await lw.whenSynced();
    server.put("nodes", node("a"));
    await until(() => log.includes("add a"), "the first event");
    const seen = server.resourceVersion();
    server.injectFault({ path: "/api/v1/nodes", watch: true, status: 500, times: 2 });
    server.endWatches();
    server.put("nodes", node("b")); // made while no watch is open
    await until(() => log.includes("add b"), "the event missed during the outage");
    expect(errors.map(({ status, retryInMs }) => ({ status, retryInMs }))).to.deep.equal([
      { status: 500, retryInMs: 20 },
      { status: 500, retryInMs: 40 },
    ]);
    expect(lists(), "resumed by watch, not relisted").to.have.length(1);
    const resumed = watches()
      .filter((w) => w.status === 200)
      .at(-1)!;
    expect(new URLSearchParams(resumed.query).get("resourceVersion")).to.equal(seen);
    expect(lw.synced).to.equal(true);
    expect(syncs()).to.be.at.least(2);
  });

  it("a list that fails is retried with backoff; nothing is synced until one succeeds", async () => {
    await serve();
    server.put("nodes", node("a"));
    server.injectFault({ path: "/api/v1/nodes", watch: false, status: 503, times: 2 });
    const { lw, log, errors } = follow();
    await until(() => errors.length === 2, "two failed lists");
    expect(errors.map((e) => e.retryInMs)).to.deep.equal([20, 40]);
    await lw.whenSynced();
    expect(lw.hasSynced).to.equal(true);
    expect(log).to.deep.equal(["add a"]);
  });

  it("a list that never answers is given up after startTimeoutMs and retried", async () => {
    await serve();
    server.put("nodes", node("a"));
    let calls = 0;
    const { lw, log, errors } = follow({
      startTimeoutMs: 100,
      list: () => (++calls === 1 ? new Promise<never>(() => {}) : listNodes()),
    });
    await lw.whenSynced();
    expect(calls).to.equal(2);
    expect(errors.map(({ status, retryInMs }) => ({ status, retryInMs }))).to.deep.equal([
      { status: undefined, retryInMs: 20 },
    ]);
    expect(log).to.deep.equal(["add a"]);
  });

  it("stop() closes the watch and reports nothing after", async () => {
    await serve();
    const { lw, log } = follow();
    await lw.whenSynced();
    await until(() => server.openWatches().length === 1, "the open watch");
    await lw.stop();
    await until(() => server.openWatches().length === 0, "the watch closed");
    server.put("nodes", node("late"));
    server.endWatches();
    await new Promise((r) => setTimeout(r, 100));
    expect(log).to.deep.equal([]);
    expect(watches()).to.have.length(1);
    expect(lw.synced).to.equal(false);
  });
  const listQueries = () =>
    lists().map((r) => {
      const q = new URLSearchParams(r.query);
      return `${r.status} limit=${q.get("limit")}${q.has("continue") ? " continue" : ""}`;
    });

  it("lists in pages of pageSize, transforming each page as it arrives, then watches from the first page's resourceVersion", async () => {
    await serve();
    for (const n of ["a", "b", "c", "d", "e"]) server.put("nodes", node(n));
    const listed = server.resourceVersion();
    const transformed: string[] = [];
    const { lw, log } = follow({
      pageSize: 2,
      transform: (n) => {
        transformed.push(`${n.metadata?.name?.slice(-1)} in list ${lists().length}`);
        return n;
      },
    });
    await lw.whenSynced();
    expect(listQueries()).to.deep.equal([
      "200 limit=2",
      "200 limit=2 continue",
      "200 limit=2 continue",
    ]);
    expect(transformed, "each page before the next is asked for").to.deep.equal([
      "a in list 1",
      "b in list 1",
      "c in list 2",
      "d in list 2",
      "e in list 3",
    ]);
    expect(log).to.deep.equal(["add a", "add b", "add c", "add d", "add e"]);
    await until(() => watches().length === 1, "the watch");
    expect(new URLSearchParams(watches()[0]!.query).get("resourceVersion")).to.equal(listed);
    server.put("nodes", node("f"));
    await until(() => log.includes("add f"), "a watched event");
  });

  it("a 410 on a continue token (the list began before a compaction) lists afresh from the first page", async () => {
    await serve();
    for (const n of ["a", "b", "c", "d", "e"]) server.put("nodes", node(n));
    let pages = 0;
    const { lw, log, errors } = follow({
      pageSize: 2,
      list: async (page) => {
        const answer = await listNodes(page);
        if (++pages === 1) {
          // Between the first page and the second: a new node, then a compaction.
          server.put("nodes", node("f"));
          server.compact();
        }
        return answer;
      },
    });
    await lw.whenSynced();
    expect(listQueries()).to.deep.equal([
      "200 limit=2",
      "410 limit=2 continue",
      "200 limit=2",
      "200 limit=2 continue",
      "200 limit=2 continue",
    ]);
    expect(errors, "an expired continue token is no failure").to.deep.equal([]);
    expect(log, "the first attempt's page is not handed over").to.deep.equal([
      "add a",
      "add b",
      "add c",
      "add d",
      "add e",
      "add f",
    ]);
  });

  it("a continue token that expires three times in a row fails the list; it is retried with backoff", async () => {
    await serve();
    for (const n of ["a", "b", "c"]) server.put("nodes", node(n));
    let pages = 0;
    const { lw, log, errors } = follow({
      pageSize: 2,
      list: async (page) => {
        const answer = await listNodes(page);
        if (!page?.continue && ++pages <= 3) {
          server.put("nodes", node(`x${pages}`));
          server.compact();
        }
        return answer;
      },
    });
    await lw.whenSynced();
    expect(errors).to.have.length(1);
    expect(errors[0]!.message).to.match(/expired 3 times/);
    expect(errors[0]!.retryInMs).to.equal(20);
    expect(listQueries().filter((q) => q.startsWith("410"))).to.have.length(3);
    expect(log).to.deep.equal(["add a", "add b", "add c", "add x1", "add x2", "add x3"]);
  });

  it("a paged list is not given up after startTimeoutMs while its pages keep coming", async () => {
    await serve();
    for (const n of ["a", "b", "c", "d"]) server.put("nodes", node(n));
    const { lw, log, errors } = follow({
      pageSize: 1,
      startTimeoutMs: 150,
      list: async (page) => {
        await new Promise((r) => setTimeout(r, 60));
        return listNodes(page);
      },
    });
    await lw.whenSynced();
    expect(lists()).to.have.length(4);
    expect(errors).to.deep.equal([]);
    expect(log).to.deep.equal(["add a", "add b", "add c", "add d"]);
  });

  it("keep \"versions\": the cache holds keys and resourceVersions; update's old and a relist's delete get stubs of them", async () => {
    await serve();
    server.put("nodes", node("a"));
    server.put("nodes", node("b"));
    const { lw, log } = follow({ keep: "versions", verbose: true });
    await lw.whenSynced();
    const stub = (name: string) => {
      const rv = server.get("nodes", undefined, `${PREFIX}-${name}`)?.metadata?.resourceVersion;
      return { metadata: { name: `${PREFIX}-${name}`, resourceVersion: rv } };
    };
    expect(lw.get(`${PREFIX}-a`)).to.deep.equal(stub("a"));
    expect(lw.list()).to.deep.equal([stub("a"), stub("b")]);
    const oldA = stub("a");
    server.put("nodes", node("a", "changed"));
    await until(() => log.length === 3, "the update");
    expect(log[2]).to.equal(`update a ${JSON.stringify(oldA)}`);
    const oldB = stub("b");
    // b goes while no watch is open: the relist's delete hands over the stub.
    server.endWatches();
    server.remove("nodes", undefined, `${PREFIX}-b`);
    server.compact();
    await until(() => log.length === 4, "the relist");
    expect(log[3]).to.equal(`delete b ${JSON.stringify(oldB)}`);
    // A watched deletion hands over what the server sent.
    server.remove("nodes", undefined, `${PREFIX}-a`);
    await until(() => log.length === 5, "the watched delete");
    expect(JSON.parse(log[4]!.slice("delete a ".length)).metadata.labels).to.deep.equal({
      v: "changed",
    });
    expect(lw.list()).to.deep.equal([]);
  });
});
