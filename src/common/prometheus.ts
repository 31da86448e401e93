/**
 * What the driver's and the MidoNet controller's metrics share: a registry per
 * daemon instance with the process's own series added, the latency buckets, and
 * how a measured duration is observed.
 */

import { collectDefaultMetrics, Registry } from "prom-client";

/** Upper bounds of the latency histograms, in seconds: 1 ms to 60 s. Dashboards use them. */
export const DURATION_BUCKETS: readonly number[] = [
  0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60,
];

/**
 * The event-loop delay monitor's sampling period. prom-client's default, 10 ms, costs
 * an idle daemon about 0.6% of a core (a timer firing 100 times a second) on every node;
 * at 100 ms it is a tenth of that, and a stall still shows when it spans a sample.
 */
const EVENT_LOOP_SAMPLING_MS = 100;

let processRegistry: Registry | undefined;

/**
 * The process's own series (process_resident_memory_bytes, process_cpu_seconds_total,
 * process_open_fds, nodejs_eventloop_lag_*, nodejs_heap_*, nodejs_gc_duration_seconds…),
 * collected once per process: they describe the process, not a daemon instance, and each
 * collection starts an event-loop monitor and a GC observer that are never stopped.
 */
function processMetrics(): Registry {
  if (!processRegistry) {
    processRegistry = new Registry();
    collectDefaultMetrics({
      register: processRegistry,
      eventLoopMonitoringPrecision: EVENT_LOOP_SAMPLING_MS,
    });
  }
  return processRegistry;
}

/**
 * What one daemon instance serves on /metrics: its own registry (filled by the caller
 * before this), followed by the process's series. Each instance has its own registry
 * rather than prom-client's global one because tests run several drivers or
 * controllers in one process, and each must count only its own calls (the global
 * registry would also refuse a second metric of the same name). A deployed process
 * runs one instance, so it has one registry.
 */
export function withProcessMetrics(instance: Registry): Registry {
  return Registry.merge([instance, processMetrics()]);
}

/**
 * A duration as a histogram takes it: a clock step can yield a negative or NaN one
 * (which prom-client refuses); it still counts, as zero.
 */
export function observableSeconds(seconds: number): number {
  return Number.isFinite(seconds) && seconds > 0 ? seconds : 0;
}
