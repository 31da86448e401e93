import { expect } from "chai";
import {
  type NetlinkAddon,
  NetlinkSession,
  type NetnsIdentity,
} from "../../src/plumbing/netlink/session.js";

/** An addon that hands out fds and records which are open and where each was opened. */
class FakeAddon implements NetlinkAddon {
  nextFd = 100;
  readonly open_ = new Map<number, string | null>();
  failNext: Error | undefined;

  open(nsPath: string | null): number {
    const fd = this.nextFd++;
    this.open_.set(fd, nsPath);
    return fd;
  }

  request(fd: number, msg: Buffer): Buffer {
    if (!this.open_.has(fd)) throw Object.assign(new Error("bad fd"), { code: "EBADF" });
    if (this.failNext) {
      const e = this.failNext;
      this.failNext = undefined;
      throw e;
    }
    return msg;
  }

  /** Detached exchanges waiting to be answered, in order; answer() completes the oldest. */
  readonly inFlight: Array<{ fd: number; done: (err?: Error) => void }> = [];

  requestDetached(
    fd: number,
    msg: Buffer,
    callback: (err: Error | undefined, answer: Buffer | undefined) => void,
  ): void {
    this.inFlight.push({
      fd,
      done: (err) => setImmediate(() => callback(err, err ? undefined : msg)),
    });
  }

  answer(err?: Error): void {
    this.inFlight.shift()?.done(err);
  }

  close(fd: number): void {
    this.open_.delete(fd);
  }

  openPaths(): Array<string | null> {
    return [...this.open_.values()];
  }
}

function setup(opts: { maxSockets?: number; idleMs?: number } = {}) {
  const addon = new FakeAddon();
  let now = 0;
  const namespaces = new Map<string, NetnsIdentity>();
  const session = new NetlinkSession(addon, {
    ...opts,
    now: () => now,
    identify: (p) => namespaces.get(p),
  });
  const addNetns = (path: string, ino: number) => namespaces.set(path, { dev: 4, ino });
  return {
    addon,
    session,
    addNetns,
    removeNetns: (path: string) => namespaces.delete(path),
    advance: (ms: number) => {
      now += ms;
    },
  };
}

const MSG = Buffer.from("ping");

