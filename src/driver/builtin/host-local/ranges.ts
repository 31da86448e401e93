/**
 * host-local's ranges (plugins/ipam/host-local/backend/allocator: Range,
 * RangeSet, LoadIPAMConfig), with its defaults and its error wording, shared by
 * the config check at load (network-config.ts) and the in-process allocator.
 *
 * Addresses are bigints within their family, so that stepping, comparing and
 * containment are plain arithmetic for IPv4 and IPv6 alike.
 */
import { goField } from "../../../cni/go-json.js";
import { isObject, type JsonObject } from "../../../common/json.js";
import {
  bigIntToIp,
  cidrHasHostBits,
  cidrNetwork,
  formatCidr,
  formatIp,
  type IpFamily,
  ipToBigInt,
  type ParsedCidr,
  parseCidr,
  parseIp,
} from "../../../net/ip.js";

export interface HostLocalRange {
  family: IpFamily;
  subnet: ParsedCidr;
  /** First and last allocatable addresses, inclusive. */
  start: bigint;
  end: bigint;
  gateway: bigint;
  /** host-local 1.1.1 takes a gateway of the other family as given. */
  gatewayFamily: IpFamily;
}

/** One entry of `ranges`: addresses from any of its ranges, all of one family. */
export type RangeSet = HostLocalRange[];

const width = (family: IpFamily): number => (family === 4 ? 32 : 128);

/** An address as host-local takes it (Go's net.ParseIP, To4 form); undefined when it does not parse. */
export function parseAddress(text: string): { family: IpFamily; value: bigint } | undefined {
  const ip = parseIp(text);
  return ip ? { family: ip.family, value: ipToBigInt(ip.bytes) } : undefined;
}

/** Range.Contains: same family, inside the subnet and within start..end. */
export function rangeContains(r: HostLocalRange, family: IpFamily, ip: bigint): boolean {
  return family === r.family && ip >= r.start && ip <= r.end;
}

/** RangeSet.RangeFor: the range holding the address, if any. */
export function rangeFor(set: RangeSet, family: IpFamily, ip: bigint): HostLocalRange | undefined {
  return set.find((r) => rangeContains(r, family, ip));
}

/** Range.String and RangeSet.String: "start-end" joined by ",". */
export function rangeSetString(set: RangeSet): string {
  return set
    .map((r) => `${bigIntToIp(r.start, r.family)}-${bigIntToIp(r.end, r.family)}`)
    .join(",");
}

/** An address key of a range: absent, null or "" is unset, as Go's net.IP reads them. */
function optionalAddress(range: JsonObject, key: string): ReturnType<typeof parseAddress> {
  const v = goField(range, key);
  if (v === undefined || v === null || v === "") return undefined;
  if (typeof v !== "string") throw new Error(`${key} must be a string`);
  const ip = parseAddress(v);
  if (!ip) throw new Error(`invalid IP address: ${v}`);
  return ip;
}

/**
 * A range host-local refuses, in its words; `subnet` is the subnet as written,
 * when there is one. `decoding`: refused as Go's JSON decoder refuses it, so
 * not as one range set's fault.
 */
export class RangeConfigError extends Error {
  constructor(
    message: string,
    readonly subnet?: string,
    readonly decoding = false,
  ) {
    super(message);
    this.name = "RangeConfigError";
  }
}

/**
 * Range.Canonicalize as Debian's host-local (1.1.1) does it: the subnet leaves
 * room for addresses and has no host bits; rangeStart defaults to network+1 and
 * rangeEnd to the last address (less the broadcast for IPv4), and each given
 * one must lie in the subnet and within the other ("RangeStart … not in network
 * …"); the gateway defaults to network+1 and is taken as given. `strict` (the
 * config check at load) also refuses a gateway outside the subnet, and words a
 * missing subnet and a start after the end plainly.
 */
function parseRange(value: unknown, strict = false): HostLocalRange {
  try {
    return canonicalRange(value, strict);
  } catch (err) {
    const subnet = isObject(value) ? goField(value, "subnet") : undefined;
    throw new RangeConfigError(
      (err as Error).message,
      typeof subnet === "string" ? subnet : undefined,
      err instanceof RangeConfigError && err.decoding,
    );
  }
}

type Address = { family: IpFamily; value: bigint };

