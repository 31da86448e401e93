/*
 * cni_driver_nftables: nftables transactions in-process, on the libuv thread
 * pool: any script through libnftables (the library `nft` itself is built
 * on), and set element changes as nf_tables netlink messages of our own.
 *
 * NetworkPolicy writes a transaction on every pod's setup; exec'ing nft for
 * each costs a process start (about 5 ms here), which is most of what the
 * transaction costs. The library is opened with dlopen at first use
 * (libnftables.so.1, Debian's libnftables1, which the nftables package
 * depends on), so building needs no -dev package and a node without it
 * falls back to exec'ing nft.
 *
 * Most of those transactions only add and delete addresses in the table's
 * sets and verdict maps, and libnftables 1.0.6 is slow at exactly that: about
 * 0.25-0.5 ms for a few `add element` commands (parsing, evaluation, a cache
 * of the table), and a transaction that deletes an element costs 10-20 ms:
 * it first reads back every element of every set of the table, and freeing
 * its context closes its socket, which then waits for the kernel (see
 * kept_socket; some 13 ms on Linux 6.18 however small the table).
 * `elements` writes such a transaction itself: one nfnetlink batch of
 * NFT_MSG_NEWSETELEM / NFT_MSG_DELSETELEM messages, raw netlink as
 * native/conntrack does, no libnftnl.
 *
 *   available(): string | null     null when usable; else why not
 *   run(script): Promise<void>     one transaction, as `nft -f` reads a file
 *                                  (the script goes through a memory file);
 *                                  rejects with nft's own error text
 *   elements(table, changes): Promise<void>
 *       one transaction of element changes in the inet table `table`; each
 *       change is { op: "add" | "delete", set, keyLength: 4 | 16 | 12 | 24,
 *       keys, jumps? }: keys a Buffer of keyLength-byte keys (network order)
 *       back to back (12 and 24: address . protocol . port, each part in
 *       4-byte registers, as nft lays out a concatenation), jumps (adds to a
 *       verdict map) the chain each key jumps to.
 *       For plain hash sets of addresses and verdict maps keyed by address:
 *       the keys are sent as they are, so a set with the interval flag (whose
 *       elements are ranges) must not be written this way. An add of a
 *       present element is no error (as `nft add element`), a delete of an
 *       absent one is. All of the batch applies or none of it; a rejection
 *       names the change the kernel refused, with the kernel's own reason
 *       and the element when it says which, and carries `code` and `errno`.
 *       A change is split into messages of at most ELEM_MESSAGE_MAX bytes.
 *   batch(messages, count): Promise<void>
 *       one transaction of any nf_tables messages the caller made
 *       (src/plumbing/nft-netlink): count whole messages back to back, sent
 *       between a BATCH_BEGIN and a BATCH_END, numbered here. All of it
 *       applies or none; a rejection carries `code`, `errno` and `index`,
 *       the refused message (0-based; -1: the commit itself). The Services
 *       tables go this way: libnftables would parse 100,000 rule texts and
 *       read the tables back before each change.
 *
 * All three take one lock: a batch never interleaves with a libnftables
 * transaction. The socket of `elements` and `batch` (one, shared) is opened
 * on the calling (JavaScript) thread, as native/conntrack's is, so its table
 * is the one of the caller's network namespace; and it is kept open, since
 * closing it costs more than the batch (see kept_socket). A small element
 * batch is written on the calling thread when the lock is free; the rest
 * go to the libuv thread pool.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <node_api.h>

#include "../common/errno-error.h"
#include "../common/netlink-message.h"
#include "../common/netlink-socket.h"
#include "../common/pin-library.h"

/* The few symbols of libnftables/libnftables.h used here, declared by hand. */
struct nft_ctx;
#define NFT_CTX_DEFAULT 0
static struct nft_ctx *(*p_nft_ctx_new)(unsigned int flags);
static int (*p_nft_ctx_buffer_error)(struct nft_ctx *ctx);
static int (*p_nft_ctx_buffer_output)(struct nft_ctx *ctx);
static const char *(*p_nft_ctx_get_error_buffer)(struct nft_ctx *ctx);
static int (*p_nft_run_cmd_from_filename)(struct nft_ctx *ctx, const char *filename);
static void (*p_nft_ctx_free)(struct nft_ctx *ctx);

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char why_not[512];
static bool tried;
static bool usable;

