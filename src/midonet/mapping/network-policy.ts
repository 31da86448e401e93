/**
 * NetworkPolicy on MidoNet: the policy model's answers (src/policy, the same
 * model the kernel datapath's nftables come from) as chains on each pod's
 * bridge port. MidoNet names a port's filters from the device's side: a
 * port's inbound filter sees what enters the virtual network through it,
 * what the pod sends (its egress); its outbound filter sees what leaves
 * through it to the pod (its ingress).
 *
 * Chains are shared, as pods of one kind share them on the kernel datapath: a
 * cluster has many pods selected by the same policies, and many rules with the
 * same peers.
 *
 *   Filter  IDForKey("NetworkPolicyFilter", key)   a port's inbound or outbound filter
 *           1  accept {matchReturnFlow}: replies of connections already let through
 *           in an isolated direction only, then:
 *           2  accept {dlType 0x0806}: ARP, which NetworkPolicy does not govern
 *           3… for each rule of each policy selecting the pod, for each of its ports
 *              (no ports: one line matching any), with {dlType 0x0800, nwProto, tpDst}:
 *              accept when the rule has no peers, else jump to the rule's peer chain;
 *              an egress rule's named ports: jump to its named-port chain
 *           last  drop
 *           Its key is the direction and the pod's selection (PodPolicy.selection: the
 *           podSelectors of its namespace's policies that match it, and its named
 *           ports): pods selected alike share one, and a change of their policies
 *           rewrites the rules it touches in that chain, no port. A direction no
 *           policy isolates gets the one chain holding rule 1 alone ("return flows").
 *   Peers   IDForKey("NetworkPolicyPeers", share key)       a rule's peers
 *           accept {dlType 0x0800, nwSrc (ingress) | nwDst (egress) cidr} per peer CIDR
 *   Ports   IDForKey("NetworkPolicyNamedPorts", share key)  an egress rule's named ports
 *           accept {dlType 0x0800, nwDst ip/32, nwProto, tpDst port} per destination
 *           The share key is the rule's direction, its peers as written (selector-only
 *           peers with the policy's namespace) and its named ports: rules that pick the
 *           same addresses share the chains, and a label change rewrites each once.
 *
 * Return traffic: MidoNet keeps a connection's state only when some rule on its
 * forward path asks for the flow's direction (matchForwardFlow/matchReturnFlow:
 * midolman's PacketContext.isForwardFlow records a forward flow it was asked
 * about). So a pod isolated in one direction gets a filter on both sides, the
 * other holding only rule 1: a connection it opens, or one opened to it,
 * passes one of them and is tracked, and its replies match rule 1 wherever
 * they meet an isolated chain.
 *
 * Rules cannot be updated, only created and deleted: each rule's id is derived
 * from what it matches and does, and its `order` from the same, so unchanged
 * input maps to the same resources (no writes) and a change adds and removes
 * only the rules it touches.
 *
 * Not mapped, and reported: IPv6 (MidoNet's rule conditions are IPv4 only; an
 * isolated pod's IPv6 traffic meets the drop, failing closed). Traffic to a
 * ClusterIP is judged on egress by the cluster IP, not the endpoint: the pod's
 * inbound filter runs before the bridge's KUBE-MAIN translates it.
 */
import { createHash } from "node:crypto";
import { type Range, rangeCidrs } from "../../policy/addresses.js";
import type { NumericPort, PodRule } from "../../policy/answers.js";
import type { PolicyModel } from "../../policy/model.js";
import type { Direction } from "../../policy/types.js";
import { idForKey, subId } from "../ids.js";
import type { MidonetObject, Rule } from "../resources.js";
import type { ResolvedConfig } from "./config.js";
import {
  type DesiredResource,
  MappingBuilder,
  type ObjectMapping,
  policyFilterOwner,
  policyShareOwner,
} from "./model.js";
import { PROTOCOL_NUMBERS } from "./service.js";

const IPV4 = 0x0800;
const ARP = 0x0806;

type RuleBody = Omit<Rule, "id" | "position">;

/** The filter of a direction no policy isolates: return flows only. */
const RETURN_ONLY = "return-flows";

/** The filters of a pod's port: its outbound (ingress) and inbound (egress) chains. */
export type PortFilters = { inboundFilterId?: string; outboundFilterId?: string };

/** A short stable digest of a key, for owners and chain names. */
function keyDigest(key: string): string {
  return createHash("sha1").update(key).digest("hex").slice(0, 20);
}

