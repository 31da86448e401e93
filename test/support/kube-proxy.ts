/**
 * Services as kube-proxy's nftables mode writes them (pkg/proxy/nftables):
 * the `service-ips` verdict map keyed by address . protocol . port, a chain per
 * Service jumping to its endpoint's chain, which marks hairpin traffic for
 * masquerade and DNATs. Loaded with `nft -f -` into a node's netns, it gives
 * a test ClusterIPs without kube-proxy.
 */

export interface ClusterIpService {
  /** A chain name's suffix: letters, digits, dashes. */
  name: string;
  clusterIp: string;
  port: number;
  /** The one endpoint's address and port. */
  endpoint: string;
  targetPort: number;
}

/** The `table ip kube-proxy` text for these TCP ClusterIPs, one endpoint each. */
export function kubeProxyNftables(services: ClusterIpService[]): string {
  const chains = services.flatMap((svc) => [
    `  chain service-${svc.name} {\n    jump endpoint-${svc.name}\n  }`,
    `  chain endpoint-${svc.name} {`,
    `    ip saddr ${svc.endpoint} jump mark-for-masquerade`,
    `    meta l4proto tcp dnat to ${svc.endpoint}:${svc.targetPort}`,
    "  }",
  ]);
  const elements = services.map(
    (svc) => `${svc.clusterIp} . tcp . ${svc.port} : goto service-${svc.name}`,
  );
  return [
    "table ip kube-proxy {",
    '  comment "rules for kube-proxy"',
    "  chain mark-for-masquerade {\n    mark set mark or 0x4000\n  }",
    "  chain masquerading {",
    "    meta mark & 0x4000 == 0 return",
    "    meta mark set meta mark xor 0x4000",
    "    masquerade fully-random",
    "  }",
    ...chains,
    "  map service-ips {",
    "    type ipv4_addr . inet_proto . inet_service : verdict",
    `    elements = { ${elements.join(", ")} }`,
    "  }",
    "  chain services {\n    ip daddr . meta l4proto . th dport vmap @service-ips\n  }",
    "  chain nat-prerouting {\n    type nat hook prerouting priority dstnat; policy accept;\n    jump services\n  }",
    "  chain nat-output {\n    type nat hook output priority -100; policy accept;\n    jump services\n  }",
    "  chain nat-postrouting {\n    type nat hook postrouting priority srcnat; policy accept;\n    jump masquerading\n  }",
    "}",
    "",
  ].join("\n");
}
