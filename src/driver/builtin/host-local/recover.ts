/**
 * host-local's part of start-up recovery: leases that no cached attachment
 * holds are released, as host-local's GC does with the cache as the valid
 * set. An ADD killed half-way leaves a lease and no cache entry. The lease
 * files are the same whether host-local runs in-process or is exec'd, so this
 * runs either way.
 */
import { existsSync } from "node:fs";
import type { NetworkConfigList } from "../../../cni/conflist.js";
import type { RecoveryView } from "../../chain/plugin-runner.js";
import { dataDirOf } from "./config.js";
import { flockAddon } from "./file-lock.js";
import { HostLocalStore, leaseOwner } from "./store.js";

/** How long recovery waits for another process's hold on a network's lease lock. */
const LEASE_LOCK_TIMEOUT_MS = 30_000;

export async function releaseOrphanLeases(view: RecoveryView): Promise<void> {
  for (const list of view.networks) {
    const held = new Set(
      view.attachments
        .filter((e) => e.networkName === list.name)
        .map((e) => leaseOwner(e.containerId, e.ifName)),
    );
    for (const store of hostLocalStores(list)) {
      if (!existsSync(store.dir)) continue;
      // Under the network's lock when the flock addon is there (a runtime may
      // exec host-local meanwhile), else without, as host-local itself would.
      const collect = () => store.gc(held);
      const removed =
        "addon" in flockAddon() ? await store.locked(LEASE_LOCK_TIMEOUT_MS, collect) : collect();
      for (const { ip, owner } of removed)
        view.logger.warn({ network: list.name, ip, owner }, "released a lease no attachment holds");
    }
  }
}

/** host-local's lease stores of a network: one per host-local `ipam` in its chain. */
function hostLocalStores(list: NetworkConfigList): HostLocalStore[] {
  const dirs = new Set<string>();
  for (const p of list.plugins) {
    const ipam = p.raw.ipam as Record<string, unknown> | undefined;
    if (ipam && ipam.type === "host-local") dirs.add(dataDirOf(ipam));
  }
  return [...dirs].map((dataDir) => new HostLocalStore(list.name, dataDir, false));
}
