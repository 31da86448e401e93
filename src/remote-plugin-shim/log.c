#include "log.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *log_path;

void log_open(const char *path) { log_path = path; }

void log_event(const char *event, const struct text *fields) {
  if (!log_path) return;
  struct text line = {0};
  text_adds(&line, "{\"time\":\"");
  text_add_iso_time(&line);
  text_printf(&line, "\",\"pid\":%d,\"event\":", (int)getpid());
  text_add_json_string(&line, event, strlen(event));
  if (fields && fields->len) text_add(&line, fields->data, fields->len);
  text_adds(&line, "}\n");
  /* One write(2) with O_APPEND: concurrent shims' lines do not interleave. */
  int fd = open(log_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (fd >= 0) {
    ssize_t ignored = write(fd, line.data, line.len);
    (void)ignored;
    close(fd);
  }
  free(line.data);
}

void log_field_string(struct text *fields, const char *key, const char *value) {
  if (!value) return;
  text_adds(fields, ",");
  text_add_json_string(fields, key, strlen(key));
  text_adds(fields, ":");
  text_add_json_string(fields, value, strlen(value));
}

void log_field_number(struct text *fields, const char *key, long long value) {
  text_adds(fields, ",");
  text_add_json_string(fields, key, strlen(key));
  text_printf(fields, ":%lld", value);
}

void log_field_json(struct text *fields, const char *key, const char *json) {
  text_adds(fields, ",");
  text_add_json_string(fields, key, strlen(key));
  text_adds(fields, ":");
  text_adds(fields, json);
}