describe("netlink session: the socket cache", () => {
  it("opens one host socket and one socket per netns path, and reuses them", () => {
    const { addon, session, addNetns } = setup();
    addNetns("/run/netns/a", 1);
    session.request(undefined, MSG);
    session.request("/run/netns/a", MSG);
    session.request(undefined, MSG);
    session.request("/run/netns/a", MSG);
    expect(addon.openPaths()).to.deep.equal([null, "/run/netns/a"]);
    expect(session.stats()).to.deep.equal({ cached: 1, detached: 0, opened: 2, closed: 0 });
  });

  it("is bounded: beyond maxSockets the least recently used netns socket is closed", () => {
    const { addon, session, addNetns } = setup({ maxSockets: 3 });
    for (const p of ["a", "b", "c"]) addNetns(p, p.charCodeAt(0));
    addNetns("d", 100);
    session.request("a", MSG);
    session.request("b", MSG);
    session.request("c", MSG);
    session.request("a", MSG); // a is now the most recent
    session.request("d", MSG);
    expect(addon.openPaths().sort()).to.deep.equal(["a", "c", "d"]);
    expect(session.stats().cached).to.equal(3);
  });

  it("forget() closes the socket of a netns (the pod's interface was deleted)", () => {
    const { addon, session, addNetns } = setup();
    addNetns("a", 1);
    session.request("a", MSG);
    session.forget("a");
    session.forget("never-opened");
    expect(addon.openPaths()).to.deep.equal([]);
    expect(session.stats()).to.deep.equal({ cached: 0, detached: 0, opened: 1, closed: 1 });
  });

  it("a path that now names another netns gets a new socket, the old one is closed", () => {
    const { addon, session, addNetns } = setup();
    addNetns("a", 1);
    session.request("a", MSG);
    addNetns("a", 2); // deleted and made again under the same name
    session.request("a", MSG);
    expect(addon.openPaths()).to.deep.equal(["a"]);
    expect(session.stats()).to.deep.equal({ cached: 1, detached: 0, opened: 2, closed: 1 });
  });

  it("a vanished path fails with ENOENT and drops its socket", () => {
    const { addon, session, addNetns, removeNetns } = setup();
    addNetns("a", 1);
    session.request("a", MSG);
    removeNetns("a");
    expect(() => session.request("a", MSG))
      .to.throw()
      .with.property("code", "ENOENT");
    expect(addon.openPaths()).to.deep.equal([]);
  });

  it("sweep() closes idle sockets and those of vanished or replaced paths, keeps the rest", () => {
    const { addon, session, addNetns, removeNetns, advance } = setup({ idleMs: 1000 });
    for (const [p, ino] of [
      ["idle", 1],
      ["gone", 2],
      ["replaced", 3],
      ["busy", 4],
    ] as const)
      addNetns(p, ino);
    for (const p of ["idle", "gone", "replaced", "busy"]) session.request(p, MSG);
    advance(600);
    session.request("gone", MSG);
    session.request("replaced", MSG);
    session.request("busy", MSG);
    advance(600);
    removeNetns("gone");
    addNetns("replaced", 30);
    session.sweep();
    expect(addon.openPaths()).to.deep.equal(["busy"]);
  });

  it("a socket whose exchange failed is closed and replaced at the next request", () => {
    const { addon, session, addNetns } = setup();
    addNetns("a", 1);
    session.request("a", MSG);
    session.request(undefined, MSG);
    addon.failNext = Object.assign(new Error("timed out"), { code: "EAGAIN" });
    expect(() => session.request("a", MSG)).to.throw("timed out");
    addon.failNext = Object.assign(new Error("no buffer space"), { code: "ENOBUFS" });
    expect(() => session.request(undefined, MSG)).to.throw("no buffer space");
    expect(addon.openPaths()).to.deep.equal([]);
    session.request("a", MSG);
    session.request(undefined, MSG);
    expect(session.stats()).to.deep.equal({ cached: 1, detached: 0, opened: 4, closed: 2 });
  });

  it("withNetnsFd closes the fd after use, also when the use throws", () => {
    const opened: number[] = [];
    const closed: number[] = [];
    const session = new NetlinkSession(new FakeAddon(), {
      openNetnsFd: () => {
        opened.push(7);
        return 7;
      },
      closeFd: (fd) => closed.push(fd),
    });
    expect(session.withNetnsFd("/x", (fd) => fd * 2)).to.equal(14);
    expect(() =>
      session.withNetnsFd("/x", () => {
        throw new Error("refused");
      }),
    ).to.throw("refused");
    expect(closed).to.deep.equal([7, 7]);
  });

  it("close() closes everything, the host socket included", () => {
    const { addon, session, addNetns } = setup();
    addNetns("a", 1);
    session.request("a", MSG);
    session.request(undefined, MSG);
    session.close();
    expect(addon.openPaths()).to.deep.equal([]);
  });

  const tick = () => new Promise((r) => setImmediate(r));

  it("a detached exchange takes the pod's cached socket out of the cache and closes it when answered", async () => {
    const { addon, session, addNetns } = setup();
    addNetns("a", 1);
    session.request("a", MSG);
    const [cachedFd] = addon.open_.keys();
    const done = session.requestDetached("a", MSG);
    await tick();
    expect(addon.inFlight.map((j) => j.fd)).to.deep.equal([cachedFd]);
    expect(session.stats().cached).to.equal(0);
    addon.answer();
    expect(await done).to.equal(MSG);
    expect(addon.openPaths()).to.deep.equal([]);
  });

  it("a detached exchange in the host opens a socket of its own, not the shared one", async () => {
    const { addon, session } = setup();
    session.request(undefined, MSG);
    const done = session.requestDetached(undefined, MSG);
    await tick();
    expect(addon.openPaths()).to.deep.equal([null, null]);
    addon.answer(Object.assign(new Error("gone"), { code: "ENODEV" }));
    await done.then(
      () => expect.fail("should reject"),
      (e: Error) => expect(e.message).to.equal("gone"),
    );
    expect(addon.openPaths()).to.deep.equal([null]);
  });

  it("tells a detached request's caller when it is on its thread: at once, or once a slot frees", async () => {
    const addon = new FakeAddon();
    const paths = ["a", "b"];
    const s = new NetlinkSession(addon, {
      maxDetached: 1,
      identify: (p) => (paths.includes(p) ? { dev: 4, ino: paths.indexOf(p) + 1 } : undefined),
    });
    const sent: string[] = [];
    const first = s.requestDetached("a", MSG, () => sent.push("a"));
    const second = s.requestDetached("b", MSG, () => sent.push("b"));
    await tick();
    expect(sent).to.deep.equal(["a"]);
    expect(addon.inFlight.length).to.equal(1);
    addon.answer();
    await first;
    await tick();
    expect(sent).to.deep.equal(["a", "b"]);
    addon.answer();
    await second;
  });

  it("at most maxDetached run at once; the others start as they finish", async () => {
    const addon = new FakeAddon();
    const paths = ["a", "b", "c", "d", "e"];
    const s = new NetlinkSession(addon, {
      maxDetached: 2,
      identify: (p) => (paths.includes(p) ? { dev: 4, ino: paths.indexOf(p) + 1 } : undefined),
    });
    const all = paths.map((p) => s.requestDetached(p, MSG));
    await tick();
    expect(addon.inFlight.length).to.equal(2);
    expect(s.stats().detached).to.equal(2);
    addon.answer();
    await tick();
    await tick();
    expect(addon.inFlight.length).to.equal(2);
    while (addon.inFlight.length > 0) {
      addon.answer();
      await tick();
      await tick();
    }
    await Promise.all(all);
    expect(s.stats()).to.include({ detached: 0, opened: 5, closed: 5 });
  });
});
