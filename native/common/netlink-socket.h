/*
 * A netlink socket as both netlink addons open it: bound (the kernel picks
 * the port id), close-on-exec, acks capped (they do not echo the request)
 * with the kernel's extended reason when there is one, and receives bounded
 * by a timeout that only a broken exchange reaches. In the calling thread's
 * network namespace. Answers the descriptor, or -1 with errno.
 */
#ifndef CNI_DRIVER_NETLINK_SOCKET_H
#define CNI_DRIVER_NETLINK_SOCKET_H

#include <errno.h>
#include <linux/netlink.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#ifndef NETLINK_CAP_ACK
#define NETLINK_CAP_ACK 10
#endif
#ifndef NETLINK_EXT_ACK
#define NETLINK_EXT_ACK 11
#endif

#define NETLINK_RECV_TIMEOUT_SECONDS 30

static inline int open_netlink_socket(int protocol) {
  int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, protocol);
  if (fd < 0) return -1;
  struct sockaddr_nl local = {.nl_family = AF_NETLINK};
  if (bind(fd, (struct sockaddr *)&local, sizeof local) < 0) {
    int err = errno;
    close(fd);
    errno = err;
    return -1;
  }
  /* Best effort, both. */
  int one = 1;
  setsockopt(fd, SOL_NETLINK, NETLINK_EXT_ACK, &one, sizeof one);
  setsockopt(fd, SOL_NETLINK, NETLINK_CAP_ACK, &one, sizeof one);
  struct timeval tv = {.tv_sec = NETLINK_RECV_TIMEOUT_SECONDS};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

#endif
