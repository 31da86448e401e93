/**
 * Pod annotations written after the fact: `midonet.org/mac-address` set to the
 * MAC of the pod's interface once ADD has answered, removed once DEL has.
 *
 * Nothing here is on the CNI path: a pod's setup never waits on the API server
 * for a call it can do without. Each change is queued; per pod only the latest wanted
 * value of each key is kept (an ADD and DEL in quick succession coalesce into
 * whatever is wanted last); a few patches run at once; a failed patch is
 * retried with backoff a bounded number of times: 409 (a patch losing a race),
 * 429, 5xx and no answer at all are retried, 404 means the pod is gone (nothing
 * to annotate), anything else (400, 403 …) is a mistake retrying will not fix.
 *
 * A patch carries the pod's uid when the runtime gave it (K8S_POD_UID) as a
 * precondition: a pod of the same name recreated meanwhile, perhaps on another
 * node (a StatefulSet's pod after its node failed), refuses it, and so is never
 * annotated, nor has its annotation removed, for an older sandbox's sake.
 */
import type pino from "pino";
import { toResult100 } from "../../cni/result-convert.js";
import type { AnyResult } from "../../cni/types.js";
import { type BackoffPolicy, backoffDelay } from "../../common/backoff.js";
import type { KubeApi } from "./api.js";
import { isUidMismatch, KubeApiError } from "./api.js";

/**
 * The interface the annotation describes: the pod's primary one, which kubelet
 * always names eth0. An attachment of another interface (a second network's
 * net1) neither sets it nor, torn down, removes it.
 */
export const ANNOTATED_IF_NAME = "eth0";

export interface PodRef {
  namespace: string;
  name: string;
  /** The pod's uid, when known: sent as the patch's precondition. */
  uid?: string;
}

/**
 * The MAC of the attachment's interface inside the pod: the result's interface
 * named `ifName` with a sandbox, else the first interface with a sandbox.
 */
export function podInterfaceMac(result: AnyResult, ifName: string): string | undefined {
  let interfaces: { name: string; mac?: string; sandbox?: string }[];
  try {
    interfaces = toResult100(result).interfaces ?? [];
  } catch {
    return undefined;
  }
  const inPod = interfaces.filter((i) => i.sandbox);
  const mac = (inPod.find((i) => i.name === ifName) ?? inPod[0])?.mac;
  return mac ? mac.toLowerCase() : undefined;
}

/** Retry 409, 429, 5xx and no answer; 404 and the other 4xx are final. */
export function isRetryable(err: unknown): boolean {
  const status = err instanceof KubeApiError ? err.status : undefined;
  if (status === undefined) return true;
  return status === 409 || status === 429 || status >= 500;
}

/**
 * How one annotation write ended: landed, failed and to be retried, given up,
 * or (pods only) not needed any more because the object is gone.
 */
export type AnnotationWriteOutcome = "ok" | "retried" | "dropped" | "gone";

/** What the driver's metrics count of the queue. */
export interface PodAnnotationMetrics {
  podAnnotationPatched(outcome: AnnotationWriteOutcome): void;
}

export interface AnnotationQueueOptions {
  api: Promise<KubeApi | undefined>;
  logger: pino.Logger;
  metrics?: PodAnnotationMetrics;
  /**
   * Attempts per change before it is dropped (default 40: with the default
   * backoff, about 16 minutes, longer than an API server's restart or upgrade;
   * nothing writes a dropped change again).
   */
  maxAttempts?: number;
  /** Between attempts (default 100 ms doubling to 30 s). */
  backoff?: BackoffPolicy;
  /** Patches in flight at once (default 4). */
  concurrency?: number;
}

interface Pending {
  pod: PodRef;
  /** key → value wanted (null: absent). */
  want: Record<string, string | null>;
  attempt: number;
  /** Waiting out a backoff. */
  timer?: NodeJS.Timeout;
}

export class PodAnnotationQueue {
  private readonly pending = new Map<string, Pending>();
  /** Pods whose patch is in flight, and what arrived for them meanwhile. */
  private readonly inFlight = new Map<string, Pending | undefined>();
  /** Pods ready to go, in arrival order. */
  private readonly ready: string[] = [];
  private running = 0;
  private closed = false;
  private readonly maxAttempts: number;
  private readonly backoff: BackoffPolicy;
  private readonly concurrency: number;
  private readonly log: pino.Logger;
  private idleWaiters: (() => void)[] = [];

