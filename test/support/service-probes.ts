/**
 * Probes for Service tests: pod servers that answer with their name and the
 * address they saw (so a test sees which endpoint answered and whether the
 * client's address was kept), and one-shot TCP, UDP and HTTP clients run in a
 * network namespace, each answering what it got or why it got nothing.
 */
import { execaSync } from "execa";
import { nodeEnv } from "./cluster-nodes.js";

export const TCP_PORT = 8080;
export const ALT_PORT = 9090;
export const UDP_PORT = 5353;

/** TCP on 8080 and 9090, UDP on 5353, on every address of `family` (TCP on "::" takes both): "<name> <address it saw>". */
export function serverScript(name: string, family: 4 | 6 = 4): string {
  const any = family === 4 ? "0.0.0.0" : "::";
  return `const net = require("node:net"); const dgram = require("node:dgram");
    const who = (a) => ${JSON.stringify(name)} + " " + a.replace(/^::ffff:/, "");
    for (const p of [${TCP_PORT}, ${ALT_PORT}]) net.createServer((s) => s.end(who(s.remoteAddress))).listen(p, "${any}");
    const u = dgram.createSocket("udp${family}"); u.on("message", (m, r) => u.send(who(r.address), r.port, r.address));
    u.bind(${UDP_PORT}, "${any}", () => console.log("listening"));`;
}

/** A Node script run in `ns`: what it printed (each script prints its outcome and exits). */
function runIn(ns: string, script: string): string {
  return execaSync("ip", ["netns", "exec", ns, process.execPath, "-e", script], {
    env: nodeEnv(),
    extendEnv: false,
    timeout: 10_000,
    reject: false,
  }).stdout;
}

/** A TCP connect from `ns`: the server's answer, or the error's code ("ECONNREFUSED", "TIMEOUT"). */
export function tcp(ns: string, address: string, port: number): string {
  const script = `const s = require("node:net").connect(${port}, ${JSON.stringify(address)});
    let out = ""; s.on("data", (b) => { out += b; }); s.on("end", () => { process.stdout.write(out); process.exit(0); });
    s.on("error", (e) => { process.stdout.write(e.code); process.exit(0); });
    setTimeout(() => { process.stdout.write("TIMEOUT"); process.exit(0); }, 3000);`;
  return runIn(ns, script);
}

/** One UDP datagram from `ns`, from source port `sport`: the answer, or "TIMEOUT". */
export function udp(ns: string, address: string, port: number, sport: number): string {
  const script = `const u = require("node:dgram").createSocket("udp4");
    u.on("message", (m) => { process.stdout.write(String(m)); process.exit(0); });
    u.on("error", (e) => { process.stdout.write(e.code); process.exit(0); });
    u.bind(${sport}, () => u.send("hi", ${port}, ${JSON.stringify(address)}));
    setTimeout(() => { process.stdout.write("TIMEOUT"); process.exit(0); }, 2000);`;
  return runIn(ns, script);
}

/** An HTTP GET from `ns`: "<status> <body>", or the error's code. */
export function httpGet(ns: string, url: string): string {
  const script = `require("node:http").get(${JSON.stringify(url)}, (r) => { let b = "";
      r.on("data", (d) => { b += d; }); r.on("end", () => { process.stdout.write(r.statusCode + " " + b); process.exit(0); }); })
    .on("error", (e) => { process.stdout.write(e.code); process.exit(0); });
    setTimeout(() => { process.stdout.write("TIMEOUT"); process.exit(0); }, 3000);`;
  return runIn(ns, script);
}
