/**
 * What MidoNet holds of ours, read through the REST API, and how one held
 * object compares with the resource the mapping wants.
 *
 * "Ours" is found by ownership, not by memory: every bridge, router and chain
 * whose tenantId is our tenant (or whose id the desired state names), everything
 * nested in them (ports, routes, rules, MAC and ARP entries, links between their
 * ports, the host bindings of their ports), our default tunnel zone (its id is
 * derived from the tenant) and its members. So a controller that was down while
 * a Node or a Service went finds the leftovers by listing, with no state of its
 * own to lose: whatever of ours the desired state does not name is an orphan.
 * Members of a tunnel zone named by a node annotation are read (to compare) but
 * not taken for orphans, that zone being the operator's, with one exception: a
 * node's host in the zone the node's record names (`joined`, kept on the Node:
 * see TunnelZoneRecords in reconcile-writes.ts) is ours, as the controller may
 * have put it there, so a node moved out of that zone while we were down is
 * found.
 *
 * Not ours, whatever the listing shows: the Local /32 routes MidoNet adds for
 * each router port address and learned routes (MidoNet keeps them itself).
 *
 * MAC and ARP tables need more care: MidoNet lists the entries its datapath
 * LEARNED along with those created through the API, one value per MAC (per
 * IP), a learned value over a persistent one, and nothing tells them apart. So
 * an entry is ours only where we could have created it (see tableOwnership),
 * and a desired entry hidden behind a learned value is looked up by itself.
 *
 * The cost is a few list calls per device (ports, routes, MAC and ARP tables,
 * rules), never one call per object (a GET per hidden MAC or ARP entry aside),
 * and never a write.
 */
import { cidrContains, formatIp, type ParsedCidr, parseCidr, parseIp } from "../net/ip.js";
import type { MidonetClient } from "./api.js";
import { isNameBasedUuid } from "./ids.js";
import { deepEqual } from "./mapping/diff.js";
import type { DesiredResource } from "./mapping/model.js";
import { resourceKey } from "./mapping/model.js";
import { ownedFields, ROUTER_PORT_ADDRESS } from "./owned-fields.js";
import type {
  Bridge,
  Chain,
  IP4Mac,
  MacPort,
  MidonetObject,
  Port,
  Route,
  Router,
  RouterPort,
  Rule,
  TunnelZone,
  TunnelZoneHost,
} from "./resources.js";
import { tunnelZoneHostPath } from "./resources.js";

/** Something MidoNet holds, keyed the way the mapping keys its resources. */
export interface ActualState {
  /** key → the object as read (bodies as the API renders them). */
  readonly objects: Map<string, MidonetObject>;
  /** chain id → its rule ids in chain order (foreign and orphan rules included). */
  readonly chainOrder: Map<string, string[]>;
  /** Keys of objects of ours that the desired state does not name. */
  readonly orphans: string[];
}

interface ReadActualOptions {
  tenant: string;
  /** Our tunnel zone: its members not desired are orphans. */
  defaultTunnelZone: string;
  /** The desired resources: their ids mark devices as ours whatever their tenant. */
  desired: Iterable<DesiredResource>;
  /** Whether the desired state names a key (orphan test). */
  isDesired: (key: string) => boolean;
  /** Each node's recorded zone with its host now: that membership is ours (its zone is read). */
  joined?: Iterable<{ zone: string; hostId: string }>;
}

/** Lists per device, this many at a time: a restart reads a large cluster in seconds, not minutes. */
const READ_CONCURRENCY = 8;

/** `fn` over `items`, at most `limit` at once; results in the order of `items`. */
async function mapLimit<T, R>(
  items: readonly T[],
  limit: number,
  fn: (item: T) => Promise<R>,
): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i] as T);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}

const lower = (s: string | null | undefined): string | null =>
  typeof s === "string" ? s.toLowerCase() : null;

