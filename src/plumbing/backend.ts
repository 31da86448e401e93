/**
 * Which PodPlumbing a process uses, chosen once at start by the daemon
 * (lifecycle/backends.ts) and handed to what uses it:
 *  - "netlink": rtnetlink in-process (RtnetlinkPlumbing), no exec on the hot path;
 *  - "iproute2": `ip -batch` execs (iproute2Plumbing), the fallback when the
 *    native addon cannot be loaded.
 * CNI_DRIVER_PLUMBING=netlink|iproute2 forces one (tests, bisecting); forcing
 * netlink without a working addon is an error at start, with the reason.
 * Nothing is kept here: each call chooses again, and makes a new netlink worker.
 */
import { messageOf } from "../common/errors.js";
import { iproute2Plumbing } from "./iproute2.js";
import { RtnetlinkPlumbing } from "./netlink/index.js";
import type { PodPlumbing } from "./pod-plumbing.js";

export type PlumbingBackendName = "netlink" | "iproute2";

export interface PlumbingBackend {
  name: PlumbingBackendName;
  /** Why this one: forced by the environment, or why netlink could not be used. */
  reason: string;
  /** iproute2 because netlink could not be used (not because it was asked for). */
  fallback: boolean;
  /** The implementation, handed to the built-in plugin and its bridge cache. */
  plumbing: PodPlumbing;
}

export const PLUMBING_ENV = "CNI_DRIVER_PLUMBING";

/**
 * Chooses as CNI_DRIVER_PLUMBING says (`forced`, by default the environment's
 * value): netlink when its worker starts and answers, else iproute2. Rejects
 * only when the value is invalid, or forces netlink and netlink cannot work.
 */
export async function choosePlumbing(
  forced: string | undefined = process.env[PLUMBING_ENV],
): Promise<PlumbingBackend> {
  if (forced !== undefined && forced !== "" && forced !== "netlink" && forced !== "iproute2") {
    throw new Error(
      `${PLUMBING_ENV} must be "netlink" or "iproute2", not ${JSON.stringify(forced)}`,
    );
  }
  if (forced === "iproute2")
    return {
      name: "iproute2",
      reason: `forced by ${PLUMBING_ENV}`,
      fallback: false,
      plumbing: iproute2Plumbing,
    };
  const netlink = new RtnetlinkPlumbing();
  try {
    const addon = await netlink.start();
    return {
      name: "netlink",
      reason: forced ? `forced by ${PLUMBING_ENV} (${addon})` : `native addon ${addon}`,
      fallback: false,
      plumbing: netlink,
    };
  } catch (err) {
    const why = messageOf(err);
    if (forced === "netlink") throw new Error(`${PLUMBING_ENV}=netlink, but ${why}`);
    return {
      name: "iproute2",
      reason: `netlink unavailable: ${why}`,
      fallback: true,
      plumbing: iproute2Plumbing,
    };
  }
}
