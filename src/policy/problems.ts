/**
 * Why a NetworkPolicy cannot be applied as written. The API server's
 * validation refuses most of these; a fake or old one may not, and the model
 * then isolates what such a policy selects while allowing nothing of its own.
 */
import { ipBlockProblem } from "./addresses.js";
import { selectorProblem } from "./selector.js";
import type { NetworkPolicy, PolicyPort, Protocol } from "./types.js";

/** A port's protocol, TCP when unset as the API defaults it. */
export const protocolOf = (p: PolicyPort): Protocol => p.protocol ?? "TCP";

/** Why a policy cannot be applied as written; the API server's validation refuses most of these. */
export function policyProblem(policy: NetworkPolicy): string | undefined {
  const selectors = [policy.podSelector];
  for (const r of [...(policy.ingress ?? []), ...(policy.egress ?? [])]) {
    for (const peer of r.peers ?? []) {
      selectors.push(peer.podSelector ?? {}, peer.namespaceSelector ?? {});
      if (peer.ipBlock) {
        const problem = ipBlockProblem(peer.ipBlock);
        if (problem) return problem;
      }
    }
    for (const p of r.ports ?? []) {
      if (!["TCP", "UDP", "SCTP"].includes(protocolOf(p)))
        return `port protocol ${JSON.stringify(p.protocol)} is not TCP, UDP or SCTP`;
      if (typeof p.port === "number" && (p.port < 1 || p.port > 65535))
        return `port ${p.port} is out of 1-65535`;
      if (p.endPort !== undefined && (typeof p.port !== "number" || p.endPort < p.port))
        return `endPort ${p.endPort} needs a numeric port no greater than it`;
    }
  }
  for (const s of selectors) {
    const problem = selectorProblem(s);
    if (problem) return problem;
  }
  return undefined;
}
