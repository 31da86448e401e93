/*
 * What DEL does when the driver cannot take it: removes the container interface
 * itself, and records the rest of the teardown (lease, host state, cache) in the
 * driver's deletion queue, which the driver replays at start, on a config load
 * and every little while. The record format and names are src/wire/deletion-record.ts's.
 */
#ifndef SHIM_DELETION_H
#define SHIM_DELETION_H

#include <stdbool.h>
#include <stddef.h>

#include "cni.h"

struct teardown_outcome {
  bool removed;
  const char *reason; /* "no netns", "netns gone", "no such interface", "failed" */
  char *detail;       /* for "failed" */
};

/* Deletes `ifname` inside the netns at `netns` (netlink, no exec). Never fails:
 * a netns or interface already gone is the expected case on DEL. */
void remove_container_interface(const char *netns, const char *ifname, struct teardown_outcome *out);

struct deletion_record {
  const char *network; /* "" for the driver's default */
  const char *container_id;
  const char *ifname;
  const char *netns; /* "" for none */
  const struct cni_arg *args;
  size_t arg_count;
  const char *cni_version;
};

/* Writes the record durably into <state_dir>/deletion-queue/ (made 0700): temp
 * file, fsync, rename, fsync of the directory. Returns the record's path, or NULL
 * with `why` set to the file system's error. */
char *queue_deletion(const char *state_dir, const struct deletion_record *r, char **why);

#endif
