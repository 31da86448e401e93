/*
 * cni_driver_netlink: NETLINK_ROUTE sockets bound in any network namespace, and
 * one synchronous request/response exchange on them. Everything above the socket
 * (message encoding, decoding, errors the kernel reports in NLMSG_ERROR) is done
 * in JavaScript: src/plumbing/netlink/.
 *
 * A netlink socket stays bound to the netns it was created in, whatever the
 * thread does afterwards; so open() enters the target netns on the calling
 * thread only for the socket() call and returns to where it was. setns() with
 * CLONE_NEWNET changes the calling thread alone, which is why the caller runs
 * these functions on a dedicated worker thread, never on the main one (the
 * kernel also processes an rtnetlink request inside sendmsg, which can take tens
 * of milliseconds under rtnl_lock).
 *
 *   open(nsPath: string | null): number   socket fd (null: the thread's netns)
 *   request(fd: number, msg: Buffer): Buffer
 *   requestDetached(fd, msg, callback(err, answer)): the same, on a thread of its own
 *   close(fd: number): undefined
 *
 * System call failures throw an Error whose `code` is the errno name ("ENOENT")
 * and whose `errno` is the number.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <node_api.h>

#include "../common/errno-error.h"
#include "../common/netlink-socket.h"
#include "../common/pin-library.h"

/* Large enough for any datagram the kernel builds for a dump (it caps them at 32 KiB). */
#define RECV_BUFFER_SIZE (64 * 1024)
#define NS_PATH_MAX 4096

/* Throws an Error with `code` and `errno`; returns NULL for the caller to return. */
static napi_value throw_errno(napi_env env, int err, const char *what, const char *detail) {
  char prefix[NS_PATH_MAX + 128];
  if (detail)
    snprintf(prefix, sizeof prefix, "%s %s", what, detail);
  else
    snprintf(prefix, sizeof prefix, "%s", what);
  napi_throw(env, errno_error(env, err, prefix));
  return NULL;
}

static napi_value throw_type(napi_env env, const char *message) {
  napi_throw_type_error(env, NULL, message);
  return NULL;
}

static int get_fd(napi_env env, napi_value value, int *fd) {
  napi_valuetype t;
  if (napi_typeof(env, value, &t) != napi_ok || t != napi_number) return -1;
  if (napi_get_value_int32(env, value, fd) != napi_ok || *fd < 0) return -1;
  return 0;
}

static napi_value js_open(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  napi_valuetype t = napi_undefined;
  if (argc >= 1) napi_typeof(env, argv[0], &t);
  if (t == napi_null || t == napi_undefined) {
    int fd = open_netlink_socket(NETLINK_ROUTE);
    if (fd < 0) return throw_errno(env, errno, "netlink socket", NULL);
    napi_value out;
    napi_create_int32(env, fd, &out);
    return out;
  }
  if (t != napi_string) return throw_type(env, "open(nsPath): nsPath must be a string or null");
  char path[NS_PATH_MAX];
  size_t len = 0;
  napi_get_value_string_utf8(env, argv[0], path, sizeof path, &len);
  if (len == 0 || len >= sizeof path - 1) return throw_type(env, "open(nsPath): bad path length");

  int target = open(path, O_RDONLY | O_CLOEXEC);
  if (target < 0) return throw_errno(env, errno, "open netns", path);
  int home = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  if (home < 0) {
    int err = errno;
    close(target);
    return throw_errno(env, err, "open", "/proc/thread-self/ns/net");
  }
  if (setns(target, CLONE_NEWNET) < 0) {
    int err = errno;
    close(target);
    close(home);
    return throw_errno(env, err, "setns", path);
  }
  int fd = open_netlink_socket(NETLINK_ROUTE);
  int socket_err = fd < 0 ? errno : 0;
  if (setns(home, CLONE_NEWNET) < 0) {
    /* The thread is stranded in another netns: nothing it does afterwards can be trusted. */
    int err = errno;
    if (fd >= 0) close(fd);
    close(target);
    close(home);
    return throw_errno(env, err, "setns back to the thread's netns from", path);
  }
  close(target);
  close(home);
  if (fd < 0) return throw_errno(env, socket_err, "netlink socket in", path);
  napi_value out;
  napi_create_int32(env, fd, &out);
  return out;
}

/*
 * Sends one message and collects every datagram up to the end of its answer: the
 * NLMSG_ERROR (an ack when its error is 0) or, for a dump, the NLMSG_DONE carrying
 * the request's sequence number. Messages with another sequence number are left
 * out (answers to an exchange abandoned earlier). Touches no JavaScript state, so
 * it runs on any thread. Returns 0 and a malloc'd answer, or an errno and what failed.
 */
