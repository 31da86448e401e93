/**
 * Start-up recovery, before the driver reports ready:
 *  1. rebuild the attachment index from the result cache (local truth);
 *  2. replay the deletion queue the shim filled while we were away (full DEL:
 *     address released, host veth removed, cache removed, index entry gone); a
 *     record that names no network is for the network its attachment is on;
 *  3. each built-in plugin's recover(): what an ADD killed half-way left and no
 *     cache entry lists (host-local's leases, the midonet plugin's host veths).
 *     Decided from local truth only, never from the Kubernetes API, whose pod
 *     status lags the ADD (Antrea #4326).
 * Temporary files of writes a crash cut short go too: the result cache's, and
 * the deletion queue's once older than any shim's write takes.
 */
import { readdir, readFile, unlink } from "node:fs/promises";
import { join } from "node:path";
import type pino from "pino";
import { withIgnoreUnknown } from "../../cni/args.js";
import { messageOf } from "../../common/errors.js";
import { removeStaleTempFiles } from "../../common/stale-temp-files.js";
import {
  DELETION_QUEUE_DIR,
  isDeletionRecordTempName,
  parseDeletionRecord,
} from "../../wire/deletion-record.js";
import type { ChainExecutor } from "../chain/executor.js";
import type { AttachmentLocks } from "../chain/locks.js";
import { attachmentKey } from "../chain/locks.js";
import type { BuiltinPlugin, RecoveryView } from "../chain/plugin-runner.js";
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
  /** The built-in plugins, each told to clean up after ADDs a crash cut short. */
  recoverers: readonly BuiltinPlugin[];
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
  const cfg = d.config.current();
  if (!cfg) return;
  const { attachments, unknownFormat } = await d.cache.scan();
  if (unknownFormat.length > 0) {
    // Their attachments hold leases and links this driver cannot tell: releasing "unused" ones would take them.
    d.logger.error(
      { files: unknownFormat.map((e) => e.path) },
      "the result cache holds files of a newer format: the clean-up of what a crash left is skipped",
    );
    return;
  }
  const view: RecoveryView = {
    networks: [...cfg.networks.values()],
    attachments,
    logger: d.logger,
  };
  for (const plugin of d.recoverers) await plugin.recover?.(view);
}

/**
 * A shim writes and renames its record within milliseconds (an fsync or two): a
 * temporary file this old belongs to a shim that died.
 */
const STALE_RECORD_TEMP_MS = 60_000;

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
    let record: ReturnType<typeof parseDeletionRecord>;
    try {
      record = parseDeletionRecord(path, await readFile(path, "utf8").catch(() => ""));
    } catch (err) {
      // A newer shim's or driver's record: kept for a driver that knows it, its DEL not guessed at.
      d.logger.error(
        { path, err: messageOf(err) },
        "deletion record of a format this driver does not know; kept",
      );
      continue;
    }
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
