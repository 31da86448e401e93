/**
 * NetworkPolicy on MidoNet: the policy model's answers (src/policy, the same
 * model the kernel datapath's nftables come from) as chains on each pod's
 * bridge port. MidoNet names a port's filters from the device's side: a
 * port's inbound filter sees what enters the virtual network through it,
 * what the pod sends (its egress); its outbound filter sees what leaves
 * through it to the pod (its ingress).
 *
 *   Chain  SubID(pod port, "Policy Ingress")   the port's outboundFilterId
 *   Chain  SubID(pod port, "Policy Egress")    the port's inboundFilterId
 *          both only for a pod some policy isolates, in either direction:
 *          1  accept {matchReturnFlow}: replies of connections already let through
 *          2  accept {dlType 0x0806}: ARP, which NetworkPolicy does not govern
 *          in an isolated direction only, then:
 *          3… for each rule of each policy selecting the pod, for each of its ports
 *             (no ports: one line matching any), with {dlType 0x0800, nwProto, tpDst}:
 *             accept when the rule has no peers, else jump to the rule's peer chain;
 *             an egress rule's named ports: jump to its named-port chain
 *          last  drop
 *   Chain  IDForKey("NetworkPolicyPeers", rule id)       one per rule with peers
 *          accept {dlType 0x0800, nwSrc (ingress) | nwDst (egress) cidr} per peer CIDR
 *   Chain  IDForKey("NetworkPolicyNamedPorts", rule id)  one per egress rule with named ports
 *          accept {dlType 0x0800, nwDst ip/32, nwProto, tpDst port} per destination
 *
 * Peers are shared by every pod the rule applies to (a pod or namespace label
 * change rewrites one peer chain, not every pod's filter); the ports stay in the
 * pod's chain, since an ingress rule's named ports resolve on the pod itself.
 *
 * Return traffic: MidoNet keeps a connection's state only when some rule on its
 * forward path asks for the flow's direction (matchForwardFlow/matchReturnFlow:
 * midolman's PacketContext.isForwardFlow records a forward flow it was asked
 * about). So a pod isolated in one direction gets both chains, the other
 * holding only rule 1: a connection it opens, or one opened to it, passes one
 * of them on the way and is tracked, and its replies match rule 1 wherever they
 * meet an isolated chain.
 *
 * Rules cannot be updated, only created and deleted: each rule's id is derived
 * from what it matches and does, and its `order` from the same, so an unchanged
 * policy maps to the same resources (no writes) and a change adds and removes
 * only the rules it touches.
 *
 * Not mapped, and reported: IPv6 (MidoNet's rule conditions are IPv4 only; an
 * isolated pod's IPv6 traffic meets the drop, failing closed). Traffic to a
 * ClusterIP is judged on egress by the cluster IP, not the endpoint: the pod's
 * inbound filter runs before the bridge's KUBE-MAIN translates it.
 */

import { type Range, rangeCidrs } from "../../policy/addresses.js";
import type { NumericPort, PodRule } from "../../policy/answers.js";
import type { PolicyModel } from "../../policy/model.js";
import type { Direction, PolicyPod } from "../../policy/types.js";
import { idForKey, subId } from "../ids.js";
import type { Rule } from "../resources.js";
import { type MappingConfig, type ResolvedConfig, resolveConfig } from "./config.js";
import { MappingBuilder, type ObjectMapping, podPolicyOwner, policyRuleOwner } from "./model.js";
import { podPortId } from "./pod.js";
import { PROTOCOL_NUMBERS } from "./service.js";

const IPV4 = 0x0800;
const ARP = 0x0806;
/** MidoNet's limit on a chain's name (the REST API's @Size on names). */
const NAME_MAX = 255;

type RuleBody = Omit<Rule, "id" | "position">;

/** The two filter chains of a pod's port, by the direction of the pod's traffic. */
export function podPolicyChainIds(
  config: MappingConfig | ResolvedConfig,
  namespace: string,
  name: string,
): Record<Direction, string> {
  const port = podPortId(resolveConfig(config), namespace, name);
  return { ingress: subId(port, "Policy Ingress"), egress: subId(port, "Policy Egress") };
}

export function policyPeerChainId(config: ResolvedConfig, ruleId: string): string {
  return idForKey(config.tenant, "NetworkPolicyPeers", ruleId, config.version);
}

