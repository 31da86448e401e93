/**
 * With `"services": "driver"`, the kernel datapath's bridges do without the
 * settings that exist for kube-proxy: br_netfilter's nf_call_iptables on the
 * bridge and hairpin mode on its ports. What they were for, the driver does
 * from what it knows of its own bridges:
 *
 *   table bridge cni-driver-steer
 *     chain prerouting   hook prerouting, priority -300 (before any bridging)
 *       a unicast IP frame one pod sends another on the bridge (its
 *       destination one of the bridge's pod subnets): its destination MAC
 *       made the bridge's and the packet the host's, so the host routes it
 *       rather than the bridge passing it across (ND left alone).
 *
 * Routed, a same-node packet meets the IP hooks without br_netfilter: a
 * Service's DNAT to a pod on the same node and its reply's un-NAT (the
 * client's address kept), NetworkPolicy's forward chains, and a pod reaching
 * itself through its Service (masqueraded, as kube-proxy does): the request
 * leaves the host by the bridge, not by the port it came in, so no hairpin
 * mode. The packet pays one routing hop on the node (its TTL shows it).
 *
 * One exception: when br_netfilter is on for the whole node (the sysctl
 * net.bridge.bridge-nf-call-iptables, someone else's), it DNATs a hairpin
 * request inside the bridge and sends it back out the port it came in, so
 * hairpin mode stays on for the ports then, and the log says why.
 *
 * A bridge whose pod subnets the config does not tell (an IPAM other than
 * host-local) cannot be steered: it keeps kube-proxy's settings.
 */
import type pino from "pino";
import { cidrNetwork, formatCidr } from "../../net/ip.js";
import { linkMac, nodeBridgeNetfilter, setBridgeForKubeProxy } from "../../plumbing/bridge.js";
import { bridgeMac } from "../../plumbing/mac.js";
import { applyNftScript, NftError } from "../../plumbing/nftables.js";
import { bridgeRangesOf } from "../builtin/midonet/bridge-ranges.js";
import type { DriverConfig } from "../config/network-config.js";
import { readServicesMode } from "./settings.js";

export const STEERING_TABLE = "cni-driver-steer";

/** What a bridge and its ports get: kube-proxy's settings when both are true. */
export interface BridgeSettings {
  netfilter: boolean;
  hairpin: boolean;
}

const KUBE_PROXY: BridgeSettings = { netfilter: true, hairpin: true };

/** A bridge the steering table serves: its MAC and the pod subnets behind it. */
export interface SteeredBridge {
  bridge: string;
  mac: string;
  subnets: string[];
}

/**
 * The kernel-datapath bridges of these networks, by whether they can be
 * steered: with host-local IPAM, each with its subnets; any other, by name.
 */
// Exported for its tests only (unit/bridge-steering.test.ts).
export function bridgesOf(
  cfg: Pick<DriverConfig, "networks">,
  macOf: (bridge: string) => string = bridgeMac,
): { steered: SteeredBridge[]; unsteered: string[] } {
  const subnets = new Map<string, Set<string>>();
  const unsteered = new Set<string>();
  for (const r of bridgeRangesOf(cfg.networks.values())) {
    const known = subnets.get(r.bridge) ?? new Set<string>();
    subnets.set(r.bridge, known);
    if (r.subnet) known.add(formatCidr(cidrNetwork(r.subnet)));
    else unsteered.add(r.bridge);
  }
  const steered: SteeredBridge[] = [];
  for (const [bridge, set] of subnets) {
    if (unsteered.has(bridge) || set.size === 0) {
      unsteered.add(bridge);
      continue;
    }
    steered.push({ bridge, mac: macOf(bridge), subnets: [...set].sort() });
  }
  return { steered, unsteered: [...unsteered].sort() };
}

/** The steering table, whole (a script that replaces it). */
// Exported for its tests only (unit/bridge-steering.test.ts).
export function steeringScript(bridges: readonly SteeredBridge[]): string {
  const lines = [
    `table bridge ${STEERING_TABLE} {}`,
    `delete table bridge ${STEERING_TABLE}`,
    `table bridge ${STEERING_TABLE} {`,
    "  chain prerouting {",
    "    type filter hook prerouting priority -300; policy accept;",
    // Only frames for another host's MAC: the gateway's own, broadcast and multicast pass.
    "    meta pkttype != other return",
    // Neighbour discovery stays on the link: the host answers for no pod.
    "    icmpv6 type { nd-neighbor-solicit, nd-neighbor-advert } return",
  ];
  for (const b of bridges)
    for (const subnet of b.subnets) {
      const ip = subnet.includes(":") ? "ip6" : "ip";
      lines.push(`    ${ip} daddr ${subnet} ether daddr set ${b.mac} meta pkttype set host`);
    }
  lines.push("  }", "}");
  return `${lines.join("\n")}\n`;
}

