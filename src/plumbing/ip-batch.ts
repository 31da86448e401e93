/**
 * iproute2 in batch mode: many changes for one exec, optionally inside another
 * network namespace. A pod costs two of these on the hot path (one inside its
 * netns, one in the host) instead of eight separate `ip` execs.
 */
import { existsSync } from "node:fs";
import { netnsName } from "./netns.js";
import { run } from "./run.js";

/**
 * Absolute paths, found once: a bare name makes every exec walk PATH, and a long
 * PATH costs a failed execve per entry before /usr/sbin on each pod.
 */
const IP_BIN =
  process.env.CNI_DRIVER_IP_BIN ??
  firstExisting(["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"], "ip");
const NSENTER_BIN =
  process.env.CNI_DRIVER_NSENTER_BIN ??
  firstExisting(["/usr/bin/nsenter", "/bin/nsenter", "/usr/sbin/nsenter"], "nsenter");

function firstExisting(paths: readonly string[], fallback: string): string {
  return paths.find((p) => existsSync(p)) ?? fallback;
}

/** One failed batch line: which command failed and what iproute2 said about it. */
export class IpCommandError extends Error {
  constructor(
    readonly command: string,
    readonly reason: string,
    readonly netns: string | undefined,
  ) {
    super(`${netns ? `in netns ${netns}: ` : ""}ip ${command}: ${reason}`);
    this.name = "IpCommandError";
  }

  /** iproute2's wording for a device that is not there. */
  get notFound(): boolean {
    return /Cannot find device|does not exist|No such device|No such process/i.test(this.reason);
  }

  get exists(): boolean {
    return /File exists/i.test(this.reason);
  }
}

export interface IpBatchOptions {
  /** Path of the network namespace to run in (any nsfs path); host when absent. */
  netns?: string;
  /** Ask for JSON output (`ip -j`): one JSON array per command that prints. */
  json?: boolean;
  /** `ip -d`: link details (the link kind). Batch lines cannot carry options, so it applies to all. */
  details?: boolean;
  /** `ip -6`: the family for route listings (a batch has one family for all its lines). */
  ipv6?: boolean;
  timeoutMs?: number;
}

/**
 * Runs the commands in order and stops at the first failure (no `-force`), so the
 * error names exactly the step that failed. Returns stdout's lines.
 */
export async function ipBatch(
  commands: readonly string[],
  opts: IpBatchOptions = {},
): Promise<string[]> {
  if (commands.length === 0) return [];
  // In batch mode `#` starts a comment (quotes do not help) and a line break ends
  // a command: an interface name carrying either would silently become another
  // command. The netlink backend takes any name the kernel does.
  const unsafe = commands.find((c) => /[#\n\r]/.test(c));
  if (unsafe !== undefined)
    throw new IpCommandError(
      unsafe.split("\n")[0] as string,
      "iproute2's batch mode cannot carry a '#' or a line break in a name (the netlink backend can)",
      opts.netns,
    );
  const ipArgs = [
    ...(opts.json ? ["-j"] : []),
    ...(opts.details ? ["-d"] : []),
    ...(opts.ipv6 ? ["-6"] : []),
    "-batch",
    "-",
  ];
  // `ip -n` takes only names under /run/netns (and saves an exec); runtimes may
  // hand us any nsfs path (/proc/<pid>/ns/net, bind mounts), which nsenter enters.
  const name = opts.netns ? netnsName(opts.netns) : undefined;
  const [file, args] = !opts.netns
    ? [IP_BIN, ipArgs]
    : name
      ? [IP_BIN, ["-n", name, ...ipArgs]]
      : [NSENTER_BIN, [`--net=${opts.netns}`, IP_BIN, ...ipArgs]];
  const res = await run(file, args, `${commands.join("\n")}\n`, opts.timeoutMs);
  if (res.code !== 0) throw batchError(commands, res.stderr, opts.netns);
  return res.stdout.split("\n").filter((l) => l.length > 0);
}

function batchError(commands: readonly string[], stderr: string, netns?: string): IpCommandError {
  const lines = stderr.split("\n").filter((l) => l.trim().length > 0);
  const failed = /Command failed -:(\d+)/.exec(stderr);
  const index = failed ? Number(failed[1]) - 1 : -1;
  const reason =
    lines.filter((l) => !l.startsWith("Command failed")).join("; ") || stderr.trim() || "failed";
  const command = commands[index] ?? (index < 0 && commands.length === 1 ? commands[0] : undefined);
  if (/nsenter: /.test(stderr)) return new IpCommandError("(entering netns)", reason, netns);
  return new IpCommandError(command ?? commands.join(" && "), reason, netns);
}

/** Parses `ip -j` output lines into one array per command. */
export function parseJsonLines<T = Record<string, unknown>>(lines: readonly string[]): T[][] {
  return lines.map((l) => JSON.parse(l) as T[]);
}
