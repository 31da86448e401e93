/*
 * cni_driver_memory: malloc_trim(3) for JavaScript.
 *
 * glibc keeps the memory a program frees for its next allocations, and gives
 * back to the kernel only what lies at the top of each arena. After a burst of
 * calls, and after the netlink worker thread has ended (its V8 isolate freed in
 * its own arena), most of it lies below: measured on bench/memory, an idle
 * driver holds about 1 MiB more of it than it needs. malloc_trim(0) hands every
 * whole free page of every arena back (MADV_DONTNEED); the next allocations
 * fault them in again. The driver calls it when it has gone quiet, never on a
 * busy one.
 *
 *   trim(): boolean   true when some memory was given back
 */
#define _GNU_SOURCE
#include <malloc.h>

#include <node_api.h>

static napi_value js_trim(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value result;
  napi_get_boolean(env, malloc_trim(0) != 0, &result);
  return result;
}

NAPI_MODULE_INIT(/* napi_env env, napi_value exports */) {
  napi_property_descriptor props[] = {
      {"trim", NULL, js_trim, NULL, NULL, NULL, napi_enumerable, NULL},
  };
  napi_define_properties(env, exports, 1, props);
  return exports;
}
