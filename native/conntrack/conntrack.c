/*
 * cni_driver_conntrack: the kernel's connection tracking table through
 * ctnetlink (NETLINK_NETFILTER, subsystem NFNL_SUBSYS_CTNETLINK), on the libuv
 * thread pool, so that a dump of tens of thousands of entries never holds the
 * event loop and no process is forked for it (conntrack-tools' `conntrack`
 * takes 219 ms and prints 4.4 MiB for 28,000 entries).
 *
 *   list(): Promise<Buffer>
 *       every TCP, UDP and SCTP entry of both families, RECORD_SIZE bytes each:
 *         0  u8   family (AF_INET 2, AF_INET6 10)
 *         1  u8   protocol (6, 17, 132)
 *         2  u8   TCP's or SCTP's conntrack state number; NO_STATE when none
 *         3  u8   0
 *         4  u16  original source port, 6 original destination port,
 *         8  u16  reply source port, 10 reply destination port (big-endian)
 *        12  16B  original source, 28 original destination, 44 reply source,
 *        60  16B  reply destination (an IPv4 address in the first 4 bytes)
 *   remove(protocol, src, dst, dport): Promise<number>
 *       deletes every entry whose original tuple has this protocol number,
 *       these addresses (Buffers of 4 or 16 bytes) and destination port,
 *       whatever its source port: a dump the kernel filters (CTA_FILTER,
 *       Linux 5.8; an older kernel ignores it) and this code filters again,
 *       then one IPCTNL_MSG_CT_DELETE per entry by its exact original
 *       tuple, zone and id, sent in batches. Answers how many were deleted; an
 *       entry gone meanwhile (ENOENT) is not an error.
 *
 * The socket is opened on the calling (JavaScript) thread before the work is
 * queued: a netlink socket belongs to the network namespace of the thread that
 * made it, so the table is the one of the caller's netns, whatever the pool
 * thread's. Failures reject with an Error carrying `code` and `errno`
 * (../common/errno-error.h).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <linux/netfilter/nf_conntrack_common.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_conntrack.h>
#include <linux/netlink.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <node_api.h>

#include "../common/errno-error.h"
#include "../common/netlink-message.h"
#include "../common/netlink-socket.h"
#include "../common/pin-library.h"

/* The kernel's CTA_FILTER_F_* flags (net/netfilter/nf_internals.h, not in the uapi headers). */
#define FILTER_IP_SRC (1u << 0)
#define FILTER_IP_DST (1u << 1)
#define FILTER_PROTO_NUM (1u << 3)
#define FILTER_PROTO_DST_PORT (1u << 5)

#define RECORD_SIZE 76
#define NO_STATE 255
/* A dump's datagrams are at most 32 KiB. */
#define RECV_BUFFER_SIZE (64 * 1024)
/* Deletions sent in one sendmsg; their acks must fit the socket's receive buffer. */
#define DELETE_BATCH 64

typedef struct {
  uint8_t family, protocol;
  uint8_t src[16], dst[16];
  uint16_t sport, dport; /* network order */
  int ok;                /* addresses, protocol and both ports were present */
} tuple_t;

/* ------------------------------------------------------------------ attributes */

static void parse_attrs(const void *data, size_t len, const struct nlattr **tb, int max) {
  memset(tb, 0, sizeof(*tb) * (size_t)(max + 1));
  const unsigned char *p = data;
  while (len >= NLA_HDRLEN) {
    const struct nlattr *a = (const struct nlattr *)p;
    if (a->nla_len < NLA_HDRLEN || a->nla_len > len) break;
    int type = a->nla_type & NLA_TYPE_MASK;
    if (type <= max) tb[type] = a;
    size_t step = NLA_ALIGN(a->nla_len);
    if (step >= len) break;
    p += step;
    len -= step;
  }
}

static const void *attr_data(const struct nlattr *a) { return (const unsigned char *)a + NLA_HDRLEN; }
static size_t attr_len(const struct nlattr *a) { return a->nla_len - NLA_HDRLEN; }

static void parse_nested(const struct nlattr *a, const struct nlattr **tb, int max) {
  parse_attrs(attr_data(a), attr_len(a), tb, max);
}

static void copy_addr(const struct nlattr *a, uint8_t *out, size_t want) {
  if (a && attr_len(a) >= want) memcpy(out, attr_data(a), want);
}