function canonicalRange(value: unknown, strict: boolean): HostLocalRange {
  // A null range is Go's zero Range: one without a subnet.
  if (value === null) value = {};
  if (!isObject(value)) throw new Error("must be an object with a 'subnet'");
  const range = value as JsonObject;
  const text = goField(range, "subnet");
  if (text === undefined) throw new Error(strict ? "missing 'subnet'" : "IP <nil> not v4 nor v6");
  // types.IPNet decodes null as "", which net.ParseCIDR refuses.
  if (text !== null && typeof text !== "string") throw new Error("'subnet' must be a string");
  const subnet = parseCidr(text ?? "");
  if (!subnet) throw new RangeConfigError(`invalid CIDR address: ${text ?? ""}`, undefined, true);
  const family = subnet.family;
  const bits = width(family);
  // host-local cannot allocate from a /31 or /32 (a /127 or /128).
  if (subnet.prefix > bits - 2)
    throw new Error(`Network ${formatCidr(subnet)} too small to allocate from`);
  // An IPv4-mapped IPv6 subnet ("::ffff:10.1.0.0/120") is an IPv4 address with
  // an IPv6 mask to host-local, which it refuses.
  if (family === 4 && (text ?? "").split("/")[0]!.includes(":"))
    throw new Error("IPNet IP and Mask version mismatch");
  const network = cidrNetwork(subnet);
  if (cidrHasHostBits(subnet)) {
    throw new Error(
      `Network has host bits set. For a subnet mask of length ${subnet.prefix} the network address is ${formatIp(network.bytes)}`,
    );
  }
  const net = ipToBigInt(network.bytes);
  const last = net | ((1n << BigInt(bits - subnet.prefix)) - 1n);
  const subnetText = formatCidr(subnet);
  const inSubnet = (ip: Address) => ip.family === family && ip.value >= net && ip.value <= last;
  const show = (ip: Address) => bigIntToIp(ip.value, ip.family);

  const gw = optionalAddress(range, "gateway");
  if (strict && gw && !inSubnet(gw))
    throw new Error(`gateway ${show(gw)} not in network ${subnetText}`);
  const startIp = optionalAddress(range, "rangeStart");
  const endIp = optionalAddress(range, "rangeEnd");
  // Range.Contains, with the given rangeEnd if any and the rangeStart, which
  // is network+1 unless given by the time rangeEnd is checked.
  const start: Address = startIp ?? { family, value: net + 1n };
  const contained = (ip: Address, what: string) => {
    const afterEnd = endIp && ip.value > endIp.value;
    const beforeStart = ip.value < start.value;
    if (inSubnet(ip) && !afterEnd && !beforeStart) return;
    const why =
      strict && inSubnet(ip)
        ? afterEnd
          ? ` (it is after rangeEnd ${show(endIp)})`
          : ` (it is before rangeStart ${show(start)})`
        : "";
    throw new Error(`${what} ${show(ip)} not in network ${subnetText}${why}`);
  };
  if (startIp) contained(startIp, "RangeStart");
  if (endIp) contained(endIp, "RangeEnd");
  return {
    family,
    subnet,
    start: start.value,
    end: endIp ? endIp.value : family === 4 ? last - 1n : last,
    gateway: gw ? gw.value : net + 1n,
    gatewayFamily: gw ? gw.family : family,
  };
}

/** Range.Overlaps: of one family, and either one's start or end inside the other. */
function overlaps(a: HostLocalRange, b: HostLocalRange): boolean {
  if (a.family !== b.family) return false;
  return a.start <= b.end && b.start <= a.end;
}

/** RangeSet.Canonicalize: non-empty, one family, no two ranges overlapping. */
function parseRangeSet(value: unknown, strict = false): RangeSet {
  // A null range set is Go's nil RangeSet: an empty one.
  if (value === null) value = [];
  if (!Array.isArray(value)) throw new Error("must be a list of ranges");
  if (value.length === 0) throw new Error("empty range set");
  const set = value.map((r) => parseRange(r, strict));
  const family = (set[0] as HostLocalRange).family;
  if (set.some((r) => r.family !== family)) throw new Error("mixed address families");
  for (let i = 0; i < set.length; i++) {
    for (let j = i + 1; j < set.length; j++) {
      const a = set[i] as HostLocalRange;
      const b = set[j] as HostLocalRange;
      if (overlaps(a, b)) {
        throw new Error(`subnets ${rangeSetString([a])} and ${rangeSetString([b])} overlap`);
      }
    }
  }
  return set;
}

/**
 * The range sets LoadIPAMConfig ends up with: the runtime's `ipRanges` first,
 * then the legacy top-level range, then `ranges`; each canonicalised ("invalid
 * range set N: …"), none overlapping another ("range set I overlaps with J")
 * unless `checkOverlaps` is false: host-local checks the CNI version's limit of
 * one address per family in between (see requireNoOverlaps). `strict`: see
 * parseRange. An empty list is for the caller to refuse: the config check
 * allows it when the plugin takes ipRanges at run time.
 */
export function rangeSetsOf(
  ipam: JsonObject,
  opts: { runtimeIpRanges?: unknown; checkOverlaps?: boolean; strict?: boolean } = {},
): RangeSet[] {
  const { runtimeIpRanges, checkOverlaps = true, strict = false } = opts;
  const raw: unknown[] = [];
  if (Array.isArray(runtimeIpRanges)) raw.push(...runtimeIpRanges);
  const subnet = goField(ipam, "subnet");
  if (subnet !== undefined) {
    // The legacy range: decoded whenever `subnet` is there (null and "" are
    // refused, as types.IPNet refuses them), used when it is an address.
    if (subnet === null || subnet === "") throw new Error("invalid CIDR address: ");
    raw.push([
      {
        subnet,
        rangeStart: goField(ipam, "rangeStart"),
        rangeEnd: goField(ipam, "rangeEnd"),
        gateway: goField(ipam, "gateway"),
      },
    ]);
  }
  const ranges = goField(ipam, "ranges");
  if (ranges !== undefined && ranges !== null) {
    if (!Array.isArray(ranges)) throw new Error("'ranges' must be a list of range sets");
    raw.push(...ranges);
  }
  const sets = raw.map((set, i) => {
    try {
      return parseRangeSet(set, strict);
    } catch (err) {
      if (err instanceof RangeConfigError && err.decoding) throw err;
      const subnet = err instanceof RangeConfigError ? err.subnet : undefined;
      throw new RangeConfigError(`invalid range set ${i}: ${(err as Error).message}`, subnet);
    }
  });
  if (checkOverlaps) requireNoOverlaps(sets);
  return sets;
}

/** LoadIPAMConfig's last check: no two range sets overlap. */
export function requireNoOverlaps(sets: RangeSet[]): void {
  for (let i = 0; i < sets.length; i++) {
    for (let j = i + 1; j < sets.length; j++) {
      const a = sets[i] as RangeSet;
      const b = sets[j] as RangeSet;
      if (a.some((r1) => b.some((r2) => overlaps(r1, r2))))
        throw new Error(`range set ${i} overlaps with ${j}`);
    }
  }
}
