/**
 * The kernel's connection tracking table: list the tracked flows, delete the
 * flows of a group by their original tuples. A deleted TCP flow's next packet
 * is tracked anew (as NEW, the kernel's nf_conntrack_tcp_loose default), so it
 * meets the filter rules again instead of passing as established.
 *
 * Through ctnetlink in-process (native/conntrack, on the libuv thread pool:
 * no fork of the driver, no text to parse) when the addon is built, else
 * through conntrack-tools' `conntrack` (Debian package conntrack). Both read
 * the table of the calling thread's network namespace.
 */
import { existsSync } from "node:fs";
import { addonOnce, addonOrNull } from "../common/native-addon.js";
import { formatIp, parseIp } from "../net/ip.js";
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

// Exported for its tests only (integration/conntrack.test.ts).
export class ConntrackError extends Error {
  constructor(
    message: string,
    /** The errno name of a failed ctnetlink exchange ("EPERM"). */
    readonly code?: string,
  ) {
    super(message);
    this.name = "ConntrackError";
  }
}

interface ConntrackAddon {
  /** Every TCP, UDP and SCTP entry, packed: see decodeFlows. */
  list(): Promise<Buffer>;
  /** Deletes the entries of a group by their original tuples; answers how many went. */
  remove(protocol: number, src: Buffer, dst: Buffer, dport: number): Promise<number>;
}

/**
 * ctnetlink in-process (native/conntrack), when it loads: looked up once;
 * without it, or with CNI_DRIVER_CONNTRACK_BIN set, conntrack is exec'd.
 */
const loadConntrackAddon = addonOnce<ConntrackAddon>(
  { file: "build/Release/cni_driver_conntrack.node", envVar: "CNI_DRIVER_CONNTRACK_ADDON" },
  () => (process.env.CNI_DRIVER_CONNTRACK_BIN ? "CNI_DRIVER_CONNTRACK_BIN is set" : null),
);

function conntrackAddon(): ConntrackAddon | null {
  return addonOrNull(loadConntrackAddon());
}

/** How the table is read and written: "ctnetlink" in-process, or "conntrack" exec'd. */
export function conntrackBackendName(): "ctnetlink" | "conntrack" {
  return conntrackAddon() ? "ctnetlink" : "conntrack";
}

