/*
 * The CNI protocol as the shim checks it before any call: the error it prints,
 * the environment of each verb, container ids, interface and network names,
 * versions and CNI_ARGS. Each rule and its wording is the one of src/cni (env.ts,
 * names.ts, versions.ts, args.ts, errors.ts), and test/vectors/shim-validation.json
 * runs both, so the two cannot drift apart.
 */
#ifndef SHIM_CNI_H
#define SHIM_CNI_H

#include <stdbool.h>
#include <stddef.h>

enum {
  CNI_INCOMPATIBLE_VERSION = 1,
  CNI_UNKNOWN_CONTAINER = 3,
  CNI_INVALID_ENVIRONMENT = 4,
  CNI_IO_FAILURE = 5,
  CNI_DECODING_FAILURE = 6,
  CNI_INVALID_NETWORK_CONFIG = 7,
  CNI_TRY_AGAIN_LATER = 11,
  CNI_PLUGIN_NOT_AVAILABLE = 50,
  CNI_INTERNAL = 999,
};

/* A CNI error: code 0 is none. */
struct cni_error {
  unsigned code;
  char *msg;
  char *details; /* "" or NULL for none */
};

/* Sets `err` (freeing what it held); returns false, for `return cni_fail(...)`. */
bool cni_fail(struct cni_error *err, unsigned code, const char *details, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Sets `err`, taking ownership of msg and details. */
bool cni_fail_take(struct cni_error *err, unsigned code, char *msg, char *details);
void cni_error_free(struct cni_error *err);

/* The CNI error JSON a plugin prints: JSON.stringify(error, null, 4) and a newline;
 * `cni_version` NULL before the configuration was read. */
char *cni_error_json(const struct cni_error *err, const char *cni_version);

enum cni_command { CMD_ADD, CMD_DEL, CMD_CHECK, CMD_GC, CMD_STATUS, CMD_VERSION };
extern const char *const CNI_COMMAND_NAMES[];

struct cni_env {
  enum cni_command command;
  const char *container_id; /* NULL where the verb carries none */
  const char *netns;        /* NULL for none (DEL may have none) */
  const char *ifname;
  const char *cni_args; /* "" when absent */
};

/* skel's getCmdArgsFromEnv: code 4 naming every missing variable, an unknown
 * CNI_COMMAND, a bad container id (3 or 4) or interface name (4). */
bool cni_parse_env(struct cni_env *out, struct cni_error *err);

bool cni_valid_container_id(const char *id, struct cni_error *err);
bool cni_valid_interface_name(const char *name, struct cni_error *err);
/* A network name of n bytes (it may hold NULs: JSON allows them). */
bool cni_valid_network_name(const char *name, size_t n, struct cni_error *err);

extern const char *const CNI_SUPPORTED_VERSIONS[];
extern const size_t CNI_SUPPORTED_VERSION_COUNT;
#define CNI_LATEST_VERSION "1.1.0"
#define CNI_DEFAULT_CONFIG_VERSION "0.1.0"

/* The answer to VERSION, newline included. */
const char *cni_version_info(void);
/* The supported version equal to `v` (n bytes), or NULL. */
const char *cni_supported_version(const char *v, size_t n);
/* code 1 when the verb came after the config's version. */
bool cni_require_verb_supported(enum cni_command command, const char *version,
                                struct cni_error *err);

struct cni_arg {
  char *key;
  char *value;
};

/* CNI_ARGS into pairs, order kept; code 4 for a pair that is not KEY=VALUE. */
bool cni_parse_args(const char *text, struct cni_arg **pairs, size_t *count,
                    struct cni_error *err);

#endif
