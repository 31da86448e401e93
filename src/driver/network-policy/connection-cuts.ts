/**
 * Cutting the tracked connections that the rules now in force would not let
 * start, after a change the API made: their entries are removed, so their
 * next packet meets the rules again instead of passing as "established"
 * (calico#6399). Never two cuts at once; a change during one is one more.
 */
import type pino from "pino";
import { type Flow, type FlowGroup, flowIsLive } from "../../plumbing/conntrack.js";
import type { Direction, Protocol } from "../../policy/types.js";
import type { PolicyDatapath } from "./datapath.js";

/** Whether a pod of this node may exchange a connection's first packet with `peer`. */
export type PodJudge = (
  direction: Direction,
  peer: string,
  protocol: Protocol,
  port: number,
) => boolean;

export interface ConnectionCutsOptions {
  datapath: PolicyDatapath;
  log: pino.Logger;
  /** This node's isolated or denied pods, by address: those whose connections may be cut. */
  judges(): Map<string, PodJudge>;
  cut?(n: number): void;
  closed(): boolean;
}

export class ConnectionCuts {
  private cutting = false;
  private again = false;

  constructor(private readonly o: ConnectionCutsOptions) {}

  /** Cuts now, or once more after the cut under way. */
  soon(): void {
    if (this.cutting) {
      this.again = true;
      return;
    }
    this.cutting = true;
    void (async () => {
      try {
        do {
          this.again = false;
          this.o.cut?.(await this.cutDenied());
        } while (this.again && !this.o.closed());
      } finally {
        this.cutting = false;
      }
    })();
  }

  /**
   * Removes the live tracked connections of this node's pods that the rules
   * now in force would not let start. Closing and closed ones are left to
   * expire; connections with the node itself are never filtered, so never
   * cut. Answers how many flows.
   */
  private async cutDenied(): Promise<number> {
    const judges = this.o.judges();
    if (judges.size === 0) return 0;
    let flows: Flow[];
    try {
      flows = await this.o.datapath.listFlows();
    } catch (err) {
      this.o.log.warn({ err: String(err) }, "cannot list tracked connections: none cut");
      return 0;
    }
    const refused = flows.filter((f) => {
      if (!flowIsLive(f)) return false;
      // Behind a DNAT the reply comes from the real destination: that is what the rules saw.
      const src = f.original.src;
      const dst = f.reply.src;
      const protocol = f.protocol.toUpperCase() as Protocol;
      const from = judges.get(src);
      const to = judges.get(dst);
      return (
        (from !== undefined && !from("egress", dst, protocol, f.reply.sport)) ||
        (to !== undefined && !to("ingress", src, protocol, f.reply.sport))
      );
    });
    if (refused.length === 0) return 0;
    // Read only when something is to be cut: the node's addresses change rarely, and reading them costs an exec.
    let nodeIps: Set<string>;
    try {
      nodeIps = new Set(await this.o.datapath.nodeAddresses());
    } catch (err) {
      this.o.log.warn({ err: String(err) }, "cannot list the node's addresses: no connection cut");
      return 0;
    }
    const groups = new Map<string, FlowGroup>();
    let denied = 0;
    for (const f of refused) {
      const src = f.original.src;
      if (nodeIps.has(src) || nodeIps.has(f.reply.src)) continue;
      denied++;
      const g = { protocol: f.protocol, src, dst: f.original.dst, dport: f.original.dport };
      groups.set(`${g.protocol} ${g.src} ${g.dst} ${g.dport}`, g);
    }
    const list = [...groups.values()];
    // A few at a time: each is one filtered ctnetlink dump and a batch of deletes (or a conntrack exec).
    for (let i = 0; i < list.length; i += 4) {
      await Promise.all(
        list
          .slice(i, i + 4)
          .map((g) =>
            this.o.datapath
              .deleteFlows(g)
              .catch((err) =>
                this.o.log.warn({ err: String(err) }, "cannot cut a denied connection"),
              ),
          ),
      );
    }
    if (denied > 0)
      this.o.log.info({ connections: denied }, "cut connections the policies no longer allow");
    return denied;
  }
}
