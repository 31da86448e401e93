/*
 * The shim's stdin configuration (test/support/shim-config.ts says the same rules):
 * the checks every CNI plugin makes (JSON, a valid `name`, a `cniVersion` the
 * plugin speaks), then the shim's own conflist keys, each optional:
 *
 *   socket          the driver's socket            default /run/cni-driver/driver.sock
 *   network         which driver network           default "" (the driver's default)
 *   timeoutSeconds  how long ADD/CHECK wait        default 30
 *   stateDir        where the deletion queue is    default /var/lib/cni-driver
 *   logFile         where the shim logs            default none: the shim logs nothing
 *   capabilities    declared for the runtime's sake; the driver reads runtimeConfig itself
 */
#ifndef SHIM_CONFIG_H
#define SHIM_CONFIG_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "cni.h"

#define DEFAULT_SOCKET "/run/cni-driver/driver.sock"
#define DEFAULT_STATE_DIR "/var/lib/cni-driver"
#define DEFAULT_TIMEOUT_SECONDS 30
/* A network configuration is a few kilobytes; past this it is not one. */
#define MAX_STDIN_BYTES (1024 * 1024)
/* sun_path holds 108 bytes with the terminating NUL. */
#define MAX_SOCKET_PATH_BYTES 107

struct shim_config {
  const char *cni_version; /* one of CNI_SUPPORTED_VERSIONS */
  const char *socket;
  const char *network; /* "" for the driver's default */
  long long timeout_ms;
  const char *state_dir;
  const char *log_file; /* NULL: no log */
  json_t *raw;          /* the whole decoded object */
};

bool shim_config_parse(const char *stdin_data, size_t len, struct shim_config *out,
                       struct cni_error *err);

struct gc_attachment {
  const char *container_id;
  const char *ifname;
};

/* The valid set of a GC call (src/cni/gc.ts parseGcValidAttachments). */
bool shim_config_gc_valid(const struct shim_config *conf, struct gc_attachment **out,
                          size_t *count, struct cni_error *err);

#endif
