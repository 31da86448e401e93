/**
 * src/plumbing/conntrack through ctnetlink (native/conntrack) against
 * conntrack-tools, on real TCP and UDP flows of both families between two
 * namespaces of the test's own joined by a veth. The server's namespace tracks
 * connections (an nftables rule using ct turns tracking on there); the module
 * runs in a Node process inside it, as the driver runs inside its node's.
 */
import { type ChildProcess, spawnSync } from "node:child_process";
import { expect } from "chai";
import { type Flow, type FlowGroup, parseFlows } from "../../src/plumbing/conntrack.js";
import { createNetns, deleteNetns, execInNetns, uniqueTag } from "../support/netns.js";
import { patient } from "../support/patience.js";
import { startNetnsScript, stopPodServer } from "../support/pod-server.js";
import { requireCommand, requireNativeAddon, requireRoot } from "../support/requirements.js";

const SERVER_V4 = "10.201.0.1";
const CLIENT_V4 = "10.201.0.2";
const SERVER_V6 = "fd00:201::1";
const CLIENT_V6 = "fd00:201::2";
const TCP_PORT = 8080;
const UDP_PORT = 5353;

/** A key for comparing listings: everything a Flow says. */
const key = (f: Flow) =>
  [
    f.protocol,
    f.state ?? "-",
    f.original.src,
    f.original.dst,
    f.original.sport,
    f.original.dport,
    f.reply.src,
    f.reply.dst,
    f.reply.sport,
    f.reply.dport,
  ].join(" ");

/** The flows between the two test addresses (the listing also holds the namespace's others). */
const ours = (flows: Flow[]) =>
  flows
    .filter((f) => [SERVER_V4, SERVER_V6].includes(f.original.dst))
    .map(key)
    .sort();

