/**
 * A refused rtnetlink request, or a failure to reach the netns it was meant for.
 * It is an IpCommandError so callers keep one `instanceof` for both backends; the
 * command is written in `ip` syntax, so the message names the operation and the
 * link the same way, and `notFound` / `exists` come from the errno instead of
 * iproute2's wording.
 */
import { getSystemErrorMap } from "node:util";
import { IpCommandError } from "../ip-batch.js";

/** What crosses the worker boundary (structured clone keeps no prototype). */
export interface NetlinkErrorData {
  command: string;
  netns: string | undefined;
  /** "ENODEV", "EEXIST", … */
  code: string;
  errno: number;
  extack?: string;
  /** Set instead of the errno text when the failure is ours (e.g. a link of the wrong kind). */
  detail?: string;
}

let errnoNames: Map<number, [string, string]> | undefined;

/** "ENODEV" and "No such device" for a positive errno. */
function describeErrno(errno: number): { code: string; text: string } {
  errnoNames ??= getSystemErrorMap();
  const entry = errnoNames.get(-errno);
  if (!entry) return { code: `E${errno}`, text: `error ${errno}` };
  const [code, text] = entry;
  return { code, text: text.charAt(0).toUpperCase() + text.slice(1) };
}

export class NetlinkError extends IpCommandError {
  readonly code: string;
  readonly errno: number;
  readonly extack: string | undefined;

  constructor(readonly data: NetlinkErrorData) {
    const reason =
      data.detail ??
      `${describeErrno(data.errno).text} (${data.code})${data.extack ? `: ${data.extack}` : ""}`;
    super(data.command, reason, data.netns);
    this.name = "NetlinkError";
    this.message = `${data.netns ? `in netns ${data.netns}: ` : ""}${data.command}: ${reason}`;
    this.code = data.code;
    this.errno = data.errno;
    this.extack = data.extack;
  }

  static fromErrno(
    command: string,
    netns: string | undefined,
    errno: number,
    extack?: string,
  ): NetlinkError {
    return new NetlinkError({
      command,
      netns,
      errno,
      code: describeErrno(errno).code,
      ...(extack ? { extack } : {}),
    });
  }

  /** The device (or route) is not there: ENODEV from link lookups, ESRCH from route deletion. */
  override get notFound(): boolean {
    return this.code === "ENODEV" || this.code === "ESRCH";
  }

  override get exists(): boolean {
    return this.code === "EEXIST";
  }
}
