/**
 * One job applied again and again, never two runs at once: asked while a run
 * is under way, it runs once more after it; a run that failed is retried after
 * a backoff; one that worked is repeated every `resyncMs` (flagged as a
 * resync), so that what someone else removed behind the driver's back comes
 * back without waiting for new input. The node link (node-connectivity.ts)
 * and the cluster network (cluster-network/) apply their state this way.
 */
import { type BackoffPolicy, backoffDelay } from "./backoff.js";

export interface SerialLoopOptions {
  /** One run; `resync`: started by the resync timer. Ends with succeeded() or failed(). */
  run: (resync: boolean) => Promise<void>;
  /** Between runs that worked; 0 or absent: none. */
  resyncMs?: number;
  retryBackoff: BackoffPolicy;
}

export class SerialLoop {
  private running = false;
  private again = false;
  private attempt = 0;
  private retryTimer: NodeJS.Timeout | undefined;
  private resyncTimer: NodeJS.Timeout | undefined;
  private resyncNext = false;
  private stopped = false;

  constructor(private readonly o: SerialLoopOptions) {}

  /** New input: runs now (or once more after the run under way); a pending retry is dropped and the backoff starts over. */
  restart(): void {
    if (this.stopped) return;
    this.attempt = 0;
    this.resyncNext = false;
    clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    clearTimeout(this.resyncTimer);
    this.resyncTimer = undefined;
    this.kick();
  }

  /** Runs now, or once more after the run under way, keeping the backoff as it is. */
  kick(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = true;
    const resync = this.resyncNext;
    this.resyncNext = false;
    void this.o.run(resync).finally(() => {
      this.running = false;
      if (this.again && !this.stopped) {
        this.again = false;
        this.kick();
      }
    });
  }

  /**
   * The run worked: the next resync `resyncMs` after it ends (so runs never
   * overlap, each bounded by the plumbing's own exec timeouts).
   */
  succeeded(): void {
    this.attempt = 0;
    const ms = this.o.resyncMs ?? 0;
    if (ms <= 0 || this.stopped) return;
    clearTimeout(this.resyncTimer);
    this.resyncTimer = setTimeout(() => {
      this.resyncTimer = undefined;
      // A load or a retry under way re-applies anyway, and schedules the next resync.
      if (this.stopped || this.running || this.retryTimer) return;
      this.resyncNext = true;
      this.kick();
    }, ms);
    this.resyncTimer.unref();
  }

  /** The run failed: retried after the backoff, whose delay (ms) is answered. */
  failed(): number {
    const delay = backoffDelay(this.o.retryBackoff, this.attempt++);
    if (this.stopped) return delay;
    clearTimeout(this.retryTimer);
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      this.kick();
    }, delay);
    this.retryTimer.unref();
    return delay;
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    clearTimeout(this.resyncTimer);
    this.resyncTimer = undefined;
  }
}
