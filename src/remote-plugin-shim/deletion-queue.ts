/**
 * The shim's side of the deletion queue (src/wire/deletion-record.ts): when the
 * driver cannot be reached on DEL, the teardown it could not do is recorded here
 * and the driver replays it at start. The record must survive a node crash right
 * after the shim exits 0, so it is written to a temporary file, fsynced, renamed
 * into place and the directory fsynced: it is there whole or not at all. The
 * temporary name does not end in `.json`, so a replay never reads a partial one.
 */
import { closeSync, fsyncSync, mkdirSync, openSync, renameSync, rmSync, writeSync } from "node:fs";
import { join } from "node:path";
import {
  DELETION_QUEUE_DIR,
  type DeletionRecord,
  deletionRecordFileName,
  deletionRecordTempName,
} from "../wire/deletion-record.js";

function fsyncPath(path: string, flags: string): void {
  const fd = openSync(path, flags);
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/**
 * Writes one record durably into `<stateDir>/deletion-queue/` (created 0700) and
 * returns its path. A record for the same attachment is replaced. Throws the
 * file system's error.
 */
export function queueDeletion(stateDir: string, record: DeletionRecord): string {
  const dir = join(stateDir, DELETION_QUEUE_DIR);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const path = join(dir, deletionRecordFileName(record));
  const tmp = join(dir, deletionRecordTempName(record, process.pid));
  try {
    const fd = openSync(tmp, "w", 0o600);
    try {
      const data = Buffer.from(`${JSON.stringify(record, null, 2)}\n`);
      let written = 0;
      while (written < data.length) written += writeSync(fd, data, written);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, path);
  } catch (err) {
    rmSync(tmp, { force: true });
    throw err;
  }
  fsyncPath(dir, "r");
  return path;
}
