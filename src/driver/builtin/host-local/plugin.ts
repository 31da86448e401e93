/**
 * host-local, in-process: the reference IPAM plugin's ADD, DEL and CHECK
 * (plugins/ipam/host-local, main.go and backend/allocator) on the same lease
 * files, under the same lock, with the same answers, so that a node may switch
 * between it and the exec'd binary at any time (`--host-local`). It saves the
 * exec of a Go binary per ADD and per DEL: ≈ 2.5 ms of wall time and ≈ 2 ms of
 * CPU each, most of what a pod costs the driver.
 *
 * GC and STATUS (CNI 1.1, which the Debian binary predates) do what current
 * host-local does: GC releases the leases of attachments outside the valid set;
 * STATUS reports ready.
 *
 * Failures are host-local's: code 999 with its message, as its skel reports
 * any plain error; ADD undoes the ranges it had allocated before it fails.
 */
import { readFileSync } from "node:fs";
import { CniError, ErrorCode } from "../../../cni/errors.js";
import { parseGcValidAttachments } from "../../../cni/gc.js";
import { goField } from "../../../cni/go-json.js";
import { convertResult } from "../../../cni/result-convert.js";
import { parseResult } from "../../../cni/result-read.js";
import type { DNS } from "../../../cni/types.js";
import { requireSkelVersion, requireSupportedVersion, versionInfo } from "../../../cni/versions.js";
import { bigIntToIp } from "../../../net/ip.js";
import type { BuiltinPlugin, PluginInvocation } from "../../chain/plugin-runner.js";
import { type HostLocalConfig, loadHostLocalConfig, type RequestedIp } from "./config.js";
import { openLeaseWatcher } from "./lease-index.js";
import {
  type HostLocalRange,
  parseAddress,
  type RangeSet,
  rangeContains,
  rangeFor,
  rangeSetString,
} from "./ranges.js";
import { releaseOrphanLeases } from "./recover.js";
import { goPathError, HostLocalStore, leaseOwner } from "./store.js";

export const HOST_LOCAL_TYPE = "host-local";

interface HostLocalPluginOptions {
  /** How long to wait for another process's hold on a network's lock. */
  lockTimeoutMs: number;
}

export function createHostLocalPlugin(opts: HostLocalPluginOptions): BuiltinPlugin {
  // Its one descriptor is opened now, with the driver's others, not at the first pod.
  openLeaseWatcher();
  return {
    // A chain's `ipam` of this type is checked at load (network-config.ts); as
    // a plugin of its own, host-local reads its `ipam` key when it runs.
    validate() {},
    recover: releaseOrphanLeases,
    async run(inv) {
      try {
        return await runVerb(inv, opts);
      } catch (err) {
        if (err instanceof CniError) throw err;
        throw new CniError(ErrorCode.Internal, (err as Error).message);
      }
    },
  };
}

async function runVerb(inv: PluginInvocation, opts: HostLocalPluginOptions): Promise<unknown> {
  if (inv.command === "VERSION") return versionInfo();
  // Read as the config is (any case, the last key wins), so the check and the result agree.
  requireSkelVersion(inv.command, goField(inv.config, "cniVersion"));
  const conf = loadHostLocalConfig(inv.config, inv.cniArgs ?? "");
  const id = inv.containerId ?? "";
  const ifName = inv.ifName ?? "";
  // ADD reads resolvConf before it makes the network's directory.
  const dns = inv.command === "ADD" && conf.resolvConf ? parseResolvConf(conf.resolvConf) : {};
  const store = new HostLocalStore(conf.name, conf.dataDir);
  const locked = <T>(fn: () => T) => store.locked(opts.lockTimeoutMs, fn);
  switch (inv.command) {
    case "ADD":
      return add(conf, dns, store, locked, id, ifName);
    case "DEL": {
      // Every range set releases by id; host-local goes on past errors and joins them.
      const errors: string[] = [];
      for (const _ of conf.rangeSets) {
        await locked(() => store.releaseById(id, ifName)).catch((err: Error) =>
          errors.push(err.message),
        );
      }
      if (errors.length > 0) throw new Error(errors.join(";"));
      return undefined;
    }
    case "CHECK":
      if (!(await locked(() => store.findById(id, ifName))))
        throw new Error(`host-local: Failed to find address added by container ${id}`);
      return undefined;
    case "GC": {
      const valid = parseGcValidAttachments(inv.config).map((a) =>
        leaseOwner(a.containerID, a.ifname),
      );
      await locked(() => store.gc(new Set(valid)));
      return undefined;
    }
    case "STATUS":
      return undefined;
    default:
      throw new CniError(ErrorCode.InvalidEnvironment, `unknown CNI_COMMAND: ${inv.command}`);
  }
}

