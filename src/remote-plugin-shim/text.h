/*
 * Growable text, and the few ways the shim writes values into text: JSON string
 * quoting as JavaScript's JSON.stringify does it (the driver and src/cni word
 * their messages with it, so the shim's read the same), and numbers as
 * JavaScript prints them.
 */
#ifndef SHIM_TEXT_H
#define SHIM_TEXT_H

#include <stdarg.h>
#include <stddef.h>

struct text {
  char *data; /* always NUL-terminated once anything was added */
  size_t len;
  size_t cap;
};

void *xmalloc(size_t n);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
/* A new string, printf-style. */
char *xprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

void text_add(struct text *t, const char *s, size_t n);
void text_adds(struct text *t, const char *s);
void text_printf(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Takes the text's string; the text is empty afterwards. */
char *text_take(struct text *t);

/* `s` (n bytes of UTF-8) as a JSON string with its quotes, as JSON.stringify
 * writes it; bytes that are not UTF-8 become U+FFFD, as Node decodes them. */
void text_add_json_string(struct text *t, const char *s, size_t n);
char *json_quote(const char *s, size_t n);
/* A bad value quoted for an error message, as src/cni/limits.ts echo() does: whole
 * when it has at most ECHO_BYTES bytes, else its first ECHO_BYTES bytes (cut back
 * to a whole character) quoted, then "… (N bytes)". */
#define ECHO_BYTES 64
char *echo_value(const char *s, size_t n);

/* A double as JavaScript's Number#toString writes it (shortest round trip). */
void text_add_js_number(struct text *t, double v);

/* Milliseconds since the epoch, and the current time as toISOString() writes it. */
long long now_unix_ms(void);
long long monotonic_ms(void);
void text_add_iso_time(struct text *t);

#endif
