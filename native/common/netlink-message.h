/*
 * Netlink messages as both netfilter addons build them: a growing byte
 * buffer, attributes appended to the message being written, nests closed.
 */
#ifndef CNI_DRIVER_NETLINK_MESSAGE_H
#define CNI_DRIVER_NETLINK_MESSAGE_H

#include <errno.h>
#include <linux/netlink.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  unsigned char *data;
  size_t len, cap;
} bytes_t;

/* Room for `more` bytes past len: 0, or ENOMEM. */
static inline int bytes_reserve(bytes_t *b, size_t more) {
  if (b->len + more <= b->cap) return 0;
  size_t cap = b->cap ? b->cap : 64 * 1024;
  while (cap < b->len + more) cap *= 2;
  unsigned char *grown = realloc(b->data, cap);
  if (!grown) return ENOMEM;
  b->data = grown;
  b->cap = cap;
  return 0;
}

/*
 * Appends an attribute to the message starting at msg (room reserved);
 * answers its offset, for nesting.
 */
static inline size_t put_attr(bytes_t *b, size_t msg, uint16_t type, const void *data, size_t len) {
  size_t off = b->len;
  struct nlattr *a = (struct nlattr *)(b->data + off);
  a->nla_type = type;
  a->nla_len = (uint16_t)(NLA_HDRLEN + len);
  if (len) memcpy((unsigned char *)a + NLA_HDRLEN, data, len);
  memset((unsigned char *)a + NLA_HDRLEN + len, 0, NLA_ALIGN(len) - len);
  b->len += NLA_HDRLEN + NLA_ALIGN(len);
  ((struct nlmsghdr *)(b->data + msg))->nlmsg_len = (uint32_t)(b->len - msg);
  return off;
}

/* Closes a nest opened with put_attr(b, msg, type | NLA_F_NESTED, NULL, 0). */
static inline void end_nest(bytes_t *b, size_t nest) {
  ((struct nlattr *)(b->data + nest))->nla_len = (uint16_t)(b->len - nest);
}

#endif