static int exchange(int fd, const void *data, size_t size, unsigned char **answer,
                    size_t *answer_len, const char **what) {
  const struct nlmsghdr *req = data;
  uint32_t seq = req->nlmsg_seq;
  struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
  struct iovec iov = {.iov_base = (void *)data, .iov_len = size};
  struct msghdr mh = {.msg_name = &kernel, .msg_namelen = sizeof kernel, .msg_iov = &iov, .msg_iovlen = 1};
  ssize_t sent;
  do sent = sendmsg(fd, &mh, 0);
  while (sent < 0 && errno == EINTR);
  if (sent < 0) {
    *what = "netlink sendmsg";
    return errno;
  }

  unsigned char *chunk = malloc(RECV_BUFFER_SIZE);
  unsigned char *out = NULL;
  size_t out_len = 0, out_cap = 0;
  int err = 0;
  if (!chunk) {
    *what = "netlink recv buffer";
    return ENOMEM;
  }
  int done = 0;
  while (!done) {
    struct iovec riov = {.iov_base = chunk, .iov_len = RECV_BUFFER_SIZE};
    struct sockaddr_nl from;
    struct msghdr rmh = {.msg_name = &from, .msg_namelen = sizeof from, .msg_iov = &riov, .msg_iovlen = 1};
    ssize_t got = recvmsg(fd, &rmh, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      err = errno;
      *what = "netlink recvmsg";
      break;
    }
    if (rmh.msg_flags & MSG_TRUNC) {
      err = EMSGSIZE;
      *what = "netlink recvmsg (datagram truncated)";
      break;
    }
    if (from.nl_pid != 0) continue; /* only the kernel talks to us */
    /* Keep the messages of this exchange; stop after its terminator. */
    size_t keep_from = 0, keep_to = 0;
    int first = 1;
    int remaining = (int)got;
    for (struct nlmsghdr *h = (struct nlmsghdr *)chunk; NLMSG_OK(h, remaining);
         h = NLMSG_NEXT(h, remaining)) {
      size_t off = (unsigned char *)h - chunk;
      size_t end = off + NLMSG_ALIGN(h->nlmsg_len);
      if (end > (size_t)got) end = (size_t)got;
      if (h->nlmsg_seq != seq) continue;
      if (first) {
        keep_from = off;
        first = 0;
      }
      keep_to = end;
      if (h->nlmsg_type == NLMSG_ERROR || h->nlmsg_type == NLMSG_DONE) {
        done = 1;
        break;
      }
    }
    if (!first) {
      size_t n = keep_to - keep_from;
      if (out_len + n > out_cap) {
        size_t cap = out_cap ? out_cap : RECV_BUFFER_SIZE;
        while (cap < out_len + n) cap *= 2;
        unsigned char *grown = realloc(out, cap);
        if (!grown) {
          err = ENOMEM;
          *what = "netlink response buffer";
          break;
        }
        out = grown;
        out_cap = cap;
      }
      memcpy(out + out_len, chunk + keep_from, n);
      out_len += n;
    }
  }
  free(chunk);
  if (err) {
    free(out);
    return err;
  }
  *answer = out;
  *answer_len = out_len;
  return 0;
}

/* Reads (fd, msg) arguments; returns 0, or -1 with a TypeError thrown. */
static int get_request_args(napi_env env, size_t argc, napi_value *argv, int *fd, void **data,
                            size_t *size) {
  if (argc < 2 || get_fd(env, argv[0], fd) < 0) {
    throw_type(env, "request(fd, msg): fd must be a socket descriptor");
    return -1;
  }
  bool is_buffer = false;
  napi_is_buffer(env, argv[1], &is_buffer);
  if (!is_buffer) {
    throw_type(env, "request(fd, msg): msg must be a Buffer");
    return -1;
  }
  napi_get_buffer_info(env, argv[1], data, size);
  if (*size < sizeof(struct nlmsghdr)) {
    throw_type(env, "request: msg is shorter than a header");
    return -1;
  }
  return 0;
}

static napi_value answer_buffer(napi_env env, unsigned char *out, size_t out_len) {
  napi_value result;
  void *copy;
  napi_status st =
      napi_create_buffer_copy(env, out_len, out_len ? (void *)out : (void *)"", &copy, &result);
  return st == napi_ok ? result : NULL;
}

static napi_value js_request(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  int fd;
  void *data;
  size_t size;
  if (get_request_args(env, argc, argv, &fd, &data, &size) < 0) return NULL;
  unsigned char *out = NULL;
  size_t out_len = 0;
  const char *what = NULL;
  int err = exchange(fd, data, size, &out, &out_len, &what);
  if (err) return throw_errno(env, err, what, NULL);
  napi_value result = answer_buffer(env, out, out_len);
  free(out);
  if (!result) return throw_errno(env, ENOMEM, "netlink response buffer", NULL);
  return result;
}

/*
 * requestDetached: the same exchange on a thread of its own, for requests the
 * kernel is slow to answer. Deleting a veth waits for RCU grace periods inside
 * sendmsg (15-45 ms); the calling thread must not wait, and concurrent
 * deletions overlap their waits in the kernel (64 deletions: ~1.2 s one after
 * another, ~0.2 s sixteen at a time). The socket must not be used by anyone
 * else until the callback ran.
 */
typedef struct {
  int fd;
  void *msg;
  size_t size;
  unsigned char *out;
  size_t out_len;
  int err;
  const char *what;
  napi_threadsafe_function tsfn;
  /* The environment's teardown began (job_env_closing): its tsfn may be freed. Guarded by mu. */
  pthread_mutex_t mu;
  int closing;
} job_t;

