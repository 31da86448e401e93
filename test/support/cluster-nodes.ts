/**
 * Several "nodes" on one machine for the cluster-network tests: each node a
 * network namespace whose `eth0` sits on an underlay bridge in a namespace of
 * its own, as a rack switch would; an "outside" namespace on the same
 * underlay (an address beyond the cluster); and the fake API server reached
 * from inside the underlay at API_ADDRESS:API_PORT. The fake listens on the
 * host's loopback, which no node namespace sees, so a forwarder running in
 * the underlay namespace carries each connection over a unix socket (paths,
 * unlike ports, are the same in every network namespace) to a relay in the
 * test process. Everything is named with one random tag and removed by
 * `cleanup()`.
 */
import { type ChildProcess, execFileSync } from "node:child_process";
import { rmSync, writeFileSync } from "node:fs";
import net from "node:net";
import { join } from "node:path";
import { execaSync } from "execa";
import { ROUTE_PROTOCOL } from "../../src/driver/cluster-network/plan.js";
import { VXLAN_DEVICE } from "../../src/driver/cluster-network/settings.js";
import { type DriverHarness, expectNoCniError } from "./driver-harness.js";
import { undoOnInterrupt } from "./interrupt-cleanup.js";
import { createNetns, deleteNetns, execInNetns, listNetns, uniqueTag } from "./netns.js";
import { startNetnsScript } from "./pod-server.js";

export const UNDERLAY_PREFIX = 24;
/** The underlay's subnet (TEST-NET-1: never routed anywhere). */
export const UNDERLAY = "192.0.2";
export const API_ADDRESS = `${UNDERLAY}.254`;
export const API_PORT = 6443;
export const OUTSIDE_ADDRESS = `${UNDERLAY}.200`;
/** A second subnet (TEST-NET-2) behind a router on the underlay: nodes there are off-link. */
export const FAR_SUBNET = "198.51.100";
/** The router's leg on the underlay, and on the far subnet. */
export const ROUTER_ADDRESS = `${UNDERLAY}.253`;
export const FAR_ROUTER_ADDRESS = `${FAR_SUBNET}.254`;

function ip(...args: string[]): void {
  execFileSync("ip", args, { stdio: ["ignore", "ignore", "pipe"] });
}

/** A command in the node's netns: its status and output (see execInNetns). */
export const inNs = execInNetns;

export interface TestNode {
  name: string;
  netns: string;
  address: string;
}

/** A route as `ip -j route` prints it. */
export interface RouteJson {
  dst: string;
  gateway?: string;
  dev?: string;
  flags?: string[];
}

/** The node's routes of `family` that carry the driver's route protocol. */
/**
 * Turns br_netfilter's node-wide switches off in the node's namespace (where the
 * module is loaded at all), as on a node that never ran kube-proxy: what a bridge
 * of the driver's gets through br_netfilter is then its own setting's doing.
 */
export function withoutNodeBrNetfilter(ns: string): void {
  const r = inNs(ns, [
    "sh",
    "-c",
    "for f in /proc/sys/net/bridge/bridge-nf-call-iptables /proc/sys/net/bridge/bridge-nf-call-ip6tables; do [ -e $f ] && echo 0 > $f; done; true",
  ]);
  if (r.status !== 0) throw new Error(`br_netfilter's sysctls in ${ns}: ${r.stderr}`);
}

/** The driver bridge's br_netfilter switch and its ports' hairpin flags in `ns`, as iproute2 shows them. */
export function bridgeSettings(
  ns: string,
  bridge: string,
): { netfilter: string; hairpin: string[] } {
  const link = inNs(ns, ["ip", "-d", "link", "show", bridge]).stdout;
  const ports = inNs(ns, ["bridge", "-d", "link", "show"]).stdout;
  return {
    netfilter: /nf_call_iptables (\d)/.exec(link)?.[1] ?? "?",
    hairpin: [...ports.matchAll(/master (\S+)[\s\S]*?hairpin (on|off)/g)]
      .filter((x) => x[1] === bridge)
      .map((x) => x[2] as string),
  };
}

export function driverRoutes(ns: string, family: 4 | 6 = 4): RouteJson[] {
  const r = execInNetns(ns, [
    "ip",
    "-j",
    `-${family}`,
    "route",
    "show",
    "proto",
    String(ROUTE_PROTOCOL),
  ]);
  return JSON.parse(r.stdout || "[]");
}

/** The VXLAN device's remote forwarding entries. */
export function vxlanFdb(ns: string): Array<{ mac: string; dst: string }> {
  const r = execInNetns(ns, ["bridge", "-j", "fdb", "show", "dev", VXLAN_DEVICE]);
  return (JSON.parse(r.stdout || "[]") as Array<{ mac: string; dst?: string }>)
    .filter((e) => e.dst)
    .map((e) => ({ mac: e.mac, dst: e.dst as string }));
}

