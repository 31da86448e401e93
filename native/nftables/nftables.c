/*
 * cni_driver_nftables: nftables transactions in-process, through libnftables
 * (the library `nft` itself is built on), on the libuv thread pool.
 *
 * NetworkPolicy writes a transaction on every pod's setup; exec'ing nft for
 * each costs a process start (about 5 ms here), which is most of what the
 * transaction costs. The library is opened with dlopen at first use
 * (libnftables.so.1, Debian's libnftables1, which the nftables package
 * depends on), so building needs no -dev package and a node without it
 * falls back to exec'ing nft.
 *
 *   available(): string | null     null when usable; else why not
 *   run(script): Promise<void>     one transaction, as `nft -f` reads a file
 *                                  (the script goes through a memory file);
 *                                  rejects with nft's own error text
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <node_api.h>

#include "../common/pin-library.h"

/* The few symbols of libnftables/libnftables.h used here, declared by hand. */
struct nft_ctx;
#define NFT_CTX_DEFAULT 0
static struct nft_ctx *(*p_nft_ctx_new)(unsigned int flags);
static int (*p_nft_ctx_buffer_error)(struct nft_ctx *ctx);
static int (*p_nft_ctx_buffer_output)(struct nft_ctx *ctx);
static const char *(*p_nft_ctx_get_error_buffer)(struct nft_ctx *ctx);
static int (*p_nft_run_cmd_from_filename)(struct nft_ctx *ctx, const char *filename);
static void (*p_nft_ctx_free)(struct nft_ctx *ctx);

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char why_not[512];
static bool tried;
static bool usable;

/* Opens the library once; false with why_not set when it cannot. */
static bool ensure_lib(void) {
  if (tried) return usable;
  tried = true;
  void *lib = dlopen("libnftables.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!lib) {
    snprintf(why_not, sizeof why_not, "libnftables.so.1: %s", dlerror());
    return false;
  }
#define LOAD(sym)                                                                  \
  do {                                                                             \
    *(void **)(&p_##sym) = dlsym(lib, #sym);                                       \
    if (!p_##sym) {                                                                \
      snprintf(why_not, sizeof why_not, "libnftables.so.1 lacks %s", #sym);      \
      return false;                                                                \
    }                                                                              \
  } while (0)
  LOAD(nft_ctx_new);
  LOAD(nft_ctx_buffer_error);
  LOAD(nft_ctx_buffer_output);
  LOAD(nft_ctx_get_error_buffer);
  LOAD(nft_run_cmd_from_filename);
  LOAD(nft_ctx_free);
#undef LOAD
  usable = true;
  return true;
}

/*
 * Runs the script as a file, as `nft -f` does: libnftables 1.0.6 quotes the
 * wrong line of a buffer in its error messages (always the first), but the
 * right one of a file. An anonymous memory file costs no disk.
 */
static int run_script(struct nft_ctx *ctx, const char *script, char **error) {
  int fd = memfd_create("nft-script", MFD_CLOEXEC);
  if (fd < 0) {
    *error = strdup("memfd_create failed");
    return -1;
  }
  size_t len = strlen(script), done = 0;
  while (done < len) {
    ssize_t n = write(fd, script + done, len - done);
    if (n <= 0) {
      close(fd);
      *error = strdup("writing the script to a memory file failed");
      return -1;
    }
    done += (size_t)n;
  }
  char path[64];
  snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  int rc = p_nft_run_cmd_from_filename(ctx, path);
  close(fd);
  return rc;
}

typedef struct {
  napi_async_work work;
  napi_deferred deferred;
  char *script;
  int rc;
  char *error;
} run_request;

static void run_execute(napi_env env, void *data) {
  (void)env;
  run_request *req = data;
  /*
   * A context of its own for each transaction, as each `nft -f` has: a kept
   * one carries its ruleset cache from one run to the next, and its error
   * messages then point at the wrong command. One transaction at a time.
   */
  pthread_mutex_lock(&lock);
  struct nft_ctx *ctx = ensure_lib() ? p_nft_ctx_new(NFT_CTX_DEFAULT) : NULL;
  if (!ctx) {
    req->rc = -1;
    req->error = strdup(usable ? "nft_ctx_new failed" : why_not);
  } else {
    p_nft_ctx_buffer_error(ctx);
    p_nft_ctx_buffer_output(ctx);
    req->rc = run_script(ctx, req->script, &req->error);
    const char *err = p_nft_ctx_get_error_buffer(ctx);
    if (req->rc != 0 && !req->error && err && *err) req->error = strdup(err);
    p_nft_ctx_free(ctx);
  }
  pthread_mutex_unlock(&lock);
}

static void run_complete(napi_env env, napi_status status, void *data) {
  run_request *req = data;
  if (status == napi_ok && req->rc == 0) {
    napi_value undef;
    napi_get_undefined(env, &undef);
    napi_resolve_deferred(env, req->deferred, undef);
  } else {
    napi_value msg, error;
    const char *text = req->error ? req->error : "nft transaction failed";
    napi_create_string_utf8(env, text, NAPI_AUTO_LENGTH, &msg);
    napi_create_error(env, NULL, msg, &error);
    napi_reject_deferred(env, req->deferred, error);
  }
  napi_delete_async_work(env, req->work);
  free(req->script);
  free(req->error);
  free(req);
}

static napi_value js_run(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  size_t len = 0;
  if (argc < 1 || napi_get_value_string_utf8(env, argv[0], NULL, 0, &len) != napi_ok) {
    napi_throw_type_error(env, NULL, "run(script): script must be a string");
    return NULL;
  }
  run_request *req = calloc(1, sizeof *req);
  req->script = malloc(len + 1);
  napi_get_value_string_utf8(env, argv[0], req->script, len + 1, &len);
  napi_value promise, name;
  napi_create_promise(env, &req->deferred, &promise);
  napi_create_string_utf8(env, "cni_driver_nftables.run", NAPI_AUTO_LENGTH, &name);
  napi_create_async_work(env, NULL, name, run_execute, run_complete, req, &req->work);
  napi_queue_async_work(env, req->work);
  return promise;
}

static napi_value js_available(napi_env env, napi_callback_info info) {
  (void)info;
  pthread_mutex_lock(&lock);
  bool ok = ensure_lib();
  pthread_mutex_unlock(&lock);
  napi_value result;
  if (ok) napi_get_null(env, &result);
  else napi_create_string_utf8(env, why_not, NAPI_AUTO_LENGTH, &result);
  return result;
}

NAPI_MODULE_INIT(/* napi_env env, napi_value exports */) {
  pin_library((void *)js_run);
  napi_property_descriptor props[] = {
      {"available", NULL, js_available, NULL, NULL, NULL, napi_enumerable, NULL},
      {"run", NULL, js_run, NULL, NULL, NULL, napi_enumerable, NULL},
  };
  napi_define_properties(env, exports, 2, props);
  return exports;
}
