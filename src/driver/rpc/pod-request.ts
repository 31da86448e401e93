/**
 * From a wire request to what the executor runs: the API version checked, the
 * attachment's identifiers validated with CNI's rules, the network and result
 * version chosen, CNI_ARGS and capability args assembled. What the driver takes
 * from a shim's `stdin_config` is exactly what proto/cni_driver.proto documents.
 */
import { type CniArgPair, podIdentityFromArgs, withIgnoreUnknown } from "../../cni/args.js";
import { KNOWN_CAPABILITIES, normalizeCapabilityArgs } from "../../cni/capabilities.js";
import { CniError, ErrorCode } from "../../cni/errors.js";
import {
  requireStdinConfigSize,
  validateCniArgsText,
  validateNetnsPath,
} from "../../cni/limits.js";
import {
  validateContainerId,
  validateInterfaceName,
  validateNetworkName,
  validateRequestedNetworkName,
} from "../../cni/names.js";
import { type CniVersion, requireSupportedVersion } from "../../cni/versions.js";
import { isObject } from "../../common/json.js";
import { API_VERSION, type Capabilities, type PodRequest } from "../../wire/types.js";
import type { AttachmentArgs } from "../chain/executor.js";

export function requireApiVersion(v: number): void {
  if (v !== API_VERSION) {
    throw new CniError(
      ErrorCode.IncompatibleVersion,
      `incompatible cni-driver API version: the request speaks ${v === 0 ? "no version (api_version unset)" : `version ${v}`}, the driver speaks version ${API_VERSION}`,
      `request api_version=${v}; driver api_version=${API_VERSION}`,
    );
  }
}

interface ResolvedPodRequest {
  /** The network asked for, "" for the driver's default. */
  network: string;
  /** The version the caller wants answers in; undefined: the network's own. */
  cniVersion?: CniVersion;
  attachment: AttachmentArgs;
  pod: { namespace?: string; name?: string; uid?: string };
}

type Verb = "ADD" | "DEL" | "CHECK";

export function resolvePodRequest(req: PodRequest, verb: Verb): ResolvedPodRequest {
  requireApiVersion(req.api_version);
  const stdin = parseStdinConfig(req.stdin_config);
  const containerId = validateContainerId(req.container_id);
  const ifName = validateInterfaceName(req.ifname);
  if (verb !== "DEL" && !req.netns) {
    throw new CniError(
      ErrorCode.InvalidEnvironment,
      `netns is required for ${verb} (CNI_NETNS missing)`,
    );
  }
  if (req.netns) validateNetnsPath(req.netns);
  // The request's own field is code 4 like its other fields; the shim's config key, code 7.
  if (req.network) validateRequestedNetworkName(req.network);
  const network = req.network || (typeof stdin?.network === "string" ? stdin.network : "");
  if (network && !req.network) validateNetworkName(network);
  const versionText = req.cni_version || (stdin?.cniVersion as string | undefined);
  const cniVersion = versionText ? requireSupportedVersion(versionText) : undefined;

  const cniArgs: CniArgPair[] = req.cni_args.map((kv) => [kv.key, kv.value]);
  const fromArgs = podIdentityFromArgs(cniArgs);
  const pod = {
    namespace: req.pod?.namespace || fromArgs.namespace,
    name: req.pod?.name || fromArgs.name,
    uid: req.pod?.uid || fromArgs.uid,
  };
  const add = (k: string, v: string | undefined) => {
    if (v && !cniArgs.some(([key]) => key === k)) cniArgs.push([k, v]);
  };
  withIgnoreUnknown(cniArgs);
  add("K8S_POD_NAMESPACE", pod.namespace);
  add("K8S_POD_NAME", pod.name);
  add("K8S_POD_INFRA_CONTAINER_ID", pod.namespace || pod.name ? containerId : undefined);
  add("K8S_POD_UID", pod.uid);
  // What plugins will get in CNI_ARGS, the pod's identity included, within its limit.
  validateCniArgsText(cniArgs.map(([k, v]) => `${k}=${v}`).join(";"));

  const capabilityArgs = req.capabilities
    ? capabilitiesFromWire(req.capabilities)
    : stdin?.runtimeConfig && typeof stdin.runtimeConfig === "object"
      ? (normalizeCapabilityArgs(stdin.runtimeConfig as Record<string, unknown>) as Record<
          string,
          unknown
        >)
      : {};
  const extraArgs = isObject(stdin?.args) ? stdin.args : undefined;
  return {
    network,
    cniVersion,
    pod,
    attachment: { containerId, netns: req.netns, ifName, cniArgs, capabilityArgs, extraArgs },
  };
}

