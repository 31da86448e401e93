/**
 * Temporary files of a write-then-rename that a crash left behind. Every
 * atomic write here goes through a temporary name in the target's directory;
 * a process killed between the write and the rename (or the unlink after a
 * failed rename) leaves that file for good, and nothing lists it again: over
 * many crashes the directory fills (in a node's CNI bin dir, with copies of a
 * 100 MB executable). Each writer removes its own kind at a moment it knows
 * no write of that kind is in flight, or once they are older than any write
 * takes.
 */
import { readdirSync, statSync, unlinkSync } from "node:fs";
import { join } from "node:path";

interface StaleTempOptions {
  /** Which names are the writer's temporary files. */
  isTemp: (name: string) => boolean;
  /** Only those last modified longer ago than this (0: all of them). */
  olderThanMs: number;
  now?: number;
}

/** Removes the matching files of `dir`; returns their names. A missing dir has none. */
export function removeStaleTempFiles(dir: string, o: StaleTempOptions): string[] {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  const now = o.now ?? Date.now();
  const removed: string[] = [];
  for (const name of names.filter(o.isTemp)) {
    const path = join(dir, name);
    try {
      const st = statSync(path);
      if (!st.isFile() || now - st.mtimeMs < o.olderThanMs) continue;
      unlinkSync(path);
      removed.push(name);
    } catch {
      // Renamed or removed meanwhile by its writer: not stale.
    }
  }
  return removed;
}
