/**
 * A VXLAN device without learning or multicast: every remote endpoint is
 * written in by hand, as flannel's vxlan backend does. For each peer, one
 * forwarding entry (its VTEP MAC → its underlay address) and one neighbour
 * (its VTEP address → its VTEP MAC); the route to its pod range then goes via
 * that VTEP address `onlink` through the device. Whatever sits on the device
 * is its owner's: the entries are listed and replaced by device name.
 */
import { existsSync } from "node:fs";
import { IpCommandError, ipBatch, parseJsonLines } from "./ip-batch.js";
import { run } from "./run.js";

/** iproute2's `bridge`, which alone writes a VXLAN device's forwarding entries. */
const BRIDGE_BIN =
  ["/usr/sbin/bridge", "/sbin/bridge", "/usr/bin/bridge"].find((p) => existsSync(p)) ?? "bridge";

interface VxlanSpec {
  name: string;
  vni: number;
  /** UDP destination port. */
  port: number;
  /** This node's underlay address: the source of the encapsulated packets. */
  local: string;
  /** The device's MAC: the VTEP MAC peers write into their entries. */
  mac: string;
  mtu: number;
  /** This node's VTEP addresses with their prefixes ("10.244.1.0/32", "fd00:10:244:1::/128"). */
  addresses: readonly string[];
}

export interface FdbEntry {
  mac: string;
  /** The peer's underlay address. */
  dst: string;
}

export interface NeighbourEntry {
  /** The peer's VTEP address. */
  ip: string;
  mac: string;
}

interface LinkJson {
  ifname?: string;
  address?: string;
  mtu?: number;
  linkinfo?: {
    info_kind?: string;
    info_data?: { id?: number; port?: number; local?: string; learning?: boolean };
  };
  addr_info?: { family?: string; local?: string; prefixlen?: number; scope?: string }[];
}

async function showDevice(name: string): Promise<LinkJson | undefined> {
  try {
    const lines = await ipBatch([`addr show dev ${name}`], { json: true, details: true });
    return parseJsonLines<LinkJson>(lines)[0]?.[0];
  } catch (err) {
    if (err instanceof IpCommandError && err.notFound) return undefined;
    throw err;
  }
}

/** Whether a device of that name exists and is a VXLAN device. */
async function vxlanExists(name: string): Promise<boolean> {
  return (await showDevice(name))?.linkinfo?.info_kind === "vxlan";
}

/**
 * Makes the device what `spec` says: created when missing; made again when
 * its VNI, port or local address differ (the kernel cannot change those on a
 * live device); MAC, MTU and address set in place. A device of that name of
 * another kind is refused, never removed. Answers what it changed (empty when
 * all was in place).
 */
export async function ensureVxlan(spec: VxlanSpec): Promise<string[]> {
  const changes: string[] = [];
  let link = await showDevice(spec.name);
  const kind = link?.linkinfo?.info_kind;
  if (link && kind !== "vxlan") {
    throw new IpCommandError(
      `link show ${spec.name}`,
      `exists but is a ${kind ?? "plain device"}, not a vxlan device: not ours, left alone`,
      undefined,
    );
  }
  const data = link?.linkinfo?.info_data;
  if (
    link &&
    (data?.id !== spec.vni ||
      data?.port !== spec.port ||
      data?.local !== spec.local ||
      data?.learning !== false)
  ) {
    await ipBatch([`link del ${spec.name}`]);
    changes.push(`recreated (vni ${data?.id}, port ${data?.port}, local ${data?.local})`);
    link = undefined;
  }
  const cmds: string[] = [];
  if (!link) {
    cmds.push(
      `link add ${spec.name} address ${spec.mac} mtu ${spec.mtu} type vxlan id ${spec.vni} dstport ${spec.port} local ${spec.local} nolearning`,
    );
    if (changes.length === 0) changes.push("created");
  } else {
    if (link.address?.toLowerCase() !== spec.mac) {
      cmds.push(`link set dev ${spec.name} address ${spec.mac}`);
      changes.push(`mac ${link.address} -> ${spec.mac}`);
    }
    if (link.mtu !== spec.mtu) {
      cmds.push(`link set dev ${spec.name} mtu ${spec.mtu}`);
      changes.push(`mtu ${link.mtu} -> ${spec.mtu}`);
    }
  }
  // The kernel's own IPv6 link-local address is not ours to compare or remove.
  const have = (link?.addr_info ?? [])
    .filter((a) => a.family === "inet" || (a.family === "inet6" && a.scope === "global"))
    .map((a) => `${a.local}/${a.prefixlen}`);
  for (const stale of have.filter((a) => !spec.addresses.includes(a))) {
    cmds.push(`addr del ${stale} dev ${spec.name}`);
    changes.push(`address ${stale} removed`);
  }
  for (const address of spec.addresses.filter((a) => !have.includes(a))) {
    // nodad: the device has no peer to answer a duplicate-address probe, and no one shares it.
    cmds.push(`addr replace ${address} dev ${spec.name}${address.includes(":") ? " nodad" : ""}`);
    if (link) changes.push(`address ${address} added`);
  }
  if (!link || !(link as { flags?: string[] }).flags?.includes("UP")) {
    cmds.push(`link set dev ${spec.name} up`);
    if (link) changes.push("set up");
  }
  await ipBatch(cmds);
  return changes;
}

