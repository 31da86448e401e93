import { expect } from "chai";
import { exposedGc } from "../../src/common/malloc-trim.js";
import { idleCollector } from "../../src/driver/rpc/idle-gc.js";
import { until } from "../support/until.js";

describe("driver/idle-gc", () => {
  it("collects once after a burst of activity, and again only after more", async () => {
    let collections = 0;
    const c = idleCollector(10, () => collections++);
    for (let i = 0; i < 50; i++) c.activity();
    await until(() => collections > 0, "a collection");
    await new Promise((r) => setTimeout(r, 50));
    expect(collections, "one collection for the whole burst").to.equal(1);
    c.activity();
    await until(() => collections > 1, "a second collection");
    expect(collections).to.equal(2);
    c.stop();
  });

  it("collects nothing once stopped, and nothing without activity", async () => {
    let collections = 0;
    const c = idleCollector(5, () => collections++);
    await new Promise((r) => setTimeout(r, 30));
    c.activity();
    c.stop();
    await new Promise((r) => setTimeout(r, 30));
    expect(collections).to.equal(0);
  });

  it("reaches V8's own gc() without --expose-gc on the command line: it collects", async () => {
    const gc = exposedGc();
    const weak = (() => new WeakRef({ garbage: "x".repeat(1000) }))();
    // A WeakRef's target lives at least until the end of the job that made it.
    await new Promise((r) => setImmediate(r));
    gc();
    expect(weak.deref()).to.equal(undefined);
  });
});