static int get_u16(const struct nlattr *a, uint16_t *out) {
  if (!a || attr_len(a) < 2) return 0;
  memcpy(out, attr_data(a), 2);
  return 1;
}

/* A CTA_TUPLE_ORIG or CTA_TUPLE_REPLY of a family. */
static void parse_tuple(const struct nlattr *attr, uint8_t family, tuple_t *t) {
  memset(t, 0, sizeof *t);
  t->family = family;
  if (!attr) return;
  const struct nlattr *tb[CTA_TUPLE_MAX + 1], *ip[CTA_IP_MAX + 1], *proto[CTA_PROTO_MAX + 1];
  parse_nested(attr, tb, CTA_TUPLE_MAX);
  if (!tb[CTA_TUPLE_IP] || !tb[CTA_TUPLE_PROTO]) return;
  parse_nested(tb[CTA_TUPLE_IP], ip, CTA_IP_MAX);
  parse_nested(tb[CTA_TUPLE_PROTO], proto, CTA_PROTO_MAX);
  const struct nlattr *src = family == AF_INET ? ip[CTA_IP_V4_SRC] : ip[CTA_IP_V6_SRC];
  const struct nlattr *dst = family == AF_INET ? ip[CTA_IP_V4_DST] : ip[CTA_IP_V6_DST];
  size_t alen = family == AF_INET ? 4 : 16;
  if (!src || !dst || !proto[CTA_PROTO_NUM] || attr_len(proto[CTA_PROTO_NUM]) < 1) return;
  copy_addr(src, t->src, alen);
  copy_addr(dst, t->dst, alen);
  t->protocol = *(const uint8_t *)attr_data(proto[CTA_PROTO_NUM]);
  t->ok = get_u16(proto[CTA_PROTO_SRC_PORT], &t->sport) && get_u16(proto[CTA_PROTO_DST_PORT], &t->dport);
}

static int tracked_protocol(uint8_t p) {
  return p == IPPROTO_TCP || p == IPPROTO_UDP || p == IPPROTO_SCTP;
}

static uint8_t state_of(const struct nlattr *protoinfo, uint8_t protocol) {
  if (!protoinfo) return NO_STATE;
  const struct nlattr *tb[CTA_PROTOINFO_MAX + 1];
  parse_nested(protoinfo, tb, CTA_PROTOINFO_MAX);
  if (protocol == IPPROTO_TCP && tb[CTA_PROTOINFO_TCP]) {
    const struct nlattr *in[CTA_PROTOINFO_TCP_MAX + 1];
    parse_nested(tb[CTA_PROTOINFO_TCP], in, CTA_PROTOINFO_TCP_MAX);
    const struct nlattr *s = in[CTA_PROTOINFO_TCP_STATE];
    if (s && attr_len(s) >= 1) return *(const uint8_t *)attr_data(s);
  }
  if (protocol == IPPROTO_SCTP && tb[CTA_PROTOINFO_SCTP]) {
    const struct nlattr *in[CTA_PROTOINFO_SCTP_MAX + 1];
    parse_nested(tb[CTA_PROTOINFO_SCTP], in, CTA_PROTOINFO_SCTP_MAX);
    const struct nlattr *s = in[CTA_PROTOINFO_SCTP_STATE];
    if (s && attr_len(s) >= 1) return *(const uint8_t *)attr_data(s);
  }
  return NO_STATE;
}

/* ------------------------------------------------------------------ messages */

static void put_header(bytes_t *b, uint16_t type, uint16_t flags, uint32_t seq, uint8_t family) {
  struct nlmsghdr *h = (struct nlmsghdr *)(b->data + b->len);
  memset(h, 0, NLMSG_HDRLEN + sizeof(struct nfgenmsg));
  h->nlmsg_len = NLMSG_HDRLEN + sizeof(struct nfgenmsg);
  h->nlmsg_type = (NFNL_SUBSYS_CTNETLINK << 8) | type;
  h->nlmsg_flags = flags;
  h->nlmsg_seq = seq;
  struct nfgenmsg *g = (struct nfgenmsg *)((unsigned char *)h + NLMSG_HDRLEN);
  g->nfgen_family = family;
  g->version = NFNETLINK_V0;
  b->len += NLMSG_ALIGN(h->nlmsg_len);
}

