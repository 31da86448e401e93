/**
 * NetworkPolicy on the kernel datapath: the cluster's pods, namespaces and
 * policies followed through the API into the policy model (src/policy), this
 * node's pods registered by the midonet plugin as it sets them up, and the
 * two turned into the `inet cni-driver-policy` table (ruleset.ts).
 *
 * - In force at setup: the plugin calls `attach` after IPAM and before the
 *   pod's addresses are configured and its link is up, and `attach` returns
 *   once the pod's rules are in the kernel: no packet of a new pod passes
 *   unchecked. A pod the pod watch has not seen yet is read with one GET.
 * - Changes: every event schedules a sync (batched: a burst is one sync);
 *   each sync writes only the sets, chains and verdicts that changed, in one
 *   transaction, then cuts the tracked connections the new rules no longer
 *   allow (conntrack), so a denied connection stops instead of running on as
 *   "established".
 * - Unknown: a pod whose labels are not known while a policy exists in its
 *   namespace, or any pod while the policies themselves are not known yet,
 *   gets driver.json's `networkPolicyUnknownPods` ("deny" by default: nothing
 *   forwarded to or from it; its node still reaches it).
 * - Until the first sync after a start, the table the last run left keeps
 *   enforcing: it is rewritten whole at the first sync (or the first ADD).
 */
import type pino from "pino";
import { podIdentityFromArgs } from "../../cni/args.js";
import { toResult100 } from "../../cni/result-convert.js";
import { parseResult } from "../../cni/result-read.js";
import type { Result100 } from "../../cni/types.js";
import type { BackoffPolicy } from "../../common/backoff.js";
import { SerialLoop } from "../../common/serial-loop.js";
import { HOST_VETH_PREFIX } from "../../midonet/host-veth-name.js";
import { conntrackBackendName } from "../../plumbing/conntrack.js";
import { NftError, nftBackendName } from "../../plumbing/nftables.js";
import {
  namespaceFromApi,
  networkPolicyFromApi,
  podFromApi,
  podPlacement,
} from "../../policy/from-api.js";
import { PolicyModel } from "../../policy/model.js";
import type { PolicyPod } from "../../policy/types.js";
import { kernelDatapathPlugins } from "../builtin/midonet/config.js";
import type { DriverConfig } from "../config/network-config.js";
import type { FollowedCollection, KubeApi, KubeObjectView, ObjectWatch } from "../kube/api.js";
import { ConnectionCuts, type PodJudge } from "./connection-cuts.js";
import { kernelPolicyDatapath, type PolicyDatapath } from "./datapath.js";
import {
  buildRuleset,
  enforcesNothing,
  type LocalPodRules,
  type PodStanding,
  type Ruleset,
} from "./ruleset.js";
import {
  type Command,
  diffCommands,
  elementsOnly,
  fullScript,
  keepIdle,
  scriptOf,
} from "./ruleset-commands.js";
import { type NetworkPolicySettings, readNetworkPolicySettings } from "./settings.js";

/** A pod of this node, as the midonet plugin set it up. */
export interface LocalPod {
  hostIf: string;
  /** The Kubernetes pod, when the runtime named one. */
  namespace?: string;
  name?: string;
  ips: string[];
}

/** What the midonet plugin calls while it sets a pod up and tears it down. */
export interface PodPolicyHook {
  /** Resolves once the pod's rules are in force. */
  attach(pod: LocalPod): Promise<void>;
  detach(hostIf: string): Promise<void>;
}

export interface NetworkPolicyMetrics {
  networkPolicySynced(outcome: "ok" | "failed", changes: number): void;
  networkPolicyConnectionsCut(n: number): void;
}

/** How long chains and sets no pod uses are kept before they are collected. */
const IDLE_COLLECT_MS = 30_000;
/** How many of them are collected at once, without waiting. */
const IDLE_LIMIT = 1_000;

export interface NetworkPolicyOptions {
  logger: pino.Logger;
  /** Default: the kernel (nft, conntrack, ip). */
  datapath?: PolicyDatapath;
  /** The API when configured (settles undefined when it is not usable); without it nothing is enforced. */
  api?: Promise<KubeApi | undefined>;
  /** Bound on the GET of a new pod at setup (default 1 s). */
  podReadTimeoutMs?: number;
  /** Between failed syncs (default 200 ms doubling to 10 s). */
  retryBackoff?: BackoffPolicy;
  metrics?: NetworkPolicyMetrics;
}

