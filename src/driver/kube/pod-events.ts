/**
 * A Kubernetes Event on the Pod when its network setup fails, so `kubectl
 * describe pod` says which step failed, not only kubelet's generic
 * FailedCreatePodSandBox:
 *
 *   Warning  FailedSetUpNetwork  cni-driver  SetUpPod of eth0 failed while running the
 *            plugin chain: plugin type="host-local" … failed (add): no IP addresses
 *            available (CNI error 11)
 *
 * Reason `FailedSetUpNetwork`, type Warning, involvedObject the Pod (with its
 * uid when the runtime passed it), source/reportingComponent `cni-driver`.
 *
 * kubelet retries a failed sandbox every few seconds, so the same failure
 * repeats: as client-go's EventCorrelator does, a repeat for the same pod
 * within `seriesWindowMs` is one Event whose `count`, `lastTimestamp` and
 * `message` (the latest) are patched. "The same" is the same step and CNI
 * error code: messages alone differ between attempts (a fresh random MAC, a
 * new veth name), which would make every retry an Event of its own. Each pod
 * gets a small budget of API writes
 * (a token bucket) so a crash-looping pod cannot flood the API server. Events
 * are best effort: a write that fails is logged, never retried.
 */
import type pino from "pino";
import type { CoreEventBody, KubeApi } from "./api.js";
import { KubeApiError } from "./api.js";

// Exported for its tests only (integration/driver-kube.test.ts).
export const EVENT_REASON_SETUP_FAILED = "FailedSetUpNetwork";
const EVENT_COMPONENT = "cni-driver";

interface FailedSetUp {
  pod: { namespace: string; name: string; uid?: string };
  ifName: string;
  containerId: string;
  /** Where it failed, e.g. "running the plugin chain". */
  step: string;
  code: number;
  message: string;
}

/** The Event's message: the interface, the step, the CNI error and its code. */
// Exported for its tests only (integration/driver-kube.test.ts).
export function setUpFailedMessage(f: FailedSetUp): string {
  const text = `SetUpPod of ${f.ifName || "the pod interface"} failed while ${f.step}: ${f.message} (CNI error ${f.code})`;
  // Event messages are capped at 1 KiB by the API server's validation.
  return text.length > 1024 ? `${text.slice(0, 1021)}...` : text;
}

/** How one Event write ended: a new Event, a repeat counted into one, or a failure (not retried). */
export type PodEventOutcome = "created" | "updated" | "failed";

/** What the driver's metrics count of the recorder. */
export interface PodEventMetrics {
  podEventWritten(outcome: PodEventOutcome): void;
}

export interface PodEventRecorderOptions {
  api: Promise<KubeApi | undefined>;
  nodeName?: string;
  logger: pino.Logger;
  metrics?: PodEventMetrics;
  /** A repeat within this window counts into the same Event (default 10 min). */
  seriesWindowMs?: number;
  /** Writes a pod may burst (default 5) … */
  burst?: number;
  /** … and one more per this many ms (default 30 s). */
  refillMs?: number;
  now?: () => number;
}

interface Series {
  namespace: string;
  /** The latest occurrence's message. */
  message: string;
  /** The Event's name once created. */
  name?: string;
  count: number;
  /** count last written. */
  written: number;
  first: Date;
  last: Date;
  writing: boolean;
}

interface Bucket {
  tokens: number;
  at: number;
}

/** Series and buckets kept at most: an old entry is simply forgotten. */
const MAX_TRACKED = 1024;

export class PodEventRecorder {
  private readonly series = new Map<string, Series>();
  private readonly buckets = new Map<string, Bucket>();
  private readonly log: pino.Logger;
  private readonly windowMs: number;
  private readonly burst: number;
  private readonly refillMs: number;
  private readonly now: () => number;
  private closed = false;
  private writes = new Set<Promise<void>>();

  constructor(private readonly o: PodEventRecorderOptions) {
    this.log = o.logger.child({ component: "pod-events" });
    this.windowMs = o.seriesWindowMs ?? 600_000;
    this.burst = o.burst ?? 5;
    this.refillMs = o.refillMs ?? 30_000;
    this.now = o.now ?? Date.now;
  }

