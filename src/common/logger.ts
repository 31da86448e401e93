/**
 * The driver's logger: pino, JSON lines. Logs go to stderr by default because the
 * stdout of the CLI's commands carries CNI JSON, and a stray log line there would
 * corrupt the result a runtime parses.
 */

import pino from "pino";
import { cutShort } from "./cut-short.js";

export type LogLevel = "trace" | "debug" | "info" | "warn" | "error" | "fatal" | "silent";

export const LOG_LEVELS: readonly LogLevel[] = [
  "trace",
  "debug",
  "info",
  "warn",
  "error",
  "fatal",
  "silent",
];

interface LoggerOptions {
  level: LogLevel;
  /** Appears as `name` on every line. */
  name?: string;
  /** A stream, or a file descriptor; default: fd 2 (stderr). */
  destination?: NodeJS.WritableStream | number;
}

export function createLogger(opts: LoggerOptions): pino.Logger {
  const options: pino.LoggerOptions = {
    level: opts.level,
    // Level as its name and time as ISO 8601: readable in `kubectl logs` without a
    // pretty-printer, and still one JSON object a line for log shippers.
    formatters: { level: (label) => ({ level: label }) },
    timestamp: pino.stdTimeFunctions.isoTime,
  };
  if (opts.name !== undefined) options.name = opts.name;
  const dest = opts.destination ?? 2;
  // Synchronous writes to a file descriptor: a line logged just before exit (SIGTERM,
  // a fatal config error) is not lost in a buffer.
  const stream = typeof dest === "number" ? pino.destination({ dest, sync: true }) : dest;
  return pino(options, stream);
}

/** One served call, as it is logged and counted. */
interface CallRecord {
  /** ADD, DEL, CHECK, STATUS, GC, VERSION — or the gRPC method name. */
  verb: string;
  containerId?: string;
  ifName?: string;
  network?: string;
  durationMs: number;
  outcome: "ok" | "error";
  /** The CNI error code, when the call failed. */
  code?: number;
  /** The error message, or a note; default: "<verb> <outcome>". */
  msg?: string;
}

/**
 * Logs exactly one line for a call: info when it succeeded, error when it failed.
 * Absent optional fields are left out rather than written as null.
 */
export function logCall(logger: pino.Logger, call: CallRecord): void {
  const fields: Record<string, string | number> = { verb: call.verb };
  // As the caller sent them, maybe far past their limits: cut short, as error messages quote them.
  if (call.containerId !== undefined) fields.containerId = cutShort(call.containerId);
  if (call.ifName !== undefined) fields.ifName = cutShort(call.ifName);
  if (call.network !== undefined) fields.network = cutShort(call.network);
  // Microsecond precision is plenty and keeps the line short.
  fields.durationMs = Math.round(call.durationMs * 1000) / 1000;
  fields.outcome = call.outcome;
  if (call.code !== undefined) fields.code = call.code;
  const msg = call.msg ?? `${call.verb} ${call.outcome}`;
  if (call.outcome === "ok") logger.info(fields, msg);
  else logger.error(fields, msg);
}
