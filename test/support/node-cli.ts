/**
 * The arguments of the node-side commands of `cni-driver` (install-cni, the
 * DaemonSet's init container; uninstall), pointed at a test's directories.
 */
import type { DriverHarness } from "./driver-harness.js";
import { REFERENCE_PLUGIN_DIR } from "./requirements.js";

/** Where a harness's driver keeps what uninstall removes. */
export type DriverPaths = Pick<
  DriverHarness,
  "socket" | "configDir" | "stateDir" | "cacheDir" | "dataDir"
>;

/** `cni-driver uninstall` of the driver at `h`, with the host's CNI conf and bin dirs. */
export function uninstallArgs(
  h: DriverPaths,
  hostCniConfDir: string,
  hostCniBinDir: string,
  ...extra: string[]
): string[] {
  return [
    "uninstall",
    "--socket",
    h.socket,
    "--config-dir",
    h.configDir,
    "--state-dir",
    h.stateDir,
    "--cache-dir",
    h.cacheDir,
    "--host-local-data-dir",
    h.dataDir,
    "--host-cni-conf-dir",
    hostCniConfDir,
    "--host-cni-bin-dir",
    hostCniBinDir,
    ...extra,
  ];
}

/** `cni-driver install-cni` of `shim` and the reference `plugins` (comma-separated) into `binDir`. */
export function installCniArgs(binDir: string, shim: string, plugins: string): string[] {
  return [
    "install-cni",
    "--bin-dir",
    binDir,
    "--shim",
    shim,
    "--plugin-dir",
    REFERENCE_PLUGIN_DIR,
    "--plugins",
    plugins,
  ];
}
