/**
 * The kernel's connection tracking table, through conntrack-tools' `conntrack`
 * (Debian package conntrack): list the tracked flows, delete one by its
 * original tuple. A deleted TCP flow's next packet is tracked anew (as NEW,
 * the kernel's nf_conntrack_tcp_loose default), so it meets the filter rules
 * again instead of passing as established.
 */
import { existsSync } from "node:fs";
import { run } from "./run.js";

export const CONNTRACK_BIN =
  process.env.CNI_DRIVER_CONNTRACK_BIN ??
  ["/usr/sbin/conntrack", "/sbin/conntrack", "/usr/bin/conntrack"].find((p) => existsSync(p)) ??
  "conntrack";

export type FlowProtocol = "tcp" | "udp" | "sctp";

export interface FlowTuple {
  src: string;
  dst: string;
  sport: number;
  dport: number;
}

/** One tracked flow: the tuple as first seen, and the reply's (which shows any NAT). */
export interface Flow {
  protocol: FlowProtocol;
  /** TCP's and SCTP's state (ESTABLISHED, TIME_WAIT, …); undefined for UDP. */
  state?: string;
  original: FlowTuple;
  reply: FlowTuple;
}

export class ConntrackError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ConntrackError";
  }
}

async function conntrack(
  args: string[],
): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    return await run(CONNTRACK_BIN, args, "", 30_000);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new ConntrackError(
      code === "ENOENT"
        ? `conntrack is not installed: ${CONNTRACK_BIN} not found (Debian package conntrack)`
        : String(err),
    );
  }
}

/** Parses `conntrack -L` lines: the first src/dst/sport/dport are the original tuple, the next the reply. */
export function parseFlows(text: string): Flow[] {
  const flows: Flow[] = [];
  for (const line of text.split("\n")) {
    const protocol = line.split(/\s+/, 1)[0];
    if (protocol !== "tcp" && protocol !== "udp" && protocol !== "sctp") continue;
    const values: Record<string, string[]> = { src: [], dst: [], sport: [], dport: [] };
    for (const m of line.matchAll(/\b(src|dst|sport|dport)=(\S+)/g))
      values[m[1] as string]?.push(m[2] as string);
    const tuple = (i: number): FlowTuple | undefined => {
      const [src, dst, sport, dport] = [
        values.src?.[i],
        values.dst?.[i],
        values.sport?.[i],
        values.dport?.[i],
      ];
      if (!src || !dst || !sport || !dport) return undefined;
      return { src, dst, sport: Number(sport), dport: Number(dport) };
    };
    const original = tuple(0);
    const reply = tuple(1);
    // "tcp      6 431999 ESTABLISHED src=…": the state, where the protocol has one.
    const state = line.split(/\s+/)[3];
    if (original && reply)
      flows.push({
        protocol,
        ...(protocol !== "udp" && state && /^[A-Z_]+$/.test(state) ? { state } : {}),
        original,
        reply,
      });
  }
  return flows;
}

/** Every tracked TCP, UDP and SCTP flow of both families. */
export async function listFlows(): Promise<Flow[]> {
  const out: Flow[] = [];
  for (const family of ["ipv4", "ipv6"]) {
    const r = await conntrack(["-L", "-f", family]);
    if (r.code !== 0) throw new ConntrackError(`conntrack -L -f ${family}: ${r.stderr.trim()}`);
    out.push(...parseFlows(r.stdout));
  }
  return out;
}

/** Whether a flow can still carry data: not one that is closing or closed. */
export function flowIsLive(flow: Flow): boolean {
  if (flow.state === undefined) return true;
  return !/^(TIME_WAIT|CLOSE|CLOSE_WAIT|LAST_ACK|FIN_WAIT|CLOSED|SHUTDOWN_\w+)$/.test(flow.state);
}

/** Every flow between two addresses to one destination port: one command for all source ports. */
export interface FlowGroup {
  protocol: FlowProtocol;
  src: string;
  dst: string;
  dport: number;
}

/** Deletes the flows of a group, whatever their source port; flows already gone are fine. */
export async function deleteFlows(g: FlowGroup): Promise<void> {
  const r = await conntrack([
    "-D",
    "-f",
    g.src.includes(":") ? "ipv6" : "ipv4",
    "-p",
    g.protocol,
    "-s",
    g.src,
    "-d",
    g.dst,
    "--dport",
    String(g.dport),
  ]);
  // Exit 1 with "0 flow entries have been deleted": it went meanwhile.
  if (r.code !== 0 && !/0 flow entries/.test(r.stderr))
    throw new ConntrackError(`conntrack -D: ${r.stderr.trim()}`);
}
