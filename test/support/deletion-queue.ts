/**
 * Writes a deletion record as the shim does when the driver cannot take a DEL
 * (src/remote-plugin-shim/deletion.c; format in src/wire/deletion-record.ts), for
 * tests that queue a teardown without exec'ing the shim: temporary file, fsync,
 * rename, fsync of the directory.
 */
import { closeSync, fsyncSync, mkdirSync, openSync, renameSync, rmSync, writeSync } from "node:fs";
import { join } from "node:path";
import {
  DELETION_QUEUE_DIR,
  type DeletionRecord,
  deletionRecordFileName,
  deletionRecordTempName,
} from "../../src/wire/deletion-record.js";

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
