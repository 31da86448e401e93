/**
 * The kernel datapath as a cluster network: this node's routes (host-gw or
 * VXLAN) to every other Node's pod CIDRs, and the masquerade of pod traffic
 * leaving the cluster CIDR. Active when a network uses the built-in plugin
 * with `"datapath": "kernel"`; driver.json's keys (settings.ts) say how.
 *
 * What the driver owns, and so alone touches: routes of protocol
 * ROUTE_PROTOCOL in the main table, the `midokube-vxlan` device with every
 * neighbour and forwarding entry on it, the nftables table `inet cni-driver`,
 * and its own Node's `midonet.org/vtep-mac` annotation. A route to a peer's
 * pod CIDR that exists with another protocol is someone else's: left alone and
 * reported.
 *
 * Each run lists what is there and makes it what the plan says, so the first
 * run after a start removes what Nodes deleted meanwhile left behind. Routes
 * are changed only once the Node list is known (a first list done): before
 * that, or without the Kubernetes API, what is there stays. Runs never
 * overlap; a failed one is retried with backoff; every `resyncMs` a run puts
 * back what someone else removed.
 */
import type pino from "pino";
import type { BackoffPolicy } from "../../common/backoff.js";
import { messageOf } from "../../common/errors.js";
import { SerialLoop } from "../../common/serial-loop.js";
import { cidrContains, parseCidr, parseIp } from "../../net/ip.js";
import {
  deletePeerRoute,
  listMainRoutes,
  listOnLinkSubnets,
  listRoutesByProtocol,
  type PeerRoute,
  replacePeerRoutes,
} from "../../plumbing/cluster-routes.js";
import { deleteNftTable, replaceNftTable } from "../../plumbing/nftables.js";
import { enableIpv4Forwarding } from "../../plumbing/node-link.js";
import {
  changeFdb,
  changeNeighbours,
  ensureVxlan,
  listFdb,
  listNeighbours,
  mtuOfInterfaceWith,
  removeVxlan,
} from "../../plumbing/vxlan.js";
import { kernelDatapathPlugins } from "../builtin/midonet/config.js";
import type { DriverConfig } from "../config/network-config.js";
import type { KubeApi, ObjectWatch } from "../kube/api.js";
import { NodeMacAnnotation } from "../kube/node-annotation.js";
import { type ClusterNode, clusterNodeOf, VTEP_MAC_ANNOTATION } from "./nodes.js";
import {
  type CrossNodePlan,
  MASQUERADE_TABLE,
  masqueradeTableBody,
  planCrossNode,
  ROUTE_PROTOCOL,
  VXLAN_OVERHEAD,
  vtepMacOf,
} from "./plan.js";
import {
  type ClusterNetworkSettings,
  readClusterNetworkSettings,
  VXLAN_DEVICE,
} from "./settings.js";

export type ClusterNetworkOutcome = "ok" | "repaired" | "failed";

/** What the driver's metrics count of this module. */
export interface ClusterNetworkMetrics {
  clusterNetworkApplied(
    outcome: ClusterNetworkOutcome,
    state?: { hostGwRoutes: number; vxlanRoutes: number; unroutedNodes: number },
  ): void;
}

export interface ClusterNetworkOptions {
  logger: pino.Logger;
  /** The API when configured (settles undefined when it is not usable). */
  api?: Promise<KubeApi | undefined>;
  /** This node's Node; without it no route to other nodes is made. */
  nodeName?: string;
  /** This node's pod CIDRs when its Node carries none (`--pod-cidr`). */
  localPodCidrs?: () => { v4?: string; v6?: string };
  /** Between runs that find all in place; 0 or absent: none. */
  resyncMs?: number;
  /** Between failed runs (default 500 ms doubling to 30 s). */
  retryBackoff?: BackoffPolicy;
  metrics?: ClusterNetworkMetrics;
}

