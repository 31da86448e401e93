/**
 * The node socket's path is part of the contract between the shim and the driver,
 * and Linux bounds it: `sun_path` holds 108 bytes with the terminating NUL. A
 * longer path fails to connect with EINVAL (which the shim would take for a driver
 * away, and queue every DEL) or, depending on the library, binds somewhere else.
 */
// Exported for its tests only (integration/shim-validation-vectors.test.ts).
export const MAX_SOCKET_PATH_BYTES = 107;

/** Where the driver serves and the shim calls, unless told otherwise (`--socket`, the conflist's `socket`). */
export const DEFAULT_SOCKET = "/run/cni-driver/driver.sock";

/**
 * Where the driver keeps its state (the deletion queue the shim fills, and by
 * default the result cache), unless told otherwise (`--state-dir`/`--cache-dir`,
 * the conflist's `stateDir`).
 */
export const DEFAULT_STATE_DIR = "/var/lib/cni-driver";

/** Why `path` cannot be a unix socket's path, or undefined when it can. */
export function socketPathProblem(path: string): string | undefined {
  const bytes = Buffer.byteLength(path, "utf8");
  return bytes > MAX_SOCKET_PATH_BYTES
    ? `${path} is ${bytes} bytes long; a unix socket's path holds at most ${MAX_SOCKET_PATH_BYTES}`
    : undefined;
}
