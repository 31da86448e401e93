/**
 * The node's pod CIDRs from its Node object: `spec.podCIDRs` (dual stack: the
 * IPv4 entry fills `usePodCidr`, the IPv6 one `usePodCidrIPv6`), or the legacy
 * single `spec.podCIDR`. The node controller sets them once, shortly after the
 * Node registers; until then the driver cannot hand out addresses and says so
 * in its readiness ("node <name> has no pod CIDR yet").
 *
 * `--pod-cidr` wins when given: the Node is then followed for its IPs and
 * zone only (what the Services need of it), its pod CIDRs left alone.
 *
 * The CIDRs learned are kept under the state dir: a driver restarted while the
 * API is away takes them up after a grace period (the Node, when the API
 * answers, still wins), instead of refusing every pod until the API is back.
 */
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import type pino from "pino";
import { messageOf } from "../../common/errors.js";
import {
  type FileFormat,
  readVersionedFile,
  writeVersionedFile,
} from "../../common/file-format.js";
import { canonicalIp } from "../../net/ip.js";
import type { PodCidrs } from "../config/pod-cidr.js";
import type { KubeApi, KubeObjectView, ObjectWatch } from "./api.js";

/** The Node label naming its zone, which topology hints refer to. */
const ZONE_LABEL = "topology.kubernetes.io/zone";

/** What of its own Node the Services need: its IPs (InternalIP first) and its zone. */
export interface NodeFacts {
  ipv4?: string;
  ipv6?: string;
  zone?: string;
}

interface NodeAddress {
  type?: unknown;
  address?: unknown;
}

/** A Node's addresses (status.addresses): InternalIP before ExternalIP, each family's first. */
export function nodeIpsOf(node: KubeObjectView | undefined): { ipv4?: string; ipv6?: string } {
  const status = (node?.status ?? {}) as { addresses?: unknown };
  const list = Array.isArray(status.addresses) ? (status.addresses as NodeAddress[]) : [];
  const out: { ipv4?: string; ipv6?: string } = {};
  for (const type of ["InternalIP", "ExternalIP"]) {
    for (const a of list) {
      if (a.type !== type || typeof a.address !== "string") continue;
      const ip = canonicalIp(a.address);
      if (!ip) continue;
      if (ip.includes(":")) out.ipv6 ??= ip;
      else out.ipv4 ??= ip;
    }
  }
  return out;
}

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
  /** Where the CIDRs learned are kept across restarts (`<stateDir>/node-pod-cidrs.json`); none without. */
  stateDir?: string;
  /** How long a start waits for the Node before taking up the kept CIDRs (default 5 s). */
  rememberedGraceMs?: number;
  /** `--pod-cidr` was given: the Node's CIDRs are neither taken, kept nor waited for. */
  podCidrsGiven?: boolean;
  /** Called when the Node's own IPs or zone (nodeFacts) change. */
  onNodeFacts?: () => void;
}

const REMEMBERED_FILE = "node-pod-cidrs.json";

/**
 * `{"version": 1, "node": …, "podCidrs": {"v4": …, "v6": …}}`; release 0.1.0
 * wrote the same without `version`, and reads this one (it ignores the field).
 */
const REMEMBERED_FORMAT: FileFormat = {
  what: "record of the node's pod CIDRs",
  current: 1,
  declaredBy: { field: "version" },
};

/**
 * The CIDRs a previous run learned for this node; {} when none (or another
 * node's). Throws FileFormatError when a newer driver wrote the file.
 */
function readRemembered(stateDir: string, nodeName: string): PodCidrs {
  const v = readVersionedFile(REMEMBERED_FORMAT, join(stateDir, REMEMBERED_FILE)) as
    | { node?: unknown; podCidrs?: { v4?: unknown; v6?: unknown } }
    | undefined;
  if (v?.node !== nodeName) return {};
  const out: PodCidrs = {};
  if (typeof v.podCidrs?.v4 === "string") out.v4 = v.podCidrs.v4;
  if (typeof v.podCidrs?.v6 === "string") out.v6 = v.podCidrs.v6;
  return out;
}

async function writeRemembered(stateDir: string, nodeName: string, c: PodCidrs): Promise<void> {
  await mkdir(stateDir, { recursive: true, mode: 0o700 });
  await writeVersionedFile(
    REMEMBERED_FORMAT,
    join(stateDir, REMEMBERED_FILE),
    { node: nodeName, podCidrs: c },
    0o600,
  );
}

/**
 * Follows the Node once the API is there. The CIDRs are kept when the Node is
 * deleted or the API goes away: the pods set up from them still exist, and a
 * Node's podCIDRs never change while it lives.
 */
