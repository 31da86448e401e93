/**
 * The kinds the controller maps (Nodes, Pods, Services, EndpointSlices, and for
 * NetworkPolicy the Namespaces and NetworkPolicies), each
 * followed through the common list-watch (src/common/list-watch.ts), and each
 * change handed to the mapping as one named change.
 */
import {
  CoreV1Api,
  DiscoveryV1Api,
  type KubeConfig,
  type KubernetesObject,
  NetworkingV1Api,
  type V1EndpointSlice,
  type V1Namespace,
  type V1NetworkPolicy,
  type V1Node,
  type V1Pod,
  type V1Service,
  Watch,
} from "@kubernetes/client-node";
import type { Logger } from "pino";
import type { BackoffPolicy } from "../../common/backoff.js";
import { describeKubeError } from "../../common/kube-errors.js";
import { type ListAnswer, ListWatch, type ListWatchHandlers } from "../../common/list-watch.js";
import type { ClusterMapper } from "../mapping/cluster.js";
import type { ResourceChanges } from "../mapping/diff.js";
import type { EndpointSlice, Node, Pod, Service } from "../mapping/k8s.js";

export interface ClusterInformersOptions {
  kubeConfig: KubeConfig;
  mapper: ClusterMapper;
  /** One mapping change, named "Kind/namespace/name" (Nodes: "Node/name"). */
  feed(what: string, change: () => ResourceChanges): void;
  /** A Node added or changed (deleted: true when gone), after its mapping change. */
  nodeEvent(name: string, deleted: boolean): void;
  /** A failed list or watch of `informer` ("nodes", "pods", ...); it restarts by itself. */
  onError(informer: string, err: unknown): void;
  logger: Pick<Logger, "warn">;
  /** Restarts after errors; default 500 ms doubling to 30 s. */
  backoff?: BackoffPolicy;
}

const DEFAULT_BACKOFF: BackoffPolicy = { baseMs: 500, maxMs: 30_000 };

const nameOf = (obj: KubernetesObject) => obj.metadata?.name ?? "";
const nsOf = (obj: KubernetesObject) => obj.metadata?.namespace ?? "";

export class ClusterInformers {
  readonly nodes: ListWatch<V1Node>;
  readonly pods: ListWatch<V1Pod>;
  readonly services: ListWatch<V1Service>;
  readonly slices: ListWatch<V1EndpointSlice>;
  readonly namespaces: ListWatch<V1Namespace>;
  readonly policies: ListWatch<V1NetworkPolicy>;
  private readonly all: [string, ListWatch<KubernetesObject>][];

  constructor(private readonly o: ClusterInformersOptions) {
    const core = o.kubeConfig.makeApiClient(CoreV1Api);
    const discovery = o.kubeConfig.makeApiClient(DiscoveryV1Api);
    const networking = o.kubeConfig.makeApiClient(NetworkingV1Api);
    const m = o.mapper;
    this.nodes = this.informer(
      "nodes",
      "/api/v1/nodes",
      () => core.listNode(),
      this.nodeHandlers(),
    );
    this.pods = this.informer(
      "pods",
      "/api/v1/pods",
      () => core.listPodForAllNamespaces(),
      this.namespaced<V1Pod>(
        "Pod",
        (p) => m.upsertPod(p as Pod),
        (ns, name) => m.deletePod(ns, name),
      ),
    );
    this.services = this.informer(
      "services",
      "/api/v1/services",
      () => core.listServiceForAllNamespaces(),
      this.namespaced<V1Service>(
        "Service",
        (s) => m.upsertService(s as Service),
        (ns, name) => m.deleteService(ns, name),
      ),
    );
    this.slices = this.informer(
      "endpointslices",
      "/apis/discovery.k8s.io/v1/endpointslices",
      () => discovery.listEndpointSliceForAllNamespaces(),
      this.namespaced<V1EndpointSlice>(
        "EndpointSlice",
        (s) => m.upsertEndpointSlice(s as EndpointSlice),
        (ns, name) => m.deleteEndpointSlice(ns, name),
      ),
    );
    this.namespaces = this.informer(
      "namespaces",
      "/api/v1/namespaces",
      () => core.listNamespace(),
      this.namespaceHandlers(),
    );
    this.policies = this.informer(
      "networkpolicies",
      "/apis/networking.k8s.io/v1/networkpolicies",
      () => networking.listNetworkPolicyForAllNamespaces(),
      this.namespaced<V1NetworkPolicy>(
        "NetworkPolicy",
        (p) => m.upsertNetworkPolicy(p),
        (ns, name) => m.deleteNetworkPolicy(ns, name),
      ),
    );
    this.all = [
      ["nodes", this.nodes],
      ["pods", this.pods],
      ["services", this.services],
      ["endpointslices", this.slices],
      ["namespaces", this.namespaces],
      ["networkpolicies", this.policies],
    ] as [string, ListWatch<KubernetesObject>][];
  }