  /** Records a failed SetUpPod. Returns at once; the write happens later, if at all. */
  setUpFailed(f: FailedSetUp): void {
    if (this.closed) return;
    const message = setUpFailedMessage(f);
    const podKey = `${f.pod.namespace}/${f.pod.name}`;
    const key = `${podKey}\u0000${f.pod.uid ?? ""}\u0000${f.step}\u0000${f.code}`;
    const now = new Date(this.now());
    let s = this.series.get(key);
    if (s && now.getTime() - s.last.getTime() > this.windowMs) s = undefined;
    if (!s) {
      s = {
        namespace: f.pod.namespace,
        message,
        count: 0,
        written: 0,
        first: now,
        last: now,
        writing: false,
      };
      this.track(this.series, key, s);
    }
    s.count++;
    s.last = now;
    s.message = message;
    const series = s;
    const body = (): CoreEventBody => ({
      metadata: { generateName: `${f.pod.name}.` },
      involvedObject: {
        kind: "Pod",
        apiVersion: "v1",
        namespace: f.pod.namespace,
        name: f.pod.name,
        ...(f.pod.uid ? { uid: f.pod.uid } : {}),
      },
      reason: EVENT_REASON_SETUP_FAILED,
      message: series.message,
      type: "Warning",
      action: "SetUpPod",
      source: { component: EVENT_COMPONENT, ...(this.o.nodeName ? { host: this.o.nodeName } : {}) },
      reportingComponent: EVENT_COMPONENT,
      reportingInstance: this.o.nodeName
        ? `${EVENT_COMPONENT}-${this.o.nodeName}`
        : EVENT_COMPONENT,
      firstTimestamp: series.first,
      lastTimestamp: series.last,
      count: series.count,
    });
    this.schedule(podKey, series, body);
  }

  /**
   * Writes the series unless a write is running (its end looks again) or the
   * pod's budget is spent (the next failure carries the count).
   */
  private schedule(podKey: string, s: Series, body: () => CoreEventBody): void {
    if (this.closed || s.writing || s.count === s.written || !this.take(podKey)) return;
    s.writing = true;
    const write = this.write(s, body).finally(() => {
      s.writing = false;
      this.writes.delete(write);
      this.schedule(podKey, s, body);
    });
    this.writes.add(write);
  }

  /** Resolves once the writes started so far are done (tests, shutdown). */
  async flush(): Promise<void> {
    while (this.writes.size > 0) await Promise.all([...this.writes]);
  }

  close(): void {
    this.closed = true;
  }

  private async write(s: Series, body: () => CoreEventBody): Promise<void> {
    const count = s.count;
    try {
      const api = await this.o.api.catch(() => undefined);
      if (!api) return;
      let outcome: PodEventOutcome = "created";
      if (s.name) {
        try {
          await api.patchEvent(s.namespace, s.name, {
            count,
            lastTimestamp: s.last.toISOString(),
            message: s.message,
          });
          outcome = "updated";
        } catch (err) {
          // The Event expired (events live an hour): start a new one.
          if (!(err instanceof KubeApiError && err.status === 404)) throw err;
          s.name = await api.createEvent(s.namespace, body());
        }
      } else {
        s.name = await api.createEvent(s.namespace, body());
      }
      this.o.metrics?.podEventWritten(outcome);
    } catch (err) {
      this.o.metrics?.podEventWritten("failed");
      this.log.warn(
        { namespace: s.namespace, err: (err as Error).message },
        "recording an Event failed",
      );
    } finally {
      // Best effort: a failed write is not repeated; the next failure writes again.
      s.written = count;
    }
  }

  /** One write from the pod's bucket, if it has one. */
  private take(podKey: string): boolean {
    const now = this.now();
    const b = this.buckets.get(podKey) ?? { tokens: this.burst, at: now };
    const refilled = Math.min(this.burst, b.tokens + (now - b.at) / this.refillMs);
    if (refilled < 1) {
      this.track(this.buckets, podKey, { tokens: refilled, at: now });
      return false;
    }
    this.track(this.buckets, podKey, { tokens: refilled - 1, at: now });
    return true;
  }

  private track<V>(m: Map<string, V>, key: string, v: V): void {
    m.delete(key);
    m.set(key, v);
    if (m.size > MAX_TRACKED) m.delete(m.keys().next().value as string);
  }
}
