/**
 * The synthetic cluster's NetworkPolicy side, shared by the benches that
 * measure policy at scale (bench/network-policy.ts on the kernel datapath,
 * bench/midonet-mapping.ts on MidoNet): namespaces labelled by team and env,
 * pods labelled by app and tier, and policies selecting an app of their
 * namespace with peers in their own or other namespaces, named and numeric
 * ports, ipBlocks with excepts and egress rules. Deterministic.
 */
import type { KubeObject } from "../test/support/fake-kube-apiserver.js";

const TIERS = ["web", "db", "cache"] as const;

export const nsName = (i: number) => `np-${i}`;

export function namespaceObject(name: string, i: number): KubeObject {
  return {
    metadata: {
      name,
      labels: {
        "kubernetes.io/metadata.name": name,
        team: `t${i % 10}`,
        env: i % 3 === 0 ? "prod" : "dev",
      },
    },
  };
}

/** The labels of the cluster's pod j: 50 apps, 3 tiers. */
export function clusterPodLabels(j: number): Record<string, string> {
  return {
    app: `a${j % 50}`,
    tier: TIERS[j % 3] as string,
    "pod-template-hash": (j % 997).toString(16),
  };
}

/** Policy k of the cluster: selects app a<k%50> of its namespace; peers in its own or other namespaces. */
export function clusterPolicy(k: number, namespaces: number): KubeObject {
  const ingress: unknown[] = [
    {
      from:
        k % 2 === 0
          ? [{ podSelector: { matchLabels: { app: `a${(k + 1) % 50}` } } }]
          : [
              {
                namespaceSelector: { matchLabels: { team: `t${k % 10}` } },
                podSelector: { matchLabels: { tier: "db" } },
              },
            ],
      ports: [
        { protocol: "TCP", port: 8080 },
        { protocol: "TCP", port: "http" },
      ],
    },
  ];
  if (k % 10 === 5)
    ingress.push({ from: [{ ipBlock: { cidr: "10.64.0.0/16", except: ["10.64.3.0/24"] } }] });
  const egress =
    k % 4 === 0
      ? [
          {
            to: [
              {
                namespaceSelector: {},
                podSelector: { matchLabels: { app: `a${(k + 2) % 50}` } },
              },
            ],
            ports: [{ protocol: "TCP", port: 5432 }],
          },
          { ports: [{ protocol: "UDP", port: 53 }] },
        ]
      : undefined;
  return {
    metadata: { namespace: nsName(k % namespaces), name: `pol-${k}` },
    spec: {
      podSelector: { matchLabels: { app: `a${k % 50}` } },
      policyTypes: egress ? ["Ingress", "Egress"] : ["Ingress"],
      ingress,
      ...(egress ? { egress } : {}),
    },
  };
}
