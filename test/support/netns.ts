/** Test network namespaces: unique names, created with iproute2, always removed. */
import { randomBytes } from "node:crypto";
import { execaSync } from "execa";
import { undoOnInterrupt } from "./interrupt-cleanup.js";
import { patient } from "./patience.js";

/** `ip` with these arguments; throws when it fails. */
const ip = (args: string[]) => execaSync("ip", args);

/** `ip` whose failure is an answer (exitCode), not an error. */
const ipAnswer = (args: string[], timeoutMs?: number) =>
  execaSync("ip", args, { reject: false, ...(timeoutMs ? { timeout: patient(timeoutMs) } : {}) });

/** A short random tag for names that must not collide with other runs on the machine. */
export function uniqueTag(bytes = 3): string {
  return randomBytes(bytes).toString("hex");
}

export interface TestNetns {
  name: string;
  path: string;
}

/** Each namespace made here, undone on an interrupted run until deleteNetns removes it. */
const interruptUndos = new Map<string, () => void>();

export function createNetns(name: string): TestNetns {
  ip(["netns", "add", name]);
  interruptUndos.set(
    name,
    undoOnInterrupt(() => ipAnswer(["netns", "del", name])),
  );
  return { name, path: `/run/netns/${name}` };
}

/**
 * A throwaway "node" for a driver run inside it (the harness's `netns`): lo
 * up, so its health server can listen, and a veth `eth0` (peer `eth0p`) as
 * the node's own interface, with `address` when given.
 */
export function createNodeNetns(name: string, address?: string): TestNetns {
  const ns = createNetns(name);
  ip(["-n", name, "link", "set", "lo", "up"]);
  ip(["-n", name, "link", "add", "eth0", "type", "veth", "peer", "name", "eth0p"]);
  if (address) ip(["-n", name, "addr", "add", address, "dev", "eth0"]);
  return ns;
}

export function deleteNetns(name: string): void {
  ipAnswer(["netns", "del", name]);
  interruptUndos.get(name)?.();
  interruptUndos.delete(name);
}

/** Every netns whose name starts with `prefix` (to clean up after a failed test). */
export function listNetns(prefix: string): string[] {
  const out = ipAnswer(["netns", "list"]).stdout;
  return out
    .split("\n")
    .map((l) => l.split(" ")[0] ?? "")
    .filter((n) => n.startsWith(prefix));
}

export interface NetnsCommandResult {
  /** -1 when it did not exit by itself (killed after the timeout, or not started). */
  status: number;
  stdout: string;
  stderr: string;
}

/** Runs a command inside the named netns (`ip netns exec`), killed after `timeoutMs`; never throws. */
export function execInNetns(name: string, cmd: string[], timeoutMs = 10_000): NetnsCommandResult {
  const r = execaSync("ip", ["netns", "exec", name, ...cmd], {
    timeout: patient(timeoutMs),
    stripFinalNewline: false,
    reject: false,
  });
  return { status: r.exitCode ?? -1, stdout: r.stdout, stderr: r.stderr };
}

/** Runs a command inside the netns; returns its exit status and output. */
export function execIn(ns: TestNetns, cmd: string[], timeoutMs = 10_000): NetnsCommandResult {
  return execInNetns(ns.name, cmd, timeoutMs);
}

/** Links in the host netns whose name starts with `prefix`. */
export function listHostLinks(prefix: string): string[] {
  const out = ipAnswer(["-o", "link", "show"]).stdout;
  return out
    .split("\n")
    .map((l) => (l.split(": ")[1] ?? "").split("@")[0] ?? "")
    .filter((n) => n.startsWith(prefix));
}

export function deleteHostLink(name: string): void {
  ipAnswer(["link", "del", name]);
}

/** What `ip -j addr show dev <ifName>` reports for one interface inside a netns. */
export interface NetnsLink {
  ifname: string;
  mtu: number;
  address: string;
  /** "10.244.0.2/24" for each IPv4 address. */
  ipv4: string[];
}

/** The interface `ifName` inside the netns, or undefined when it does not exist. */
export function linkIn(ns: TestNetns | string, ifName: string): NetnsLink | undefined {
  const name = typeof ns === "string" ? ns : ns.name;
  const r = ipAnswer(["-j", "-n", name, "addr", "show", "dev", ifName]);
  if (r.exitCode !== 0) return undefined;
  const parsed = JSON.parse(r.stdout || "[]") as Array<{
    ifname: string;
    mtu: number;
    address: string;
    addr_info?: Array<{ family: string; local: string; prefixlen: number }>;
  }>;
  const link = parsed[0];
  if (!link) return undefined;
  return {
    ifname: link.ifname,
    mtu: link.mtu,
    address: link.address,
    ipv4: (link.addr_info ?? [])
      .filter((a) => a.family === "inet")
      .map((a) => `${a.local}/${a.prefixlen}`),
  };
}

/** One ICMP echo from inside the netns (`ping -c1 -W2`); true when answered. */
export function pingFrom(ns: TestNetns | string, address: string): boolean {
  const name = typeof ns === "string" ? ns : ns.name;
  return (
    ipAnswer(["netns", "exec", name, "ping", "-c1", "-W2", "-n", address], 10_000).exitCode === 0
  );
}
