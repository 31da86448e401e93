/**
 * A loaded DriverConfig for unit tests of what follows config loads (the
 * NetworkPolicy enforcer, the Service proxy): one network on the built-in
 * plugin with the given datapath, and driver.json's settings.
 */
import { type DriverConfig, loadDriverConfig } from "../../src/driver/config/network-config.js";

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

/** The error a config load gives for this driver.json (with one plain network beside it). */
export function driverJsonRejection(driverJson: Record<string, unknown>): unknown {
  const conflist = {
    cniVersion: "1.0.0",
    name: "n",
    plugins: [{ type: "bridge", ipam: { type: "host-local", subnet: "10.244.1.0/24" } }],
  };
  const files = new Map([
    ["n.conflist", Buffer.from(JSON.stringify(conflist))],
    ["driver.json", Buffer.from(JSON.stringify(driverJson))],
  ]);
  try {
    loadDriverConfig(files, { source: "test", pluginExists: () => true }, 1);
  } catch (e) {
    return e;
  }
  return undefined;
}