/* Opens the library once; false with why_not set when it cannot. */
static bool ensure_lib(void) {
  if (tried) return usable;
  tried = true;
  void *lib = dlopen("libnftables.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!lib) {
    snprintf(why_not, sizeof why_not, "libnftables.so.1: %s", dlerror());
    return false;
  }
#define LOAD(sym)                                                                  \
  do {                                                                             \
    *(void **)(&p_##sym) = dlsym(lib, #sym);                                       \
    if (!p_##sym) {                                                                \
      snprintf(why_not, sizeof why_not, "libnftables.so.1 lacks %s", #sym);      \
      return false;                                                                \
    }                                                                              \
  } while (0)
  LOAD(nft_ctx_new);
  LOAD(nft_ctx_buffer_error);
  LOAD(nft_ctx_buffer_output);
  LOAD(nft_ctx_get_error_buffer);
  LOAD(nft_run_cmd_from_filename);
  LOAD(nft_ctx_free);
#undef LOAD
  usable = true;
  return true;
}

/*
 * Runs the script as a file, as `nft -f` does: libnftables 1.0.6 quotes the
 * wrong line of a buffer in its error messages (always the first), but the
 * right one of a file. An anonymous memory file costs no disk.
 */
static int run_script(struct nft_ctx *ctx, const char *script, char **error) {
  int fd = memfd_create("nft-script", MFD_CLOEXEC);
  if (fd < 0) {
    *error = strdup("memfd_create failed");
    return -1;
  }
  size_t len = strlen(script), done = 0;
  while (done < len) {
    ssize_t n = write(fd, script + done, len - done);
    if (n <= 0) {
      close(fd);
      *error = strdup("writing the script to a memory file failed");
      return -1;
    }
    done += (size_t)n;
  }
  char path[64];
  snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  int rc = p_nft_run_cmd_from_filename(ctx, path);
  close(fd);
  return rc;
}

typedef struct {
  napi_async_work work;
  napi_deferred deferred;
  char *script;
  int rc;
  char *error;
} run_request;

static void run_execute(napi_env env, void *data) {
  (void)env;
  run_request *req = data;
  /*
   * A context of its own for each transaction, as each `nft -f` has: a kept
   * one carries its ruleset cache from one run to the next, and its error
   * messages then point at the wrong command. One transaction at a time.
   */
  pthread_mutex_lock(&lock);
  struct nft_ctx *ctx = ensure_lib() ? p_nft_ctx_new(NFT_CTX_DEFAULT) : NULL;
  if (!ctx) {
    req->rc = -1;
    req->error = strdup(usable ? "nft_ctx_new failed" : why_not);
  } else {
    p_nft_ctx_buffer_error(ctx);
    p_nft_ctx_buffer_output(ctx);
    req->rc = run_script(ctx, req->script, &req->error);
    const char *err = p_nft_ctx_get_error_buffer(ctx);
    if (req->rc != 0 && !req->error && err && *err) req->error = strdup(err);
    p_nft_ctx_free(ctx);
  }
  pthread_mutex_unlock(&lock);
}

static void run_complete(napi_env env, napi_status status, void *data) {
  run_request *req = data;
  if (status == napi_ok && req->rc == 0) {
    napi_value undef;
    napi_get_undefined(env, &undef);
    napi_resolve_deferred(env, req->deferred, undef);
  } else {
    napi_value msg, error;
    const char *text = req->error ? req->error : "nft transaction failed";
    napi_create_string_utf8(env, text, NAPI_AUTO_LENGTH, &msg);
    napi_create_error(env, NULL, msg, &error);
    napi_reject_deferred(env, req->deferred, error);
  }
  napi_delete_async_work(env, req->work);
  free(req->script);
  free(req->error);
  free(req);
}

/* Queues data's work on the libuv thread pool, named for async hooks. */
static void queue_work(napi_env env, const char *name, napi_async_execute_callback execute,
                       napi_async_complete_callback complete, void *data, napi_async_work *work) {
  napi_value n;
  napi_create_string_utf8(env, name, NAPI_AUTO_LENGTH, &n);
  napi_create_async_work(env, NULL, n, execute, complete, data, work);
  napi_queue_async_work(env, *work);
}

static napi_value js_run(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  size_t len = 0;
  if (argc < 1 || napi_get_value_string_utf8(env, argv[0], NULL, 0, &len) != napi_ok) {
    napi_throw_type_error(env, NULL, "run(script): script must be a string");
    return NULL;
  }
  run_request *req = calloc(1, sizeof *req);
  req->script = malloc(len + 1);
  napi_get_value_string_utf8(env, argv[0], req->script, len + 1, &len);
  napi_value promise;
  napi_create_promise(env, &req->deferred, &promise);
  queue_work(env, "cni_driver_nftables.run", run_execute, run_complete, req, &req->work);
  return promise;
}

/* ------------------------------------------------------------------ elements */

/*
 * A message's length at most: its elements nest must fit nla_len (16 bits),
 * and the kernel takes a message into memory whole.
 */
#define ELEM_MESSAGE_MAX 65000
/* A batch at most, well beyond any table of addresses (and int's range for SO_SNDBUF). */
#define ELEM_BATCH_MAX ((size_t)512 * 1024 * 1024)
/* Room for an ack that echoes a whole message, when acks cannot be capped. */
#define ELEM_RECV_BUFFER (128 * 1024)
/* The receive buffer per message of the batch: an ack's skb takes well under 1 KiB. */
#define ELEM_RCVBUF_PER_MESSAGE 1024
#define ELEM_NAME_MAX (NFT_NAME_MAXLEN - 1)

typedef struct {
  bool add;
  char *set;
  uint32_t key_len; /* 4 or 16: an address; 12 or 24: address . protocol . port */
  uint32_t count;
  unsigned char *keys; /* count * key_len bytes */
  char **jumps;        /* count chain names, or NULL; sent with an add only */
} elem_change;

/* One NEWSETELEM or DELSETELEM of the batch: where it is and what of its change it holds. */
typedef struct {
  size_t off;      /* of its header in the batch */
  size_t elements; /* of its NFTA_SET_ELEM_LIST_ELEMENTS nest, from its header */
  uint32_t change, first;
  bool acked;
} elem_message;

/*
 * The socket element batches go through, kept open: closing a NETLINK_NETFILTER
 * socket makes nf_tables flush its queue of deleted objects (the
 * NETLINK_URELEASE notifier), which waits for an RCU grace period: 12-22 ms
 * after any batch that deleted an element, against some 40 us for the batch
 * itself (Linux 6.18; libnftables pays it on each context it frees). One per
 * network namespace of the calling thread (the last one used is kept, so it
 * holds that namespace), counted: the cache holds a reference and each
 * request one, and the last to let go closes it, never on the JavaScript
 * thread. Used only under `lock`.
 */
typedef struct {
  int fd;
  dev_t dev;
  ino_t ino;
  unsigned refs; /* under sock_lock */
} kept_socket;

static pthread_mutex_t sock_lock = PTHREAD_MUTEX_INITIALIZER;
/* The most elements a batch written on the JavaScript thread holds (see js_elements). */
#define INLINE_MAX_ELEMENTS 512
static kept_socket *kept;
/* The next batch's first sequence number, under `lock`: answers to an earlier batch are told apart. */
static uint32_t next_seq = 1;

typedef struct {
  napi_async_work work;
  napi_deferred deferred;
  kept_socket *sock;
  kept_socket *retired; /* the namespace's socket this one replaced: let go in the work */
  char *table;
  elem_change *changes;
  uint32_t nchanges;
  int err;     /* the failure's errno; 0 when the batch applied */
  char *error; /* its message */
} elements_request;

static void socket_put(kept_socket *s) {
  if (!s) return;
  pthread_mutex_lock(&sock_lock);
  bool last = --s->refs == 0;
  if (last && kept == s) kept = NULL;
  pthread_mutex_unlock(&sock_lock);
  if (last) {
    close(s->fd);
    free(s);
  }
}

/* Stops offering s to new requests (after a broken exchange); those holding it keep it. */
static void socket_drop(kept_socket *s) {
  pthread_mutex_lock(&sock_lock);
  bool cached = kept == s;
  if (cached) kept = NULL;
  pthread_mutex_unlock(&sock_lock);
  if (cached) socket_put(s);
}

/*
 * The calling thread's namespace's socket, with a reference for the caller;
 * *retired the one it replaced (a reference to let go of), if any. NULL with
 * errno when no socket can be had.
 */
static kept_socket *socket_get(kept_socket **retired) {
  *retired = NULL;
  struct stat ns;
  bool known = stat("/proc/thread-self/ns/net", &ns) == 0;
  pthread_mutex_lock(&sock_lock);
  if (known && kept && kept->dev == ns.st_dev && kept->ino == ns.st_ino) {
    kept->refs++;
    pthread_mutex_unlock(&sock_lock);
    return kept;
  }
  pthread_mutex_unlock(&sock_lock);
  kept_socket *s = calloc(1, sizeof *s);
  if (!s) {
    errno = ENOMEM;
    return NULL;
  }
  if ((s->fd = open_netlink_socket(NETLINK_NETFILTER)) < 0) {
    int err = errno;
    free(s);
    errno = err;
    return NULL;
  }
  s->refs = 1;
  if (!known) return s; /* no /proc: a socket of its own, closed after its batch */
  s->dev = ns.st_dev;
  s->ino = ns.st_ino;
  s->refs = 2;
  pthread_mutex_lock(&sock_lock);
  *retired = kept;
  kept = s;
  pthread_mutex_unlock(&sock_lock);
  return s;
}

static void put_header(bytes_t *b, uint16_t type, uint16_t flags, uint32_t seq, uint8_t family,
                       uint16_t res_id) {
  struct nlmsghdr *h = (struct nlmsghdr *)(b->data + b->len);
  memset(h, 0, NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(struct nfgenmsg)));
  h->nlmsg_len = NLMSG_HDRLEN + sizeof(struct nfgenmsg);
  h->nlmsg_type = type;
  h->nlmsg_flags = flags;
  h->nlmsg_seq = seq;
  struct nfgenmsg *g = (struct nfgenmsg *)((unsigned char *)h + NLMSG_HDRLEN);
  g->nfgen_family = family;
  g->version = NFNETLINK_V0;
  g->res_id = htons(res_id);
  b->len += NLMSG_ALIGN(h->nlmsg_len);
}

static void put_string(bytes_t *b, size_t msg, uint16_t type, const char *s) {
  put_attr(b, msg, type, s, strlen(s) + 1);
}

static size_t string_attr_size(const char *s) { return NLA_HDRLEN + NLA_ALIGN(strlen(s) + 1); }

/* The bytes element i of c takes in a message. */
static size_t element_size(const elem_change *c, uint32_t i) {
  size_t n = 2 * NLA_HDRLEN + NLA_HDRLEN + NLA_ALIGN(c->key_len); /* elem { key { value } } */
  if (c->add && c->jumps) /* data { verdict { code, chain } } */
    n += 2 * NLA_HDRLEN + NLA_HDRLEN + NLA_ALIGN(sizeof(uint32_t)) + string_attr_size(c->jumps[i]);
  return n;
}

static void put_element(bytes_t *b, size_t msg, const elem_change *c, uint32_t i) {
  size_t elem = put_attr(b, msg, NFTA_LIST_ELEM | NLA_F_NESTED, NULL, 0);
  size_t key = put_attr(b, msg, NFTA_SET_ELEM_KEY | NLA_F_NESTED, NULL, 0);
  put_attr(b, msg, NFTA_DATA_VALUE, c->keys + (size_t)i * c->key_len, c->key_len);
  end_nest(b, key);
  if (c->add && c->jumps) {
    size_t data = put_attr(b, msg, NFTA_SET_ELEM_DATA | NLA_F_NESTED, NULL, 0);
    size_t verdict = put_attr(b, msg, NFTA_DATA_VERDICT | NLA_F_NESTED, NULL, 0);
    uint32_t code = htonl((uint32_t)NFT_JUMP);
    put_attr(b, msg, NFTA_VERDICT_CODE, &code, sizeof code);
    put_string(b, msg, NFTA_VERDICT_CHAIN, c->jumps[i]);
    end_nest(b, verdict);
    end_nest(b, data);
  }
  end_nest(b, elem);
}

/*
 * The batch: BATCH_BEGIN, one message per change (more when it is big),
 * BATCH_END; numbered when sent. Answers 0 or ENOMEM / EMSGSIZE; *msgs (to
 * free) says where each message is.
 */
static int build_batch(const elements_request *req, bytes_t *b, elem_message **msgs, uint32_t *nmsgs) {
  uint32_t cap = 0;
  *msgs = NULL;
  *nmsgs = 0;
  if (bytes_reserve(b, NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(struct nfgenmsg)))) return ENOMEM;
  put_header(b, NFNL_MSG_BATCH_BEGIN, NLM_F_REQUEST, 0, AF_UNSPEC, NFNL_SUBSYS_NFTABLES);
  size_t names = string_attr_size(req->table);
  for (uint32_t ci = 0; ci < req->nchanges; ci++) {
    const elem_change *c = &req->changes[ci];
    size_t head = NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(struct nfgenmsg)) + names + string_attr_size(c->set) +
                  NLA_HDRLEN;
    size_t msg = 0, nest = 0;
    bool open = false;
    for (uint32_t i = 0; i < c->count; i++) {
      size_t size = element_size(c, i);
      if (open && b->len - msg + size > ELEM_MESSAGE_MAX) {
        end_nest(b, nest);
        open = false;
      }
      if (!open) {
        if (*nmsgs == cap) {
          cap = cap ? cap * 2 : 16;
          elem_message *grown = realloc(*msgs, cap * sizeof **msgs);
          if (!grown) return ENOMEM;
          *msgs = grown;
        }
        if (b->len + head > ELEM_BATCH_MAX) return EMSGSIZE;
        if (bytes_reserve(b, head)) return ENOMEM;
        msg = b->len;
        put_header(b, (NFNL_SUBSYS_NFTABLES << 8) | (c->add ? NFT_MSG_NEWSETELEM : NFT_MSG_DELSETELEM),
                   c->add ? NLM_F_REQUEST | NLM_F_CREATE | NLM_F_ACK : NLM_F_REQUEST | NLM_F_ACK,
                   0, NFPROTO_INET, 0);
        put_string(b, msg, NFTA_SET_ELEM_LIST_TABLE, req->table);
        put_string(b, msg, NFTA_SET_ELEM_LIST_SET, c->set);
        nest = put_attr(b, msg, NFTA_SET_ELEM_LIST_ELEMENTS | NLA_F_NESTED, NULL, 0);
        (*msgs)[(*nmsgs)++] = (elem_message){.off = msg, .elements = nest - msg, .change = ci, .first = i};
        open = true;
      }
      if (b->len + size > ELEM_BATCH_MAX) return EMSGSIZE;
      if (bytes_reserve(b, size)) return ENOMEM;
      put_element(b, msg, c, i);
    }
    if (open) end_nest(b, nest);
  }
  if (bytes_reserve(b, NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(struct nfgenmsg)))) return ENOMEM;
  put_header(b, NFNL_MSG_BATCH_END, NLM_F_REQUEST, 0, AF_UNSPEC, NFNL_SUBSYS_NFTABLES);
  return 0;
}

