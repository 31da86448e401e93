/**
 * How long each field of a CNI call may be, and how a bad value is echoed in
 * an error. Past a limit the answer is code 4 (an invalid environment
 * variable, as the field would be for an exec'd plugin), and an error echoes
 * at most ECHO_BYTES (src/common/cut-short.ts) of any value, so a hostile 3 MB
 * container id is answered in a few hundred bytes. The limits are documented
 * in docs/limits.md; the shim applies the same ones before it forwards a call.
 */
import { cutAt } from "../common/cut-short.js";
import { CniError, ErrorCode } from "./errors.js";

/** IFNAMSIZ (16) less the terminating NUL; the kernel counts bytes, not characters. */
export const MAX_INTERFACE_NAME_BYTES = 15;

/**
 * Runtimes use 64 hex digits. 128 bytes, with a network name of at most
 * MAX_NETWORK_NAME_BYTES and an interface name, keeps the result cache's file
 * name `<network>-<containerId>-<ifName>` within NAME_MAX (255 bytes).
 */
export const MAX_CONTAINER_ID_BYTES = 128;

/** A network's name, in a config or in a request: 100 + 1 + 128 + 1 + 15 = 245 ≤ 255. */
export const MAX_NETWORK_NAME_BYTES = 100;

/** PATH_MAX (4096) less the terminating NUL. */
// Exported for its tests only (integration/driver-input-limits.test.ts, unit/env.test.ts, unit/limits.test.ts).
export const MAX_NETNS_PATH_BYTES = 4095;

/**
 * The CNI_ARGS text, "K=V;K=V": half of the kernel's bound on one environment
 * string (MAX_ARG_STRLEN, 128 KiB), so the variable always reaches a plugin.
 */
// Exported for its tests only (integration/driver-input-limits.test.ts, unit/env.test.ts, unit/limits.test.ts).
export const MAX_CNI_ARGS_BYTES = 64 * 1024;

/** A plugin's config on stdin, prevResult and runtimeConfig included. */
// Exported for its tests only (integration/driver-input-limits.test.ts, unit/limits.test.ts).
export const MAX_STDIN_CONFIG_BYTES = 1024 * 1024;

/**
 * A value quoted for an error message: JSON-quoted whole when it has at most
 * ECHO_BYTES bytes of UTF-8; else its first ECHO_BYTES bytes (cut back to a
 * whole character) quoted, then `… (N bytes)`.
 */
export function echo(value: string): string {
  const cut = cutAt(value);
  return cut ? `${JSON.stringify(cut.head)}… (${cut.bytes} bytes)` : JSON.stringify(value);
}

/**
 * Code 4 when `value` has more than `maxBytes` bytes of UTF-8:
 * `<what> is too long: <echo>; at most <maxBytes> bytes`.
 */
export function requireAtMostBytes(what: string, value: string, maxBytes: number): void {
  if (value.length <= maxBytes / 3) return; // a UTF-16 unit is at most 3 bytes of UTF-8
  if (Buffer.byteLength(value, "utf8") <= maxBytes) return;
  throw new CniError(
    ErrorCode.InvalidEnvironment,
    `${what} is too long: ${echo(value)}; at most ${maxBytes} bytes`,
  );
}

/** Code 4 when `value` holds a NUL byte, which no C string (a path, a name, a variable) can carry. */
function requireNoNul(what: string, value: string): void {
  if (value.includes("\0")) {
    throw new CniError(ErrorCode.InvalidEnvironment, `${what} contains a NUL byte: ${echo(value)}`);
  }
}

/** CNI_NETNS: at most MAX_NETNS_PATH_BYTES, no NUL (code 4). Returns the path. */
export function validateNetnsPath(path: string): string {
  requireAtMostBytes("netns path", path, MAX_NETNS_PATH_BYTES);
  requireNoNul("netns path", path);
  return path;
}

/** CNI_ARGS as text: at most MAX_CNI_ARGS_BYTES, no NUL (code 4). Returns the text. */
export function validateCniArgsText(text: string): string {
  requireAtMostBytes("CNI_ARGS", text, MAX_CNI_ARGS_BYTES);
  requireNoNul("CNI_ARGS", text);
  return text;
}

/**
 * The stdin config's size in bytes: at most MAX_STDIN_CONFIG_BYTES (code 4,
 * `stdin config is too large: N bytes; at most 1048576 bytes`). Checked before
 * the JSON is decoded.
 */
export function requireStdinConfigSize(bytes: number): void {
  if (bytes > MAX_STDIN_CONFIG_BYTES) {
    throw new CniError(
      ErrorCode.InvalidEnvironment,
      `stdin config is too large: ${bytes} bytes; at most ${MAX_STDIN_CONFIG_BYTES} bytes`,
    );
  }
}
