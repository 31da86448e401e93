/**
 * MidoNet's rule chains evaluated as the agent evaluates them, for packets
 * between ports (midolman: Condition.matches, RuleResult, the port filters a
 * bridge applies), so a test can ask "does this connection get through, and
 * its replies?" of the chains a mapping wrote:
 *
 * - a rule matches when every condition it sets matches, each field's `inv*`
 *   flag inverting that field, `condInvert` the whole; a condition on a field
 *   the packet lacks (nwProto of an ARP frame, tpDst of ICMP) does not match;
 * - `matchForwardFlow` / `matchReturnFlow` ask the connection tracker: a packet
 *   is a return one when the reverse of its flow was recorded as a forward
 *   flow; asking about a forward packet marks its flow to be recorded when the
 *   packet gets through (PacketContext.isForwardFlow and the flow state
 *   installed at the end of the simulation): a flow nobody asked about is not
 *   tracked, and its replies are not return flows;
 * - accept, drop and reject end the walk; jump walks the target and goes on
 *   after the jump when the target returns or runs out; return leaves the
 *   current chain; running out of a port filter's chain accepts.
 *
 * A packet from a pod meets its port's inbound filter, then the destination
 * port's outbound filter (the bridge's own filters hold Service NAT, outside
 * what this evaluates).
 */
import type { Rule } from "../../src/midonet/resources.js";

export interface Packet {
  /** EtherType: 0x0800 IPv4, 0x0806 ARP. */
  dlType: number;
  src?: string;
  dst?: string;
  nwProto?: number;
  tpSrc?: number;
  tpDst?: number;
}

/** Where the chains are: a chain's rules in position order. */
export interface ChainSource {
  rules(chainId: string): readonly Rule[];
}

/** A port's filters, as its body carries them. */
export interface PortFilters {
  inboundFilterId?: string | null;
  outboundFilterId?: string | null;
}

type Verdict = "accept" | "drop" | "continue";

function ipv4Number(text: string): number {
  const parts = text.split(".").map(Number);
  if (parts.length !== 4 || parts.some((p) => !Number.isInteger(p) || p < 0 || p > 255))
    throw new Error(`not an IPv4 address: ${text}`);
  return (
    ((parts[0] as number) * 2 ** 24 +
      (parts[1] as number) * 2 ** 16 +
      (parts[2] as number) * 256 +
      (parts[3] as number)) >>>
    0
  );
}

function inSubnet(ip: string | undefined, address: string, length: number): boolean {
  if (ip === undefined || ip.includes(":")) return false;
  const mask = length === 0 ? 0 : (0xffffffff << (32 - length)) >>> 0;
  return (ipv4Number(ip) & mask) >>> 0 === (ipv4Number(address) & mask) >>> 0;
}

const flowKey = (p: Packet) => `${p.src}|${p.dst}|${p.nwProto}|${p.tpSrc}|${p.tpDst}`;
const reverseKey = (p: Packet) => `${p.dst}|${p.src}|${p.nwProto}|${p.tpDst}|${p.tpSrc}`;

/** One packet's walk: what it asked of the tracker. */
class Walk {
  askedDirection = false;
  constructor(
    readonly packet: Packet,
    private readonly returnFlow: boolean,
  ) {}

  isForwardFlow(): boolean {
    this.askedDirection = true;
    return !this.returnFlow;
  }
}

/** A field's match: unset matches; set, compared and then inverted by its flag. */
function field(set: boolean, matches: () => boolean, inv: boolean | undefined): boolean {
  return !set || matches() !== (inv ?? false);
}

