/**
 * The rtnetlink sockets of the worker thread: one for the host, and a bounded
 * cache of one per pod netns path. A socket holds a reference on its netns, so a
 * cached one would keep a deleted pod's namespace (and the veth end inside it)
 * alive: entries are closed when the pod's interface is deleted, when the path
 * no longer names the namespace the socket was opened in, after an idle time,
 * and beyond a bound (least recently used first).
 */
import { closeSync, openSync, statSync } from "node:fs";

/** The native addon (native/netlink/netlink.c). */
export interface NetlinkAddon {
  open(nsPath: string | null): number;
  request(fd: number, msg: Buffer): Buffer;
  /** The same exchange on a native thread of its own; the callback runs on this thread. */
  requestDetached(
    fd: number,
    msg: Buffer,
    callback: (err: Error | undefined, answer: Buffer | undefined) => void,
  ): void;
  close(fd: number): void;
}

export interface NetnsIdentity {
  dev: number;
  ino: number;
}

export interface SessionOptions {
  /** Pod netns sockets kept open at most (default 64). */
  maxSockets?: number;
  /** A pod netns socket unused this long is closed by sweep() (default 30 s). */
  idleMs?: number;
  /** Detached exchanges in flight at most; more wait their turn (default 32). */
  maxDetached?: number;
  now?: () => number;
  /** The namespace a path names now; undefined when the path is gone. */
  identify?: (path: string) => NetnsIdentity | undefined;
  openNetnsFd?: (path: string) => number;
  closeFd?: (fd: number) => void;
}

interface Entry {
  fd: number;
  id: NetnsIdentity;
  lastUsed: number;
}

export interface SessionStats {
  /** Pod netns sockets open now (the host socket not counted). */
  cached: number;
  /** Detached exchanges running now, each on its own socket. */
  detached: number;
  /** Sockets opened and closed since start, host socket included. */
  opened: number;
  closed: number;
}

function statIdentity(path: string): NetnsIdentity | undefined {
  try {
    const s = statSync(path);
    return { dev: s.dev, ino: s.ino };
  } catch {
    return undefined;
  }
}

/** An Error shaped like the addon's: `code` is the errno name. */
function errnoError(code: string, errno: number, message: string): Error {
  return Object.assign(new Error(message), { code, errno });
}

export class NetlinkSession {
  private host: number | undefined;
  private readonly pods = new Map<string, Entry>();
  private readonly maxSockets: number;
  private readonly idleMs: number;
  private readonly now: () => number;
  private readonly identify: (path: string) => NetnsIdentity | undefined;
  private readonly openNetnsFd: (path: string) => number;
  private readonly closeFd: (fd: number) => void;
  private readonly maxDetached: number;
  private detached = 0;
  private readonly waiting: Array<() => void> = [];
  private opened = 0;
  private closed = 0;

  constructor(
    private readonly addon: NetlinkAddon,
    opts: SessionOptions = {},
  ) {
    this.maxSockets = opts.maxSockets ?? 64;
    this.idleMs = opts.idleMs ?? 30_000;
    this.maxDetached = opts.maxDetached ?? 32;
    this.now = opts.now ?? Date.now;
    this.identify = opts.identify ?? statIdentity;
    this.openNetnsFd = opts.openNetnsFd ?? ((p) => openSync(p, "r"));
    this.closeFd = opts.closeFd ?? closeSync;
  }

  /**
   * One exchange in the host (netns undefined) or in the netns at that path.
   * A socket whose exchange failed is closed: what is left queued on it is unknown.
   */
  request(netns: string | undefined, msg: Buffer): Buffer {
    const fd = netns === undefined ? this.hostSocket() : this.podSocket(netns);
    try {
      return this.addon.request(fd, msg);
    } catch (err) {
      if (netns === undefined) {
        this.host = undefined;
        this.closeSocket(fd);
      } else this.forget(netns);
      throw err;
    }
  }

