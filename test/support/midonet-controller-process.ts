/**
 * The MidoNet controller's world for end-to-end suites: the small cluster of
 * midonet-cluster.ts put into the fake kube-apiserver, what it maps to, and
 * `cni-driver midonet-controller` started as its own process against the
 * simulator, with short lease timings.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mapCluster } from "../../src/midonet/mapping/cluster.js";
import type { DesiredState } from "../../src/midonet/mapping/desired-state.js";
import type { EndpointSlice, Node, Pod, Service } from "../../src/midonet/mapping/k8s.js";
import { ANNOTATION_HOST_ID } from "../../src/midonet/node-contract.js";
import { driverCommand, REPO_ROOT } from "./driver-harness.js";
import type { FakeKubeApiServer, KubeObject } from "./fake-kube-apiserver.js";
import { nodes, pod, service, slice, TENANT } from "./midonet-cluster.js";

export const CLUSTER_PODS = [0, 1, 2, 3, 4, 5];

/** The cluster in the fake API server: nodes without any MidoNet annotation yet. */
export function populateCluster(
  kube: FakeKubeApiServer,
  options: { pods?: number[]; endpoints?: number[] } = {},
): void {
  for (const n of nodes(false)) kube.put("nodes", n as unknown as KubeObject);
  for (const i of options.pods ?? CLUSTER_PODS) kube.put("pods", pod(i) as unknown as KubeObject);
  kube.put("services", service() as unknown as KubeObject);
  kube.put("endpointslices", slice(options.endpoints ?? [0, 1, 2]) as unknown as KubeObject);
}

/** What the mapping wants for the objects the API server holds now. */
export function desiredOf(kube: FakeKubeApiServer): DesiredState {
  return mapCluster(
    {
      nodes: kube.list("nodes") as unknown as Node[],
      namespaces: kube.list("namespaces"),
      networkPolicies: kube.list("networkpolicies"),
      pods: kube.list("pods") as unknown as Pod[],
      services: kube.list("services") as unknown as Service[],
      endpointSlices: kube.list("endpointslices") as unknown as EndpointSlice[],
    },
    { tenant: TENANT },
  ).state;
}

/** True once every node carries its MidoNet host id annotation. */
export function nodesAnnotated(kube: FakeKubeApiServer): boolean {
  return kube.list("nodes").every((n) => n.metadata?.annotations?.[ANNOTATION_HOST_ID]);
}

export interface ControllerProcessOptions {
  kubeconfigFile: string;
  midonetApi: string;
  identity: string;
  /**
   * Runs the compiled controller (`dist/`) on this Node binary, as the image does;
   * by default the sources through tsx on the test's own Node.
   */
  nodeBinary?: string;
}

/** `cni-driver midonet-controller` as a child process (stdio ignored; kill it when done). */
export function spawnControllerProcess(o: ControllerProcessOptions): ChildProcess {
  const c = driverCommand(
    [
      "midonet-controller",
      "--kubeconfig",
      o.kubeconfigFile,
      "--midonet-api",
      o.midonetApi,
      "--midonet-user",
      "admin",
      "--midonet-project",
      "admin",
      "--identity",
      o.identity,
      "--health-addr",
      "",
      "--lease-duration",
      "1",
      "--lease-renew-period",
      "0.1",
      "--lease-renew-deadline",
      "0.6",
      "--host-refresh",
      "0.2",
      "--log-level",
      "warn",
    ],
    o.nodeBinary,
  );
  return spawn(c.node, c.args, {
    cwd: REPO_ROOT,
    env: { ...c.env, CNI_DRIVER_MIDONET_PASSWORD: "admin" },
    stdio: "ignore",
  });
}
