/** Network namespaces named by path, the way CNI hands them over. */
import { statfsSync, statSync } from "node:fs";

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

/** A network namespace's identity: nsfs's device and the namespace's inode. */
export interface NetnsIdentity {
  dev: number;
  ino: number;
}

/**
 * The identity of the namespace a path names, after symlinks (stat follows
 * them, and /proc/<pid>/ns/net's magic link) and bind mounts (a mount shows
 * the namespace's own inode): two paths name the same namespace exactly when
 * their identities are equal. Undefined when nothing is there or it is not on
 * nsfs (a removed namespace's leftover file); throws when the path exists but
 * may not be looked at (EACCES, EPERM: another process's namespace the
 * kernel's ptrace rules hide), which nobody could enter either.
 */
export function netnsIdentity(path: string): NetnsIdentity | undefined {
  // Synchronous: nsfs and /proc answer from memory, and three identities per
  // call through the thread pool cost more than the syscalls themselves.
  try {
    const st = statSync(path);
    const fs = statfsSync(path);
    if (fs.type !== NSFS_MAGIC) return undefined;
    return { dev: st.dev, ino: st.ino };
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "EACCES" || code === "EPERM") throw err;
    return undefined;
  }
}
