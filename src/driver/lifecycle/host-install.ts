/**
 * What the driver puts on the node's host paths: the shim and the reference
 * plugins the default config relies on into the CNI bin dir, and the host
 * conflist that makes runtimes exec the shim. Every file goes in by temp file +
 * rename, so a running shim never blocks an install (Multus #1221) and a runtime
 * never reads half a conflist; the temporary files of an install a crash cut
 * short are removed by the next one.
 */
import { copyFile, mkdir, stat } from "node:fs/promises";
import { basename, join } from "node:path";
import { KNOWN_CAPABILITIES } from "../../cni/capabilities.js";
import { placeFile, writeFileAtomic } from "../../common/atomic-write.js";
import {
  type FileFormat,
  readVersionedFile,
  writeVersionedFile,
} from "../../common/file-format.js";

export const HOST_CONFLIST_NAME = "10-cni-driver.conflist";
export const SHIM_TYPE = "cni-driver-shim";
/**
 * The reference plugins the default ConfigMap relies on, put beside the shim
 * where the host has none of that name (runtimes exec `loopback` themselves).
 * A host's own plugin is never replaced: Debian's builds are dynamically linked
 * against glibc 2.34, and would break every pod on an older host. The driver
 * execs its own copies from the image (`--cni-bin-dir` lists `/usr/lib/cni`
 * first in the DaemonSet), whatever the host has.
 */
export const DEFAULT_INSTALLED_PLUGINS: readonly string[] = ["host-local", "loopback", "portmap"];

/**
 * The reference plugins install-cni put into the bin dir (it leaves a host's
 * own alone), recorded beside them so that `cni-driver uninstall` removes
 * those and no other. Runtimes exec plugins by name: a dotfile is never one.
 */
export const INSTALLED_RECORD = ".cni-driver-installed.json";

/** `{"version": 1, "plugins": [names]}` (0.1.0 kept no such record). */
const INSTALLED_FORMAT: FileFormat = {
  what: "record of the plugins install-cni installed",
  current: 1,
  declaredBy: { field: "version" },
};

/** Adds `plugins` to the bin dir's record of what install-cni installed there. */
export async function recordInstalled(binDir: string, plugins: readonly string[]): Promise<void> {
  const all = [...new Set([...readInstalled(binDir), ...plugins])].sort();
  await writeVersionedFile(INSTALLED_FORMAT, join(binDir, INSTALLED_RECORD), { plugins: all });
}

/**
 * What install-cni recorded in the bin dir; [] when nothing. Throws
 * FileFormatError when a newer install-cni wrote the record.
 */
export function readInstalled(binDir: string): string[] {
  const v = readVersionedFile(INSTALLED_FORMAT, join(binDir, INSTALLED_RECORD))?.plugins;
  return Array.isArray(v) ? v.filter((p): p is string => typeof p === "string") : [];
}

/** Where the shim finds this driver: its socket, and its state dir. */
export interface ShimTarget {
  socket: string;
  /**
   * The driver's --state-dir: a DEL the driver cannot take is queued there by
   * the shim, and only the driver reading that directory replays it.
   */
  stateDir: string;
}

/**
 * The host conflist: only the shim, pointed at this driver's socket and state
 * dir, declaring every capability the driver honours so runtimes pass them on.
 * 1.0.0 for runtimes whose libcni predates 1.1.0; `cniVersions` lets newer ones
 * pick 1.1.0 and with it STATUS and GC.
 */
// Exported for its tests only (e2e/runtime-habits.test.ts, integration/host-install.test.ts).
export function hostConflist(target: ShimTarget): string {
  const conf = {
    cniVersion: "1.0.0",
    cniVersions: ["1.0.0", "1.1.0"],
    name: "cni-driver",
    plugins: [
      {
        type: SHIM_TYPE,
        socket: target.socket,
        stateDir: target.stateDir,
        capabilities: Object.fromEntries(KNOWN_CAPABILITIES.map((c) => [c, true])),
      },
    ],
  };
  return `${JSON.stringify(conf, null, 2)}\n`;
}

/** Writes the host conflist into `confDir` (created if missing). */
export async function installHostConflist(confDir: string, target: ShimTarget): Promise<boolean> {
  await mkdir(confDir, { recursive: true });
  return writeFileAtomic(join(confDir, HOST_CONFLIST_NAME), hostConflist(target));
}

/**
 * Copies one executable into `binDir` by temp file + rename, keeping its name;
 * with `keepExisting`, a file already there of that name is left as it is.
 * Answers whether it installed.
 */
export async function installExecutable(
  source: string,
  binDir: string,
  name = basename(source),
  opts: { keepExisting?: boolean } = {},
): Promise<boolean> {
  await mkdir(binDir, { recursive: true });
  const dest = join(binDir, name);
  if (opts.keepExisting && (await stat(dest).catch(() => undefined))) return false;
  await placeFile(dest, 0o755, (tmp) => copyFile(source, tmp));
  return true;
}