/** A cached attachment as recovery lists it: enough to know the pod's host end and addresses. */
export interface CachedPodAttachment {
  cniArgs?: [string, string][];
  result?: Record<string, unknown>;
}

/** This node's pods from the result cache, as the enforcer needs them at start. */
export function localPodsFromCache(entries: readonly CachedPodAttachment[]): LocalPod[] {
  const out: LocalPod[] = [];
  for (const e of entries) {
    let result: Result100;
    try {
      // The cache's result in whatever version it was written; read as the 1.x shape.
      result = toResult100(parseResult(e.result));
    } catch {
      continue;
    }
    const host = result.interfaces?.find((i) => i.name.startsWith(HOST_VETH_PREFIX) && !i.sandbox);
    if (!host) continue;
    const pod = podIdentityFromArgs(e.cniArgs ?? []);
    out.push({
      hostIf: host.name,
      ips: (result.ips ?? []).map((ip) => ip.address.split("/")[0] as string),
      ...(pod.namespace && pod.name ? { namespace: pod.namespace, name: pod.name } : {}),
    });
  }
  return out;
}

export class NetworkPolicyEnforcer implements PodPolicyHook {
  private readonly log: pino.Logger;
  private readonly model = new PolicyModel();
  private readonly local = new Map<string, LocalPod>();
  private settings: NetworkPolicySettings = { enabled: false, unknownPods: "deny" };
  private active = false;
  private watches: ObjectWatch[] = [];
  private readonly synced = new Set<FollowedCollection>();
  /** What the kernel has, as last written; undefined: not known (rewrite it whole). */
  private applied: Ruleset | undefined;
  private readonly loop: SerialLoop;
  /** Callers waiting for the next sync to end (ADD and DEL). */
  private waiters: Array<{ resolve(): void; reject(e: unknown): void }> = [];
  private nextWaiters: Array<{ resolve(): void; reject(e: unknown): void }> = [];
  private scheduled: NodeJS.Immediate | undefined;
  private closed = false;
  /** An API event came since the last sync started: connections may have to be cut. */
  private apiChanged = false;
  /** Chains and sets no pod uses are to go at the next sync no pod waits for. */
  private collectDue = false;
  private collectTimer: NodeJS.Timeout | undefined;
  /** The config loads being applied, in order. */
  private switching: Promise<void> = Promise.resolve();

  private readonly datapath: PolicyDatapath;
  private readonly cuts: ConnectionCuts;

  constructor(private readonly o: NetworkPolicyOptions) {
    this.log = o.logger.child({ component: "network-policy" });
    this.datapath = o.datapath ?? kernelPolicyDatapath;
    this.cuts = new ConnectionCuts({
      datapath: this.datapath,
      log: this.log,
      judges: () => this.judges(),
      cut: (n) => o.metrics?.networkPolicyConnectionsCut(n),
      closed: () => this.closed,
    });
    this.loop = new SerialLoop({
      run: () => this.sync(),
      retryBackoff: o.retryBackoff ?? { baseMs: 200, maxMs: 10_000 },
    });
  }

  /**
   * Each config load: on with the kernel datapath unless driver.json says
   * `"networkPolicy": false`. Loads are applied in order; an ADD waits for the
   * one under way, so no pod is set up in the gap before the first.
   */
  apply(cfg: DriverConfig): Promise<void> {
    this.switching = this.switching.catch(() => undefined).then(() => this.switchTo(cfg));
    return this.switching;
  }

  private async switchTo(cfg: DriverConfig): Promise<void> {
    const settings = readNetworkPolicySettings(cfg.settings);
    const kernel = kernelDatapathPlugins(cfg.networks.values()).length > 0;
    const want = settings.enabled && kernel;
    this.settings = settings;
    if (want === this.active) {
      if (want) this.schedule();
      return;
    }
    if (!want) {
      this.log.info(
        settings.enabled
          ? "no network uses the kernel datapath: NetworkPolicy is the MidoNet agent's, nothing enforced here"
          : "networkPolicy is false: NetworkPolicy not enforced",
      );
      await this.deactivate();
      return;
    }
    const api = await this.o.api;
    if (!api) {
      this.log.warn("no Kubernetes API: NetworkPolicy cannot be known and is not enforced");
      return;
    }
    this.active = true;
    this.log.info(
      {
        unknownPods: settings.unknownPods,
        nftables: nftBackendName(),
        conntrack: conntrackBackendName(),
      },
      "enforcing NetworkPolicy on the kernel datapath",
    );
    this.follow(api);
  }

