/*
 * Node unloads an addon with the environment that loaded it (a worker's, when
 * the worker ends), while native threads may still be running this library's
 * code for a request of that environment: it must stay mapped for the life of
 * the process. Call once from module init with any function of the library.
 */
#ifndef CNI_DRIVER_PIN_LIBRARY_H
#define CNI_DRIVER_PIN_LIBRARY_H

#include <dlfcn.h>

static inline void pin_library(void *any_function_of_it) {
  Dl_info info;
  if (dladdr(any_function_of_it, &info) && info.dli_fname)
    dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
}

#endif