/** The VXLAN device's permanent neighbours, both families. */
export function vxlanNeighbours(ns: string): Array<{ ip: string; mac: string }> {
  const r = execInNetns(ns, ["ip", "-j", "neigh", "show", "dev", VXLAN_DEVICE, "nud", "permanent"]);
  return (JSON.parse(r.stdout || "[]") as Array<{ dst: string; lladdr: string }>).map((n) => ({
    ip: n.dst,
    mac: n.lladdr,
  }));
}

/** A node with its driver, and the address of the pod set up on it. */
export interface ClusterMember {
  node: TestNode;
  h: DriverHarness;
  pod: string;
}

/** Starts every member's driver, then sets up pod 1 on each and notes its address. */
export async function startMembers(members: ClusterMember[]): Promise<void> {
  for (const m of members) await m.h.start();
  for (const m of members) {
    createNetns(m.h.netnsName(1));
    const res = await m.h.client.setUpPod(m.h.podRequest(1));
    expectNoCniError(res);
    m.pod = (res.result?.ips[0]?.address ?? "").split("/")[0] as string;
  }
}

/** Each driver's last log lines, for a failed test. */
export function printMemberLogs(members: ClusterMember[]): void {
  for (const m of members) console.error(`--- ${m.node.name} log:\n${m.h.logs.slice(-8000)}`);
}

/** Removes everything a cluster test made: drivers and their pods, namespaces, the API, `root`. */
export async function tearDownCluster(
  members: ClusterMember[],
  ul: ClusterUnderlay | undefined,
  server: { close(): Promise<void> } | undefined,
  root: string | undefined,
): Promise<void> {
  for (const m of members) await m.h.cleanup();
  await ul?.cleanup();
  await server?.close();
  if (root) rmSync(root, { recursive: true, force: true });
}

/** Node scripts run with the test's Node, without the CA bundle that slows every start. */
export function nodeEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  delete env.NODE_EXTRA_CA_CERTS;
  delete env.NODE_OPTIONS;
  return env;
}

export class ClusterUnderlay {
  readonly tag = uniqueTag();
  readonly prefix = `cnt-${this.tag}-`;
  readonly underlay = `${this.prefix}ul`;
  readonly outside = `${this.prefix}out`;
  /** The router between the underlay and FAR_SUBNET, made by the first `addRoutedNode`. */
  readonly router = `${this.prefix}rt`;
  private routerUp = false;
  /** The underlay namespace's own address (the API forwarder's; a router in some tests). */
  readonly apiAddress = API_ADDRESS;
  readonly nodes: TestNode[] = [];
  private relay: net.Server | undefined;
  private readonly children: ChildProcess[] = [];
  /** The relay's open connections: the drivers' watches never end by themselves. */
  private readonly relayed = new Set<net.Socket>();

  /** The suite's root (its files), removed on an interrupted run; the caller removes it otherwise. */
  private readonly keepRootOnInterrupt: () => void;

  constructor(private readonly root: string) {
    this.keepRootOnInterrupt = undoOnInterrupt(() =>
      rmSync(root, { recursive: true, force: true }),
    );
    createNetns(this.underlay);
    ip("-n", this.underlay, "link", "set", "lo", "up");
    ip("-n", this.underlay, "link", "add", "ul", "type", "bridge");
    ip("-n", this.underlay, "link", "set", "ul", "up");
    ip("-n", this.underlay, "addr", "add", `${API_ADDRESS}/${UNDERLAY_PREFIX}`, "dev", "ul");
    this.attach(this.outside, "out", OUTSIDE_ADDRESS);
  }

  /** A namespace with `eth0` on the underlay at `address`. */
  private attach(ns: string, port: string, address: string): void {
    this.attachTo(this.underlay, "ul", ns, port, address);
    if (this.routerUp) this.routeFarVia(ns);
  }

  /** A namespace with `eth0` on `bridge` (in `bridgeNs`) at `address`. */
  private attachTo(
    bridgeNs: string,
    bridge: string,
    ns: string,
    port: string,
    address: string,
  ): void {
    createNetns(ns);
    ip("-n", ns, "link", "set", "lo", "up");
    ip("-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name", port, "netns", bridgeNs);
    ip("-n", bridgeNs, "link", "set", port, "master", bridge, "up");
    ip("-n", ns, "addr", "add", `${address}/${UNDERLAY_PREFIX}`, "dev", "eth0");
    ip("-n", ns, "link", "set", "eth0", "up");
  }

  /** A node namespace on the underlay, `name` its Node's name. */
  addNode(name: string, hostOctet: number): TestNode {
    const node = { name, netns: `${this.prefix}${name}`, address: `${UNDERLAY}.${hostOctet}` };
    this.attach(node.netns, `p${hostOctet}`, node.address);
    this.nodes.push(node);
    return node;
  }

