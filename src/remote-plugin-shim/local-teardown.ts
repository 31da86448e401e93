/**
 * What DEL can undo without the driver: the container interface. Deleting one end
 * of a veth pair deletes the other, so the host side goes with it; the address
 * lease, the cache entry and anything a chained plugin made wait for the driver's
 * replay of the deletion queue. iproute2 through nsenter, because the netns is a
 * path (`/proc/<pid>/ns/net` as often as `/run/netns/<name>`), which `ip -n` cannot
 * take.
 */
import { existsSync } from "node:fs";

export type TeardownOutcome =
  | { removed: true }
  | {
      removed: false;
      reason: "no netns" | "netns gone" | "no such interface" | "failed";
      detail?: string;
    };

/** Plugins are exec'd with the runtime's PATH, which may lack the sbin directories. */
const SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/**
 * Deletes `ifName` inside the netns at `netns`, bounded by `timeoutMs`. Never
 * throws: a netns or interface already gone is the expected case on DEL.
 */
export async function removeContainerInterface(
  netns: string | undefined,
  ifName: string,
  timeoutMs = 5000,
): Promise<TeardownOutcome> {
  if (!netns) return { removed: false, reason: "no netns" };
  if (!existsSync(netns)) return { removed: false, reason: "netns gone" };
  const path = process.env.PATH ? `${process.env.PATH}:${SYSTEM_PATH}` : SYSTEM_PATH;
  // Loaded here, not at start: only a DEL without a driver gets this far. Not by
  // import() where Node has getBuiltinModule (20.16+, and the executable's 24): the
  // executable runs the shim through node:vm, where import() warns on stderr.
  const { execFile } =
    typeof process.getBuiltinModule === "function"
      ? process.getBuiltinModule("node:child_process")
      : await import("node:child_process");
  return new Promise((resolve) => {
    execFile(
      "nsenter",
      [`--net=${netns}`, "--", "ip", "link", "del", "dev", ifName],
      { timeout: timeoutMs, env: { ...process.env, PATH: path }, encoding: "utf8" },
      (err, _stdout, stderr) => {
        if (!err) resolve({ removed: true });
        else if (/Cannot find device|does not exist/.test(stderr))
          resolve({ removed: false, reason: "no such interface" });
        else resolve({ removed: false, reason: "failed", detail: (stderr || err.message).trim() });
      },
    );
  });
}
