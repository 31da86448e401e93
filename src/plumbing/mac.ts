/** The MACs the plumbing gives links: a bridge's, derived from its name; a pod's, random. */
import { randomBytes } from "node:crypto";
import { derivedMac, localUnicastMac } from "../net/mac.js";

/**
 * Whether a host link is the pod's host end the cache recorded, and so may be
 * deleted by name: only when both MACs are known and match. A newer sandbox of
 * the same pod may own the name by now, and without the recorded MAC nothing
 * tells its link from ours; ours, if it is still there, is the peer of a netns
 * that is going, and goes with it.
 */
export function hostMacStillMatches(
  recorded: string | undefined,
  current: string | undefined,
): boolean {
  return !!recorded && !!current && recorded.toLowerCase() === current.toLowerCase();
}

/**
 * The MAC a bridge is created with. A Linux bridge made without one borrows the
 * lowest MAC among its ports and changes it as ports come and go: the pods,
 * whose neighbour caches hold the gateway's old MAC, then lose the gateway for
 * the ~50 s until they look it up again. Pinned at creation, derived from the
 * name, so a bridge made again (after a reboot) keeps the MAC pods knew. A
 * kernel-datapath bridge is routed, never on an L2 segment with another node's,
 * so the same name on two nodes giving the same MAC meets nothing.
 */
export function bridgeMac(name: string): string {
  return derivedMac(`cni-driver bridge ${name}`);
}

/** A random locally administered unicast MAC. */
export function randomMac(): string {
  return localUnicastMac(randomBytes(6));
}