/** The owner of the chains rules with one share key share. */
export const shareOwner = (share: string): string => policyShareOwner(keyDigest(share));

export function filterChainId(config: ResolvedConfig, key: string): string {
  return idForKey(config.tenant, "NetworkPolicyFilter", key, config.version);
}

function peerChainId(config: ResolvedConfig, shareKey: string): string {
  return idForKey(config.tenant, "NetworkPolicyPeers", shareKey, config.version);
}

function namedPortChainId(config: ResolvedConfig, shareKey: string): string {
  return idForKey(config.tenant, "NetworkPolicyNamedPorts", shareKey, config.version);
}

/** Whether a rule needs chains of its own: peers to match, or named egress ports. */
export function needsShare(rule: PodRule, direction: Direction): boolean {
  return !rule.anyPeer || (direction === "egress" && rule.portNames.length > 0);
}

/**
 * The key rules share their chains by: the direction, the peers as the
 * policy writes them (a peer without namespaceSelector means the policy's own
 * namespace), and the named egress ports.
 */
export function shareKey(model: PolicyModel, rule: PodRule, direction: Direction): string {
  const [namespace, name, , index] = rule.id.split("/") as [string, string, string, string];
  const spec = model.policy(namespace, name)?.[direction]?.[Number(index)];
  const peers = (spec?.peers ?? []).map((p) =>
    p.ipBlock || p.namespaceSelector ? p : { ...p, namespace },
  );
  const names = direction === "egress" ? rule.portNames : [];
  return `${direction}|${JSON.stringify(peers)}|${JSON.stringify(names)}`;
}

/** A rule's place in its chain: first the fixed head, then each line by what it matches. */
const ORDER = { returnFlows: "0", arp: "1", rule: "5", drop: "9" } as const;

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

/** One line of a filter: what it matches and where it leads. */
interface FilterLine {
  label: string;
  body: RuleBody;
  needs: string[];
}

/** The ids of the chains rules with one share key share (digested once per share by the caller). */
export interface ShareChains {
  peers: string;
  named: string;
}

export function shareChains(c: ResolvedConfig, share: string): ShareChains {
  return { peers: peerChainId(c, share), named: namedPortChainId(c, share) };
}

/** One rule's lines in a filter: its ports, then its named ports; `share` when it needs one. */
function ruleLines(
  rule: PodRule,
  direction: Direction,
  share: ShareChains | undefined,
): FilterLine[] {
  const lines: FilterLine[] = [];
  const peers = !rule.anyPeer && share !== undefined ? share.peers : undefined;
  const ports: Array<NumericPort | undefined> = rule.ports === "any" ? [undefined] : rule.ports;
  for (const port of ports) {
    const match = portConditions(port);
    const label = `${portLabel(port)} ${peers ?? "any peer"}`;
    lines.push(
      peers
        ? {
            label: `Jump ${label}`,
            body: { type: "jump", jumpChainId: peers, ...match },
            needs: [peers],
          }
        : { label: `Accept ${label}`, body: { type: "accept", ...match }, needs: [] },
    );
  }
  if (share !== undefined && direction === "egress" && rule.portNames.length > 0) {
    const named = share.named;
    lines.push({
      label: `Jump named ${named}`,
      body: { type: "jump", jumpChainId: named },
      needs: [named],
    });
  }
  return lines;
}

/** A filter's lines for an isolated direction, each rule's in turn; a line two rules share is one. */
function filterLines(
  rules: readonly PodRule[],
  direction: Direction,
  shareOf: (rule: PodRule) => ShareChains,
): FilterLine[] {
  const seen = new Set<string>();
  return rules
    .flatMap((rule) =>
      ruleLines(rule, direction, needsShare(rule, direction) ? shareOf(rule) : undefined),
    )
    .filter((l) => !seen.has(l.label) && seen.add(l.label));
}

/**
 * The key of a pod's filter in one direction: RETURN_ONLY when no policy
 * isolates it there (`rules` undefined), else the direction and a digest of
 * its selection (PodPolicy.selection), which names its rules.
 */
export function filterKeyOf(
  direction: Direction,
  rules: readonly PodRule[] | undefined,
  selection: string | undefined,
): string {
  if (rules === undefined) return RETURN_ONLY;
  return `${direction}-${keyDigest(selection ?? "")}`;
}

