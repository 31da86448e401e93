/**
 * Leader election on a coordination.k8s.io/v1 Lease, the way client-go's
 * leaderelection package does it, so two controller replicas never write at
 * once:
 *
 * - A candidate reads the Lease. Absent: it creates it holding it (a 409 means
 *   another candidate was first). Held by another whose record has not changed
 *   for leaseDurationSeconds: expired, taken over by a replace carrying the
 *   resourceVersion read (a 409 means another candidate won the race).
 * - Expiry is judged on the local clock from when the record was last seen to
 *   change (client-go's observedTime), never from renewTime, so clock skew
 *   between nodes does not matter.
 * - The leader renews every renew period. A 409 on renewal (someone else wrote
 *   the Lease) ends leadership at once; other failures are retried, and if no
 *   renewal succeeded within the renew deadline (shorter than the lease
 *   duration) leadership ends too, before any other candidate may take over.
 *   The deadline counts from when the successful attempt began, not from its
 *   answer: others judge expiry from when the write happened, and a slow answer
 *   must not stretch our leadership past theirs.
 * - Every Lease call has a timeout (the lease duration less the renew deadline,
 *   at most the deadline): client-node sets none, and one call that never
 *   answers would hold the loop, so that the candidate never campaigned again
 *   and stop() never returned.
 * - Ending leadership calls onStoppedLeading synchronously: the caller stops
 *   every write there. stop() releases a held Lease (holder cleared, duration
 *   1 s) so a successor need not wait out the lease.
 */
import { setTimeout as sleep } from "node:timers/promises";
import {
  ApiException,
  type CoordinationV1Api,
  Observable,
  type V1Lease,
  V1MicroTime,
} from "@kubernetes/client-node";
import type { Logger } from "pino";
import { callDeadline } from "../../common/kube-call-deadline.js";
import { describeKubeError } from "../../common/kube-errors.js";

export interface LeaderElectionOptions {
  api: CoordinationV1Api;
  namespace: string;
  name: string;
  /** This candidate: the pod name, or hostname and pid. */
  identity: string;
  /** How long a Lease not renewed stays held (leaseDurationSeconds, rounded up to whole seconds). */
  leaseDurationMs: number;
  /** How often the leader renews, and a candidate tries. */
  renewPeriodMs: number;
  /** The leader gives up when no renewal succeeded for this long (< leaseDurationMs). */
  renewDeadlineMs: number;
  onStartedLeading: () => void;
  onStoppedLeading: (reason: string) => void;
  logger?: Pick<Logger, "info" | "warn" | "debug">;
  /** Called on every failed Lease call (metrics). */
  onError?: (err: unknown) => void;
  now?: () => number;
}

type Attempt = "leading" | "held-by-other" | "conflict" | "error";

function statusOf(err: unknown): number | undefined {
  return err instanceof ApiException ? err.code : undefined;
}

export class LeaderElector {
  private readonly o: LeaderElectionOptions;
  private readonly now: () => number;
  private leading = false;
  private stopped = false;
  private lastRenew = 0;
  /** The record last seen (its resourceVersion) and when it was seen to change. */
  private observedVersion: string | undefined;
  private observedAt = 0;
  private current: V1Lease | undefined;
  private readonly wake = new AbortController();
  /** Ends leadership when no renewal lands in time, even while a Lease call hangs. */
  private deadline: NodeJS.Timeout | undefined;
  private loop: Promise<void> | undefined;
  private readonly callOptions: ReturnType<typeof callDeadline>;

  constructor(options: LeaderElectionOptions) {
    if (options.renewDeadlineMs >= options.leaseDurationMs) {
      throw new Error("the renew deadline must be shorter than the lease duration");
    }
    this.o = options;
    this.now = options.now ?? Date.now;
    // Every Lease call's deadline (each call gets a fresh timer from it).
    this.callOptions = callDeadline(
      Observable,
      Math.min(
        options.renewDeadlineMs,
        Math.max(100, options.leaseDurationMs - options.renewDeadlineMs),
      ),
    );
  }

  get isLeader(): boolean {
    return this.leading;
  }

  /** The Lease's holder as last read. */
  get holder(): string | undefined {
    return this.current?.spec?.holderIdentity ?? undefined;
  }

  start(): void {
    this.loop ??= this.run();
  }

