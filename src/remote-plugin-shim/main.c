/*
 * cni-driver-shim: a classic CNI plugin whose every verb but VERSION is one call
 * to the driver's socket. It reads top to bottom as a reference plugin does: the
 * checks skel makes, then cmdAdd, cmdDel, cmdCheck, cmdStatus, cmdGc.
 *
 * What it owes the runtime (CNI spec, "Execution protocol" and "Result"): the
 * result in exactly the config's cniVersion; the CNI error JSON on stdout and
 * exit 1 on failure; nothing on stdout for a successful DEL, CHECK, STATUS or GC.
 * The driver's CNI errors pass through unchanged. While the driver is unreachable
 * or not ready: ADD and CHECK retry until `timeoutSeconds`, then code 11 naming
 * the socket; STATUS answers 50 at once; DEL never fails for that reason: it
 * removes the container interface itself, queues the rest for the driver's
 * replay, and succeeds.
 */
#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cni.h"
#include "config.h"
#include "deletion.h"
#include "driver.h"
#include "log.h"
#include "text.h"

struct invocation {
  struct cni_env env;
  struct shim_config conf;
  const char *stdin_data;
  size_t stdin_len;
  struct cni_arg *args;
  size_t arg_count;
};

/* ---- input and output ---- */

static void wait_for(int fd, short events) {
  struct pollfd p = {.fd = fd, .events = events};
  poll(&p, 1, -1);
}

/*
 * All of fd 0, up to MAX_STDIN_BYTES: a runtime's pipe, blocking or not. Past
 * the limit the rest is read and counted, not kept, so the answer says the size
 * as the driver's does (src/cni/limits.ts: code 4).
 */
static bool read_stdin(struct text *in, struct cni_error *err) {
  char buf[65536];
  size_t total = 0;
  for (;;) {
    ssize_t n = read(0, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {
        wait_for(0, POLLIN);
        continue;
      }
      return cni_fail(err, CNI_IO_FAILURE, NULL, "error reading from stdin: %s", strerror(errno));
    }
    if (n == 0) break;
    total += (size_t)n;
    if (total <= MAX_STDIN_BYTES) text_add(in, buf, (size_t)n);
  }
  if (total > MAX_STDIN_BYTES)
    return cni_fail(err, CNI_INVALID_ENVIRONMENT, NULL,
                    "stdin config is too large: %zu bytes; at most %d bytes", total,
                    MAX_STDIN_BYTES);
  return true;
}

/* Writes the answer whole; a runtime that closed our stdout early gets none. */
static void write_stdout(const char *s) {
  for (size_t done = 0, len = strlen(s); done < len;) {
    ssize_t n = write(1, s + done, len - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {
        wait_for(1, POLLOUT);
        continue;
      }
      return;
    }
    done += (size_t)n;
  }
}

static void call_fields(struct text *f, const struct invocation *c) {
  log_field_string(f, "command", CNI_COMMAND_NAMES[c->env.command]);
  log_field_string(f, "containerId", c->env.container_id);
  log_field_string(f, "ifName", c->env.ifname);
  log_field_string(f, "netns", c->env.netns);
  if (*c->conf.network) log_field_string(f, "network", c->conf.network);
  log_field_string(f, "cniVersion", c->conf.cni_version);
}

/* ---- the verbs ---- */

static struct pod_call pod_call_of(const struct invocation *c) {
  struct pod_call pc = {
      .env = &c->env,
      .conf = &c->conf,
      .args = c->args,
      .arg_count = c->arg_count,
      .stdin_data = c->stdin_data,
      .stdin_len = c->stdin_len,
  };
  return pc;
}

/* The error after retrying ran out of time: still code 11, and it names the socket. */
static void gave_up(const struct invocation *c, struct cni_error *err, int attempts) {
  struct text t = {0};
  char *at = xprintf("cni-driver at %s", c->conf.socket);
  if (strncmp(err->msg, at, strlen(at)) != 0) text_printf(&t, "%s: ", at);
  text_adds(&t, err->msg);
  text_printf(&t, " (gave up after %d attempt%s in ", attempts, attempts == 1 ? "" : "s");
  text_add_js_number(&t, (double)c->conf.timeout_ms / 1000);
  text_adds(&t, " s)");
  free(at);
  free(err->msg);
  err->msg = text_take(&t);
}

/* ADD and CHECK wait for a driver that is down or not ready yet, up to timeoutSeconds. */
static bool call_patiently(const struct invocation *c, enum driver_method method,
                           struct driver_answer *ans, struct cni_error *err) {
  struct pod_call pc = pod_call_of(c);
  int attempts = driver_pod_retrying(method, &pc, ans);
  if (ans->error.code) {
    if (ans->error.code == CNI_TRY_AGAIN_LATER) gave_up(c, &ans->error, attempts);
    *err = ans->error;
    memset(&ans->error, 0, sizeof ans->error);
    return false;
  }
  if (attempts > 1) {
    struct text f = {0};
    call_fields(&f, c);
    log_field_number(&f, "attempts", attempts);
    log_event("retried", &f);
    free(f.data);
  }
  return true;
}

