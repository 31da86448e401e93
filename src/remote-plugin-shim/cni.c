#include "cni.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text.h"

bool cni_fail_take(struct cni_error *err, unsigned code, char *msg, char *details) {
  cni_error_free(err);
  err->code = code;
  err->msg = msg;
  err->details = details;
  return false;
}

bool cni_fail(struct cni_error *err, unsigned code, const char *details, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *msg = NULL;
  if (vasprintf(&msg, fmt, ap) < 0) abort();
  va_end(ap);
  return cni_fail_take(err, code, msg, details ? xstrdup(details) : NULL);
}

void cni_error_free(struct cni_error *err) {
  free(err->msg);
  free(err->details);
  err->msg = err->details = NULL;
  err->code = 0;
}

char *cni_error_json(const struct cni_error *err, const char *cni_version) {
  struct text t = {0};
  text_adds(&t, "{\n");
  if (cni_version && *cni_version) {
    text_adds(&t, "    \"cniVersion\": ");
    text_add_json_string(&t, cni_version, strlen(cni_version));
    text_adds(&t, ",\n");
  }
  text_printf(&t, "    \"code\": %u,\n    \"msg\": ", err->code);
  const char *msg = err->msg ? err->msg : "";
  text_add_json_string(&t, msg, strlen(msg));
  if (err->details && *err->details) {
    text_adds(&t, ",\n    \"details\": ");
    text_add_json_string(&t, err->details, strlen(err->details));
  }
  text_adds(&t, "\n}\n");
  return text_take(&t);
}

/* ---- limits (src/cni/limits.ts) ---- */

#define MAX_CONTAINER_ID_BYTES 128
#define MAX_NETWORK_NAME_BYTES 100
#define MAX_NETNS_PATH_BYTES 4095
#define MAX_CNI_ARGS_BYTES (64 * 1024)

/* Code 4 past max_bytes: "<what> is too long: <echo>; at most <max> bytes". */
static bool at_most_bytes(const char *what, const char *value, size_t n, size_t max_bytes,
                          unsigned code, struct cni_error *err) {
  if (n <= max_bytes) return true;
  char *e = echo_value(value, n);
  cni_fail_take(err, code, xprintf("%s is too long: %s; at most %zu bytes", what, e, max_bytes),
                NULL);
  free(e);
  return false;
}

/* ---- the environment (src/cni/env.ts) ---- */

const char *const CNI_COMMAND_NAMES[] = {"ADD", "DEL", "CHECK", "GC", "STATUS", "VERSION"};

enum { VAR_COMMAND, VAR_CONTAINERID, VAR_NETNS, VAR_IFNAME, VAR_ARGS, VAR_PATH, VAR_COUNT };
static const char *const VAR_NAMES[VAR_COUNT] = {"CNI_COMMAND", "CNI_CONTAINERID", "CNI_NETNS",
                                                 "CNI_IFNAME",  "CNI_ARGS",        "CNI_PATH"};

/* What each verb requires, in skel's order (the order missing ones are listed in). */
static bool required(enum cni_command command, int var) {
  switch (command) {
    case CMD_ADD:
    case CMD_CHECK:
      return var != VAR_ARGS;
    case CMD_DEL:
      return var != VAR_ARGS && var != VAR_NETNS;
    case CMD_GC:
    case CMD_STATUS:
      return var == VAR_COMMAND || var == VAR_PATH;
    case CMD_VERSION:
      return var == VAR_COMMAND;
  }
  return false;
}

/* An empty value counts as missing. */
static const char *env_value(int var) {
  const char *v = getenv(VAR_NAMES[var]);
  return v && *v ? v : NULL;
}

static bool missing_variables(struct cni_error *err, const int *vars, int n) {
  struct text t = {0};
  text_adds(&t, "required env variables [");
  for (int i = 0; i < n; i++) {
    if (i) text_adds(&t, ",");
    text_adds(&t, VAR_NAMES[vars[i]]);
  }
  text_adds(&t, "] missing");
  return cni_fail_take(err, CNI_INVALID_ENVIRONMENT, text_take(&t), NULL);
}

/* A names check on one variable, its name appended to the message. */
static bool in_variable(bool ok, int var, struct cni_error *err) {
  if (ok) return true;
  char *msg = xprintf("%s (%s)", err->msg, VAR_NAMES[var]);
  free(err->msg);
  err->msg = msg;
  return false;
}

