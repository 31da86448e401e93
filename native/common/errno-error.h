/*
 * The Error both addons hand JavaScript for a failed system call: the message
 * "<what>: <strerror>", `code` the errno name ("ENOENT") and `errno` the
 * number, as Node's own fs and net errors carry them.
 */
#ifndef CNI_DRIVER_ERRNO_ERROR_H
#define CNI_DRIVER_ERRNO_ERROR_H

#include <stdio.h>
#include <string.h>

#include <node_api.h>

static inline const char *errno_name(int err) {
  const char *name = strerrorname_np(err);
  return name ? name : "EUNKNOWN";
}

/* An Error with a message of its own, `code` and `errno` from err. */
static inline napi_value coded_error(napi_env env, int err, const char *text) {
  napi_value code, msg, error, errnum;
  napi_create_string_utf8(env, errno_name(err), NAPI_AUTO_LENGTH, &code);
  napi_create_string_utf8(env, text, NAPI_AUTO_LENGTH, &msg);
  napi_create_error(env, code, msg, &error);
  napi_create_int32(env, err, &errnum);
  napi_set_named_property(env, error, "errno", errnum);
  return error;
}

static inline napi_value errno_error(napi_env env, int err, const char *what) {
  char message[4096 + 256];
  snprintf(message, sizeof message, "%s: %s", what, strerror(err));
  return coded_error(env, err, message);
}

#endif