static bool cmd_add(const struct invocation *c, char **out, struct cni_error *err) {
  struct driver_answer ans;
  if (!call_patiently(c, SET_UP_POD, &ans, err)) {
    driver_answer_free(&ans);
    return false;
  }
  /* The driver converts the result to the version asked for; a runtime parses
   * exactly that version, so a mismatch is refused rather than printed. */
  const char *result = ans.result_json;
  json_t *printed = json_loads(result, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
  bool ok = false;
  if (!printed) {
    cni_fail_take(err, CNI_INTERNAL,
                  xprintf("cni-driver at %s answered ADD with a result that is not JSON",
                          c->conf.socket),
                  xstrndup(result, strnlen(result, 200)));
  } else {
    json_t *v = json_is_object(printed) ? json_object_get(printed, "cniVersion") : NULL;
    if (json_is_string(v) && strcmp(json_string_value(v), c->conf.cni_version) == 0 &&
        strlen(json_string_value(v)) == json_string_length(v)) {
      size_t len = strlen(result);
      *out = len && result[len - 1] == '\n' ? xstrdup(result) : xprintf("%s\n", result);
      ok = true;
    } else {
      char *shown = v ? json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT) : xstrdup("undefined");
      char *plain = json_is_string(v) ? xstrdup(json_string_value(v)) : xstrdup(shown);
      cni_fail_take(err, CNI_INCOMPATIBLE_VERSION,
                    xprintf("cni-driver at %s answered ADD in CNI version %s, not the "
                            "configuration's %s",
                            c->conf.socket, shown, c->conf.cni_version),
                    xprintf("result cniVersion %s; config cniVersion %s", plain,
                            c->conf.cni_version));
      free(shown);
      free(plain);
    }
    json_decref(printed);
  }
  driver_answer_free(&ans);
  return ok;
}

static bool cmd_check(const struct invocation *c, struct cni_error *err) {
  struct driver_answer ans;
  bool ok = call_patiently(c, CHECK_POD, &ans, err);
  driver_answer_free(&ans);
  return ok;
}

static void teardown_json(struct text *t, const struct teardown_outcome *td) {
  if (td->removed) {
    text_adds(t, "{\"removed\":true}");
    return;
  }
  text_adds(t, "{\"removed\":false,\"reason\":");
  text_add_json_string(t, td->reason, strlen(td->reason));
  if (td->detail) {
    text_adds(t, ",\"detail\":");
    text_add_json_string(t, td->detail, strlen(td->detail));
  }
  text_adds(t, "}");
}

/*
 * DEL never waits for a driver that is away: one call, and if the driver cannot
 * take it (not reached, no answer in time, or its "not ready" answer), the
 * container interface is removed here and the rest of the teardown is queued
 * durably for the driver to replay. Any other answer passes through, a chained
 * plugin's timeout (code 11 from a driver that answered) included, and the
 * runtime retries a failed DEL.
 */
static bool cmd_del(const struct invocation *c, struct cni_error *err) {
  struct driver_answer ans;
  struct pod_call pc = pod_call_of(c);
  driver_pod(TEAR_DOWN_POD, &pc, c->conf.timeout_ms, &ans);
  if (!ans.error.code) {
    driver_answer_free(&ans);
    return true;
  }
  bool cannot_take = ans.error.code == CNI_TRY_AGAIN_LATER && (ans.transport_error || ans.not_ready);
  if (!cannot_take) {
    *err = ans.error;
    memset(&ans.error, 0, sizeof ans.error);
    driver_answer_free(&ans);
    return false;
  }

  struct teardown_outcome td;
  remove_container_interface(c->env.netns, c->env.ifname, &td);
  struct deletion_record record = {
      .network = c->conf.network,
      .container_id = c->env.container_id,
      .ifname = c->env.ifname,
      .netns = c->env.netns ? c->env.netns : "",
      .args = c->args,
      .arg_count = c->arg_count,
      .cni_version = c->conf.cni_version,
  };
  char *why = NULL;
  char *path = queue_deletion(c->conf.state_dir, &record, &why);
  bool ok = path != NULL;
  if (!ok) {
    /* Without a record nothing would ever release the lease: fail, so the runtime retries. */
    cni_fail_take(err, CNI_IO_FAILURE,
                  xprintf("cni-driver at %s cannot take DEL (%s), and queueing the deletion in %s "
                          "failed: %s",
                          c->conf.socket, ans.error.msg, c->conf.state_dir, why),
                  NULL);
  } else {
    struct text f = {0}, teardown = {0};
    call_fields(&f, c);
    log_field_string(&f, "reason", ans.error.msg);
    teardown_json(&teardown, &td);
    log_field_json(&f, "teardown", teardown.data);
    log_field_string(&f, "path", path);
    log_event("queued deletion", &f);
    free(f.data);
    free(teardown.data);
  }
  free(td.detail);
  free(why);
  free(path);
  driver_answer_free(&ans);
  return ok;
}

