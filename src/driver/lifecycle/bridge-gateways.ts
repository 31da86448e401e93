/**
 * Gateway addresses the kernel datapath put on its bridges go once nothing
 * uses them: no active config has a range of theirs on that bridge, and no
 * attachment still holds an address in it. A config that moved its pods to a
 * new range (or one that should never have loaded) otherwise leaves the old
 * gateway, and its connected route, on the node for good.
 *
 * Looked at after every config load, and after a teardown while a gateway is
 * only waiting for its last attachment. It runs with every call held back
 * (the locks' exclusive turn): an ADD still on the old config cannot put a
 * gateway back, or lose one, halfway.
 */
import type pino from "pino";
import { parseNetworkConfigList } from "../../cni/conflist.js";
import { toResult100 } from "../../cni/result-convert.js";
import { parseResult } from "../../cni/result-read.js";
import { cidrContains, cidrNetwork, cidrsOverlap, type ParsedIp, parseCidr } from "../../net/ip.js";
import { listBridgeAddresses, removeBridgeAddresses } from "../../plumbing/bridge.js";
import type { BridgeCache } from "../builtin/midonet/bridge-cache.js";
import { type BridgeRange, bridgeRangesOf } from "../builtin/midonet/bridge-ranges.js";
import type { AttachmentLocks } from "../chain/locks.js";
import type { ResultCache } from "../chain/result-cache.js";
import type { ConfigSource } from "../config/config-source.js";
import type { PodNetworkObserver } from "../rpc/service.js";

/**
 * The addresses on `bridge` whose network no active range on that bridge
 * overlaps (pure): `held` says which of those an attachment still keeps.
 */
function unusedGateways(
  bridge: string,
  onBridge: readonly string[],
  active: readonly BridgeRange[],
  attachmentIps: readonly ParsedIp[],
): { remove: string[]; held: string[] } {
  const remove: string[] = [];
  const held: string[] = [];
  for (const text of onBridge) {
    const cidr = parseCidr(text);
    if (!cidr) continue;
    const net = cidrNetwork(cidr);
    if (active.some((r) => r.bridge === bridge && (!r.subnet || cidrsOverlap(r.subnet, net))))
      continue;
    if (attachmentIps.some((ip) => cidrContains(net, ip))) held.push(text);
    else remove.push(text);
  }
  return { remove, held };
}

export interface BridgeGatewayDeps {
  config: ConfigSource;
  cache: ResultCache;
  locks: AttachmentLocks;
  /** The built-in plugin's memory of gateways it put: forgotten when one is removed. */
  bridges: BridgeCache;
  logger: pino.Logger;
}

export class BridgeGatewayPruner {
  /** Every bridge a config of this process or a cached attachment named: the ones looked at. */
  private readonly known = new Set<string>();
  /** A gateway out of every active range waits for its last attachment to go. */
  private waiting = false;
  private running: Promise<void> = Promise.resolve();

  constructor(private readonly d: BridgeGatewayDeps) {}

  /** After a config load. */
  configLoaded(): void {
    this.schedule();
  }

  /** After a teardown: looks again only when a gateway waits for its last attachment. */
  attachmentGone(): void {
    if (this.waiting) this.schedule();
  }

  /** `next` as it is, and told of every teardown (attachmentGone) as well. */
  observer(next?: PodNetworkObserver): PodNetworkObserver {
    return {
      attached: (a, result) => next?.attached(a, result),
      detached: (a) => {
        this.attachmentGone();
        next?.detached(a);
      },
      setUpFailed: (a, step, error) => next?.setUpFailed(a, step, error),
    };
  }

  /** Resolves once the looks asked for so far are done (tests, shutdown). */
  settled(): Promise<void> {
    return this.running;
  }

  private schedule(): void {
    this.running = this.running
      .then(() => this.d.locks.exclusive(() => this.prune()))
      .catch((err) =>
        this.d.logger.error({ err: String(err) }, "removing unused bridge gateways failed"),
      );
  }

  private async prune(): Promise<void> {
    const cfg = this.d.config.current();
    if (!cfg) return;
    const active = bridgeRangesOf(cfg.networks.values());
    const ips: ParsedIp[] = [];
    for (const entry of await this.d.cache.list()) {
      try {
        for (const r of bridgeRangesOf([parseNetworkConfigList(entry.config)]))
          this.known.add(r.bridge);
      } catch {
        // Unreadable config: its attachment's addresses still count below.
      }
      if (!entry.result) continue;
      try {
        for (const ip of toResult100(parseResult(entry.result)).ips ?? []) {
          const c = parseCidr(ip.address);
          if (c) ips.push(c);
        }
      } catch {
        // An unreadable result holds nothing we can tell.
      }
    }
    for (const r of active) this.known.add(r.bridge);
    let waiting = false;
    for (const bridge of this.known) {
      const onBridge = await listBridgeAddresses(bridge);
      if (!onBridge) continue;
      const { remove, held } = unusedGateways(bridge, onBridge, active, ips);
      if (held.length > 0) waiting = true;
      if (remove.length === 0) continue;
      await removeBridgeAddresses(bridge, remove);
      this.d.bridges.forget();
      this.d.logger.info(
        { bridge, removed: remove, generation: cfg.generation },
        "removed bridge gateways no active config or attachment uses",
      );
    }
    this.waiting = waiting;
  }
}
