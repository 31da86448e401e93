/**
 * The node's pod CIDRs from its Node object: `spec.podCIDRs` (dual stack: the
 * IPv4 entry fills `usePodCidr`, the IPv6 one `usePodCidrIPv6`), or the legacy
 * single `spec.podCIDR`. The node controller sets them once, shortly after the
 * Node registers; until then the driver cannot hand out addresses and says so
 * in its readiness ("node <name> has no pod CIDR yet").
 *
 * `--pod-cidr` wins when given: the Node is then not watched at all.
 */
import type pino from "pino";
import type { PodCidrs } from "../pod-cidr.js";
import type { KubeApi, KubeObjectView, ObjectWatch } from "./api.js";

/** The pod CIDRs a Node object carries: the first IPv4 and the first IPv6 entry. */
export function podCidrsOfNode(node: KubeObjectView | undefined): PodCidrs {
  const spec = (node?.spec ?? {}) as { podCIDRs?: unknown; podCIDR?: unknown };
  const list: string[] = Array.isArray(spec.podCIDRs)
    ? spec.podCIDRs.filter((c): c is string => typeof c === "string" && c !== "")
    : [];
  if (list.length === 0 && typeof spec.podCIDR === "string" && spec.podCIDR !== "")
    list.push(spec.podCIDR);
  const out: PodCidrs = {};
  for (const c of list) {
    if (c.includes(":")) out.v6 ??= c;
    else out.v4 ??= c;
  }
  return out;
}

const sameCidrs = (a: PodCidrs, b: PodCidrs) => a.v4 === b.v4 && a.v6 === b.v6;
const hasAny = (c: PodCidrs) => c.v4 !== undefined || c.v6 !== undefined;

export interface NodePodCidrsOptions {
  nodeName: string;
  /** Called with each new set of CIDRs (the ConfigSource's setPodCidrs). */
  apply: (c: PodCidrs) => Promise<void>;
  logger: pino.Logger;
}

/**
 * Follows the Node once the API is there. The CIDRs are kept when the Node is
 * deleted or the API goes away: the pods set up from them still exist, and a
 * Node's podCIDRs never change while it lives.
 */
export class NodePodCidrs {
  private cidrs: PodCidrs = {};
  private watch: ObjectWatch | undefined;
  private nodeSeen: boolean | undefined;
  private apiError: string | undefined;
  private stopped = false;
  private readonly log: pino.Logger;

  constructor(private readonly o: NodePodCidrsOptions) {
    this.log = o.logger.child({ component: "node", node: o.nodeName });
  }

  /** Starts the watch once the API is connected (or records why there is none). */
  follow(api: Promise<KubeApi | undefined>): void {
    api.then(
      (a) => {
        if (this.stopped) return;
        if (!a) {
          this.apiError = "no Kubernetes API";
          return;
        }
        this.watch = a.watchObject(
          "nodes",
          { name: this.o.nodeName },
          {
            onObject: (node) => this.onNode(node),
            onError: (message) => {
              this.apiError = message;
              this.log.warn({ err: message }, "watching the Node failed; retrying");
            },
            onSynced: () => {
              this.apiError = undefined;
            },
          },
        );
      },
      (err: unknown) => {
        this.apiError = `Kubernetes API: ${String((err as Error)?.message ?? err)}`;
      },
    );
  }

  /** The CIDRs known now. */
  current(): PodCidrs {
    return { ...this.cidrs };
  }

  /** Why the driver is not ready on account of the Node; undefined once it has a pod CIDR. */
  notReadyReason(): string | undefined {
    if (hasAny(this.cidrs)) return undefined;
    const base = `node ${this.o.nodeName} has no pod CIDR yet`;
    if (this.nodeSeen === false) return `${base} (the Node does not exist)`;
    if (this.apiError && !this.watch?.synced) return `${base} (${this.apiError})`;
    if (this.nodeSeen === undefined) return `${base} (waiting for the Kubernetes API)`;
    return base;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.watch?.stop();
  }

  private onNode(node: KubeObjectView | undefined): void {
    this.nodeSeen = node !== undefined;
    if (!node) {
      this.log.warn("the Node does not exist (keeping the pod CIDRs known so far)");
      return;
    }
    const next = podCidrsOfNode(node);
    if (!hasAny(next) || sameCidrs(next, this.cidrs)) return;
    this.cidrs = next;
    this.log.info({ podCidrs: next }, "pod CIDRs from the Node");
    this.o
      .apply(next)
      .catch((err) => this.log.error({ err: String(err) }, "applying the Node's pod CIDRs failed"));
  }
}