/** Reads everything of ours (see the header) in a few list calls; throws on an API failure. */
export async function readActualState(
  client: MidonetClient,
  options: ReadActualOptions,
): Promise<ActualState> {
  const reader = new ActualStateReader(client, options);
  const [tunnelZones, routers, bridges, chains] = await Promise.all([
    client.tunnelZones.list(),
    client.routers.list(),
    client.bridges.list(),
    client.chains.list(),
  ]);
  await reader.readTunnelZones(tunnelZones);
  await reader.readRouters(routers);
  await reader.readBridges(bridges);
  await reader.readHiddenEntries();
  reader.putLinksAndBindings();
  reader.putMemberships();
  await reader.readChains(chains);
  return reader.result();
}

/**
 * One reading of the actual state: what is read so far, and which of it is
 * ours. The steps run in the order readActualState calls them, each using
 * what the earlier ones found (ports before links, bindings and memberships).
 */
class ActualStateReader {
  private readonly objects = new Map<string, MidonetObject>();
  private readonly chainOrder = new Map<string, string[]>();
  /** Keys of what is ours. */
  private readonly owned = new Set<string>();
  /** Ids the desired state names: the devices carrying them are ours whatever their tenant. */
  private readonly desiredIds = new Set<string>();
  /** Desired links: port → peer. */
  private readonly desiredLinks = new Map<string, string>();
  /** The tunnel zones to read: ours, those a desired membership names, those a node record names. */
  private readonly zones: Set<string>;
  /** Memberships a node's record says we made (tunnelZoneHostPath). */
  private readonly joined = new Set<string>();
  /** Every port read, ours or not. */
  private readonly ports: Port[] = [];
  private readonly ourPorts = new Set<string>();
  private readonly routerPortsById = new Map<string, RouterPort>();
  /** Memberships read, put once the ports tell which hosts are ours. */
  private readonly members: { tz: string; body: TunnelZoneHost }[] = [];
  /** Table key (bridge, MAC or IP) → the value listed: what a missing entry may hide behind. */
  private readonly listedValues = new Map<string, string>();

  constructor(
    private readonly client: MidonetClient,
    private readonly options: ReadActualOptions,
  ) {
    this.zones = new Set<string>([options.defaultTunnelZone]);
    for (const r of options.desired) {
      const id = (r.body as { id?: string }).id;
      if (id) this.desiredIds.add(id);
      if (r.kind === "PortLink") this.desiredLinks.set(r.parentId, r.body.peerId);
      if (r.kind === "TunnelZoneHost") this.zones.add(r.parentId);
    }
    for (const j of options.joined ?? []) {
      this.zones.add(j.zone);
      this.joined.add(tunnelZoneHostPath(j.zone, j.hostId));
    }
  }

  private put(obj: MidonetObject, ours: boolean): void {
    const key = resourceKey(obj);
    this.objects.set(key, obj);
    if (ours) this.owned.add(key);
  }

  /** A device of ours: our tenant's, or named by the desired state. */
  private ours = (d: { id?: string; tenantId?: string | null }): boolean =>
    d.id !== undefined && (d.tenantId === this.options.tenant || this.desiredIds.has(d.id));

  /**
   * What sits in our routers, bridges and chains is ours when it carries one of
   * our ids: wanted now, or name-based as every id we give (see isNameBasedUuid).
   */
  private oursInside = (id: string | undefined): boolean =>
    id !== undefined && (this.desiredIds.has(id) || isNameBasedUuid(id));

  /** A port of a router or bridge of ours. */
  private putPort(parentId: string, p: Port): void {
    const mine = this.oursInside(p.id);
    this.put({ kind: "Port", parentId, body: p }, mine);
    if (mine) this.ourPorts.add(p.id as string);
    this.ports.push(p);
  }

  /** The zones we read, and their members (kept for putMemberships). */
  async readTunnelZones(tunnelZones: readonly TunnelZone[]): Promise<void> {
    const zonesRead = tunnelZones.filter((tz) => tz.id !== undefined && this.zones.has(tz.id));
    const memberLists = await mapLimit(zonesRead, READ_CONCURRENCY, (tz) =>
      this.client.tunnelZoneHosts.list(tz.id as string),
    );
    for (const [i, tz] of zonesRead.entries()) {
      if (!tz.id) continue;
      this.put({ kind: "TunnelZone", body: tz }, tz.id === this.options.defaultTunnelZone);
      for (const m of memberLists[i] ?? []) {
        this.members.push({
          tz: tz.id,
          body: { hostId: m.hostId.toLowerCase(), ipAddress: m.ipAddress },
        });
      }
    }
  }

