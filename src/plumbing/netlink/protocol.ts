/**
 * Messages between the main thread and the netlink worker: a request carries an
 * id, the operation's name and its arguments; the reply carries the same id and
 * a value or an error. Errors are sent as data (structured clone drops the
 * prototype) and rebuilt on the main thread, so `instanceof NetlinkError` holds.
 */
import { NetlinkError, type NetlinkErrorData } from "./error.js";

export type NetlinkOpName =
  | "createVethPair"
  | "configureContainerSide"
  | "deletePodInterface"
  | "deleteHostLink"
  | "showLink"
  | "inspectPodInterface"
  | "ensureBridge"
  | "listBridgePorts"
  /** One raw exchange: [netns | null, message bytes] → answer bytes (transferred). */
  | "request"
  | "stats"
  | "sweep"
  /** Closes every socket; the worker ends once it has answered. */
  | "close";

export interface WorkerRequest {
  id: number;
  op: NetlinkOpName;
  args: unknown[];
}

export type SerializedError =
  | { kind: "netlink"; data: NetlinkErrorData }
  | { kind: "error"; name: string; message: string; code?: string; stack?: string };

export type WorkerReply =
  | { id: number; ok: true; value: unknown }
  | { id: number; ok: false; error: SerializedError };

/** The first message of the worker: whether the addon loaded and a socket opened. */
export type WorkerHello =
  | { hello: true; ready: true; addon: string }
  | { hello: true; ready: false; reason: string };

export function serializeError(err: unknown): SerializedError {
  if (err instanceof NetlinkError) return { kind: "netlink", data: err.data };
  const e = err instanceof Error ? err : new Error(String(err));
  const code = (e as NodeJS.ErrnoException).code;
  return {
    kind: "error",
    name: e.name,
    message: e.message,
    ...(typeof code === "string" ? { code } : {}),
    ...(e.stack ? { stack: e.stack } : {}),
  };
}

export function deserializeError(s: SerializedError): Error {
  if (s.kind === "netlink") return new NetlinkError(s.data);
  const err = new Error(s.message);
  err.name = s.name;
  if (s.code !== undefined) Object.assign(err, { code: s.code });
  if (s.stack) err.stack = s.stack;
  return err;
}
