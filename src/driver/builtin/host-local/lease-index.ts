/**
 * The files of each network's lease directory as last read, kept while no one
 * but this process changed the directory. host-local reads every lease of its
 * network on every ADD and DEL (to find the attachment's own); with 110 pods up
 * that is 110 files a call, the largest part of the driver's time at that
 * density (bench/shim).
 *
 * One inotify descriptor (the flock addon) watches every network directory the
 * store has read. Its events are drained under host-local's lock: at the start
 * of a call, where any event means someone else changed the directory and the
 * files are read again; and right after the store's own changes, where an
 * event for a name the store did not itself change means the same. A lost
 * event (a full queue) or a watch gone (the directory removed or moved) drops
 * what is kept. Without the addon or inotify, every call reads the files, as
 * host-local does.
 */
import { dirname, join } from "node:path";
import { flockAddon } from "./file-lock.js";

/** A file of the directory: its path, its name, its trimmed content. */
export type LeaseFile = [path: string, name: string, content: string];

interface InotifyAddon {
  inotifyInit(): number;
  watchDir(fd: number, path: string): number;
  drainEvents(fd: number): Array<[wd: number, name: string, untrusted: boolean]>;
}

class DirIndex {
  /** The directory's files as last read and changed by this store; undefined: read them again. */
  files: Map<string, string> | undefined;
  /** Names the drained events were about since the store last looked. */
  readonly touched = new Set<string>();
  wd: number | undefined;

  forget(): void {
    this.files = undefined;
    this.touched.clear();
  }
}

/** The process's inotify descriptor and its addon; null where there is none. */
let inotify: { fd: number; addon: InotifyAddon } | null | undefined;
const indexes = new Map<string, DirIndex>();
/** A watch descriptor's directories (two paths to one directory share it). */
const byWd = new Map<number, DirIndex[]>();

/** Opens the process's inotify descriptor, if it can be had; later calls return the same. */
export function openLeaseWatcher(): void {
  watcher();
}

function watcher(): { fd: number; addon: InotifyAddon } | null {
  if (inotify !== undefined) return inotify;
  const got = flockAddon();
  const addon = "addon" in got ? (got.addon as unknown as Partial<InotifyAddon>) : undefined;
  inotify = null;
  if (addon?.inotifyInit && addon.watchDir && addon.drainEvents) {
    try {
      inotify = { fd: addon.inotifyInit(), addon: addon as InotifyAddon };
    } catch {
      // No inotify instance to be had (the per-user limit): every call reads the files.
    }
  }
  return inotify;
}

/** The directory's index, watched; undefined when it cannot be watched. */
function indexFor(dir: string): DirIndex | undefined {
  const w = watcher();
  if (!w) return undefined;
  let ix = indexes.get(dir);
  if (!ix) {
    ix = new DirIndex();
    indexes.set(dir, ix);
  }
  if (ix.wd === undefined) {
    try {
      ix.wd = w.addon.watchDir(w.fd, dir);
    } catch {
      return undefined; // gone, or the watch limit: read the files this time
    }
    byWd.set(ix.wd, [...(byWd.get(ix.wd) ?? []), ix]);
    ix.forget();
  }
  return ix;
}

/** Hands every queued event to the index of its directory. */
function drain(): void {
  const w = watcher();
  if (!w) return;
  let events: Array<[number, string, boolean]>;
  try {
    events = w.addon.drainEvents(w.fd);
  } catch {
    for (const ix of indexes.values()) ix.forget();
    return;
  }
  for (const [wd, name, untrusted] of events) {
    if (wd === -1) {
      for (const ix of indexes.values()) ix.forget(); // the queue overflowed: anything may have happened
      continue;
    }
    for (const ix of byWd.get(wd) ?? []) {
      if (!untrusted) {
        ix.touched.add(name);
        continue;
      }
      ix.forget();
      ix.wd = undefined;
      byWd.delete(wd);
    }
  }
}

/**
 * The directory's files in name order: those kept, when nothing but this store
 * changed the directory since they were read; otherwise `read()`, kept for the
 * next call when nothing changed while it ran and every file is directly in the
 * directory. Call it holding host-local's lock.
 */
export function leaseFiles(dir: string, read: () => LeaseFile[]): LeaseFile[] {
  const ix = indexFor(dir);
  if (!ix) return read();
  drain();
  if (ix.files && ix.touched.size === 0) {
    return [...ix.files.keys()]
      .sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))
      .map((name) => [join(dir, name), name, ix.files?.get(name) as string]);
  }
  ix.forget();
  const files = read();
  drain();
  const kept = ix.wd !== undefined && ix.touched.size === 0;
  ix.forget();
  if (kept && files.every(([path]) => dirname(path) === dir))
    ix.files = new Map(files.map(([, name, content]) => [name, content]));
  return files;
}

/**
 * After the store's own changes, still under the lock: each name with its new
 * trimmed content, or undefined where the file was removed. Events for any other
 * name mean someone else was at work: the next call reads the files.
 */
export function recordOwnChanges(
  dir: string,
  changes: ReadonlyArray<[string, string | undefined]>,
): void {
  const ix = indexes.get(dir);
  if (!ix) return;
  drain();
  const own = new Set(changes.map(([name]) => name));
  const foreign = [...ix.touched].some((name) => !own.has(name));
  ix.touched.clear();
  if (!ix.files || foreign) {
    ix.forget();
    return;
  }
  for (const [name, content] of changes) {
    if (content === undefined) ix.files.delete(name);
    else ix.files.set(name, content);
  }
}
