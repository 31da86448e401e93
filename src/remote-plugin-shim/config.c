#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "text.h"

/* Go's %T of a decoded value, for messages that mirror libcni's. */
static const char *go_type_name(const json_t *v) {
  if (!v || json_is_null(v)) return "<nil>";
  if (json_is_array(v)) return "[]interface {}";
  if (json_is_string(v)) return "string";
  if (json_is_number(v)) return "float64";
  if (json_is_boolean(v)) return "bool";
  return "map[string]interface {}";
}

/* JavaScript's typeof, as validateNetworkName words a name that is no string. */
static const char *js_type_name(const json_t *v) {
  if (json_is_array(v)) return "array";
  if (json_is_number(v)) return "number";
  if (json_is_boolean(v)) return "boolean";
  return "object";
}

/* JSON.stringify(value): compact, numbers and strings as JavaScript writes them. */
static void add_js_json(struct text *t, const json_t *v) {
  switch (json_typeof(v)) {
    case JSON_OBJECT: {
      const char *key;
      json_t *member;
      bool first = true;
      text_adds(t, "{");
      json_object_foreach((json_t *)v, key, member) {
        if (!first) text_adds(t, ",");
        first = false;
        text_add_json_string(t, key, strlen(key));
        text_adds(t, ":");
        add_js_json(t, member);
      }
      text_adds(t, "}");
      break;
    }
    case JSON_ARRAY:
      text_adds(t, "[");
      for (size_t i = 0; i < json_array_size(v); i++) {
        if (i) text_adds(t, ",");
        add_js_json(t, json_array_get(v, i));
      }
      text_adds(t, "]");
      break;
    case JSON_STRING:
      text_add_json_string(t, json_string_value(v), json_string_length(v));
      break;
    case JSON_INTEGER:
    case JSON_REAL:
      text_add_js_number(t, json_number_value(v));
      break;
    case JSON_TRUE: text_adds(t, "true"); break;
    case JSON_FALSE: text_adds(t, "false"); break;
    case JSON_NULL: text_adds(t, "null"); break;
  }
}

static bool invalid_key(struct cni_error *err, const char *key, const char *want, const json_t *v) {
  struct text t = {0};
  text_printf(&t, "invalid cni-driver-shim configuration: \"%s\" must be %s, not %s ", key, want,
              go_type_name(v));
  add_js_json(&t, v);
  return cni_fail_take(err, CNI_INVALID_NETWORK_CONFIG, text_take(&t), NULL);
}

/* A key that is absent or JSON null reads as not given. */
static json_t *given(const json_t *obj, const char *key) {
  json_t *v = json_object_get(obj, key);
  return v && !json_is_null(v) ? v : NULL;
}

static bool absolute_path(const json_t *obj, const char *key, const char *fallback,
                          const char **out, struct cni_error *err) {
  json_t *v = given(obj, key);
  if (!v) {
    *out = fallback;
    return true;
  }
  /* A path with a NUL in it names no file. */
  if (!json_is_string(v) || json_string_value(v)[0] != '/' ||
      strlen(json_string_value(v)) != json_string_length(v))
    return invalid_key(err, key, "an absolute path", v);
  *out = json_string_value(v);
  return true;
}

/* The longest timer Node keeps (2^31-1 ms), in whole seconds: the driver's limit too. */
#define MAX_TIMEOUT_SECONDS 2147483

