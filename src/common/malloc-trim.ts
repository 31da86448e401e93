/**
 * Memory glibc keeps after it was freed, handed back to the kernel
 * (native/memory: malloc_trim), and V8's full collection before it. Called
 * when the process has gone quiet (the idle collection), once the netlink
 * worker's isolate is freed, and after a whole Services table was written.
 * Without the addon the trim does nothing.
 */
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { addonOnce, addonOrNull } from "./native-addon.js";

interface MemoryAddon {
  trim(): boolean;
}

const loadMemoryAddon = addonOnce<MemoryAddon>({
  file: "build/Release/cni_driver_memory.node",
  envVar: "CNI_DRIVER_MEMORY_ADDON",
});

/** Gives free pages of every malloc arena back; false when none were, or there is no addon. */
export function trimMallocArenas(): boolean {
  return addonOrNull(loadMemoryAddon())?.trim() ?? false;
}

/** The gc() that `--expose-gc` makes; V8 reads the options object (older V8s ignore it). */
type Gc = (options?: {
  type?: "major" | "minor";
  execution?: "sync" | "async";
  flavor?: "regular" | "last-resort";
}) => void;

/**
 * V8's memory-reducing collection, then the pages glibc keeps free handed back
 * (above). A plain gc() leaves the heap pages it freed pooled in V8 and resident:
 * on Node 24, 150 MiB of 250 after dropping two thirds of a large heap, 56 MiB
 * after a 10,000-Service table was written. "last-resort" compacts and releases
 * them; it costs a few full collections, paid only when the process is quiet.
 */
export function releaseIdleMemory(): () => void {
  const gc = exposedGc();
  return () => {
    gc({ type: "major", execution: "sync", flavor: "last-resort" });
    trimMallocArenas();
  };
}

/**
 * V8's gc(): the global that `--expose-gc` (the driver's shebang) makes, or, where
 * the flag is missing (a test's own process), one reached through a new context.
 */
// Exported for its tests only (unit/idle-gc.test.ts).
export function exposedGc(): Gc {
  const existing = (globalThis as { gc?: Gc }).gc;
  if (typeof existing === "function") return existing;
  setFlagsFromString("--expose-gc");
  return runInNewContext("gc") as Gc;
}
