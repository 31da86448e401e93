/**
 * Node connectivity of the MidoNet datapath: when a network's `midonet` plugin
 * says `"datapath": "midonet"`, the host gets its own port on that datapath,
 * as the original MidoNet CNI set up once the Node had a pod CIDR:
 *
 * - `midokube-node` in the host with the node IP, the pod CIDR's network + 2,
 *   its peer `midokube-mido` up for the agent (plumbing/node-link.ts; the names
 *   and the addressing are MidoNet's node contract, midonet/node-contract.ts);
 * - routes to driver.json's `clusterCidr` and `serviceCidr` via the gateway
 *   (network + 1) on midokube-node;
 * - `net.ipv4.ip_forward` = 1 (only in this mode: the kernel datapath leaves
 *   the host's sysctls alone);
 * - with the Kubernetes API and a node name, the Node annotated
 *   `midonet.org/mac-address` = the MAC of midokube-node (kube/node-annotation.ts).
 *
 * Applied on every config load (a pod CIDR change is one), and again every
 * `resyncMs` while a link is planned, so that a link, address or route removed
 * behind the driver's back (an operator, the MidoNet agent restarting) comes
 * back without waiting for a load; a resync that finds everything in place is
 * silent. A failure is logged, counted, makes the driver not ready with the
 * reason, and is retried with backoff until it works or the next load
 * replaces it. When a load no longer plans a link, the link this process set
 * up is removed, and with it the Node's annotation.
 */
import type pino from "pino";
import type { BackoffPolicy } from "../../common/backoff.js";
import { messageOf } from "../../common/errors.js";
import { isObject, type JsonObject } from "../../common/json.js";
import { SerialLoop } from "../../common/serial-loop.js";
import { NODE_INTERFACE, NODE_PEER_INTERFACE, podSubnetOf } from "../../midonet/node-contract.js";
import { type ParsedCidr, parseCidr } from "../../net/ip.js";
import {
  enableIpv4Forwarding,
  ensureNodeLink,
  type NodeLinkSpec,
  type NodeRoute,
  removeNodeLink,
} from "../../plumbing/node-link.js";
import { showLink } from "../../plumbing/pod-interface.js";
import { DEFAULT_MTU, MIDONET_PLUGIN_TYPE } from "../builtin/midonet/config.js";
import type { DriverConfig } from "../config/network-config.js";
import type { KubeApi } from "../kube/api.js";
import { NodeMacAnnotation } from "../kube/node-annotation.js";
import type { AnnotationWriteOutcome } from "../kube/pod-annotations.js";

// Exported for its tests only (integration/node-connectivity.test.ts).
export interface NodeLinkPlan extends Pick<NodeLinkSpec, "nodeIf" | "peerIf"> {
  /** The network whose pod CIDR the node IP comes from. */
  network: string;
  mtu: number;
  /** The pod CIDR as filled into that network's host-local range. */
  podCidr: string;
  /** The node IP with the pod CIDR's prefix (network + 2). */
  addressCidr: string;
  /** network + 1. */
  gateway: string;
  routes: NodeRoute[];
}

/** The first IPv4 subnet of a host-local ipam: the legacy `subnet`, then `ranges` in order. */
function firstV4Subnet(ipam: JsonObject): ParsedCidr | undefined {
  const candidates: unknown[] = [ipam.subnet];
  if (Array.isArray(ipam.ranges)) {
    for (const set of ipam.ranges) {
      if (Array.isArray(set)) for (const r of set) if (isObject(r)) candidates.push(r.subnet);
    }
  }
  for (const c of candidates) {
    const cidr = typeof c === "string" ? parseCidr(c) : undefined;
    if (cidr?.family === 4) return cidr;
  }
  return undefined;
}

/**
 * What the node link should be for this config: undefined when no network
 * uses the MidoNet datapath. The default network is asked first, then the
 * others in order. Throws (an Error naming the network) when the network's
 * IPAM gives no IPv4 pod CIDR to derive the node IP from.
 */
// Exported for its tests only (integration/node-connectivity.test.ts).
export function nodeLinkPlan(cfg: DriverConfig): NodeLinkPlan | undefined {
  const names = [
    cfg.defaultNetwork,
    ...[...cfg.networks.keys()].filter((n) => n !== cfg.defaultNetwork),
  ];
  for (const name of names) {
    const list = cfg.networks.get(name);
    const plugin = list?.plugins.find(
      (p) => p.type === MIDONET_PLUGIN_TYPE && p.raw.datapath === "midonet",
    );
    if (!plugin) continue;
    const ipam = plugin.raw.ipam;
    const subnet = isObject(ipam) && ipam.type === "host-local" ? firstV4Subnet(ipam) : undefined;
    if (!subnet) {
      throw new Error(
        `network ${JSON.stringify(name)} uses the midonet datapath, but its ipam has no host-local IPv4 subnet to take the node IP from`,
      );
    }
    const { cidr: podCidr, gateway, nodeIp, prefix } = podSubnetOf(subnet);
    const s = cfg.settings;
    const routes = [s.clusterCidr, s.serviceCidr]
      .filter((c): c is string => typeof c === "string")
      .map((dst) => ({ dst, gw: gateway }));
    const mtu = typeof plugin.raw.mtu === "number" ? plugin.raw.mtu : DEFAULT_MTU;
    return {
      network: name,
      nodeIf: typeof s.nodeInterface === "string" ? s.nodeInterface : NODE_INTERFACE,
      peerIf: typeof s.nodePeerInterface === "string" ? s.nodePeerInterface : NODE_PEER_INTERFACE,
      mtu,
      podCidr,
      addressCidr: `${nodeIp}/${prefix}`,
      gateway,
      routes,
    };
  }
  return undefined;
}

