/**
 * driver.json's NetworkPolicy keys, read and checked in one place (the config
 * load calls it, so a bad value rejects the ConfigMap and the last good
 * config keeps serving):
 *
 *   "networkPolicy": true | false          (default true: enforced wherever a
 *                                           network uses the kernel datapath)
 *   "networkPolicyUnknownPods": "deny" | "allow"   (default "deny")
 *
 * `networkPolicyUnknownPods` is what a pod gets while the driver cannot know
 * whether a policy selects it: its labels are not known (the API could not
 * be read when it was set up) and a policy exists in its namespace, or the
 * policies themselves are not known yet. "deny": nothing is forwarded to or
 * from it until they are (its node still reaches it); "allow": it is open
 * until then. Pure: no I/O.
 */

export type UnknownPodsMode = "deny" | "allow";

export interface NetworkPolicySettings {
  enabled: boolean;
  unknownPods: UnknownPodsMode;
}

export class NetworkPolicySettingsError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "NetworkPolicySettingsError";
  }
}

export function readNetworkPolicySettings(
  settings: Record<string, unknown>,
): NetworkPolicySettings {
  const enabled = settings.networkPolicy ?? true;
  if (typeof enabled !== "boolean")
    throw new NetworkPolicySettingsError(
      `networkPolicy must be true or false, not ${JSON.stringify(enabled)}`,
    );
  const unknownPods = settings.networkPolicyUnknownPods ?? "deny";
  if (unknownPods !== "deny" && unknownPods !== "allow")
    throw new NetworkPolicySettingsError(
      `networkPolicyUnknownPods must be "deny" or "allow", not ${JSON.stringify(unknownPods)}`,
    );
  return { enabled, unknownPods };
}
