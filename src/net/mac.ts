/**
 * MAC addresses in the form CNI results and Kubernetes annotations use:
 * lowercase, colon-separated. Imports nothing of the project.
 */
import { createHash } from "node:crypto";

const MAC =
  /^([0-9a-f]{2})[:-]([0-9a-f]{2})[:-]([0-9a-f]{2})[:-]([0-9a-f]{2})[:-]([0-9a-f]{2})[:-]([0-9a-f]{2})$/i;

/** "AA-BB-…" or "aa:bb:…" → "aa:bb:…"; undefined when the text is not a 48-bit MAC. */
export function normalizeMac(text: string): string | undefined {
  const m = MAC.exec(text.trim());
  return m ? m.slice(1).join(":").toLowerCase() : undefined;
}

/** Six bytes as "aa:bb:cc:dd:ee:ff". */
function formatMac(bytes: Uint8Array): string {
  return Array.from(bytes, (x) => x.toString(16).padStart(2, "0")).join(":");
}

/**
 * The first six of `bytes` as a locally administered unicast MAC: the
 * multicast bit cleared and the local bit set, so it can be no vendor's
 * address and no group's.
 */
export function localUnicastMac(bytes: Uint8Array): string {
  const b = Uint8Array.from(bytes.subarray(0, 6));
  b[0] = ((b[0] as number) & 0xfe) | 0x02;
  return formatMac(b);
}

/** A locally administered unicast MAC derived from `seed` (sha1): the same seed, the same MAC. */
export function derivedMac(seed: string): string {
  return localUnicastMac(createHash("sha1").update(seed).digest());
}