/**
 * Each application of the node link: in place, put back in place (a resync
 * found something of it changed or missing), failed, or none planned.
 */
export type NodeLinkOutcome = "ok" | "repaired" | "failed" | "none";

/** What the driver's metrics count of this module (kept apart from the registry itself). */
export interface NodeConnectivityMetrics {
  nodeLinkApplied(outcome: NodeLinkOutcome): void;
  /** One write of the Node's annotation (set or removal). */
  nodeAnnotationWritten(outcome: AnnotationWriteOutcome): void;
}

export interface NodeConnectivityOptions {
  logger: pino.Logger;
  /** The API when configured (settles undefined when it is not usable). */
  api?: Promise<KubeApi | undefined>;
  /** The Node to annotate; without it (or without an API) nothing is annotated. */
  nodeName?: string;
  /** Between re-applications of a link that is in place; 0 or absent: none. */
  resyncMs?: number;
  /** Between failed attempts to set the link up (default 500 ms doubling to 30 s). */
  retryBackoff?: BackoffPolicy;
  /** Between failed Node patches (default 200 ms doubling to 10 s). */
  annotationBackoff?: BackoffPolicy;
  /** Node patches per MAC before giving up until the next change (default 10). */
  annotationAttempts?: number;
  /** After giving up, a resync tries the Node patch again once this has passed (default 60 s). */
  annotationRetryGivenUpAfterMs?: number;
  metrics?: NodeConnectivityMetrics;
  /** The plumbing, replaceable in tests. */
  ensure?: (spec: NodeLinkSpec, changes?: string[]) => Promise<string>;
  remove?: (nodeIf: string, peerIf: string) => Promise<boolean>;
  /** The MAC of a host link, undefined when there is none (a link an earlier process left). */
  linkMac?: (name: string) => Promise<string | undefined>;
  enableForwarding?: () => Promise<boolean>;
}

export class NodeConnectivity {
  /** Failed attempts since start. */
  failures = 0;
  /** The MAC of the node link as last set up (undefined once removed). */
  mac: string | undefined;
  private readonly log: pino.Logger;
  private readonly plans = new WeakMap<DriverConfig, { plan?: NodeLinkPlan; error?: string }>();
  private wanted: DriverConfig | undefined;
  private readonly loop: SerialLoop;
  private lastError: string | undefined;
  /** The plan last applied successfully. */
  private applied: NodeLinkPlan | undefined;
  private closed = false;
  /** Whether this process looked for a node link an earlier one left. */
  private lookedForLeftLink = false;
  private readonly annotation: NodeMacAnnotation;

  constructor(private readonly o: NodeConnectivityOptions) {
    this.log = o.logger.child({ component: "node-connectivity" });
    this.loop = new SerialLoop({
      run: (resync) => this.run(resync),
      resyncMs: o.resyncMs,
      retryBackoff: o.retryBackoff ?? { baseMs: 500, maxMs: 30_000 },
    });
    this.annotation = new NodeMacAnnotation({
      logger: this.log,
      api: o.api,
      nodeName: o.nodeName,
      backoff: o.annotationBackoff,
      attempts: o.annotationAttempts,
      ...(o.annotationRetryGivenUpAfterMs !== undefined
        ? { retryGivenUpAfterMs: o.annotationRetryGivenUpAfterMs }
        : {}),
      metrics: o.metrics,
    });
  }

  /** Takes a newly loaded config; returns at once (the work is queued, never overlapping). */
  apply(cfg: DriverConfig): void {
    if (this.closed) return;
    this.wanted = cfg;
    this.annotation.retryGivenUp();
    this.loop.restart();
  }

  /** Why the driver cannot serve ADD on the node link's account, for `cfg` (the current config). */
  notReadyReasons(cfg: DriverConfig | undefined): string[] {
    if (!cfg) return [];
    const { plan, error } = this.planOf(cfg);
    if (error) return [`node connectivity: ${error}`];
    if (!plan) return [];
    if (this.lastError) return [`node link ${plan.nodeIf}: ${this.lastError}`];
    if (!this.applied) return [`node link ${plan.nodeIf} not set up yet`];
    return [];
  }

  stop(): void {
    this.closed = true;
    this.annotation.stop();
    this.loop.stop();
  }

