/*
 * The shim's log: one JSON line per event, appended to the conflist's `logFile`,
 * and nothing at all without one. Never stdout (the runtime parses it) and never
 * stderr (libcni shows it as the error text when stdout is empty). Logging must
 * not fail a CNI call, so write errors are dropped.
 */
#ifndef SHIM_LOG_H
#define SHIM_LOG_H

#include "text.h"

/* Where events go; NULL: nowhere. */
void log_open(const char *path);

/* A line's fields after time, pid and event: `fields` holds `,"key":value` pairs
 * (or nothing), as the log_field_* helpers add them. */
void log_event(const char *event, const struct text *fields);

void log_field_string(struct text *fields, const char *key, const char *value);
void log_field_number(struct text *fields, const char *key, long long value);
/* A field whose value is already JSON. */
void log_field_json(struct text *fields, const char *key, const char *json);

#endif
