/**
 * The cluster-wide resources: the default tunnel zone, the cluster router, and
 * the chains every node bridge filters through.
 *
 *   KUBE-MAIN      1 jump KUBE-PRE, 2 jump KUBE-SERVICES   (inbound filter of every node bridge)
 *   KUBE-PRE       1 rev_snat continue, 2 rev_dnat accept
 *   KUBE-SERVICES  one jump per service port (service.ts)
 *
 * KUBE-PRE's order matters: a reply to a hairpin connection (a pod reaching its
 * own Service and landing on itself) needs both reverse translations, and
 * rev_dnat's accept ends the chain, so rev_snat (continue) comes first. The
 * original reached this order by POSTing rev_dnat, then rev_snat, each to the
 * head of the chain; here it is explicit.
 */
import { type MappingConfig, type ResolvedConfig, resolveConfig } from "./config.js";
import { GLOBAL_OWNER, MappingBuilder, type ObjectMapping } from "./model.js";

export function mapGlobal(config: MappingConfig | ResolvedConfig): ObjectMapping {
  const c = resolveConfig(config);
  const ids = c.ids;
  const b = new MappingBuilder(GLOBAL_OWNER);
  const tenantId = c.tenant;

  b.add(
    {
      kind: "TunnelZone",
      body: { id: ids.defaultTunnelZone, name: "DefaultTunnelZone", type: c.tunnelZoneType },
    },
    [],
  );
  b.add({ kind: "Router", body: { id: ids.clusterRouter, name: "ClusterRouter", tenantId } }, []);
  b.add({ kind: "Chain", body: { id: ids.mainChain, name: "KUBE-MAIN", tenantId } }, []);
  b.add({ kind: "Chain", body: { id: ids.preChain, name: "KUBE-PRE", tenantId } }, []);
  b.add({ kind: "Chain", body: { id: ids.servicesChain, name: "KUBE-SERVICES", tenantId } }, []);

  b.add(
    {
      kind: "Rule",
      parentId: ids.mainChain,
      body: { id: ids.jumpToPre, type: "jump", jumpChainId: ids.preChain },
    },
    [ids.mainChain, ids.preChain],
    "1",
  );
  b.add(
    {
      kind: "Rule",
      parentId: ids.mainChain,
      body: { id: ids.jumpToServices, type: "jump", jumpChainId: ids.servicesChain },
    },
    [ids.mainChain, ids.servicesChain],
    "2",
  );
  b.add(
    {
      kind: "Rule",
      parentId: ids.preChain,
      body: { id: ids.reverseSnat, type: "rev_snat", flowAction: "continue" },
    },
    [ids.preChain],
    "1",
  );
  b.add(
    {
      kind: "Rule",
      parentId: ids.preChain,
      body: { id: ids.reverseDnat, type: "rev_dnat", flowAction: "accept" },
    },
    [ids.preChain],
    "2",
  );
  return b.build();
}