  start(): void {
    for (const [, i] of this.all) i.start();
  }

  async stop(): Promise<void> {
    await Promise.all(this.all.map(([, i]) => i.stop()));
  }

  /** Every informer has had its first list. */
  get synced(): boolean {
    return this.all.every(([, i]) => i.hasSynced);
  }

  whenSynced(): Promise<void> {
    return Promise.all(this.all.map(([, i]) => i.whenSynced())).then(() => {});
  }

  /** The informers without a first list yet, by name. */
  notListed(): string[] {
    return this.all.filter(([, i]) => !i.hasSynced).map(([name]) => name);
  }

  private informer<T extends KubernetesObject>(
    name: string,
    path: string,
    list: () => Promise<ListAnswer<T>>,
    handlers: ListWatchHandlers<T>,
  ): ListWatch<T> {
    return new ListWatch<T>({
      path,
      list,
      watch: new Watch(this.o.kubeConfig),
      backoff: this.o.backoff ?? DEFAULT_BACKOFF,
      handlers: {
        ...handlers,
        error: (err, retryInMs) => {
          this.o.onError(name, err);
          this.o.logger.warn(
            { informer: name, err: describeKubeError(err), retryInMs },
            `${name} watch failed; restarting`,
          );
        },
      },
    });
  }

  private nodeHandlers(): ListWatchHandlers<V1Node> {
    const changed = (n: V1Node) => {
      this.o.feed(`Node/${nameOf(n)}`, () => this.o.mapper.upsertNode(n as Node));
      this.o.nodeEvent(nameOf(n), false);
    };
    return {
      add: changed,
      update: changed,
      delete: (n) => {
        this.o.feed(`Node/${nameOf(n)}`, () => this.o.mapper.deleteNode(nameOf(n)));
        this.o.nodeEvent(nameOf(n), true);
      },
    };
  }

  private namespaceHandlers(): ListWatchHandlers<V1Namespace> {
    const changed = (n: V1Namespace) =>
      this.o.feed(`Namespace/${nameOf(n)}`, () => this.o.mapper.upsertNamespace(n));
    return {
      add: changed,
      update: changed,
      delete: (n) =>
        this.o.feed(`Namespace/${nameOf(n)}`, () => this.o.mapper.deleteNamespace(nameOf(n))),
    };
  }

  /** Add and update are one upsert, under "Kind/namespace/name". */
  private namespaced<T extends KubernetesObject>(
    kind: string,
    upsert: (obj: T) => ResourceChanges,
    remove: (namespace: string, name: string) => ResourceChanges,
  ): ListWatchHandlers<T> {
    const key = (obj: T) => `${kind}/${nsOf(obj)}/${nameOf(obj)}`;
    const upserted = (obj: T) => this.o.feed(key(obj), () => upsert(obj));
    return {
      add: upserted,
      update: upserted,
      delete: (obj) => this.o.feed(key(obj), () => remove(nsOf(obj), nameOf(obj))),
    };
  }
}
