/**
 * A bounded wait: polls `probe` until it answers something truthy, or fails
 * naming `what`. The bound is stretched by the patience factor (patience.ts).
 */
import { patient } from "./patience.js";

export async function until<T>(
  probe: () => Promise<T | undefined | null | false> | T | undefined | null | false,
  what: string,
  ms = 10_000,
  everyMs = 20,
): Promise<T> {
  const bound = patient(ms);
  const deadline = Date.now() + bound;
  for (;;) {
    const v = await probe();
    if (v !== undefined && v !== null && v !== false) return v as T;
    if (Date.now() > deadline) throw new Error(`timed out after ${bound} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