type Locked = <T>(fn: () => T) => Promise<T>;

async function add(
  conf: HostLocalConfig,
  dns: DNS,
  store: HostLocalStore,
  locked: Locked,
  id: string,
  ifName: string,
): Promise<unknown> {
  // Before anything is allocated: no throw after it may skip the release.
  const version = requireSupportedVersion(conf.cniVersion || "0.1.0");
  const pending = [...conf.requested];
  const ips: Array<{ address: string; gateway: string }> = [];
  const releaseAll = async () => {
    for (let i = 0; i < ips.length; i++)
      await locked(() => store.releaseById(id, ifName)).catch(() => undefined);
  };
  for (let idx = 0; idx < conf.rangeSets.length; idx++) {
    const set = conf.rangeSets[idx]!;
    // The first requested address this range set holds is its to give.
    const at = pending.findIndex((ip) => rangeFor(set, ip.family, ip.value) !== undefined);
    const wanted = at >= 0 ? pending.splice(at, 1)[0] : undefined;
    try {
      ips.push(await locked(() => allocate(store, set, idx, id, ifName, wanted)));
    } catch (err) {
      await releaseAll();
      throw new Error(`failed to allocate for range ${idx}: ${(err as Error).message}`);
    }
  }
  if (pending.length > 0) {
    await releaseAll();
    throw new Error(
      `failed to allocate all requested IPs: ${pending.map((ip) => ip.text).join(" ")}`,
    );
  }
  let out: ReturnType<typeof convertResult>;
  try {
    const result = parseResult({
      cniVersion: "1.0.0",
      ips,
      ...(conf.routes !== undefined ? { routes: conf.routes } : {}),
      dns,
    });
    out = convertResult(result, version);
  } catch (err) {
    // A result the driver cannot carry (a route without `dst`, which the
    // binary prints as "<nil>") fails the ADD: its leases must not stay.
    await releaseAll();
    throw err;
  }
  // The binary's libcni (before 1.2, which brought 1.1.0) writes a 1.0.0
  // result's dns even when empty; the driver's own output drops it either way.
  if (version === "1.0.0" && !("dns" in out)) return { ...out, dns: {} };
  return out;
}

/** IPAllocator.Get for one range set, under the lock: the requested address, or the next free one. */
function allocate(
  store: HostLocalStore,
  set: RangeSet,
  rangeId: number,
  id: string,
  ifName: string,
  wanted: RequestedIp | undefined,
): { address: string; gateway: string } {
  const leased = (r: HostLocalRange, ip: bigint) => ({
    address: `${bigIntToIp(ip, r.family)}/${r.subnet.prefix}`,
    gateway: bigIntToIp(r.gateway, r.gatewayFamily),
  });
  if (wanted) {
    const r = rangeFor(set, wanted.family, wanted.value);
    if (!r) throw new Error(`${wanted.text} not in range set ${rangeSetString(set)}`);
    if (isGateway(r, wanted.value))
      throw new Error(`requested ip ${bigIntToIp(wanted.value, r.family)} is subnet's gateway`);
    if (!store.reserve(id, ifName, bigIntToIp(wanted.value, r.family), rangeId)) {
      throw new Error(
        `requested IP address ${bigIntToIp(wanted.value, r.family)} is not available in range set ${rangeSetString(set)}`,
      );
    }
    return leased(r, wanted.value);
  }
  // Duplicate allocation is not allowed by the spec.
  for (const ip of store.getById(id, ifName)) {
    const a = parseAddress(ip);
    // Named as Go prints the address, whatever the lease file's name ("fd00:9:0::2").
    if (a && rangeFor(set, a.family, a.value)) {
      throw new Error(
        `${bigIntToIp(a.value, a.family)} has been allocated to ${id}, duplicate allocation is not allowed`,
      );
    }
  }
  for (const [r, ip] of candidates(set, store.lastReservedIp(rangeId))) {
    if (store.reserve(id, ifName, bigIntToIp(ip, r.family), rangeId)) return leased(r, ip);
  }
  throw new Error(`no IP addresses available in range set: ${rangeSetString(set)}`);
}

