/**
 * Files replaced whole: written to a temporary name beside the target, synced,
 * then renamed over it (and the directory synced), so a reader (a runtime
 * reading a conflist, an exec of a binary being replaced, the next start
 * reading state) sees the old file or the new one, never half of one, also
 * after a power cut. The temporary files a crash left are removed by the next
 * write of the same name. (The per-pod result cache does without the syncs:
 * see result-cache.ts.)
 */
import { randomBytes } from "node:crypto";
import { chmod, open, readFile, rename, unlink, writeFile } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { removeStaleTempFiles } from "./stale-temp-files.js";

/** Another writer of the same name (a surge pod of a rolling update) takes seconds at most. */
const STALE_TEMP_MS = 60_000;

/**
 * A fresh temporary name for `name` in `dir`, after removing the ones earlier
 * writes of `name` left there (only names of this form: `.<name>.<8 hex>.tmp`).
 */
function tempFileFor(dir: string, name: string): string {
  const prefix = `.${name}.`;
  removeStaleTempFiles(dir, {
    isTemp: (n) => n.startsWith(prefix) && /^[0-9a-f]{8}\.tmp$/.test(n.slice(prefix.length)),
    olderThanMs: STALE_TEMP_MS,
  });
  return join(dir, `${prefix}${randomBytes(4).toString("hex")}.tmp`);
}

/** Writes `content` to `path` atomically; returns false when the file already held exactly that. */
export async function writeFileAtomic(
  path: string,
  content: string | Uint8Array,
  mode = 0o644,
): Promise<boolean> {
  const bytes = typeof content === "string" ? Buffer.from(content) : Buffer.from(content);
  const current = await readFile(path).catch(() => undefined);
  if (current?.equals(bytes)) return false;
  await placeFile(path, mode, (tmp) => writeFile(tmp, bytes, { flag: "wx", mode }));
  return true;
}

/**
 * Puts a file in place whole: `fill` writes a fresh temporary file beside
 * `path`, which is given `mode`, synced and renamed over `path`, and the
 * directory synced after; on any failure the temporary file is removed.
 */
export async function placeFile(
  path: string,
  mode: number,
  fill: (tmp: string) => Promise<void>,
): Promise<void> {
  const tmp = tempFileFor(dirname(path), basename(path));
  try {
    await fill(tmp);
    await chmod(tmp, mode);
    await syncFile(tmp);
    await rename(tmp, path);
  } catch (err) {
    await unlink(tmp).catch(() => {});
    throw err;
  }
  // A directory's fsync is refused on a few filesystems (EINVAL); the rename stands all the same.
  await syncFile(dirname(path)).catch(() => {});
}

/** Flushes a file's data to disk: a rename of unsynced data can survive a power cut as an empty file. */
async function syncFile(path: string): Promise<void> {
  const fh = await open(path, "r");
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}
