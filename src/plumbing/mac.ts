/** Random MACs for new links. */
import { randomBytes } from "node:crypto";
import { formatMac } from "../cni/mac.js";

/** A random locally administered unicast MAC. */
export function randomMac(): string {
  const b = randomBytes(6);
  b[0] = ((b[0] as number) & 0xfe) | 0x02;
  return formatMac(b);
}
