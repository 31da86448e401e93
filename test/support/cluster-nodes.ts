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
import { type ChildProcess, execFileSync, spawnSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import net from "node:net";
import { join } from "node:path";
import { deleteNetns, listNetns, uniqueTag } from "./netns.js";
import { startNetnsScript } from "./pod-server.js";

export const UNDERLAY_PREFIX = 24;
/** The underlay's subnet (TEST-NET-1: never routed anywhere). */
export const UNDERLAY = "192.0.2";
export const API_ADDRESS = `${UNDERLAY}.254`;
export const API_PORT = 6443;
export const OUTSIDE_ADDRESS = `${UNDERLAY}.200`;

function ip(...args: string[]): void {
  execFileSync("ip", args, { stdio: ["ignore", "ignore", "pipe"] });
}

export function inNs(ns: string, cmd: string[], timeoutMs = 10_000) {
  const r = spawnSync("ip", ["netns", "exec", ns, ...cmd], {
    encoding: "utf8",
    timeout: timeoutMs,
  });
  return { status: r.status ?? -1, stdout: r.stdout ?? "", stderr: r.stderr ?? "" };
}

export interface TestNode {
  name: string;
  netns: string;
  address: string;
}

/** Node scripts run with the test's Node, without the CA bundle that slows every start. */
function nodeEnv(): NodeJS.ProcessEnv {
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
  /** The underlay namespace's own address (the API forwarder's; a router in some tests). */
  readonly apiAddress = API_ADDRESS;
  readonly nodes: TestNode[] = [];
  private relay: net.Server | undefined;
  private readonly children: ChildProcess[] = [];
  /** The relay's open connections: the drivers' watches never end by themselves. */
  private readonly relayed = new Set<net.Socket>();

  constructor(private readonly root: string) {
    ip("netns", "add", this.underlay);
    ip("-n", this.underlay, "link", "set", "lo", "up");
    ip("-n", this.underlay, "link", "add", "ul", "type", "bridge");
    ip("-n", this.underlay, "link", "set", "ul", "up");
    ip("-n", this.underlay, "addr", "add", `${API_ADDRESS}/${UNDERLAY_PREFIX}`, "dev", "ul");
    this.attach(this.outside, "out", OUTSIDE_ADDRESS);
  }

  /** A namespace with `eth0` on the underlay at `address`. */
  private attach(ns: string, port: string, address: string): void {
    ip("netns", "add", ns);
    ip("-n", ns, "link", "set", "lo", "up");
    ip(
      "-n",
      ns,
      "link",
      "add",
      "eth0",
      "type",
      "veth",
      "peer",
      "name",
      port,
      "netns",
      this.underlay,
    );
    ip("-n", this.underlay, "link", "set", port, "master", "ul", "up");
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
   * from (what the far side sees after any NAT), then closing.
   */
  async startPeerEcho(ns: string, port: number): Promise<ChildProcess> {
    const script = `require("node:net").createServer((s) => s.end(s.remoteAddress.replace(/^::ffff:/, "")))
      .listen(${port}, "0.0.0.0", () => console.log("listening"));`;
    return this.startScript(ns, script);
  }

  /** Connects from `ns` to address:port; answers what the server sent, or "" when it could not. */
  tcpFrom(ns: string, address: string, port: number): string {
    const script = `const s = require("node:net").connect(${port}, ${JSON.stringify(address)});
      let out = ""; s.on("data", (b) => { out += b; }); s.on("end", () => { process.stdout.write(out); process.exit(0); });
      s.on("error", () => process.exit(2)); setTimeout(() => process.exit(3), 4000);`;
    const r = spawnSync("ip", ["netns", "exec", ns, process.execPath, "-e", script], {
      encoding: "utf8",
      timeout: 10_000,
      env: nodeEnv(),
    });
    return r.status === 0 ? (r.stdout ?? "") : "";
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
  }
}