function addonError(action: string, err: unknown): ConntrackError {
  const e = err as NodeJS.ErrnoException;
  return new ConntrackError(`ctnetlink ${action}: ${e.message ?? String(err)}`, e.code);
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
// Exported for its tests only (integration/conntrack.test.ts, unit/conntrack.test.ts).
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

/** Bytes per flow in the addon's list (native/conntrack/conntrack.c says the layout). */
// Exported for its tests only (integration/conntrack.test.ts, unit/conntrack.test.ts).
export const FLOW_RECORD_SIZE = 76;

const PROTOCOL_NAMES = new Map<number, FlowProtocol>([
  [6, "tcp"],
  [17, "udp"],
  [132, "sctp"],
]);
const PROTOCOL_NUMBERS: Record<FlowProtocol, number> = { tcp: 6, udp: 17, sctp: 132 };

/** The kernel's state numbers (enum tcp_conntrack, enum sctp_conntrack) as conntrack prints them. */
const STATE_NAMES: Record<FlowProtocol, readonly string[]> = {
  tcp: [
    "NONE",
    "SYN_SENT",
    "SYN_RECV",
    "ESTABLISHED",
    "FIN_WAIT",
    "CLOSE_WAIT",
    "LAST_ACK",
    "TIME_WAIT",
    "CLOSE",
    "SYN_SENT2",
  ],
  sctp: [
    "NONE",
    "CLOSED",
    "COOKIE_WAIT",
    "COOKIE_ECHOED",
    "ESTABLISHED",
    "SHUTDOWN_SENT",
    "SHUTDOWN_RECD",
    "SHUTDOWN_ACK_SENT",
    "HEARTBEAT_SENT",
    "HEARTBEAT_ACKED",
  ],
  udp: [],
};

const AF_INET = 2;

/**
 * The addon's packed list, FLOW_RECORD_SIZE bytes a flow: family, protocol
 * and state bytes, four big-endian ports (original source and destination,
 * reply source and destination) from byte 4, four 16-byte addresses from
 * byte 12 in the same order (IPv4 in the first 4). The table repeats the
 * same few addresses, so each is formatted once.
 */
// Exported for its tests only (integration/conntrack.test.ts, unit/conntrack.test.ts).
export function decodeFlows(buf: Buffer): Flow[] {
  const flows: Flow[] = [];
  const v4 = new Map<number, string>();
  const v6 = new Map<number, { w: [number, number, number, number]; text: string }>();
  const addr = (family: number, at: number): string => {
    if (family === AF_INET) {
      const key = buf.readUInt32BE(at);
      let text = v4.get(key);
      if (text === undefined) {
        text = `${buf[at]}.${buf[at + 1]}.${buf[at + 2]}.${buf[at + 3]}`;
        v4.set(key, text);
      }
      return text;
    }
    // Keyed by a hash of the four words, checked against them: no key string to build.
    const w: [number, number, number, number] = [
      buf.readUInt32BE(at),
      buf.readUInt32BE(at + 4),
      buf.readUInt32BE(at + 8),
      buf.readUInt32BE(at + 12),
    ];
    const key =
      (w[0] ^
        Math.imul(w[1], 0x9e3779b1) ^
        Math.imul(w[2], 0x85ebca6b) ^
        Math.imul(w[3], 0xc2b2ae35)) >>>
      0;
    const hit = v6.get(key);
    if (hit && hit.w[0] === w[0] && hit.w[1] === w[1] && hit.w[2] === w[2] && hit.w[3] === w[3])
      return hit.text;
    const text = formatIp(buf.subarray(at, at + 16));
    if (!hit) v6.set(key, { w, text });
    return text;
  };
  for (let at = 0; at + FLOW_RECORD_SIZE <= buf.length; at += FLOW_RECORD_SIZE) {
    const family = buf[at] as number;
    const protocol = PROTOCOL_NAMES.get(buf[at + 1] as number);
    if (!protocol) continue;
    const state = STATE_NAMES[protocol][buf[at + 2] as number];
    const flow: Flow = {
      protocol,
      original: {
        src: addr(family, at + 12),
        dst: addr(family, at + 28),
        sport: buf.readUInt16BE(at + 4),
        dport: buf.readUInt16BE(at + 6),
      },
      reply: {
        src: addr(family, at + 44),
        dst: addr(family, at + 60),
        sport: buf.readUInt16BE(at + 8),
        dport: buf.readUInt16BE(at + 10),
      },
    };
    if (state !== undefined) flow.state = state;
    flows.push(flow);
  }
  return flows;
}

/** Every tracked TCP, UDP and SCTP flow of both families. */
export async function listFlows(): Promise<Flow[]> {
  const addon = conntrackAddon();
  if (addon) {
    try {
      return decodeFlows(await addon.list());
    } catch (err) {
      throw addonError("list", err);
    }
  }
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

/** Every flow between two addresses to one destination port, whatever its source port. */
export interface FlowGroup {
  protocol: FlowProtocol;
  src: string;
  dst: string;
  dport: number;
}

/** Deletes the flows of a group, whatever their source port; flows already gone are fine. */
export async function deleteFlows(g: FlowGroup): Promise<void> {
  const addon = conntrackAddon();
  if (addon) {
    const src = parseIp(g.src);
    const dst = parseIp(g.dst);
    if (!src || !dst || src.family !== dst.family)
      throw new ConntrackError(`ctnetlink delete: ${g.src} and ${g.dst} are not of one IP family`);
    try {
      await addon.remove(
        PROTOCOL_NUMBERS[g.protocol],
        Buffer.from(src.bytes),
        Buffer.from(dst.bytes),
        g.dport,
      );
    } catch (err) {
      throw addonError("delete", err);
    }
    return;
  }
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
