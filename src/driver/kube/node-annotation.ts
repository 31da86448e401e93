/**
 * The Node's `midonet.org/mac-address` annotation, kept to the MAC of the node
 * link (node-connectivity.ts) — or another annotation kept to another link's
 * MAC (the VXLAN device's `midonet.org/vtep-mac`, cluster-network/): set once the link is in place, removed when the
 * link goes — only when this process set it, or when the Node holds the
 * removed link's MAC (an earlier process's). Off the CNI path; each change is
 * retried with backoff on conflicts and outages a bounded number of times,
 * then given up until the next config load asks again, or until the node
 * link's next resync asks once `retryGivenUpAfterMs` has passed: an API outage
 * longer than the retries must not leave the Node without its annotation.
 */
import type pino from "pino";
import { type BackoffPolicy, backoffDelay } from "../../common/backoff.js";
import { ANNOTATION_MAC_ADDRESS } from "../../midonet/node-contract.js";
import type { KubeApi } from "./api.js";
import { type AnnotationWriteOutcome, isRetryable } from "./pod-annotations.js";

/**
 * What the Node's annotation should become: the MAC of the link in place, or
 * removed (`remove` is the MAC of the link that went).
 */
type AnnotationTarget = { set: string } | { remove: string };

export interface NodeMacAnnotationOptions {
  logger: pino.Logger;
  /** The API when configured (settles undefined when it is not usable). */
  api?: Promise<KubeApi | undefined>;
  /** The Node to annotate; without it (or without an API) nothing is written. */
  nodeName?: string;
  /** Between failed writes (default 200 ms doubling to 10 s). */
  backoff?: BackoffPolicy;
  /** Writes per target before giving up until the next config load (default 10). */
  attempts?: number;
  /** After giving up, a set() or remove() of the same target tries again once this has passed (default 60 s). */
  retryGivenUpAfterMs?: number;
  metrics?: { nodeAnnotationWritten(outcome: AnnotationWriteOutcome): void };
  /** The annotation kept (default `midonet.org/mac-address`, the node link's). */
  annotation?: string;
  /** What carries the MAC, for the log (default "the node link"). */
  linkDescription?: string;
}

export class NodeMacAnnotation {
  private closed = false;
  private annotating = false;
  private target: AnnotationTarget | undefined;
  /** The removal target last carried out (or found nothing of ours to remove). */
  private removed: AnnotationTarget | undefined;
  /** The target given up on; tried again after the next config load, or when asked again later. */
  private gaveUpOn: AnnotationTarget | undefined;
  private gaveUpAt = 0;
  /** The MAC this process set on the Node and saw land (undefined: none, or removed since). */
  private annotated: string | undefined;

  private readonly key: string;

  constructor(private readonly o: NodeMacAnnotationOptions) {
    this.key = o.annotation ?? ANNOTATION_MAC_ADDRESS;
  }

  /** The Node should carry `mac`. */
  set(mac: string): void {
    const t = this.target;
    if (!(t && "set" in t && t.set === mac)) this.target = { set: mac };
    this.retryGivenUpIfOld();
    this.kick();
  }

  /** Asked again, long enough after giving up: the API may be back. */
  private retryGivenUpIfOld(): void {
    if (
      this.gaveUpOn !== undefined &&
      Date.now() - this.gaveUpAt >= (this.o.retryGivenUpAfterMs ?? 60_000)
    )
      this.gaveUpOn = undefined;
  }

  /** The link whose MAC was `mac` is gone: its annotation goes, if it is ours. */
  remove(mac: string): void {
    this.target = { remove: mac };
    this.kick();
  }

  /**
   * The Node no longer carries what this process set (it was deleted and
   * registered again): the next set() writes it again.
   */
  forgetWritten(): void {
    this.annotated = undefined;
  }

  /** A new config: a write given up on may be tried again. */
  retryGivenUp(): void {
    this.gaveUpOn = undefined;
  }

  stop(): void {
    this.closed = true;
  }

  /** Whether the Node's annotation already is what `target` asks. */
  private settled(): boolean {
    const t = this.target;
    if (!t) return true;
    return "set" in t ? t.set === this.annotated : t === this.removed;
  }

  /** Starts writing the Node's annotation towards the target, unless that is under way or done. */
  kick(): void {
    if (this.annotating || this.closed || !this.o.api || !this.o.nodeName) return;
    if (this.settled() || this.target === this.gaveUpOn) return;
    this.annotating = true;
    void this.annotateLoop(this.o.api, this.o.nodeName).finally(() => {
      this.annotating = false;
      // The target may have moved after the loop's last look.
      if (!this.settled() && this.target !== this.gaveUpOn) this.kick();
    });
  }

  private async annotateLoop(apiP: Promise<KubeApi | undefined>, nodeName: string): Promise<void> {
    const api = await apiP.catch(() => undefined);
    if (!api) return;
    const max = this.o.attempts ?? 10;
    const backoff = this.o.backoff ?? { baseMs: 200, maxMs: 10_000 };
    let attempt = 0;
    let tried: AnnotationTarget | undefined;
    while (!this.closed) {
      const t = this.target;
      if (!t || this.settled() || t === this.gaveUpOn) return;
      if (t !== tried) {
        tried = t;
        attempt = 0;
      }
      try {
        if ("set" in t) {
          await api.patchNodeAnnotations(nodeName, { [this.key]: t.set });
          this.annotated = t.set;
          this.o.logger.info(
            { node: nodeName, annotation: this.key, mac: t.set },
            `node annotated with ${this.o.linkDescription ?? "the node link"}'s MAC`,
          );
        } else if (
          // Set by us in this process, or the removed link's MAC set by an earlier one.
          this.annotated === undefined &&
          (await api.readNodeAnnotations(nodeName))[this.key] !== t.remove
        ) {
          this.removed = t;
          this.o.logger.debug({ node: nodeName }, "the Node's annotation is not ours; left alone");
          continue;
        } else {
          await api.patchNodeAnnotations(nodeName, { [this.key]: null });
          this.annotated = undefined;
          this.removed = t;
          this.o.logger.info(
            { node: nodeName, annotation: this.key },
            `node annotation removed with ${this.o.linkDescription ?? "the node link"}`,
          );
        }
        this.o.metrics?.nodeAnnotationWritten("ok");
      } catch (err) {
        attempt++;
        if (!isRetryable(err) || attempt >= max) {
          this.o.metrics?.nodeAnnotationWritten("dropped");
          this.gaveUpOn = t;
          this.gaveUpAt = Date.now();
          this.o.logger.warn(
            {
              node: nodeName,
              ...("set" in t ? { mac: t.set } : { removing: t.remove }),
              attempts: attempt,
              err: (err as Error).message,
            },
            "annotating the Node failed; giving up until the next config load or link resync",
          );
          return;
        }
        this.o.metrics?.nodeAnnotationWritten("retried");
        await new Promise((r) => setTimeout(r, backoffDelay(backoff, attempt - 1)).unref());
      }
    }
  }
}