  /** At start, before serving: the pods this node already has (from the result cache). */
  seed(pods: readonly LocalPod[]): void {
    for (const p of pods) this.local.set(p.hostIf, p);
  }

  async attach(pod: LocalPod): Promise<void> {
    this.local.set(pod.hostIf, pod);
    await this.switching.catch(() => undefined);
    if (!this.active) return;
    const t0 = performance.now();
    const read = !!pod.namespace && !!pod.name && !this.model.pod(pod.namespace, pod.name);
    if (read) await this.readPod(pod.namespace as string, pod.name as string);
    const t1 = performance.now();
    this.mergeLocalIps(pod);
    await this.syncNow();
    this.log.debug(
      { hostIf: pod.hostIf, readMs: read ? t1 - t0 : undefined, syncMs: performance.now() - t1 },
      "pod's rules in force",
    );
  }

  async detach(hostIf: string): Promise<void> {
    if (!this.local.delete(hostIf)) return;
    await this.switching.catch(() => undefined);
    if (!this.active) return;
    await this.syncNow();
  }

  async stop(): Promise<void> {
    this.closed = true;
    if (this.scheduled) clearImmediate(this.scheduled);
    clearTimeout(this.collectTimer);
    this.loop.stop();
    const watches = this.watches;
    this.watches = [];
    await Promise.all(watches.map((w) => w.stop()));
  }

  // --- following the API ---

  private follow(api: KubeApi): void {
    const onSynced = (kind: FollowedCollection) => () => {
      if (!this.synced.has(kind)) this.log.info({ kind }, "listed");
      this.synced.add(kind);
      this.schedule();
    };
    const onError = (kind: FollowedCollection) => (message: string) =>
      this.log.warn({ kind, err: message }, "watch failed; retrying");
    this.watches.push(
      api.watchEach(
        "namespaces",
        {
          upsert: (o) => {
            this.model.upsertNamespace(namespaceFromApi(o));
            this.schedule();
          },
          remove: (o) => {
            this.model.deleteNamespace(o.metadata?.name ?? "");
            this.schedule();
          },
          onSynced: onSynced("namespaces"),
          onError: onError("namespaces"),
        },
        slimNamespace,
      ),
      api.watchEach("networkpolicies", {
        upsert: (o) => {
          const problem = this.model.upsertPolicy(networkPolicyFromApi(o));
          if (problem)
            this.log.error(
              { policy: problem.policy, reason: problem.reason },
              "NetworkPolicy cannot be applied as written: it isolates what it selects and allows nothing of its own; the others keep working",
            );
          this.schedule();
        },
        remove: (o) => {
          this.model.deletePolicy(o.metadata?.namespace ?? "", o.metadata?.name ?? "");
          this.schedule();
        },
        onSynced: onSynced("networkpolicies"),
        onError: onError("networkpolicies"),
      }),
      api.watchEach(
        "pods",
        {
          upsert: (o) => {
            // An event that changes nothing the policies read (annotations, conditions) is no sync.
            if (this.model.upsertPod(this.withLocalIps((o as PodView).pod))) this.schedule();
          },
          remove: (o) => {
            this.model.deletePod(o.metadata?.namespace ?? "", o.metadata?.name ?? "");
            this.schedule();
          },
          onSynced: onSynced("pods"),
          onError: onError("pods"),
        },
        podView,
      ),
    );
  }

  private upsertApiPod(o: KubeObjectView): void {
    this.model.upsertPod(this.withLocalIps(modelPod(o)));
  }

  /** The addresses this node gave the pod, when the API does not list them yet (kubelet writes them after ADD). */
  private withLocalIps(pod: PolicyPod): PolicyPod {
    if (pod.ips.length > 0) return pod;
    for (const lp of this.local.values()) {
      if (lp.namespace === pod.namespace && lp.name === pod.name) return { ...pod, ips: lp.ips };
    }
    return pod;
  }

