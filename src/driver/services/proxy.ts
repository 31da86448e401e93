/**
 * Services without kube-proxy: with `"services": "driver"` in driver.json and
 * a network on the kernel datapath, the cluster's Services and EndpointSlices
 * are followed through the API, planned per port and family
 * (src/services/model.ts) and written into `inet cni-driver-services` and
 * its shard tables (ruleset.ts) through kernel-datapath.ts.
 *
 * - Changes: every event marks its Service; a burst of events is one sync,
 *   which rewrites only the marked Services' chains and elements, in one
 *   transaction. The first sync after a start or a switch (or a change of
 *   the node's pod CIDRs, which every block reads) writes the tables whole,
 *   each replacing what an earlier run left, atomically.
 * - Conntrack: after a sync, UDP flows to an endpoint that is no longer used
 *   and to a frontend whose Service went away or just got its first endpoint
 *   are deleted, so the next datagram is load-balanced anew (the stale-DNS
 *   blackhole of kube-proxy's users).
 * - `"services": "kube-proxy"` (the default) or no kernel-datapath network:
 *   nothing followed, the tables removed, no health check port open.
 */
import type pino from "pino";
import { releaseIdleMemory } from "../../common/malloc-trim.js";
import { SerialLoop } from "../../common/serial-loop.js";
import type { SliceView } from "../../services/endpoints.js";
import {
  localEndpointCount,
  type PortPlan,
  planService,
  type ServiceSpec,
  serviceFromApi,
  sliceService,
  slimService,
  slimSlice,
} from "../../services/model.js";
import { kernelDatapathPlugins } from "../builtin/midonet/config.js";
import type { DriverConfig } from "../config/network-config.js";
import type { KubeApi, KubeObjectView, ObjectWatch } from "../kube/api.js";
import type { NodeFacts } from "../kube/node-pod-cidrs.js";
import { FrontendClaims } from "./frontend-claims.js";
import { HairpinRefs } from "./hairpin-refs.js";
import { HealthCheckPorts } from "./health-check.js";
import { kernelServicesDatapath, type ServicesDatapath } from "./kernel-datapath.js";
import { type Block, localEndpointTest, type NodeView, planBlock } from "./ruleset.js";
import { changeScript, fullScriptParts } from "./ruleset-diff.js";
import { readServicesMode } from "./settings.js";

export interface ServiceProxyMetrics {
  servicesSynced(outcome: "ok" | "failed", services: number, ms: number): void;
}

export interface ServiceProxyOptions {
  logger: pino.Logger;
  /** The API when configured (settles undefined when it is not usable). */
  api?: Promise<KubeApi | undefined>;
  /** This node's name: local endpoints are those whose nodeName is it. */
  nodeName?: string;
  /** This node's pod CIDRs (their traffic to node ports is never masqueraded). */
  localPodCidrs?: () => { v4?: string; v6?: string };
  /**
   * This node's own IPs (its Node's InternalIP first), what a load balancer's source
   * ranges are checked against, and its zone, which topology hints name.
   */
  localNode?: () => NodeFacts;
  datapath?: ServicesDatapath;
  metrics?: ServiceProxyMetrics;
}

/** A Service's port plans and their blocks. */
interface Planned {
  plans: PortPlan[];
  blocks: Map<string, Block>;
}

const id = (ns: string | undefined, name: string | undefined) => `${ns ?? ""}/${name ?? ""}`;

export class ServiceProxy {
  private readonly log: pino.Logger;
  private readonly datapath: ServicesDatapath;
  private readonly services = new Map<string, ServiceSpec>();
  /** Service id -> slice namespace/name -> slice. */
  private readonly slices = new Map<string, Map<string, SliceView>>();
  /** Slice namespace/name -> the Service it was filed under. */
  private readonly sliceOwner = new Map<string, string>();
  /** Services whose rules may have to change at the next sync. */
  private dirty = new Set<string>();
  /** Plans and blocks as written to the kernel, per Service; undefined: rewrite the table whole. */
  private written: Map<string, Planned> | undefined;
  private readonly claims = new FrontendClaims();
  private lastConflicts = "[]";
  private readonly hairpin = new HairpinRefs();
  /** The node as the written rules know it (its pod CIDRs): when it changes, all is rewritten. */
  private writtenFor = "";
  private watches: ObjectWatch[] = [];
  private synced = new Set<string>();
  private active = false;
  private switching: Promise<void> = Promise.resolve();
  /** The sync under way, if any. */
  private syncing: Promise<void> = Promise.resolve();
  private stopped = false;
  /** What the kernel held before a write that failed: its UDP flows are cleaned after the retry. */
  private cleanFrom: Map<string, Planned> | undefined;
  private scheduled: NodeJS.Immediate | undefined;
  private readonly loop: SerialLoop;
  private readonly health: HealthCheckPorts;
  private readonly releaseMemory = releaseIdleMemory();

