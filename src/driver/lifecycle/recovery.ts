/**
 * Start-up recovery, before the driver reports ready:
 *  1. rebuild the attachment index from the result cache (local truth);
 *  2. replay the deletion queue the shim filled while we were away (full DEL:
 *     address released, host veth removed, cache removed, index entry gone); a
 *     record that names no network is for the network its attachment is on;
 *  3. release host-local leases that no cached attachment holds, and remove host
 *     veths on our bridges that no cached attachment lists — an ADD killed
 *     half-way leaves both and no cache entry. Decided from local truth only,
 *     never from the Kubernetes API, whose pod status lags the ADD (Antrea #4326).
 * Temporary files of writes a crash cut short go too: the result cache's, and
 * the deletion queue's once older than any shim's write takes.
 */
import { existsSync } from "node:fs";
import { readdir, readFile, unlink } from "node:fs/promises";
import { join } from "node:path";
import type pino from "pino";
import { withIgnoreUnknown } from "../../cni/args.js";
import type { NetworkConfigList } from "../../cni/conflist.js";
import { removeStaleTempFiles } from "../../common/stale-temp-files.js";
import { HOST_VETH_PREFIX } from "../../midonet/host-veth-name.js";
import { listBridgePorts } from "../../plumbing/bridge.js";
import { deleteHostLink } from "../../plumbing/pod-interface.js";
import {
  DELETION_QUEUE_DIR,
  isDeletionRecordTempName,
  parseDeletionRecord,
} from "../../wire/deletion-record.js";
import { dataDirOf } from "../builtin/host-local/config.js";
import { flockAddon } from "../builtin/host-local/file-lock.js";
import { HostLocalStore, leaseOwner } from "../builtin/host-local/store.js";
import { DEFAULT_BRIDGE, MIDONET_PLUGIN_TYPE } from "../builtin/midonet-plugin.js";
import type { ChainExecutor } from "../chain/executor.js";
import type { AttachmentLocks } from "../chain/locks.js";
import { attachmentKey } from "../chain/locks.js";
import type { ResultCache } from "../chain/result-cache.js";
import type { ConfigSource } from "../config/config-source.js";
import {
  type AttachmentIndex,
  attachmentInfoFromArgs,
  type PodAttachmentInfo,
  type PodNetworkObserver,
} from "../rpc/service.js";

export interface RecoveryDeps {
  cache: ResultCache;
  executor: ChainExecutor;
  config: ConfigSource;
  locks: AttachmentLocks;
  attachments: AttachmentIndex;
  stateDir: string;
  logger: pino.Logger;
  /** Told of each replayed DEL, as of a DEL served (the pod's annotation goes with it). */
  podObserver?: PodNetworkObserver;
}

export async function recoverAtStart(d: RecoveryDeps): Promise<void> {
  for (const name of d.cache.removeTempFiles())
    d.logger.warn(
      { dir: d.cache.dir, file: name },
      "removed a cache file a crash left half-written",
    );
  // The index first: a queued DEL that names no network is for the network its attachment is on.
  for (const e of await d.cache.list()) d.attachments.add(e.networkName, e.containerId, e.ifName);
  await replayDeletionQueue(d);
  const entries = await d.cache.list();
  const cfg = d.config.current();
  if (cfg) {
    for (const list of cfg.networks.values()) {
      const held = new Set(
        entries
          .filter((e) => e.networkName === list.name)
          .map((e) => leaseOwner(e.containerId, e.ifName)),
      );
      await releaseOrphanLeases(list, held, d.logger);
    }
    await removeOrphanHostVeths(cfg.networks.values(), entries, d.logger);
  }
}

/** Host veths (`mido…`) on the kernel datapath's bridges that no cached result lists. */
async function removeOrphanHostVeths(
  lists: Iterable<NetworkConfigList>,
  entries: readonly { result?: Record<string, unknown> }[],
  logger: pino.Logger,
): Promise<void> {
  const known = new Set<string>();
  for (const e of entries) {
    const ifaces = (e.result?.interfaces ?? []) as Array<{ name?: string }>;
    for (const i of ifaces) if (i.name) known.add(i.name);
  }
  const bridges = new Set<string>();
  for (const list of lists) {
    for (const p of list.plugins) {
      if (p.type === MIDONET_PLUGIN_TYPE && (p.raw.datapath ?? "kernel") === "kernel") {
        bridges.add(typeof p.raw.bridge === "string" ? p.raw.bridge : DEFAULT_BRIDGE);
      }
    }
  }
  for (const bridge of bridges) {
    for (const port of await listBridgePorts(bridge).catch(() => [])) {
      if (!port.startsWith(HOST_VETH_PREFIX) || known.has(port)) continue;
      await deleteHostLink(port).catch(() => {});
      logger.warn({ bridge, link: port }, "removed a host veth no attachment holds");
    }
  }
}