/* Raises a socket buffer to at least want bytes (the kernel doubles what it is given). */
static void ensure_sockbuf(int fd, int opt, int force_opt, size_t want) {
  int cur = 0;
  socklen_t len = sizeof cur;
  if (getsockopt(fd, SOL_SOCKET, opt, &cur, &len) == 0 && (size_t)cur >= want) return;
  int half = (int)(want / 2 + 1);
  if (setsockopt(fd, SOL_SOCKET, force_opt, &half, sizeof half) < 0)
    setsockopt(fd, SOL_SOCKET, opt, &half, sizeof half);
}

/* What an NLMSG_ERROR says: the errno (0 for an ack), the kernel's message and the bad attribute's offset. */
typedef struct {
  int code;
  const char *msg;
  size_t msg_len;
  bool has_offs;
  uint32_t offs;
} ack_t;

static void parse_ack(const struct nlmsghdr *h, ack_t *a) {
  memset(a, 0, sizeof *a);
  if (h->nlmsg_len < NLMSG_HDRLEN + sizeof(struct nlmsgerr)) {
    a->code = EPROTO;
    return;
  }
  const struct nlmsgerr *e = NLMSG_DATA(h);
  a->code = -e->error;
  if (!(h->nlmsg_flags & NLM_F_ACK_TLVS)) return;
  size_t payload = sizeof *e;
  if (!(h->nlmsg_flags & NLM_F_CAPPED) && e->msg.nlmsg_len >= NLMSG_HDRLEN)
    payload += e->msg.nlmsg_len - NLMSG_HDRLEN;
  size_t off = NLMSG_HDRLEN + NLMSG_ALIGN(payload);
  const unsigned char *p = (const unsigned char *)h;
  while (off + NLA_HDRLEN <= h->nlmsg_len) {
    const struct nlattr *attr = (const struct nlattr *)(p + off);
    if (attr->nla_len < NLA_HDRLEN || off + attr->nla_len > h->nlmsg_len) break;
    size_t len = attr->nla_len - NLA_HDRLEN;
    const unsigned char *data = p + off + NLA_HDRLEN;
    switch (attr->nla_type & NLA_TYPE_MASK) {
    case NLMSGERR_ATTR_MSG:
      a->msg = (const char *)data;
      a->msg_len = strnlen(a->msg, len);
      break;
    case NLMSGERR_ATTR_OFFS:
      if (len >= sizeof(uint32_t)) {
        memcpy(&a->offs, data, sizeof a->offs);
        a->has_offs = true;
      }
      break;
    }
    off += NLA_ALIGN(attr->nla_len);
  }
}