static void free_job(job_t *job) {
  pthread_mutex_destroy(&job->mu);
  free(job->msg);
  free(job->out);
  free(job);
}

/*
 * Registered after the job's tsfn, so it runs first in the environment's
 * teardown (hooks run in reverse order): from then on the thread leaves the
 * tsfn alone and the job to the exit. Without it a worker ending while a
 * deletion is still in the kernel crashed the process.
 */
static void job_env_closing(void *arg) {
  job_t *job = arg;
  pthread_mutex_lock(&job->mu);
  job->closing = 1;
  pthread_mutex_unlock(&job->mu);
}

/* On the JavaScript thread: callback(err, answer). env is NULL when it is being torn down. */
static void deliver(napi_env env, napi_value callback, void *context, void *data) {
  job_t *job = data;
  if (env != NULL && callback != NULL) {
    napi_value argv[2], undefined;
    napi_get_undefined(env, &undefined);
    if (job->err) {
      argv[0] = errno_error(env, job->err, job->what);
      argv[1] = undefined;
    } else {
      argv[0] = undefined;
      argv[1] = answer_buffer(env, job->out, job->out_len);
      if (!argv[1]) argv[1] = undefined;
    }
    napi_call_function(env, undefined, callback, 2, argv, NULL);
  }
  // The thread may still hold the lock it delivered under: wait it out before freeing.
  pthread_mutex_lock(&job->mu);
  pthread_mutex_unlock(&job->mu);
  // Without env (the teardown flushing the queue) the hook has run already.
  if (env != NULL) napi_remove_env_cleanup_hook(env, job_env_closing, job);
  free_job(job);
}

static void *run_job(void *arg) {
  job_t *job = arg;
  job->err = exchange(job->fd, job->msg, job->size, &job->out, &job->out_len, &job->what);
  napi_threadsafe_function tsfn = job->tsfn;
  pthread_mutex_lock(&job->mu);
  if (!job->closing) {
    // Fails only while the environment is torn down: the job is left to the exit then.
    napi_call_threadsafe_function(tsfn, job, napi_tsfn_blocking);
    napi_release_threadsafe_function(tsfn, napi_tsfn_release);
  }
  pthread_mutex_unlock(&job->mu);
  return NULL;
}

static napi_value js_request_detached(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  int fd;
  void *data;
  size_t size;
  if (get_request_args(env, argc, argv, &fd, &data, &size) < 0) return NULL;
  napi_valuetype t = napi_undefined;
  if (argc >= 3) napi_typeof(env, argv[2], &t);
  if (t != napi_function)
    return throw_type(env, "requestDetached(fd, msg, callback): callback must be a function");
  job_t *job = calloc(1, sizeof *job);
  if (!job || !(job->msg = malloc(size))) {
    free(job);
    return throw_errno(env, ENOMEM, "netlink request", NULL);
  }
  memcpy(job->msg, data, size);
  job->fd = fd;
  job->size = size;
  pthread_mutex_init(&job->mu, NULL);
  napi_value name;
  napi_create_string_utf8(env, "cni_driver_netlink.requestDetached", NAPI_AUTO_LENGTH, &name);
  if (napi_create_threadsafe_function(env, argv[2], NULL, name, 0, 1, NULL, NULL, NULL, deliver,
                                      &job->tsfn) != napi_ok) {
    free_job(job);
    return throw_errno(env, ENOMEM, "netlink threadsafe function", NULL);
  }
  napi_add_env_cleanup_hook(env, job_env_closing, job);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, 256 * 1024);
  pthread_t thread;
  int err = pthread_create(&thread, &attr, run_job, job);
  pthread_attr_destroy(&attr);
  if (err) {
    napi_remove_env_cleanup_hook(env, job_env_closing, job);
    napi_release_threadsafe_function(job->tsfn, napi_tsfn_abort);
    free_job(job);
    return throw_errno(env, err, "pthread_create", NULL);
  }
  return NULL;
}

static napi_value js_close(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  int fd;
  if (argc < 1 || get_fd(env, argv[0], &fd) < 0)
    return throw_type(env, "close(fd): fd must be a descriptor");
  if (close(fd) < 0 && errno != EINTR) return throw_errno(env, errno, "close", NULL);
  return NULL;
}

NAPI_MODULE_INIT(/* napi_env env, napi_value exports */) {
  pin_library((void *)js_request_detached);
  napi_property_descriptor props[] = {
      {"open", NULL, js_open, NULL, NULL, NULL, napi_enumerable, NULL},
      {"request", NULL, js_request, NULL, NULL, NULL, napi_enumerable, NULL},
      {"requestDetached", NULL, js_request_detached, NULL, NULL, NULL, napi_enumerable, NULL},
      {"close", NULL, js_close, NULL, NULL, NULL, napi_enumerable, NULL},
  };
  napi_define_properties(env, exports, sizeof props / sizeof props[0], props);
  return exports;
}