const DELETE_SCRIPT = `table bridge ${STEERING_TABLE} {}\ndelete table bridge ${STEERING_TABLE}\n`;

/** What the steering does to the node: the unit tests hand a recorder in. */
export interface SteeringDatapath {
  applyScript(script: string): Promise<void>;
  setBridge(bridge: string, settings: BridgeSettings): Promise<void>;
  nodeBridgeNetfilter(): boolean;
  bridgeMac(bridge: string): string;
}

const ACTION = `bridge steering in table bridge ${STEERING_TABLE}`;

const kernelSteering: SteeringDatapath = {
  applyScript: (script) => applyNftScript(ACTION, script),
  setBridge: setBridgeForKubeProxy,
  nodeBridgeNetfilter,
  // A bridge made by an earlier version may carry another MAC than the one we give new ones.
  bridgeMac: (bridge) => linkMac(bridge) ?? bridgeMac(bridge),
};

/**
 * Follows the config: steering on for the steerable kernel-datapath bridges
 * while `"services"` is `"driver"`, off (table gone, kube-proxy's settings
 * back) otherwise. `settings(bridge)` answers what a bridge or port made now
 * gets (the midonet plugin asks at each ADD).
 */
export class BridgeSteering {
  private steered = new Map<string, BridgeSettings>();
  private applying: Promise<void> = Promise.resolve();
  /** Until the first load: what an earlier run in the other mode left is unknown. */
  private first = true;
  private readonly log: pino.Logger;

  constructor(
    logger: pino.Logger,
    private readonly datapath: SteeringDatapath = kernelSteering,
  ) {
    this.log = logger.child({ component: "bridge-steering" });
  }

  settings(bridge: string): BridgeSettings {
    return this.steered.get(bridge) ?? KUBE_PROXY;
  }

  /** Each config load; serial. A failure is logged and tried again at the next load. */
  apply(cfg: Pick<DriverConfig, "networks" | "settings">): Promise<void> {
    this.applying = this.applying
      .catch(() => undefined)
      .then(() => this.applyNow(cfg))
      .catch((err: unknown) => this.log.error({ err: String(err) }, "cannot steer the bridges"));
    return this.applying;
  }

  private async applyNow(cfg: Pick<DriverConfig, "networks" | "settings">): Promise<void> {
    let driverMode = false;
    try {
      driverMode = readServicesMode(cfg.settings) === "driver";
    } catch {
      // The config's own check refuses such a value; nothing to steer meanwhile.
    }
    const { steered, unsteered } = driverMode
      ? bridgesOf(cfg, (b) => this.datapath.bridgeMac(b))
      : { steered: [], unsteered: [] };
    const before = this.steered;
    const first = this.first;
    this.first = false;
    const hairpin = steered.length > 0 && this.datapath.nodeBridgeNetfilter();
    const now = new Map(steered.map((b) => [b.bridge, { netfilter: false, hairpin }]));
    if (steered.length > 0) await this.datapath.applyScript(steeringScript(steered));
    else if (before.size > 0 || driverMode) await this.deleteTable();
    else if (first)
      // Only in case an earlier run steered: a kernel or nft without the bridge family is fine here.
      await this.deleteTable().catch((err: unknown) =>
        this.log.debug({ err: String(err) }, "no steering table to remove"),
      );
    this.steered = now;
    for (const [bridge, settings] of now) await this.datapath.setBridge(bridge, settings);
    // At start, every bridge of ours: an earlier run in driver mode may have left them unset.
    const restore = new Set(before.keys());
    if (first) {
      const all = bridgesOf(cfg, (b) => this.datapath.bridgeMac(b));
      for (const b of [...all.steered.map((s) => s.bridge), ...all.unsteered]) restore.add(b);
    }
    for (const bridge of restore)
      if (!now.has(bridge)) await this.datapath.setBridge(bridge, KUBE_PROXY);
    if (unsteered.length > 0)
      this.log.warn(
        { bridges: unsteered },
        "bridges whose pod subnets the config does not tell (IPAM other than host-local) keep br_netfilter and hairpin mode",
      );
    if (hairpin)
      this.log.warn(
        "br_netfilter is on for the whole node (net.bridge.bridge-nf-call-iptables=1): hairpin mode stays on the bridge ports, since br_netfilter would send a pod's request to itself back out its own port",
      );
    if (now.size > 0 && before.size === 0)
      this.log.info({ bridges: [...now.keys()] }, "same-node pod traffic routed by the host");
  }

  private async deleteTable(): Promise<void> {
    try {
      await this.datapath.applyScript(DELETE_SCRIPT);
    } catch (err) {
      // Without nft no table was ever made.
      if (!(err instanceof NftError && err.missingTool)) throw err;
    }
  }
}
