/**
 * A Pod maps to a port on its node's bridge, bound to the pod's host veth on the
 * node's MidoNet host (docs/midonet.md; midonet-kubernetes pkg/converter/pod):
 *
 *   Port               IDForKey("Pod", "<ns>/<name>") on bridge IDForKey("Node", nodeName),
 *                      with the NetworkPolicy filters of an isolated pod (network-policy.ts)
 *   HostInterfacePort  {hostId of the node, the port, "mido" + sha1("<ns>/<name>")[:11]}
 *   MacPort            with the midonet.org/mac-address annotation: the pod's MAC on its port
 *   IP4Mac             with that annotation, for each IPv4 pod address: ARP answered by the bridge
 *
 * Pods with no node yet, on the host network, or finished (Succeeded/Failed, their
 * address may already be reused) map to nothing: an update into one of those
 * states removes what the pod had. IPv6 pod addresses get no ARP entry: MidoNet's
 * bridge tables are IPv4 ARP only.
 */

import { formatIp, parseIp } from "../../net/ip.js";
import { normalizeMac } from "../../net/mac.js";
import { hostVethName } from "../host-veth-name.js";
import { idForKey } from "../ids.js";
import { ANNOTATION_MAC_ADDRESS } from "../node-contract.js";
import { type MappingConfig, type ResolvedConfig, resolveConfig } from "./config.js";
import type { Pod } from "./k8s.js";
import { MappingBuilder, type ObjectMapping, podOwner } from "./model.js";
import type { PortFilters } from "./network-policy.js";
import { nodeBridgeId } from "./node.js";

/** What a pod needs to know of its node's mapping. */
export interface PodNodeInfo {
  /** The node's bridge (IDForKey("Node", name)), when already known. */
  bridgeId?: string;
  /** The node's MidoNet host; undefined while the node has none. */
  hostId?: string;
  /** Key of the node's tunnel zone membership, which a binding needs first. */
  membershipKey?: string;
}

/** Looks up a node by name; undefined when the node is not known. */
export type PodNodeLookup = (nodeName: string) => PodNodeInfo | undefined;

export function podPortId(config: ResolvedConfig, namespace: string, name: string): string {
  return idForKey(config.tenant, "Pod", `${namespace}/${name}`, config.version);
}

/**
 * `filters`: the chains NetworkPolicy puts on the pod's port (network-policy.ts),
 * mapped apart from the pod since policies change them, not the pod.
 */
export function mapPod(
  pod: Pod,
  config: MappingConfig | ResolvedConfig,
  nodeOf: PodNodeLookup,
  filters: PortFilters = {},
): ObjectMapping {
  const c = resolveConfig(config);
  const { namespace, name } = pod.metadata;
  const b = new MappingBuilder(podOwner(namespace, name));
  const nodeName = pod.spec?.nodeName;
  if (!nodeName) return b.build("no-node-name");
  if (pod.spec?.hostNetwork) return b.build("host-network");
  const phase = pod.status?.phase;
  if (phase === "Succeeded" || phase === "Failed") return b.build("finished");

  const key = `${namespace}/${name}`;
  const node = nodeOf(nodeName);
  const bridge = node?.bridgeId ?? nodeBridgeId(c, nodeName);
  const port = b.add(
    {
      kind: "Port",
      parentId: bridge,
      body: { id: podPortId(c, namespace, name), type: "Bridge", ...filters },
    },
    [bridge, ...Object.values(filters)],
  );

  if (node?.hostId) {
    b.add(
      {
        kind: "HostInterfacePort",
        parentId: node.hostId,
        body: { hostId: node.hostId, portId: port, interfaceName: hostVethName(key) },
      },
      node.membershipKey ? [port, node.membershipKey] : [port],
    );
  } else {
    b.warn("node-host-unknown", `node ${nodeName} has no MidoNet host yet: port not bound`);
  }

  const macText = pod.metadata.annotations?.[ANNOTATION_MAC_ADDRESS];
  if (macText !== undefined) {
    const mac = normalizeMac(macText);
    if (!mac) {
      b.warn("invalid-value", `${ANNOTATION_MAC_ADDRESS} ${JSON.stringify(macText)} is not a MAC`);
    } else {
      b.add({ kind: "MacPort", parentId: bridge, body: { macAddr: mac, portId: port } }, [
        bridge,
        port,
      ]);
      for (const ip of podIpv4s(pod)) {
        b.add({ kind: "IP4Mac", parentId: bridge, body: { ip, mac } }, [bridge]);
      }
    }
  }
  return b.build();
}

/** The pod's IPv4 addresses (status.podIPs, else status.podIP), canonical, without repeats. */
function podIpv4s(pod: Pod): string[] {
  const texts = pod.status?.podIPs?.map((p) => p.ip) ?? [];
  if (texts.length === 0 && pod.status?.podIP) texts.push(pod.status.podIP);
  const out: string[] = [];
  for (const text of texts) {
    const ip = parseIp(text);
    if (ip?.family !== 4) continue;
    const canonical = formatIp(ip);
    if (!out.includes(canonical)) out.push(canonical);
  }
  return out;
}