/**
 * A shim writes and renames its record within milliseconds (an fsync or two): a
 * temporary file this old belongs to a shim that died.
 */
export const STALE_RECORD_TEMP_MS = 60_000;

export async function replayDeletionQueue(d: RecoveryDeps): Promise<number> {
  const dir = join(d.stateDir, DELETION_QUEUE_DIR);
  for (const name of removeStaleTempFiles(dir, {
    isTemp: isDeletionRecordTempName,
    olderThanMs: STALE_RECORD_TEMP_MS,
  }))
    d.logger.warn({ dir, file: name }, "removed a deletion record a shim left half-written");
  let names: string[];
  try {
    names = (await readdir(dir)).filter((n) => n.endsWith(".json"));
  } catch {
    return 0;
  }
  let replayed = 0;
  for (const name of names) {
    const path = join(dir, name);
    const record = parseDeletionRecord(await readFile(path, "utf8").catch(() => ""));
    if (!record) {
      d.logger.warn({ path }, "unreadable deletion record; removing it");
      await unlink(path).catch(() => {});
      continue;
    }
    try {
      const network = await d.locks.run(
        attachmentKey(record.containerId, record.ifName),
        async () => {
          const cfg = d.config.current();
          const on =
            record.network ||
            d.attachments.networkFor(record.containerId, record.ifName, cfg?.defaultNetwork);
          // Without a config we cannot tell the default network yet: kept for the first config load.
          if (!on) return undefined;
          await d.executor.del(cfg?.networks.get(on), on, {
            containerId: record.containerId,
            netns: record.netns,
            ifName: record.ifName,
            cniArgs: withIgnoreUnknown([...record.cniArgs]),
            capabilityArgs: {},
          });
          d.attachments.remove(on, record.containerId, record.ifName);
          return on;
        },
      );
      if (network === undefined) continue;
      await unlink(path);
      replayed++;
      tellDetached(
        d,
        attachmentInfoFromArgs(network, record.containerId, record.ifName, record.cniArgs),
      );
      d.logger.info(
        { network, containerId: record.containerId, ifName: record.ifName },
        "replayed queued deletion",
      );
    } catch (err) {
      // Kept for the next start; the DEL itself is idempotent.
      d.logger.error({ path, err: String(err) }, "replaying a queued deletion failed; keeping it");
    }
  }
  return replayed;
}

function tellDetached(d: RecoveryDeps, info: PodAttachmentInfo): void {
  try {
    d.podObserver?.detached(info);
  } catch (err) {
    d.logger.error({ err: String(err) }, "pod observer failed");
  }
}

/** host-local's lease stores of a network: one per host-local `ipam` in its chain. */
export function hostLocalStores(list: NetworkConfigList): HostLocalStore[] {
  const dirs = new Set<string>();
  for (const p of list.plugins) {
    const ipam = p.raw.ipam as Record<string, unknown> | undefined;
    if (ipam && ipam.type === "host-local") {
      dirs.add(dataDirOf(ipam));
    }
  }
  return [...dirs].map((dataDir) => new HostLocalStore(list.name, dataDir, false));
}

/** How long recovery waits for another process's hold on a network's lease lock. */
const LEASE_LOCK_TIMEOUT_MS = 30_000;

/**
 * host-local's GC with the cached attachments as the valid set, under its lock
 * when the flock addon is there (a runtime may exec host-local meanwhile), else
 * without, as before the driver had the lock.
 */
async function releaseOrphanLeases(
  list: NetworkConfigList,
  held: Set<string>,
  logger: pino.Logger,
): Promise<void> {
  for (const store of hostLocalStores(list)) {
    if (!existsSync(store.dir)) continue;
    const collect = () => store.gc(held);
    const removed =
      "addon" in flockAddon() ? await store.locked(LEASE_LOCK_TIMEOUT_MS, collect) : collect();
    for (const { ip, owner } of removed)
      logger.warn({ network: list.name, ip, owner }, "released a lease no attachment holds");
  }
}