/** Whether `ip` is in one of the subnets. */
function onAnyOf(subnets: readonly string[], ip: string): boolean {
  const addr = parseIp(ip);
  if (!addr) return false;
  return subnets.some((c) => {
    const cidr = parseCidr(c);
    return cidr !== undefined && cidr.prefix > 0 && cidrContains(cidr, addr);
  });
}

/** How a route reads in the log. */
const describeRoute = (r: PeerRoute) =>
  `${r.dst} via ${r.via}${r.dev ? ` dev ${r.dev}` : ""}${r.onlink ? " onlink" : ""}`;

/** Whether a listed route is the one wanted (a route without a device may leave by any). */
const sameRoute = (want: PeerRoute, have: PeerRoute) =>
  want.dst === have.dst &&
  want.via === have.via &&
  !!want.onlink === !!have.onlink &&
  (want.dev === undefined || want.dev === have.dev);

export class ClusterNetwork {
  private readonly log: pino.Logger;
  private cfg: DriverConfig | undefined;
  /** Every Node once the first list is in; undefined before. */
  private nodes: ClusterNode[] | undefined;
  /** What of the Nodes the last run was started for. */
  private nodesKey: string | undefined;
  private watch: ObjectWatch | undefined;
  private readonly loop: SerialLoop;
  private closed = false;
  /** The masquerade body last applied; null: table removed; undefined: not known yet. */
  private masqueradeApplied: string | null | undefined;
  private lastSkipped = "";
  /** What the last plan applied holds (kept while the Nodes are not known). */
  private counts = { hostGwRoutes: 0, vxlanRoutes: 0, unroutedNodes: 0 };
  private forwardingError: string | undefined;
  private mtuWarning: string | undefined;
  /** The MTU pods get where their network sets none: VXLAN's, while it carries pods' traffic. */
  private vxlanPodMtu: number | undefined;
  private readonly annotation: NodeMacAnnotation;

  constructor(private readonly o: ClusterNetworkOptions) {
    this.log = o.logger.child({ component: "cluster-network" });
    this.loop = new SerialLoop({
      run: (resync) => this.run(resync),
      resyncMs: o.resyncMs,
      retryBackoff: o.retryBackoff ?? { baseMs: 500, maxMs: 30_000 },
    });
    this.annotation = new NodeMacAnnotation({
      logger: this.log,
      api: o.api,
      nodeName: o.nodeName,
      annotation: VTEP_MAC_ANNOTATION,
      linkDescription: VXLAN_DEVICE,
    });
  }

  /** Follows every Node once the API is there. */
  start(): void {
    const { api, nodeName } = this.o;
    if (!api || !nodeName) return;
    api.then(
      (a) => {
        if (!a || this.closed) return;
        this.watch = a.watchNodes({
          onList: (objs) => {
            const nodes = objs.map(clusterNodeOf).filter((n): n is ClusterNode => !!n);
            // Most Node updates are kubelet's status (conditions, heartbeats):
            // only what the routes are made of starts a run.
            const key = JSON.stringify(
              nodes.map((n) => [n.name, n.podCidrs, n.ipv4, n.ipv6, n.vtepMac]).sort(),
            );
            this.nodes = nodes;
            if (key === this.nodesKey) return;
            this.nodesKey = key;
            this.loop.kick();
          },
          onError: (message) =>
            this.log.warn({ err: message }, "watching the Nodes failed; retrying"),
        });
      },
      () => {},
    );
  }

  /** Takes a newly loaded config (a start, a reload): re-applies everything. */
  apply(cfg: DriverConfig): void {
    if (this.closed) return;
    this.cfg = cfg;
    this.masqueradeApplied = this.masqueradeApplied === null ? null : undefined;
    this.annotation.retryGivenUp();
    this.loop.restart();
  }