export function policyNamedPortChainId(config: ResolvedConfig, ruleId: string): string {
  return idForKey(config.tenant, "NetworkPolicyNamedPorts", ruleId, config.version);
}

/** Whether any policy isolates the pod, in either direction: then its port has both filters. */
export function podIsIsolated(model: PolicyModel, pod: PolicyPod): boolean {
  const p = model.podPolicy(pod);
  return p.ingress !== undefined || p.egress !== undefined;
}

/**
 * The filter ids the pod's port carries: both chains while some policy
 * isolates the pod, none otherwise (then no chain is walked for it at all).
 */
export function podPortFilters(
  model: PolicyModel,
  pod: PolicyPod,
  config: MappingConfig | ResolvedConfig,
): { inboundFilterId?: string; outboundFilterId?: string } {
  if (!podIsIsolated(model, pod)) return {};
  const ids = podPolicyChainIds(config, pod.namespace, pod.name);
  return { inboundFilterId: ids.egress, outboundFilterId: ids.ingress };
}

/** A rule's place in its chain: first the fixed head, then each line by what it matches. */
const ORDER = { returnFlows: "0", arp: "1", rule: "5", drop: "9" } as const;

function chainName(prefix: string, key: string): string {
  return `${prefix}${key}`.slice(0, NAME_MAX);
}

/** The match of one port line; undefined: any protocol and port. */
function portConditions(port: NumericPort | undefined): Partial<RuleBody> {
  if (!port) return {};
  const nwProto = PROTOCOL_NUMBERS[port.protocol] as number;
  return port.port === undefined
    ? { dlType: IPV4, nwProto }
    : { dlType: IPV4, nwProto, tpDst: { start: port.port, end: port.endPort ?? port.port } };
}

function portLabel(port: NumericPort | undefined): string {
  if (!port) return "any";
  return port.port === undefined
    ? port.protocol
    : `${port.protocol} ${port.port}-${port.endPort ?? port.port}`;
}

/**
 * The chains of one pod's port filters: nothing for a pod no policy isolates.
 * `model` must hold the pod (its policy is worked out from its labels there).
 */
export function mapPodPolicy(
  model: PolicyModel,
  pod: PolicyPod,
  config: MappingConfig | ResolvedConfig,
): ObjectMapping {
  const c = resolveConfig(config);
  const b = new MappingBuilder(podPolicyOwner(pod.namespace, pod.name));
  const policy = model.podPolicy(pod);
  if (policy.ingress === undefined && policy.egress === undefined) return b.build();
  const ids = podPolicyChainIds(c, pod.namespace, pod.name);
  const key = `${pod.namespace}/${pod.name}`;
  for (const direction of ["ingress", "egress"] as const) {
    const chain = b.add(
      {
        kind: "Chain",
        body: {
          id: ids[direction],
          name: chainName(direction === "ingress" ? "KUBE-NP-IN-" : "KUBE-NP-OUT-", key),
          tenantId: c.tenant,
        },
      },
      [],
    );
    const add = (label: string, order: string, body: RuleBody, needs: string[] = []) =>
      b.add(
        { kind: "Rule", parentId: chain, body: { id: subId(chain, label), ...body } },
        [chain, ...needs],
        order,
      );
    add("Return flows", ORDER.returnFlows, { type: "accept", matchReturnFlow: true });
    const rules = policy[direction];
    if (rules === undefined) continue;
    add("ARP", ORDER.arp, { type: "accept", dlType: ARP });
    for (const rule of rules) addRuleLines(c, rule, direction, add);
    add("Drop", ORDER.drop, { type: "drop" });
  }
  return b.build();
}

type AddRule = (label: string, order: string, body: RuleBody, needs?: string[]) => string;

/** One policy rule's lines in a pod's chain: a line per port, and the named ports' jump. */
function addRuleLines(c: ResolvedConfig, rule: PodRule, direction: Direction, add: AddRule): void {
  const ports: Array<NumericPort | undefined> = rule.ports === "any" ? [undefined] : rule.ports;
  const peers = rule.anyPeer ? undefined : policyPeerChainId(c, rule.id);
  for (const port of ports) {
    const label = `${rule.id} ${portLabel(port)}`;
    const order = `${ORDER.rule} ${label}`;
    const match = portConditions(port);
    if (peers) add(`Jump ${label}`, order, { type: "jump", jumpChainId: peers, ...match }, [peers]);
    else add(`Accept ${label}`, order, { type: "accept", ...match });
  }
  if (direction === "egress" && rule.portNames.length > 0) {
    const named = policyNamedPortChainId(c, rule.id);
    add(
      `Jump ${rule.id} named ports`,
      `${ORDER.rule} ${rule.id} ~named`,
      {
        type: "jump",
        jumpChainId: named,
      },
      [named],
    );
  }
}