/* Appends a copy of an attribute received (tuple, zone, id) to the message at msg. */
static void copy_attr(bytes_t *b, size_t msg, const struct nlattr *a) {
  size_t n = NLA_ALIGN(a->nla_len);
  memcpy(b->data + b->len, a, a->nla_len);
  memset(b->data + b->len + a->nla_len, 0, n - a->nla_len);
  b->len += n;
  ((struct nlmsghdr *)(b->data + msg))->nlmsg_len = (uint32_t)(b->len - msg);
}

static int send_all(int fd, const void *data, size_t len) {
  struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
  ssize_t sent;
  do sent = sendto(fd, data, len, 0, (struct sockaddr *)&kernel, sizeof kernel);
  while (sent < 0 && errno == EINTR);
  return sent < 0 ? errno : 0;
}

/* One datagram from the kernel; answers its length, or -errno. */
static ssize_t recv_one(int fd, unsigned char *buf) {
  for (;;) {
    struct sockaddr_nl from;
    struct iovec iov = {.iov_base = buf, .iov_len = RECV_BUFFER_SIZE};
    struct msghdr mh = {.msg_name = &from, .msg_namelen = sizeof from, .msg_iov = &iov, .msg_iovlen = 1};
    ssize_t got = recvmsg(fd, &mh, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      return -errno;
    }
    if (mh.msg_flags & MSG_TRUNC) return -EMSGSIZE;
    if (from.nl_pid != 0) continue; /* only the kernel talks to us */
    return got;
  }
}

typedef void (*entry_fn)(void *ctx, uint8_t family, const struct nlattr **tb);

/*
 * Sends a dump request and hands each entry's attributes to fn, up to the
 * NLMSG_DONE of its sequence number. Answers 0 or an errno, with what failed.
 */
static int dump(int fd, bytes_t *req, entry_fn fn, void *ctx, const char **what) {
  uint32_t seq = ((struct nlmsghdr *)req->data)->nlmsg_seq;
  int err = send_all(fd, req->data, req->len);
  if (err) {
    *what = "ctnetlink sendmsg";
    return err;
  }
  unsigned char *buf = malloc(RECV_BUFFER_SIZE);
  if (!buf) {
    *what = "ctnetlink recv buffer";
    return ENOMEM;
  }
  int done = 0;
  while (!done && !err) {
    ssize_t got = recv_one(fd, buf);
    if (got < 0) {
      err = (int)-got;
      *what = "ctnetlink recvmsg";
      break;
    }
    int remaining = (int)got;
    for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, remaining);
         h = NLMSG_NEXT(h, remaining)) {
      if (h->nlmsg_seq != seq) continue;
      if (h->nlmsg_type == NLMSG_DONE || h->nlmsg_type == NLMSG_ERROR) {
        int code = 0;
        if (h->nlmsg_len >= NLMSG_HDRLEN + sizeof(int)) memcpy(&code, NLMSG_DATA(h), sizeof code);
        if (code < 0) {
          err = -code;
          *what = "ctnetlink dump";
        }
        done = 1;
        break;
      }
      if ((h->nlmsg_type >> 8) != NFNL_SUBSYS_CTNETLINK) continue;
      if (h->nlmsg_len < NLMSG_HDRLEN + sizeof(struct nfgenmsg)) continue;
      const struct nfgenmsg *g = NLMSG_DATA(h);
      if (g->nfgen_family != AF_INET && g->nfgen_family != AF_INET6) continue;
      const struct nlattr *tb[CTA_MAX + 1];
      size_t off = NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(struct nfgenmsg));
      parse_attrs((const unsigned char *)h + off, h->nlmsg_len - off, tb, CTA_MAX);
      fn(ctx, g->nfgen_family, tb);
    }
  }
  free(buf);
  return err;
}

/* ------------------------------------------------------------------ requests */

enum op { OP_LIST, OP_REMOVE };

typedef struct {
  napi_async_work work;
  napi_deferred deferred;
  enum op op;
  int fd;
  /* remove: the group */
  tuple_t group;
  /* list: the records; remove: the delete messages */
  bytes_t out;
  uint32_t matched, removed;
  int err;
  const char *what;
} request_t;

