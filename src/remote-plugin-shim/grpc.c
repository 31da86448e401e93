#include "grpc.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <nghttp2/nghttp2.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "text.h"

/* Far above any answer of the driver's (a CNI result is a few kilobytes). */
#define MAX_RESPONSE_BYTES (16 * 1024 * 1024)
/* The windows the shim opens: a whole answer fits without a WINDOW_UPDATE round. */
#define WINDOW_BYTES (16 * 1024 * 1024)

static const char *const STATUS_NAMES[] = {
    "OK",        "CANCELLED",         "UNKNOWN",      "INVALID_ARGUMENT", "DEADLINE_EXCEEDED",
    "NOT_FOUND", "ALREADY_EXISTS",    "PERMISSION_DENIED", "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED",    "INTERNAL",
    "UNAVAILABLE", "DATA_LOSS",       "UNAUTHENTICATED"};

const char *grpc_status_name(int status) {
  static char number[16];
  if (status >= 0 && status < (int)(sizeof STATUS_NAMES / sizeof STATUS_NAMES[0]))
    return STATUS_NAMES[status];
  snprintf(number, sizeof number, "%d", status);
  return number;
}

struct call_state {
  int fd;
  int32_t stream_id;
  const uint8_t *body; /* the request's gRPC frame */
  size_t body_len;
  size_t body_sent;
  int http_status; /* 0 until a final :status */
  bool have_grpc_status;
  int grpc_status;
  char *grpc_message;
  struct text response;
  bool too_large;
  bool ended;  /* the server ended its side of the stream */
  bool closed; /* the stream is closed, ended or reset */
  uint32_t reset_code;
  bool goaway_before_us;
  uint32_t goaway_code;
  char *protocol_error; /* what nghttp2 found wrong with the server's HTTP/2 */
};

static void set_failure(struct grpc_outcome *out, int status, char *message) {
  free(out->message);
  out->status = status;
  out->message = message;
}

static ssize_t send_cb(nghttp2_session *session, const uint8_t *data, size_t len, int flags,
                             void *user_data) {
  (void)session;
  (void)flags;
  struct call_state *st = user_data;
  ssize_t n = send(st->fd, data, len, MSG_NOSIGNAL);
  if (n < 0) return errno == EAGAIN || errno == EINTR ? NGHTTP2_ERR_WOULDBLOCK : NGHTTP2_ERR_CALLBACK_FAILURE;
  return n;
}

static ssize_t read_body_cb(nghttp2_session *session, int32_t stream_id, uint8_t *buf,
                                  size_t len, uint32_t *data_flags, nghttp2_data_source *source,
                                  void *user_data) {
  (void)session;
  (void)stream_id;
  (void)source;
  struct call_state *st = user_data;
  size_t n = st->body_len - st->body_sent;
  if (n > len) n = len;
  memcpy(buf, st->body + st->body_sent, n);
  st->body_sent += n;
  if (st->body_sent == st->body_len) *data_flags |= NGHTTP2_DATA_FLAG_EOF;
  return (ssize_t)n;
}

/* grpc-message is percent-encoded (gRPC over HTTP/2, "Status-Message"). */
static char *percent_decode(const uint8_t *s, size_t n) {
  char *out = xmalloc(n + 1);
  size_t j = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] == '%' && i + 2 < n && isxdigit(s[i + 1]) && isxdigit(s[i + 2])) {
      char hex[3] = {(char)s[i + 1], (char)s[i + 2], 0};
      out[j++] = (char)strtol(hex, NULL, 16);
      i += 2;
    } else {
      out[j++] = (char)s[i];
    }
  }
  out[j] = '\0';
  return out;
}

