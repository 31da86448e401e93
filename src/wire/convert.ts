/**
 * Between the proto's messages (types.ts) and the driver's own values: the CNI
 * error, result, live config and GC set as the RPC handlers
 * (src/driver/rpc/service.ts) answer with them or take them from a request.
 * Pure functions, no I/O; a request's validation is src/driver/rpc/pod-request.ts.
 */
import { CniError, ErrorCode, isFailureCode } from "../cni/errors.js";
import { convertResult, toResult100 } from "../cni/result-convert.js";
import { formatResult } from "../cni/result-json.js";
import type { AnyResult } from "../cni/types.js";
import type { CniVersion } from "../cni/versions.js";
import {
  type ActiveConfig,
  type Attachment,
  NOT_READY_DETAILS,
  type PodResponse,
  type WireCniError,
  type WireConfigError,
  type WireResult,
} from "./types.js";

/**
 * The driver's refusal of a call while it is not ready: nothing was done, the
 * call may come again. On the wire, code 11 with `not_ready` set.
 */
export class NotReadyError extends CniError {
  constructor(reasons: string[]) {
    super(
      ErrorCode.TryAgainLater,
      `cni-driver is not ready: ${reasons.join("; ")}`,
      NOT_READY_DETAILS,
    );
  }
}

/** Never a code that reads as success (0) or does not fit the wire's uint32: those go as 999. */
export function toWireError(e: CniError): WireCniError {
  if (!isFailureCode(e.code))
    return {
      code: ErrorCode.Internal,
      msg: `${e.message} (error code ${e.code})`,
      details: e.details,
    };
  return {
    code: e.code,
    msg: e.message,
    details: e.details,
    not_ready: e instanceof NotReadyError,
  };
}

/** A wire error back as the CniError it stands for (`not_ready` is not kept). */
export function fromWireError(e: WireCniError): CniError {
  return new CniError(e.code, e.msg, e.details);
}

/** The typed result (always the 1.x shape, which holds the most). */
function toWireResult(result: AnyResult): WireResult {
  const r = toResult100(result);
  return {
    interfaces: (r.interfaces ?? []).map((i) => ({
      name: i.name,
      mac: i.mac ?? "",
      sandbox: i.sandbox ?? "",
      ...(i.mtu !== undefined ? { mtu: i.mtu } : {}),
      socket_path: i.socketPath ?? "",
      pci_id: i.pciID ?? "",
    })),
    ips: (r.ips ?? []).map((ip) => ({
      address: ip.address,
      gateway: ip.gateway ?? "",
      ...(ip.interface !== undefined ? { interface: ip.interface } : {}),
    })),
    routes: (r.routes ?? []).map((rt) => ({
      dst: rt.dst,
      gw: rt.gw ?? "",
      ...(rt.mtu !== undefined ? { mtu: rt.mtu } : {}),
      ...(rt.advmss !== undefined ? { advmss: rt.advmss } : {}),
      ...(rt.priority !== undefined ? { priority: rt.priority } : {}),
      ...(rt.table !== undefined ? { table: rt.table } : {}),
      ...(rt.scope !== undefined ? { scope: rt.scope } : {}),
    })),
    dns: r.dns
      ? {
          nameservers: r.dns.nameservers ?? [],
          domain: r.dns.domain ?? "",
          search: r.dns.search ?? [],
          options: r.dns.options ?? [],
        }
      : null,
  };
}

/**
 * SetUpPod's answer to a chain that succeeded: the result in the version the
 * caller asked for (`result_json`, throws as convertResult does when it cannot
 * be), and typed.
 */
export function toPodResponse(result: AnyResult, cniVersion: CniVersion): PodResponse {
  const out = convertResult(result, cniVersion);
  return {
    error: null,
    cni_version: out.cniVersion,
    result_json: formatResult(out),
    result: toWireResult(result),
  };
}

/** CniStatus's view of the live config (the driver's DriverConfig). */
export function toWireActiveConfig(cfg: {
  networks: ReadonlyMap<string, unknown>;
  defaultNetwork: string;
  source: string;
  contentHash: string;
  generation: number;
  loadedAt: Date;
}): ActiveConfig {
  return {
    networks: [...cfg.networks.keys()],
    default_network: cfg.defaultNetwork,
    source: cfg.source,
    content_hash: cfg.contentHash,
    generation: cfg.generation,
    loaded_at_unix_ms: cfg.loadedAt.getTime(),
  };
}

/** CniStatus's view of the last config that failed to load (the ConfigSource's ConfigError). */
export function toWireConfigError(e: {
  message: string;
  at: Date;
  source: string;
}): WireConfigError {
  return { message: e.message, at_unix_ms: e.at.getTime(), source: e.source };
}

/** A GC request's valid attachments of one network, as the executor takes them. */
export function fromWireAttachments(
  attachments: readonly Attachment[],
): Array<{ containerId: string; ifName: string }> {
  return attachments.map((a) => ({ containerId: a.container_id, ifName: a.ifname }));
}
