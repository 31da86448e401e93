/**
 * Writes a directory laid out exactly as kubelet projects a ConfigMap volume,
 * the way kubelet's AtomicWriter (pkg/volume/util/atomic_writer.go) writes it:
 *
 *   <dir>/..2024_05_01_12_00_00.123456789/<key>   the data, one timestamped dir per version
 *   <dir>/..data -> ..2024_05_01_12_00_00.123456789
 *   <dir>/<key>  -> ..data/<key>
 *
 * An update writes a new timestamped dir, points `..data_tmp` at it and renames
 * `..data_tmp` over `..data` (the one atomic step), adds links for new keys,
 * removes links of dropped keys, then removes the old timestamped dir. The key
 * links themselves never change: a reader that resolves `..data` once sees one
 * whole version, never a mix.
 *
 * The driver projects the ConfigMap it reads through the API with it (so the
 * ConfigSource reads both copies with one reader), and the tests lay out their
 * mounted ConfigMaps with it.
 */

import {
  chmod,
  lstat,
  mkdtemp,
  readdir,
  readFile,
  readlink,
  rename,
  rm,
  symlink,
  writeFile,
} from "node:fs/promises";
import { basename, join } from "node:path";

// Exported for its tests only (support/configmap-dir.ts).
export const DATA_DIR = "..data";
// Exported for its tests only (support/configmap-dir.ts).
export const NEW_DATA_DIR = "..data_tmp";

/** One ConfigMap's data: key → content. */
// Exported for its tests only (support/configmap-dir.ts).
export type ConfigMapData = Readonly<Record<string, string | Uint8Array>>;

/** Go's time.Now().UTC().Format("..2006_01_02_15_04_05.") */
function timestampPrefix(now: Date): string {
  const p = (n: number) => String(n).padStart(2, "0");
  return `..${now.getUTCFullYear()}_${p(now.getUTCMonth() + 1)}_${p(now.getUTCDate())}_${p(
    now.getUTCHours(),
  )}_${p(now.getUTCMinutes())}_${p(now.getUTCSeconds())}.`;
}

/** ConfigMap keys are file names: AtomicWriter rejects absolute paths, `..` and a `..` prefix. */
function validateKey(key: string): void {
  if (key === "" || key.includes("/") || key === "." || key === ".." || key.startsWith("..")) {
    throw new Error(`invalid ConfigMap key ${JSON.stringify(key)}`);
  }
}

const toBytes = (v: string | Uint8Array): Buffer =>
  typeof v === "string" ? Buffer.from(v, "utf8") : Buffer.from(v);

async function exists(path: string): Promise<boolean> {
  try {
    await lstat(path);
    return true;
  } catch {
    return false;
  }
}

/**
 * Projects `data` into `dir` (which must exist) as one atomic update. As
 * kubelet does, nothing is written when the data equals what is already there.
 * Returns true when a swap happened.
 */
export async function writeConfigMapDir(dir: string, data: ConfigMapData): Promise<boolean> {
  const keys = Object.keys(data);
  for (const k of keys) validateKey(k);

  // (2) the current version, if any
  let oldTsDir = "";
  try {
    oldTsDir = await readlink(join(dir, DATA_DIR));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
  }
  const oldTsPath = join(dir, oldTsDir);

  // (3) keys of the old version that the new one drops, (4) whether anything changed
  let toRemove: string[] = [];
  if (oldTsDir !== "") {
    const old = await readdir(oldTsPath);
    toRemove = old.filter((k) => !(k in data));
    let changed = toRemove.length > 0;
    for (const k of keys) {
      if (changed) break;
      try {
        const onDisk = await readFile(join(oldTsPath, k));
        changed = !onDisk.equals(toBytes(data[k] as string | Uint8Array));
      } catch {
        changed = true;
      }
    }
    if (!changed) {
      await createVisibleLinks(dir, keys);
      return false;
    }
  }

  // (5) a new timestamped dir, 0755 whatever the umask; (6) the payload, 0644 (defaultMode)
  const tsDir = await mkdtemp(join(dir, timestampPrefix(new Date())));
  await chmod(tsDir, 0o755);
  for (const k of keys) {
    const path = join(tsDir, k);
    await writeFile(path, toBytes(data[k] as string | Uint8Array), { mode: 0o644 });
    await chmod(path, 0o644);
  }

  // (8) ..data_tmp -> new dir, (9) renamed over ..data: the atomic switch
  const tsDirName = basename(tsDir);
  await rm(join(dir, NEW_DATA_DIR), { force: true });
  await symlink(tsDirName, join(dir, NEW_DATA_DIR));
  await rename(join(dir, NEW_DATA_DIR), join(dir, DATA_DIR));

  // (10) links for keys that are new, (11) dropped keys' links, (12) the old version
  await createVisibleLinks(dir, keys);
  for (const k of toRemove) await rm(join(dir, k), { force: true });
  if (oldTsDir !== "") await rm(oldTsPath, { recursive: true, force: true });
  return true;
}

/** `key -> ..data/key`, created only when missing: the link is stable across versions. */
async function createVisibleLinks(dir: string, keys: readonly string[]): Promise<void> {
  for (const k of keys) {
    if (!(await exists(join(dir, k)))) await symlink(join(DATA_DIR, k), join(dir, k));
  }
}