  /** Our routers with their ports and routes (not the Local routes, nor learned ones). */
  async readRouters(routers: readonly Router[]): Promise<void> {
    const ourRouters = routers.filter(this.ours) as (Router & { id: string })[];
    const contents = await mapLimit(ourRouters, READ_CONCURRENCY, (router) =>
      Promise.all([this.client.ports.listOnRouter(router.id), this.client.routes.list(router.id)]),
    );
    for (const [i, router] of ourRouters.entries()) {
      this.put({ kind: "Router", body: router }, true);
      const [routerPorts, routes] = contents[i] ?? [[], []];
      for (const p of routerPorts) {
        this.putPort(router.id, p);
        if (p.type === "Router") this.routerPortsById.set((p.id as string).toLowerCase(), p);
      }
      for (const route of routes as (Route & { id: string })[]) {
        if (route.type === "Local" || route.learned === true) continue;
        this.put({ kind: "Route", parentId: router.id, body: route }, this.oursInside(route.id));
      }
    }
  }

  /** Our bridges with their ports and their MAC and ARP tables (see tableOwnership). */
  async readBridges(bridges: readonly Bridge[]): Promise<void> {
    const ourBridges = bridges.filter(this.ours) as (Bridge & { id: string })[];
    const contents = await mapLimit(ourBridges, READ_CONCURRENCY, (bridge) =>
      Promise.all([
        this.client.ports.listOnBridge(bridge.id),
        this.client.macTable.list(bridge.id),
        this.client.arpTable.list(bridge.id),
      ]),
    );
    for (const [i, bridge] of ourBridges.entries()) {
      this.put({ kind: "Bridge", body: bridge }, true);
      const [bridgePorts, macs, arps] = contents[i] ?? [[], [], []];
      for (const p of bridgePorts) this.putPort(bridge.id, p);
      const owns = tableOwnership(
        bridgePorts,
        this.routerPortsById,
        this.desiredLinks,
        this.oursInside,
      );
      for (const m of macs) {
        const body = { macAddr: m.macAddr.toLowerCase(), portId: m.portId.toLowerCase() };
        const entry = { kind: "MacPort", parentId: bridge.id, body } as const;
        this.put(entry, owns.mac(body));
        this.listedValues.set(tableKey(entry), body.portId);
      }
      for (const a of arps) {
        const body = { ip: a.ip, mac: a.mac.toLowerCase() };
        const entry = { kind: "IP4Mac", parentId: bridge.id, body } as const;
        this.put(entry, owns.arp(body));
        this.listedValues.set(tableKey(entry), body.mac);
      }
    }
  }

  /** The desired table entries the listing hid behind a learned value, each looked up by itself. */
  async readHiddenEntries(): Promise<void> {
    const hidden = hiddenEntries(this.options.desired, this.objects, this.listedValues);
    const found = await mapLimit(hidden, READ_CONCURRENCY, (entry) => this.client.get(entry));
    for (const [i, entry] of hidden.entries()) if (found[i] !== undefined) this.put(entry, true);
  }

  /**
   * Links and bindings, read off the ports: one link per pair, named from the
   * side the desired state names (the API links both ways at once).
   */
  putLinksAndBindings(): void {
    const seenLinks = new Set<string>();
    for (const p of this.ports) {
      const id = p.id as string;
      const peer = lower(p.peerId);
      if (peer !== null && !seenLinks.has(`${peer}/${id}`)) {
        seenLinks.add(`${id}/${peer}`);
        const from = this.linkSide(id, peer);
        const to = from === id ? peer : id;
        this.put(
          { kind: "PortLink", parentId: from, body: { peerId: to } },
          this.ourPorts.has(id) && this.ourPorts.has(peer),
        );
      }
      const host = lower(p.hostId);
      if (host !== null && p.interfaceName) {
        this.put(
          {
            kind: "HostInterfacePort",
            parentId: host,
            body: { hostId: host, portId: id, interfaceName: p.interfaceName },
          },
          this.ourPorts.has(id),
        );
      }
    }
  }

