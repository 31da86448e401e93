/**
 * bench/conntrack: listing and cutting tracked connections through ctnetlink
 * in-process (native/conntrack) against exec'ing conntrack-tools' `conntrack`
 * (the fallback, what the driver did before), in the same run.
 *
 * A private network namespace gets N tracked flows from real traffic: UDP
 * datagrams of both families and TCP SYNs to addresses behind a veth whose
 * far end drops them (an nftables rule using ct turns tracking on; the timeouts are raised so
 * nothing expires during the run). Each measurement runs in a Node process
 * inside that namespace, as the driver runs inside its node's: `listFlows()`
 * to the Flow[] the NetworkPolicy enforcer reads, its wall time and how long
 * it kept the event loop busy; then `deleteFlows()` of one group of G flows
 * (one client, one server port, G source ports) among the N.
 *
 * Run as root: `npm run bench:conntrack [-- --flows 20000 --group 500 --rounds 4]`.
 */
import { spawnSync } from "node:child_process";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { findNativeAddon } from "../src/common/native-addon.js";
import {
  CONNTRACK_BIN,
  conntrackBackendName,
  deleteFlows,
  listFlows,
} from "../src/plumbing/conntrack.js";
import { uniqueTag } from "../test/support/netns.js";
import { fmt, option, percentile, printColumns, say } from "./common.js";

const ADDON = "build/Release/cni_driver_conntrack.node";
const CLIENT = "10.203.0.2";
const SERVER = "10.204.255.9";
const GROUP_PORT = 4444;

type Backend = "ctnetlink" | "conntrack";

interface InsideResult {
  backend: string;
  flows: number;
  wallMs: number[];
  busyMs: number[];
}

// ---------------------------------------------------------------------------
// Inside the namespace: `--inside list <reps>` or `--inside delete`.

async function inside(argv: string[]): Promise<void> {
  const mode = argv[0];
  const out: InsideResult = { backend: conntrackBackendName(), flows: 0, wallMs: [], busyMs: [] };
  const measure = async (fn: () => Promise<number>) => {
    const elu = performance.eventLoopUtilization();
    const t0 = performance.now();
    out.flows = await fn();
    out.wallMs.push(performance.now() - t0);
    out.busyMs.push(performance.eventLoopUtilization(elu).active);
  };
  // The event loop running and the module's parts loaded before any clock starts.
  await new Promise((resolve) => setTimeout(resolve, 20));
  if (mode === "list") {
    const reps = Number(argv[1] ?? 5);
    await listFlows(); // warm-up: module and addon loading, the kernel's caches
    for (let i = 0; i < reps; i++) await measure(async () => (await listFlows()).length);
  } else {
    await measure(async () => {
      await deleteFlows({ protocol: "udp", src: CLIENT, dst: SERVER, dport: GROUP_PORT });
      return 0;
    });
  }
  process.stdout.write(`${JSON.stringify(out)}\n`);
}

// ---------------------------------------------------------------------------
// Outside: the namespace, its flows, the rounds, the report.

function sh(args: string[], input?: string): string {
  const r = spawnSync(args[0]!, args.slice(1), { encoding: "utf8", input, timeout: 300_000 });
  if (r.status !== 0)
    throw new Error(`${args.join(" ")}: ${r.signal ?? `exit ${r.status}`} ${r.stderr}`);
  return r.stdout;
}

/** A Node script in the namespace sending what makes the flows; answers when all left. */
function traffic(ns: string, script: string): void {
  sh(["ip", "netns", "exec", ns, process.execPath, "-e", script]);
}

/** `udp` datagrams to as many address/port pairs, `tcp` SYNs to as many addresses (both families). */
function makeFlows(ns: string, udp: number, tcp: number): void {
  traffic(
    ns,
    `const dgram = require("node:dgram"), net = require("node:net");
     const v4 = dgram.createSocket("udp4"), v6 = dgram.createSocket("udp6");
     let left = ${udp}, sockets = [];
     for (let i = 0; i < ${tcp}; i++) {
       const host = i % 4 === 0 ? "fd00:204::" + (0x1000 + i).toString(16) : "10.204." + (i >> 8) + "." + (i & 255);
       const s = net.connect({ host, port: 80 }); s.on("error", () => {}); sockets.push(s);
     }
     const sent = () => { if (--left === 0) setTimeout(() => { for (const s of sockets) s.destroy(); v4.close(); v6.close(); }, 300); };
     for (let i = 0; i < ${udp}; i++) {
       if (i % 4 === 0) v6.send("x", 1000 + (i % 50000), "fd00:204::" + (i >> 4).toString(16), sent);
       else v4.send("x", 1000 + (i % 50000), "10.205." + ((i >> 8) & 255) + "." + (i & 255), sent);
     }`,
  );
}

/** `count` flows of the group: one client address, one server port, `count` source ports. */
function makeGroup(ns: string, count: number): void {
  traffic(
    ns,
    `const dgram = require("node:dgram"); let left = ${count}; const socks = [];
     for (let i = 0; i < ${count}; i++) {
       const s = dgram.createSocket("udp4"); socks.push(s);
       s.bind(0, "${CLIENT}", () => s.send("x", ${GROUP_PORT}, "${SERVER}", () => {
         if (--left === 0) for (const t of socks) t.close();
       }));
     }`,
  );
}