/**
 * A filter chain: see the top of this file. `rules` undefined: the return-flows
 * one. `shareOf` a rule that needs a share: the chains of its share key.
 * `ruleId`: a rule's id from its chain's and its label (a caller remapping
 * the chain may hand back the ids it was given).
 */
export function mapFilter(
  c: ResolvedConfig,
  key: string,
  rules: readonly PodRule[] | undefined,
  direction: Direction,
  shareOf: (rule: PodRule) => ShareChains,
  ruleId: (chain: string, label: string) => string = subId,
): ObjectMapping {
  const b = new MappingBuilder(policyFilterOwner(key));
  const chain = b.add(
    {
      kind: "Chain",
      body: {
        id: filterChainId(c, key),
        // "KUBE-NP-RETURN-FLOWS", "KUBE-NP-INGRESS-<digest>", "KUBE-NP-EGRESS-<digest>".
        name: `KUBE-NP-${key.toUpperCase()}`,
        tenantId: c.tenant,
      },
    },
    [],
  );
  const add = (label: string, order: string, body: RuleBody, needs: string[] = []) =>
    b.add(
      { kind: "Rule", parentId: chain, body: { id: ruleId(chain, label), ...body } },
      [chain, ...needs],
      order,
    );
  add("Return flows", ORDER.returnFlows, { type: "accept", matchReturnFlow: true });
  if (rules === undefined) return b.build();
  add("ARP", ORDER.arp, { type: "accept", dlType: ARP });
  for (const line of filterLines(rules, direction, shareOf))
    add(line.label, `${ORDER.rule} ${line.label}`, line.body, line.needs);
  add("Drop", ORDER.drop, { type: "drop" });
  return b.build();
}

/** A range's start as a sort key in address order: 8 or 32 hex digits. */
function rangeOrder(range: Range): string {
  return range[0].toString(16).padStart(8, "0");
}

/**
 * The chains rules with one share key share: the peers (when the rule has
 * any) and, for egress named ports, the addresses and ports they resolve to.
 * `rule` is any of those rules as `model.podPolicy` hands it out.
 *
 * A peer set of thousands of pods changes by one pod at a time: `kept` holds
 * the rules the last mapping made, by what they match, and those still wanted
 * are reused as they are; `made` gets this mapping's, for the next.
 */
export function mapShare(
  model: PolicyModel,
  rule: PodRule,
  direction: Direction,
  share: string,
  c: ResolvedConfig,
  kept?: ReadonlyMap<string, DesiredResource>,
  made?: Map<string, DesiredResource>,
): ObjectMapping {
  const digest = keyDigest(share);
  const b = new MappingBuilder(shareOwner(share));
  const addRule = (
    label: string,
    make: () => MidonetObject,
    dependsOn: string[],
    order: string,
  ) => {
    const previous = kept?.get(label);
    // The label names the match; the order comes from the range around it, which may move.
    if (previous?.order === order) b.reuse(previous);
    else b.add(make(), dependsOn, order);
    made?.set(label, b.resources[b.resources.length - 1] as DesiredResource);
  };
  if (!rule.anyPeer) {
    const chain = b.add(
      {
        kind: "Chain",
        body: { id: peerChainId(c, share), name: `KUBE-NP-PEERS-${digest}`, tenantId: c.tenant },
      },
      [],
    );
    for (const range of model.peerAddresses(rule.id).v4) {
      for (const cidr of rangeCidrs(range, 4)) {
        addRule(
          `Peer ${cidr}`,
          () => {
            const [address, length] = cidr.split("/") as [string, string];
            const match =
              direction === "ingress"
                ? { nwSrcAddress: address, nwSrcLength: Number(length) }
                : { nwDstAddress: address, nwDstLength: Number(length) };
            return {
              kind: "Rule",
              parentId: chain,
              body: { id: subId(chain, `Peer ${cidr}`), type: "accept", dlType: IPV4, ...match },
            };
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
          id: namedPortChainId(c, share),
          name: `KUBE-NP-PORTS-${digest}`,
          tenantId: c.tenant,
        },
      },
      [],
    );
    for (const chunk of model.namedTargetChunks(rule.id, rule.portNames))
      for (const t of chunk) {
        if (t.ip.includes(":")) continue;
        const label = `${t.ip} ${t.protocol} ${t.port}`;
        addRule(
          `Target ${label}`,
          () => ({
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
          }),
          [chain],
          label,
        );
      }
  }
  return b.build();
}