bool cni_parse_env(struct cni_env *out, struct cni_error *err) {
  memset(out, 0, sizeof *out);
  const char *command = env_value(VAR_COMMAND);
  if (!command) {
    int vars[] = {VAR_COMMAND};
    return missing_variables(err, vars, 1);
  }
  int found = -1;
  for (int i = 0; i <= CMD_VERSION; i++)
    if (strcmp(command, CNI_COMMAND_NAMES[i]) == 0) found = i;
  if (found < 0) {
    return cni_fail(err, CNI_INVALID_ENVIRONMENT, NULL, "unknown CNI_COMMAND: %s", command);
  }
  out->command = (enum cni_command)found;

  int missing[VAR_COUNT];
  int n = 0;
  for (int var = 0; var < VAR_COUNT; var++)
    if (required(out->command, var) && !env_value(var)) missing[n++] = var;
  if (n) return missing_variables(err, missing, n);

  out->cni_args = env_value(VAR_ARGS) ? env_value(VAR_ARGS) : "";
  if (out->command != CMD_ADD && out->command != CMD_CHECK && out->command != CMD_DEL) return true;
  out->container_id = env_value(VAR_CONTAINERID);
  out->ifname = env_value(VAR_IFNAME);
  out->netns = env_value(VAR_NETNS);
  if (!in_variable(cni_valid_container_id(out->container_id, err), VAR_CONTAINERID, err))
    return false;
  /* In env.ts's order: ADD and CHECK check the netns before the interface and
   * CNI_ARGS, DEL after them. An environment string cannot hold a NUL, so only
   * the lengths are left to check. */
  bool netns_ok = !out->netns || in_variable(at_most_bytes("netns path", out->netns,
                                                           strlen(out->netns), MAX_NETNS_PATH_BYTES,
                                                           CNI_INVALID_ENVIRONMENT, err),
                                             VAR_NETNS, err);
  if (out->command != CMD_DEL && !netns_ok) return false;
  if (!in_variable(cni_valid_interface_name(out->ifname, err), VAR_IFNAME, err)) return false;
  if (!at_most_bytes("CNI_ARGS", out->cni_args, strlen(out->cni_args), MAX_CNI_ARGS_BYTES,
                     CNI_INVALID_ENVIRONMENT, err))
    return false;
  return netns_ok || in_variable(at_most_bytes("netns path", out->netns, strlen(out->netns),
                                               MAX_NETNS_PATH_BYTES, CNI_INVALID_ENVIRONMENT, err),
                                 VAR_NETNS, err);
}

/* ---- names (src/cni/names.ts) ---- */

#define MAX_INTERFACE_NAME_BYTES 15

static bool is_alnum(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* ^[a-zA-Z0-9][a-zA-Z0-9_.-]*$ over n bytes. */
static bool cni_name_pattern(const char *s, size_t n) {
  const unsigned char *u = (const unsigned char *)s;
  if (n == 0 || !is_alnum(u[0])) return false;
  for (size_t i = 1; i < n; i++)
    if (!is_alnum(u[i]) && u[i] != '_' && u[i] != '.' && u[i] != '-') return false;
  return true;
}

bool cni_valid_container_id(const char *id, struct cni_error *err) {
  if (!id || !*id) return cni_fail(err, CNI_UNKNOWN_CONTAINER, NULL, "missing containerID");
  if (!at_most_bytes("containerID", id, strlen(id), MAX_CONTAINER_ID_BYTES,
                     CNI_INVALID_ENVIRONMENT, err))
    return false;
  if (!cni_name_pattern(id, strlen(id))) {
    char *q = echo_value(id, strlen(id));
    cni_fail(err, CNI_INVALID_ENVIRONMENT, id, "invalid characters in containerID: %s", q);
    free(q);
    return false;
  }
  return true;
}

/* Go's unicode.IsSpace at s (n bytes left): the length of the space, or 0. */
static size_t go_space(const unsigned char *s, size_t n) {
  if (*s == ' ' || (*s >= '\t' && *s <= '\r')) return 1;
  if (n >= 2 && s[0] == 0xc2 && (s[1] == 0x85 || s[1] == 0xa0)) return 2;
  if (n < 3) return 0;
  if (s[0] == 0xe1 && s[1] == 0x9a && s[2] == 0x80) return 3;            /* U+1680 */
  if (s[0] == 0xe2 && s[1] == 0x80 && (s[2] <= 0x8a || s[2] == 0xa8 || s[2] == 0xa9 || s[2] == 0xaf))
    return s[2] >= 0x80 ? 3 : 0; /* U+2000..200A, U+2028, U+2029, U+202F */
  if (s[0] == 0xe2 && s[1] == 0x81 && s[2] == 0x9f) return 3; /* U+205F */
  if (s[0] == 0xe3 && s[1] == 0x80 && s[2] == 0x80) return 3; /* U+3000 */
  return 0;
}

bool cni_valid_interface_name(const char *name, struct cni_error *err) {
  if (!name || !*name) return cni_fail(err, CNI_INVALID_ENVIRONMENT, NULL, "interface name is empty");
  size_t n = strlen(name);
  char *q = echo_value(name, n);
  bool ok = false;
  if (n > MAX_INTERFACE_NAME_BYTES) {
    char *details = xprintf("interface name should be less than %d characters; it has %zu bytes",
                            MAX_INTERFACE_NAME_BYTES + 1, n);
    cni_fail_take(err, CNI_INVALID_ENVIRONMENT, xprintf("interface name is too long: %s", q),
                  details);
  } else if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) {
    cni_fail(err, CNI_INVALID_ENVIRONMENT, NULL, "interface name is . or ..: %s", q);
  } else {
    ok = true;
    for (size_t i = 0; i < n && ok; i++) {
      const unsigned char *u = (const unsigned char *)name + i;
      if (*u == '/' || *u == ':' || go_space(u, n - i)) ok = false;
    }
    if (!ok)
      cni_fail(err, CNI_INVALID_ENVIRONMENT, NULL,
               "interface name contains / or : or whitespace characters: %s", q);
  }
  free(q);
  return ok;
}

