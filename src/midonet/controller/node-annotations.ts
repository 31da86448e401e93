/**
 * Each Node's MidoNet identity, written onto the Node: the host the MidoNet
 * agent on it registered (found in GET /hosts by the node's name, as the
 * original integration's host resolver did), the tunnel zone it joins and the
 * address it tunnels from. The mapping reads these annotations back, so a node
 * is wired once its host is known, and an operator can see (or override) what
 * the controller chose.
 *
 * - midonet.org/host-id: the host named like the node; rewritten if MidoNet
 *   reports another id (an agent re-registered after a reinstall), never
 *   removed (a node whose host name differs keeps an id set by hand).
 * - midonet.org/tunnel-zone-id: our default tunnel zone, when absent.
 * - midonet.org/tunnel-endpoint-ip: the first IPv4 InternalIP, when absent.
 *   Present annotations are the operator's choice and stay; removing one lets
 *   the controller fill it again.
 * - midonet.org/tunnel-zone-joined: the zone the reconciler last joined the
 *   node's host to, written when it asks (TunnelZoneRecords in
 *   reconcile-writes.ts): before it POSTs a membership, and after it deleted
 *   the one named. Not the operator's: it is how a restart finds a membership
 *   in a zone the node was moved out of while the controller was down.
 *
 * Nothing is written for a node whose host MidoNet does not know (yet): the
 * host list is read again every refresh period while such a node exists.
 * Patches are JSON merge patches of these keys alone, so nothing else on the
 * Node is touched and no resourceVersion conflict can occur.
 */
import { isIPv4 } from "node:net";
import { type CoreV1Api, PatchStrategy, setHeaderOptions } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { messageOf } from "../../common/errors.js";
import { describeKubeError } from "../../common/kube-errors.js";
import type { MidonetClient } from "../api.js";
import { isUuid } from "../ids.js";
import type { Node } from "../mapping/k8s.js";
import { nodeHostId } from "../mapping/node.js";
import {
  ANNOTATION_HOST_ID,
  ANNOTATION_TUNNEL_ENDPOINT_IP,
  ANNOTATION_TUNNEL_ZONE_ID,
  ANNOTATION_TUNNEL_ZONE_JOINED,
} from "../node-contract.js";
import type { TunnelZoneRecords } from "../reconciler.js";

/** The node fields read here (a V1Node fits). */
export interface AnnotatedNode {
  metadata?: { name?: string; annotations?: Record<string, string> | null };
  status?: { addresses?: readonly { type: string; address: string }[] | null } | null;
}

/**
 * The annotations to set on `node`, given the hosts MidoNet knows by name;
 * undefined when there is nothing to write (or its host is not known).
 */
// Exported for its tests only (unit/midonet-controller.test.ts).
export function nodeAnnotationPatch(
  node: AnnotatedNode,
  hostsByName: ReadonlyMap<string, string>,
  defaultTunnelZone: string,
): Record<string, string> | undefined {
  const name = node.metadata?.name;
  if (!name) return undefined;
  const hostId = hostsByName.get(name);
  if (!hostId) return undefined;
  const current = node.metadata?.annotations ?? {};
  const patch: Record<string, string> = {};
  if (current[ANNOTATION_HOST_ID]?.trim().toLowerCase() !== hostId.toLowerCase()) {
    patch[ANNOTATION_HOST_ID] = hostId.toLowerCase();
  }
  if (!current[ANNOTATION_TUNNEL_ZONE_ID]?.trim()) {
    patch[ANNOTATION_TUNNEL_ZONE_ID] = defaultTunnelZone;
  }
  if (!current[ANNOTATION_TUNNEL_ENDPOINT_IP]?.trim()) {
    const ip = node.status?.addresses?.find((a) => a.type === "InternalIP" && isIPv4(a.address));
    if (ip) patch[ANNOTATION_TUNNEL_ENDPOINT_IP] = ip.address;
  }
  return Object.keys(patch).length > 0 ? patch : undefined;
}

/** The zone a node's record names (lowercase); undefined when none or not a UUID. */
// Exported for its tests only (unit/midonet-controller.test.ts).
export function recordedTunnelZone(node: AnnotatedNode | undefined): string | undefined {
  const text = node?.metadata?.annotations?.[ANNOTATION_TUNNEL_ZONE_JOINED]?.trim();
  return text && isUuid(text) ? text.toLowerCase() : undefined;
}

export interface NodeAnnotatorOptions {
  core: CoreV1Api;
  midonet: MidonetClient;
  defaultTunnelZone: string;
  /** The node as the informer has it now. */
  getNode: (name: string) => AnnotatedNode | undefined;
  /** Every node the informer has. */
  listNodes: () => readonly AnnotatedNode[];
  /** How often to look again while a node waits for its host or a patch failed. Default 30 s. */
  refreshMs?: number;
  logger?: Pick<Logger, "info" | "warn" | "debug">;
  onPatch?: (outcome: "ok" | "error") => void;
  onError?: (what: "hosts" | "patch", err: unknown) => void;
}

