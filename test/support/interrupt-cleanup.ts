/**
 * What a test run made, undone when the run is interrupted: SIGINT (Ctrl-C)
 * or SIGTERM (`timeout`, a CI job's limit). Mocha runs no `after` hook then,
 * so namespaces, links, drivers, servers and temporary roots would outlive
 * the run. Whatever makes one registers a synchronous undo here and takes it
 * back once its own cleanup has run; on a signal every undo still registered
 * runs, newest first, and the process exits as the signal would have had it.
 */
const undos = new Set<() => void>();
let installed = false;

/** Registers `undo`; call the answer to take it back. */
export function undoOnInterrupt(undo: () => void): () => void {
  if (!installed) {
    installed = true;
    for (const [signal, number] of [
      ["SIGINT", 2],
      ["SIGTERM", 15],
    ] as const)
      process.once(signal, () => {
        for (const u of [...undos].reverse()) {
          try {
            u();
          } catch {
            // Undo what else can be: one failing leaves the others to run.
          }
        }
        process.exit(128 + number);
      });
  }
  undos.add(undo);
  return () => {
    undos.delete(undo);
  };
}
