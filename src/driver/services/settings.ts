/**
 * driver.json's Services key, read and checked in one place (the config load
 * calls it, so a bad value rejects the ConfigMap and the last good config
 * keeps serving):
 *
 *   "services": "kube-proxy" | "driver"      (default "kube-proxy")
 *
 * "kube-proxy": the driver programs no Service rules (kube-proxy is deployed
 * beside it, as before). "driver": kube-proxy is not deployed; the driver
 * load-balances Services itself on the kernel datapath (the `inet
 * cni-driver-services` table). Pure: no I/O.
 */

export type ServicesMode = "kube-proxy" | "driver";

export class ServicesSettingsError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ServicesSettingsError";
  }
}

export function readServicesMode(settings: Record<string, unknown>): ServicesMode {
  const mode = settings.services ?? "kube-proxy";
  if (mode !== "kube-proxy" && mode !== "driver")
    throw new ServicesSettingsError(
      `services must be "kube-proxy" or "driver", not ${JSON.stringify(mode)}`,
    );
  return mode;
}
