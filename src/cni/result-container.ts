/**
 * Which part of a 1.x result is the container's: the interface inside the
 * sandbox and the addresses on it, by the rules chained plugins such as
 * portmap apply.
 *
 * It stands apart from reading, converting and writing results
 * (result-read.ts, result-convert.ts, result-json.ts) because it is none of
 * them: it asks a question of a result the driver already holds in 1.x.
 */

import { ipConfig100 } from "./result-shape.js";
import type { Interface, IPConfig, Result100 } from "./types.js";

/**
 * The IPs of the container interface `ifName`, by portmap's rule: an ip
 * counts unless its `interface` points at an existing entry that is another
 * interface or has no sandbox (a host-side link).
 */
// Exported for its tests only (unit/result.test.ts).
export function containerIps(result: Result100, ifName: string): IPConfig[] {
  const interfaces = result.interfaces ?? [];
  return (result.ips ?? [])
    .filter((ip) => {
      const idx = ip.interface;
      if (idx === undefined || idx < 0 || idx >= interfaces.length) return true;
      const intf = interfaces[idx] as Interface;
      return intf.name === ifName && !!intf.sandbox;
    })
    .map(ipConfig100);
}

/** Index of the interface named `ifName` with a sandbox (the container side); -1 when none. */
// Exported for its tests only (unit/result.test.ts).
export function containerInterfaceIndex(result: Result100, ifName: string): number {
  return (result.interfaces ?? []).findIndex((i) => i.name === ifName && !!i.sandbox);
}