function parseStdinConfig(bytes: Uint8Array | undefined): Record<string, unknown> | undefined {
  if (!bytes || bytes.length === 0) return undefined;
  requireStdinConfigSize(bytes.length);
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(bytes).toString("utf8"));
  } catch (err) {
    throw new CniError(
      ErrorCode.DecodingFailure,
      `stdin_config is not JSON: ${(err as Error).message}`,
    );
  }
  if (!isObject(value)) {
    throw new CniError(ErrorCode.DecodingFailure, "stdin_config is not a JSON object");
  }
  return value;
}

/** The typed wire capabilities as CNI runtimeConfig JSON (the conventions' camelCase keys). */
function capabilitiesFromWire(c: Capabilities): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (c.port_mappings.length > 0) {
    out.portMappings = c.port_mappings.map((p) => ({
      hostPort: p.host_port,
      containerPort: p.container_port,
      protocol: (p.protocol || "tcp").toLowerCase(),
      ...(p.host_ip ? { hostIP: p.host_ip } : {}),
    }));
  }
  if (c.bandwidth) {
    out.bandwidth = {
      ingressRate: c.bandwidth.ingress_rate,
      ingressBurst: c.bandwidth.ingress_burst,
      egressRate: c.bandwidth.egress_rate,
      egressBurst: c.bandwidth.egress_burst,
    };
  }
  if (c.ip_ranges.length > 0) {
    out.ipRanges = c.ip_ranges.map((set) =>
      set.ranges.map((r) => ({
        subnet: r.subnet,
        ...(r.range_start ? { rangeStart: r.range_start } : {}),
        ...(r.range_end ? { rangeEnd: r.range_end } : {}),
        ...(r.gateway ? { gateway: r.gateway } : {}),
      })),
    );
  }
  if (c.ips.length > 0) out.ips = [...c.ips];
  if (c.mac) out.mac = c.mac;
  if (c.dns) out.dns = { servers: c.dns.servers, searches: c.dns.searches, options: c.dns.options };
  if (Object.keys(c.aliases).length > 0) {
    out.aliases = Object.fromEntries(Object.entries(c.aliases).map(([k, v]) => [k, v.names]));
  }
  if (c.cgroup_path) out.cgroupPath = c.cgroup_path;
  if (Object.keys(c.pod_annotations).length > 0)
    out["io.kubernetes.cri.pod-annotations"] = { ...c.pod_annotations };
  if (c.extra_json) {
    let extra: unknown;
    try {
      extra = JSON.parse(c.extra_json);
    } catch (err) {
      throw new CniError(
        ErrorCode.DecodingFailure,
        `capabilities.extra_json is not JSON: ${(err as Error).message}`,
      );
    }
    if (!isObject(extra)) {
      throw new CniError(ErrorCode.DecodingFailure, "capabilities.extra_json is not a JSON object");
    }
    for (const [k, v] of Object.entries(extra)) {
      if (KNOWN_CAPABILITIES.some((t) => t.toLowerCase() === k.toLowerCase())) {
        throw new CniError(
          ErrorCode.UnsupportedField,
          `capabilities.extra_json: ${k} has a typed field of its own`,
          `field ${k}`,
        );
      }
      out[k] = v;
    }
  }
  return out;
}
