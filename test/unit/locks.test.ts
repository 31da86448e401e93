import { expect } from "chai";
import { AttachmentLocks, attachmentKey } from "../../src/driver/chain/locks.js";

interface Deferred<T> {
  promise: Promise<T>;
  resolve: (value: T) => void;
  reject: (err: unknown) => void;
}

function deferred<T = void>(): Deferred<T> {
  let resolve!: (value: T) => void;
  let reject!: (err: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** Lets every pending promise callback run. */
const settle = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

describe("AttachmentLocks", () => {
  describe("constructor", () => {
    for (const bad of [0, -1, 1.5, Number.NaN]) {
      it(`refuses maxConcurrent ${bad}`, () => {
        expect(() => new AttachmentLocks({ maxConcurrent: bad })).to.throw(RangeError);
      });
    }
  });

  it("attachmentKey joins container ID and interface name unambiguously", () => {
    expect(attachmentKey("a-b", "eth0")).to.equal("a-b/eth0");
    expect(attachmentKey("a", "b-eth0")).to.not.equal(attachmentKey("a-b", "eth0"));
  });

  it("runs calls on the same key one at a time", async () => {
    const locks = new AttachmentLocks({ maxConcurrent: 10 });
    const first = deferred();
    const events: string[] = [];
    const a = locks.run("c1/eth0", async () => {
      events.push("a start");
      await first.promise;
      events.push("a end");
    });
    const b = locks.run("c1/eth0", async () => {
      events.push("b start");
    });
    await settle();
    expect(events).to.deep.equal(["a start"]);
    first.resolve();
    await Promise.all([a, b]);
    expect(events).to.deep.equal(["a start", "a end", "b start"]);
  });

  it("runs calls on one key in arrival order (FIFO), whatever each one takes", async () => {
    const locks = new AttachmentLocks({ maxConcurrent: 4 });
    const order: number[] = [];
    const delays = [15, 1, 8, 0, 4, 12, 2];
    await Promise.all(
      delays.map((ms, i) =>
        locks.run("k", async () => {
          order.push(i);
          await sleep(ms);
        }),
      ),
    );
    expect(order).to.deep.equal([0, 1, 2, 3, 4, 5, 6]);
  });

  it("runs calls on different keys in parallel", async () => {
    const locks = new AttachmentLocks({ maxConcurrent: 10 });
    const gate = deferred();
    const started: string[] = [];
    const calls = ["c1/lo", "c1/eth0", "c2/eth0"].map((key) =>
      locks.run(key, async () => {
        started.push(key);
        await gate.promise;
      }),
    );
    await settle();
    expect(started).to.have.members(["c1/lo", "c1/eth0", "c2/eth0"]);
    gate.resolve();
    await Promise.all(calls);
  });

  for (const max of [1, 3, 7]) {
    it(`never runs more than maxConcurrent=${max} calls at once`, async () => {
      const locks = new AttachmentLocks({ maxConcurrent: max });
      let now = 0;
      let peak = 0;
      await Promise.all(
        Array.from({ length: 25 }, (_, i) =>
          locks.run(`c${i % 11}/eth0`, async () => {
            now++;
            peak = Math.max(peak, now);
            await sleep(1 + (i % 3));
            now--;
          }),
        ),
      );
      expect(peak).to.equal(max);
      expect(locks.inFlight).to.equal(0);
    });
  }

  it("returns what the function returns and passes its rejection through", async () => {
    const locks = new AttachmentLocks({ maxConcurrent: 2 });
    expect(await locks.run("k", async () => 42)).to.equal(42);
    const boom = new Error("boom");
    let caught: unknown;
    try {
      await locks.run("k", async () => {
        throw boom;
      });
    } catch (err) {
      caught = err;
    }
    expect(caught).to.equal(boom);
  });

  it("frees the key after a rejection, and after a function that throws synchronously", async () => {
    const locks = new AttachmentLocks({ maxConcurrent: 1 });
    const failing = locks.run("k", () => Promise.reject(new Error("async")));
    const throwing = locks.run("k", () => {
      throw new Error("sync");
    });
    const after = locks.run("k", async () => "ran");
    const results = await Promise.allSettled([failing, throwing, after]);
    expect(results.map((r) => r.status)).to.deep.equal(["rejected", "rejected", "fulfilled"]);
    expect((results[1] as PromiseRejectedResult).reason.message).to.equal("sync");
    expect(locks.inFlight).to.equal(0);
    expect(locks.activeKeys).to.equal(0);
  });

  it("counts queued and running calls in inFlight", async () => {
    const locks = new AttachmentLocks({ maxConcurrent: 1 });
    const gate = deferred();
    const calls = [
      locks.run("a", () => gate.promise),
      locks.run("a", async () => {}),
      locks.run("b", async () => {}),
    ];
    expect(locks.inFlight).to.equal(3);
    await settle();
    expect(locks.inFlight).to.equal(3);
    gate.resolve();
    await Promise.all(calls);
    expect(locks.inFlight).to.equal(0);
  });

  it("keeps no state for a key once its queue is empty", async () => {
    const locks = new AttachmentLocks({ maxConcurrent: 4 });
    const gate = deferred();
    const calls = Array.from({ length: 200 }, (_, i) =>
      locks.run(`container-${i}/eth0`, () => (i % 50 === 0 ? gate.promise : Promise.resolve())),
    );
    await settle();
    expect(locks.activeKeys).to.be.greaterThan(0);
    gate.resolve();
    await Promise.all(calls);
    expect(locks.activeKeys).to.equal(0);
  });

  describe("exclusive", () => {
    it("runs at once when nothing is in flight", async () => {
      const locks = new AttachmentLocks({ maxConcurrent: 2 });
      let ran = false;
      const done = locks.exclusive(async () => {
        ran = true;
        return "gc";
      });
      await settle();
      expect(ran).to.equal(true);
      expect(await done).to.equal("gc");
    });

    it("waits for every running call to finish", async () => {
      const locks = new AttachmentLocks({ maxConcurrent: 5 });
      const gates = [deferred(), deferred(), deferred()];
      const events: string[] = [];
      const calls = gates.map((gate, i) =>
        locks.run(`c${i}/eth0`, async () => {
          await gate.promise;
          events.push(`run ${i} end`);
        }),
      );
      const gc = locks.exclusive(async () => {
        events.push("gc");
      });
      await settle();
      gates[0]?.resolve();
      gates[2]?.resolve();
      await settle();
      expect(events).to.not.include("gc");
      gates[1]?.resolve();
      await Promise.all([...calls, gc]);
      expect(events.at(-1)).to.equal("gc");
      expect(events).to.have.length(4);
    });

    it("holds back calls that arrive while it waits or runs, then lets them run", async () => {
      const locks = new AttachmentLocks({ maxConcurrent: 5 });
      const running = deferred();
      const gcGate = deferred();
      const events: string[] = [];
      const early = locks.run("c1/eth0", async () => {
        await running.promise;
        events.push("early");
      });
      await settle();
      const gc = locks.exclusive(async () => {
        events.push("gc start");
        await gcGate.promise;
        events.push("gc end");
      });
      const lateSameKey = locks.run("c1/eth0", async () => {
        events.push("late c1");
      });
      const lateOtherKey = locks.run("c2/eth0", async () => {
        events.push("late c2");
      });
      await settle();
      expect(events).to.deep.equal([]);
      running.resolve();
      await settle();
      expect(events).to.deep.equal(["early", "gc start"]);
      gcGate.resolve();
      await Promise.all([early, gc, lateSameKey, lateOtherKey]);
      expect(events.slice(0, 3)).to.deep.equal(["early", "gc start", "gc end"]);
      expect(events.slice(3)).to.have.members(["late c1", "late c2"]);
    });

    it("runs two exclusive calls one after the other", async () => {
      const locks = new AttachmentLocks({ maxConcurrent: 3 });
      let now = 0;
      let peak = 0;
      const body = async (): Promise<void> => {
        now++;
        peak = Math.max(peak, now);
        await sleep(5);
        now--;
      };
      await Promise.all([locks.exclusive(body), locks.exclusive(body), locks.run("k", body)]);
      expect(peak).to.equal(1);
    });

    it("releases the lock when its function rejects", async () => {
      const locks = new AttachmentLocks({ maxConcurrent: 3 });
      const gc = locks.exclusive(() => Promise.reject(new Error("gc failed")));
      const after = locks.run("k", async () => "ok");
      const [gcResult, afterResult] = await Promise.allSettled([gc, after]);
      expect(gcResult.status).to.equal("rejected");
      expect(afterResult).to.deep.equal({ status: "fulfilled", value: "ok" });
      expect(locks.inFlight).to.equal(0);
    });
  });

  describe("drain", () => {
    it("resolves true at once when idle", async () => {
      const locks = new AttachmentLocks({ maxConcurrent: 1 });
      expect(await locks.drain(0)).to.equal(true);
    });

    it("resolves true once the in-flight calls, queued ones included, have finished", async () => {
      const locks = new AttachmentLocks({ maxConcurrent: 1 });
      const gate = deferred();
      const finished: string[] = [];
      void locks.run("a", async () => {
        await gate.promise;
        finished.push("a");
      });
      void locks.run("b", async () => {
        finished.push("b");
      });
      const drained = locks.drain(5_000);
      setTimeout(() => gate.resolve(), 20);
      expect(await drained).to.equal(true);
      expect(finished).to.deep.equal(["a", "b"]);
    });

    it("resolves false when the timeout passes first", async () => {
      const locks = new AttachmentLocks({ maxConcurrent: 1 });
      const gate = deferred();
      const call = locks.run("a", () => gate.promise);
      const started = Date.now();
      expect(await locks.drain(50)).to.equal(false);
      // Not before its timeout; how much after depends on the machine's load.
      expect(Date.now() - started).to.be.at.least(40);
      expect(locks.inFlight).to.equal(1);
      gate.resolve();
      await call;
      expect(await locks.drain(0)).to.equal(true);
    });
  });
});
