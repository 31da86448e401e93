#include "text.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) {
    /* Nothing sensible is left to do; a runtime reads an empty stdout as failure. */
    abort();
  }
  return p;
}

void *xrealloc(void *p, size_t n) {
  void *q = realloc(p, n ? n : 1);
  if (!q) abort();
  return q;
}

char *xstrdup(const char *s) { return xstrndup(s, strlen(s)); }

char *xstrndup(const char *s, size_t n) {
  char *p = xmalloc(n + 1);
  memcpy(p, s, n);
  p[n] = '\0';
  return p;
}

char *xprintf(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *out = NULL;
  if (vasprintf(&out, fmt, ap) < 0) abort();
  va_end(ap);
  return out;
}

static void text_reserve(struct text *t, size_t more) {
  if (t->len + more + 1 <= t->cap) return;
  size_t cap = t->cap ? t->cap : 64;
  while (cap < t->len + more + 1) cap *= 2;
  t->data = xrealloc(t->data, cap);
  t->cap = cap;
}

void text_add(struct text *t, const char *s, size_t n) {
  text_reserve(t, n);
  memcpy(t->data + t->len, s, n);
  t->len += n;
  t->data[t->len] = '\0';
}

void text_adds(struct text *t, const char *s) { text_add(t, s, strlen(s)); }

void text_printf(struct text *t, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *s = NULL;
  int n = vasprintf(&s, fmt, ap);
  va_end(ap);
  if (n < 0) abort();
  text_add(t, s, (size_t)n);
  free(s);
}

char *text_take(struct text *t) {
  char *s = t->data ? t->data : xstrdup("");
  t->data = NULL;
  t->len = t->cap = 0;
  return s;
}

/* The length of the UTF-8 sequence at s (at most n bytes), or 0 when it is not one. */
static size_t utf8_sequence(const unsigned char *s, size_t n) {
  unsigned char c = s[0];
  size_t len;
  unsigned cp;
  if (c < 0x80) return 1;
  if (c >= 0xc2 && c <= 0xdf) {
    len = 2;
    cp = c & 0x1f;
  } else if (c >= 0xe0 && c <= 0xef) {
    len = 3;
    cp = c & 0x0f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    len = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (n < len) return 0;
  for (size_t i = 1; i < len; i++) {
    if ((s[i] & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (s[i] & 0x3f);
  }
  if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
      (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
    return 0;
  return len;
}

void text_add_json_string(struct text *t, const char *s, size_t n) {
  const unsigned char *u = (const unsigned char *)s;
  text_add(t, "\"", 1);
  for (size_t i = 0; i < n;) {
    unsigned char c = u[i];
    if (c < 0x80) {
      switch (c) {
        case '"': text_add(t, "\\\"", 2); break;
        case '\\': text_add(t, "\\\\", 2); break;
        case '\b': text_add(t, "\\b", 2); break;
        case '\f': text_add(t, "\\f", 2); break;
        case '\n': text_add(t, "\\n", 2); break;
        case '\r': text_add(t, "\\r", 2); break;
        case '\t': text_add(t, "\\t", 2); break;
        default:
          if (c < 0x20)
            text_printf(t, "\\u%04x", c);
          else
            text_add(t, (const char *)&u[i], 1);
      }
      i++;
      continue;
    }
    size_t len = utf8_sequence(u + i, n - i);
    if (len == 0) {
      text_add(t, "\xef\xbf\xbd", 3);
      i++;
    } else {
      text_add(t, (const char *)&u[i], len);
      i += len;
    }
  }
  text_add(t, "\"", 1);
}

char *json_quote(const char *s, size_t n) {
  struct text t = {0};
  text_add_json_string(&t, s, n);
  return text_take(&t);
}

char *echo_value(const char *s, size_t n) {
  if (n <= ECHO_BYTES) return json_quote(s, n);
  size_t head = ECHO_BYTES;
  /* Back to the start of the character the cut falls in, unless it ends there. */
  size_t start = head;
  while (start > 0 && ((unsigned char)s[start - 1] & 0xc0) == 0x80) start--;
  if (start > 0 && (unsigned char)s[start - 1] >= 0xc0) {
    size_t len = utf8_sequence((const unsigned char *)s + start - 1, n - (start - 1));
    if (len == 0 || start - 1 + len > head) head = start - 1;
  }
  struct text t = {0};
  text_add_json_string(&t, s, head);
  text_printf(&t, "\xe2\x80\xa6 (%zu bytes)", n);
  return text_take(&t);
}

void text_add_js_number(struct text *t, double v) {
  if (isnan(v) || isinf(v)) {
    text_adds(t, "null"); /* JSON.stringify's word for them */
    return;
  }
  if (v == 0) {
    text_adds(t, "0");
    return;
  }
  char buf[64];
  for (int precision = 1; precision <= 17; precision++) {
    snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (strtod(buf, NULL) == v) break;
  }
  /* C writes exponents as e+07 / e-07 and switches to them earlier than JavaScript
   * (which keeps plain digits from 1e-7 up to 1e21): write the plain digits where
   * JavaScript does. */
  char *e = strchr(buf, 'e');
  double a = fabs(v);
  if (e && a >= 1e-7 && a < 1e21) {
    snprintf(buf, sizeof buf, "%.*f", a < 1 ? 20 : 0, v);
    if (strchr(buf, '.')) {
      char *end = buf + strlen(buf) - 1;
      while (*end == '0') *end-- = '\0';
      if (*end == '.') *end = '\0';
    }
    /* Too many digits from %.20f: fall back to the round-trip form. */
    if (strtod(buf, NULL) != v) {
      for (int precision = 1; precision <= 17; precision++) {
        snprintf(buf, sizeof buf, "%.*g", precision, v);
        if (strtod(buf, NULL) == v) break;
      }
    }
    text_adds(t, buf);
    return;
  }
  if (e) {
    /* e+07 -> e+7, e-07 -> e-7 */
    char mant[64];
    size_t m = (size_t)(e - buf);
    memcpy(mant, buf, m);
    mant[m] = '\0';
    char sign = e[1];
    const char *digits = e + 2;
    while (*digits == '0' && digits[1]) digits++;
    text_printf(t, "%se%c%s", mant, sign, digits);
    return;
  }
  text_adds(t, buf);
}

long long now_unix_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

long long monotonic_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void text_add_iso_time(struct text *t) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  struct tm tm;
  gmtime_r(&ts.tv_sec, &tm);
  char buf[40];
  strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  text_printf(t, "%s.%03ldZ", buf, ts.tv_nsec / 1000000);
}
