import { expect } from "chai";
import { exposedGc, releaseIdleMemory } from "../../src/common/malloc-trim.js";
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

  it("hands back the heap pages a plain gc() keeps pooled", async function () {
    this.timeout(60_000);
    const rss = () => process.memoryUsage().rss / 2 ** 20;
    const gc = exposedGc();
    // About 150 MiB of small objects, two thirds of them then dropped: the heap's pages are
    // left sparse, as after a large sync whose working objects are garbage.
    let made: { a: string; b: number[]; c: Map<number, number> }[] | undefined = [];
    for (let i = 0; i < 400_000; i++)
      made.push({ a: `x${i}`, b: [i, i + 1], c: new Map([[i, i]]) });
    const kept = made.filter((_, i) => i % 3 === 0);
    made = undefined;
    gc();
    const afterPlain = rss();
    releaseIdleMemory()();
    const afterRelease = rss();
    expect(kept).to.have.length(133_334);
    expect(afterRelease, `RSS after a plain gc(): ${afterPlain.toFixed(1)} MiB`).to.be.below(
      afterPlain - 20,
    );
  });
});
