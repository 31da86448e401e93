/**
 * `cni-driver uninstall`: removes from this node everything the driver made,
 * and nothing else — the host conflist and the shim (with the reference
 * plugins install-cni added, as it recorded them), the nftables tables, the
 * routes it tagged, the VXLAN device (its neighbours and forwarding entries go
 * with it), the node link, the bridges of its networks once no pod uses them,
 * the host-local leases of its networks, its state and cache directories and
 * its socket directory.
 *
 * It refuses while a driver still serves the socket (it would make it all
 * again), and while pods are attached (a cached attachment, or a pod veth on a
 * bridge), naming them, unless forced. What it reads of the networks comes from
 * the config directory; what it cannot read there it takes from the defaults.
 */
import { rm, rmdir, stat, unlink } from "node:fs/promises";
import { dirname, join } from "node:path";
import { podIdentityFromArgs } from "../../cni/args.js";
import { goField } from "../../cni/go-json.js";
import { FileFormatError } from "../../common/file-format.js";
import { dialUnixSocket } from "../../common/health.js";
import { isObject } from "../../common/json.js";
import { HOST_VETH_PREFIX } from "../../midonet/host-veth-name.js";
import { NODE_INTERFACE, NODE_PEER_INTERFACE } from "../../midonet/node-contract.js";
import { listBridgePorts } from "../../plumbing/bridge.js";
import { deletePeerRoute, listRoutesByProtocol } from "../../plumbing/cluster-routes.js";
import { removeNftTable } from "../../plumbing/nftables.js";
import { removeNodeLink } from "../../plumbing/node-link.js";
import { deleteHostLink, showLink } from "../../plumbing/pod-interface.js";
import { removeVxlan } from "../../plumbing/vxlan.js";
import { DEFAULT_BRIDGE, MIDONET_PLUGIN_TYPE } from "../builtin/midonet/config.js";
import { ResultCache } from "../chain/result-cache.js";
import { MASQUERADE_TABLE, ROUTE_PROTOCOL } from "../cluster-network/plan.js";
import { VXLAN_DEVICE } from "../cluster-network/settings.js";
import { readConfigDir } from "../config/config-source.js";
import { POLICY_TABLE } from "../network-policy/ruleset.js";
import { STEERING_TABLE } from "../services/bridge-steering.js";
import { SERVICES_TABLES } from "../services/ruleset.js";
import { HOST_CONFLIST_NAME, INSTALLED_RECORD, readInstalled, SHIM_TYPE } from "./host-install.js";

export interface UninstallOptions {
  configDir: string;
  hostCniConfDir: string;
  hostCniBinDir: string;
  stateDir: string;
  cacheDir: string;
  hostLocalDataDir: string;
  socket: string;
  /** Remove all the same while pods are attached (they lose their network). */
  force: boolean;
}

/** Refused: the message names why (the driver serving, the pods attached). */
export class UninstallRefused extends Error {
  constructor(message: string) {
    super(message);
    this.name = "UninstallRefused";
  }
}

/** What the driver's networks made on the node, read from its config directory. */
export interface NodeFootprint {
  bridges: string[];
  nodeLink: [string, string];
  /** host-local lease directories: <dataDir>/<network>. */
  leaseDirs: string[];
}

/** The bridges, node link and lease directories the config's networks use. Pure. */
export function footprintOf(
  files: ReadonlyMap<string, Uint8Array>,
  hostLocalDataDir: string,
): NodeFootprint {
  const bridges = new Set<string>();
  const leaseDirs = new Set<string>();
  const parse = (name: string): Record<string, unknown> => {
    try {
      const v: unknown = JSON.parse(Buffer.from(files.get(name) ?? []).toString("utf8"));
      return isObject(v) ? v : {};
    } catch {
      return {};
    }
  };
  for (const name of files.keys()) {
    if (!name.endsWith(".conflist")) continue;
    const list = parse(name);
    const net = typeof list.name === "string" ? list.name : undefined;
    for (const p of Array.isArray(list.plugins) ? list.plugins : []) {
      if (!isObject(p) || p.type !== MIDONET_PLUGIN_TYPE) continue;
      if ((p.datapath ?? "kernel") === "kernel")
        bridges.add(typeof p.bridge === "string" ? p.bridge : DEFAULT_BRIDGE);
      const ipam = isObject(p.ipam) ? p.ipam : {};
      // host-local reads the key in any case ("datadir"); where none is set, the driver's default.
      const dataDir = goField(ipam, "dataDir");
      if (net && ipam.type === "host-local")
        leaseDirs.add(
          join(typeof dataDir === "string" && dataDir !== "" ? dataDir : hostLocalDataDir, net),
        );
    }
  }
  if (bridges.size === 0) bridges.add(DEFAULT_BRIDGE);
  const s = parse("driver.json");
  return {
    bridges: [...bridges],
    nodeLink: [
      typeof s.nodeInterface === "string" ? s.nodeInterface : NODE_INTERFACE,
      typeof s.nodePeerInterface === "string" ? s.nodePeerInterface : NODE_PEER_INTERFACE,
    ],
    leaseDirs: [...leaseDirs],
  };
}

