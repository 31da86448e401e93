/**
 * MAC addresses in the form CNI results and Kubernetes annotations use:
 * lowercase, colon-separated.
 */

const MAC =
  /^([0-9a-f]{2})[:-]([0-9a-f]{2})[:-]([0-9a-f]{2})[:-]([0-9a-f]{2})[:-]([0-9a-f]{2})[:-]([0-9a-f]{2})$/i;

/** "AA-BB-…" or "aa:bb:…" → "aa:bb:…"; undefined when the text is not a 48-bit MAC. */
export function normalizeMac(text: string): string | undefined {
  const m = MAC.exec(text.trim());
  return m ? m.slice(1).join(":").toLowerCase() : undefined;
}

/** Six bytes as "aa:bb:cc:dd:ee:ff". */
export function formatMac(bytes: Uint8Array): string {
  return Array.from(bytes, (x) => x.toString(16).padStart(2, "0")).join(":");
}
