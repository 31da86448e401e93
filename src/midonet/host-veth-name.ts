/**
 * The host end of a pod's veth is named the way the MidoNet integration names it,
 * so the agent's port bindings made by the original integration keep matching:
 * "mido" + the first 11 hex characters of sha1("<namespace>/<pod>").
 */
import { createHash } from "node:crypto";

export const HOST_VETH_PREFIX = "mido";

/**
 * `key` is "<namespace>/<pod>" for a Kubernetes pod; without a pod identity the
 * container id. A pod's second interface (ifname other than eth0) gets its ifname
 * appended to the key, so two attachments of one pod never share a host name.
 */
export function hostVethName(key: string): string {
  return HOST_VETH_PREFIX + createHash("sha1").update(key).digest("hex").slice(0, 11);
}

export function podVethKey(
  pod: { namespace?: string; name?: string },
  containerId: string,
  ifName: string,
): string {
  const base = pod.namespace && pod.name ? `${pod.namespace}/${pod.name}` : containerId;
  return ifName === "eth0" ? base : `${base}/${ifName}`;
}