/* The element of message m the kernel's offset (from the message's header) falls in; -1 when none. */
static int64_t element_at(const bytes_t *b, const elem_message *m, uint32_t offs) {
  const struct nlmsghdr *h = (const struct nlmsghdr *)(b->data + m->off);
  const struct nlattr *nest = (const struct nlattr *)(b->data + m->off + m->elements);
  size_t at = m->elements + NLA_HDRLEN, end = m->elements + nest->nla_len;
  if (end > h->nlmsg_len) return -1;
  for (uint32_t k = 0; at + NLA_HDRLEN <= end; k++) {
    const struct nlattr *elem = (const struct nlattr *)(b->data + m->off + at);
    if (elem->nla_len < NLA_HDRLEN) return -1;
    if (offs >= at && offs < at + elem->nla_len) return (int64_t)m->first + k;
    at += NLA_ALIGN(elem->nla_len);
  }
  return -1;
}

static void set_error(elements_request *req, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_error(elements_request *req, int err, const char *fmt, ...) {
  if (req->err) return; /* the first failure is the one reported */
  req->err = err ? err : EPROTO;
  char text[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  req->error = strdup(text);
}

/* Numbers the batch's messages from seq on, in order. */
static void number_batch(bytes_t *b, uint32_t seq) {
  for (size_t at = 0; at + NLMSG_HDRLEN <= b->len; seq++) {
    struct nlmsghdr *h = (struct nlmsghdr *)(b->data + at);
    h->nlmsg_seq = seq;
    at += NLMSG_ALIGN(h->nlmsg_len);
  }
}

/* Reads and drops whatever an earlier, broken exchange left queued (bounded). */
static void drain(int fd, unsigned char *buf) {
  for (int i = 0; i < 1024; i++) {
    ssize_t got = recv(fd, buf, ELEM_RECV_BUFFER, MSG_DONTWAIT);
    if (got < 0 && errno != EINTR) return;
  }
}

/*
 * How a batch went: applied (err 0), refused by the kernel (refused: which
 * message, 0-based among those between BATCH_BEGIN and BATCH_END, or -1 for
 * the batch itself, i.e. its commit), or the exchange broke (what says where;
 * the socket is not to be offered again).
 */
typedef struct {
  int err;
  bool refused, broken;
  int64_t index;
  char reason[600]; /* the kernel's extended ack message, if any */
  bool has_offs;
  uint32_t offs; /* the bad attribute's offset from the refused message's header */
  const char *what;
} outcome_t;

static void refuse(outcome_t *o, int64_t index, const ack_t *a) {
  if (o->err) return; /* the first failure is the one reported */
  o->err = a->code;
  o->refused = true;
  o->index = index;
  snprintf(o->reason, sizeof o->reason, "%.*s", (int)a->msg_len, a->msg ? a->msg : "");
  o->has_offs = a->has_offs;
  o->offs = a->offs;
}

static void broke(outcome_t *o, int err, const char *what) {
  o->broken = true;
  if (o->err) return;
  o->err = err;
  o->what = what;
}

/*
 * Sends the batch (BATCH_BEGIN, nmsgs messages, BATCH_END, in b) and reads
 * every answer; the caller holds `lock`. nfnetlink handles a batch inside
 * sendmsg, so its answers are all queued when that returns. With ack_each
 * every message carries NLM_F_ACK; a message of an aborted batch may still be
 * acked with 0 (the kernel acks each message as it goes, then aborts the
 * whole batch when one fails and sends that one's error; a failed commit is
 * an error on the begin message): so the batch applied only when every
 * message was acked with 0 and no error came at all. Without ack_each only
 * the last message asks for an ack (set here): the kernel holds acks back
 * until the commit and drops them when it fails, so that ack with no error
 * beside it says the batch applied, and a batch of 100,000 rules does not
 * queue 100,000 acks.
 */
static void exchange(int fd, bytes_t *b, uint32_t nmsgs, bool ack_each, outcome_t *o) {
  memset(o, 0, sizeof *o);
  unsigned char *buf = malloc(ELEM_RECV_BUFFER);
  if (!buf) {
    o->err = ENOMEM;
    o->what = "allocating the answer buffer";
    return;
  }
  drain(fd, buf);
  if (next_seq > UINT32_MAX - nmsgs - 2) next_seq = 1;
  uint32_t seq = next_seq;
  next_seq += nmsgs + 2;
  number_batch(b, seq);
  uint32_t want = ack_each ? nmsgs : 1;
  if (!ack_each && nmsgs) {
    size_t at = 0;
    for (uint32_t i = 0; i < nmsgs; i++) at += NLMSG_ALIGN(((struct nlmsghdr *)(b->data + at))->nlmsg_len);
    ((struct nlmsghdr *)(b->data + at))->nlmsg_flags |= NLM_F_ACK;
  }
  ensure_sockbuf(fd, SO_SNDBUF, SO_SNDBUFFORCE, b->len + 4096);
  ensure_sockbuf(fd, SO_RCVBUF, SO_RCVBUFFORCE, ((size_t)want + 2) * ELEM_RCVBUF_PER_MESSAGE + 256 * 1024);
  struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
  ssize_t sent;
  do sent = sendto(fd, b->data, b->len, 0, (struct sockaddr *)&kernel, sizeof kernel);
  while (sent < 0 && errno == EINTR);
  if (sent < 0) {
    broke(o, errno, "sendmsg");
    free(buf);
    return;
  }
  uint32_t acked = 0;
  bool *seen = calloc(nmsgs ? nmsgs : 1, sizeof *seen);
  /* One datagram per answer: a bound only a broken exchange reaches. */
  for (uint32_t rounds = 0; seen && rounds < nmsgs + 64; rounds++) {
    struct sockaddr_nl from;
    struct iovec iov = {.iov_base = buf, .iov_len = ELEM_RECV_BUFFER};
    struct msghdr mh = {.msg_name = &from, .msg_namelen = sizeof from, .msg_iov = &iov, .msg_iovlen = 1};
    ssize_t got = recvmsg(fd, &mh, MSG_DONTWAIT);
    if (got < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      /* ENOBUFS: answers were dropped; after a refusal that changes nothing, else the outcome is unknown. */
      if (!o->refused) broke(o, errno, "reading the kernel's answers");
      else o->broken = true;
      break;
    }
    if (from.nl_pid != 0) continue;
    int remaining = (int)got;
    for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, remaining); h = NLMSG_NEXT(h, remaining)) {
      if (h->nlmsg_type != NLMSG_ERROR || h->nlmsg_seq - seq > nmsgs + 1) continue;
      ack_t a;
      parse_ack(h, &a);
      uint32_t k = h->nlmsg_seq - seq - 1; /* the body's index; begin and end fall outside */
      if (a.code) refuse(o, k < nmsgs ? (int64_t)k : -1, &a);
      else if (k < nmsgs && !seen[k]) {
        seen[k] = true;
        acked++;
      }
    }
  }
  if (!seen) broke(o, ENOMEM, "allocating the answer table");
  free(seen);
  free(buf);
  if (acked < want && !o->err) broke(o, EPROTO, "messages unanswered, outcome unknown");
}