bool shim_config_parse(const char *data, size_t len, struct shim_config *out,
                       struct cni_error *err) {
  memset(out, 0, sizeof *out);
  json_error_t jerr;
  json_t *root = json_loadb(data, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
  if (!root)
    return cni_fail(err, CNI_DECODING_FAILURE, NULL,
                    "error unmarshalling network config from stdin: %s (line %d, column %d)",
                    jerr.text, jerr.line, jerr.column);
  /* JSON null decodes into Go's struct as all-zero, so it fails for its missing name. */
  if (json_is_null(root)) {
    json_decref(root);
    root = json_object();
  }
  out->raw = root;
  if (!json_is_object(root))
    return cni_fail(err, CNI_DECODING_FAILURE, NULL,
                    "error unmarshalling network config from stdin: cannot decode %s into a JSON "
                    "object",
                    go_type_name(root));

  json_t *name = json_object_get(root, "name");
  if (name && !json_is_null(name) && !json_is_string(name))
    return cni_fail(err, CNI_INVALID_NETWORK_CONFIG, NULL,
                    "invalid network name: must be a string, not %s", js_type_name(name));
  if (!cni_valid_network_name(name ? json_string_value(name) : NULL,
                              name ? json_string_length(name) : 0, err))
    return false;

  json_t *v = given(root, "cniVersion");
  if (v && !json_is_string(v))
    return cni_fail(err, CNI_DECODING_FAILURE, NULL,
                    "decoding version from network config: \"cniVersion\" must be a string, not %s",
                    go_type_name(v));
  const char *version = v && json_string_length(v) ? json_string_value(v) : CNI_DEFAULT_CONFIG_VERSION;
  size_t version_len = v && json_string_length(v) ? json_string_length(v) : strlen(version);
  out->cni_version = cni_supported_version(version, version_len);
  if (!out->cni_version) {
    struct text msg = {0}, details = {0};
    /* A version past ECHO_BYTES is quoted cut short, in both. */
    char *shown = echo_value(version, version_len);
    text_adds(&msg, "incompatible CNI versions: config is ");
    text_adds(&msg, shown);
    text_adds(&msg, ", plugin supports [");
    text_adds(&details, "config version ");
    if (version_len > ECHO_BYTES)
      text_adds(&details, shown);
    else
      text_add(&details, version, version_len);
    free(shown);
    text_adds(&details, "; supported versions ");
    for (size_t i = 0; i < CNI_SUPPORTED_VERSION_COUNT; i++) {
      text_printf(&msg, "%s\"%s\"", i ? "," : "", CNI_SUPPORTED_VERSIONS[i]);
      text_printf(&details, "%s%s", i ? ", " : "", CNI_SUPPORTED_VERSIONS[i]);
    }
    text_adds(&msg, "]");
    return cni_fail_take(err, CNI_INCOMPATIBLE_VERSION, text_take(&msg), text_take(&details));
  }

  out->network = "";
  json_t *network = json_object_get(root, "network");
  if (network && !json_is_null(network) &&
      !(json_is_string(network) && json_string_length(network) == 0)) {
    if (!json_is_string(network)) return invalid_key(err, "network", "a string", network);
    if (!cni_valid_network_name(json_string_value(network), json_string_length(network), err))
      return false;
    out->network = json_string_value(network);
  }

  double timeout = DEFAULT_TIMEOUT_SECONDS;
  json_t *t = given(root, "timeoutSeconds");
  if (t) {
    double s = json_is_number(t) ? json_number_value(t) : 0;
    if (!json_is_number(t) || !isfinite(s) || s <= 0 || s > MAX_TIMEOUT_SECONDS) {
      char want[80];
      snprintf(want, sizeof want, "a positive number of seconds, at most %d", MAX_TIMEOUT_SECONDS);
      return invalid_key(err, "timeoutSeconds", want, t);
    }
    timeout = s;
  }
  out->timeout_ms = llround(timeout * 1000);

  if (!absolute_path(root, "socket", DEFAULT_SOCKET, &out->socket, err)) return false;
  size_t socket_len = strlen(out->socket);
  if (socket_len > MAX_SOCKET_PATH_BYTES)
    return cni_fail(err, CNI_INVALID_NETWORK_CONFIG, NULL,
                    "\"socket\" cannot be used: %s is %zu bytes long; a unix socket's path holds "
                    "at most %d",
                    out->socket, socket_len, MAX_SOCKET_PATH_BYTES);
  if (!absolute_path(root, "stateDir", DEFAULT_STATE_DIR, &out->state_dir, err)) return false;
  return absolute_path(root, "logFile", NULL, &out->log_file, err);
}

#define VALID_ATTACHMENTS_KEY "cni.dev/valid-attachments"
/* The spec's first name for the same list; libcni sends it too. */
#define LEGACY_ATTACHMENTS_KEY "cni.dev/attachments"

/* The key of obj naming `key`: the exact spelling, else the first equal ignoring case. */
static json_t *field_ignoring_case(const json_t *obj, const char *key) {
  json_t *v = json_object_get(obj, key);
  if (v) return v;
  const char *k;
  json_t *member;
  json_object_foreach((json_t *)obj, k, member) {
    if (strcasecmp(k, key) == 0) return member;
  }
  return NULL;
}

static bool entry_field(const json_t *entry, const char *field, const char *where,
                        const char **out, struct cni_error *err) {
  json_t *v = field_ignoring_case(entry, field);
  if (v && !json_is_null(v) && !json_is_string(v))
    return cni_fail(err, CNI_DECODING_FAILURE, NULL, "%s.%s must be a string, not %s", where,
                    field, go_type_name(v));
  if (!v || json_is_null(v) || json_string_length(v) == 0)
    return cni_fail(err, CNI_INVALID_NETWORK_CONFIG, NULL,
                    "%s has no %s: an entry must name a container and an interface", where, field);
  *out = json_string_value(v);
  return true;
}

static bool read_list(const json_t *root, const char *key, struct gc_attachment **out,
                      size_t *count, struct cni_error *err) {
  json_t *list = given(root, key);
  if (!list) return true;
  if (!json_is_array(list))
    return cni_fail(err, CNI_DECODING_FAILURE, NULL,
                    "%s must be a list of {containerID, ifname}, not %s", key, go_type_name(list));
  for (size_t i = 0; i < json_array_size(list); i++) {
    json_t *entry = json_array_get(list, i);
    char where[sizeof LEGACY_ATTACHMENTS_KEY + sizeof VALID_ATTACHMENTS_KEY + 24];
    snprintf(where, sizeof where, "%s[%zu]", key, i);
    if (!json_is_object(entry))
      return cni_fail(err, CNI_DECODING_FAILURE, NULL,
                      "%s must be an object {containerID, ifname}, not %s", where,
                      go_type_name(entry));
    struct gc_attachment a;
    if (!entry_field(entry, "containerID", where, &a.container_id, err)) return false;
    if (!entry_field(entry, "ifname", where, &a.ifname, err)) return false;
    bool seen = false;
    for (size_t j = 0; j < *count && !seen; j++)
      seen = strcmp((*out)[j].container_id, a.container_id) == 0 &&
             strcmp((*out)[j].ifname, a.ifname) == 0;
    if (seen) continue;
    *out = xrealloc(*out, (*count + 1) * sizeof **out);
    (*out)[(*count)++] = a;
  }
  return true;
}

bool shim_config_gc_valid(const struct shim_config *conf, struct gc_attachment **out,
                          size_t *count, struct cni_error *err) {
  *out = NULL;
  *count = 0;
  return read_list(conf->raw, VALID_ATTACHMENTS_KEY, out, count, err) &&
         read_list(conf->raw, LEGACY_ATTACHMENTS_KEY, out, count, err);
}
