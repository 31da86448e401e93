/**
 * gRPC status codes, and how a failure to get the driver's answer maps to CNI.
 * The shim (src/remote-plugin-shim/driver.c) maps them the same way, word for word.
 */
import { CniError, ErrorCode } from "../cni/errors.js";

/** gRPC status codes (grpc/doc/statuscodes.md), by name. */
export const GrpcStatus = {
  OK: 0,
  CANCELLED: 1,
  UNKNOWN: 2,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  ALREADY_EXISTS: 6,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  FAILED_PRECONDITION: 9,
  ABORTED: 10,
  OUT_OF_RANGE: 11,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  DATA_LOSS: 15,
  UNAUTHENTICATED: 16,
} as const;

const STATUS_NAMES = Object.keys(GrpcStatus);

/** "UNAVAILABLE" for 14; the number itself for a code gRPC does not define. */
function grpcStatusName(status: number): string {
  return STATUS_NAMES[status] ?? String(status);
}

/**
 * A non-OK gRPC status is not a CNI answer but a failure to get one; the proto's
 * header says how it maps: UNAVAILABLE and DEADLINE_EXCEEDED → 11 (try again
 * later), UNIMPLEMENTED → 1 (the driver predates the method), anything else → 999.
 * One mapping for every TypeScript client.
 */
export function transportCniError(status: number, message: string, socketPath: string): CniError {
  const name = grpcStatusName(status);
  const code =
    status === GrpcStatus.UNAVAILABLE || status === GrpcStatus.DEADLINE_EXCEEDED
      ? ErrorCode.TryAgainLater
      : status === GrpcStatus.UNIMPLEMENTED
        ? ErrorCode.IncompatibleVersion
        : ErrorCode.Internal;
  return new CniError(
    code,
    `cni-driver at ${socketPath}: ${name}: ${message}`,
    `gRPC status ${name}`,
  );
}