  constructor(private readonly o: AnnotationQueueOptions) {
    this.maxAttempts = o.maxAttempts ?? 40;
    this.backoff = o.backoff ?? { baseMs: 100, maxMs: 30_000 };
    this.concurrency = o.concurrency ?? 4;
    this.log = o.logger.child({ component: "pod-annotations" });
  }

  /** Wants `key` = `value` on the pod (null: removed). Returns at once. */
  set(pod: PodRef, key: string, value: string | null): void {
    if (this.closed) return;
    const id = `${pod.namespace}/${pod.name}`;
    if (this.inFlight.has(id)) {
      // Sent after the running patch; the newest wish per key wins, for the newest pod.
      const next = this.inFlight.get(id) ?? { pod, want: {}, attempt: 0 };
      next.pod = pod;
      next.want[key] = value;
      this.inFlight.set(id, next);
      return;
    }
    const p = this.pending.get(id);
    if (p) {
      p.pod = pod;
      p.want[key] = value;
      p.attempt = 0;
      return;
    }
    this.pending.set(id, { pod, want: { [key]: value }, attempt: 0 });
    this.ready.push(id);
    this.pump();
  }

  /** Pods with a change not yet written. */
  get size(): number {
    return this.pending.size + this.inFlight.size;
  }

  /** Resolves once nothing is pending or in flight (shutdown waits on it, bounded). */
  idle(): Promise<void> {
    if (this.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** Drops what is still queued; patches in flight finish on their own. */
  close(): void {
    this.closed = true;
    for (const p of this.pending.values()) if (p.timer) clearTimeout(p.timer);
    this.pending.clear();
    this.ready.length = 0;
    this.checkIdle();
  }

  private pump(): void {
    while (!this.closed && this.running < this.concurrency && this.ready.length > 0) {
      const id = this.ready.shift() as string;
      const p = this.pending.get(id);
      if (!p) continue;
      this.pending.delete(id);
      this.inFlight.set(id, undefined);
      this.running++;
      void this.send(id, p).finally(() => {
        this.running--;
        const next = this.inFlight.get(id);
        this.inFlight.delete(id);
        if (next && !this.closed) {
          this.pending.set(id, next);
          this.ready.push(id);
        }
        this.pump();
        this.checkIdle();
      });
    }
  }

  private async send(id: string, p: Pending): Promise<void> {
    const api = await this.o.api.catch(() => undefined);
    if (!api) return;
    try {
      await api.patchPodAnnotations(
        { namespace: p.pod.namespace, name: p.pod.name },
        p.want,
        p.pod.uid,
      );
      this.o.metrics?.podAnnotationPatched("ok");
      this.log.debug({ pod: id, annotations: p.want }, "pod annotated");
    } catch (err) {
      const status = err instanceof KubeApiError ? err.status : undefined;
      if (status === 404 || isUidMismatch(err)) {
        this.o.metrics?.podAnnotationPatched("gone");
        this.log.debug(
          { pod: id, uid: p.pod.uid, err: (err as Error).message },
          "pod gone or replaced; annotation dropped",
        );
        return;
      }
      p.attempt++;
      if (!isRetryable(err) || p.attempt >= this.maxAttempts) {
        this.o.metrics?.podAnnotationPatched("dropped");
        this.log.warn(
          { pod: id, annotations: p.want, attempts: p.attempt, err: (err as Error).message },
          "annotating the pod failed; giving up",
        );
        return;
      }
      this.retryLater(id, p, err);
    }
  }

  private retryLater(id: string, p: Pending, err: unknown): void {
    if (this.closed) return;
    this.o.metrics?.podAnnotationPatched("retried");
    // A change that arrived meanwhile carries the newer wish; it goes instead, at the backoff.
    const newer = this.inFlight.get(id);
    if (newer) {
      for (const [k, v] of Object.entries(newer.want)) p.want[k] = v;
      p.pod = newer.pod;
      this.inFlight.set(id, undefined);
    }
    const server = err instanceof KubeApiError ? err.retryAfterMs : undefined;
    const delay = Math.max(
      backoffDelay(this.backoff, p.attempt - 1),
      Math.min(server ?? 0, this.backoff.maxMs),
    );
    this.log.debug(
      { pod: id, attempt: p.attempt, delayMs: delay, err: (err as Error).message },
      "retrying the annotation",
    );
    this.pending.set(id, p);
    p.timer = setTimeout(() => {
      p.timer = undefined;
      if (this.pending.get(id) !== p) return;
      this.ready.push(id);
      this.pump();
    }, delay);
    p.timer.unref();
  }

  private checkIdle(): void {
    if (this.size > 0) return;
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const w of waiters) w();
  }
}