static void add_record(void *ctx, uint8_t family, const struct nlattr **tb) {
  request_t *req = ctx;
  if (req->err) return;
  tuple_t o, r;
  parse_tuple(tb[CTA_TUPLE_ORIG], family, &o);
  if (!o.ok || !tracked_protocol(o.protocol)) return;
  parse_tuple(tb[CTA_TUPLE_REPLY], family, &r);
  if (!r.ok) return;
  if ((req->err = bytes_reserve(&req->out, RECORD_SIZE))) {
    req->what = "conntrack records";
    return;
  }
  unsigned char *p = req->out.data + req->out.len;
  memset(p, 0, RECORD_SIZE);
  p[0] = family;
  p[1] = o.protocol;
  p[2] = state_of(tb[CTA_PROTOINFO], o.protocol);
  memcpy(p + 4, &o.sport, 2);
  memcpy(p + 6, &o.dport, 2);
  memcpy(p + 8, &r.sport, 2);
  memcpy(p + 10, &r.dport, 2);
  memcpy(p + 12, o.src, 16);
  memcpy(p + 28, o.dst, 16);
  memcpy(p + 44, r.src, 16);
  memcpy(p + 60, r.dst, 16);
  req->out.len += RECORD_SIZE;
}

static int in_group(const tuple_t *g, const tuple_t *t) {
  size_t alen = g->family == AF_INET ? 4 : 16;
  return t->ok && t->family == g->family && t->protocol == g->protocol && t->dport == g->dport &&
         memcmp(t->src, g->src, alen) == 0 && memcmp(t->dst, g->dst, alen) == 0;
}

/* A delete message for each entry of the group: its original tuple, zone and id as dumped. */
static void add_delete(void *ctx, uint8_t family, const struct nlattr **tb) {
  request_t *req = ctx;
  if (req->err) return;
  tuple_t o;
  parse_tuple(tb[CTA_TUPLE_ORIG], family, &o);
  if (!in_group(&req->group, &o)) return;
  size_t need = NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(struct nfgenmsg)) + NLA_ALIGN(tb[CTA_TUPLE_ORIG]->nla_len) +
                (tb[CTA_ZONE] ? NLA_ALIGN(tb[CTA_ZONE]->nla_len) : 0) +
                (tb[CTA_ID] ? NLA_ALIGN(tb[CTA_ID]->nla_len) : 0);
  if ((req->err = bytes_reserve(&req->out, need))) {
    req->what = "ctnetlink delete messages";
    return;
  }
  size_t msg = req->out.len;
  put_header(&req->out, IPCTNL_MSG_CT_DELETE, NLM_F_REQUEST | NLM_F_ACK, 0, family);
  copy_attr(&req->out, msg, tb[CTA_TUPLE_ORIG]);
  if (tb[CTA_ZONE]) copy_attr(&req->out, msg, tb[CTA_ZONE]);
  if (tb[CTA_ID]) copy_attr(&req->out, msg, tb[CTA_ID]);
  req->matched++;
}

/*
 * The dump request; with a filter, the kernel sends only the entries of its
 * protocol and destination port, and for IPv4 of its addresses. Not for IPv6:
 * the kernel's CTA_FILTER compares IPv6 addresses inverted (it leaves out the
 * entries whose addresses are equal, `!ipv6_addr_cmp` in
 * ctnetlink_filter_match_tuple, still in 6.18), so those are compared here.
 */
static int dump_request(bytes_t *b, uint8_t family, const tuple_t *filter) {
  if (bytes_reserve(b, 512)) return ENOMEM;
  put_header(b, IPCTNL_MSG_CT_GET, NLM_F_REQUEST | NLM_F_DUMP, 1, family);
  if (!filter) return 0;
  uint32_t flags = FILTER_PROTO_NUM | FILTER_PROTO_DST_PORT;
  size_t tuple = put_attr(b, 0, CTA_TUPLE_ORIG | NLA_F_NESTED, NULL, 0);
  if (family == AF_INET) {
    flags |= FILTER_IP_SRC | FILTER_IP_DST;
    size_t ip = put_attr(b, 0, CTA_TUPLE_IP | NLA_F_NESTED, NULL, 0);
    put_attr(b, 0, CTA_IP_V4_SRC, filter->src, 4);
    put_attr(b, 0, CTA_IP_V4_DST, filter->dst, 4);
    end_nest(b, ip);
  }
  size_t proto = put_attr(b, 0, CTA_TUPLE_PROTO | NLA_F_NESTED, NULL, 0);
  put_attr(b, 0, CTA_PROTO_NUM, &filter->protocol, 1);
  put_attr(b, 0, CTA_PROTO_DST_PORT, &filter->dport, 2);
  end_nest(b, proto);
  end_nest(b, tuple);
  size_t f = put_attr(b, 0, CTA_FILTER | NLA_F_NESTED, NULL, 0);
  put_attr(b, 0, CTA_FILTER_ORIG_FLAGS, &flags, 4);
  end_nest(b, f);
  return 0;
}

