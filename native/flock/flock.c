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
 *
 * And inotify(7), with which the in-process host-local knows whether anyone
 * changed a network's lease directory since it last looked, so it need not
 * read every lease file again on every call:
 *
 *   inotifyInit(): number
 *       a non-blocking inotify descriptor (one per process serves every directory).
 *   watchDir(fd: number, path: string): number
 *       watches the directory for entries created, deleted, moved, written or
 *       changed, and for its own removal or move; returns the watch descriptor.
 *   drainEvents(fd: number): Array<[wd: number, name: string, untrusted: boolean]>
 *       every queued event, emptying the queue ([] when nothing happened);
 *       untrusted when the watch can no longer be relied on (the directory
 *       went or moved, the watch was removed), or, with wd -1, when the queue
 *       overflowed and events were lost.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdalign.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <unistd.h>

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

#define WATCH_MASK                                                                      \
  (IN_CREATE | IN_DELETE | IN_MODIFY | IN_ATTRIB | IN_MOVED_FROM | IN_MOVED_TO |         \
   IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)
#define UNTRUSTED (IN_Q_OVERFLOW | IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT)

static napi_value throw_usage(napi_env env, const char *usage) {
  napi_throw_type_error(env, NULL, usage);
  return NULL;
}

static napi_value js_inotify_init(napi_env env, napi_callback_info info) {
  (void)info;
  int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd < 0) {
    napi_throw(env, errno_error(env, errno, "inotify_init1"));
    return NULL;
  }
  napi_value result;
  napi_create_int32(env, fd, &result);
  return result;
}

static napi_value js_watch_dir(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  int32_t fd;
  size_t len = 0;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc < 2 || napi_get_value_int32(env, argv[0], &fd) != napi_ok || fd < 0 ||
      napi_get_value_string_utf8(env, argv[1], NULL, 0, &len) != napi_ok)
    return throw_usage(env, "watchDir(fd: number, path: string)");
  char *path = malloc(len + 1);
  if (!path) {
    napi_throw(env, errno_error(env, ENOMEM, "watchDir"));
    return NULL;
  }
  napi_get_value_string_utf8(env, argv[1], path, len + 1, &len);
  int wd = inotify_add_watch(fd, path, WATCH_MASK);
  int err = errno;
  free(path);
  if (wd < 0) {
    napi_throw(env, errno_error(env, err, "inotify_add_watch"));
    return NULL;
  }
  napi_value result;
  napi_create_int32(env, wd, &result);
  return result;
}

/* [wd, name, untrusted] for each queued event; wd -1 for an overflowed queue. */
static napi_value js_drain_events(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  int32_t fd;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc < 1 || napi_get_value_int32(env, argv[0], &fd) != napi_ok || fd < 0)
    return throw_usage(env, "drainEvents(fd: number)");
  napi_value events;
  napi_create_array(env, &events);
  uint32_t count = 0;
  alignas(struct inotify_event) char buf[8192];
  for (;;) {
    ssize_t len = read(fd, buf, sizeof buf);
    if (len < 0 && errno == EINTR) continue;
    if (len < 0 && errno == EAGAIN) break;
    if (len < 0) {
      napi_throw(env, errno_error(env, errno, "read inotify"));
      return NULL;
    }
    if (len == 0) break;
    for (char *p = buf; p < buf + len;) {
      const struct inotify_event *ev = (const struct inotify_event *)p;
      napi_value entry, wd, name, untrusted;
      napi_create_array_with_length(env, 3, &entry);
      napi_create_int32(env, ev->wd, &wd);
      napi_create_string_utf8(env, ev->len ? ev->name : "", ev->len ? strlen(ev->name) : 0,
                              &name);
      napi_get_boolean(env, (ev->mask & UNTRUSTED) != 0, &untrusted);
      napi_set_element(env, entry, 0, wd);
      napi_set_element(env, entry, 1, name);
      napi_set_element(env, entry, 2, untrusted);
      napi_set_element(env, events, count++, entry);
      p += sizeof *ev + ev->len;
    }
  }
  return events;
}

NAPI_MODULE_INIT(/* napi_env env, napi_value exports */) {
  napi_property_descriptor props[] = {
      {"flock", NULL, js_flock, NULL, NULL, NULL, napi_enumerable, NULL},
      {"inotifyInit", NULL, js_inotify_init, NULL, NULL, NULL, napi_enumerable, NULL},
      {"watchDir", NULL, js_watch_dir, NULL, NULL, NULL, napi_enumerable, NULL},
      {"drainEvents", NULL, js_drain_events, NULL, NULL, NULL, napi_enumerable, NULL},
  };
  napi_define_properties(env, exports, 4, props);
  return exports;
}