  /**
   * The MTU for a pod whose network sets none: the VXLAN device's (the node's
   * interface MTU less 50) when crossNode is "vxlan", or "auto" and some node
   * is reached over VXLAN; undefined otherwise (the plugin's default). As
   * flannel and Calico do: a pod's packets must fit in the tunnel, since ICMP
   * "fragmentation needed" is often filtered on the way back.
   */
  podMtu(): number | undefined {
    return this.vxlanPodMtu;
  }

  async stop(): Promise<void> {
    this.closed = true;
    this.annotation.stop();
    this.loop.stop();
    await this.watch?.stop();
  }

  private async run(resync: boolean): Promise<void> {
    const cfg = this.cfg;
    if (!cfg || this.closed) return;
    try {
      const settings = readClusterNetworkSettings(cfg.settings);
      const kernel = kernelDatapathPlugins(cfg.networks.values());
      const active = kernel.length > 0;
      const setMtus = kernel.filter((c) => c.mtuSet).map((c) => c.mtu);
      const changes: string[] = [];
      // Each part on its own: nft missing must not keep the routes from being made.
      const errors: string[] = [];
      const part = <T>(what: string, p: Promise<T>, failed: T) =>
        p.catch((err: unknown) => {
          errors.push(`${what}: ${messageOf(err)}`);
          return failed;
        });
      const s = active ? settings : undefined;
      const masquerading = await part("masquerade", this.masquerade(s, resync, changes), false);
      const routed = await part(
        "routes to other nodes",
        this.crossNode(s, changes, Math.max(0, ...setMtus)),
        false,
      );
      if (masquerading || routed) await this.forwarding(changes);
      if (changes.length > 0 && errors.length > 0)
        this.log.info({ changes }, "cluster network partly updated");
      if (errors.length > 0) throw new Error(errors.join("; "));
      this.o.metrics?.clusterNetworkApplied(
        resync && changes.length > 0 ? "repaired" : "ok",
        this.counts,
      );
      if (changes.length > 0)
        this.log[resync ? "warn" : "info"](
          { changes },
          resync ? "cluster network restored" : "cluster network updated",
        );
      this.loop.succeeded();
    } catch (err) {
      this.o.metrics?.clusterNetworkApplied("failed");
      const delay = this.loop.failed();
      this.log.error(
        { retryInMs: delay, err: messageOf(err) },
        "applying the cluster network failed",
      );
    }
  }

  /**
   * net.ipv4.ip_forward on, which routing pods' traffic needs. Where /proc/sys
   * is read-only (an unprivileged container) and it is off, that is said once
   * and the rest is applied anyway: the operator may turn it on any time.
   */
  private async forwarding(changes: string[]): Promise<void> {
    try {
      if (await enableIpv4Forwarding()) changes.push("net.ipv4.ip_forward enabled");
      this.forwardingError = undefined;
    } catch (err) {
      const msg = messageOf(err).replace(
        "the midonet datapath needs it on",
        "routing pods between nodes and out of the cluster needs it on",
      );
      if (msg !== this.forwardingError) this.log.error({ err: msg }, "IPv4 forwarding is off");
      this.forwardingError = msg;
    }
  }

  /** The nftables table: rewritten whole when its text changes (and on resync), removed when off. */
  private async masquerade(
    s: ClusterNetworkSettings | undefined,
    resync: boolean,
    changes: string[],
  ): Promise<boolean> {
    const body = s ? masqueradeTableBody(s) : undefined;
    if (s?.masquerade && !s.clusterCidr && !s.clusterCidrIPv6 && this.masqueradeApplied !== null)
      this.log.warn("masquerade is on but driver.json has no clusterCidr: nothing is masqueraded");
    if (body === undefined) {
      if (this.masqueradeApplied !== null) {
        await deleteNftTable("inet", MASQUERADE_TABLE);
        if (this.masqueradeApplied !== undefined)
          changes.push(`nftables table ${MASQUERADE_TABLE} removed`);
        this.masqueradeApplied = null;
      }
      return false;
    }
    if (body !== this.masqueradeApplied || resync) {
      await replaceNftTable("inet", MASQUERADE_TABLE, body);
      if (body !== this.masqueradeApplied)
        changes.push(
          `masquerading ${[s?.clusterCidr, s?.clusterCidrIPv6].filter(Boolean).join(" and ")} leaving it (exempt: ${[s?.clusterCidr, s?.clusterCidrIPv6, ...(s?.nonMasqueradeCidrs ?? [])].filter(Boolean).join(", ")})`,
        );
      this.masqueradeApplied = body;
    }
    return true;
  }

