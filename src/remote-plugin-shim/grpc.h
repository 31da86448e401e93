/*
 * One unary gRPC call over a unix socket: HTTP/2 with prior knowledge (libnghttp2
 * as the client), a POST to /<package>.<Service>/<Method> carrying one
 * length-prefixed message, answered by one message and the grpc-status trailer.
 * Every failure comes back as a gRPC status, whatever its source (socket, HTTP/2,
 * the server's status), so the caller maps one kind of thing to CNI.
 */
#ifndef SHIM_GRPC_H
#define SHIM_GRPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum {
  GRPC_OK = 0,
  GRPC_CANCELLED = 1,
  GRPC_UNKNOWN = 2,
  GRPC_DEADLINE_EXCEEDED = 4,
  GRPC_PERMISSION_DENIED = 7,
  GRPC_RESOURCE_EXHAUSTED = 8,
  GRPC_UNIMPLEMENTED = 12,
  GRPC_INTERNAL = 13,
  GRPC_UNAVAILABLE = 14,
  GRPC_UNAUTHENTICATED = 16,
};

const char *grpc_status_name(int status);

struct grpc_call {
  const char *socket_path;
  const char *path; /* e.g. "/cnidriver.v1.CNIDriver/SetUpPod" */
  const uint8_t *request;
  size_t request_len;
  /* The call's deadline, from now: connecting and the answer both count. */
  long long timeout_ms;
  /* How long connect(2) may wait for room in a full listen backlog. */
  long long connect_timeout_ms;
};

struct grpc_outcome {
  int status; /* GRPC_OK: `response` holds the answer */
  char *message;
  uint8_t *response;
  size_t response_len;
  /* The errno of a connect(2) that failed, 0 when the socket connected. */
  int connect_errno;
};

void grpc_unary(const struct grpc_call *call, struct grpc_outcome *out);
void grpc_outcome_free(struct grpc_outcome *out);

#endif
