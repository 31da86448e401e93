/**
 * A loaded DriverConfig for unit tests of what follows config loads (the
 * NetworkPolicy enforcer, the Service proxy): one network on the built-in
 * plugin with the given datapath, and driver.json's settings.
 */
import type { DriverConfig } from "../../src/driver/config/network-config.js";

export function driverConfig(
  settings: Record<string, unknown> = {},
  datapath = "kernel",
): DriverConfig {
  const raw = { type: "midonet", datapath, ipam: { type: "host-local", subnet: "10.244.1.0/24" } };
  return {
    networks: new Map([
      ["pods", { name: "pods", cniVersion: "1.0.0", plugins: [{ type: "midonet", raw }] }],
    ]),
    defaultNetwork: "pods",
    settings,
    source: "test",
    contentHash: "",
    generation: 1,
    loadedAt: new Date(),
  } as unknown as DriverConfig;
}