  /**
   * Routes, the VXLAN device and its entries; answers whether any route is
   * wanted. `setMtu`: the largest MTU a network sets itself (0: none does).
   */
  private async crossNode(
    s: ClusterNetworkSettings | undefined,
    changes: string[],
    setMtu: number,
  ): Promise<boolean> {
    const off = !s || s.crossNode === "none";
    if (!off && (!this.nodes || !this.o.nodeName)) return false; // not known yet: leave all be
    // This node's own Node gone (deleted, to be registered again): its routes
    // still carry its pods' traffic, so nothing changes until it is back.
    if (!off && !this.nodes?.some((n) => n.name === this.o.nodeName)) {
      const why = `node ${this.o.nodeName} is not among the Nodes: routes to other nodes left as they are`;
      if (this.lastSkipped !== why) this.log.warn(why);
      this.lastSkipped = why;
      return false;
    }
    let plan: CrossNodePlan;
    if (off || !s || !this.nodes || !this.o.nodeName) {
      plan = { routes: [], fdb: [], neighbours: [], skipped: [], nodeOf: new Map() };
    } else {
      const subnets =
        s.crossNode === "vxlan"
          ? []
          : [
              ...(await listOnLinkSubnets(4, VXLAN_DEVICE)),
              ...(await listOnLinkSubnets(6, VXLAN_DEVICE)),
            ];
      plan = planCrossNode({
        settings: s,
        selfName: this.o.nodeName,
        nodes: this.nodes,
        localPodCidrV4: this.o.localPodCidrs?.().v4,
        onLink: (ip) => onAnyOf(subnets, ip),
      });
    }
    const skipped = JSON.stringify(plan.skipped);
    if (skipped !== this.lastSkipped && plan.skipped.length > 0)
      this.log.warn({ skipped: plan.skipped }, "some nodes' pods are not routed to");
    this.lastSkipped = skipped;

    // The device before the routes through it; its entries before the routes use them.
    if (plan.vxlan) {
      const local = plan.vxlan.local;
      const mtu = ((await mtuOfInterfaceWith(local)) ?? 1500) - VXLAN_OVERHEAD;
      const made = await ensureVxlan({ ...plan.vxlan, mtu });
      const overVxlan = plan.routes.some((r) => r.dev === VXLAN_DEVICE);
      this.vxlanPodMtu = overVxlan || s?.crossNode === "vxlan" ? mtu : undefined;
      const tooBig =
        overVxlan && setMtu > mtu
          ? `a network's "mtu" ${setMtu} is more than ${VXLAN_DEVICE}'s ${mtu}: packets that large to pods on nodes reached over VXLAN are dropped; set it to ${mtu}, or leave it out and the driver chooses`
          : undefined;
      if (tooBig && tooBig !== this.mtuWarning) this.log.warn(tooBig);
      this.mtuWarning = tooBig;
      changes.push(...made.map((c) => `${VXLAN_DEVICE}: ${c}`));
      await this.syncEntries(plan, changes);
      // A Node registered again has lost the annotation this process wrote.
      const self = this.nodes?.find((n) => n.name === this.o.nodeName);
      if (self && self.vtepMac !== plan.vxlan.mac) this.annotation.forgetWritten();
      this.annotation.set(plan.vxlan.mac);
    } else {
      this.vxlanPodMtu = undefined;
      if (await removeVxlan(VXLAN_DEVICE)) {
        changes.push(`${VXLAN_DEVICE} removed`);
        if (this.o.nodeName) this.annotation.remove(vtepMacOf(this.o.nodeName));
      }
    }
    await this.syncRoutes(plan, changes);
    const vxlanRoutes = plan.routes.filter((r) => r.dev === VXLAN_DEVICE).length;
    this.counts = {
      hostGwRoutes: plan.routes.length - vxlanRoutes,
      vxlanRoutes,
      unroutedNodes: plan.skipped.length,
    };
    return plan.routes.length > 0;
  }

