/**
 * Memory glibc keeps after it was freed, handed back to the kernel
 * (native/memory: malloc_trim). Called when the process has gone quiet: after
 * the idle collection, and once the netlink worker's isolate is freed. Without
 * the addon it does nothing.
 */
import { loadNativeAddon } from "./native-addon.js";

interface MemoryAddon {
  trim(): boolean;
}

let addon: MemoryAddon | null | undefined;

/** Gives free pages of every malloc arena back; false when none were, or there is no addon. */
export function trimMallocArenas(): boolean {
  if (addon === undefined) {
    const got = loadNativeAddon<MemoryAddon>({
      file: "build/Release/cni_driver_memory.node",
      envVar: "CNI_DRIVER_MEMORY_ADDON",
    });
    addon = "addon" in got ? got.addon : null;
  }
  return addon?.trim() ?? false;
}
