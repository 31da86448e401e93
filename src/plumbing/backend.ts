/**
 * Which way pod plumbing reaches the kernel, decided once per process:
 *  - "netlink": rtnetlink in-process (src/plumbing/netlink), no exec on the hot path;
 *  - "iproute2": `ip -batch` execs (ip-batch.ts), the fallback when the native
 *    addon cannot be loaded.
 * CNI_DRIVER_PLUMBING=netlink|iproute2 forces one (tests, bisecting); forcing
 * netlink without a working addon makes every plumbing call fail with the reason.
 * pod-interface.ts and bridge.ts ask here at each call; nothing else switches.
 */
import { messageOf } from "../common/errors.js";
import * as netlink from "./netlink/index.js";

export type PlumbingBackendName = "netlink" | "iproute2";

/** Importing it starts nothing: its worker starts at the first call. */
type NetlinkModule = typeof netlink;

export interface PlumbingBackend {
  name: PlumbingBackendName;
  /** Why this one: forced by the environment, or why netlink could not be used. */
  reason: string;
  /** iproute2 because netlink could not be used (not because it was asked for). */
  fallback: boolean;
  /** The netlink operations, when name is "netlink". */
  netlink?: NetlinkModule;
}

export const PLUMBING_ENV = "CNI_DRIVER_PLUMBING";

let selected: Promise<PlumbingBackend> | undefined;

async function select(forced: string | undefined): Promise<PlumbingBackend> {
  if (forced !== undefined && forced !== "" && forced !== "netlink" && forced !== "iproute2") {
    throw new Error(
      `${PLUMBING_ENV} must be "netlink" or "iproute2", not ${JSON.stringify(forced)}`,
    );
  }
  if (forced === "iproute2")
    return { name: "iproute2", reason: `forced by ${PLUMBING_ENV}`, fallback: false };
  try {
    const addon = await netlink.startNetlink();
    return {
      name: "netlink",
      reason: forced ? `forced by ${PLUMBING_ENV} (${addon})` : `native addon ${addon}`,
      fallback: false,
      netlink,
    };
  } catch (err) {
    const why = messageOf(err);
    if (forced === "netlink") throw new Error(`${PLUMBING_ENV}=netlink, but ${why}`);
    return { name: "iproute2", reason: `netlink unavailable: ${why}`, fallback: true };
  }
}

/**
 * The backend of this process, chosen at the first call (the daemon calls it at
 * start to log the choice). Rejects only when CNI_DRIVER_PLUMBING is invalid or
 * forces netlink and netlink cannot work.
 */
export function plumbingBackend(): Promise<PlumbingBackend> {
  selected ??= select(process.env[PLUMBING_ENV]);
  return selected;
}

/** The netlink operations when that backend is in use; undefined for iproute2. */
export async function netlinkPlumbing(): Promise<NetlinkModule | undefined> {
  return (await plumbingBackend()).netlink;
}

/**
 * Chooses again, as if CNI_DRIVER_PLUMBING were `forced` (undefined: the
 * environment's value). For tests that run the same cases on both backends.
 */
export function selectPlumbingBackend(forced?: PlumbingBackendName): Promise<PlumbingBackend> {
  selected = select(forced ?? process.env[PLUMBING_ENV]);
  return selected;
}
