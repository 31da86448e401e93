/**
 * What a pod attachment needs of the kernel, as one object: the seam through
 * which the built-in plugin takes its plumbing, so that its logic is tested
 * with a fake as libcni tests through its invoke.Exec seam. Two
 * implementations reach the kernel: rtnetlink in-process (netlink/index.ts,
 * RtnetlinkPlumbing) and `ip -batch` execs (iproute2.ts, iproute2Plumbing),
 * with the same semantics; which one a process uses is chosen once at start
 * (backend.ts, from lifecycle/backends.ts) and handed to what uses it.
 */
import { IpCommandError } from "./ip-batch.js";
import type * as Pod from "./pod-interface-types.js";

export interface PodPlumbing {
  /**
   * Makes sure the bridge exists, is up and carries each gateway address
   * (idempotent). Several networks may share one bridge, each adding its gateway.
   * `netfilter` (default true): its bridged IP traffic through the IP hooks
   * (br_netfilter's nf_call_iptables), which kube-proxy needs.
   */
  ensureBridge(
    name: string,
    gatewayCidrs: readonly string[],
    mtu?: number,
    netfilter?: boolean,
  ): Promise<void>;
  /** The names of the links enslaved to the bridge; [] when it does not exist. */
  listBridgePorts(name: string): Promise<string[]>;
  /**
   * Phase 1: the veth pair, its host end up (on the bridge when asked) and its
   * container end, named as the runtime asked, inside the pod's netns, without
   * addresses, so it can run while IPAM is still choosing them. On failure
   * nothing is left behind.
   */
  createVethPair(spec: Pod.VethSpec, host: Pod.HostAttachment): Promise<void>;
  /**
   * createVethPair, except that a host end of the same name left by another
   * sandbox is removed and the pair made again (replacingStaleHostEnd).
   * Returns whether a stale host end was replaced.
   */
  createVethPairReplacingStale(spec: Pod.VethSpec, host: Pod.HostAttachment): Promise<boolean>;
  /**
   * Phase 2, once IPAM has answered: addresses, the interface and lo up,
   * routes. The caller removes the pair if it fails. Answers the `ifNoDefault`
   * routes left out: the pod had one already.
   */
  configureContainerSide(spec: Pod.ContainerSideSpec): Promise<Pod.PodRoute[]>;
  /**
   * Idempotent teardown. Deleting either end of a veth deletes both at once, so
   * the container end is removed when the netns is still there; otherwise the
   * host end is removed explicitly, when its MAC is still the one ADD made.
   * Returns whether anything was removed.
   */
  deletePodInterface(ref: Pod.PodInterfaceRef): Promise<boolean>;
  /** Removes one host link by name; missing is fine. */
  deleteHostLink(name: string): Promise<void>;
  /** A link in the host (or in `netns`), undefined when it does not exist. */
  showLink(name: string, netns?: string): Promise<Pod.LinkInfo | undefined>;
  /** What the container end looks like now, for CHECK; undefined when it is missing. */
  inspectPodInterface(
    netns: string,
    ifName: string,
    withIpv6Routes: boolean,
  ): Promise<Pod.PodInterfaceState | undefined>;
}

/**
 * createVethPairReplacingStale, the same for every implementation. The host
 * name comes from the pod's identity, so an older sandbox of the same pod
 * whose DEL has not come yet (or never will: a runtime that lost it) would
 * otherwise fail every new sandbox with "File exists", and the pod would never
 * start. The newest sandbox wins, as kubelet wants it; the older one's DEL
 * later spares the new link (it checks the MAC). A name taken inside the pod's
 * own netns is not stale: that failure stands.
 */
export async function replacingStaleHostEnd(
  plumbing: Pick<PodPlumbing, "createVethPair" | "showLink" | "deleteHostLink">,
  spec: Pod.VethSpec,
  host: Pod.HostAttachment,
): Promise<boolean> {
  try {
    await plumbing.createVethPair(spec, host);
    return false;
  } catch (err) {
    if (!(err instanceof IpCommandError) || !err.exists) throw err;
    if (!(await plumbing.showLink(spec.hostIfName))) throw err;
    if (await plumbing.showLink(spec.ifName, spec.netns)) throw err;
    await plumbing.deleteHostLink(spec.hostIfName);
    await plumbing.createVethPair(spec, host);
    return true;
  }
}
