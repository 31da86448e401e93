/**
 * libcni's result cache on disk (cni-spec §6): one file per attachment,
 * `<cacheDir>/results/<network>-<containerID>-<ifName>`, directory 0700, file
 * 0600, the bytes src/cni/cache.ts encodes (what libcni's cacheAdd writes), so
 * cnitool or a runtime's libcni pointed at the same cache dir reads our files
 * and we read theirs.
 *
 * Where this differs from libcni, it is to survive a crash of the driver: a
 * file is written to a temporary name and renamed into place, so a process
 * killed mid-write leaves the old file or the new one, never half of one (the
 * page cache outlives the process). There is no fsync on this hot path: only a
 * kernel crash or power cut can lose a rename, and those also end every pod
 * whose entry it would describe; an empty or torn file reads as absent. The
 * temporary names start with `.`; listing skips them, and the driver removes
 * those a crash left when it starts (removeTempFiles).
 *
 * The per-pod calls (write on ADD, read and remove on DEL) are synchronous: a
 * file of a kilobyte on local disk without fsync takes tens of microseconds,
 * less than the thread-pool round trips of the async calls (five for a write),
 * which also queue behind other I/O of the process. Listing stays async.
 */
import { randomBytes } from "node:crypto";
import { mkdirSync, readFileSync, renameSync, rmdirSync, unlinkSync, writeFileSync } from "node:fs";
import { open, readdir } from "node:fs/promises";
import { join } from "node:path";
import {
  attachmentFromCacheEntry,
  attachmentsFromFileNames,
  CACHE_KIND_V1,
  CACHE_RESULTS_DIR,
  type CachedAttachment,
  type CacheEntryInput,
  cacheFileName,
  decodeCacheEntry,
  encodeCacheEntry,
} from "../../cni/cache.js";
import { CniError, ErrorCode } from "../../cni/errors.js";
import { type FileFormat, FileFormatError, formatRefusal } from "../../common/file-format.js";
import { isObject } from "../../common/json.js";
import { removeStaleTempFiles } from "../../common/stale-temp-files.js";

/**
 * A listed attachment, with its file's mtime: the file is written whole on
 * each successful ADD (and renamed into place, which keeps it), so it tells
 * which of a pod's attachments was set up last.
 */
export type ListedAttachment = CachedAttachment & { mtimeMs?: number };

export interface ResultCacheLogger {
  warn(obj: object, msg: string): void;
}

export interface ResultCacheOptions {
  /** Told about every file discarded or skipped as unreadable. */
  log?: ResultCacheLogger;
}

const TEMP_PREFIX = ".tmp-";

function errnoCode(err: unknown): string | undefined {
  return (err as NodeJS.ErrnoException | undefined)?.code;
}

function ioError(action: string, path: string, err: unknown): CniError {
  return new CniError(
    ErrorCode.IOFailure,
    `failed to ${action} cached result ${path}: ${(err as Error).message}`,
  );
}

export class ResultCache {
  /** `<cacheDir>/results`. */
  readonly dir: string;
  readonly #log: ResultCacheLogger | undefined;

  constructor(cacheDir: string, opts: ResultCacheOptions = {}) {
    this.dir = join(cacheDir, CACHE_RESULTS_DIR);
    this.#log = opts.log;
  }

  /** The file of one attachment; throws (code 999) when a part is empty or holds `/`. */
  path(network: string, containerId: string, ifName: string): string {
    return join(this.dir, cacheFileName(network, containerId, ifName));
  }

  /** Writes (or replaces) an attachment's file atomically. Throws code 5 on I/O failure. */
  async write(entry: CacheEntryInput): Promise<void> {
    const target = this.path(entry.networkName, entry.containerId, entry.ifName);
    const text = encodeCacheEntry(entry);
    const temp = join(
      this.dir,
      `${TEMP_PREFIX}${cacheFileName(entry.networkName, entry.containerId, entry.ifName)}-${randomBytes(4).toString("hex")}`,
    );
    try {
      // libcni: os.MkdirAll(dir, 0700) then a 0600 file.
      mkdirSync(this.dir, { recursive: true, mode: 0o700 });
      writeFileSync(temp, text, { encoding: "utf8", flag: "wx", mode: 0o600 });
      renameSync(temp, target);
    } catch (err) {
      try {
        unlinkSync(temp);
      } catch {
        // Never created, or already renamed.
      }
      throw ioError("write", target, err);
    }
  }

  /**
   * An attachment's cached entry; undefined when there is none. A file that
   * does not decode (or a directory in its place) reads as absent, with the
   * reason logged, and with `discardUnusable` (DEL) it is deleted: libcni's DEL
   * does the same and goes on without a cached result, while its CHECK fails
   * and keeps it. A file that exists but cannot be read now (EMFILE, EIO,
   * EACCES …) is an I/O failure (code 5) and stays: the call is retried, and
   * a DEL that went on without it would hand the plugins no port mappings.
   *
   * A file of a `kind` this driver does not know (a later driver's) is
   * neither read nor deleted: code 6, naming the file and both kinds.
   *
   * A legacy file (a bare result from before `cniCacheV1`) reads as an
   * attachment with only its result: no config, no netns, no args. That is all
   * libcni takes from it (getLegacyCachedResult).
   */
  async read(
    network: string,
    containerId: string,
    ifName: string,
    opts: { discardUnusable: boolean } = { discardUnusable: true },
  ): Promise<CachedAttachment | undefined> {
    const path = this.path(network, containerId, ifName);
    const unusable = (reason: string): undefined => {
      if (opts.discardUnusable) this.#discard(path, reason);
      else this.#log?.warn({ path, reason }, "cache file unusable; kept");
      return undefined;
    };
    let bytes: Buffer;
    try {
      bytes = readFileSync(path);
    } catch (err) {
      const code = errnoCode(err);
      if (code === "ENOENT") return undefined;
      if (code === "EISDIR") return unusable(`unreadable: ${(err as Error).message}`);
      throw ioError("read", path, err);
    }
    let entry: ReturnType<typeof decodeCacheEntry>;
    try {
      entry = decodeCacheEntry(bytes);
    } catch (err) {
      const unknown = unknownFormat(path, bytes);
      if (unknown) throw new CniError(ErrorCode.DecodingFailure, unknown.message);
      return unusable((err as Error).message);
    }
    if (entry.kind === CACHE_KIND_V1) return entry;
    return {
      kind: CACHE_KIND_V1,
      containerId,
      config: new Uint8Array(),
      ifName,
      networkName: network,
      netns: "",
      result: entry.result,
    };
  }

