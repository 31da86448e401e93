/*
 * The driver's five methods over grpc.c, with the messages of shim.proto, and
 * transport failures mapped to CNI errors as proto/cni_driver.proto's header says:
 * UNAVAILABLE and DEADLINE_EXCEEDED -> 11 (try again later), UNIMPLEMENTED -> 1
 * (the driver predates the method), anything else -> 999 with the status as
 * details. The wording is that of the driver's own client (src/wire/grpc-status.ts),
 * so a message reads the same whichever client printed it. A socket the shim may
 * not open is no driver away: code 5 at once, naming the socket.
 */
#ifndef SHIM_DRIVER_H
#define SHIM_DRIVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cni.h"
#include "config.h"

enum driver_method { SET_UP_POD, TEAR_DOWN_POD, CHECK_POD, CNI_STATUS, GARBAGE_COLLECT };

/* How long connect(2) may wait for room in the driver's listen backlog. */
#define CONNECT_TIMEOUT_MS 2000

struct driver_answer {
  struct cni_error error; /* code 0: the call succeeded */
  bool transport_error;   /* no CNI answer came from the driver */
  bool not_ready;         /* the driver refused the call as not ready: it did nothing */
  char *result_json;      /* SetUpPod's result, on success */
  /* GarbageCollect: every error after the first, as "code: msg". */
  char **more_errors;
  size_t more_error_count;
};

struct pod_call {
  const struct cni_env *env;
  const struct shim_config *conf;
  const struct cni_arg *args;
  size_t arg_count;
  const char *stdin_data;
  size_t stdin_len;
};

/* One call; never fails in any other way than through `ans->error`. */
void driver_pod(enum driver_method method, const struct pod_call *call, long long timeout_ms,
                struct driver_answer *ans);
void driver_status(const struct shim_config *conf, long long timeout_ms, struct driver_answer *ans);
void driver_gc(const struct shim_config *conf, const struct gc_attachment *valid, size_t count,
               struct driver_answer *ans);

/* ADD and CHECK: calls until the answer is not code 11 or timeoutSeconds ran out.
 * Returns the number of attempts. */
int driver_pod_retrying(enum driver_method method, const struct pod_call *call,
                        struct driver_answer *ans);

void driver_answer_free(struct driver_answer *ans);

#endif