/* STATUS is a poll: an unreachable driver cannot serve ADD (50), said at once. */
static bool cmd_status(const struct invocation *c, struct cni_error *err) {
  struct driver_answer ans;
  long long timeout = c->conf.timeout_ms < 2 * CONNECT_TIMEOUT_MS ? c->conf.timeout_ms
                                                                  : 2 * CONNECT_TIMEOUT_MS;
  driver_status(&c->conf, timeout, &ans);
  bool ok = ans.error.code == 0;
  if (!ok) {
    if (ans.transport_error && ans.error.code == CNI_TRY_AGAIN_LATER)
      ans.error.code = CNI_PLUGIN_NOT_AVAILABLE;
    *err = ans.error;
    memset(&ans.error, 0, sizeof ans.error);
  }
  driver_answer_free(&ans);
  return ok;
}

/* GC: the runtime's valid set for our driver network; every error the driver met is reported. */
static bool cmd_gc(const struct invocation *c, struct cni_error *err) {
  struct gc_attachment *valid;
  size_t count;
  if (!shim_config_gc_valid(&c->conf, &valid, &count, err)) return false;
  struct driver_answer ans;
  driver_gc(&c->conf, valid, count, &ans);
  free(valid);
  bool ok = ans.error.code == 0;
  if (!ok) {
    *err = ans.error;
    memset(&ans.error, 0, sizeof ans.error);
    if (ans.more_error_count) {
      size_t n = ans.more_error_count;
      char *msg = xprintf("%s (and %zu more error%s)", err->msg, n, n == 1 ? "" : "s");
      struct text details = {0};
      if (err->details && *err->details) text_adds(&details, err->details);
      for (size_t i = 0; i < n; i++) {
        if (details.len) text_adds(&details, "; ");
        text_adds(&details, ans.more_errors[i]);
      }
      free(err->msg);
      free(err->details);
      err->msg = msg;
      err->details = text_take(&details);
    }
  }
  driver_answer_free(&ans);
  return ok;
}

/* ---- one invocation ---- */

static int fail(const struct cni_error *err, const char *cni_version, long long started) {
  struct text f = {0};
  log_field_string(&f, "command", getenv("CNI_COMMAND"));
  log_field_string(&f, "containerId", getenv("CNI_CONTAINERID"));
  log_field_string(&f, "ifName", getenv("CNI_IFNAME"));
  log_field_number(&f, "code", err->code);
  log_field_string(&f, "msg", err->msg);
  if (err->details && *err->details) log_field_string(&f, "details", err->details);
  log_field_number(&f, "durationMs", monotonic_ms() - started);
  log_event("error", &f);
  free(f.data);
  char *json = cni_error_json(err, cni_version);
  write_stdout(json);
  free(json);
  return 1;
}

int main(void) {
  /* A runtime that closed a pipe early must not kill the shim mid-teardown. */
  signal(SIGPIPE, SIG_IGN);
  long long started = monotonic_ms();
  struct invocation c = {0};
  struct cni_error err = {0};

  if (!cni_parse_env(&c.env, &err)) return fail(&err, NULL, started);
  if (c.env.command == CMD_VERSION) {
    write_stdout(cni_version_info());
    return 0;
  }

  struct text in = {0};
  if (!read_stdin(&in, &err)) return fail(&err, NULL, started);
  c.stdin_data = in.data ? in.data : "";
  c.stdin_len = in.len;
  if (!shim_config_parse(c.stdin_data, c.stdin_len, &c.conf, &err)) return fail(&err, NULL, started);
  const char *version = c.conf.cni_version;
  log_open(c.conf.log_file);
  if (!cni_require_verb_supported(c.env.command, version, &err)) return fail(&err, version, started);
  if (!cni_parse_args(c.env.cni_args, &c.args, &c.arg_count, &err))
    return fail(&err, version, started);

  char *out = NULL;
  bool ok = false;
  switch (c.env.command) {
    case CMD_ADD: ok = cmd_add(&c, &out, &err); break;
    case CMD_DEL: ok = cmd_del(&c, &err); break;
    case CMD_CHECK: ok = cmd_check(&c, &err); break;
    case CMD_STATUS: ok = cmd_status(&c, &err); break;
    case CMD_GC: ok = cmd_gc(&c, &err); break;
    case CMD_VERSION: break;
  }
  if (!ok) return fail(&err, version, started);

  struct text f = {0};
  call_fields(&f, &c);
  log_field_number(&f, "durationMs", monotonic_ms() - started);
  log_event("ok", &f);
  if (out) write_stdout(out);
  /* The process ends here: what it allocated goes with it. */
  return 0;
}
