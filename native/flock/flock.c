/*
 * cni_driver_flock: flock(2) for JavaScript, which Node does not offer.
 *
 * host-local serialises every change to a network's leases with an exclusive
 * flock on <dataDir>/<network>/lock. The driver's in-process host-local takes
 * the very same lock, so it and host-local binaries exec'd by anyone else on the
 * node (another runtime's chain, an older driver) never hand out one address
 * twice. Only the non-blocking form is offered: a blocking flock would stall
 * the event loop, so the caller polls with a bounded backoff instead.
 *
 *   flock(fd: number, operation: number): boolean
 *       operation: LOCK_EX | LOCK_NB (6) or LOCK_UN (8); true when done, false
 *       when another open file description holds the lock (EWOULDBLOCK); any
 *       other failure throws an Error whose `code` is the errno name.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sys/file.h>

#include <node_api.h>

#include "../common/errno-error.h"

static napi_value js_flock(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  int32_t fd, op;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc < 2 || napi_get_value_int32(env, argv[0], &fd) != napi_ok ||
      napi_get_value_int32(env, argv[1], &op) != napi_ok || fd < 0 ||
      (op != (LOCK_EX | LOCK_NB) && op != LOCK_UN)) {
    napi_throw_type_error(env, NULL, "flock(fd: number, LOCK_EX | LOCK_NB or LOCK_UN)");
    return NULL;
  }
  int rc;
  do {
    rc = flock(fd, op);
  } while (rc < 0 && errno == EINTR);
  napi_value result;
  if (rc < 0 && errno == EWOULDBLOCK) {
    napi_get_boolean(env, false, &result);
    return result;
  }
  if (rc < 0) {
    napi_throw(env, errno_error(env, errno, "flock"));
    return NULL;
  }
  napi_get_boolean(env, true, &result);
  return result;
}

NAPI_MODULE_INIT(/* napi_env env, napi_value exports */) {
  napi_property_descriptor props[] = {
      {"flock", NULL, js_flock, NULL, NULL, NULL, napi_enumerable, NULL},
  };
  napi_define_properties(env, exports, 1, props);
  return exports;
}