/**
 * RangeIter: round robin from the address after the last one reserved (when a
 * range of the set still holds it), else from the first range's start; across
 * the set's ranges in order, wrapping once around; gateways skipped.
 */
function* candidates(
  set: RangeSet,
  lastReserved: string | undefined,
): Generator<[HostLocalRange, bigint]> {
  const last = lastReserved === undefined ? undefined : parseAddress(lastReserved);
  const from = last && set.findIndex((r) => rangeContains(r, last.family, last.value));
  let idx = from !== undefined && from >= 0 ? from : 0;
  let cur: bigint | undefined = from !== undefined && from >= 0 ? last!.value : undefined;
  let startIp: bigint | undefined = cur === undefined ? set[0]!.start : undefined;
  // Every address of the set once, and the gateways: a bound the walk cannot pass.
  const bound = set.reduce((n, r) => n + (r.end - r.start + 1n), 0n) + BigInt(set.length) + 1n;
  for (let step = 0n; step <= bound; step++) {
    let r = set[idx]!;
    if (cur === undefined) {
      cur = r.start;
      startIp = cur;
    } else {
      if (cur === r.end) {
        idx = (idx + 1) % set.length;
        r = set[idx]!;
        cur = r.start;
      } else {
        cur += 1n;
      }
      if (startIp === undefined) startIp = cur;
      else if (cur === startIp) return;
    }
    if (!isGateway(r, cur)) yield [r, cur];
  }
}

/** net.IP.Equal against the range's gateway, which may be of the other family. */
const isGateway = (r: HostLocalRange, ip: bigint): boolean =>
  r.gatewayFamily === r.family && ip === r.gateway;

/** bufio.Scanner's limit: a line of this many bytes or more fails the scan. */
const MAX_SCAN_TOKEN = 64 * 1024;

/** parseResolvConf: nameserver, domain, search and options lines. */
function parseResolvConf(path: string): DNS {
  let bytes: Buffer;
  try {
    bytes = readFileSync(path);
  } catch (err) {
    // os.Open takes a directory; reading it is what fails.
    const op = (err as NodeJS.ErrnoException).code === "EISDIR" ? "read" : "open";
    throw goPathError(op, path, err);
  }
  const dns: DNS = {};
  const lines = bytes.toString("utf8").split("\n");
  if (lines.some((l) => Buffer.byteLength(l) >= MAX_SCAN_TOKEN))
    throw new Error("bufio.Scanner: token too long");
  for (const raw of lines) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#") || line.startsWith(";")) continue;
    const fields = line.split(/\s+/);
    if (fields.length < 2) continue;
    const [key, ...rest] = fields as [string, ...string[]];
    if (key === "nameserver") dns.nameservers = [...(dns.nameservers ?? []), rest[0]!];
    else if (key === "domain") dns.domain = rest[0]!;
    else if (key === "search") dns.search = [...(dns.search ?? []), ...rest];
    else if (key === "options") dns.options = [...(dns.options ?? []), ...rest];
  }
  return dns;
}
