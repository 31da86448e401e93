/**
 * host-local's disk store (backend/disk), byte for byte: one file per leased
 * address in <dataDir>/<network>, named by the address and holding
 * "<container id>\r\n<ifname>"; `last_reserved_ip.<range set>` holding the last
 * address handed out from each range set; every change under the flock on
 * `lock`. A lease written here is released by the host-local binary and the
 * other way round.
 *
 * The reads and writes are synchronous: each is a few microseconds on a local
 * file system, and the whole of one allocation runs under the lock anyway.
 */
import {
  closeSync,
  constants,
  ftruncateSync,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  readSync,
  statSync,
  unlinkSync,
  writeSync,
} from "node:fs";
import { dirname, join } from "node:path";
import { parseIp } from "../../../net/ip.js";
import { withFileLock } from "./file-lock.js";
import { type LeaseFile, leaseFiles, recordOwnChanges } from "./lease-index.js";

const LAST_IP_FILE_PREFIX = "last_reserved_ip.";
const LINE_BREAK = "\r\n";

/**
 * Go's strings.TrimSpace (unicode.IsSpace), with which host-local trims ids
 * and file contents: unlike String.prototype.trim, it keeps a BOM and drops U+0085.
 */
const GO_SPACE =
  "[\\t\\n\\v\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]";
const GO_TRIM = new RegExp(`^${GO_SPACE}+|${GO_SPACE}+$`, "g");
const trim = (s: string): string => s.replace(GO_TRIM, "");

/** Go's text for a failed system call's errno, where Node's (libuv's) differs or is wrapped. */
const GO_ERRNO_TEXT: Record<string, string> = {
  EISDIR: "is a directory",
  ELOOP: "too many levels of symbolic links",
  ENAMETOOLONG: "file name too long",
};

/** An fs error as Go's os.PathError prints it: "<op> <path>: <errno text>". */
export function goPathError(op: string, path: string, err: unknown): Error {
  const e = err as NodeJS.ErrnoException;
  const text =
    (e.code && GO_ERRNO_TEXT[e.code]) ?? /^\w+: ([^,]*)/.exec(e.message)?.[1] ?? e.message;
  return new Error(`${op} ${path}: ${text}`);
}

/** os.MkdirAll, with its error: the first path along the way that is not a directory, or could not be made. */
function mkdirAll(path: string, mode: number): void {
  try {
    if (statSync(path).isDirectory()) return;
    throw goPathError("mkdir", path, { code: "ENOTDIR", message: "ENOTDIR: not a directory" });
  } catch (err) {
    if (!(err as NodeJS.ErrnoException).code) throw err;
  }
  const parent = dirname(path);
  if (parent !== path) mkdirAll(parent, mode);
  try {
    mkdirSync(path, mode);
  } catch (err) {
    try {
      if (lstatSync(path).isDirectory()) return;
    } catch {}
    throw goPathError("mkdir", path, err);
  }
}

/** What a lease file of this attachment holds: "<container id>\r\n<ifname>". */
export function leaseOwner(id: string, ifName: string): string {
  return `${trim(id)}${LINE_BREAK}${ifName}`;
}

export class HostLocalStore {
  /** <dataDir>/<network>. */
  readonly dir: string;

  /** The network's store; its directory is made (0755) unless `create` is false, as disk.New makes it. */
  constructor(network: string, dataDir: string, create = true) {
    this.dir = join(dataDir, network);
    if (create) mkdirAll(this.dir, 0o755);
  }

  /** Runs `fn` under host-local's lock for this network. */
  locked<T>(timeoutMs: number, fn: () => T): Promise<T> {
    return withFileLock(join(this.dir, "lock"), timeoutMs, fn);
  }

