/**
 * The host's network namespace is never a pod's. A runtime that passes the
 * node's own namespace as CNI_NETNS (a bug, a hostNetwork pod sent to CNI by
 * mistake, or a hostile caller) would otherwise get the pod's interface, an
 * address from the pod range and a default route of metric 0 put on the node
 * itself, taking over its traffic.
 *
 * Namespaces are compared by identity (nsfs device and inode), never by path:
 * the same namespace is reachable as /proc/1/ns/net, /proc/self/ns/net,
 * /proc/<pid>/ns/net, a bind mount under /run/netns, or a symlink to any of
 * them.
 */
import { CniError, ErrorCode } from "../../cni/errors.js";
import { type NetnsIdentity, netnsIdentity } from "../../plumbing/netns.js";

/** A namespace no pod may be given, and how a refusal names it. */
export interface ProtectedNetns {
  path: string;
  what: string;
}

/**
 * The driver's own namespace (with hostNetwork, the node's), and PID 1's: the
 * host's, also when the driver runs in a namespace of its own.
 */
export const HOST_NETNS: readonly ProtectedNetns[] = [
  { path: "/proc/self/ns/net", what: "the driver's own network namespace" },
  { path: "/proc/1/ns/net", what: "the network namespace of PID 1 (the host's)" },
];

export class HostNetnsGuard {
  /**
   * `protectedNetns`: the namespaces to refuse; tests point PID 1's entry at
   * a namespace of their own, so the host's is never the one at stake.
   */
  constructor(private readonly protectedNetns: readonly ProtectedNetns[] = HOST_NETNS) {}

  /**
   * Which protected namespace `netns` is, undefined when none. Looked up at
   * each call (a few stats), so nothing can go stale. A protected path the
   * driver may not look at (/proc/1 behind ptrace rules) is left out: the
   * namespace is still caught under a name that can be looked at, as the
   * driver's own (with hostNetwork, the host's is the driver's). A `netns` it
   * may not look at is refused: nothing tells it from the host's, and nothing
   * could enter it either.
   */
  async which(netns: string): Promise<ProtectedNetns | undefined> {
    if (!netns) return undefined;
    let id: NetnsIdentity | undefined;
    try {
      id = netnsIdentity(netns);
    } catch (err) {
      return { path: netns, what: `a namespace the driver may not look at (${errnoOf(err)})` };
    }
    if (!id) return undefined;
    for (const p of this.protectedNetns) {
      let ref: NetnsIdentity | undefined;
      try {
        ref = netnsIdentity(p.path);
      } catch {
        ref = undefined; // a path the driver may not look at: see above
      }
      if (ref && sameNetns(id, ref)) return p;
    }
    return undefined;
  }

  /** Throws code 4 naming the path when `netns` is a protected namespace; before anything is touched. */
  async refuse(verb: string, netns: string): Promise<void> {
    const p = await this.which(netns);
    if (p) {
      const via = p.path === netns ? "" : ` (${p.path})`;
      throw new CniError(
        ErrorCode.InvalidEnvironment,
        `${verb} refused: netns ${JSON.stringify(netns)} is ${p.what}${via}, never a pod's`,
        `CNI_NETNS=${netns}`,
      );
    }
  }
}

function errnoOf(err: unknown): string {
  return (err as NodeJS.ErrnoException).code ?? String(err);
}

function sameNetns(a: NetnsIdentity, b: NetnsIdentity): boolean {
  return a.dev === b.dev && a.ino === b.ino;
}
