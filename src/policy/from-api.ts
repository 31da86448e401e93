/**
 * The API's JSON (as list and watch hand it over) to the model's inputs.
 * Lenient where the API server already validated: what is missing reads as
 * its API default.
 */
import { isObject, type JsonObject } from "../common/json.js";
import type {
  LabelSelector,
  NamedPort,
  NetworkPolicy,
  PolicyNamespace,
  PolicyPeer,
  PolicyPod,
  PolicyPort,
  PolicyRule,
  Protocol,
} from "./types.js";

const obj = (v: unknown): JsonObject => (isObject(v) ? v : {});
const arr = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
const str = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);

function labelsOf(meta: JsonObject): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(obj(meta.labels))) if (typeof v === "string") out[k] = v;
  return out;
}

function selectorOf(v: unknown): LabelSelector {
  const s = obj(v);
  const matchLabels = labelsOf({ labels: s.matchLabels });
  const matchExpressions = arr(s.matchExpressions).map((e) => {
    const r = obj(e);
    return {
      key: str(r.key) ?? "",
      operator: (str(r.operator) ?? "") as "In",
      ...(Array.isArray(r.values) ? { values: arr(r.values).map(String) } : {}),
    };
  });
  return { matchLabels, matchExpressions };
}

function peerOf(v: unknown): PolicyPeer {
  const p = obj(v);
  const out: PolicyPeer = {};
  if (p.podSelector !== undefined && p.podSelector !== null)
    out.podSelector = selectorOf(p.podSelector);
  if (p.namespaceSelector !== undefined && p.namespaceSelector !== null)
    out.namespaceSelector = selectorOf(p.namespaceSelector);
  if (p.ipBlock !== undefined && p.ipBlock !== null) {
    const b = obj(p.ipBlock);
    out.ipBlock = { cidr: str(b.cidr) ?? "", except: arr(b.except).map(String) };
  }
  return out;
}

function portOf(v: unknown): PolicyPort {
  const p = obj(v);
  return {
    protocol: (str(p.protocol) ?? "TCP") as Protocol,
    ...(typeof p.port === "number" || typeof p.port === "string" ? { port: p.port } : {}),
    ...(typeof p.endPort === "number" ? { endPort: p.endPort } : {}),
  };
}

function rulesOf(v: unknown, peersKey: "from" | "to"): PolicyRule[] {
  return arr(v).map((r) => {
    const rule = obj(r);
    // client-node's typed objects spell `from` as `_from` (a reserved word in its generator).
    const peers = rule[peersKey] ?? rule[`_${peersKey}`];
    return { peers: arr(peers).map(peerOf), ports: arr(rule.ports).map(portOf) };
  });
}

export function networkPolicyFromApi(o: unknown): NetworkPolicy {
  const meta = obj(obj(o).metadata);
  const spec = obj(obj(o).spec);
  const types = arr(spec.policyTypes).map(String) as Array<"Ingress" | "Egress">;
  return {
    namespace: str(meta.namespace) ?? "",
    name: str(meta.name) ?? "",
    podSelector: selectorOf(spec.podSelector),
    ...(Array.isArray(spec.policyTypes) ? { policyTypes: types } : {}),
    ingress: rulesOf(spec.ingress, "from"),
    egress: rulesOf(spec.egress, "to"),
  };
}

export function namespaceFromApi(o: unknown): PolicyNamespace {
  const meta = obj(obj(o).metadata);
  return { name: str(meta.name) ?? "", labels: labelsOf(meta) };
}

export function podFromApi(o: unknown): PolicyPod {
  const meta = obj(obj(o).metadata);
  const spec = obj(obj(o).spec);
  const status = obj(obj(o).status);
  const namedPorts: NamedPort[] = [];
  for (const c of [...arr(spec.initContainers), ...arr(spec.containers)]) {
    for (const p of arr(obj(c).ports)) {
      const port = obj(p);
      const name = str(port.name);
      if (name && typeof port.containerPort === "number")
        namedPorts.push({
          name,
          protocol: (str(port.protocol) ?? "TCP") as Protocol,
          port: port.containerPort,
        });
    }
  }
  const ips = arr(status.podIPs)
    .map((p) => str(obj(p).ip))
    .filter((ip): ip is string => !!ip);
  const podIP = str(status.podIP);
  if (ips.length === 0 && podIP) ips.push(podIP);
  // Copied to their length: an array grown by push (or filter) keeps room for 17
  // elements, 150 bytes for one address or port, kept as long as the pod exists.
  return {
    namespace: str(meta.namespace) ?? "",
    name: str(meta.name) ?? "",
    labels: labelsOf(meta),
    ips: ips.slice(),
    namedPorts: namedPorts.slice(),
    hostNetwork: spec.hostNetwork === true,
  };
}

/** Where the pod runs (spec.nodeName), and whether it is finished (its address may be reused). */
export function podPlacement(o: unknown): { nodeName?: string; finished: boolean } {
  const spec = obj(obj(o).spec);
  const phase = str(obj(obj(o).status).phase);
  return {
    ...(str(spec.nodeName) ? { nodeName: str(spec.nodeName) } : {}),
    finished: phase === "Succeeded" || phase === "Failed",
  };
}
