/**
 * How a long-running command (`serve`, `midonet-controller`) learns to stop:
 * the first SIGTERM (the kubelet) or SIGINT (Ctrl-C).
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