  /** The port a link between `a` and `b` is keyed from: the desired side, else the lower id. */
  private linkSide(a: string, b: string): string {
    if (this.desiredLinks.get(a) === b) return a;
    if (this.desiredLinks.get(b) === a) return b;
    return a < b ? a : b;
  }

  /**
   * A member of the default zone is ours when its host is a node's: wanted in
   * the zone, or bound to one of our ports (a node deleted while we were down
   * still is). Anything else in that zone (a gateway an operator added) is left
   * alone. In any zone, a node's host where its record says we joined it is ours.
   */
  putMemberships(): void {
    const ourHosts = new Set<string>();
    for (const r of this.options.desired)
      if (r.kind === "TunnelZoneHost") ourHosts.add(r.body.hostId.toLowerCase());
    for (const p of this.ports) {
      const host = lower(p.hostId);
      if (host !== null && this.ourPorts.has(p.id as string)) ourHosts.add(host);
    }
    for (const m of this.members) {
      const owned =
        (m.tz === this.options.defaultTunnelZone && ourHosts.has(m.body.hostId)) ||
        this.joined.has(tunnelZoneHostPath(m.tz, m.body.hostId));
      this.put({ kind: "TunnelZoneHost", parentId: m.tz, body: m.body }, owned);
    }
  }

  /** Our chains with their rules, and each chain's rule order. */
  async readChains(chains: readonly Chain[]): Promise<void> {
    const ourChains = chains.filter(this.ours) as (Chain & { id: string })[];
    const ruleLists = await mapLimit(ourChains, READ_CONCURRENCY, (chain) =>
      this.client.rules.list(chain.id),
    );
    for (const [i, chain] of ourChains.entries()) {
      this.put({ kind: "Chain", body: chain }, true);
      const order: string[] = [];
      for (const rule of (ruleLists[i] ?? []) as (Rule & { id: string })[]) {
        order.push(rule.id);
        this.put({ kind: "Rule", parentId: chain.id, body: rule }, this.oursInside(rule.id));
      }
      this.chainOrder.set(chain.id, order);
    }
  }

  result(): ActualState {
    const orphans = [...this.owned].filter((key) => !this.options.isDesired(key));
    return { objects: this.objects, chainOrder: this.chainOrder, orphans };
  }
}

// ---------------------------------------------------------------------------
// MAC and ARP tables
// ---------------------------------------------------------------------------

type TableEntry =
  | { kind: "MacPort"; parentId: string; body: MacPort }
  | { kind: "IP4Mac"; parentId: string; body: IP4Mac };

/** What MidoNet keys a table by (one listed value each): the MAC of a MAC entry, the IP of an ARP entry. */
function tableKey(e: TableEntry): string {
  return e.kind === "MacPort"
    ? `${e.parentId}/mac/${e.body.macAddr.toLowerCase()}`
    : `${e.parentId}/ip/${e.body.ip}`;
}

/** The value listed under that key: a MAC entry's port, an ARP entry's MAC. */
function tableValue(e: TableEntry): string {
  return e.kind === "MacPort" ? e.body.portId.toLowerCase() : e.body.mac.toLowerCase();
}

/**
 * Which listed MAC and ARP entries of a bridge are ours. The datapath learns
 * entries on every port (the router's MAC on the link port, pods' and foreign
 * MACs, IPs seen in ARP) and MidoNet lists them with ours, so an entry counts
 * as ours only where the mapping puts entries, and nothing wider:
 * - a MAC entry on a node or pod port: a port with one of our ids (wanted, or
 *   name-based, so a deleted pod's port still counts) other than the bridge's
 *   link to the router, which carries no entry of ours;
 * - an ARP entry for a node or pod address: inside the pod subnet of the
 *   router port the bridge is linked to, the gateway (that port's own address)
 *   excepted. No link, no subnet: no ARP entry counts as ours.
 * Narrower rules (only the entries' current ports or addresses) would keep
 * the entries of a pod deleted while the controller was down. Learned entries
 * inside these bounds are taken for ours once: the reconciler's DELETE leaves
 * them listed, and it does not delete them again.
 */
