/** A bounded wait: polls `probe` until it answers something truthy, or fails naming `what`. */
export async function until<T>(
  probe: () => Promise<T | undefined | null | false> | T | undefined | null | false,
  what: string,
  ms = 10_000,
  everyMs = 20,
): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await probe();
    if (v !== undefined && v !== null && v !== false) return v as T;
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
