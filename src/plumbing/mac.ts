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

export function formatMac(bytes: Uint8Array): string {
  return Array.from(bytes, (x) => x.toString(16).padStart(2, "0")).join(":");
}

/** A random locally administered unicast MAC. */
export function randomMac(): string {
  const b = randomBytes(6);
  b[0] = ((b[0] as number) & 0xfe) | 0x02;
  return formatMac(b);
}
