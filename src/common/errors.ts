/** What to say about a thrown value, which need not be an Error. */

/** An Error's message; anything else thrown, as text. */
export function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