/* Records the outcome of an element batch as the request's error, naming the change (and element) refused. */
static void elements_outcome(elements_request *req, const bytes_t *b, const elem_message *msgs, uint32_t nmsgs,
                             const outcome_t *o) {
  if (!o->err) return;
  char reason[620] = "";
  if (o->reason[0]) snprintf(reason, sizeof reason, ": %s", o->reason);
  if (!o->refused) {
    set_error(req, o->err, "element batch of inet %s: %s: %s", req->table, o->what, strerror(o->err));
  } else if (o->index >= 0 && (uint64_t)o->index < nmsgs) {
    char element[INET6_ADDRSTRLEN + 16] = "";
    const elem_message *m = &msgs[o->index];
    const elem_change *c = &req->changes[m->change];
    int64_t i = o->has_offs ? element_at(b, m, o->offs) : -1;
    char text[INET6_ADDRSTRLEN];
    if (i >= 0 && (uint64_t)i < c->count &&
        inet_ntop(c->key_len == 4 || c->key_len == 12 ? AF_INET : AF_INET6, c->keys + (size_t)i * c->key_len,
                  text, sizeof text))
      snprintf(element, sizeof element, " (element %s)", text);
    set_error(req, o->err, "%s element inet %s %s (%u element%s): %s%s%s", c->add ? "add" : "delete",
              req->table, c->set, c->count, c->count == 1 ? "" : "s", strerror(o->err), reason, element);
  } else {
    set_error(req, o->err, "element batch of inet %s (%u change%s): %s%s", req->table, req->nchanges,
              req->nchanges == 1 ? "" : "s", strerror(o->err), reason);
  }
}