  /** Store.Reserve: the lease file, created only if no one holds it, then last_reserved_ip. */
  reserve(id: string, ifName: string, ip: string, rangeId: number): boolean {
    const file = join(this.dir, ip);
    let fd: number;
    try {
      fd = openSync(file, constants.O_RDWR | constants.O_EXCL | constants.O_CREAT, 0o644);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "EEXIST") return false;
      throw err;
    }
    const owner = leaseOwner(id, ifName);
    try {
      writeSync(fd, owner);
    } catch (err) {
      closeSync(fd);
      unlinkSync(file);
      recordOwnChanges(this.dir, [[ip, undefined]]);
      throw err;
    }
    closeSync(fd);
    const last = `${LAST_IP_FILE_PREFIX}${rangeId}`;
    try {
      rewrite(join(this.dir, last), ip);
    } finally {
      recordOwnChanges(this.dir, [
        [ip, trim(owner)],
        [last, trim(ip)],
      ]);
    }
    return true;
  }

  /** Store.LastReservedIP: the text in last_reserved_ip.<rangeId>, or undefined when there is none. */
  lastReservedIp(rangeId: number): string | undefined {
    try {
      return readFileSync(join(this.dir, `${LAST_IP_FILE_PREFIX}${rangeId}`), "utf8");
    } catch {
      // host-local logs an unreadable file and starts from the range's beginning.
      return undefined;
    }
  }

  /** Store.GetByID: the addresses leased to this attachment (or, in the old format, to the id). */
  getById(id: string, ifName: string): string[] {
    const match = leaseOwner(id, ifName);
    const matchOld = trim(id);
    const ips: string[] = [];
    for (const [, name, content] of this.leases()) {
      if ((content === match || content === matchOld) && parseIp(name) !== undefined)
        ips.push(name);
    }
    return ips;
  }

  /** Store.FindByID: whether any lease is this attachment's (new format first, then the id alone). */
  findById(id: string, ifName: string): boolean {
    const match = leaseOwner(id, ifName);
    const all = this.leases();
    return all.some(([, , c]) => c === match) || all.some(([, , c]) => c === trim(id));
  }

  /**
   * Store.ReleaseByID: removes every file holding this attachment; when there is
   * none, every file holding the id alone (leases of host-local before 0.7).
   * Errors are eaten, as host-local eats them, to release as much as it can.
   */
  releaseById(id: string, ifName: string): void {
    if (!this.releaseWhere((c) => c === leaseOwner(id, ifName)))
      this.releaseWhere((c) => c === trim(id));
  }

  /**
   * GC (CNI 1.1), and the driver's start-up release of orphans: removes the
   * leases of attachments that are not in `valid` (leaseOwner keys); a
   * lease in the old format (the id alone) is kept while its id is valid with
   * any interface. Returns what it removed: each lease's address and owner.
   */
  gc(valid: ReadonlySet<string>): Array<{ ip: string; owner: string }> {
    const validIds = new Set([...valid].map((k) => k.split(LINE_BREAK)[0]));
    const removed: Array<{ ip: string; owner: string }> = [];
    for (const [path, name, content] of this.leases()) {
      if (parseIp(name) === undefined) continue;
      const keep = content.includes(LINE_BREAK) ? valid.has(content) : validIds.has(content);
      if (!keep && unlinkQuietly(path)) removed.push({ ip: name, owner: content });
    }
    recordOwnChanges(
      this.dir,
      removed.map((r) => [r.ip, undefined]),
    );
    return removed;
  }

  private releaseWhere(matches: (content: string) => boolean): boolean {
    const removed: Array<[string, undefined]> = [];
    for (const [path, name, content] of this.leases()) {
      if (matches(content) && unlinkQuietly(path)) removed.push([name, undefined]);
    }
    recordOwnChanges(this.dir, removed);
    return removed.length > 0;
  }

  /** Every file of the network's directory (lease-index.ts keeps them between calls). */
  private leases(): LeaseFile[] {
    return leaseFiles(this.dir, () => [...this.files()]);
  }

  /**
   * Every file below the network's directory, as filepath.Walk visits them
   * (lexical order, into subdirectories), with its trimmed content; files that
   * cannot be read are passed over.
   */
  private *files(dir = this.dir): Generator<LeaseFile> {
    let entries: import("node:fs").Dirent[];
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    for (const e of entries) {
      const path = join(dir, e.name);
      if (e.isDirectory()) {
        yield* this.files(path);
        continue;
      }
      const content = readSmallFile(path);
      if (content !== undefined) yield [path, e.name, trim(content)];
    }
  }
}

/** Room for any lease ("<container id>\r\n<ifname>") or last_reserved_ip file in one read. */
const SMALL_FILE_BYTES = 4096;
const smallFileBuffer = Buffer.allocUnsafe(SMALL_FILE_BYTES);

/**
 * A file's text, read in one go when it is small, undefined when it cannot be read.
 * Every ADD and DEL reads every lease of the network (as host-local does): with
 * 110 pods up that is 110 files a call, and open, read, close is three system
 * calls where readFileSync makes five (it also stats the file and reads until an
 * empty read). A read that fills the buffer may have more behind it: the rest is
 * read as readFileSync would.
 */
function readSmallFile(path: string): string | undefined {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY);
  } catch {
    return undefined;
  }
  try {
    const n = readSync(fd, smallFileBuffer, 0, SMALL_FILE_BYTES, 0);
    if (n < SMALL_FILE_BYTES) return smallFileBuffer.toString("utf8", 0, n);
    return readFileSync(path, "utf8");
  } catch {
    return undefined;
  } finally {
    closeSync(fd);
  }
}

/**
 * The file's content made `text` (created 0644 if missing), as os.WriteFile
 * leaves it, but cut to length after the write rather than truncated to zero
 * before it: ext4 takes a truncation to zero of a file with data as the start
 * of a replace (auto_da_alloc) and allocates and starts writing back its blocks
 * at once, ≈ 0.6 ms a call here, for every pod.
 */
function rewrite(path: string, text: string): void {
  const fd = openSync(path, constants.O_WRONLY | constants.O_CREAT, 0o644);
  try {
    const bytes = Buffer.from(text);
    writeSync(fd, bytes, 0, bytes.length, 0);
    ftruncateSync(fd, bytes.length);
  } finally {
    closeSync(fd);
  }
}

function unlinkQuietly(path: string): boolean {
  try {
    unlinkSync(path);
    return true;
  } catch {
    return false;
  }
}
