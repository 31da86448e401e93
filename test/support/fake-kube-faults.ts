/**
 * Fault injection for the fake Kubernetes API server (fake-kube-apiserver.ts),
 * the test hook behind injectFault(): which requests a FaultSpec catches
 * (method, path pattern, watch or not, a query parameter), how many times, and
 * the Status the answer carries, worded as kube-apiserver would for that code
 * and path (the real 409 and 404 messages on an object, Retry-After details).
 * The HTTP layer asks before it routes a request.
 */
import { routeOf } from "./fake-kube-resources.js";
import { conflict, failure, notFound, objectDetails, REASONS } from "./fake-kube-status.js";
import type { FaultSpec, KubeStatus } from "./fake-kube-types.js";

export interface ActiveFault extends FaultSpec {
  remaining: number;
}

/** `*` matches anything; the rest is literal. */
function pathPattern(path: string): RegExp {
  return new RegExp(
    `^${path
      .split("*")
      .map((s) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"))
      .join(".*")}$`,
  );
}

export class FakeKubeFaults {
  private readonly faults: ActiveFault[] = [];

  /** The next `times` requests matching `spec` answer `spec.status`. */
  inject(spec: FaultSpec): void {
    this.faults.push({ ...spec, remaining: spec.times ?? 1 });
  }

  clear(): void {
    this.faults.length = 0;
  }

  /** The first fault that catches this request, counted as used; undefined when none does. */
  take(
    method: string,
    path: string,
    watch: boolean,
    query: URLSearchParams,
  ): ActiveFault | undefined {
    const idx = this.faults.findIndex(
      (f) =>
        f.remaining > 0 &&
        (f.method === undefined || f.method.toUpperCase() === method) &&
        (f.watch === undefined || f.watch === watch) &&
        (f.withParam === undefined || query.has(f.withParam)) &&
        (typeof f.path === "string" ? pathPattern(f.path).test(path) : f.path.test(path)),
    );
    if (idx < 0) return undefined;
    const fault = this.faults[idx]!;
    fault.remaining--;
    if (fault.remaining <= 0) this.faults.splice(idx, 1);
    return fault;
  }

  /** The Status a fault answers on `path`. */
  statusOf(fault: FaultSpec, path: string): KubeStatus {
    const route = routeOf(path);
    const retry =
      fault.retryAfterSeconds !== undefined ? { retryAfterSeconds: fault.retryAfterSeconds } : {};
    if (fault.status === 409 && route?.name && fault.message === undefined) {
      return conflict(route.def, route.name).status;
    }
    if (fault.status === 404 && route?.name && fault.message === undefined) {
      return notFound(route.def, route.name).status;
    }
    const message =
      fault.message ??
      (fault.status === 500
        ? "Internal error occurred: injected fault"
        : `injected fault (${fault.status})`);
    const details = route?.name ? { ...objectDetails(route.def, route.name), ...retry } : retry;
    return failure(
      fault.status,
      message,
      REASONS[fault.status] ?? "Unknown",
      Object.keys(details).length ? details : undefined,
    );
  }
}