/** A range's start as a sort key in address order: 8 or 32 hex digits. */
function rangeOrder(range: Range): string {
  return range[0].toString(16).padStart(8, "0");
}

/**
 * The chains one policy rule shares among the pods it applies to: its peers
 * (when it has any) and, for an egress rule with named ports, the addresses
 * and ports they resolve to. `rule` is as `model.podPolicy` hands it out.
 */
export function mapPolicyRule(
  model: PolicyModel,
  rule: PodRule,
  direction: Direction,
  config: MappingConfig | ResolvedConfig,
): ObjectMapping {
  const c = resolveConfig(config);
  const b = new MappingBuilder(policyRuleOwner(rule.id));
  if (!rule.anyPeer) {
    const chain = b.add(
      {
        kind: "Chain",
        body: {
          id: policyPeerChainId(c, rule.id),
          name: chainName("KUBE-NP-PEERS-", rule.id),
          tenantId: c.tenant,
        },
      },
      [],
    );
    const peers = model.peerAddresses(rule.id);
    for (const range of peers.v4) {
      for (const cidr of rangeCidrs(range, 4)) {
        const [address, length] = cidr.split("/") as [string, string];
        const match =
          direction === "ingress"
            ? { nwSrcAddress: address, nwSrcLength: Number(length) }
            : { nwDstAddress: address, nwDstLength: Number(length) };
        b.add(
          {
            kind: "Rule",
            parentId: chain,
            body: { id: subId(chain, `Peer ${cidr}`), type: "accept", dlType: IPV4, ...match },
          },
          [chain],
          `${rangeOrder(range)} ${cidr}`,
        );
      }
    }
    if (model.peerBlocks(rule.id).v6.length > 0)
      b.warn(
        "ipv6-not-mappable",
        `${rule.id}: IPv6 ipBlocks are not enforced on MidoNet (IPv4 rules only); isolated pods' IPv6 traffic is dropped`,
      );
  }
  if (direction === "egress" && rule.portNames.length > 0) {
    const chain = b.add(
      {
        kind: "Chain",
        body: {
          id: policyNamedPortChainId(c, rule.id),
          name: chainName("KUBE-NP-PORTS-", rule.id),
          tenantId: c.tenant,
        },
      },
      [],
    );
    for (const chunk of model.namedTargetChunks(rule.id, rule.portNames))
      for (const t of chunk) {
        if (t.ip.includes(":")) continue;
        const label = `${t.ip} ${t.protocol} ${t.port}`;
        b.add(
          {
            kind: "Rule",
            parentId: chain,
            body: {
              id: subId(chain, `Target ${label}`),
              type: "accept",
              dlType: IPV4,
              nwDstAddress: t.ip,
              nwDstLength: 32,
              nwProto: PROTOCOL_NUMBERS[t.protocol] as number,
              tpDst: { start: t.port, end: t.port },
            },
          },
          [chain],
          label,
        );
      }
  }
  return b.build();
}

/**
 * Every pod's filters and the shared chains of the rules they use, each rule's
 * chains once: a whole cluster's NetworkPolicy as mappings, for a first fill.
 */
export function mapClusterPolicy(
  model: PolicyModel,
  pods: Iterable<PolicyPod>,
  config: MappingConfig | ResolvedConfig,
): ObjectMapping[] {
  const c = resolveConfig(config);
  const out: ObjectMapping[] = [];
  const rules = new Map<string, { rule: PodRule; direction: Direction }>();
  for (const pod of pods) {
    const mapping = mapPodPolicy(model, pod, c);
    if (mapping.resources.length > 0) out.push(mapping);
    const policy = model.podPolicy(pod);
    for (const direction of ["ingress", "egress"] as const)
      for (const rule of policy[direction] ?? [])
        if (!rules.has(rule.id)) rules.set(rule.id, { rule, direction });
  }
  for (const { rule, direction } of rules.values()) {
    const mapping = mapPolicyRule(model, rule, direction, c);
    if (mapping.resources.length > 0) out.push(mapping);
  }
  return out;
}