static int on_header_cb(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name,
                        size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                        void *user_data) {
  (void)session;
  (void)flags;
  struct call_state *st = user_data;
  if (frame->hd.stream_id != st->stream_id) return 0;
  if (namelen == 7 && memcmp(name, ":status", 7) == 0) {
    int status = atoi((const char *)value);
    if (status >= 200) st->http_status = status; /* 1xx answers are informational */
  } else if (namelen == 11 && memcmp(name, "grpc-status", 11) == 0) {
    char digits[16] = {0};
    memcpy(digits, value, valuelen < sizeof digits - 1 ? valuelen : sizeof digits - 1);
    char *end;
    long status = strtol(digits, &end, 10);
    st->have_grpc_status = true;
    st->grpc_status = (*digits && !*end && status >= 0 && status < 1 << 30) ? (int)status : GRPC_UNKNOWN;
  } else if (namelen == 12 && memcmp(name, "grpc-message", 12) == 0) {
    free(st->grpc_message);
    st->grpc_message = percent_decode(value, valuelen);
  }
  return 0;
}

static int on_data_cb(nghttp2_session *session, uint8_t flags, int32_t stream_id,
                      const uint8_t *data, size_t len, void *user_data) {
  (void)session;
  (void)flags;
  struct call_state *st = user_data;
  if (stream_id != st->stream_id || st->too_large) return 0;
  if (st->response.len + len > MAX_RESPONSE_BYTES) {
    st->too_large = true;
    return 0;
  }
  text_add(&st->response, (const char *)data, len);
  return 0;
}

static int on_frame_recv_cb(nghttp2_session *session, const nghttp2_frame *frame, void *user_data) {
  (void)session;
  struct call_state *st = user_data;
  if (frame->hd.type == NGHTTP2_GOAWAY && frame->goaway.last_stream_id < st->stream_id) {
    st->goaway_before_us = true;
    st->goaway_code = frame->goaway.error_code;
  }
  if (frame->hd.stream_id == st->stream_id && (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) &&
      (frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA))
    st->ended = true;
  return 0;
}

static int on_stream_close_cb(nghttp2_session *session, int32_t stream_id, uint32_t error_code,
                              void *user_data) {
  (void)session;
  struct call_state *st = user_data;
  if (stream_id != st->stream_id) return 0;
  st->closed = true;
  st->reset_code = error_code;
  return 0;
}

static int on_error_cb(nghttp2_session *session, int lib_error_code, const char *msg, size_t len,
                       void *user_data) {
  (void)session;
  (void)lib_error_code;
  struct call_state *st = user_data;
  if (!st->protocol_error) st->protocol_error = xstrndup(msg, len);
  return 0;
}

/* gRPC's mapping of HTTP statuses that are not 200 (grpc/doc/http-grpc-status-mapping.md). */
static int status_from_http(int http) {
  switch (http) {
    case 400: return GRPC_INTERNAL;
    case 401: return GRPC_UNAUTHENTICATED;
    case 403: return GRPC_PERMISSION_DENIED;
    case 404: return GRPC_UNIMPLEMENTED;
    case 429:
    case 502:
    case 503:
    case 504: return GRPC_UNAVAILABLE;
    default: return GRPC_UNKNOWN;
  }
}

/* Connects, waiting at most timeout_ms for room in a full listen backlog (a unix
 * socket's blocking connect waits SO_SNDTIMEO for it). */
static int connect_unix(const char *path, long long timeout_ms, struct grpc_outcome *out) {
  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  if (strlen(path) >= sizeof addr.sun_path) {
    out->connect_errno = ENAMETOOLONG;
    set_failure(out, GRPC_UNAVAILABLE, xprintf("connect %s: %s", path, strerror(ENAMETOOLONG)));
    return -1;
  }
  strcpy(addr.sun_path, path);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    out->connect_errno = errno;
    set_failure(out, GRPC_UNAVAILABLE, xprintf("socket: %s", strerror(errno)));
    return -1;
  }
  if (timeout_ms < 1) timeout_ms = 1;
  struct timeval tv = {.tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000};
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  int rc;
  do rc = connect(fd, (struct sockaddr *)&addr, sizeof addr);
  while (rc < 0 && errno == EINTR);
  if (rc < 0) {
    int e = errno;
    out->connect_errno = e;
    if (e == EAGAIN || e == EINPROGRESS)
      set_failure(out, GRPC_UNAVAILABLE,
                  xprintf("connect %s: no room in the listen backlog within %lld ms", path, timeout_ms));
    else
      set_failure(out, GRPC_UNAVAILABLE, xprintf("connect %s: %s", path, strerror(e)));
    close(fd);
    return -1;
  }
  struct timeval none = {0};
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &none, sizeof none);
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  return fd;
}

