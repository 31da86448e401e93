#include "deletion.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "text.h"

/* ---- the container interface ---- */

/* RTM_DELLINK by name in the current netns: 0, or the kernel's errno. Deleting one
 * end of a veth pair deletes the other, so the host side goes with it. */
static int delete_link(const char *ifname) {
  int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  if (fd < 0) return errno;
  struct {
    struct nlmsghdr nh;
    struct ifinfomsg ifi;
    char attrs[64];
  } req;
  memset(&req, 0, sizeof req);
  size_t name_len = strlen(ifname) + 1;
  struct rtattr *rta = (struct rtattr *)req.attrs;
  rta->rta_type = IFLA_IFNAME;
  rta->rta_len = (unsigned short)RTA_LENGTH(name_len);
  memcpy(RTA_DATA(rta), ifname, name_len);
  req.nh.nlmsg_len = (unsigned)(NLMSG_LENGTH(sizeof req.ifi) + RTA_ALIGN(rta->rta_len));
  req.nh.nlmsg_type = RTM_DELLINK;
  req.nh.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
  req.nh.nlmsg_seq = 1;
  req.ifi.ifi_family = AF_UNSPEC;
  struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
  int err = 0;
  if (sendto(fd, &req, req.nh.nlmsg_len, 0, (struct sockaddr *)&kernel, sizeof kernel) < 0) {
    err = errno;
  } else {
    char buf[4096];
    /* The ack: an NLMSG_ERROR whose error is 0 on success. */
    struct timeval tv = {.tv_sec = 5};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n < 0) {
      err = errno;
    } else {
      struct nlmsghdr *nh = (struct nlmsghdr *)buf;
      if (NLMSG_OK(nh, (size_t)n) && nh->nlmsg_type == NLMSG_ERROR)
        err = -((struct nlmsgerr *)NLMSG_DATA(nh))->error;
    }
  }
  close(fd);
  return err;
}

void remove_container_interface(const char *netns, const char *ifname, struct teardown_outcome *out) {
  memset(out, 0, sizeof *out);
  if (!netns || !*netns) {
    out->reason = "no netns";
    return;
  }
  int ns = open(netns, O_RDONLY | O_CLOEXEC);
  if (ns < 0) {
    if (errno == ENOENT) {
      out->reason = "netns gone";
    } else {
      out->reason = "failed";
      out->detail = xprintf("open %s: %s", netns, strerror(errno));
    }
    return;
  }
  /* The shim is single-threaded and does nothing in the host's netns afterwards
   * but write files, which no netns affects. */
  if (setns(ns, CLONE_NEWNET) < 0) {
    int e = errno;
    close(ns);
    /* Not a netns any more: an unmounted netns path is an empty file. */
    out->reason = e == EINVAL ? "netns gone" : "failed";
    if (e != EINVAL) out->detail = xprintf("setns %s: %s", netns, strerror(e));
    return;
  }
  close(ns);
  int err = delete_link(ifname);
  if (err == 0)
    out->removed = true;
  else if (err == ENODEV)
    out->reason = "no such interface";
  else {
    out->reason = "failed";
    out->detail = xprintf("deleting %s: %s", ifname, strerror(err));
  }
}

/* ---- the deletion queue ---- */

#define DELETION_QUEUE_DIR "deletion-queue"

static int mkdir_p(const char *path, mode_t mode) {
  char *p = xstrdup(path);
  for (char *s = p + 1; *s; s++) {
    if (*s != '/') continue;
    *s = '\0';
    if (mkdir(p, 0755) < 0 && errno != EEXIST) {
      free(p);
      return -1;
    }
    *s = '/';
  }
  int rc = mkdir(p, mode);
  free(p);
  return rc < 0 && errno != EEXIST ? -1 : 0;
}

static char *record_json(const struct deletion_record *r) {
  struct text t = {0};
  text_adds(&t, "{\n  \"kind\": \"cniDriverDeletionV1\",\n  \"network\": ");
  text_add_json_string(&t, r->network, strlen(r->network));
  text_adds(&t, ",\n  \"containerId\": ");
  text_add_json_string(&t, r->container_id, strlen(r->container_id));
  text_adds(&t, ",\n  \"ifName\": ");
  text_add_json_string(&t, r->ifname, strlen(r->ifname));
  text_adds(&t, ",\n  \"netns\": ");
  text_add_json_string(&t, r->netns, strlen(r->netns));
  text_adds(&t, ",\n  \"cniArgs\": [");
  for (size_t i = 0; i < r->arg_count; i++) {
    text_adds(&t, i ? ",\n    [\n      " : "\n    [\n      ");
    text_add_json_string(&t, r->args[i].key, strlen(r->args[i].key));
    text_adds(&t, ",\n      ");
    text_add_json_string(&t, r->args[i].value, strlen(r->args[i].value));
    text_adds(&t, "\n    ]");
  }
  text_adds(&t, r->arg_count ? "\n  ],\n  \"cniVersion\": " : "],\n  \"cniVersion\": ");
  text_add_json_string(&t, r->cni_version, strlen(r->cni_version));
  text_printf(&t, ",\n  \"queuedAtUnixMs\": %lld\n}\n", now_unix_ms());
  return text_take(&t);
}

char *queue_deletion(const char *state_dir, const struct deletion_record *r, char **why) {
  char *dir = xprintf("%s/%s", state_dir, DELETION_QUEUE_DIR);
  char *name = xprintf("%s-%s-%s.json", *r->network ? r->network : "_default", r->container_id,
                       r->ifname);
  char *path = xprintf("%s/%s", dir, name);
  /* Never ends in .json: a replay never reads a record being written. */
  char *tmp = xprintf("%s/.%s.%d.tmp", dir, name, (int)getpid());
  char *data = record_json(r);
  const char *step = "mkdir";
  const char *what = dir;
  int fd = -1;
  bool ok = false;
  if (mkdir_p(dir, 0700) < 0) goto out;
  step = "open";
  what = tmp;
  fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) goto out;
  step = "write";
  for (size_t done = 0, len = strlen(data); done < len;) {
    ssize_t n = write(fd, data + done, len - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      goto out;
    }
    done += (size_t)n;
  }
  step = "fsync";
  if (fsync(fd) < 0) goto out;
  step = "close";
  if (close(fd) < 0) {
    fd = -1;
    goto out;
  }
  fd = -1;
  step = "rename";
  what = path;
  if (rename(tmp, path) < 0) goto out;
  step = "fsync";
  what = dir;
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0 || fsync(dfd) < 0) {
    if (dfd >= 0) close(dfd);
    goto out;
  }
  close(dfd);
  ok = true;
out:
  if (!ok) {
    int e = errno;
    *why = xprintf("%s %s: %s", step, what, strerror(e));
    if (fd >= 0) close(fd);
    unlink(tmp);
  }
  free(dir);
  free(name);
  free(tmp);
  free(data);
  if (!ok) {
    free(path);
    return NULL;
  }
  return path;
}
