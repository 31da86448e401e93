/**
 * What the policy model answers (model.ts): a pod's rules in each direction,
 * as the nftables ruleset and the connection cuts read them, and a rule's
 * peers and named targets in chunks.
 */
import type { Protocol } from "./types.js";

/** A port match with numbers only: `port` undefined is every port of the protocol. */
export interface NumericPort {
  protocol: Protocol;
  port?: number;
  endPort?: number;
}

/** A container port name to resolve on each destination pod (egress). */
export interface PortName {
  protocol: Protocol;
  name: string;
}

/** One rule as it applies to one selected pod. */
export interface PodRule {
  /** The rule's identity, `<ns>/<policy>/<direction>/<index>`: its peers are `peerAddresses(id)`. */
  id: string;
  /** No `from`/`to`: any address. */
  anyPeer: boolean;
  /** "any": no `ports`. Else the numeric ports (ingress: names resolved on the pod); may be empty. */
  ports: "any" | NumericPort[];
  /** Egress only: named ports, resolved per destination pod (`namedTargets(id)`). */
  portNames: PortName[];
  /** Ingress named ports resolved on this pod: the rule's ports differ from pod to pod. */
  perPod: boolean;
}

/** What one pod may do: undefined in a direction where no policy isolates it. */
export interface PodPolicy {
  ingress?: PodRule[];
  egress?: PodRule[];
  /**
   * What picked these rules, as a key: the pod's namespace, the podSelectors of
   * its policies that match it, and its named ports. Pods with the same
   * selection get the same PodPolicy; absent when no policy selects the pod.
   */
  selection?: string;
}

/** A destination a named egress port resolved to. */
export interface NamedTarget {
  ip: string;
  protocol: Protocol;
  port: number;
}

/** Pod addresses in chunks (one a namespace): a chunk that is the same array as before has not changed. */
export interface AddressChunks {
  v4: ReadonlyArray<readonly string[]>;
  v6: ReadonlyArray<readonly string[]>;
}
