/**
 * A full garbage collection once the driver has gone quiet after a burst of
 * calls. Node tells V8 nothing of idleness, so the garbage of a burst (each call
 * allocates its requests, results, plugin I/O and log lines) stays in a heap
 * grown to hold it until allocation pressure comes back, and that can be never
 * on an idle node: measured, 3,000 ADD/DEL cycles left the heap's pages at
 * 58 MiB where they started at 25 (bench/memory). One collection a quiet moment
 * after the last call gives those pages back; on a busy driver it never runs,
 * since every call puts it off again.
 */
import { releaseIdleMemory } from "../../common/malloc-trim.js";

export interface IdleCollector {
  /** A call ended: collect once `quietMs` pass without another. */
  activity(): void;
  stop(): void;
}

export function idleCollector(quietMs: number, gc = releaseIdleMemory()): IdleCollector {
  let timer: NodeJS.Timeout | undefined;
  const collect = (): void => {
    timer = undefined;
    gc();
  };
  return {
    activity() {
      if (timer) timer.refresh();
      else {
        timer = setTimeout(collect, quietMs);
        timer.unref();
      }
    },
    stop() {
      if (timer) clearTimeout(timer);
      timer = undefined;
    },
  };
}
