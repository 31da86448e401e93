/**
 * prom-client as the driver and the MidoNet controller use it: its metric classes, a
 * registry per daemon instance with the process's own series added, the latency
 * buckets, and how a measured duration is observed.
 */

import { createRequire } from "node:module";
import type * as PromClient from "prom-client";

/*
 * prom-client's classes come from their own files, not from its index: the index also
 * loads every default metric, one of which (process CPU) loads @opentelemetry/api for
 * exemplars these daemons never use. Through the index the driver's idle RSS on
 * bench/memory rose by 3 to 6 MiB (twice 74 MiB before; 77 and 79 after); this way it
 * did not measurably change (73 MiB). prom-client is pinned to an exact version, whose
 * lib/ layout this relies on; test/unit/metrics.test.ts checks these are the index's
 * classes and that the process series are all of its default metrics.
 */
const load = createRequire(import.meta.url);
const lib = <T>(file: string): T => load(`prom-client/lib/${file}.js`) as T;

export const Registry = lib<typeof PromClient.Registry>("registry");
export type Registry = PromClient.Registry;
export const Counter = lib<typeof PromClient.Counter>("counter");
export type Counter<T extends string = string> = PromClient.Counter<T>;
export const Gauge = lib<typeof PromClient.Gauge>("gauge");
export type Gauge<T extends string = string> = PromClient.Gauge<T>;
export const Histogram = lib<typeof PromClient.Histogram>("histogram");
export type Histogram<T extends string = string> = PromClient.Histogram<T>;

/** Upper bounds of the latency histograms, in seconds: 1 ms to 60 s. Dashboards use them. */
export const DURATION_BUCKETS: readonly number[] = [
  0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60,
];

/**
 * prom-client's default metrics but its process CPU one (see above), each a function
 * of (registry, config) in lib/metrics/. Resident and virtual memory, descriptors,
 * start time, event-loop delay, handles and requests, heap, Node version, GC.
 */
const DEFAULT_METRICS = [
  "processStartTime",
  "osMemoryHeap",
  "processOpenFileDescriptors",
  "processMaxFileDescriptors",
  "eventLoopLag",
  "processResources",
  "processHandles",
  "processRequests",
  "heapSizeAndUsed",
  "heapSpacesSizeAndUsed",
  "version",
  "gc",
];

/**
 * The event-loop delay monitor's sampling period. prom-client's default, 10 ms, costs
 * an idle daemon about 0.6% of a core (a timer firing 100 times a second) on every node;
 * at 100 ms it is a tenth of that, and a stall still shows when it spans a sample.
 */
const EVENT_LOOP_SAMPLING_MS = 100;

/** The CPU time the process has used since it started, as prom-client's default names it. */
function registerProcessCpu(registry: Registry): void {
  let last = { user: 0, system: 0 };
  const registers = [registry];
  // The first family's collect() moves all three: a scrape reads them in this order.
  const user: Counter = new Counter({
    name: "process_cpu_user_seconds_total",
    help: "Total user CPU time spent in seconds.",
    registers,
    collect() {
      const now = process.cpuUsage();
      const du = (now.user - last.user) / 1e6;
      const ds = (now.system - last.system) / 1e6;
      last = now;
      user.inc(du);
      system.inc(ds);
      total.inc(du + ds);
    },
  });
  const system = new Counter({
    name: "process_cpu_system_seconds_total",
    help: "Total system CPU time spent in seconds.",
    registers,
  });
  const total = new Counter({
    name: "process_cpu_seconds_total",
    help: "Total user and system CPU time spent in seconds.",
    registers,
  });
}

let processRegistry: Registry | undefined;

/**
 * The process's own series (process_resident_memory_bytes, process_cpu_seconds_total,
 * process_open_fds, nodejs_eventloop_lag_*, nodejs_heap_*, nodejs_gc_duration_seconds…),
 * collected once per process: they describe the process, not a daemon instance, and each
 * collection starts an event-loop monitor and a GC observer that are never stopped.
 */
function processMetrics(): Registry {
  if (!processRegistry) {
    const registry = new Registry();
    registerProcessCpu(registry);
    const config = { eventLoopMonitoringPrecision: EVENT_LOOP_SAMPLING_MS };
    for (const name of DEFAULT_METRICS) {
      lib<(r: Registry, c: typeof config) => void>(`metrics/${name}`)(registry, config);
    }
    processRegistry = registry;
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

/** The text exposition format these registries write (0.0.4). */
export const METRICS_CONTENT_TYPE: string = Registry.PROMETHEUS_CONTENT_TYPE;