function insideRun(ns: string, backend: Backend, args: string[]): InsideResult {
  const env = { ...process.env };
  if (backend === "conntrack") env.CNI_DRIVER_CONNTRACK_BIN = CONNTRACK_BIN;
  else delete env.CNI_DRIVER_CONNTRACK_BIN;
  const self = fileURLToPath(import.meta.url);
  const r = spawnSync(
    "ip",
    ["netns", "exec", ns, process.execPath, "--import", "tsx", self, "--inside", ...args],
    { encoding: "utf8", env, timeout: 300_000 },
  );
  if (r.status !== 0) throw new Error(`${backend} ${args.join(" ")}: ${r.stderr}`);
  const got = JSON.parse(r.stdout.trim().split("\n").pop()!) as InsideResult;
  if (got.backend !== backend) throw new Error(`asked for ${backend}, measured ${got.backend}`);
  return got;
}

function tracked(ns: string): number {
  return Number(sh(["ip", "netns", "exec", ns, "conntrack", "-C"]).trim());
}

async function outside(argv: string[]): Promise<number> {
  const flows = Number(option(argv, "--flows") ?? 20_000);
  const group = Number(option(argv, "--group") ?? 500);
  const rounds = Number(option(argv, "--rounds") ?? 4);
  const reps = Number(option(argv, "--reps") ?? 5);
  if (process.getuid?.() !== 0) {
    say("bench/conntrack: needs root (a network namespace and its connection tracking)");
    return 1;
  }
  if (!findNativeAddon({ file: ADDON, envVar: "CNI_DRIVER_CONNTRACK_ADDON" })) {
    say(`bench/conntrack: ${ADDON} not built (scripts/build-native.sh)`);
    return 1;
  }
  const ns = `bct-${uniqueTag()}`;
  const stop = () => {
    spawnSync("ip", ["netns", "del", ns], { stdio: "ignore" });
    process.exit(130);
  };
  process.once("SIGINT", stop);
  try {
    sh(["ip", "netns", "add", ns]);
    sh(
      ["ip", "-n", ns, "-batch", "-"],
      [
        "link set lo up",
        // Out of d0 to a neighbour that is never there: d1 drops what arrives for another MAC.
        "link add d0 type veth peer name d1",
        "link set d0 up",
        "link set d1 up",
        "addr add 10.203.0.2/24 dev d0",
        "addr add fd00:203::2/64 dev d0 nodad",
        "neigh add 10.203.0.3 lladdr 02:00:00:00:00:03 dev d0 nud permanent",
        "neigh add fd00:203::3 lladdr 02:00:00:00:00:03 dev d0 nud permanent",
        "route add 10.204.0.0/15 via 10.203.0.3 dev d0",
        "route add fd00:204::/64 via fd00:203::3 dev d0",
        "",
      ].join("\n"),
    );
    for (const [k, v] of [
      ["net.netfilter.nf_conntrack_udp_timeout", "3600"],
      ["net.netfilter.nf_conntrack_tcp_timeout_syn_sent", "3600"],
    ])
      sh(["ip", "netns", "exec", ns, "sysctl", "-qw", `${k}=${v}`]);
    sh([
      "ip",
      "netns",
      "exec",
      ns,
      "nft",
      "add table inet bct; add chain inet bct out { type filter hook output priority 0; }; add rule inet bct out ct state new counter",
    ]);
    const tcp = Math.round(flows / 10);
    makeFlows(ns, flows - tcp, tcp);
    const have = tracked(ns);
    say(
      `bench/conntrack: ${have} tracked flows in a private netns (${flows - tcp} UDP, ${tcp} TCP SYN_SENT asked; a quarter IPv6)`,
    );
    say(
      `  ${sh([CONNTRACK_BIN, "--version"]).trim()}, kernel ${sh(["uname", "-r"]).trim()}; ${rounds} rounds of ${reps} listings per backend, ABBA`,
    );
    say();

    const list: Record<Backend, InsideResult[]> = { ctnetlink: [], conntrack: [] };
    for (let r = 0; r < rounds; r++) {
      const order: Backend[] =
        r % 2 === 0 ? ["ctnetlink", "conntrack"] : ["conntrack", "ctnetlink"];
      for (const b of order) list[b].push(insideRun(ns, b, ["list", String(reps)]));
    }
    const row = (b: Backend) => {
      const wall = list[b].flatMap((x) => x.wallMs);
      const busy = list[b].flatMap((x) => x.busyMs);
      return {
        cells: [
          b,
          String(list[b][0]!.flows),
          fmt(percentile(wall, 50)),
          fmt(percentile(wall, 90)),
          fmt(percentile(busy, 50)),
        ],
        p50: percentile(wall, 50),
        busy: percentile(busy, 50),
      };
    };
    const a = row("ctnetlink");
    const b = row("conntrack");
    say("listFlows()");
    printColumns(
      ["backend", "flows", "wall p50 ms", "p90", "event loop busy p50 ms"],
      [a.cells, b.cells],
    );
    say(
      `  ctnetlink / conntrack: wall ${fmt(a.p50 / b.p50, 2)}x, event loop busy ${fmt(a.busy / b.busy, 2)}x`,
    );
    say();

    say(`deleteFlows() of a group of ${group} UDP flows among the ${have}`);
    const del: string[][] = [];
    for (const backend of ["ctnetlink", "conntrack"] as const) {
      makeGroup(ns, group);
      const before = tracked(ns);
      const got = insideRun(ns, backend, ["delete"]);
      const after = tracked(ns);
      del.push([backend, String(before - after), fmt(got.wallMs[0]!), fmt(got.busyMs[0]!)]);
    }
    printColumns(["backend", "deleted", "wall ms", "event loop busy ms"], del);
    return 0;
  } finally {
    spawnSync("ip", ["netns", "del", ns], { stdio: "ignore" });
  }
}

const argv = process.argv.slice(2);
if (argv[0] === "--inside") await inside(argv.slice(1));
else process.exitCode = await outside(argv);
