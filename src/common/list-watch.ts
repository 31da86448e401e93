/**
 * One resilient list-watch, for the driver and the MidoNet controller alike:
 * a list, then a watch from the list's resourceVersion, kept running until
 * stop(), as client-go's reflector keeps one.
 *
 * - A watch that ends (the server's timeoutSeconds, a dropped connection) is
 *   resumed from the last resourceVersion seen, without a list.
 * - 410 Gone / Expired (history compacted), as an ERROR event or an HTTP
 *   status, clears the resourceVersion: the next round lists afresh, at once.
 *   A relist reports what changed meanwhile, deletions included.
 * - Any other failure (a refused connection, a 500, a failed list, a watch
 *   that ends at once with nothing in it) restarts with backoff (backoff.ts);
 *   a failure long after the previous one starts the backoff anew.
 * - Bounded: a list and watch that has not got going in `startTimeoutMs` is
 *   given up and restarted (a paged list: no page in that time); a healthy
 *   watch is renewed after 5–10 min, so a connection that died without a FIN
 *   or RST is noticed.
 * - Paged (`pageSize`), as client-go's pager: one list is many answers of at
 *   most that many objects, each transformed as it arrives, so a large
 *   collection never has to be whole in memory as the server sent it. A 410 on
 *   a continue token (the list began before a compaction) lists afresh from
 *   the first page.
 * - Lean (`keep: "versions"`): the cache keeps each object's key and
 *   resourceVersion only, for users that follow events and never read it.
 *
 * It speaks through two injected calls (a list, and a watch of client-node's
 * Watch.watch shape), so this module loads nothing of @kubernetes/client-node.
 */
import { type BackoffPolicy, backoffDelay } from "./backoff.js";

/** The parts of an object the list-watch reads. */
interface WatchedObject {
  metadata?: { name?: string; namespace?: string; resourceVersion?: string };
}

export interface ListAnswer<T> {
  items: T[];
  /** `continue`: a paged list has more; ask with it for the next page. */
  metadata?: { resourceVersion?: string; continue?: string };
}

/** One page of a paged list: at most `limit` objects, after where `continue` stopped. */
export interface ListPage {
  limit: number;
  continue?: string;
}

/** client-node's Watch.watch: resolves once the server answered; `done` once it ends. */
export interface WatchCall {
  watch(
    path: string,
    query: Record<string, string | undefined>,
    onEvent: (type: string, object: unknown) => void,
    done: (err: unknown) => void,
  ): Promise<{ abort(): void }>;
}

export interface ListWatchHandlers<T> {
  add?(obj: T): void;
  update?(obj: T, old: T): void;
  delete?(obj: T): void;
  /** Listed or re-watched: the cache is current and changes follow. */
  synced?(): void;
  /** A failure; a restart is scheduled after `retryInMs`. */
  error?(err: unknown, retryInMs: number): void;
}

export interface ListWatchOptions<T> {
  /** The watch path, e.g. /api/v1/nodes. */
  path: string;
  /** The list; with `pageSize`, one page of it (the first when `continue` is unset). */
  list: (page?: ListPage) => Promise<ListAnswer<T>>;
  /** List in pages of this many objects (client-go's pager asks for 500); default: one answer. */
  pageSize?: number;
  watch: WatchCall;
  fieldSelector?: string;
  labelSelector?: string;
  handlers: ListWatchHandlers<T>;
  /**
   * What of each object is kept (client-go's SetTransform): a watch of every
   * pod in a large cluster keeps the few fields it reads, not whole pods. The
   * result must keep metadata's name, namespace and resourceVersion.
   */
  transform?: (obj: T) => T;
  /**
   * What the cache keeps: every object as transformed (the default), or with
   * "versions" its namespace, name and resourceVersion only (what a relist's
   * diff reads). Then get(), list(), update's `old` and the object a relist
   * hands `delete` are stubs of those three fields; add and update still get
   * the object as transformed, and a watched deletion what the server sent.
   */
  keep?: "objects" | "versions";
  backoff: BackoffPolicy;
  /** Default 30 s. */
  startTimeoutMs?: number;
  /** A healthy watch lasts this long, chosen at random in the range; default 5–10 min. */
  renewMs?: { min: number; max: number };
  random?: () => number;
}

/** A watch that ends cleanly this soon with no event in it is a failure, not a renewal. */
const SHORT_WATCH_MS = 1000;

/** A paged list whose continue token expires this many times in a row fails (then backs off). */
const MAX_EXPIRED_LISTS = 3;

/** Thrown for an ERROR event whose Status is not a 410. */
class WatchStatusError extends Error {
  constructor(
    message: string,
    readonly statusCode: number | undefined,
  ) {
    super(message);
    this.name = "WatchStatusError";
  }
}

/** A cache entry's resourceVersion ("" kept for none: never equal to a received one). */
function versionOf(kept: WatchedObject | string): string | undefined {
  return typeof kept === "string" ? kept || undefined : kept.metadata?.resourceVersion;
}

function keyOf(obj: WatchedObject): string {
  return `${obj.metadata?.namespace ?? ""}/${obj.metadata?.name ?? ""}`;
}

