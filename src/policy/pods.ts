/**
 * Pods as the policy model keeps them: their named-port lists shared among
 * pods alike, whether a pod's new state differs in anything the model reads,
 * and where named ports resolve.
 */
import type { NamedTarget, NumericPort, PortName } from "./answers.js";
import type { NamedPort, PolicyPod, Protocol } from "./types.js";

/** What a pod's named ports are when it has none: one array for them all. */
const NO_PORTS: NamedPort[] = [];

/** A pod's named ports as one string: pods with the same share one array. */
const portsId = (ports: readonly NamedPort[]): string =>
  ports.map((p) => `${p.name}/${p.protocol}/${p.port}`).join(",");

/**
 * The named-port lists the pods have, each once, with the number of pods
 * that share it: a Deployment's pods (often most of a cluster's) have the
 * same, 100 bytes a pod when each keeps its own. Never modified in place.
 */
export class PortLists {
  private readonly lists = new Map<string, { ports: NamedPort[]; pods: number }>();

  /** The shared array of these named ports (counted once more). */
  share(ports: NamedPort[]): NamedPort[] {
    if (ports.length === 0) return NO_PORTS;
    const id = portsId(ports);
    const entry = this.lists.get(id) ?? { ports, pods: 0 };
    this.lists.set(id, entry);
    entry.pods++;
    return entry.ports;
  }

  /** A pod no longer has these (shared) named ports. */
  release(ports: NamedPort[]): void {
    if (ports.length === 0) return;
    const id = portsId(ports);
    const entry = this.lists.get(id);
    if (entry && --entry.pods === 0) this.lists.delete(id);
  }
}

/** Where each pod's container port of each name and protocol is. */
export function targetsOf(pods: Iterable<PolicyPod>, names: readonly PortName[]): NamedTarget[] {
  const targets: NamedTarget[] = [];
  for (const p of pods) {
    if (p.hostNetwork) continue;
    for (const n of names) {
      const found = p.namedPorts.find((np) => np.name === n.name && np.protocol === n.protocol);
      if (found)
        for (const ip of p.ips) targets.push({ ip, protocol: n.protocol, port: found.port });
    }
  }
  return targets;
}

/** Whether two states of a pod are alike in all the model reads of them. */
export function samePod(a: PolicyPod, b: PolicyPod): boolean {
  const sameList = <T>(x: readonly T[], y: readonly T[], same: (p: T, q: T) => boolean) =>
    x.length === y.length && x.every((v, i) => same(v, y[i] as T));
  const la = Object.keys(a.labels);
  return (
    a.hostNetwork === b.hostNetwork &&
    sameList(a.ips, b.ips, (p, q) => p === q) &&
    sameList(
      a.namedPorts,
      b.namedPorts,
      (p, q) => p.name === q.name && p.protocol === q.protocol && p.port === q.port,
    ) &&
    la.length === Object.keys(b.labels).length &&
    la.every((k) => a.labels[k] === b.labels[k])
  );
}

/** Whether a port match admits `protocol` `port`. */
export function portMatches(p: NumericPort, protocol: Protocol, port: number): boolean {
  if (p.protocol !== protocol) return false;
  if (p.port === undefined) return true;
  return port >= p.port && port <= (p.endPort ?? p.port);
}
