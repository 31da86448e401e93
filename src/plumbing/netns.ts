/** Network namespaces named by path, the way CNI hands them over. */
import { statfsSync } from "node:fs";

/** nsfs's magic (linux/magic.h): what a live netns file (a bind mount, /proc/<pid>/ns/net) is on. */
const NSFS_MAGIC = 0x6e736673;

/**
 * Whether the netns path still names a network namespace. DEL must tolerate a
 * vanished one: CRI-O sends a path that is gone, containerd may send "", and a
 * namespace unmounted but not yet unlinked leaves a plain empty file, which
 * cannot be entered (setns: EINVAL) and must count as gone too.
 */
export function netnsExists(path: string | undefined): boolean {
  if (!path) return false;
  try {
    return statfsSync(path).type === NSFS_MAGIC;
  } catch {
    return false;
  }
}

/** The name of a netns under /run/netns (what `ip -n` takes); undefined for any other path. */
export function netnsName(path: string): string | undefined {
  return /^(?:\/var)?\/run\/netns\/([^/]+)$/.exec(path)?.[1];
}
