/**
 * A long value cut short for an error message or a log line, so a hostile 3 MB
 * container id is answered and logged in a few hundred bytes (docs/limits.md).
 * The CNI errors quote it (src/cni/limits.ts echo); both daemons' log lines
 * carry it as it is.
 */

/** How much of a bad value an error message quotes. */
export const ECHO_BYTES = 64;

/** As echo (src/cni/limits.ts), without the quotes: for a field of a log line, which JSON quotes already. */
export function cutShort(value: string): string {
  const cut = cutAt(value);
  return cut ? `${cut.head}… (${cut.bytes} bytes)` : value;
}

/**
 * Past ECHO_BYTES bytes of UTF-8: the first ECHO_BYTES (cut back to a whole
 * character) and how many bytes there were; undefined when the value fits.
 */
export function cutAt(value: string): { head: string; bytes: number } | undefined {
  if (value.length <= ECHO_BYTES / 3) return undefined; // a UTF-16 unit is at most 3 bytes of UTF-8
  const bytes = Buffer.byteLength(value, "utf8");
  if (bytes <= ECHO_BYTES) return undefined;
  // A cut inside a character decodes to U+FFFD at the end: drop it.
  const head = Buffer.from(value.slice(0, ECHO_BYTES), "utf8")
    .subarray(0, ECHO_BYTES)
    .toString("utf8")
    .replace(/\uFFFD+$/, "");
  return { head, bytes };
}