  private mergeLocalIps(pod: LocalPod): void {
    if (!pod.namespace || !pod.name) return;
    const known = this.model.pod(pod.namespace, pod.name);
    if (known && known.ips.length === 0) this.model.upsertPod({ ...known, ips: pod.ips });
  }

  private async readPod(namespace: string, name: string): Promise<void> {
    const api = await this.o.api;
    if (!api) return;
    let timer: NodeJS.Timeout | undefined;
    try {
      const obj = await Promise.race([
        api.readPod({ namespace, name }),
        new Promise<undefined>((resolve) => {
          timer = setTimeout(() => resolve(undefined), this.o.podReadTimeoutMs ?? 1000);
        }),
      ]);
      if (obj && !this.model.pod(namespace, name)) this.upsertApiPod(obj);
    } catch (err) {
      this.log.warn(
        { pod: `${namespace}/${name}`, err: String(err) },
        "cannot read the pod's labels: it gets networkPolicyUnknownPods until the pod watch has it",
      );
    } finally {
      clearTimeout(timer);
    }
  }

  // --- syncing ---

  /** Whether the policies (and the namespaces their selectors read) are known. */
  private get policiesKnown(): boolean {
    return this.synced.has("networkpolicies") && this.synced.has("namespaces");
  }

  private standingOf(lp: LocalPod): PodStanding {
    if (!lp.namespace || !lp.name) return { kind: "open" };
    const unknown: PodStanding =
      this.settings.unknownPods === "deny" ? { kind: "deny" } : { kind: "open" };
    if (!this.policiesKnown) return unknown;
    const pod = this.model.pod(lp.namespace, lp.name);
    if (!pod) return this.model.hasPolicies(lp.namespace) ? unknown : { kind: "open" };
    // Addresses play no part in what a pod may do: the model's own object keeps its answer cached.
    const policy = this.model.podPolicy(pod);
    return policy.ingress || policy.egress ? { kind: "policy", policy } : { kind: "open" };
  }

  private schedule(): void {
    // Only what the API says can take away what a connection had: a pod set up or torn
    // down on this node changes no other pod's rules (a new pod has no connections yet).
    this.apiChanged = true;
    if (!this.active || this.closed || this.scheduled) return;
    // One sync for a burst of events (a relist delivers thousands at once).
    this.scheduled = setImmediate(() => {
      this.scheduled = undefined;
      this.loop.restart();
    });
  }

  /** A sync that starts after now; resolves when it has applied, rejects when it failed. */
  private syncNow(): Promise<void> {
    return new Promise((resolve, reject) => {
      this.nextWaiters.push({ resolve, reject });
      this.loop.restart();
    });
  }

  private async sync(): Promise<void> {
    if (!this.active) return;
    const waiters = this.nextWaiters;
    this.nextWaiters = [];
    this.waiters.push(...waiters);
    const apiChanged = this.apiChanged;
    this.apiChanged = false;
    try {
      const pods: LocalPodRules[] = [...this.local.values()].map((lp) => ({
        ips: lp.ips,
        standing: this.standingOf(lp),
      }));
      // Until the policies are known and no pod is waiting, the last run's table keeps enforcing.
      if (!this.applied && !this.policiesKnown && waiters.length === 0) return;
      const t0 = performance.now();
      const next = buildRuleset(this.model, pods);
      // What no pod uses is collected off the path of a pod's setup and teardown.
      const collect = this.collectDue && waiters.length === 0;
      const idle = this.applied && !collect ? keepIdle(this.applied, next) : 0;
      const commands = this.applied ? diffCommands(this.applied, next) : undefined;
      const t1 = performance.now();
      const written = await this.write(commands, next);
      this.log.debug(
        {
          buildMs: t1 - t0,
          writeMs: performance.now() - t1,
          commands: commands?.length ?? "whole table",
          written,
          idle,
          waiters: this.waiters.length,
        },
        "policy sync",
      );
      if (written) {
        this.applied = next;
        if (collect) this.collectDue = false;
        this.collectLater(idle);
        // Off the sync's path: the next change is written while connections are cut.
        if (this.policiesKnown && apiChanged) this.cuts.soon();
      }
      this.o.metrics?.networkPolicySynced("ok", commands?.length ?? 1);
      for (const w of this.waiters) w.resolve();
      this.waiters = [];
      this.loop.succeeded();
    } catch (err) {
      const retryInMs = this.loop.failed();
      this.log.error({ err: String(err), retryInMs }, "cannot apply NetworkPolicy; retrying");
      this.o.metrics?.networkPolicySynced("failed", 0);
      // Retried: what it should have cut is still to cut.
      this.apiChanged ||= apiChanged;
      for (const w of this.waiters) w.reject(err);
      this.waiters = [];
    }
  }

