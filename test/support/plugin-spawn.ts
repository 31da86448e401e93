/**
 * Running plugins in tests: which way they are started (useSpawn), and a
 * bounded burst of concurrent execPlugin calls whose outcomes are plain data,
 * so that a burst run in another process reports the same way as one run here.
 */
import { expect } from "chai";
import { type ExecRequest, execPlugin } from "../../src/driver/chain/plugin-exec.js";
import {
  type SpawnBackend,
  type SpawnBackendName,
  spawnBackend,
} from "../../src/driver/chain/plugin-process.js";

/**
 * The implementation a suite starts its plugins with, as the daemon would
 * choose it with CNI_DRIVER_SPAWN=`backend`; "native" needs the spawn addon
 * (scripts/build-native.sh): skipped without it outside CI, a failure in CI.
 */
export function useSpawn(ctx: Mocha.Context, backend: SpawnBackendName): SpawnBackend {
  try {
    const chosen = spawnBackend(backend);
    expect(chosen.name).to.equal(backend);
    return chosen;
  } catch (err) {
    if (process.env.CI === "true") throw err;
    console.warn(`    [skipped: requirement missing: ${(err as Error).message}]`);
    ctx.skip();
  }
}

/** One call of a burst: a request that survives JSON, and when to abort it. */
export interface BurstCall {
  request: Omit<ExecRequest, "signal" | "onStderr" | "spawn">;
  /** Aborts the call through an AbortSignal this long after it starts. */
  abortAfterMs?: number;
}

/** How one call settled, and how long it took from its start. */
export type BurstOutcome =
  | { ms: number; settled: "value"; value: unknown }
  | {
      ms: number;
      settled: "error";
      error: { name: string; code?: number; message: string; details?: string };
    };

export interface Burst {
  /** One entry per call, in the order of the calls, set as each call settles. */
  outcomes: (BurstOutcome | undefined)[];
  /** The most calls that were running at once. */
  maxInFlight: number;
  /** Resolves once every call has settled; never rejects. */
  done: Promise<void>;
}

/** Runs `calls` in order, at most `inFlight` at once, each started through `spawn`. */
export function startBurst(
  calls: readonly BurstCall[],
  inFlight: number,
  spawn: SpawnBackend,
): Burst {
  const burst: Burst = {
    outcomes: calls.map(() => undefined),
    maxInFlight: 0,
    done: Promise.resolve(),
  };
  let next = 0;
  let running = 0;
  const runOne = async (call: BurstCall): Promise<BurstOutcome> => {
    const controller = call.abortAfterMs === undefined ? undefined : new AbortController();
    const abortTimer =
      controller && setTimeout(() => controller.abort(), call.abortAfterMs as number);
    const started = Date.now();
    try {
      const value = await execPlugin({ ...call.request, spawn, signal: controller?.signal });
      return { ms: Date.now() - started, settled: "value", value };
    } catch (err) {
      const e = err as { name?: string; code?: unknown; message?: string; details?: unknown };
      return {
        ms: Date.now() - started,
        settled: "error",
        error: {
          name: String(e.name),
          code: typeof e.code === "number" ? e.code : undefined,
          message: String(e.message),
          details: typeof e.details === "string" ? e.details : undefined,
        },
      };
    } finally {
      clearTimeout(abortTimer);
    }
  };
  const worker = async (): Promise<void> => {
    while (next < calls.length) {
      const index = next++;
      running++;
      burst.maxInFlight = Math.max(burst.maxInFlight, running);
      burst.outcomes[index] = await runOne(calls[index] as BurstCall);
      running--;
    }
  };
  burst.done = Promise.all(Array.from({ length: inFlight }, worker)).then(() => undefined);
  return burst;
}
