/**
 * The node's bridge is set up once and then trusted: one promise per bridge for
 * its existence, one per gateway set for its addresses, shared by concurrent ADDs.
 * Forgotten on any failure, so a bridge removed behind our back is made again.
 */
import type { PodPlumbing } from "../../../plumbing/pod-plumbing.js";

export class BridgeCache {
  private readonly done = new Map<string, Promise<void>>();

  /**
   * `plumbing`: the one the daemon chose, as the midonet plugin has it;
   * `netfilter`: whether a bridge made now passes its IP traffic to br_netfilter
   * (services/bridge-steering.ts; default yes, as kube-proxy needs).
   */
  constructor(
    private readonly plumbing: Pick<PodPlumbing, "ensureBridge">,
    private readonly netfilter: (bridge: string) => boolean = () => true,
  ) {}

  exists(name: string, mtu: number): Promise<void> {
    return this.once(name, () => this.plumbing.ensureBridge(name, [], mtu, this.netfilter(name)));
  }

  gateways(name: string, cidrs: string[], mtu: number): Promise<void> {
    return this.once(`${name} ${cidrs.join(",")}`, () =>
      this.plumbing.ensureBridge(name, cidrs, mtu, this.netfilter(name)),
    );
  }

  forget(): void {
    this.done.clear();
  }

  private once(key: string, make: () => Promise<void>): Promise<void> {
    let p = this.done.get(key);
    if (!p) {
      p = make().catch((err) => {
        this.done.delete(key);
        throw err;
      });
      this.done.set(key, p);
    }
    return p;
  }
}