function isGone(err: unknown): boolean {
  const e = err as { statusCode?: unknown; code?: unknown; status?: unknown } | null;
  return e?.statusCode === 410 || e?.code === 410 || e?.status === 410;
}

export class ListWatch<T extends WatchedObject> {
  /** By key: the object, or with keep "versions" its resourceVersion alone. */
  private readonly cache = new Map<string, T | string>();
  private readonly handlers: ListWatchHandlers<T>;
  private readonly random: () => number;
  private resourceVersion = "";
  /** Bumped by every restart and by stop(): callbacks of an older round are ignored. */
  private round = 0;
  private running = false;
  private request: { abort(): void } | undefined;
  /** The backoff before a restart, or the renewal of a healthy watch. */
  private timer: NodeJS.Timeout | undefined;
  private startTimer: NodeJS.Timeout | undefined;
  private attempt = 0;
  private lastFailureAt = Number.NEGATIVE_INFINITY;
  private current = false;
  private listedOnce = false;
  private readonly syncWaiters: (() => void)[] = [];

  constructor(private readonly o: ListWatchOptions<T>) {
    this.handlers = o.handlers;
    this.random = o.random ?? Math.random;
  }

  /** Listed or re-watched, and no failure since: the cache is current. */
  get synced(): boolean {
    return this.current;
  }

  /** A first list has been received (the cache holds a whole collection). */
  get hasSynced(): boolean {
    return this.listedOnce;
  }

  /** Resolves once a first list has been received (never, if stopped before). */
  whenSynced(): Promise<void> {
    if (this.listedOnce) return Promise.resolve();
    return new Promise((resolve) => this.syncWaiters.push(resolve));
  }

  get(name: string, namespace?: string): T | undefined {
    const key = `${namespace ?? ""}/${name}`;
    const kept = this.cache.get(key);
    return kept === undefined ? undefined : this.seen(key, kept);
  }

  list(): T[] {
    return Array.from(this.cache, ([key, kept]) => this.seen(key, kept));
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    void this.connect();
  }

  async stop(): Promise<void> {
    this.running = false;
    this.current = false;
    this.round++;
    this.clearTimers();
    this.request?.abort();
    this.request = undefined;
  }

  /** One round: a list when there is no resourceVersion to watch from, then the watch. */
  private async connect(): Promise<void> {
    if (!this.running) return;
    const round = ++this.round;
    this.armStartTimer(round);
    try {
      if (this.resourceVersion === "") {
        const listed = await this.listAll(round);
        if (!listed) return;
        this.replace(listed.items);
        this.resourceVersion = listed.resourceVersion;
        this.listedOnce = true;
        for (const w of this.syncWaiters.splice(0)) w();
      }
      await this.openWatch(round);
    } catch (err) {
      this.fail(round, err);
    }
  }

  /** (Re)starts the bound on getting going: `startTimeoutMs` from now. */
  private armStartTimer(round: number): void {
    clearTimeout(this.startTimer);
    const timeoutMs = this.o.startTimeoutMs ?? 30_000;
    this.startTimer = setTimeout(
      () => this.fail(round, new Error(`no answer from the API server in ${timeoutMs / 1000} s`)),
      timeoutMs,
    );
    this.startTimer.unref();
  }

  /**
   * The whole list, page by page with `pageSize`, each object transformed as
   * it arrives; undefined when the round was ended meanwhile. The watch goes
   * on from the first page's resourceVersion: every page of a list names the
   * same one, and if a server answered later pages from a newer state, the
   * watch from the older one replays what changed between them.
   */
  private async listAll(
    round: number,
  ): Promise<{ items: T[]; resourceVersion: string } | undefined> {
    const limit = this.o.pageSize;
    for (let expired = 0; ; ) {
      const items: T[] = [];
      let resourceVersion: string | undefined;
      let token: string | undefined;
      try {
        do {
          const answer = await this.o.list(
            limit ? { limit, ...(token ? { continue: token } : {}) } : undefined,
          );
          if (round !== this.round) return undefined;
          for (const item of answer.items) items.push(this.slim(item));
          resourceVersion ??= answer.metadata?.resourceVersion;
          token = limit ? answer.metadata?.continue || undefined : undefined;
          if (token) this.armStartTimer(round);
        } while (token);
        return { items, resourceVersion: resourceVersion ?? "" };
      } catch (err) {
        if (round !== this.round) return undefined;
        // A 410 on the first page is the server's own trouble: fail() handles it.
        if (token === undefined || !isGone(err)) throw err;
        if (++expired >= MAX_EXPIRED_LISTS)
          throw new Error(`the paged list expired ${expired} times before its last page`, {
            cause: err,
          });
        // The list began before a compaction: client-go's pager lists again, so do we.
        this.armStartTimer(round);
      }
    }
  }