describe("plumbing/conntrack: ctnetlink against conntrack-tools (root)", function () {
  this.timeout(120_000);
  const tag = uniqueTag();
  const server = `ctk-${tag}-s`;
  const client = `ctk-${tag}-c`;
  const children: ChildProcess[] = [];

  /** Runs `body` (an ES module using `ct`, the module) in a Node process inside the server's netns. */
  const inServer = (body: string, env: NodeJS.ProcessEnv = {}): unknown => {
    const script = `import * as ct from "./src/plumbing/conntrack.ts";\n${body}`;
    const r = spawnSync(
      "ip",
      [
        "netns",
        "exec",
        server,
        process.execPath,
        "--import",
        "tsx",
        "--input-type=module",
        "-e",
        script,
      ],
      {
        encoding: "utf8",
        cwd: new URL("../../", import.meta.url).pathname,
        env: { ...process.env, ...env },
        timeout: patient(60_000),
      },
    );
    expect(r.status, `${r.signal ?? ""} ${r.stderr}`).to.equal(0);
    return JSON.parse(r.stdout.trim().split("\n").pop() ?? "null");
  };

  const listed = (env: NodeJS.ProcessEnv = {}) =>
    inServer(
      "console.log(JSON.stringify({ backend: ct.conntrackBackendName(), flows: await ct.listFlows() }));",
      env,
    ) as { backend: string; flows: Flow[] };

  const conntrackL = (): Flow[] =>
    ["ipv4", "ipv6"].flatMap((family) => {
      const r = execInNetns(server, ["conntrack", "-L", "-f", family]);
      expect(r.status, r.stderr).to.equal(0);
      return parseFlows(r.stdout);
    });

  const remove = (g: FlowGroup) =>
    inServer(`await ct.deleteFlows(${JSON.stringify(g)}); console.log("null");`);

  before(async function () {
    requireRoot(this);
    requireCommand(this, "conntrack", "conntrack");
    requireCommand(this, "nft", "nftables");
    requireNativeAddon(this, "cni_driver_conntrack");
    createNetns(server);
    createNetns(client);
    const ip = (args: string[]) => {
      const r = spawnSync("ip", args, { encoding: "utf8" });
      if (r.status !== 0) throw new Error(`ip ${args.join(" ")}: ${r.stderr}`);
    };
    ip([
      "-n",
      server,
      "link",
      "add",
      "ct0",
      "type",
      "veth",
      "peer",
      "name",
      "ct1",
      "netns",
      client,
    ]);
    for (const [ns, dev, v4, v6] of [
      [server, "ct0", SERVER_V4, SERVER_V6],
      [client, "ct1", CLIENT_V4, CLIENT_V6],
    ] as const) {
      ip(["-n", ns, "link", "set", "lo", "up"]);
      ip(["-n", ns, "addr", "add", `${v4}/24`, "dev", dev]);
      ip(["-n", ns, "addr", "add", `${v6}/64`, "dev", dev, "nodad"]);
      ip(["-n", ns, "link", "set", dev, "up"]);
    }
    const nft = execInNetns(server, [
      "nft",
      `add table inet ctk; add chain inet ctk in { type filter hook input priority 0; }; add rule inet ctk in ct state established counter`,
    ]);
    expect(nft.status, nft.stderr).to.equal(0);

    // The server keeps its connections open and answers each datagram.
    children.push(
      await startNetnsScript(
        server,
        `const net = require("node:net"), dgram = require("node:dgram");
         let up = 0; const ready = () => { if (++up === 3) console.log("listening"); };
         net.createServer(() => {}).listen(${TCP_PORT}, "::", ready);
         for (const [type, host] of [["udp4", "0.0.0.0"], ["udp6", "::"]]) {
           const s = dgram.createSocket({ type, ipv6Only: type === "udp6" });
           s.on("message", (m, r) => s.send(m, r.port, r.address));
           s.bind(${UDP_PORT}, host, ready);
         }`,
      ),
    );
    // Three TCP connections and two UDP exchanges over IPv4, two and one over IPv6; all kept open.
    children.push(
      await startNetnsScript(
        client,
        `const net = require("node:net"), dgram = require("node:dgram");
         const keep = []; let left = 0; const done = () => { if (--left === 0) console.log("listening"); };
         const tcp = (host) => { left++; keep.push(net.connect(${TCP_PORT}, host, done)); };
         const udp = (type, host) => {
           left++; const s = dgram.createSocket({ type, ipv6Only: type === "udp6" }); keep.push(s);
           s.once("message", done); s.send("x", ${UDP_PORT}, host);
         };
         for (let i = 0; i < 3; i++) tcp("${SERVER_V4}");
         for (let i = 0; i < 2; i++) tcp("${SERVER_V6}");
         for (let i = 0; i < 2; i++) udp("udp4", "${SERVER_V4}");
         udp("udp6", "${SERVER_V6}");`,
      ),
    );
  });

  after(async () => {
    for (const c of children) await stopPodServer(c);
    deleteNetns(client);
    deleteNetns(server);
  });

  it("lists the same flows as conntrack -L, through ctnetlink", () => {
    const { backend, flows } = listed();
    expect(backend).to.equal("ctnetlink");
    const mine = ours(flows);
    expect(mine.filter((k) => k.startsWith("tcp ESTABLISHED"))).to.have.length(5);
    expect(mine.filter((k) => k.startsWith("udp -"))).to.have.length(3);
    expect(mine).to.deep.equal(ours(conntrackL()));
  });

  it("lists the same through the conntrack fallback", () => {
    const { backend, flows } = listed({ CNI_DRIVER_CONNTRACK_BIN: "/usr/sbin/conntrack" });
    expect(backend).to.equal("conntrack");
    expect(ours(flows)).to.deep.equal(ours(listed().flows));
  });

  it("deletes a group's flows whatever their source port, and only those", () => {
    const before = ours(listed().flows);
    remove({ protocol: "tcp", src: CLIENT_V4, dst: SERVER_V4, dport: TCP_PORT });
    remove({ protocol: "udp", src: CLIENT_V6, dst: SERVER_V6, dport: UDP_PORT });
    // Gone already: not an error.
    remove({ protocol: "udp", src: CLIENT_V6, dst: SERVER_V6, dport: UDP_PORT });
    const after = ours(listed().flows);
    const gone = (k: string) =>
      k.startsWith(`tcp ESTABLISHED ${CLIENT_V4} ${SERVER_V4} `) ||
      k.startsWith(`udp - ${CLIENT_V6} ${SERVER_V6} `);
    expect(after).to.deep.equal(before.filter((k) => !gone(k)));
    expect(after).to.have.length(4);
    expect(ours(conntrackL())).to.deep.equal(after);
  });
});
