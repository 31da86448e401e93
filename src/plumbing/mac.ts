/**
 * MAC addresses in the form CNI results and Kubernetes annotations use:
 * lowercase, colon-separated. Pure (no I/O), so the MidoNet mapping shares it.
 */
import { randomBytes } from "node:crypto";

const MAC =
  /^([0-9a-f]{2})[:-]([0-9a-f]{2})[:-]([0-9a-f]{2})[:-]([0-9a-f]{2})[:-]([0-9a-f]{2})[:-]([0-9a-f]{2})$/i;

/** "AA-BB-…" or "aa:bb:…" → "aa:bb:…"; undefined when the text is not a 48-bit MAC. */
export function normalizeMac(text: string): string | undefined {
  const m = MAC.exec(text.trim());
  return m ? m.slice(1).join(":").toLowerCase() : undefined;
}

/**
 * Whether a host link may still be the pod's host end the cache recorded: when
 * both MACs are known they must match, as a newer sandbox of the same pod may
 * own the name by now; when either is unknown, the name alone decides.
 */
export function hostMacStillMatches(
  recorded: string | undefined,
  current: string | undefined,
): boolean {
  return !recorded || !current || recorded.toLowerCase() === current.toLowerCase();
}

export function formatMac(bytes: Uint8Array): string {
  return Array.from(bytes, (x) => x.toString(16).padStart(2, "0")).join(":");
}

/** A random locally administered unicast MAC. */
export function randomMac(): string {
  const b = randomBytes(6);
  b[0] = ((b[0] as number) & 0xfe) | 0x02;
  return formatMac(b);
}