  private async openWatch(round: number): Promise<void> {
    const renew = this.o.renewMs ?? { min: 300_000, max: 600_000 };
    const lastsMs = renew.min + this.random() * (renew.max - renew.min);
    const query: Record<string, string | undefined> = {
      resourceVersion: this.resourceVersion,
      allowWatchBookmarks: "true",
      timeoutSeconds: String(Math.ceil(lastsMs / 1000)),
      fieldSelector: this.o.fieldSelector,
      labelSelector: this.o.labelSelector,
    };
    const openedAt = Date.now();
    let events = 0;
    let ended = false;
    let streamError: unknown;
    const request = await this.o.watch.watch(
      this.o.path,
      query,
      (type, object) => {
        if (round !== this.round) return;
        events++;
        streamError = this.onEvent(type, object) ?? streamError;
      },
      (err) => {
        ended = true;
        if (round !== this.round) return;
        this.request = undefined;
        const failure = err ?? streamError;
        if (failure) this.fail(round, failure);
        else if (events === 0 && Date.now() - openedAt < SHORT_WATCH_MS)
          this.fail(round, new Error("the watch ended at once with no event"));
        else this.restartNow(round);
      },
    );
    if (round !== this.round || ended) {
      if (round !== this.round) request.abort();
      return;
    }
    this.request = request;
    this.established(round, lastsMs);
  }

  /** One watch event into the cache; answers the error an ERROR event carries. */
  private onEvent(type: string, object: unknown): unknown {
    const obj = object as T & { code?: number; message?: string; reason?: string };
    if (type === "ERROR") {
      if (obj?.code === 410) {
        this.resourceVersion = "";
        return undefined;
      }
      return new WatchStatusError(
        `watch error: ${obj?.code ?? "?"} ${obj?.reason ?? ""}: ${obj?.message ?? ""}`,
        obj?.code,
      );
    }
    if (type === "ADDED" || type === "MODIFIED") this.upsert(this.slim(obj));
    else if (type === "DELETED") this.remove(obj);
    const rv = obj?.metadata?.resourceVersion;
    if (rv) this.resourceVersion = rv;
    return undefined;
  }

  private established(round: number, lastsMs: number): void {
    clearTimeout(this.startTimer);
    this.startTimer = undefined;
    this.current = true;
    this.timer = setTimeout(() => this.restartNow(round), lastsMs);
    this.timer.unref();
    this.handlers.synced?.();
  }

  /** The cache becomes the list (transformed): what is gone is deleted, what is new added, what changed updated. */
  private replace(items: T[]): void {
    const listed = new Set(items.map(keyOf));
    for (const [key, old] of [...this.cache]) {
      if (listed.has(key)) continue;
      this.cache.delete(key);
      this.handlers.delete?.(this.seen(key, old));
    }
    for (const obj of items) this.upsert(obj);
  }

  /** What is kept of an object as received. */
  private slim(received: T): T {
    return this.o.transform ? this.o.transform(received) : received;
  }

  private upsert(obj: T): void {
    const key = keyOf(obj);
    const old = this.cache.get(key);
    const rv = obj.metadata?.resourceVersion;
    if (old !== undefined && rv !== undefined && versionOf(old) === rv) return;
    this.cache.set(key, this.o.keep === "versions" ? (rv ?? "") : obj);
    if (old !== undefined) this.handlers.update?.(obj, this.seen(key, old));
    else this.handlers.add?.(obj);
  }

  /** A cache entry as the object users see: with keep "versions", a stub of key and resourceVersion. */
  private seen(key: string, kept: T | string): T {
    if (typeof kept !== "string") return kept;
    const slash = key.indexOf("/");
    const namespace = key.slice(0, slash);
    return {
      metadata: {
        ...(namespace ? { namespace } : {}),
        name: key.slice(slash + 1),
        ...(kept ? { resourceVersion: kept } : {}),
      },
    } as T;
  }

  private remove(obj: T): void {
    const key = keyOf(obj);
    if (!this.cache.delete(key)) return;
    this.handlers.delete?.(obj);
  }

  /** A renewal or a clean end: watch again at once (a list first after a 410). */
  private restartNow(round: number): void {
    if (round !== this.round) return;
    this.abandon();
    if (this.running) void this.connect();
  }

  private fail(round: number, err: unknown): void {
    if (round !== this.round || !this.running) return;
    this.abandon();
    if (isGone(err)) {
      // Not a failure: the server compacted the history we were watching from.
      this.resourceVersion = "";
      void this.connect();
      return;
    }
    this.current = false;
    const now = Date.now();
    if (now - this.lastFailureAt > 2 * this.o.backoff.maxMs) this.attempt = 0;
    this.lastFailureAt = now;
    const delay = backoffDelay(this.o.backoff, this.attempt++, this.random);
    this.handlers.error?.(err, delay);
    if (!this.running) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.connect();
    }, delay);
    this.timer.unref();
  }

  /** Ends the current round: its timers and its request. */
  private abandon(): void {
    this.round++;
    this.clearTimers();
    const request = this.request;
    this.request = undefined;
    request?.abort();
  }

  private clearTimers(): void {
    clearTimeout(this.timer);
    clearTimeout(this.startTimer);
    this.timer = undefined;
    this.startTimer = undefined;
  }
}