  /**
   * One exchange on a native thread, for requests the kernel answers slowly
   * (deleting a veth: 15-45 ms of RCU waits inside sendmsg): this thread goes on
   * with other requests meanwhile, and concurrent deletions overlap in the
   * kernel. It runs on a socket of its own, closed afterwards: for a pod netns,
   * the cached one is taken out of the cache (the pod's interface is going away).
   * `onSent` is called once the request is on its thread (it may first wait for
   * a free slot).
   */
  async requestDetached(
    netns: string | undefined,
    msg: Buffer,
    onSent?: () => void,
  ): Promise<Buffer> {
    await this.acquireDetached();
    try {
      const fd = netns === undefined ? this.openHostSocket() : this.takePodSocket(netns);
      try {
        return await new Promise<Buffer>((resolve, reject) => {
          this.addon.requestDetached(fd, msg, (err, answer) =>
            err || !answer ? reject(err ?? new Error("netlink: no answer")) : resolve(answer),
          );
          onSent?.();
        });
      } finally {
        this.closeSocket(fd);
      }
    } finally {
      this.releaseDetached();
    }
  }

  private async acquireDetached(): Promise<void> {
    if (this.detached < this.maxDetached) {
      this.detached++;
      return;
    }
    // The slot is handed over by releaseDetached: the count stays as it is.
    await new Promise<void>((resolve) => this.waiting.push(resolve));
  }

  private releaseDetached(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.detached--;
  }

  /** Runs `use` with an fd of the netns at `path` (for IFLA_NET_NS_FD), closed afterwards. */
  withNetnsFd<T>(path: string, use: (fd: number) => T): T {
    const fd = this.openNetnsFd(path);
    try {
      return use(fd);
    } finally {
      this.closeFd(fd);
    }
  }

  /** Closes the socket cached for this netns path, if any. */
  forget(netns: string): void {
    const e = this.pods.get(netns);
    if (!e) return;
    this.pods.delete(netns);
    this.closeSocket(e.fd);
  }

  /** Closes sockets idle too long, and those whose path now names another netns or nothing. */
  sweep(): void {
    const now = this.now();
    for (const [path, e] of [...this.pods]) {
      const id = this.identify(path);
      if (now - e.lastUsed >= this.idleMs || !id || !sameNetns(id, e.id)) this.forget(path);
    }
  }

  close(): void {
    for (const path of [...this.pods.keys()]) this.forget(path);
    if (this.host !== undefined) this.closeSocket(this.host);
    this.host = undefined;
  }

  stats(): SessionStats {
    return {
      cached: this.pods.size,
      detached: this.detached,
      opened: this.opened,
      closed: this.closed,
    };
  }

  private hostSocket(): number {
    this.host ??= this.openHostSocket();
    return this.host;
  }

  private openHostSocket(): number {
    const fd = this.addon.open(null);
    this.opened++;
    return fd;
  }

  /** The pod netns socket, out of the cache and now the caller's to close. */
  private takePodSocket(path: string): number {
    const fd = this.podSocket(path);
    this.pods.delete(path);
    return fd;
  }

  private podSocket(path: string): number {
    const id = this.identify(path);
    const cached = this.pods.get(path);
    if (!id) {
      if (cached) this.forget(path);
      throw errnoError("ENOENT", 2, `open netns ${path}: No such file or directory`);
    }
    if (cached && sameNetns(cached.id, id)) {
      // Most recently used last: Map keeps insertion order.
      this.pods.delete(path);
      cached.lastUsed = this.now();
      this.pods.set(path, cached);
      return cached.fd;
    }
    if (cached) this.forget(path);
    const fd = this.addon.open(path);
    this.opened++;
    this.pods.set(path, { fd, id, lastUsed: this.now() });
    while (this.pods.size > this.maxSockets) {
      const oldest = this.pods.keys().next().value as string;
      this.forget(oldest);
    }
    return fd;
  }

  private closeSocket(fd: number): void {
    this.closed++;
    try {
      this.addon.close(fd);
    } catch {
      // EBADF cannot happen for an fd we own; nothing useful to do if it did.
    }
  }
}

function sameNetns(a: NetnsIdentity, b: NetnsIdentity): boolean {
  return a.dev === b.dev && a.ino === b.ino;
}
