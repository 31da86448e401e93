/** MAC addresses in the lowercase colon form CNI results use. */
import { randomBytes } from "node:crypto";

/** A random locally administered unicast MAC. */
export function randomMac(): string {
  const b = randomBytes(6);
  b[0] = ((b[0] as number) & 0xfe) | 0x02;
  return formatMac(b);
}

export function formatMac(bytes: Uint8Array): string {
  return Array.from(bytes, (x) => x.toString(16).padStart(2, "0")).join(":");
}

/** Normalises "AA-BB-…" or "aa:bb:…" to lowercase colons; undefined when it is not a MAC. */
export function normalizeMac(text: string): string | undefined {
  const m =
    /^([0-9a-f]{2})[:-]([0-9a-f]{2})[:-]([0-9a-f]{2})[:-]([0-9a-f]{2})[:-]([0-9a-f]{2})[:-]([0-9a-f]{2})$/i.exec(
      text.trim(),
    );
  return m ? m.slice(1).join(":").toLowerCase() : undefined;
}