function tableOwnership(
  bridgePorts: readonly Port[],
  routerPorts: ReadonlyMap<string, RouterPort>,
  desiredLinks: ReadonlyMap<string, string>,
  oursInside: (id: string | undefined) => boolean,
): { mac(e: MacPort): boolean; arp(e: IP4Mac): boolean } {
  const linked = new Set<string>();
  let subnet: ParsedCidr | undefined;
  for (const p of bridgePorts) {
    const id = (p.id as string).toLowerCase();
    const peer = lower(p.peerId) ?? lower(desiredLinks.get(id));
    if (peer === null) continue;
    linked.add(id);
    const rp = routerPorts.get(peer);
    const cidr = rp?.portAddress ? `${rp.portAddress}/${rp.networkLength ?? 32}` : undefined;
    subnet ??= cidr === undefined ? undefined : parseCidr(cidr);
  }
  const gateway = subnet && formatIp(subnet);
  return {
    mac: (e) => oursInside(e.portId) && !linked.has(e.portId),
    arp: (e) => {
      const ip = parseIp(e.ip);
      return !!subnet && !!ip && cidrContains(subnet, ip) && formatIp(ip) !== gateway;
    },
  };
}

/**
 * The desired MAC and ARP entries of the bridges read that the listing may
 * hide: not listed, while their MAC (IP) is listed with another value. MidoNet
 * lists one value per MAC (IP), a learned one over ours, and a second
 * persistent one not at all; a GET of the entry itself answers for it. Without
 * that look, such an entry would seem missing at every resync, and its create
 * would fail every time (MidoNet's 500 for an entry it holds).
 */
function hiddenEntries(
  desired: Iterable<DesiredResource>,
  objects: ReadonlyMap<string, MidonetObject>,
  listedValues: ReadonlyMap<string, string>,
): TableEntry[] {
  const out: TableEntry[] = [];
  for (const r of desired) {
    if ((r.kind !== "MacPort" && r.kind !== "IP4Mac") || objects.has(r.key)) continue;
    const entry = { kind: r.kind, parentId: r.parentId, body: r.body } as TableEntry;
    const listed = listedValues.get(tableKey(entry));
    if (listed !== undefined && listed !== tableValue(entry)) out.push(entry);
  }
  return out;
}

// ---------------------------------------------------------------------------
// Comparing
// ---------------------------------------------------------------------------

/**
 * How an object MidoNet holds stands against the resource wanted under its key:
 * - "same": nothing to do;
 * - "update": a PUT fixes it (routers, bridges, ports on the right device);
 * - "replace": only deleting and creating it again fixes it (MidoNet cannot
 *   update routes, rules, memberships, bindings; a port on another device; a
 *   router port's address, whose Local route MidoNet makes only on create);
 * - "drift": it differs, but re-creating it would do more harm than the
 *   difference (a chain's name: deleting a chain drops its rules and every jump
 *   to it; a tunnel zone: MidoNet refuses a PUT that keeps a zone's own name).
 *   Reported, left alone.
 */
export type Comparison = "same" | "update" | "replace" | "drift";

const orNull = (v: unknown): unknown => (v === undefined ? null : v);

const sameText = (a: unknown, b: unknown): boolean =>
  typeof a === "string" && typeof b === "string"
    ? a.toLowerCase() === b.toLowerCase()
    : orNull(a) === orNull(b);

/** The device an object hangs off, from what GET renders or from how it was created. */
function parentOf(obj: MidonetObject): string | undefined {
  const b = obj.body as { deviceId?: string; routerId?: string; chainId?: string };
  const parent = b.deviceId ?? b.routerId ?? b.chainId ?? (obj as { parentId?: string }).parentId;
  return parent?.toLowerCase();
}

function fieldsDiffer(want: object, have: object, fields: readonly string[]): string[] {
  const w = want as Record<string, unknown>;
  const h = have as Record<string, unknown>;
  return fields.filter((f) => !sameText(w[f], h[f]));
}

/**
 * Which fields of `held` differ from `wanted` (empty: same), and what fixes them.
 * Only fields the mapping sets are compared, plus the references it leaves unset
 * on purpose (filters), so defaults the API renders do not count as drift; for
 * routers, bridges and ports, the fields it owns (owned-fields.ts), which are
 * all its PUT changes.
 */
