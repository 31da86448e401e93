/**
 * A policy rule as the model keeps it (model.ts): what it was written as,
 * what is worked out from it and kept with it (its pod peers by namespace,
 * their addresses), and what it comes to for one pod, shared among the pods
 * it applies to alike.
 */
import type { AddressRanges } from "./addresses.js";
import type { AddressChunks, NumericPort, PodRule, PortName } from "./answers.js";
import { protocolOf } from "./problems.js";
import type { Direction, IpBlock, PolicyPeer, PolicyPod, PolicyPort } from "./types.js";

export interface RuleState {
  id: string;
  /** The policy's namespace: a peer without namespaceSelector means it. */
  namespace: string;
  /** undefined: any peer. */
  peers: PolicyPeer[] | undefined;
  ports: PolicyPort[] | undefined;
  blocks: IpBlock[];
  /** Whether some peer is pods (a podSelector or namespaceSelector). */
  podPeers: boolean;
  /** The ipBlocks as ranges, worked out once. */
  blockRanges?: AddressRanges;
  /** The pod peers, as last worked out, and what that depended on. */
  members?: MemberCache;
  /** peerPodAddresses' last answer, and the members' generation it was read at. */
  chunks?: { generation: number; chunks: AddressChunks };
  /** The rule as it applies to any pod, when that does not depend on the pod (no ingress named port). */
  shared?: PodRule;
  /** Otherwise, the rule by how the pod's port names resolved (ports as text). */
  perPodRules?: Map<string, PodRule>;
  /** And by the pod's named ports (podPortsKey): pods declaring the same ports ask once. */
  byPodPorts?: Map<string, PodRule>;
}

/** A rule's pod peers of one namespace; replaced, never changed, when they change. */
export interface MemberBucket {
  version: string;
  pods: PolicyPod[];
  /** Their addresses by family, worked out when first asked for. */
  v4?: string[];
  v6?: string[];
}

/** A rule's pod peers, by namespace, and the model versions they were read at. */
export interface MemberCache {
  namespacesVersion: number;
  podsVersion: number;
  /** Bumped whenever a bucket is replaced: what is derived from the members is kept by it. */
  generation: number;
  byNamespace: Map<string, MemberBucket>;
}

/** Every member pod of a rule, whatever its namespace. */
export function memberPods(m: MemberCache): PolicyPod[] {
  return [...m.byNamespace.values()].flatMap((b) => b.pods);
}

/**
 * One object for every pod a rule applies to alike (all but ingress rules
 * with named ports): what is derived from a PodRule (its chains' text) is
 * kept by it, so a new pod under a known policy derives nothing again.
 */
export function podRule(
  rule: RuleState,
  direction: Direction,
  pod: PolicyPod,
  portsKey: string,
): PodRule {
  if (rule.shared) return rule.shared;
  const known = rule.byPodPorts?.get(portsKey);
  if (known) return known;
  const out = workOutPodRule(rule, direction, pod);
  if (!out.perPod) rule.shared = out;
  else {
    rule.byPodPorts ??= new Map();
    rule.byPodPorts.set(portsKey, out);
  }
  return out;
}

/** What a pod's named ports are, as text: the key podRule's answers are kept by. */
export function podPortsKey(pod: PolicyPod): string {
  return pod.namedPorts.map((p) => `${p.name}/${p.protocol}/${p.port}`).join(",");
}

function workOutPodRule(rule: RuleState, direction: Direction, pod: PolicyPod): PodRule {
  const base = { id: rule.id, anyPeer: !rule.peers };
  if (!rule.ports) return { ...base, ports: "any", portNames: [], perPod: false };
  let perPod = false;
  const ports: NumericPort[] = [];
  const portNames: PortName[] = [];
  for (const p of rule.ports) {
    const protocol = protocolOf(p);
    if (p.port === undefined) ports.push({ protocol });
    else if (typeof p.port === "number")
      ports.push({
        protocol,
        port: p.port,
        ...(p.endPort !== undefined && p.endPort > p.port ? { endPort: p.endPort } : {}),
      });
    else if (direction === "ingress") {
      perPod = true;
      const found = pod.namedPorts.find((np) => np.name === p.port && np.protocol === protocol);
      if (found) ports.push({ protocol, port: found.port });
    } else portNames.push({ protocol, name: p.port });
  }
  if (!perPod) return { ...base, ports, portNames, perPod };
  // Pods whose names resolve alike share one answer: a rule selecting thousands of
  // pods of one kind makes one object, not one per pod.
  const key = ports.map((p) => `${p.protocol}/${p.port}/${p.endPort}`).join(",");
  rule.perPodRules ??= new Map();
  let shared = rule.perPodRules.get(key);
  if (!shared) {
    shared = { ...base, ports, portNames, perPod };
    rule.perPodRules.set(key, shared);
  }
  return shared;
}