function conditionMatches(r: Rule, w: Walk): boolean {
  const p = w.packet;
  let ok =
    (!r.matchForwardFlow || w.isForwardFlow()) &&
    (!r.matchReturnFlow || !w.isForwardFlow()) &&
    field(r.dlType != null, () => p.dlType === r.dlType, r.invDlType) &&
    field(r.nwProto != null, () => p.nwProto === r.nwProto, r.invNwProto) &&
    field(
      r.nwSrcAddress != null,
      () => inSubnet(p.src, r.nwSrcAddress as string, r.nwSrcLength ?? 32),
      r.invNwSrc,
    ) &&
    field(
      r.nwDstAddress != null,
      () => inSubnet(p.dst, r.nwDstAddress as string, r.nwDstLength ?? 32),
      r.invNwDst,
    ) &&
    field(
      r.tpSrc != null,
      () =>
        p.tpSrc !== undefined && p.tpSrc >= (r.tpSrc?.start ?? 0) && p.tpSrc <= (r.tpSrc?.end ?? 0),
      r.invTpSrc,
    ) &&
    field(
      r.tpDst != null,
      () =>
        p.tpDst !== undefined && p.tpDst >= (r.tpDst?.start ?? 0) && p.tpDst <= (r.tpDst?.end ?? 0),
      r.invTpDst,
    );
  if (r.condInvert) ok = !ok;
  return ok;
}

/** A jump deeper than this is a loop MidoNet's API would have refused. */
const MAX_DEPTH = 32;

function walkChain(chains: ChainSource, chainId: string, w: Walk, depth: number): Verdict {
  if (depth > MAX_DEPTH) throw new Error(`chain ${chainId}: jumps nest deeper than ${MAX_DEPTH}`);
  for (const r of chains.rules(chainId)) {
    if (!conditionMatches(r, w)) continue;
    switch (r.type) {
      case "accept":
        return "accept";
      case "drop":
      case "reject":
        return "drop";
      case "return":
        return "continue";
      case "jump": {
        if (!r.jumpChainId) throw new Error(`a jump rule without a target in chain ${chainId}`);
        const v = walkChain(chains, r.jumpChainId, w, depth + 1);
        if (v !== "continue") return v;
        break;
      }
      default:
        throw new Error(`rule type ${r.type} is not evaluated here (chain ${chainId})`);
    }
  }
  return "continue";
}

/** The connection tracker and the port filters of one virtual network. */
export class MidonetFilterPath {
  private readonly tracked = new Set<string>();

  constructor(private readonly chains: ChainSource) {}

  /**
   * Whether `packet` gets from the port with filters `from` to the port with
   * filters `to`; a forward flow someone asked about is recorded when it does.
   */
  send(packet: Packet, from: PortFilters, to: PortFilters): boolean {
    const w = new Walk(packet, this.tracked.has(reverseKey(packet)));
    for (const chain of [from.inboundFilterId, to.outboundFilterId]) {
      if (!chain) continue;
      if (walkChain(this.chains, chain, w, 0) === "drop") return false;
    }
    if (w.askedDirection && !this.tracked.has(reverseKey(packet)))
      this.tracked.add(flowKey(packet));
    return true;
  }

  /** A connection: the first packet there, then a reply back; what got through. */
  connect(
    packet: Packet,
    from: PortFilters,
    to: PortFilters,
  ): { forward: boolean; reply: boolean } {
    const forward = this.send(packet, from, to);
    if (!forward) return { forward, reply: false };
    const reply: Packet = {
      ...packet,
      src: packet.dst,
      dst: packet.src,
      tpSrc: packet.tpDst,
      tpDst: packet.tpSrc,
    };
    return { forward, reply: this.send(reply, to, from) };
  }
}

/** The chains a MidoNet (the simulator's snapshot of it) holds, each in position order. */
export function chainsHeld(held: { rules: readonly Rule[] }): ChainSource {
  const byChain = new Map<string, Rule[]>();
  for (const r of [...held.rules].sort((a, b) => (a.position ?? 0) - (b.position ?? 0))) {
    const list = byChain.get(r.chainId as string) ?? [];
    list.push(r);
    byChain.set(r.chainId as string, list);
  }
  return { rules: (chainId) => byChain.get(chainId) ?? [] };
}