/* Sends the delete messages DELETE_BATCH at a time, each batch's acks read before the next. */
static void send_deletes(request_t *req) {
  unsigned char *buf = malloc(RECV_BUFFER_SIZE);
  if (!buf) {
    req->err = ENOMEM;
    req->what = "ctnetlink recv buffer";
    return;
  }
  uint32_t seq = 2; /* 1 was the dump's */
  size_t at = 0;
  int first_err = 0;
  while (at < req->out.len && !req->err) {
    /* Number the next batch's messages; a message's ack carries its number. */
    size_t start = at;
    uint32_t from = seq, count = 0;
    while (at < req->out.len && count < DELETE_BATCH) {
      struct nlmsghdr *h = (struct nlmsghdr *)(req->out.data + at);
      h->nlmsg_seq = seq++;
      at += NLMSG_ALIGN(h->nlmsg_len);
      count++;
    }
    int err = send_all(req->fd, req->out.data + start, at - start);
    if (err) {
      req->err = err;
      req->what = "ctnetlink sendmsg";
      break;
    }
    uint32_t acked = 0;
    while (acked < count) {
      ssize_t got = recv_one(req->fd, buf);
      if (got < 0) {
        req->err = (int)-got;
        req->what = "ctnetlink recvmsg";
        break;
      }
      int remaining = (int)got;
      for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, remaining);
           h = NLMSG_NEXT(h, remaining)) {
        if (h->nlmsg_type != NLMSG_ERROR || h->nlmsg_seq < from || h->nlmsg_seq >= from + count)
          continue;
        acked++;
        int code = 0;
        if (h->nlmsg_len >= NLMSG_HDRLEN + sizeof(int)) memcpy(&code, NLMSG_DATA(h), sizeof code);
        if (code == 0) req->removed++;
        else if (code != -ENOENT && !first_err) first_err = -code;
      }
    }
  }
  free(buf);
  if (!req->err && first_err) {
    req->err = first_err;
    req->what = "ctnetlink delete";
  }
}

/* One dump into req; req->err is the first failure, the kernel's or a callback's. */
static void run_dump(request_t *req, bytes_t *msg, uint8_t family, const tuple_t *filter, entry_fn fn) {
  if (dump_request(msg, family, filter)) {
    req->err = ENOMEM;
    req->what = "ctnetlink request";
    return;
  }
  const char *what = NULL;
  int err = dump(req->fd, msg, fn, req, &what);
  if (err && !req->err) {
    req->err = err;
    req->what = what;
  }
}

static void execute(napi_env env, void *data) {
  (void)env;
  request_t *req = data;
  bytes_t msg = {0};
  if (req->op == OP_LIST) {
    run_dump(req, &msg, AF_UNSPEC, NULL, add_record);
  } else {
    run_dump(req, &msg, req->group.family, &req->group, add_delete);
    /* A kernel that knows CTA_FILTER but refuses this one: the whole table, filtered here. */
    if (req->err == EINVAL || req->err == EOPNOTSUPP) {
      msg.len = 0;
      req->out.len = 0;
      req->matched = 0;
      req->err = 0;
      run_dump(req, &msg, req->group.family, NULL, add_delete);
    }
    if (!req->err) send_deletes(req);
  }
  free(msg.data);
  /*
   * Closed here, on the pool thread: closing a NETLINK_NETFILTER socket
   * makes nf_tables flush the objects a transaction deleted, which waits
   * for an RCU grace period (12-22 ms after any nftables element delete on
   * Linux 6.18), and on the JavaScript thread that stalls every pod's setup.
   */
  close(req->fd);
  req->fd = -1;
}

