// Build step of scripts/build-shim.sh: the V8 code cache of the shim bundle after
// running it, so that it holds the compiled code of every function the shim calls
// (a cache made from a compile alone holds only the top-level code).
//
//   node code-cache.cjs BUNDLE OUTPUT
//
// Run by the Node that the executable is built from (a cache is only good for the
// V8 that made it). BUNDLE is the shim as one function expression, compiled here
// exactly as loader.cjs compiles it; the function is then run once per scenario
// below — the runtime's environment and stdin, a fake driver on a temporary
// socket — and the cache taken at the end. Every scenario must end with its
// expected exit code, so a shim that changed under this script fails the build
// rather than quietly warming nothing.
"use strict";
const fs = require("node:fs");
const http2 = require("node:http2");
const os = require("node:os");
const path = require("node:path");
const { Script, constants } = require("node:vm");

const [bundle, output] = process.argv.slice(2);
if (!bundle || !output) {
  process.stderr.write("usage: code-cache.cjs BUNDLE OUTPUT\n");
  process.exit(2);
}

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "cni-driver-shim-cache-"));
const socket = path.join(dir, "driver.sock");

// --- A fake driver: each method answers what the scenario asks for.

function varint(n) {
  const out = [];
  while (n > 0x7f) {
    out.push((n & 0x7f) | 0x80);
    n >>>= 7;
  }
  out.push(n);
  return Buffer.from(out);
}
const bytesField = (field, value) => {
  const b = Buffer.from(value);
  return Buffer.concat([varint((field << 3) | 2), varint(b.length), b]);
};
const varintField = (field, value) => Buffer.concat([varint(field << 3), varint(value)]);
/** CniError { code = 1; msg = 2; details = 3 }, as field 1 of every response. */
const cniError = (code, msg) =>
  bytesField(1, Buffer.concat([varintField(1, code), bytesField(2, msg), bytesField(3, "d")]));

const RESULT = JSON.stringify({
  cniVersion: "1.1.0",
  interfaces: [{ name: "eth0", mac: "0a:58:0a:f4:00:02", sandbox: "/run/netns/warm" }],
  ips: [{ address: "10.244.0.2/24", gateway: "10.244.0.1", interface: 0 }],
});

/** What the driver answers, whatever the method: a message, or a gRPC status. */
let answer = () => ({ message: Buffer.alloc(0) });

const server = http2.createServer();
server.on("stream", (stream) => {
  stream.on("error", () => {});
  stream.on("data", () => {});
  stream.on("end", () => {
    const a = answer();
    if (a.status !== undefined) {
      stream.respond(
        { ":status": 200, "content-type": "application/grpc", "grpc-status": String(a.status) },
        { endStream: true },
      );
      return;
    }
    const framed = Buffer.concat([Buffer.from([0]), Buffer.alloc(4), a.message]);
    framed.writeUInt32BE(a.message.length, 1);
    stream.respond(
      { ":status": 200, "content-type": "application/grpc" },
      { waitForTrailers: true },
    );
    stream.on("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
    stream.end(framed);
  });
});

// --- The scenarios: a CNI invocation each, as a runtime makes it.

const conf = (extra = {}) =>
  JSON.stringify({
    cniVersion: "1.1.0",
    name: "warm",
    type: "cni-driver-shim",
    socket,
    stateDir: path.join(dir, "state"),
    ...extra,
  });
const ok = () => ({ message: Buffer.alloc(0) });
const scenarios = [
  { command: "VERSION", stdin: "", exit: 0 },
  {
    command: "ADD",
    stdin: conf(),
    answer: () => ({ message: Buffer.concat([bytesField(2, "1.1.0"), bytesField(3, RESULT)]) }),
    exit: 0,
  },
  { command: "CHECK", stdin: conf(), answer: ok, exit: 0 },
  { command: "STATUS", stdin: conf(), answer: ok, exit: 0 },
  { command: "GC", stdin: conf({ "cni.dev/valid-attachments": [] }), answer: ok, exit: 0 },
  { command: "DEL", stdin: conf(), answer: ok, exit: 0 },
  // The driver's own CNI error, and a gRPC status (UNIMPLEMENTED): both printed as errors.
  { command: "ADD", stdin: conf(), answer: () => ({ message: cniError(7, "no") }), exit: 1 },
  { command: "ADD", stdin: conf(), answer: () => ({ status: 12 }), exit: 1 },
  { command: "ADD", stdin: "not json", exit: 1 },
];

const env = (command) => ({
  PATH: "/usr/sbin:/usr/bin:/sbin:/bin",
  CNI_COMMAND: command,
  CNI_CONTAINERID: "warm",
  CNI_NETNS: "/run/netns/warm",
  CNI_IFNAME: "eth0",
  CNI_PATH: "/opt/cni/bin",
  CNI_ARGS: "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=warm",
});

// The shim reads stdin and writes stdout with fs.readSync(0) and fs.writeSync(1):
// here they read the scenario's stdin and keep the answer.
let stdin = Buffer.alloc(0);
let stdout = "";
const shimFs = {
  ...fs,
  readSync(fd, buffer, offset, length, position) {
    if (fd !== 0) return fs.readSync(fd, buffer, offset, length, position);
    const n = stdin.copy(buffer, offset, 0, Math.min(length, stdin.length));
    stdin = stdin.subarray(n);
    return n;
  },
  writeSync(fd, data, ...rest) {
    if (fd !== 1) return fs.writeSync(fd, data, ...rest);
    stdout += Buffer.from(data).toString();
    return Buffer.byteLength(data);
  },
};
const shimRequire = (id) => (id === "node:fs" || id === "fs" ? shimFs : require(id));

const script = new Script(fs.readFileSync(bundle, "utf8"), {
  filename: "cni-driver-shim.cjs",
  importModuleDynamically: constants.USE_MAIN_CONTEXT_DEFAULT_LOADER,
});
const shim = script.runInThisContext();

function run(scenario) {
  return new Promise((resolve) => {
    for (const key of Object.keys(process.env)) delete process.env[key];
    Object.assign(process.env, env(scenario.command));
    stdin = Buffer.from(scenario.stdin);
    stdout = "";
    answer = scenario.answer ?? ok;
    process.exit = (code) => resolve({ code: code ?? 0, stdout });
    const module = { exports: {} };
    shim(module.exports, shimRequire, module, bundle, path.dirname(bundle));
  });
}

const realExit = process.exit.bind(process);
function fail(message) {
  process.stderr.write(`code-cache: ${message}\n`);
  fs.rmSync(dir, { recursive: true, force: true });
  realExit(1);
}

// A shim that never exits must not hang the build.
const watchdog = setTimeout(() => fail("the scenarios did not finish within 60 s"), 60_000);

server.listen(socket, async () => {
  try {
    for (const scenario of scenarios) {
      const { code, stdout: out } = await run(scenario);
      if (code !== scenario.exit) {
        fail(`${scenario.command} exited ${code}, not ${scenario.exit}: ${out.trim()}`);
      }
    }
    fs.writeFileSync(output, script.createCachedData());
  } catch (err) {
    fail(err instanceof Error ? err.stack : String(err));
  }
  clearTimeout(watchdog);
  server.close();
  fs.rmSync(dir, { recursive: true, force: true });
  realExit(0);
});