export function compareHeld(
  wanted: DesiredResource,
  held: MidonetObject,
): { comparison: Comparison; fields: string[] } {
  const same = { comparison: "same" as Comparison, fields: [] as string[] };
  const parentMoved =
    "parentId" in wanted &&
    ["Port", "Route", "Rule"].includes(wanted.kind) &&
    parentOf(held) !== wanted.parentId.toLowerCase();
  if (parentMoved) return { comparison: "replace", fields: ["parent"] };
  const want = wanted.body as Record<string, unknown>;
  const have = held.body as Record<string, unknown>;
  let fields: string[];
  switch (wanted.kind) {
    case "TunnelZone":
      fields = fieldsDiffer(want, have, ["name", "type"]);
      return fields.length ? { comparison: "drift", fields } : same;
    case "Chain":
      fields = fieldsDiffer(want, have, ["name", "tenantId"]);
      return fields.length ? { comparison: "drift", fields } : same;
    case "Router":
    case "Bridge":
      fields = fieldsDiffer(want, have, ownedFields(wanted.kind, want));
      return fields.length ? { comparison: "update", fields } : same;
    case "Port": {
      if (want.type !== have.type) return { comparison: "replace", fields: ["type"] };
      const owned = ownedFields("Port", want);
      const address: readonly string[] = ROUTER_PORT_ADDRESS;
      fields = fieldsDiffer(want, have, owned);
      // MidoNet makes a port's Local /32 route when it creates the port, and a PUT
      // leaves routes alone (PortResource.scala): a new address needs a new port.
      if (fields.some((f) => address.includes(f))) return { comparison: "replace", fields };
      return fields.length ? { comparison: "update", fields } : same;
    }
    case "Route": {
      fields = fieldsDiffer(want, have, [
        "type",
        "srcNetworkAddr",
        "srcNetworkLength",
        "dstNetworkAddr",
        "dstNetworkLength",
        "nextHopPort",
        "nextHopGateway",
      ]);
      if ((want.weight ?? 0) !== (have.weight ?? 0)) fields.push("weight");
      return fields.length ? { comparison: "replace", fields } : same;
    }
    case "Rule": {
      fields = Object.keys(want).filter(
        (f) =>
          f !== "id" &&
          f !== "position" &&
          want[f] !== undefined &&
          !(typeof want[f] === "object" && want[f] !== null
            ? deepEqual(want[f], have[f])
            : sameText(want[f], have[f])),
      );
      return fields.length ? { comparison: "replace", fields } : same;
    }
    case "TunnelZoneHost":
      fields = fieldsDiffer(want, have, ["ipAddress"]);
      return fields.length ? { comparison: "replace", fields } : same;
    case "HostInterfacePort":
      fields = fieldsDiffer(want, have, ["interfaceName"]);
      return fields.length ? { comparison: "replace", fields } : same;
    case "PortLink":
      fields = fieldsDiffer(want, have, ["peerId"]);
      return fields.length ? { comparison: "replace", fields } : same;
    default:
      // MAC and ARP entries: the key is the whole entry.
      return same;
  }
}

/**
 * The rules of a chain that are out of their desired order: the fewest to
 * re-create so the rest keep their relative order (the complement of a longest
 * increasing subsequence of desired positions along the chain).
 */
export function misorderedRules(desired: readonly string[], actual: readonly string[]): string[] {
  const rank = new Map(desired.map((id, i) => [id, i]));
  const seq = actual.filter((id) => rank.has(id));
  // Patience sorting: tails[k] = index in seq of the smallest tail of an increasing run of length k+1.
  const tails: number[] = [];
  const prev: number[] = new Array(seq.length).fill(-1);
  for (let i = 0; i < seq.length; i++) {
    const r = rank.get(seq[i] as string) as number;
    let lo = 0;
    let hi = tails.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if ((rank.get(seq[tails[mid] as number] as string) as number) < r) lo = mid + 1;
      else hi = mid;
    }
    if (lo > 0) prev[i] = tails[lo - 1] as number;
    tails[lo] = i;
  }
  const keep = new Set<string>();
  for (let i = tails.length ? (tails[tails.length - 1] as number) : -1; i >= 0; i = prev[i] ?? -1) {
    keep.add(seq[i] as string);
  }
  return seq.filter((id) => !keep.has(id));
}