export class NodePodCidrs {
  private cidrs: PodCidrs = {};
  private facts: NodeFacts = {};
  private watch: ObjectWatch | undefined;
  private nodeSeen: boolean | undefined;
  private apiError: string | undefined;
  private stopped = false;
  private rememberTimer: NodeJS.Timeout | undefined;
  private readonly log: pino.Logger;

  constructor(private readonly o: NodePodCidrsOptions) {
    this.log = o.logger.child({ component: "node", node: o.nodeName });
  }

  /** Starts the watch once the API is connected (or records why there is none). */
  follow(api: Promise<KubeApi | undefined>): void {
    if (!this.o.podCidrsGiven) this.takeUpRememberedLater();
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

  /** The Node's own IPs (nodeIpsOf) and zone as last seen; empty before the Node is. */
  nodeFacts(): NodeFacts {
    return { ...this.facts };
  }

  /** Why the driver is not ready on account of the Node; undefined once it has a pod CIDR. */
  notReadyReason(): string | undefined {
    if (this.o.podCidrsGiven || hasAny(this.cidrs)) return undefined;
    const base = `node ${this.o.nodeName} has no pod CIDR yet`;
    if (this.nodeSeen === false) return `${base} (the Node does not exist)`;
    if (this.apiError && !this.watch?.synced) return `${base} (${this.apiError})`;
    if (this.nodeSeen === undefined) return `${base} (waiting for the Kubernetes API)`;
    return base;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.rememberTimer) clearTimeout(this.rememberTimer);
    await this.watch?.stop();
  }

  /** After the grace, with no CIDR from the Node yet: the ones a previous run learned. */
  private takeUpRememberedLater(): void {
    if (!this.o.stateDir) return;
    let remembered: PodCidrs;
    try {
      remembered = readRemembered(this.o.stateDir, this.o.nodeName);
    } catch (err) {
      // A newer driver's file: not taken up, and kept (the Node's CIDRs do not replace it).
      this.log.error(
        { err: messageOf(err) },
        "the pod CIDRs kept from the last run are not readable",
      );
      return;
    }
    if (!hasAny(remembered)) return;
    this.rememberTimer = setTimeout(() => {
      this.rememberTimer = undefined;
      if (this.stopped || hasAny(this.cidrs)) return;
      this.cidrs = remembered;
      this.log.warn(
        { podCidrs: remembered, why: this.notReadyReasonWithout() },
        "no pod CIDR from the Node yet: using the ones kept from the last run",
      );
      this.o
        .apply(remembered)
        .catch((err) => this.log.error({ err: String(err) }, "applying the kept pod CIDRs failed"));
    }, this.o.rememberedGraceMs ?? 5000);
    this.rememberTimer.unref();
  }

  /** Why there is no CIDR from the Node, for the log. */
  private notReadyReasonWithout(): string {
    return this.apiError ?? (this.nodeSeen === false ? "the Node does not exist" : "no answer");
  }

  private onNode(node: KubeObjectView | undefined): void {
    this.nodeSeen = node !== undefined;
    if (!node) {
      if (this.o.podCidrsGiven) this.log.debug("the Node does not exist");
      else this.log.warn("the Node does not exist (keeping the pod CIDRs known so far)");
      return;
    }
    const meta = node.metadata as { labels?: Record<string, unknown> } | undefined;
    const zone = meta?.labels?.[ZONE_LABEL];
    const facts: NodeFacts = {
      ...nodeIpsOf(node),
      ...(typeof zone === "string" && zone !== "" ? { zone } : {}),
    };
    if (JSON.stringify(facts) !== JSON.stringify(this.facts)) {
      this.facts = facts;
      this.o.onNodeFacts?.();
    }
    if (this.o.podCidrsGiven) return;
    const next = podCidrsOfNode(node);
    if (!hasAny(next)) return;
    if (this.rememberTimer) clearTimeout(this.rememberTimer);
    this.rememberTimer = undefined;
    if (this.o.stateDir) {
      writeRemembered(this.o.stateDir, this.o.nodeName, next).catch((err) =>
        this.log.warn({ err: String(err) }, "keeping the pod CIDRs for the next start failed"),
      );
    }
    if (sameCidrs(next, this.cidrs)) return;
    this.cidrs = next;
    this.log.info({ podCidrs: next }, "pod CIDRs from the Node");
    this.o
      .apply(next)
      .catch((err) => this.log.error({ err: String(err) }, "applying the Node's pod CIDRs failed"));
  }
}
