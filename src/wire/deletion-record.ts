/**
 * The deletion queue: when the shim cannot reach the driver on DEL, it tears down
 * what it can, records the rest here durably and exits 0 (a DEL must never wedge a
 * pod); the driver replays every record at start, before it reports ready.
 *
 * One file per attachment, `<stateDir>/deletion-queue/<network>-<containerId>-<ifName>.json`,
 * written by temp file + rename, so a record is either whole or absent and a repeated
 * DEL of the same attachment rewrites the same record.
 */
import { type FileFormat, formatVersion } from "../common/file-format.js";
import { isObject } from "../common/json.js";

export const DELETION_QUEUE_DIR = "deletion-queue";

export interface DeletionRecord {
  kind: "cniDriverDeletionV1";
  /** The driver network ("" = the driver's default network at replay time). */
  network: string;
  containerId: string;
  ifName: string;
  netns: string;
  cniArgs: Array<[string, string]>;
  /** The runtime's stdin config, kept so the replay speaks the same CNI version. */
  cniVersion: string;
  queuedAtUnixMs: number;
}

// Exported for its tests only (support/deletion-queue.ts, unit/stale-temp-files.test.ts).
export function deletionRecordFileName(
  r: Pick<DeletionRecord, "network" | "containerId" | "ifName">,
): string {
  return `${r.network || "_default"}-${r.containerId}-${r.ifName}.json`;
}

/** The name a record is written under before its rename: never ends in `.json`. */
// Exported for its tests only (integration/driver-recovery.test.ts, support/deletion-queue.ts, unit/stale-temp-files.test.ts).
export function deletionRecordTempName(
  r: Pick<DeletionRecord, "network" | "containerId" | "ifName">,
  pid: number,
): string {
  return `.${deletionRecordFileName(r)}.${pid}.tmp`;
}

/** True for a name `deletionRecordTempName` makes: a shim's write in flight, or one a crash cut short. */
export function isDeletionRecordTempName(name: string): boolean {
  return /^\..+\.json\.\d+\.tmp$/.test(name);
}

/**
 * The record's format: its `kind` carries the version. Version 1 is what the
 * shim has written since release 0.1.0 (src/remote-plugin-shim/deletion.c).
 */
const DELETION_RECORD_FORMAT: FileFormat = {
  what: "deletion record",
  current: 1,
  declaredBy: { kindPrefix: "cniDriverDeletionV" },
};

/**
 * The record `text` (the file `path`) holds; undefined when it is not one
 * (not JSON, no container id or interface). Throws FileFormatError for a JSON
 * object of a kind this driver does not know: the caller keeps that file.
 */
export function parseDeletionRecord(path: string, text: string): DeletionRecord | undefined {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (!isObject(v)) return undefined;
  formatVersion(DELETION_RECORD_FORMAT, path, v);
  if (typeof v.containerId !== "string" || typeof v.ifName !== "string") return undefined;
  return {
    kind: "cniDriverDeletionV1",
    network: typeof v.network === "string" ? v.network : "",
    containerId: v.containerId,
    ifName: v.ifName,
    netns: typeof v.netns === "string" ? v.netns : "",
    cniArgs: Array.isArray(v.cniArgs)
      ? v.cniArgs.filter((p): p is [string, string] => Array.isArray(p) && p.length === 2)
      : [],
    cniVersion: typeof v.cniVersion === "string" ? v.cniVersion : "",
    queuedAtUnixMs: typeof v.queuedAtUnixMs === "number" ? v.queuedAtUnixMs : 0,
  };
}
