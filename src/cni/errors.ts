/**
 * The CNI error: one typed error carrying the spec's code, a message and details.
 * Every failure that leaves the driver or the shim is one of these, so the runtime
 * sees the code it expects (cni-spec §4).
 */

import { messageOf } from "../common/errors.js";

/** Error codes of the CNI specification (SPEC.md "Error" section). */
export const ErrorCode = {
  IncompatibleVersion: 1,
  UnsupportedField: 2,
  UnknownContainer: 3,
  InvalidEnvironment: 4,
  IOFailure: 5,
  DecodingFailure: 6,
  InvalidNetworkConfig: 7,
  InvalidNetns: 8,
  TryAgainLater: 11,
  /** STATUS: the plugin cannot serve ADD right now. */
  PluginNotAvailable: 50,
  /** STATUS: cannot serve ADD, and existing pods may have limited connectivity. */
  PluginNotAvailableLimitedConnectivity: 51,
  /** First of the plugin-specific codes. */
  PluginSpecific: 100,
  /** Go's catch-all for errors that are not *types.Error. */
  Internal: 999,
} as const;

export type ErrorCodeValue = (typeof ErrorCode)[keyof typeof ErrorCode] | number;

/**
 * Whether `code` can stand for a failure: on the wire an error's code is a
 * uint32 and 0 means "no error", so a plugin that fails with code 0 (a Go
 * plugin returning `&types.Error{Msg: …}` does) or with a code past 2^32-1
 * must not pass as it is: it would read as success.
 */
export function isFailureCode(code: number): boolean {
  return Number.isInteger(code) && code >= 1 && code <= 0xffffffff;
}

/** The JSON form a plugin prints on stdout on failure. */
interface CniErrorJson {
  cniVersion?: string;
  code: number;
  msg: string;
  details?: string;
}

export class CniError extends Error {
  readonly code: number;
  readonly details: string;

  constructor(code: ErrorCodeValue, msg: string, details = "") {
    super(msg);
    this.name = "CniError";
    this.code = code;
    this.details = details;
  }

  /** The spec's error object; `details` is omitted when empty, as Go's omitempty does. */
  toJSON(cniVersion?: string): CniErrorJson {
    const out = {} as CniErrorJson;
    if (cniVersion) out.cniVersion = cniVersion;
    out.code = this.code;
    out.msg = this.message;
    if (this.details) out.details = this.details;
    return out;
  }

  /** Reads an error printed by a plugin; undefined when the text is not one. */
  static fromJSON(value: unknown): CniError | undefined {
    if (typeof value !== "object" || value === null) return undefined;
    const v = value as Record<string, unknown>;
    if (typeof v.code !== "number" || !Number.isInteger(v.code)) return undefined;
    const msg = typeof v.msg === "string" ? v.msg : "";
    const details = typeof v.details === "string" ? v.details : "";
    return new CniError(v.code, msg, details);
  }

  /** Wraps anything thrown into a CniError, keeping a CniError as it is. */
  static from(err: unknown, code: ErrorCodeValue = ErrorCode.Internal): CniError {
    if (err instanceof CniError) return err;
    const msg = messageOf(err);
    return new CniError(code, msg);
  }
}