  /** Stops campaigning; a held Lease is released first. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    this.wake.abort();
    await this.loop;
    clearTimeout(this.deadline);
    if (this.leading) {
      this.step("stopping");
      await this.release();
    }
  }

  private get leaseSeconds(): number {
    return Math.max(1, Math.ceil(this.o.leaseDurationMs / 1000));
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      const began = this.now();
      let result = await this.tryAcquireOrRenew();
      if (this.stopped) break;
      const now = this.now();
      // Held since the write, as others see it: an answer later than the deadline is no renewal.
      if (result === "leading" && now - began >= this.o.renewDeadlineMs) result = "error";
      if (result === "leading") {
        this.lastRenew = began;
        clearTimeout(this.deadline);
        this.deadline = setTimeout(
          () => this.step(`no renewal for ${this.o.renewDeadlineMs} ms`),
          this.o.renewDeadlineMs - (now - began),
        );
        if (!this.leading) {
          this.leading = true;
          this.o.logger?.info({ lease: this.o.name, identity: this.o.identity }, "started leading");
          this.o.onStartedLeading();
        }
      } else if (this.leading) {
        if (result === "conflict" || result === "held-by-other") {
          this.step(`the lease was taken (${result})`);
        } else if (now - this.lastRenew >= this.o.renewDeadlineMs) {
          this.step(`no renewal for ${now - this.lastRenew} ms`);
        }
      }
      // A leader whose renewal failed tries again sooner, to keep within the deadline.
      const wait =
        this.leading && result !== "leading"
          ? Math.max(10, Math.min(this.o.renewPeriodMs, this.o.renewDeadlineMs / 4))
          : this.o.renewPeriodMs;
      try {
        await sleep(wait, undefined, { signal: this.wake.signal });
      } catch {
        // stop() woke us
      }
    }
  }

  /** Leadership ends now. */
  private step(reason: string): void {
    clearTimeout(this.deadline);
    if (!this.leading) return;
    this.leading = false;
    this.o.logger?.warn(
      { lease: this.o.name, identity: this.o.identity, reason },
      "stopped leading",
    );
    this.o.onStoppedLeading(reason);
  }

  private observe(lease: V1Lease): void {
    const version = lease.metadata?.resourceVersion;
    if (version !== this.observedVersion) {
      this.observedVersion = version;
      this.observedAt = this.now();
    }
    this.current = lease;
  }

  private async tryAcquireOrRenew(): Promise<Attempt> {
    const { api, namespace, name, identity } = this.o;
    let lease: V1Lease;
    try {
      lease = await api.readNamespacedLease({ name, namespace }, this.callOptions);
    } catch (err) {
      if (statusOf(err) !== 404) return this.failed("read", err);
      const now = new V1MicroTime();
      try {
        const created = await api.createNamespacedLease(
          {
            namespace,
            body: {
              metadata: { name, namespace },
              spec: {
                holderIdentity: identity,
                leaseDurationSeconds: this.leaseSeconds,
                acquireTime: now,
                renewTime: now,
                leaseTransitions: 0,
              },
            },
          },
          this.callOptions,
        );
        this.observe(created);
        return "leading";
      } catch (createErr) {
        return statusOf(createErr) === 409 ? "conflict" : this.failed("create", createErr);
      }
    }
    this.observe(lease);
    const spec = lease.spec ?? {};
    const holder = spec.holderIdentity ?? "";
    const mine = holder === identity;
    const durationMs = (spec.leaseDurationSeconds ?? this.leaseSeconds) * 1000;
    if (!mine && holder !== "" && this.observedAt + durationMs > this.now()) {
      return "held-by-other";
    }
    const now = new V1MicroTime();
    const body: V1Lease = {
      ...lease,
      spec: {
        ...spec,
        holderIdentity: identity,
        leaseDurationSeconds: this.leaseSeconds,
        renewTime: now,
        acquireTime: mine && spec.acquireTime ? spec.acquireTime : now,
        leaseTransitions: (spec.leaseTransitions ?? 0) + (mine ? 0 : 1),
      },
    };
    try {
      const updated = await api.replaceNamespacedLease({ name, namespace, body }, this.callOptions);
      this.observe(updated);
      if (!mine) {
        this.o.logger?.info({ lease: name, previous: holder || undefined }, "acquired the lease");
      }
      return "leading";
    } catch (err) {
      return statusOf(err) === 409 ? "conflict" : this.failed("update", err);
    }
  }

  private failed(what: string, err: unknown): Attempt {
    this.o.onError?.(err);
    this.o.logger?.warn(
      { lease: this.o.name, err: describeKubeError(err) },
      `lease ${what} failed`,
    );
    return "error";
  }

  /** Hands the Lease back: no holder, 1 s duration, so a successor takes over at once. */
  private async release(): Promise<void> {
    const lease = this.current;
    if (!lease?.spec) return;
    const { holderIdentity: _, ...spec } = lease.spec;
    try {
      const released = await this.o.api.replaceNamespacedLease(
        {
          name: this.o.name,
          namespace: this.o.namespace,
          body: {
            ...lease,
            spec: { ...spec, leaseDurationSeconds: 1, renewTime: new V1MicroTime() },
          },
        },
        this.callOptions,
      );
      this.observe(released);
      this.o.logger?.info({ lease: this.o.name }, "released the lease");
    } catch (err) {
      this.failed("release", err);
    }
  }
}