#define NV(n, v) \
  {(uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, strlen(v), NGHTTP2_NV_FLAG_NO_COPY_NAME}

/* The answer, from what the stream carried. */
static void conclude(struct call_state *st, struct grpc_outcome *out) {
  if (st->protocol_error && !st->ended) {
    set_failure(out, GRPC_UNAVAILABLE, xprintf("HTTP/2 protocol error: %s", st->protocol_error));
    return;
  }
  if (st->goaway_before_us) {
    set_failure(out, GRPC_UNAVAILABLE,
                xprintf("the server closed the connection before the call (GOAWAY, HTTP/2 error "
                        "code %u)",
                        st->goaway_code));
    return;
  }
  if (!st->ended) {
    if (st->reset_code == NGHTTP2_REFUSED_STREAM)
      set_failure(out, GRPC_UNAVAILABLE, xstrdup("the server refused the stream"));
    else if (st->reset_code == NGHTTP2_CANCEL)
      set_failure(out, GRPC_CANCELLED, xstrdup("the server cancelled the call"));
    else if (st->http_status)
      set_failure(out, GRPC_UNAVAILABLE,
                  xprintf("the stream was reset (HTTP/2 error code %u)", st->reset_code));
    else
      set_failure(out, GRPC_UNAVAILABLE,
                  xprintf("the stream closed without an answer (RST code %u)", st->reset_code));
    return;
  }
  if (st->http_status != 200 && st->http_status != 0) {
    set_failure(out, status_from_http(st->http_status), xprintf("HTTP status %d", st->http_status));
    return;
  }
  if (!st->have_grpc_status) {
    set_failure(out, GRPC_UNKNOWN, xstrdup("the server sent no grpc-status"));
    return;
  }
  if (st->grpc_status != GRPC_OK) {
    set_failure(out, st->grpc_status, xstrdup(st->grpc_message ? st->grpc_message : ""));
    return;
  }
  if (st->too_large) {
    set_failure(out, GRPC_RESOURCE_EXHAUSTED,
                xprintf("the response is larger than %d bytes", MAX_RESPONSE_BYTES));
    return;
  }
  const uint8_t *r = (const uint8_t *)st->response.data;
  if (st->response.len < 5) {
    set_failure(out, GRPC_INTERNAL, xstrdup("the server sent no response message"));
    return;
  }
  uint32_t len = (uint32_t)r[1] << 24 | (uint32_t)r[2] << 16 | (uint32_t)r[3] << 8 | r[4];
  if (r[0] != 0) {
    set_failure(out, GRPC_INTERNAL, xstrdup("the server sent a compressed message unasked"));
    return;
  }
  if (st->response.len - 5 < len) {
    set_failure(out, GRPC_INTERNAL,
                xprintf("the response message is cut short (%zu of %u bytes)",
                        st->response.len - 5, len));
    return;
  }
  out->status = GRPC_OK;
  out->response = xmalloc(len);
  memcpy(out->response, r + 5, len);
  out->response_len = len;
}

void grpc_unary(const struct grpc_call *call, struct grpc_outcome *out) {
  memset(out, 0, sizeof *out);
  long long deadline = monotonic_ms() + call->timeout_ms;
  long long connect_ms = call->connect_timeout_ms < call->timeout_ms ? call->connect_timeout_ms
                                                                     : call->timeout_ms;
  struct call_state st = {.fd = -1};
  st.fd = connect_unix(call->socket_path, connect_ms, out);
  if (st.fd < 0) return;

  /* The request: one message with gRPC's 5-byte prefix (uncompressed, length). */
  uint8_t *body = xmalloc(call->request_len + 5);
  body[0] = 0;
  body[1] = (uint8_t)(call->request_len >> 24);
  body[2] = (uint8_t)(call->request_len >> 16);
  body[3] = (uint8_t)(call->request_len >> 8);
  body[4] = (uint8_t)call->request_len;
  memcpy(body + 5, call->request, call->request_len);
  st.body = body;
  st.body_len = call->request_len + 5;

  nghttp2_session_callbacks *cbs;
  nghttp2_session_callbacks_new(&cbs);
  nghttp2_session_callbacks_set_send_callback(cbs, send_cb);
  nghttp2_session_callbacks_set_on_header_callback(cbs, on_header_cb);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data_cb);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame_recv_cb);
  nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_stream_close_cb);
  nghttp2_session_callbacks_set_error_callback2(cbs, on_error_cb);
  nghttp2_session *session;
  nghttp2_session_client_new(&session, cbs, &st);
  nghttp2_session_callbacks_del(cbs);

  nghttp2_settings_entry settings[] = {
      {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, WINDOW_BYTES},
  };
  nghttp2_submit_settings(session, NGHTTP2_FLAG_NONE, settings, 2);
  nghttp2_session_set_local_window_size(session, NGHTTP2_FLAG_NONE, 0, WINDOW_BYTES);

  char timeout[24];
  long long left = deadline - monotonic_ms();
  if (left < 1) left = 1;
  if (left <= 99999999)
    snprintf(timeout, sizeof timeout, "%lldm", left);
  else
    snprintf(timeout, sizeof timeout, "%lldS", (left + 999) / 1000);
  nghttp2_nv headers[] = {
      NV(":method", "POST"),
      NV(":scheme", "http"),
      NV(":authority", "localhost"),
      NV(":path", call->path),
      NV("content-type", "application/grpc"),
      NV("te", "trailers"),
      NV("grpc-timeout", timeout),
      NV("user-agent", "cni-driver-shim"),
  };
  nghttp2_data_provider provider = {.read_callback = read_body_cb};
  st.stream_id = nghttp2_submit_request(session, NULL, headers, sizeof headers / sizeof headers[0],
                                         &provider, NULL);

  uint8_t buf[65536];
  bool eof = false;
  while (!st.closed) {
    if (nghttp2_session_send(session) != 0) {
      set_failure(out, GRPC_UNAVAILABLE, xprintf("writing to %s: %s", call->socket_path, strerror(errno)));
      goto done;
    }
    if (st.closed) break;
    if (!nghttp2_session_want_read(session) && !nghttp2_session_want_write(session)) break;
    long long wait = deadline - monotonic_ms();
    if (wait <= 0) {
      set_failure(out, GRPC_DEADLINE_EXCEEDED,
                  xprintf("no answer within %lld ms", call->timeout_ms));
      goto done;
    }
    struct pollfd p = {.fd = st.fd,
                       .events = POLLIN | (nghttp2_session_want_write(session) ? POLLOUT : 0)};
    int n = poll(&p, 1, wait > 60000 ? 60000 : (int)wait);
    if (n < 0 && errno != EINTR) {
      set_failure(out, GRPC_UNAVAILABLE, xprintf("poll: %s", strerror(errno)));
      goto done;
    }
    if (n <= 0 || !(p.revents & (POLLIN | POLLHUP | POLLERR))) continue;
    ssize_t got = recv(st.fd, buf, sizeof buf, 0);
    if (got < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      set_failure(out, GRPC_UNAVAILABLE, xprintf("reading from %s: %s", call->socket_path, strerror(errno)));
      goto done;
    }
    if (got == 0) {
      eof = true;
      break;
    }
    ssize_t used = nghttp2_session_mem_recv(session, buf, (size_t)got);
    if (used < 0) {
      if (!st.protocol_error) st.protocol_error = xstrdup(nghttp2_strerror((int)used));
      /* A connection error may leave the stream open: it is over all the same. */
      nghttp2_session_send(session);
      break;
    }
  }
  if (!st.closed && !st.protocol_error && !st.goaway_before_us) {
    set_failure(out, GRPC_UNAVAILABLE, xstrdup(eof ? "the connection closed before the server answered"
                                                   : "the HTTP/2 session ended before the server answered"));
    goto done;
  }
  conclude(&st, out);

done:
  nghttp2_session_del(session);
  close(st.fd);
  free(body);
  free(st.grpc_message);
  free(st.protocol_error);
  free(st.response.data);
}

void grpc_outcome_free(struct grpc_outcome *out) {
  free(out->message);
  free(out->response);
  memset(out, 0, sizeof *out);
}
