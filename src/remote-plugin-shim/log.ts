/**
 * The shim's log: one JSON line per event, appended to the conflist's `logFile`,
 * and nothing at all without one. Never stdout (the runtime parses it) and never
 * stderr (libcni shows it as the error text when stdout is empty). Logging must
 * not fail a CNI call, so write errors are dropped.
 */
import { appendFileSync } from "node:fs";

export type ShimLog = (event: string, fields?: Record<string, unknown>) => void;

export function openShimLog(logFile: string | undefined): ShimLog {
  if (!logFile) return () => {};
  return (event, fields = {}) => {
    try {
      const line = JSON.stringify({
        time: new Date().toISOString(),
        pid: process.pid,
        event,
        ...fields,
      });
      appendFileSync(logFile, `${line}\n`, { mode: 0o600 });
    } catch {
      // A full disk or a bad path must not turn a successful DEL into a failure.
    }
  };
}
