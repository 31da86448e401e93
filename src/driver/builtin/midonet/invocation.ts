/**
 * What the midonet plugin reads from an invocation: the attachment's ids,
 * its previous or cached result, the host end's name, the requested MAC;
 * and how a Linux failure becomes the driver's plumbing error.
 */
import { parseCniArgs, podIdentityFromArgs } from "../../../cni/args.js";
import { CniError, ErrorCode } from "../../../cni/errors.js";
import { toResult100 } from "../../../cni/result-convert.js";
import { parseResult } from "../../../cni/result-read.js";
import type { Result100 } from "../../../cni/types.js";
import { messageOf } from "../../../common/errors.js";
import { hostVethName, podVethKey } from "../../../midonet/host-veth-name.js";
import { normalizeMac } from "../../../net/mac.js";
import { IpCommandError } from "../../../plumbing/ip-batch.js";
import { randomMac } from "../../../plumbing/mac.js";
import type { PluginInvocation } from "../../chain/plugin-runner.js";
import { DriverErrorCode } from "../error-codes.js";

export function required(inv: PluginInvocation): {
  containerId: string;
  netns: string;
  ifName: string;
} {
  const { containerId, netns, ifName } = inv;
  if (!containerId || !netns || !ifName) {
    throw new CniError(
      ErrorCode.InvalidEnvironment,
      `midonet plugin: ${inv.command} needs a container id, netns and ifname`,
    );
  }
  return { containerId, netns, ifName };
}

export function prevResultOf(inv: PluginInvocation): Result100 | undefined {
  const prev = inv.config.prevResult;
  if (prev === undefined || prev === null) return undefined;
  return toResult100(parseResult(prev));
}

/** The cached result the executor hands built-in plugins on DEL; undefined when absent or unreadable. */
export function cachedResultOf(inv: PluginInvocation): Result100 | undefined {
  if (inv.cachedResult === undefined || inv.cachedResult === null) return undefined;
  try {
    return toResult100(parseResult(inv.cachedResult));
  } catch {
    return undefined;
  }
}

/** The Kubernetes pod CNI_ARGS name, when they name one (both namespace and name). */
export function podIdentityOf(inv: PluginInvocation): { namespace?: string; name?: string } {
  const { namespace, name } = podIdentityFromArgs(parseCniArgs(inv.cniArgs ?? ""));
  return namespace && name ? { namespace, name } : {};
}

export function hostNameFor(inv: PluginInvocation): string {
  return hostVethName(podVethKey(podIdentityOf(inv), inv.containerId ?? "", inv.ifName ?? ""));
}

export function containerMacFor(inv: PluginInvocation): string {
  const rc = inv.config.runtimeConfig as Record<string, unknown> | undefined;
  const requested =
    (typeof rc?.mac === "string" ? rc.mac : undefined) ??
    parseCniArgs(inv.cniArgs ?? "").find(([k]) => k === "MAC")?.[1];
  if (requested === undefined) return randomMac();
  const mac = normalizeMac(requested);
  if (!mac)
    throw new CniError(
      ErrorCode.InvalidNetworkConfig,
      `midonet plugin: invalid MAC address ${JSON.stringify(requested)}`,
    );
  return mac;
}

/** Linux failures get the driver's plumbing code and say which step failed. */
export function plumbingError(err: unknown, step: string): CniError {
  if (err instanceof CniError) return err;
  if (err instanceof IpCommandError)
    return new CniError(DriverErrorCode.PlumbingFailed, `${step}: ${err.message}`);
  return new CniError(DriverErrorCode.PlumbingFailed, `${step}: ${messageOf(err)}`);
}