  private planOf(cfg: DriverConfig): { plan?: NodeLinkPlan; error?: string } {
    let p = this.plans.get(cfg);
    if (!p) {
      try {
        p = { plan: nodeLinkPlan(cfg) };
      } catch (err) {
        p = { error: messageOf(err) };
      }
      this.plans.set(cfg, p);
    }
    return p;
  }

  /** One application; `resync`: re-applies what is in place rather than a newly loaded config. */
  private async run(resync: boolean): Promise<void> {
    const cfg = this.wanted;
    if (!cfg || this.closed) return;
    const { plan, error } = this.planOf(cfg);
    if (error) {
      this.fail(error, undefined);
      return;
    }
    const ensure = this.o.ensure ?? ensureNodeLink;
    if (!plan) {
      this.lastError = undefined;
      this.o.metrics?.nodeLinkApplied("none");
      let previous: Pick<NodeLinkPlan, "nodeIf" | "peerIf"> | undefined = this.applied;
      let mac = this.mac;
      this.applied = undefined;
      // Once per process: the link an earlier driver set up (the datapath
      // switched across a restart) is ours to remove as well.
      if (!previous && !this.lookedForLeftLink) {
        this.lookedForLeftLink = true;
        const left = await (this.o.linkMac ?? hostLinkMac)(NODE_INTERFACE).catch(() => undefined);
        if (left !== undefined) {
          previous = { nodeIf: NODE_INTERFACE, peerIf: NODE_PEER_INTERFACE };
          mac = left;
          this.log.warn(
            { nodeIf: NODE_INTERFACE },
            "removing the node link an earlier process left: no network uses the midonet datapath",
          );
        }
      }
      // No network uses the MidoNet datapath any more: the link it needed goes
      // too, and the Node's annotation naming its MAC with it.
      if (previous && (await this.removeLink(previous))) {
        this.mac = undefined;
        if (mac !== undefined) this.annotation.remove(mac);
      }
      this.annotation.kick();
      return;
    }
    try {
      const changes: string[] = [];
      const mac = await ensure(plan, changes);
      const enable = this.o.enableForwarding ?? enableIpv4Forwarding;
      if (await enable()) this.log.info("net.ipv4.ip_forward enabled for the midonet datapath");
      const previous = this.applied;
      const changed = JSON.stringify(plan) !== JSON.stringify(previous) || mac !== this.mac;
      this.applied = plan;
      this.lastError = undefined;
      this.mac = mac;
      this.o.metrics?.nodeLinkApplied(resync && changes.length > 0 ? "repaired" : "ok");
      const details = {
        network: plan.network,
        nodeIf: plan.nodeIf,
        peerIf: plan.peerIf,
        address: plan.addressCidr,
        routes: plan.routes.map((r) => `${r.dst} via ${r.gw}`),
        mac,
      };
      if (resync && changes.length > 0) {
        // Someone else changed what we had set up: worth more than an info line.
        this.log.warn({ ...details, changes }, "node link restored");
      } else if (changed) {
        this.log.info(details, "node link set up");
      } else {
        this.log.debug({ nodeIf: plan.nodeIf, changes }, "node link in place");
      }
      if (previous && previous.nodeIf !== plan.nodeIf && previous.nodeIf !== plan.peerIf) {
        // Renamed in driver.json: the old pair is no one's (its peer went with it
        // when ensure re-created the pair under a reused peer name).
        await this.removeLink(previous, plan);
      }
      this.annotation.set(mac);
      this.loop.succeeded();
    } catch (err) {
      this.fail(messageOf(err), plan);
    }
  }

  /** Removes `plan`'s pair, sparing a name `keep` uses; answers whether it is gone. */
  private async removeLink(
    plan: Pick<NodeLinkPlan, "nodeIf" | "peerIf">,
    keep?: NodeLinkPlan,
  ): Promise<boolean> {
    const remove = this.o.remove ?? removeNodeLink;
    const inUse = (n: string) => n === keep?.nodeIf || n === keep?.peerIf;
    try {
      // Deleting one end of a veth pair deletes both; the peer's name is only a fallback.
      if (await remove(plan.nodeIf, inUse(plan.peerIf) ? plan.nodeIf : plan.peerIf))
        this.log.info({ nodeIf: plan.nodeIf, peerIf: plan.peerIf }, "node link removed");
      return true;
    } catch (err) {
      this.log.warn({ nodeIf: plan.nodeIf, err: String(err) }, "removing the node link failed");
      return false;
    }
  }

  private fail(reason: string, plan: NodeLinkPlan | undefined): void {
    this.failures++;
    this.lastError = reason;
    this.o.metrics?.nodeLinkApplied("failed");
    const delay = this.loop.failed();
    this.log.error(
      { nodeIf: plan?.nodeIf, failures: this.failures, retryInMs: delay, err: reason },
      "setting up the node link failed; the driver is not ready",
    );
  }
}

/** A host link's MAC; undefined when there is no such link. */
async function hostLinkMac(name: string): Promise<string | undefined> {
  return (await showLink(name))?.address;
}
