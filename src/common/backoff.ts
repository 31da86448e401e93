/**
 * Exponential backoff with jitter, for everything the driver retries against
 * the Kubernetes API (watch restarts, annotation patches): client-go's
 * wait.Backoff shape — base × 2^attempt, capped, ±20 % so a node's retries do
 * not line up with every other node's after an API server restart.
 */

export interface BackoffPolicy {
  /** The first delay, ms. */
  baseMs: number;
  /** No delay is longer, ms. */
  maxMs: number;
}

/** The delay before retry number `attempt` (0 = the first retry), ms. */
export function backoffDelay(
  policy: BackoffPolicy,
  attempt: number,
  random: () => number = Math.random,
): number {
  const raw = Math.min(policy.maxMs, policy.baseMs * 2 ** Math.min(attempt, 30));
  return Math.round(raw * (0.8 + 0.4 * random()));
}