static void send_batch(elements_request *req, bytes_t *b, elem_message *msgs, uint32_t nmsgs) {
  outcome_t o;
  exchange(req->sock->fd, b, nmsgs, true, &o);
  elements_outcome(req, b, msgs, nmsgs, &o);
  /* Not a refusal but a broken exchange: the next batch gets a socket of its own. */
  if (o.broken) socket_drop(req->sock);
}

/* Builds and sends the batch; the caller holds `lock`. */
static void write_batch(elements_request *req) {
  bytes_t b = {0};
  elem_message *msgs = NULL;
  uint32_t nmsgs = 0;
  int err = build_batch(req, &b, &msgs, &nmsgs);
  if (err) {
    set_error(req, err, "element batch of inet %s: %s", req->table,
              err == EMSGSIZE ? "bigger than 512 MiB" : strerror(err));
  } else if (nmsgs) {
    send_batch(req, &b, msgs, nmsgs);
  }
  free(msgs);
  free(b.data);
}

static void elements_execute(napi_env env, void *data) {
  (void)env;
  elements_request *req = data;
  pthread_mutex_lock(&lock);
  write_batch(req);
  pthread_mutex_unlock(&lock);
  /* Here, off the JavaScript thread: a close can wait for nf_tables (see kept_socket). */
  socket_put(req->sock);
  socket_put(req->retired);
  req->sock = req->retired = NULL;
}

/* How many elements the request's changes hold in all. */
static uint64_t element_count(const elements_request *req) {
  uint64_t n = 0;
  for (uint32_t i = 0; i < req->nchanges; i++) n += req->changes[i].count;
  return n;
}

static void free_elements_request(elements_request *req) {
  socket_put(req->sock);
  socket_put(req->retired);
  for (uint32_t i = 0; req->changes && i < req->nchanges; i++) {
    elem_change *c = &req->changes[i];
    free(c->set);
    free(c->keys);
    for (uint32_t j = 0; c->jumps && j < c->count; j++) free(c->jumps[j]);
    free(c->jumps);
  }
  free(req->changes);
  free(req->table);
  free(req->error);
  free(req);
}

static void settle(napi_env env, elements_request *req) {
  if (req->err) {
    napi_reject_deferred(env, req->deferred,
                         coded_error(env, req->err, req->error ? req->error : "element batch failed"));
  } else {
    napi_value undef;
    napi_get_undefined(env, &undef);
    napi_resolve_deferred(env, req->deferred, undef);
  }
}

static void elements_complete(napi_env env, napi_status status, void *data) {
  elements_request *req = data;
  if (status != napi_ok && !req->err)
    set_error(req, ECANCELED, "element batch of inet %s: cancelled", req->table);
  settle(env, req);
  napi_delete_async_work(env, req->work);
  free_elements_request(req);
}

/* A copy of a name: a string of 1 to ELEM_NAME_MAX bytes without NUL; NULL when it is not one. */
static char *get_name(napi_env env, napi_value v) {
  size_t len = 0;
  if (napi_get_value_string_utf8(env, v, NULL, 0, &len) != napi_ok || len == 0 || len > ELEM_NAME_MAX)
    return NULL;
  char *s = malloc(len + 1);
  if (!s) return NULL;
  napi_get_value_string_utf8(env, v, s, len + 1, &len);
  if (strlen(s) != len) {
    free(s);
    return NULL;
  }
  return s;
}

static bool get_property(napi_env env, napi_value obj, const char *name, napi_value *out,
                         napi_valuetype *type) {
  if (napi_get_named_property(env, obj, name, out) != napi_ok) return false;
  return napi_typeof(env, *out, type) == napi_ok;
}

#define CHANGE "elements(table, changes): changes[%u]"