  constructor(private readonly o: ServiceProxyOptions) {
    this.log = o.logger.child({ component: "services" });
    this.datapath = o.datapath ?? kernelServicesDatapath;
    this.health = new HealthCheckPorts(this.log);
    this.loop = new SerialLoop({
      run: () => {
        this.syncing = this.sync();
        return this.syncing;
      },
      retryBackoff: { baseMs: 200, maxMs: 10_000 },
    });
  }

  /** Each config load: on with `"services": "driver"` and a kernel-datapath network, off otherwise. */
  apply(cfg: DriverConfig): Promise<void> {
    this.switching = this.switching.catch(() => undefined).then(() => this.switchTo(cfg));
    return this.switching;
  }

  private async switchTo(cfg: DriverConfig): Promise<void> {
    const mode = readServicesMode(cfg.settings);
    const want = mode === "driver" && kernelDatapathPlugins(cfg.networks.values()).length > 0;
    if (want === this.active) return;
    if (!want) {
      this.log.info(
        mode === "driver"
          ? "no network uses the kernel datapath: Services are MidoNet's, none programmed here"
          : 'services is "kube-proxy": no Service rules programmed by the driver',
      );
      await this.deactivate();
      return;
    }
    const api = await this.o.api;
    if (!api) {
      this.log.warn("no Kubernetes API: Services cannot be known and are not programmed");
      return;
    }
    if (!this.o.nodeName) this.log.warn("no node name: no endpoint counts as local");
    this.active = true;
    this.written = undefined;
    this.log.info("load-balancing Services on the kernel datapath");
    this.follow(api);
  }

