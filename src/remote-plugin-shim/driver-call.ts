/**
 * The driver's five methods, typed, over grpc-http2.ts and the hand codec, with
 * transport failures mapped to CNI errors as proto/cni_driver.proto's header says:
 * UNAVAILABLE and DEADLINE_EXCEEDED → 11 (try again later), UNIMPLEMENTED → 1 (the
 * driver predates the method), anything else → 999 with the status as details.
 * The wording matches the driver's own client (src/driver/client.ts), so a message
 * reads the same whichever client printed it.
 */
import { CniError, ErrorCode } from "../cni/errors.js";
import { GrpcStatus, transportCniError } from "../wire/grpc-status.js";
import { SERVICE_PATH, type WireCniError } from "../wire/types.js";
import { decodeMessage, encodeMessage, type WireMessages } from "./protobuf.js";

const METHODS = {
  SetUpPod: ["PodRequest", "PodResponse"],
  TearDownPod: ["PodRequest", "TearDownPodResponse"],
  CheckPod: ["PodRequest", "CheckPodResponse"],
  CniStatus: ["CniStatusRequest", "CniStatusResponse"],
  GarbageCollect: ["GarbageCollectRequest", "GarbageCollectResponse"],
} as const;

export type DriverMethod = keyof typeof METHODS;
export type RequestOf<M extends DriverMethod> = WireMessages[(typeof METHODS)[M][0]];
export type ResponseOf<M extends DriverMethod> = WireMessages[(typeof METHODS)[M][1]];

export type DriverAnswer<M extends DriverMethod> =
  /** The driver answered; its `error` (if any) is the CNI answer. */
  | { response: ResponseOf<M>; transportError?: undefined }
  /** No CNI answer: the driver could not be reached, or the call failed below CNI. */
  | { response?: undefined; transportError: CniError };

export interface CallOptions {
  timeoutMs: number;
  connectTimeoutMs?: number;
}

/** One call to the driver; never rejects. */
export async function callDriver<M extends DriverMethod>(
  socketPath: string,
  method: M,
  request: RequestOf<M>,
  opts: CallOptions,
): Promise<DriverAnswer<M>> {
  const [requestType, responseType] = METHODS[method];
  // Loaded on first use: VERSION and input errors need no socket (node:net).
  const { unaryCall } = await import("./grpc-http2.js");
  const outcome = await unaryCall({
    socketPath,
    path: `${SERVICE_PATH}/${method}`,
    request: encodeMessage(requestType, request as never),
    timeoutMs: opts.timeoutMs,
    ...(opts.connectTimeoutMs !== undefined ? { connectTimeoutMs: opts.connectTimeoutMs } : {}),
  });
  if (!outcome.ok) {
    return { transportError: transportCniError(outcome.status, outcome.message, socketPath) };
  }
  try {
    return { response: decodeMessage(responseType, outcome.response) as ResponseOf<M> };
  } catch (err) {
    return {
      transportError: transportCniError(
        GrpcStatus.INTERNAL,
        `cannot decode the ${responseType}: ${(err as Error).message}`,
        socketPath,
      ),
    };
  }
}

/** The CNI error of an answer: the transport's, or the driver's when it set one (code != 0). */
export function answerError<M extends DriverMethod>(answer: DriverAnswer<M>): CniError | undefined {
  if (answer.transportError) return answer.transportError;
  const e = (answer.response as { error: WireCniError | null }).error;
  return e && e.code !== 0 ? new CniError(e.code, e.msg, e.details) : undefined;
}

const LAST_ATTEMPT_MS = 50;

export interface RetryOptions extends CallOptions {
  /** First pause between attempts; it doubles up to maxBackoffMs. */
  initialBackoffMs?: number;
  maxBackoffMs?: number;
}

/**
 * Calls until the answer is something other than "try again later" (code 11, from
 * the transport or from a driver that is not ready yet), or until `timeoutMs` has
 * passed since the first attempt; each attempt gets the time that is left. Returns
 * the last answer and how many attempts were made.
 */
export async function callDriverRetrying<M extends DriverMethod>(
  socketPath: string,
  method: M,
  request: RequestOf<M>,
  opts: RetryOptions,
): Promise<{ answer: DriverAnswer<M>; attempts: number }> {
  const deadline = Date.now() + opts.timeoutMs;
  let backoff = opts.initialBackoffMs ?? 100;
  const maxBackoff = opts.maxBackoffMs ?? 1000;
  for (let attempts = 1; ; attempts++) {
    const remaining = Math.max(1, deadline - Date.now());
    const answer = await callDriver(socketPath, method, request, {
      timeoutMs: remaining,
      connectTimeoutMs: Math.min(remaining, opts.connectTimeoutMs ?? remaining),
    });
    if (answerError(answer)?.code !== ErrorCode.TryAgainLater) return { answer, attempts };
    // The last pause leaves the last attempt some time to connect and be answered.
    const left = deadline - Date.now() - LAST_ATTEMPT_MS;
    if (left <= 0) return { answer, attempts };
    await new Promise((r) => setTimeout(r, Math.min(backoff, left)));
    backoff = Math.min(backoff * 2, maxBackoff);
  }
}