/* Reads changes[index] into c; false with a TypeError thrown when a field is wrong. */
static bool get_change(napi_env env, napi_value v, uint32_t index, elem_change *c) {
  char what[160];
  napi_value field;
  napi_valuetype type;
  napi_typeof(env, v, &type);
  if (type != napi_object) {
    snprintf(what, sizeof what, CHANGE " must be an object", index);
    goto fail;
  }
  char op[8] = "";
  size_t op_len = 0;
  if (!get_property(env, v, "op", &field, &type) || type != napi_string ||
      napi_get_value_string_utf8(env, field, op, sizeof op, &op_len) != napi_ok ||
      (strcmp(op, "add") != 0 && strcmp(op, "delete") != 0)) {
    snprintf(what, sizeof what, CHANGE ".op must be \"add\" or \"delete\"", index);
    goto fail;
  }
  c->add = strcmp(op, "add") == 0;
  if (!get_property(env, v, "set", &field, &type) || type != napi_string ||
      !(c->set = get_name(env, field))) {
    snprintf(what, sizeof what, CHANGE ".set must be a name of 1 to %d bytes", index, ELEM_NAME_MAX);
    goto fail;
  }
  if (!get_property(env, v, "keyLength", &field, &type) || type != napi_number ||
      napi_get_value_uint32(env, field, &c->key_len) != napi_ok ||
      (c->key_len != 4 && c->key_len != 16 && c->key_len != 12 && c->key_len != 24)) {
    snprintf(what, sizeof what, CHANGE ".keyLength must be 4, 16, 12 or 24", index);
    goto fail;
  }
  bool is_buffer = false;
  void *keys = NULL;
  size_t keys_len = 0;
  if (!get_property(env, v, "keys", &field, &type) || napi_is_buffer(env, field, &is_buffer) != napi_ok ||
      !is_buffer || napi_get_buffer_info(env, field, &keys, &keys_len) != napi_ok ||
      keys_len % c->key_len != 0 || keys_len / c->key_len > UINT32_MAX) {
    snprintf(what, sizeof what, CHANGE ".keys must be a Buffer of %u-byte keys", index, c->key_len);
    goto fail;
  }
  c->count = (uint32_t)(keys_len / c->key_len);
  if (keys_len) {
    c->keys = malloc(keys_len);
    if (!c->keys) {
      napi_throw(env, errno_error(env, ENOMEM, "elements(table, changes)"));
      return false;
    }
    memcpy(c->keys, keys, keys_len);
  }
  if (!get_property(env, v, "jumps", &field, &type)) type = napi_undefined;
  if (type == napi_undefined || type == napi_null) return true;
  bool is_array = false;
  uint32_t n = 0;
  if (napi_is_array(env, field, &is_array) != napi_ok || !is_array ||
      napi_get_array_length(env, field, &n) != napi_ok || n != c->count) {
    snprintf(what, sizeof what, CHANGE ".jumps must be an array of one chain per key", index);
    goto fail;
  }
  c->jumps = calloc(n ? n : 1, sizeof *c->jumps);
  if (!c->jumps) {
    napi_throw(env, errno_error(env, ENOMEM, "elements(table, changes)"));
    return false;
  }
  for (uint32_t j = 0; j < n; j++) {
    napi_value name;
    if (napi_get_element(env, field, j, &name) != napi_ok || napi_typeof(env, name, &type) != napi_ok ||
        type != napi_string || !(c->jumps[j] = get_name(env, name))) {
      snprintf(what, sizeof what, CHANGE ".jumps[%u] must be a chain name of 1 to %d bytes", index, j,
               ELEM_NAME_MAX);
      goto fail;
    }
  }
  return true;
fail:
  napi_throw_type_error(env, NULL, what);
  return false;
}
#undef CHANGE

static napi_value js_elements(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  elements_request *req = calloc(1, sizeof *req);
  if (!req) {
    napi_throw(env, errno_error(env, ENOMEM, "elements(table, changes)"));
    return NULL;
  }
  napi_valuetype type = napi_undefined;
  if (argc >= 1) napi_typeof(env, argv[0], &type);
  if (type != napi_string || !(req->table = get_name(env, argv[0]))) {
    napi_throw_type_error(env, NULL, "elements(table, changes): table must be a name of 1 to 255 bytes");
    free_elements_request(req);
    return NULL;
  }
  bool is_array = false;
  if (argc < 2 || napi_is_array(env, argv[1], &is_array) != napi_ok || !is_array) {
    napi_throw_type_error(env, NULL, "elements(table, changes): changes must be an array");
    free_elements_request(req);
    return NULL;
  }
  napi_get_array_length(env, argv[1], &req->nchanges);
  req->changes = calloc(req->nchanges ? req->nchanges : 1, sizeof *req->changes);
  if (!req->changes) {
    napi_throw(env, errno_error(env, ENOMEM, "elements(table, changes)"));
    free_elements_request(req);
    return NULL;
  }
  for (uint32_t i = 0; i < req->nchanges; i++) {
    napi_value change;
    if (napi_get_element(env, argv[1], i, &change) != napi_ok ||
        !get_change(env, change, i, &req->changes[i])) {
      bool pending = false;
      napi_is_exception_pending(env, &pending);
      if (!pending) napi_throw_type_error(env, NULL, "elements(table, changes): changes must be an array");
      free_elements_request(req);
      return NULL;
    }
  }
  napi_value promise;
  napi_create_promise(env, &req->deferred, &promise);
  if (!(req->sock = socket_get(&req->retired))) {
    napi_reject_deferred(env, req->deferred, errno_error(env, errno, "nf_tables netlink socket"));
    free_elements_request(req);
    return promise;
  }
  /*
   * A small batch is written here, on the JavaScript thread, when no
   * libnftables transaction holds the lock and no socket is to be closed:
   * the batch takes some 40 us, a trip through the thread pool and back to
   * settle the promise several times that on a busy node (a pod's setup
   * waits for it). Larger batches, and any that would wait, go to the pool.
   * The socket is closed here only after a broken exchange dropped it.
   */
  if (!req->retired && element_count(req) <= INLINE_MAX_ELEMENTS && pthread_mutex_trylock(&lock) == 0) {
    write_batch(req);
    pthread_mutex_unlock(&lock);
    settle(env, req);
    free_elements_request(req);
    return promise;
  }
  queue_work(env, "cni_driver_nftables.elements", elements_execute, elements_complete, req, &req->work);
  return promise;
}