const mergePatch = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);

/**
 * Keeps every Node's MidoNet annotations written, and its tunnel zone record
 * as the reconciler asks (run by the leader only).
 */
export class NodeAnnotator implements TunnelZoneRecords {
  private readonly o: NodeAnnotatorOptions;
  private readonly pending = new Set<string>();
  /** Records written, until the informer shows them (null: removed). */
  private readonly written = new Map<string, string | null>();
  private hosts = new Map<string, string>();
  private hostsReadAt = Number.NEGATIVE_INFINITY;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = true;

  constructor(options: NodeAnnotatorOptions) {
    this.o = options;
  }

  private get refreshMs(): number {
    return this.o.refreshMs ?? 30_000;
  }

  /** Starts with every node the informer has. */
  start(): void {
    this.stopped = false;
    for (const n of this.o.listNodes()) if (n.metadata?.name) this.pending.add(n.metadata.name);
    this.schedule(0);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
  }

  /** A node was added or changed: look at it soon. */
  nodeChanged(name: string): void {
    const node = this.o.getNode(name);
    if (this.written.has(name) && (recordedTunnelZone(node) ?? null) === this.written.get(name)) {
      this.written.delete(name); // the informer caught up with our write
    }
    if (this.stopped) return;
    // Nothing to do by what is known already: skip (node status updates are frequent).
    if (
      node &&
      this.hosts.has(name) &&
      !nodeAnnotationPatch(node, this.hosts, this.o.defaultTunnelZone)
    ) {
      return;
    }
    this.pending.add(name);
    this.schedule(0);
  }

  nodeDeleted(name: string): void {
    this.pending.delete(name);
    this.written.delete(name);
  }

  zoneOf(name: string): string | undefined {
    const written = this.written.get(name);
    if (written !== undefined) return written ?? undefined;
    return recordedTunnelZone(this.o.getNode(name));
  }

  *all(): Iterable<{ node: string; zone: string; hostId: string }> {
    for (const n of this.o.listNodes()) {
      const name = n.metadata?.name;
      const zone = name && this.zoneOf(name);
      const hostId = zone && nodeHostId(n as Node);
      if (name && zone && hostId) yield { node: name, zone, hostId };
    }
  }

  async write(name: string, zone: string | undefined): Promise<void> {
    if (this.stopped)
      throw new Error(`not leading: the tunnel zone record of node ${name} not written`);
    try {
      await this.patch(name, { [ANNOTATION_TUNNEL_ZONE_JOINED]: zone ?? null });
    } catch (err) {
      this.o.onError?.("patch", err);
      throw new Error(`recording the tunnel zone of node ${name}: ${describeKubeError(err)}`);
    }
    this.written.set(name, zone ?? null);
    this.o.logger?.info({ node: name, zone: zone ?? null }, "recorded the node's tunnel zone");
  }

  /** A JSON merge patch of these annotations alone (null removes one): no conflict can occur. */
  private async patch(name: string, annotations: Record<string, string | null>): Promise<void> {
    await this.o.core.patchNode({ name, body: { metadata: { annotations } } }, mergePatch);
  }

  private schedule(delayMs: number): void {
    if (this.stopped) return;
    if (this.timer !== undefined && delayMs > 0) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      if (this.running) {
        this.schedule(100); // after the run in progress
        return;
      }
      this.running = this.run().finally(() => {
        this.running = undefined;
      });
    }, delayMs);
  }

  private async run(): Promise<void> {
    const names = [...this.pending];
    if (names.length === 0) return;
    const unknown = names.some((n) => !this.hosts.has(n));
    if (unknown && Date.now() - this.hostsReadAt >= Math.min(this.refreshMs, 1000)) {
      try {
        const hosts = await this.o.midonet.hosts.list();
        this.hosts = new Map(hosts.map((h) => [h.name, h.id]));
        this.hostsReadAt = Date.now();
      } catch (err) {
        this.o.onError?.("hosts", err);
        this.o.logger?.warn({ err: messageOf(err) }, "listing MidoNet hosts failed");
      }
    }
    for (const name of names) {
      if (this.stopped) return;
      const node = this.o.getNode(name);
      if (!node) {
        this.pending.delete(name);
        continue;
      }
      if (!this.hosts.has(name)) continue; // not registered in MidoNet yet: look again later
      const patch = nodeAnnotationPatch(node, this.hosts, this.o.defaultTunnelZone);
      if (!patch) {
        this.pending.delete(name);
        continue;
      }
      try {
        await this.patch(name, patch);
        this.pending.delete(name);
        this.o.onPatch?.("ok");
        this.o.logger?.info(
          { node: name, annotations: patch },
          "annotated node with its MidoNet host",
        );
      } catch (err) {
        this.o.onPatch?.("error");
        this.o.onError?.("patch", err);
        this.o.logger?.warn(
          { node: name, err: describeKubeError(err) },
          "annotating node failed; will retry",
        );
      }
    }
    if (this.pending.size > 0) this.schedule(this.refreshMs);
  }
}
