/**
 * KubeApi.watchEach (src/driver/kube/api.ts) against the fake API server: the
 * collections followed cluster-wide are listed in pages of 500 as plain JSON
 * (not client-node's typed objects), transformed page by page, listed afresh
 * after a 410 on a continue token, and their cache keeps versions only: a
 * relist's remove gets the key and resourceVersion of what went.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect } from "chai";
import pino from "pino";
import {
  connectKubeApi,
  type KubeApi,
  type KubeObjectView,
  LIST_PAGE_SIZE,
  type ObjectWatch,
} from "../../src/driver/kube/api.js";
import { type FakeKubeApiServer, startFakeKubeApiServer } from "../support/fake-kube-apiserver.js";
import { until } from "../support/until.js";

describe("KubeApi.watchEach against the fake API server", () => {
  let server: FakeKubeApiServer;
  let api: KubeApi;
  let dir: string;
  const watches: ObjectWatch[] = [];

  beforeEach(async () => {
    server = await startFakeKubeApiServer();
    dir = mkdtempSync(join(tmpdir(), "watch-each-"));
    const path = join(dir, "kubeconfig");
    server.kubeconfig(path);
    api = await connectKubeApi(
      { kind: "kubeconfig", path },
      { logger: pino({ level: "silent" }), watchBackoff: { baseMs: 20, maxMs: 200 } },
    );
  });

  afterEach(async () => {
    for (const w of watches.splice(0)) await w.stop();
    await api.close();
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  });

  function putPods(n: number): void {
    for (let i = 0; i < n; i++)
      server.put("pods", {
        metadata: {
          namespace: "default",
          name: `p${String(i).padStart(5, "0")}`,
          labels: { i: `${i}` },
        },
        spec: { containers: [{ name: "c", image: "i" }] },
      });
  }

  /** Follows pods; logs what each handler got. */
  function followPods(transform?: (o: KubeObjectView) => KubeObjectView) {
    const upserts: KubeObjectView[] = [];
    const removes: KubeObjectView[] = [];
    const errors: string[] = [];
    let synced = 0;
    const w = api.watchEach(
      "pods",
      {
        upsert: (o) => upserts.push(o),
        remove: (o) => removes.push(o),
        onSynced: () => synced++,
        onError: (m) => errors.push(m),
      },
      transform,
    );
    watches.push(w);
    return { w, upserts, removes, errors, synced: () => synced };
  }

  const podLists = () =>
    server.requests
      .filter((r) => r.path === "/api/v1/pods" && !r.watch)
      .map((r) => {
        const q = new URLSearchParams(r.query);
        return `${r.status} limit=${q.get("limit")}${q.has("continue") ? " continue" : ""}`;
      });

  it(`lists in pages of ${LIST_PAGE_SIZE} as plain JSON, each object transformed as its page arrives`, async () => {
    putPods(2 * LIST_PAGE_SIZE + 1);
    const seen: { plain: boolean; pages: number }[] = [];
    const { upserts, synced } = followPods((o) => {
      seen.push({ plain: Object.getPrototypeOf(o) === Object.prototype, pages: podLists().length });
      return { metadata: o.metadata ?? {} };
    });
    await until(() => synced() > 0, "the pods listed");
    expect(podLists()).to.deep.equal([
      "200 limit=500",
      "200 limit=500 continue",
      "200 limit=500 continue",
    ]);
    expect(
      seen.every((s) => s.plain),
      "no typed objects",
    ).to.equal(true);
    expect(seen.map((s) => s.pages)).to.deep.equal([
      ...Array<number>(LIST_PAGE_SIZE).fill(1),
      ...Array<number>(LIST_PAGE_SIZE).fill(2),
      3,
    ]);
    expect(upserts).to.have.length(2 * LIST_PAGE_SIZE + 1);
    expect(upserts[0]).to.deep.equal({ metadata: upserts[0]!.metadata });
  });

  it("hands over a NetworkPolicy as the API's JSON spells it (`from`, not client-node's `_from`)", async () => {
    server.put("networkpolicies", {
      metadata: { namespace: "default", name: "np" },
      spec: {
        podSelector: {},
        ingress: [{ from: [{ podSelector: { matchLabels: { a: "b" } } }] }],
      },
    });
    const got: KubeObjectView[] = [];
    const w = api.watchEach("networkpolicies", { upsert: (o) => got.push(o), remove: () => {} });
    watches.push(w);
    await until(() => got.length === 1, "the policy");
    const ingress = (got[0]!.spec as { ingress: Record<string, unknown>[] }).ingress;
    expect(ingress[0]).to.have.key("from");
  });

  it("a 410 on a continue token lists afresh from the first page; nothing is handed over twice", async () => {
    putPods(LIST_PAGE_SIZE + 1);
    server.injectFault({ path: "/api/v1/pods", watch: false, withParam: "continue", status: 410 });
    const { upserts, errors, synced } = followPods();
    await until(() => synced() > 0, "the pods listed");
    expect(podLists()).to.deep.equal([
      "200 limit=500",
      "410 limit=500 continue",
      "200 limit=500",
      "200 limit=500 continue",
    ]);
    expect(errors).to.deep.equal([]);
    expect(new Set(upserts.map((o) => o.metadata?.name)).size).to.equal(LIST_PAGE_SIZE + 1);
    expect(upserts).to.have.length(LIST_PAGE_SIZE + 1);
  });

  it("a failed page fails the list with the server's status; it is retried", async () => {
    putPods(LIST_PAGE_SIZE + 1);
    server.injectFault({ path: "/api/v1/pods", watch: false, withParam: "continue", status: 503 });
    const { upserts, errors, synced } = followPods();
    await until(() => synced() > 0, "the pods listed");
    expect(errors).to.have.length(1);
    expect(errors[0]).to.match(/^HTTP 503: /);
    expect(upserts).to.have.length(LIST_PAGE_SIZE + 1);
  });

  it("a relist's remove gets the namespace, name and resourceVersion of what went", async () => {
    putPods(2);
    const { upserts, removes, synced } = followPods();
    await until(() => synced() > 0, "the pods listed");
    await until(() => server.openWatches().length === 1, "the watch");
    const rv = server.get("pods", "default", "p00001")?.metadata?.resourceVersion;
    server.endWatches();
    server.remove("pods", "default", "p00001");
    server.compact();
    await until(() => removes.length === 1, "the relist");
    expect(removes[0]).to.deep.equal({
      metadata: { namespace: "default", name: "p00001", resourceVersion: rv },
    });
    expect(upserts).to.have.length(2);
  });
});
