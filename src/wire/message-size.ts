/**
 * The largest gRPC message the driver and its client take: 16 times the largest
 * field limit (a 1 MiB stdin config, src/cni/limits.ts), so a request with a
 * field far past its limit still reaches the validation and is answered with
 * CNI's code 4, not gRPC's RESOURCE_EXHAUSTED. The client takes answers up to
 * the same size.
 */
export const MAX_GRPC_MESSAGE_BYTES = 16 * 1024 * 1024;