  /**
   * Writes one transaction (the whole table when `commands` is undefined):
   * element changes straight to the kernel when that is all it is, else nft
   * text. Answers how, or false when there was nothing to write, or nothing
   * to write it to and nothing to enforce (no nftables: no table was ever
   * made). Any other failure throws, and the next attempt rewrites the table
   * whole.
   */
  private async write(
    commands: Command[] | undefined,
    next: Ruleset,
  ): Promise<"elements" | "text" | false> {
    if (commands?.length === 0) return false;
    try {
      const elements = commands && elementsOnly(commands);
      if (elements && (await this.datapath.applyElements(elements))) return "elements";
      await this.datapath.applyScript(commands ? scriptOf(commands) : fullScript(next));
      return "text";
    } catch (err) {
      this.applied = undefined;
      if (!(err instanceof NftError && err.missingTool && enforcesNothing(next))) throw err;
      this.log.warn({ err: err.message }, "nftables is not installed; no pod is isolated yet");
      return false;
    }
  }

  /**
   * Chains and sets no pod uses are kept for a while (`keepIdle`), then
   * collected by a sync of their own: at once when there are many, else
   * after IDLE_COLLECT_MS.
   */
  private collectLater(idle: number): void {
    if (idle === 0 || this.collectDue) return;
    if (idle >= IDLE_LIMIT) {
      this.collectDue = true;
      this.loop.restart();
      return;
    }
    if (this.collectTimer) return;
    this.collectTimer = setTimeout(() => {
      this.collectTimer = undefined;
      this.collectDue = true;
      if (this.active && !this.closed) this.loop.restart();
    }, IDLE_COLLECT_MS);
    this.collectTimer.unref();
  }

  /** Each isolated or denied pod of the node, by address: what the rules in force allow it. */
  private judges(): Map<string, PodJudge> {
    const out = new Map<string, PodJudge>();
    for (const lp of this.local.values()) {
      const standing = this.standingOf(lp);
      if (standing.kind === "open") continue;
      const judge: PodJudge =
        standing.kind === "deny"
          ? () => false
          : (direction, peer, protocol, port) =>
              this.model.allowedBy(standing.policy, direction, peer, protocol, port);
      for (const ip of lp.ips) out.set(ip, judge);
    }
    return out;
  }

  private async deactivate(): Promise<void> {
    this.active = false;
    const watches = this.watches;
    this.watches = [];
    this.synced.clear();
    await Promise.all(watches.map((w) => w.stop()));
    this.applied = undefined;
    await this.datapath.deleteTable();
  }
}

/** A pod as the model holds it. */
function modelPod(o: KubeObjectView): PolicyPod {
  const pod = podFromApi(o);
  // A finished pod's addresses go back to the pool: they are someone else's soon.
  if (podPlacement(o).finished) pod.ips = [];
  return pod;
}

/** What the pod watch hands over: the model's pod, made as its list page arrives, and the key. */
type PodView = KubeObjectView & { pod: PolicyPod };

/**
 * The pod watch's transform: a listed page's pods become the model's own at
 * once (the whole list is held until its last page: 150,000 slim API pods
 * were 99 MiB of heap, the model's pods 67 MiB, and the model keeps these).
 */
function podView(o: KubeObjectView): PodView {
  const pod = modelPod(o);
  return {
    metadata: {
      namespace: pod.namespace,
      name: pod.name,
      resourceVersion: o.metadata?.resourceVersion,
    },
    pod,
  };
}

function slimNamespace(o: KubeObjectView): KubeObjectView {
  const meta = (o.metadata ?? {}) as Record<string, unknown>;
  return {
    metadata: {
      name: meta.name as string,
      resourceVersion: meta.resourceVersion as string,
      labels: meta.labels,
    } as KubeObjectView["metadata"],
  };
}
