/**
 * The pods of each namespace by label: the pods a podSelector may match are
 * those holding the rarest of its matchLabels pairs, not the whole namespace
 * (a policy event in a namespace of thousands of pods looks at the few its
 * selector names). Keys are the caller's (e.g. "namespace/name").
 */
import type { LabelSelector } from "./types.js";

interface NamespacePods {
  all: Set<string>;
  /** "key=value" -> the pods with that label. */
  byLabel: Map<string, Set<string>>;
}

export class PodLabelIndex {
  private readonly namespaces = new Map<string, NamespacePods>();

  add(namespace: string, key: string, labels: Record<string, string>): void {
    const ns = this.namespaces.get(namespace) ?? { all: new Set(), byLabel: new Map() };
    this.namespaces.set(namespace, ns);
    ns.all.add(key);
    for (const k in labels) {
      const pair = `${k}=${labels[k]}`;
      const pods = ns.byLabel.get(pair) ?? new Set<string>();
      ns.byLabel.set(pair, pods);
      pods.add(key);
    }
  }

  /** Takes the pod out; `labels` are those it was added with. */
  remove(namespace: string, key: string, labels: Record<string, string>): void {
    const ns = this.namespaces.get(namespace);
    if (!ns) return;
    ns.all.delete(key);
    for (const k in labels) {
      const pair = `${k}=${labels[k]}`;
      const pods = ns.byLabel.get(pair);
      pods?.delete(key);
      if (pods?.size === 0) ns.byLabel.delete(pair);
    }
    if (ns.all.size === 0) this.namespaces.delete(namespace);
  }

  /** The pods of `namespace` that `selector` may match: a superset, to be checked with selectorMatches. */
  candidates(namespace: string, selector: LabelSelector | undefined): ReadonlySet<string> {
    const ns = this.namespaces.get(namespace);
    if (!ns) return EMPTY;
    let fewest: Set<string> = ns.all;
    const wanted = selector?.matchLabels;
    for (const k in wanted) {
      const pods = ns.byLabel.get(`${k}=${wanted[k]}`);
      if (!pods) return EMPTY;
      if (pods.size < fewest.size) fewest = pods;
    }
    return fewest;
  }
}

const EMPTY: ReadonlySet<string> = new Set();