  /**
   * A node namespace on FAR_SUBNET, reached from the underlay only through the
   * router namespace (forwarding on, one leg on each side): no node on the
   * underlay shares a subnet with it, nor it with them.
   */
  addRoutedNode(name: string, hostOctet: number): TestNode {
    if (!this.routerUp) this.startRouter();
    const node = { name, netns: `${this.prefix}${name}`, address: `${FAR_SUBNET}.${hostOctet}` };
    this.attachTo(this.router, "far", node.netns, `f${hostOctet}`, node.address);
    ip("-n", node.netns, "route", "add", "default", "via", FAR_ROUTER_ADDRESS);
    this.nodes.push(node);
    return node;
  }

  private startRouter(): void {
    this.attachTo(this.underlay, "ul", this.router, "rt", ROUTER_ADDRESS);
    ip("-n", this.router, "link", "add", "far", "type", "bridge");
    ip("-n", this.router, "link", "set", "far", "up");
    ip("-n", this.router, "addr", "add", `${FAR_ROUTER_ADDRESS}/${UNDERLAY_PREFIX}`, "dev", "far");
    execFileSync("ip", ["netns", "exec", this.router, "sysctl", "-qw", "net.ipv4.ip_forward=1"]);
    this.routerUp = true;
    // Everything already on the underlay learns the way to the far subnet.
    for (const ns of [this.underlay, this.outside, ...this.nodes.map((n) => n.netns)]) {
      this.routeFarVia(ns);
    }
  }

  private routeFarVia(ns: string): void {
    ip("-n", ns, "route", "add", `${FAR_SUBNET}.0/${UNDERLAY_PREFIX}`, "via", ROUTER_ADDRESS);
  }

  /**
   * Makes the fake API (`target`, a port on the host's 127.0.0.1) reachable
   * at API_ADDRESS:API_PORT from every node; answers a kubeconfig for it.
   */
  async exposeApi(targetPort: number, kubeconfigYaml: string): Promise<string> {
    const sock = join(this.root, "api.sock");
    this.relay = net.createServer((c) => {
      this.relayed.add(c);
      c.on("close", () => this.relayed.delete(c));
      const up = net.connect(targetPort, "127.0.0.1");
      c.pipe(up).pipe(c);
      c.on("error", () => up.destroy());
      up.on("error", () => c.destroy());
    });
    await new Promise<void>((resolve) => this.relay?.listen(sock, resolve));
    const script = `const net = require("node:net");
      net.createServer((c) => { const up = net.connect(${JSON.stringify(sock)});
        c.pipe(up).pipe(c); c.on("error", () => up.destroy()); up.on("error", () => c.destroy()); })
      .listen(${API_PORT}, ${JSON.stringify(API_ADDRESS)}, () => console.log("listening"));`;
    await this.startScript(this.underlay, script);
    const file = join(this.root, "kubeconfig");
    writeFileSync(
      file,
      kubeconfigYaml.replace(/server: .*/, `server: http://${API_ADDRESS}:${API_PORT}`),
      { mode: 0o600 },
    );
    return file;
  }

  /**
   * A TCP server in `ns` answering each connection with the address it came
   * from (what the far side sees after any NAT), then closing; on `host`
   * ("::" for both families).
   */
  async startPeerEcho(ns: string, port: number, host = "0.0.0.0"): Promise<ChildProcess> {
    const script = `require("node:net").createServer((s) => s.end(s.remoteAddress.replace(/^::ffff:/, "")))
      .listen(${port}, ${JSON.stringify(host)}, () => console.log("listening"));`;
    return this.startScript(ns, script);
  }

  /** Connects from `ns` to address:port; answers what the server sent, or "" when it could not. */
  tcpFrom(ns: string, address: string, port: number): string {
    const script = `const s = require("node:net").connect(${port}, ${JSON.stringify(address)});
      let out = ""; s.on("data", (b) => { out += b; }); s.on("end", () => { process.stdout.write(out); process.exit(0); });
      s.on("error", () => process.exit(2)); setTimeout(() => process.exit(3), 4000);`;
    const r = execaSync("ip", ["netns", "exec", ns, process.execPath, "-e", script], {
      env: nodeEnv(),
      extendEnv: false,
      timeout: 10_000,
      stripFinalNewline: false,
      reject: false,
    });
    return r.exitCode === 0 ? r.stdout : "";
  }

  private async startScript(ns: string, script: string): Promise<ChildProcess> {
    const child = await startNetnsScript(ns, script);
    this.children.push(child);
    return child;
  }

  async cleanup(): Promise<void> {
    for (const c of this.children) {
      if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
    }
    for (const c of this.relayed) c.destroy();
    await new Promise<void>((resolve) =>
      this.relay ? this.relay.close(() => resolve()) : resolve(),
    );
    for (const ns of listNetns(this.prefix)) deleteNetns(ns);
    this.keepRootOnInterrupt();
  }
}