static void complete(napi_env env, napi_status status, void *data) {
  request_t *req = data;
  napi_value result;
  if (status != napi_ok && !req->err) {
    req->err = ECANCELED;
    req->what = "ctnetlink request";
  }
  if (req->err) {
    napi_reject_deferred(env, req->deferred, errno_error(env, req->err, req->what));
  } else if (req->op == OP_LIST) {
    void *copy;
    if (napi_create_buffer_copy(env, req->out.len, req->out.len ? (void *)req->out.data : (void *)"",
                                &copy, &result) == napi_ok)
      napi_resolve_deferred(env, req->deferred, result);
    else
      napi_reject_deferred(env, req->deferred, errno_error(env, ENOMEM, "conntrack records"));
  } else {
    napi_create_uint32(env, req->removed, &result);
    napi_resolve_deferred(env, req->deferred, result);
  }
  if (req->fd >= 0) close(req->fd); /* execute never ran */
  napi_delete_async_work(env, req->work);
  free(req->out.data);
  free(req);
}

/* Queues the request, or rejects it at once when no socket can be had. */
static napi_value start(napi_env env, request_t *req, const char *name) {
  napi_value promise, resource;
  napi_create_promise(env, &req->deferred, &promise);
  req->fd = open_netlink_socket(NETLINK_NETFILTER);
  if (req->fd < 0) {
    napi_reject_deferred(env, req->deferred, errno_error(env, errno, "ctnetlink socket"));
    free(req);
    return promise;
  }
  napi_create_string_utf8(env, name, NAPI_AUTO_LENGTH, &resource);
  napi_create_async_work(env, NULL, resource, execute, complete, req, &req->work);
  napi_queue_async_work(env, req->work);
  return promise;
}

static napi_value js_list(napi_env env, napi_callback_info info) {
  (void)info;
  request_t *req = calloc(1, sizeof *req);
  if (!req) {
    napi_throw(env, errno_error(env, ENOMEM, "ctnetlink request"));
    return NULL;
  }
  req->op = OP_LIST;
  return start(env, req, "cni_driver_conntrack.list");
}

/* Reads a 4- or 16-byte address; answers its family, or 0. */
static uint8_t get_addr(napi_env env, napi_value v, uint8_t *out) {
  bool is_buffer = false;
  napi_is_buffer(env, v, &is_buffer);
  if (!is_buffer) return 0;
  void *data;
  size_t len;
  napi_get_buffer_info(env, v, &data, &len);
  if (len != 4 && len != 16) return 0;
  memcpy(out, data, len);
  return len == 4 ? AF_INET : AF_INET6;
}

static napi_value js_remove(napi_env env, napi_callback_info info) {
  size_t argc = 4;
  napi_value argv[4];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  uint32_t protocol = 0, dport = 0;
  tuple_t g = {0};
  uint8_t src_family = argc == 4 ? get_addr(env, argv[1], g.src) : 0;
  uint8_t dst_family = argc == 4 ? get_addr(env, argv[2], g.dst) : 0;
  if (argc < 4 || napi_get_value_uint32(env, argv[0], &protocol) != napi_ok ||
      napi_get_value_uint32(env, argv[3], &dport) != napi_ok || !tracked_protocol((uint8_t)protocol) ||
      protocol > 255 || dport > 65535 || !src_family || src_family != dst_family) {
    napi_throw_type_error(env, NULL,
                          "remove(protocol, src, dst, dport): a TCP, UDP or SCTP protocol number, two "
                          "addresses of one family (Buffers of 4 or 16 bytes), a port");
    return NULL;
  }
  request_t *req = calloc(1, sizeof *req);
  if (!req) {
    napi_throw(env, errno_error(env, ENOMEM, "ctnetlink request"));
    return NULL;
  }
  req->op = OP_REMOVE;
  req->group = g;
  req->group.family = src_family;
  req->group.protocol = (uint8_t)protocol;
  req->group.dport = htons((uint16_t)dport);
  req->group.ok = 1;
  return start(env, req, "cni_driver_conntrack.remove");
}

NAPI_MODULE_INIT(/* napi_env env, napi_value exports */) {
  pin_library((void *)js_list);
  napi_property_descriptor props[] = {
      {"list", NULL, js_list, NULL, NULL, NULL, napi_enumerable, NULL},
      {"remove", NULL, js_remove, NULL, NULL, NULL, napi_enumerable, NULL},
  };
  napi_define_properties(env, exports, sizeof props / sizeof props[0], props);
  return exports;
}