  private async syncEntries(plan: CrossNodePlan, changes: string[]): Promise<void> {
    const fdb = await listFdb(VXLAN_DEVICE);
    const fkey = (e: { mac: string; dst: string }) => `${e.mac} ${e.dst}`;
    const wantF = new Set(plan.fdb.map(fkey));
    const haveF = new Set(fdb.map(fkey));
    const fdbChange = {
      add: plan.fdb.filter((e) => !haveF.has(fkey(e))),
      remove: fdb.filter((e) => !wantF.has(fkey(e))),
    };
    if (fdbChange.add.length + fdbChange.remove.length > 0) {
      await changeFdb(VXLAN_DEVICE, fdbChange);
      changes.push(
        ...fdbChange.remove.map((e) => `fdb ${fkey(e)} removed`),
        ...fdbChange.add.map((e) => `fdb ${fkey(e)} added`),
      );
    }
    const neigh = await listNeighbours(VXLAN_DEVICE);
    const nkey = (n: { ip: string; mac: string }) => `${n.ip} ${n.mac}`;
    const wantN = new Set(plan.neighbours.map(nkey));
    const haveN = new Set(neigh.map(nkey));
    const wantIps = new Set(plan.neighbours.map((n) => n.ip));
    const nChange = {
      set: plan.neighbours.filter((n) => !haveN.has(nkey(n))),
      remove: neigh.filter((n) => !wantN.has(nkey(n)) && !wantIps.has(n.ip)),
    };
    if (nChange.set.length + nChange.remove.length > 0) {
      await changeNeighbours(VXLAN_DEVICE, nChange);
      changes.push(
        ...nChange.remove.map((n) => `neighbour ${nkey(n)} removed`),
        ...nChange.set.map((n) => `neighbour ${nkey(n)} set`),
      );
    }
  }

  private async syncRoutes(plan: CrossNodePlan, changes: string[]): Promise<void> {
    for (const family of [4, 6] as const) {
      const want = plan.routes.filter((r) => r.dst.includes(":") === (family === 6));
      const have = await listRoutesByProtocol(ROUTE_PROTOCOL, family);
      const wantDst = new Set(want.map((r) => r.dst));
      for (const r of have) {
        if (wantDst.has(r.dst)) continue;
        await deletePeerRoute(r.dst, ROUTE_PROTOCOL);
        changes.push(`route ${describeRoute(r)} removed`);
      }
      const missing = want.filter((w) => !have.some((h) => sameRoute(w, h)));
      if (missing.length === 0) continue;
      // A route to the same destination of another protocol is someone else's.
      const haveDst = new Set(have.map((r) => r.dst));
      const foreign = new Map(
        (await listMainRoutes(family))
          .filter((r) => r.protocol !== String(ROUTE_PROTOCOL) && !haveDst.has(r.dst))
          .map((r) => [r.dst, r]),
      );
      const ours: typeof missing = [];
      for (const r of missing) {
        const other = foreign.get(r.dst);
        if (other) {
          this.log.warn(
            { dst: r.dst, node: plan.nodeOf.get(r.dst), existing: other },
            "a route to this node's pods exists and is not the driver's: left alone",
          );
          continue;
        }
        ours.push(r);
      }
      await replacePeerRoutes(ours, ROUTE_PROTOCOL);
      for (const r of ours) {
        changes.push(`route ${describeRoute(r)} (node ${plan.nodeOf.get(r.dst)}) set`);
      }
    }
  }
}
