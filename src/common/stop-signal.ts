/**
 * How a long-running command (`serve`, `midonet-controller`) learns to stop:
 * the first SIGTERM (the kubelet) or SIGINT (Ctrl-C); and how it ends once stopped.
 */

/**
 * Resolves with the first SIGTERM or SIGINT. Both handlers go on that first
 * signal, so a second one takes Node's default and ends a shutdown that hangs.
 */
export function untilStopSignal(): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    const stop = (signal: NodeJS.Signals) => {
      process.off("SIGTERM", stop);
      process.off("SIGINT", stop);
      resolve(signal);
    };
    process.on("SIGTERM", stop);
    process.on("SIGINT", stop);
  });
}

/** Long enough for stdout and stderr to drain; short against any grace period. */
const EXIT_GRACE_MS = 500;

/**
 * Ends a daemon whose stop is done, with `code`. The exit does not wait for the
 * event loop to empty: a request the stop could not end (a connection to an API
 * server that accepted it and never answers, until its call deadline) would
 * otherwise hold the process past the kubelet's grace period.
 */
export function exitAfterStop(code = 0): void {
  process.exitCode = code;
  setTimeout(() => process.exit(code), EXIT_GRACE_MS).unref();
}