  /** Deletes an attachment's file; a missing one is fine. Throws code 5 on other failures. */
  async remove(network: string, containerId: string, ifName: string): Promise<void> {
    const path = this.path(network, containerId, ifName);
    try {
      removePath(path);
    } catch (err) {
      if (errnoCode(err) === "ENOENT") return;
      throw ioError("remove", path, err);
    }
  }

  /**
   * Removes the temporary files of writes that a crash cut short; returns their
   * names. Only while no write can be in flight: at start, before serving.
   */
  removeTempFiles(): string[] {
    return removeStaleTempFiles(this.dir, {
      isTemp: (name) => name.startsWith(TEMP_PREFIX),
      olderThanMs: 0,
    });
  }

  /**
   * Every `cniCacheV1` attachment in the cache (restart, GC), in file-name
   * order. Who an entry belongs to comes from its content, never from its file
   * name: network names and container IDs may both contain `-`. Temporary
   * files, legacy files and files that do not decode are skipped (and left in
   * place: the DEL of that attachment deals with them). Each carries its
   * file's mtime.
   */
  async list(): Promise<ListedAttachment[]> {
    return (await this.scan()).attachments;
  }

  /**
   * list()'s attachments, and the files of a format this driver does not know
   * (a newer driver's): those hold attachments too, whose leases and links
   * no one here can tell, so start-up clean-up and uninstall hold back.
   */
  async scan(): Promise<{ attachments: ListedAttachment[]; unknownFormat: FileFormatError[] }> {
    let names: string[];
    try {
      names = await readdir(this.dir);
    } catch (err) {
      if (errnoCode(err) === "ENOENT") return { attachments: [], unknownFormat: [] };
      throw ioError("list", this.dir, err);
    }
    const candidates = attachmentsFromFileNames(names.filter((n) => !n.startsWith(".")));
    const read = await Promise.all(candidates.map((name) => this.#readForList(name)));
    return {
      attachments: read.filter((e): e is ListedAttachment => e !== undefined && !isFormatError(e)),
      unknownFormat: read.filter(isFormatError),
    };
  }

  async #readForList(name: string): Promise<ListedAttachment | FileFormatError | undefined> {
    const path = join(this.dir, name);
    let bytes: Buffer | undefined;
    try {
      // One open file for both: the mtime is that of the bytes read, even if a rename replaces the name meanwhile.
      const file = await open(path, "r");
      try {
        bytes = await file.readFile();
        const stat = await file.stat();
        const entry = attachmentFromCacheEntry(decodeCacheEntry(bytes));
        return entry && { ...entry, mtimeMs: stat.mtimeMs };
      } finally {
        await file.close();
      }
    } catch (err) {
      const unknown = bytes && unknownFormat(path, bytes);
      if (unknown) {
        this.#log?.warn({ path, err: unknown.message }, "skipping a cache file of a newer format");
        return unknown;
      }
      // Gone since readdir (a concurrent DEL): not worth a word.
      if (errnoCode(err) !== "ENOENT") {
        this.#log?.warn({ path, err: (err as Error).message }, "skipping unreadable cache file");
      }
      return undefined;
    }
  }

  #discard(path: string, reason: string): void {
    try {
      removePath(path);
      this.#log?.warn({ path, reason }, "deleted unreadable cache file");
    } catch (err) {
      if (errnoCode(err) === "ENOENT") return;
      this.#log?.warn(
        { path, reason, err: (err as Error).message },
        "unreadable cache file could not be deleted",
      );
    }
  }
}

/**
 * The cache's format is libcni's, versioned by its `kind`: `cniCacheV1` is the
 * one there is. A file of another kind is not read as anything (libcni would
 * take it for a legacy bare result), nor deleted: a later driver may have
 * written it.
 */
const CACHE_FORMAT: FileFormat = {
  what: "result cache entry",
  current: 1,
  declaredBy: { kindPrefix: "cniCacheV" },
};

/** The refusal of a file that declares a `kind` this driver does not know; undefined for any other. */
function unknownFormat(path: string, bytes: Uint8Array): FileFormatError | undefined {
  let doc: unknown;
  try {
    doc = JSON.parse(Buffer.from(bytes).toString("utf8"));
  } catch {
    return undefined;
  }
  return isObject(doc) && typeof doc.kind === "string"
    ? formatRefusal(CACHE_FORMAT, path, doc)
    : undefined;
}

const isFormatError = (e: unknown): e is FileFormatError => e instanceof FileFormatError;

/** os.Remove: a file, or an empty directory in its place. */
function removePath(path: string): void {
  try {
    unlinkSync(path);
  } catch (err) {
    const code = errnoCode(err);
    if (code === "EISDIR" || code === "EPERM") rmdirSync(path);
    else throw err;
  }
}