  private async deactivate(): Promise<void> {
    this.active = false;
    const watches = this.watches;
    this.watches = [];
    await Promise.all(watches.map((w) => w.stop()));
    // A write under way lands before the table goes, never after.
    await this.syncing;
    this.synced.clear();
    this.services.clear();
    this.slices.clear();
    this.sliceOwner.clear();
    this.cleanFrom = undefined;
    this.dirty.clear();
    this.written = undefined;
    this.hairpin.clear();
    this.claims.clear();
    this.health.close();
    // Whatever an earlier run or mode left: the other mode keeps no rule of ours.
    await this.datapath.deleteTable();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.scheduled) clearImmediate(this.scheduled);
    this.loop.stop();
    const watches = this.watches;
    this.watches = [];
    await Promise.all(watches.map((w) => w.stop()));
    this.health.close();
  }

  private follow(api: KubeApi): void {
    const onSynced = (kind: string) => () => {
      if (!this.synced.has(kind)) this.log.info({ kind }, "listed");
      this.synced.add(kind);
      this.schedule();
    };
    const onError = (kind: string) => (message: string) =>
      this.log.warn({ kind, err: message }, "watch failed; retrying");
    this.watches.push(
      api.watchEach(
        "services",
        {
          upsert: (o) => this.upsertService(o),
          remove: (o) => this.markDirty(id(o.metadata?.namespace, o.metadata?.name), true),
          onSynced: onSynced("services"),
          onError: onError("services"),
        },
        (o) => slimService(o) as KubeObjectView,
      ),
      api.watchEach(
        "endpointslices",
        {
          upsert: (o) => this.upsertSlice(o, false),
          remove: (o) => this.upsertSlice(o, true),
          onSynced: onSynced("endpointslices"),
          onError: onError("endpointslices"),
        },
        // The proxy keeps every slice: only what it reads (100,000 endpoints' API objects were 55 MiB).
        (o) => slimSlice(o) as KubeObjectView,
      ),
    );
  }

  private upsertService(o: KubeObjectView): void {
    const key = id(o.metadata?.namespace, o.metadata?.name);
    const spec = serviceFromApi(o);
    if (spec) this.services.set(key, spec);
    this.markDirty(key, !spec);
  }

  /**
   * A slice is known by namespace/name: a removal may carry nothing else (no
   * labels), and a relabelled slice moves from its old Service to its new one.
   */
  private upsertSlice(o: KubeObjectView, removed: boolean): void {
    const sliceId = id(o.metadata?.namespace, o.metadata?.name);
    const was = this.sliceOwner.get(sliceId);
    const owner = removed ? undefined : sliceService(o);
    const key = owner ? id(owner.namespace, owner.name) : undefined;
    if (was !== undefined && was !== key) {
      const m = this.slices.get(was);
      m?.delete(sliceId);
      if (m?.size === 0) this.slices.delete(was);
      this.sliceOwner.delete(sliceId);
      this.markDirty(was, false);
    }
    if (key === undefined) return;
    const slices = this.slices.get(key) ?? new Map<string, SliceView>();
    this.slices.set(key, slices);
    slices.set(sliceId, o as unknown as SliceView);
    this.sliceOwner.set(sliceId, key);
    this.markDirty(key, false);
  }

  private markDirty(key: string, serviceGone: boolean): void {
    if (serviceGone) this.services.delete(key);
    this.dirty.add(key);
    this.schedule();
  }

  private schedule(): void {
    if (!this.active || this.scheduled) return;
    this.scheduled = setImmediate(() => {
      this.scheduled = undefined;
      this.loop.restart();
    });
  }

  /**
   * This node's pod CIDRs, IPs or zone may have changed (a config reload, the Node):
   * the next sync compares what the rules were written for and rewrites them if so.
   */
  nodeChanged(): void {
    if (this.active && JSON.stringify(this.node()) !== this.writtenFor) this.schedule();
  }

  private node(): NodeView {
    const c = this.o.localPodCidrs?.() ?? {};
    const n = this.o.localNode?.() ?? {};
    return {
      podCidrs: { 4: c.v4 ? [c.v4] : [], 6: c.v6 ? [c.v6] : [] },
      nodeIps: { ...(n.ipv4 ? { 4: n.ipv4 } : {}), ...(n.ipv6 ? { 6: n.ipv6 } : {}) },
      ...(n.zone ? { zone: n.zone } : {}),
    };
  }

  private plan(key: string): Planned | undefined {
    const svc = this.services.get(key);
    if (!svc) return undefined;
    const node = this.node();
    const plans = planService(svc, [...(this.slices.get(key)?.values() ?? [])], {
      name: this.o.nodeName ?? "",
      ...(node.zone ? { zone: node.zone } : {}),
    });
    return { plans, blocks: new Map(plans.map((p) => [p.key, planBlock(p, node)])) };
  }

  private async sync(): Promise<void> {
    if (!this.active || this.synced.size < 2) return this.loop.succeeded();
    const t0 = performance.now();
    const dirty = this.dirty;
    this.dirty = new Set();
    const node = this.node();
    // Every block depends on the node's pod CIDRs, IPs and zone: a change of any rewrites all.
    if (JSON.stringify(node) !== this.writtenFor) this.written = undefined;
    const first = this.written === undefined;
    const before = this.written ?? new Map();
    const after = new Map(before);
    const affected = this.replan(first ? [...this.services.keys()] : [...dirty], first, after);
    const isLocal = localEndpointTest(this.o.nodeName ?? "", node.podCidrs);
    let script = "";
    let whole: Iterable<string> | undefined;
    let commitHairpin = () => {};
    if (first)
      whole = fullScriptParts(
        [...after.values()].flatMap((p) => [...p.blocks.values()]),
        this.hairpin.reset(
          [...after.values()].flatMap((p) => p.plans),
          isLocal,
        ),
      );
    else {
      const current = new Map<string, Block>();
      const changed = new Map<string, Block | undefined>();
      for (const key of affected) {
        for (const [k, b] of before.get(key)?.blocks ?? []) {
          current.set(k, b);
          changed.set(k, undefined);
        }
        for (const [k, b] of after.get(key)?.blocks ?? []) changed.set(k, b);
      }
      const plansOf = (m: Map<string, Planned>) =>
        [...affected].flatMap((key) => m.get(key)?.plans ?? []);
      const hp = this.hairpin.change(plansOf(before), plansOf(after), isLocal);
      commitHairpin = hp.commit;
      script = changeScript(current, changed, { before: hp.gone, after: hp.added });
    }
    try {
      if (whole && this.datapath.applyWhole) await this.datapath.applyWhole(whole);
      else if (whole) await this.datapath.applyScript([...whole].join(""));
      else if (script) await this.datapath.applyScript(script);
    } catch (err) {
      // Rewritten whole at the retry: the kernel may hold either state.
      if (!first) this.cleanFrom ??= before;
      this.written = undefined;
      for (const k of affected) this.dirty.add(k);
      const retryInMs = this.loop.failed();
      this.o.metrics?.servicesSynced("failed", after.size, performance.now() - t0);
      this.log.error({ err: String(err), retryInMs }, "cannot write the Service rules");
      return;
    }
    if (this.stopped || !this.active) return;
    this.written = after;
    this.writtenFor = JSON.stringify(node);
    commitHairpin();
    this.loop.succeeded();
    this.o.metrics?.servicesSynced("ok", after.size, performance.now() - t0);
    this.log.debug(
      { services: after.size, changed: first ? "all" : affected.size, ms: performance.now() - t0 },
      "Service rules written",
    );
    // A whole table's script and the plans it was made of are garbage once this returns: collected
    // and handed back then (glibc keeps freed pages unless asked), not at the next quiet RPC spell.
    if (first) setImmediate(this.releaseMemory);
    this.updateHealthChecks();
    // After a failed write, the flows of what the kernel held before it.
    const base = this.cleanFrom ?? (first ? undefined : before);
    this.cleanFrom = undefined;
    if (base)
      await this.cleanFlows(
        base,
        after,
        first ? new Set([...base.keys(), ...after.keys()]) : affected,
      );
  }

  /**
   * Plans `keys` into `after` (a Service gone is removed), with each map key
   * written by the one Service that owns it; a Service that takes a frontend
   * over from another is planned again too. Answers every Service planned.
   */
  private replan(keys: string[], first: boolean, after: Map<string, Planned>): Set<string> {
    if (first) this.claims.clear();
    const todo = [...keys].sort();
    const planned = new Map<string, Planned | undefined>();
    // Each Service once: a takeover adds the new owner, who has not been planned yet.
    for (let i = 0; i < todo.length; i++) {
      const key = todo[i] as string;
      if (planned.has(key)) continue;
      const p = this.plan(key);
      planned.set(key, p);
      for (const other of this.claims.set(key, p?.blocks.values()))
        if (!planned.has(other)) todo.push(other);
    }
    for (const [key, p] of planned) {
      if (!p) after.delete(key);
      else
        after.set(key, {
          plans: p.plans,
          blocks: new Map([...p.blocks].map(([k, b]) => [k, this.claims.filter(key, b)])),
        });
    }
    const conflicts = JSON.stringify(this.claims.conflicts());
    if (conflicts !== this.lastConflicts && conflicts !== "[]")
      this.log.warn(
        { conflicts: this.claims.conflicts() },
        "Services claim the same address and port; the first by namespace/name gets it",
      );
    this.lastConflicts = conflicts;
    return new Set(planned.keys());
  }

  private updateHealthChecks(): void {
    const wanted = new Map<number, { namespace: string; name: string; localEndpoints: number }>();
    for (const [key, svc] of this.services) {
      if (!svc.externalLocal || !svc.healthCheckNodePort) continue;
      const plans = this.written?.get(key)?.plans ?? [];
      wanted.set(svc.healthCheckNodePort, {
        namespace: svc.namespace,
        name: svc.name,
        localEndpoints: localEndpointCount(plans, this.o.nodeName ?? ""),
      });
    }
    this.health.update(wanted);
  }

  /** UDP flows that would keep datagrams on an endpoint or a frontend the new rules no longer lead them to. */
  private async cleanFlows(
    before: ReadonlyMap<string, { plans: PortPlan[] }>,
    after: ReadonlyMap<string, { plans: PortPlan[] }>,
    dirty: ReadonlySet<string>,
  ): Promise<void> {
    const goneEndpoints = new Set<string>();
    const staleFrontends = new Set<string>();
    for (const key of dirty) {
      const old = before.get(key)?.plans.filter((p) => p.protocol === "udp") ?? [];
      const now = new Map(
        (after.get(key)?.plans ?? []).filter((p) => p.protocol === "udp").map((p) => [p.key, p]),
      );
      for (const p of old) {
        const n = now.get(p.key);
        const kept = new Set(
          [...(n?.internal ?? []), ...(n?.external ?? [])].map((e) => `${e.ip}|${e.port}`),
        );
        for (const e of [...p.internal, ...p.external])
          if (!kept.has(`${e.ip}|${e.port}`)) goneEndpoints.add(`${e.ip}|${e.port}`);
        // Gone, or rejected until now: a flow of the reject would hold the next datagrams.
        if (!n || (p.reject && !n.reject))
          for (const ip of [...p.clusterIps, ...p.externalIps])
            staleFrontends.add(`${ip}|${p.port}`);
      }
      for (const n of now.values())
        if (!old.some((p) => p.key === n.key))
          for (const ip of [...n.clusterIps, ...n.externalIps])
            staleFrontends.add(`${ip}|${n.port}`);
    }
    if (goneEndpoints.size === 0 && staleFrontends.size === 0) return;
    try {
      const flows = await this.datapath.listFlows();
      let n = 0;
      for (const f of flows) {
        if (f.protocol !== "udp") continue;
        const toGone =
          goneEndpoints.has(`${f.reply.src}|${f.reply.sport}`) && f.original.dst !== f.reply.src;
        if (!toGone && !staleFrontends.has(`${f.original.dst}|${f.original.dport}`)) continue;
        await this.datapath.deleteFlow(f);
        n++;
      }
      if (n > 0) this.log.debug({ flows: n }, "stale UDP flows deleted");
    } catch (err) {
      this.log.warn({ err: String(err) }, "cannot delete stale UDP flows");
    }
  }
}