bool cni_valid_network_name(const char *name, size_t n, struct cni_error *err) {
  if (!name || n == 0) return cni_fail(err, CNI_INVALID_NETWORK_CONFIG, NULL, "missing network name");
  if (!at_most_bytes("network name", name, n, MAX_NETWORK_NAME_BYTES, CNI_INVALID_NETWORK_CONFIG,
                     err))
    return false;
  if (!cni_name_pattern(name, n)) {
    char *q = echo_value(name, n);
    cni_fail_take(err, CNI_INVALID_NETWORK_CONFIG,
                  xprintf("invalid characters found in network name: %s", q), xstrndup(name, n));
    free(q);
    return false;
  }
  return true;
}

/* ---- versions (src/cni/versions.ts) ---- */

const char *const CNI_SUPPORTED_VERSIONS[] = {"0.1.0", "0.2.0", "0.3.0", "0.3.1",
                                              "0.4.0", "1.0.0", "1.1.0"};
const size_t CNI_SUPPORTED_VERSION_COUNT =
    sizeof CNI_SUPPORTED_VERSIONS / sizeof CNI_SUPPORTED_VERSIONS[0];

const char *cni_version_info(void) {
  return "{\"cniVersion\":\"1.1.0\",\"supportedVersions\":[\"0.1.0\",\"0.2.0\",\"0.3.0\","
         "\"0.3.1\",\"0.4.0\",\"1.0.0\",\"1.1.0\"]}\n";
}

const char *cni_supported_version(const char *v, size_t n) {
  for (size_t i = 0; i < CNI_SUPPORTED_VERSION_COUNT; i++)
    if (strlen(CNI_SUPPORTED_VERSIONS[i]) == n && memcmp(CNI_SUPPORTED_VERSIONS[i], v, n) == 0)
      return CNI_SUPPORTED_VERSIONS[i];
  return NULL;
}

/* Supported versions are listed oldest first, so their order is their rank. */
static size_t version_rank(const char *v) {
  for (size_t i = 0; i < CNI_SUPPORTED_VERSION_COUNT; i++)
    if (strcmp(CNI_SUPPORTED_VERSIONS[i], v) == 0) return i;
  return 0;
}

bool cni_require_verb_supported(enum cni_command command, const char *version,
                                struct cni_error *err) {
  const char *since = command == CMD_CHECK                        ? "0.4.0"
                      : command == CMD_GC || command == CMD_STATUS ? "1.1.0"
                                                                   : NULL;
  if (!since || version_rank(version) >= version_rank(since)) return true;
  const char *verb = CNI_COMMAND_NAMES[command];
  char *details = xprintf("config version %s; %s needs %s or later", version, verb, since);
  return cni_fail_take(err, CNI_INCOMPATIBLE_VERSION,
                       xprintf("configuration version \"%s\" does not support the %s command",
                               version, verb),
                       details);
}

/* ---- CNI_ARGS (src/cni/args.ts) ---- */

bool cni_parse_args(const char *text, struct cni_arg **pairs, size_t *count,
                    struct cni_error *err) {
  *pairs = NULL;
  *count = 0;
  if (!*text) return true;
  size_t cap = 0;
  const char *p = text;
  for (;;) {
    const char *end = strchr(p, ';');
    size_t n = end ? (size_t)(end - p) : strlen(p);
    const char *eq = memchr(p, '=', n);
    if (!eq || memchr(eq + 1, '=', n - (size_t)(eq + 1 - p))) {
      char *q = echo_value(p, n);
      cni_fail_take(err, CNI_INVALID_ENVIRONMENT, xprintf("ARGS: invalid pair %s", q),
                    xstrdup("CNI_ARGS must be KEY=VALUE pairs separated by ;"));
      free(q);
      return false;
    }
    if (*count == cap) {
      cap = cap ? cap * 2 : 8;
      *pairs = xrealloc(*pairs, cap * sizeof **pairs);
    }
    (*pairs)[*count].key = xstrndup(p, (size_t)(eq - p));
    (*pairs)[*count].value = xstrndup(eq + 1, n - (size_t)(eq + 1 - p));
    (*count)++;
    if (!end) return true;
    p = end + 1;
  }
}
