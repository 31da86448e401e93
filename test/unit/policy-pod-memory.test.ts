/**
 * What the policy model's input costs a pod in V8's heap: the driver keeps one
 * PolicyPod for every pod of the cluster (150,000 in a large one), so bytes a
 * pod are tens of MiB. Arrays grown by push keep room for 17 elements; the
 * pod's addresses and named ports are copied to their length.
 */
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { expect } from "chai";
import { podFromApi } from "../../src/policy/from-api.js";
import type { PolicyPod } from "../../src/policy/types.js";

setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;

/** A pod as the API lists it (JSON.parse'd, as the driver reads it). */
function apiPod(j: number): unknown {
  const ip = `10.${64 + (j >> 16)}.${(j >> 8) & 255}.${j & 255}`;
  return JSON.parse(
    JSON.stringify({
      metadata: {
        namespace: `ns-${j % 500}`,
        name: `r-${j}`,
        resourceVersion: String(100000 + j),
        labels: { app: `a${j % 50}`, tier: "web", "pod-template-hash": (j % 997).toString(16) },
      },
      spec: {
        nodeName: `fake-${j % 500}`,
        containers: [{ name: "main", ports: [{ name: "http", containerPort: 8080 }] }],
      },
      status: { phase: "Running", podIP: ip, podIPs: [{ ip }] },
    }),
  );
}

describe("policy/from-api: a pod's cost in the heap", () => {
  it("a pod with one address and one named port keeps its arrays to their length (under 400 bytes a pod)", () => {
    const n = 20_000;
    // Kept alive throughout: the names and addresses the pods share with it are not counted.
    const input = Array.from({ length: n }, (_, j) => apiPod(j));
    gc();
    const before = process.memoryUsage().heapUsed;
    const pods: PolicyPod[] = input.map(podFromApi);
    gc();
    const perPod = (process.memoryUsage().heapUsed - before) / n;
    expect(pods[n - 1]!.ips).to.have.length(1);
    // What the pod's own objects cost (its strings are the input's): ~550 bytes with
    // grown arrays, ~290 with arrays copied to their length.
    expect(perPod, `bytes a pod: ${Math.round(perPod)}`).to.be.below(400);
  });
});
