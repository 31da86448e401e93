/**
 * Concurrency control for the driver's calls (cni-spec §5):
 *
 * - calls on one attachment (container ID + interface name) run one at a time,
 *   in arrival order: an ADD and the DEL a runtime sends after it must not
 *   interleave;
 * - calls on different attachments run in parallel (containerd sets up `lo`,
 *   `eth0` and further networks of one pod concurrently), at most
 *   `maxConcurrent` at once so a burst of pods cannot fork an unbounded number
 *   of plugins;
 * - GC runs alone: it waits for every running call and holds new ones back
 *   until it is done ("never run while an ADD or DEL is in flight").
 *
 * Everything is promise hand-off: no polling, and a key's queue is deleted as
 * soon as it empties, so memory follows the calls in flight, not every
 * attachment ever seen.
 */

export interface AttachmentLocksOptions {
  /** Upper bound on calls running at once across all attachments (an integer ≥ 1). */
  maxConcurrent: number;
}

/** The lock key of one attachment. Neither part can contain `/` (cni-spec §1). */
export function attachmentKey(containerId: string, ifName: string): string {
  return `${containerId}/${ifName}`;
}

type Wake = () => void;

export class AttachmentLocks {
  readonly #maxConcurrent: number;
  /** Calls whose function is executing right now (exclusive calls excluded). */
  #running = 0;
  /** Calls accepted and not yet settled: queued or running, exclusive ones included. */
  #accepted = 0;
  /**
   * One entry per key that has a call holding its turn; the array holds the
   * calls queued behind it, oldest first. The entry goes when the array empties.
   */
  readonly #keys = new Map<string, Wake[]>();
  /** Calls that hold their key's turn and wait for a slot (or for GC to end), oldest first. */
  #slotQueue: Wake[] = [];
  /** Exclusive calls waiting for the running calls to finish, oldest first. */
  #exclusiveQueue: Wake[] = [];
  #exclusiveRunning = false;
  readonly #drainWaiters = new Set<Wake>();

  constructor(opts: AttachmentLocksOptions) {
    if (!Number.isInteger(opts.maxConcurrent) || opts.maxConcurrent < 1) {
      throw new RangeError(`maxConcurrent must be an integer ≥ 1, got ${opts.maxConcurrent}`);
    }
    this.#maxConcurrent = opts.maxConcurrent;
  }

  /** Calls accepted and not yet finished: running or waiting, exclusive ones included. */
  get inFlight(): number {
    return this.#accepted;
  }

  /** Attachments with a call running or queued; 0 when idle (nothing is kept per key). */
  get activeKeys(): number {
    return this.#keys.size;
  }

  /**
   * Runs `fn` once every earlier call on `key` has finished, a slot is free and
   * no exclusive call is running or waiting. Resolves or rejects as `fn` does.
   */
  async run<T>(key: string, fn: () => Promise<T>): Promise<T> {
    this.#accepted++;
    try {
      // Await only when there is something to wait for: a call that can start
      // now takes its key and slot synchronously, before any call made after it.
      const keyTurn = this.#takeKey(key);
      if (keyTurn) await keyTurn;
      try {
        const slot = this.#takeSlot();
        if (slot) await slot;
        try {
          return await fn();
        } finally {
          this.#running--;
        }
      } finally {
        this.#releaseKey(key);
        this.#pump();
      }
    } finally {
      this.#settled();
    }
  }

  /**
   * Runs `fn` alone: waits for the running calls to finish (calls that have not
   * started yet wait behind it), and holds back every call that arrives
   * meanwhile until `fn` settles.
   */
  async exclusive<T>(fn: () => Promise<T>): Promise<T> {
    this.#accepted++;
    try {
      await new Promise<void>((resolve) => {
        this.#exclusiveQueue.push(resolve);
        this.#pump();
      });
      try {
        return await fn();
      } finally {
        this.#exclusiveRunning = false;
        this.#pump();
      }
    } finally {
      this.#settled();
    }
  }

  /**
   * Waits until nothing is in flight (for shutdown, after new calls are
   * refused). Resolves true once idle, false if `timeoutMs` passes first.
   */
  drain(timeoutMs: number): Promise<boolean> {
    if (this.#accepted === 0) return Promise.resolve(true);
    return new Promise<boolean>((resolve) => {
      const wake = (): void => {
        clearTimeout(timer);
        resolve(true);
      };
      const timer = setTimeout(() => {
        this.#drainWaiters.delete(wake);
        resolve(false);
      }, timeoutMs);
      this.#drainWaiters.add(wake);
    });
  }

  /** Resolves when the call may act on `key`: at once if no other call holds it. */
  #takeKey(key: string): Promise<void> | undefined {
    const queue = this.#keys.get(key);
    if (queue === undefined) {
      this.#keys.set(key, []);
      return undefined;
    }
    return new Promise<void>((resolve) => queue.push(resolve));
  }

  /** Hands the key to the next call queued on it, or forgets the key. */
  #releaseKey(key: string): void {
    const queue = this.#keys.get(key);
    const next = queue?.shift();
    if (next) next();
    else this.#keys.delete(key);
  }

  /** Resolves when a slot is granted; `#running` is counted for the caller. */
  #takeSlot(): Promise<void> | undefined {
    if (this.#mayStart() && this.#slotQueue.length === 0) {
      this.#running++;
      return undefined;
    }
    return new Promise<void>((resolve) => this.#slotQueue.push(resolve));
  }

  #mayStart(): boolean {
    return (
      !this.#exclusiveRunning &&
      this.#exclusiveQueue.length === 0 &&
      this.#running < this.#maxConcurrent
    );
  }

  /** Starts whatever may start now: a waiting exclusive call first, else queued calls in order. */
  #pump(): void {
    if (this.#exclusiveRunning) return;
    if (this.#exclusiveQueue.length > 0) {
      if (this.#running === 0) {
        this.#exclusiveRunning = true;
        this.#exclusiveQueue.shift()?.();
      }
      return;
    }
    while (this.#running < this.#maxConcurrent) {
      const next = this.#slotQueue.shift();
      if (!next) break;
      this.#running++;
      next();
    }
  }

  #settled(): void {
    this.#accepted--;
    if (this.#accepted !== 0) return;
    const waiters = [...this.#drainWaiters];
    this.#drainWaiters.clear();
    for (const wake of waiters) wake();
  }
}
