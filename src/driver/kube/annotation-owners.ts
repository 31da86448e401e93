/**
 * Which attachment's MAC each pod's `midonet.org/mac-address` annotation holds.
 *
 * A pod's sandbox can be recreated under a new container id, and the runtime
 * may set up the new one before it tears down the old one: ADD A, ADD B, DEL A.
 * The annotation then holds B's MAC, and A's DEL must leave it alone; only the
 * DEL of the attachment that set it removes it.
 *
 * Who owns what is kept in memory and seeded at start from the result cache
 * (the local record of every attachment set up and not yet torn down), so a
 * restart between ADD B and DEL A does not forget it. Seeding writes nothing
 * to the API: the annotations are already what the last ADDs made them.
 */
import { podIdentityFromArgs } from "../../cni/args.js";
import type { CachedAttachment } from "../../cni/cache.js";
import { parseResult } from "../../cni/result-read.js";
import { ANNOTATED_IF_NAME, type PodRef, podInterfaceMac } from "./pod-annotations.js";

/** One attachment of a pod: the driver's attachment identity (container id + ifname). */
export interface AttachmentRef {
  containerId: string;
  ifName: string;
}

/** A pod's annotation, as the attachment that set it left it. */
export interface AnnotationOwner {
  pod: PodRef;
  attachment: AttachmentRef;
  /** The MAC the annotation holds. */
  mac: string;
}

/**
 * The owner of each pod's annotation, from the cached attachments: the pod
 * from the cached CNI_ARGS (`K8S_POD_NAMESPACE`, `K8S_POD_NAME`), the MAC from
 * the cached result, as the ADD's annotation took them. Attachments without
 * both are skipped: their ADD annotated nothing. Of several attachments of a
 * pod, the one whose file is newest (`mtimeMs`, the last ADD) owns it; one
 * without an mtime counts as oldest, and of equal mtimes the first listed
 * keeps it. One owner per pod, in the order pods are first met.
 */
export function annotationOwnersFromCache(
  entries: readonly (CachedAttachment & { mtimeMs?: number })[],
): AnnotationOwner[] {
  const best = new Map<string, { owner: AnnotationOwner; mtimeMs: number }>();
  for (const e of entries) {
    if (e.ifName !== ANNOTATED_IF_NAME) continue;
    const identity = podIdentityFromArgs(e.cniArgs ?? []);
    if (!identity.namespace || !identity.name) continue;
    const mac = cachedMac(e);
    if (!mac) continue;
    const pod = { namespace: identity.namespace, name: identity.name };
    const mtimeMs = e.mtimeMs ?? Number.NEGATIVE_INFINITY;
    const held = best.get(podKey(pod));
    if (held && held.mtimeMs >= mtimeMs) continue;
    best.set(podKey(pod), {
      owner: { pod, attachment: { containerId: e.containerId, ifName: e.ifName }, mac },
      mtimeMs,
    });
  }
  return [...best.values()].map((b) => b.owner);
}

/** The pod interface's MAC in a cached result; undefined when there is none or it does not read. */
function cachedMac(e: CachedAttachment): string | undefined {
  if (!e.result) return undefined;
  try {
    // A cached result without cniVersion reads as 0.1.0, as libcni reads it.
    return podInterfaceMac(parseResult(e.result), e.ifName);
  } catch {
    return undefined;
  }
}

const podKey = (p: PodRef): string => `${p.namespace}/${p.name}`;

/** pod → the attachment whose MAC its annotation holds. */
export class AnnotationOwners {
  private readonly owner = new Map<string, AttachmentRef>();

  /** An ADD annotated the pod: its attachment owns the annotation now. */
  claim(pod: PodRef, attachment: AttachmentRef): void {
    this.owner.set(podKey(pod), { containerId: attachment.containerId, ifName: attachment.ifName });
  }

  /**
   * A DEL of `attachment`: true when the annotation is to be removed (it owns
   * it, or nobody is known to), and then the pod has no owner any more; false
   * when another attachment of the pod owns it.
   */
  release(pod: PodRef, attachment: AttachmentRef): boolean {
    const holder = this.owner.get(podKey(pod));
    if (
      holder &&
      (holder.containerId !== attachment.containerId || holder.ifName !== attachment.ifName)
    )
      return false;
    this.owner.delete(podKey(pod));
    return true;
  }

  /** Takes owners found at start (annotationOwnersFromCache); a pod already claimed keeps its owner. */
  seed(owners: readonly AnnotationOwner[]): void {
    for (const o of owners) {
      if (!this.owner.has(podKey(o.pod))) this.claim(o.pod, o.attachment);
    }
  }

  /** The owner of a pod's annotation, if known. */
  ownerOf(pod: PodRef): AttachmentRef | undefined {
    const holder = this.owner.get(podKey(pod));
    return holder && { ...holder };
  }

  /** Pods with a known owner. */
  get size(): number {
    return this.owner.size;
  }
}