/* ------------------------------------------------------------------ batch */

/*
 * batch(messages, count): the nf_tables messages of one transaction, made by
 * the caller (src/plumbing/nft-netlink), sent between a BATCH_BEGIN and a
 * BATCH_END over the kept socket, as element batches are. The rejection of a
 * refused batch carries `code`, `errno` and `index`: the refused message,
 * 0-based, or -1 when the commit failed.
 */
typedef struct {
  napi_async_work work;
  napi_deferred deferred;
  kept_socket *sock, *retired;
  bytes_t b;
  uint32_t nmsgs;
  outcome_t o;
} batch_request;

static void batch_execute(napi_env env, void *data) {
  (void)env;
  batch_request *req = data;
  pthread_mutex_lock(&lock);
  exchange(req->sock->fd, &req->b, req->nmsgs, false, &req->o);
  pthread_mutex_unlock(&lock);
  if (req->o.broken) socket_drop(req->sock);
  /* Here, off the JavaScript thread: a close can wait for nf_tables (see kept_socket). */
  socket_put(req->sock);
  socket_put(req->retired);
  req->sock = req->retired = NULL;
}

static void batch_complete(napi_env env, napi_status status, void *data) {
  batch_request *req = data;
  outcome_t *o = &req->o;
  if (status != napi_ok && !o->err) {
    o->err = ECANCELED;
    o->what = "cancelled";
  }
  if (!o->err) {
    napi_value undef;
    napi_get_undefined(env, &undef);
    napi_resolve_deferred(env, req->deferred, undef);
  } else {
    char text[1024];
    if (o->refused)
      snprintf(text, sizeof text, "%s%s%s", strerror(o->err), o->reason[0] ? ": " : "", o->reason);
    else
      snprintf(text, sizeof text, "nf_tables batch: %s: %s", o->what, strerror(o->err));
    napi_value error = coded_error(env, o->err, text), index;
    napi_create_int64(env, o->refused ? o->index : -2, &index);
    napi_set_named_property(env, error, "index", index);
    napi_reject_deferred(env, req->deferred, error);
  }
  napi_delete_async_work(env, req->work);
  socket_put(req->sock);
  socket_put(req->retired);
  free(req->b.data);
  free(req);
}

static napi_value js_batch(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  bool is_buffer = false;
  void *data = NULL;
  size_t len = 0;
  uint32_t count = 0;
  if (argc < 2 || napi_is_buffer(env, argv[0], &is_buffer) != napi_ok || !is_buffer ||
      napi_get_buffer_info(env, argv[0], &data, &len) != napi_ok ||
      napi_get_value_uint32(env, argv[1], &count) != napi_ok || count == 0 || len > ELEM_BATCH_MAX) {
    napi_throw_type_error(env, NULL, "batch(messages, count): a Buffer of count > 0 nf_tables messages");
    return NULL;
  }
  /* The count must be what the buffer holds: the acks are told apart by it. */
  uint32_t found = 0;
  for (size_t at = 0; at + NLMSG_HDRLEN <= len; found++) {
    const struct nlmsghdr *h = (const struct nlmsghdr *)((const unsigned char *)data + at);
    if (h->nlmsg_len < NLMSG_HDRLEN || at + h->nlmsg_len > len) {
      found = UINT32_MAX;
      break;
    }
    at += NLMSG_ALIGN(h->nlmsg_len);
  }
  if (found != count) {
    napi_throw_type_error(env, NULL, "batch(messages, count): the Buffer does not hold count whole messages");
    return NULL;
  }
  size_t frame = NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(struct nfgenmsg));
  batch_request *req = calloc(1, sizeof *req);
  if (!req || bytes_reserve(&req->b, len + 2 * frame)) {
    free(req);
    napi_throw(env, errno_error(env, ENOMEM, "batch(messages, count)"));
    return NULL;
  }
  req->nmsgs = count;
  put_header(&req->b, NFNL_MSG_BATCH_BEGIN, NLM_F_REQUEST, 0, AF_UNSPEC, NFNL_SUBSYS_NFTABLES);
  memcpy(req->b.data + req->b.len, data, len);
  req->b.len += len;
  put_header(&req->b, NFNL_MSG_BATCH_END, NLM_F_REQUEST, 0, AF_UNSPEC, NFNL_SUBSYS_NFTABLES);
  napi_value promise;
  napi_create_promise(env, &req->deferred, &promise);
  /* Opened here, on the JavaScript thread: the socket's namespace is the caller's. */
  if (!(req->sock = socket_get(&req->retired))) {
    napi_reject_deferred(env, req->deferred, errno_error(env, errno, "nf_tables netlink socket"));
    free(req->b.data);
    free(req);
    return promise;
  }
  queue_work(env, "cni_driver_nftables.batch", batch_execute, batch_complete, req, &req->work);
  return promise;
}

static napi_value js_available(napi_env env, napi_callback_info info) {
  (void)info;
  pthread_mutex_lock(&lock);
  bool ok = ensure_lib();
  pthread_mutex_unlock(&lock);
  napi_value result;
  if (ok) napi_get_null(env, &result);
  else napi_create_string_utf8(env, why_not, NAPI_AUTO_LENGTH, &result);
  return result;
}

NAPI_MODULE_INIT(/* napi_env env, napi_value exports */) {
  pin_library((void *)js_run);
  napi_property_descriptor props[] = {
      {"available", NULL, js_available, NULL, NULL, NULL, napi_enumerable, NULL},
      {"run", NULL, js_run, NULL, NULL, NULL, napi_enumerable, NULL},
      {"elements", NULL, js_elements, NULL, NULL, NULL, napi_enumerable, NULL},
      {"batch", NULL, js_batch, NULL, NULL, NULL, napi_enumerable, NULL},
  };
  napi_define_properties(env, exports, sizeof props / sizeof props[0], props);
  return exports;
}