/** Removes the device (its routes, entries and neighbours go with it); false when there was none. */
export async function removeVxlan(name: string): Promise<boolean> {
  if (!(await vxlanExists(name))) return false;
  try {
    await ipBatch([`link del ${name}`]);
    return true;
  } catch (err) {
    if (err instanceof IpCommandError && err.notFound) return false;
    throw err;
  }
}

/** The MTU of the interface carrying `address`; undefined when none does. */
export async function mtuOfInterfaceWith(address: string): Promise<number | undefined> {
  const lines = await ipBatch(["addr show"], { json: true });
  for (const link of parseJsonLines<LinkJson>(lines)[0] ?? []) {
    if ((link.addr_info ?? []).some((a) => a.local === address)) return link.mtu;
  }
  return undefined;
}

/** The device's remote forwarding entries (those with a `dst`). */
export async function listFdb(dev: string): Promise<FdbEntry[]> {
  const res = await run(BRIDGE_BIN, ["-j", "fdb", "show", "dev", dev], "", 10_000);
  if (res.code !== 0) throw new Error(`bridge fdb show dev ${dev}: ${res.stderr.trim()}`);
  const entries = JSON.parse(res.stdout || "[]") as { mac?: string; dst?: string }[];
  return entries
    .filter((e) => e.mac !== undefined && e.dst !== undefined)
    .map((e) => ({ mac: (e.mac as string).toLowerCase(), dst: e.dst as string }));
}

/** Runs `bridge` commands in one batch, stopping at the first failure. */
async function bridgeBatch(commands: readonly string[]): Promise<void> {
  if (commands.length === 0) return;
  const res = await run(BRIDGE_BIN, ["-batch", "-"], `${commands.join("\n")}\n`, 10_000);
  if (res.code !== 0) throw new Error(`bridge ${commands.join(" && ")}: ${res.stderr.trim()}`);
}

/** Adds and removes forwarding entries on the device (removals first). */
export async function changeFdb(
  dev: string,
  change: { add: readonly FdbEntry[]; remove: readonly FdbEntry[] },
): Promise<void> {
  await bridgeBatch([
    ...change.remove.map((e) => `fdb del ${e.mac} dev ${dev} dst ${e.dst} self`),
    ...change.add.map((e) => `fdb append ${e.mac} dev ${dev} dst ${e.dst} self permanent`),
  ]);
}

/** The device's permanent neighbours. */
export async function listNeighbours(dev: string): Promise<NeighbourEntry[]> {
  const lines = await ipBatch([`neigh show dev ${dev} nud permanent`], { json: true });
  return (parseJsonLines<{ dst?: string; lladdr?: string }>(lines)[0] ?? [])
    .filter((n) => n.dst !== undefined && n.lladdr !== undefined)
    .map((n) => ({ ip: n.dst as string, mac: (n.lladdr as string).toLowerCase() }));
}

/** Replaces and removes neighbours on the device (removals first). */
export async function changeNeighbours(
  dev: string,
  change: { set: readonly NeighbourEntry[]; remove: readonly NeighbourEntry[] },
): Promise<void> {
  await ipBatch([
    ...change.remove.map((n) => `neigh del ${n.ip} dev ${dev}`),
    ...change.set.map((n) => `neigh replace ${n.ip} lladdr ${n.mac} dev ${dev} nud permanent`),
  ]);
}