/** The pods still attached: cached attachments and pod veths on the bridges. */
async function attachedPods(o: UninstallOptions, bridges: readonly string[]): Promise<string[]> {
  const pods = new Set<string>();
  const cache = await new ResultCache(o.cacheDir)
    .scan()
    .catch(() => ({ attachments: [], unknownFormat: [] }));
  for (const e of cache.unknownFormat) pods.add(`an attachment of a newer cni-driver (${e.path})`);
  for (const a of cache.attachments) {
    const p = podIdentityFromArgs(a.cniArgs ?? []);
    pods.add(
      p.namespace && p.name
        ? `${p.namespace}/${p.name} (container ${a.containerId})`
        : `container ${a.containerId}`,
    );
  }
  for (const b of bridges)
    for (const port of await listBridgePorts(b))
      if (port.startsWith(HOST_VETH_PREFIX)) pods.add(`a pod on ${b} (host veth ${port})`);
  return [...pods];
}

/** `read`'s answer; a file of a format this cni-driver does not know refuses the uninstall. */
function refusingUnknownFormat<T>(read: () => T): T {
  try {
    return read();
  } catch (err) {
    if (err instanceof FileFormatError)
      throw new UninstallRefused(
        `${err.message}: run the uninstall of the cni-driver that wrote it`,
      );
    throw err;
  }
}

const gone = async (what: () => Promise<unknown>): Promise<boolean> => {
  try {
    await what();
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return false;
    throw err;
  }
};

/** Removes what the driver made; answers what it removed, one line each. */
export async function uninstall(o: UninstallOptions): Promise<string[]> {
  if ((await dialUnixSocket(o.socket, 1000)).ok)
    throw new UninstallRefused(
      `a driver still serves ${o.socket}: stop it first (delete the DaemonSet, or stop cni-driver serve)`,
    );
  const files = await readConfigDir(o.configDir).catch(() => new Map<string, Uint8Array>());
  const fp = footprintOf(files, o.hostLocalDataDir);
  // Read before anything goes: a record a newer cni-driver wrote is not ours to interpret.
  const plugins = refusingUnknownFormat(() => readInstalled(o.hostCniBinDir));
  const pods = await attachedPods(o, fp.bridges);
  if (pods.length > 0 && !o.force)
    throw new UninstallRefused(
      `pods are still attached: ${pods.join(", ")}; delete them first, or pass --force`,
    );
  const removed: string[] = [];
  const did = (ok: boolean, what: string) => {
    if (ok) removed.push(what);
  };
  // Runtimes stop calling the shim first: then nothing makes a pod while the rest goes.
  const conflist = join(o.hostCniConfDir, HOST_CONFLIST_NAME);
  did(await gone(() => unlink(conflist)), conflist);
  for (const name of [SHIM_TYPE, ...plugins, INSTALLED_RECORD]) {
    const path = join(o.hostCniBinDir, name);
    did(await gone(() => unlink(path)), path);
  }
  for (const table of [...SERVICES_TABLES, POLICY_TABLE, MASQUERADE_TABLE])
    did(await removeNftTable("inet", table), `nftables table inet ${table}`);
  did(await removeNftTable("bridge", STEERING_TABLE), `nftables table bridge ${STEERING_TABLE}`);
  for (const family of [4, 6] as const)
    for (const r of await listRoutesByProtocol(ROUTE_PROTOCOL, family)) {
      await deletePeerRoute(r.dst, ROUTE_PROTOCOL);
      removed.push(`route to ${r.dst}`);
    }
  did(await removeVxlan(VXLAN_DEVICE), `link ${VXLAN_DEVICE}`);
  did(await removeNodeLink(...fp.nodeLink), `links ${fp.nodeLink.join(" and ")}`);
  for (const b of fp.bridges) {
    if (!(await showLink(b))) continue;
    await deleteHostLink(b);
    removed.push(`link ${b}`);
  }
  for (const dir of new Set([...fp.leaseDirs, o.stateDir, o.cacheDir])) {
    if (await stat(dir).catch(() => undefined)) removed.push(dir);
    await rm(dir, { recursive: true, force: true });
  }
  // The socket's directory is the driver's own (0700); removed only when nothing else is in it.
  await gone(() => unlink(o.socket));
  did(await gone(() => rmdir(dirname(o.socket))).catch(() => false), dirname(o.socket));
  return removed;
}
