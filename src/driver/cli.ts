#!/usr/bin/env -S node --max-semi-space-size=1 --expose-gc
/**
 * The `cni-driver` command: `serve` runs the node daemon; `add|del|check|status|gc`
 * are a cnitool-like client of its socket (CNI result or CNI error JSON on stdout,
 * exit 0/1); `version` prints the driver's version.
 *
 * The shebang caps V8's young generation at 1 MiB a semi-space (Node's default
 * lets it grow to 16): a burst of calls otherwise leaves up to 32 MiB of young
 * generation committed for good (bench/memory). `--expose-gc` gives the idle
 * collection (rpc/idle-gc.ts) V8's gc() without the extra context that reaching it
 * otherwise needs (≈ 2 MiB). V8 reads both only at start, hence the command line;
 * the image runs this file through its shebang, and the test harness takes the
 * flags from here.
 */
import { parseCniArgs } from "../cni/args.js";
import { CniError, ErrorCode } from "../cni/errors.js";
import { DEFAULT_SOCKET } from "../cni/socket-path.js";
import { type FlagSpec, parseFlags, UsageError, usage, wantsHelp } from "../common/flags.js";
import { exitAfterStop, untilStopSignal } from "../common/stop-signal.js";
import { fromWireError } from "../wire/convert.js";
import type { KeyValue, WireCniError } from "../wire/types.js";
import { driverVersion, startDriver } from "./lifecycle/daemon.js";
import {
  DEFAULT_INSTALLED_PLUGINS,
  installExecutable,
  readInstalled,
  recordInstalled,
  SHIM_TYPE,
} from "./lifecycle/host-install.js";
import { driverOptionsFromFlags, SERVE_FLAGS } from "./lifecycle/serve-flags.js";
import type { DriverClient } from "./rpc/client.js";

const SOCKET_FLAG: FlagSpec = {
  name: "socket",
  default: DEFAULT_SOCKET,
  help: "the driver's gRPC socket",
};
const TIMEOUT_FLAG: FlagSpec = {
  name: "timeout",
  default: "120",
  help: "seconds to wait for the answer",
};

const POD_FLAGS: readonly FlagSpec[] = [
  SOCKET_FLAG,
  { name: "netns", help: "the pod's netns path (CNI_NETNS)" },
  { name: "container-id", help: "the sandbox id (CNI_CONTAINERID)" },
  { name: "ifname", default: "eth0", help: "the interface name (CNI_IFNAME)" },
  { name: "network", help: "the driver network (default: the driver's default)" },
  { name: "pod-namespace", help: "the pod's namespace" },
  { name: "pod-name", help: "the pod's name" },
  { name: "pod-uid", help: "the pod's uid" },
  { name: "cni-version", help: "the CNI version of the answer (default: the network's)" },
  { name: "args", help: 'extra CNI_ARGS, "K=V;K=V"' },
  {
    name: "capabilities",
    help: 'capability args as runtimeConfig JSON, e.g. {"portMappings":[…]}',
  },
  TIMEOUT_FLAG,
];

const STATUS_FLAGS: readonly FlagSpec[] = [
  SOCKET_FLAG,
  { name: "network", help: "the network to ask STATUS of" },
  TIMEOUT_FLAG,
];

const GC_FLAGS: readonly FlagSpec[] = [
  SOCKET_FLAG,
  { name: "network", help: "the network to collect (default: the driver's default)" },
  { name: "valid", multiple: true, help: "a valid attachment, ID/IFNAME; also comma-separated" },
  TIMEOUT_FLAG,
];

const INSTALL_FLAGS: readonly FlagSpec[] = [
  { name: "bin-dir", default: "/opt/cni/bin", help: "the node's CNI bin dir (as mounted)" },
  { name: "shim", default: defaultShimPath(), help: "the shim executable to install" },
  { name: "plugin-dir", default: "/usr/lib/cni", help: "where the reference plugins are" },
  {
    name: "plugins",
    default: DEFAULT_INSTALLED_PLUGINS.join(","),
    help: "reference plugins to install where the host has none of that name, comma-separated",
  },
];

/** The paths of `serve` that uninstall removes from, with serve's defaults, and its own switch. */
const UNINSTALL_FLAGS: readonly FlagSpec[] = [
  ...SERVE_FLAGS.filter((f) =>
    ["socket", "config-dir", "state-dir", "cache-dir", "host-local-data-dir"].includes(f.name),
  ),
  { name: "host-cni-conf-dir", default: "/etc/cni/net.d", help: "the node's CNI conf dir" },
  { name: "host-cni-bin-dir", default: "/opt/cni/bin", help: "the node's CNI bin dir" },
  {
    name: "force",
    boolean: true,
    help: "remove everything even while pods are attached (they lose their network)",
  },
];

/** What `cni-driver --help` lists: each command and what it does. */
const COMMANDS: readonly [string, string][] = [
  ["serve", "run the node daemon: pod networking on its gRPC socket"],
  ["install-cni", "copy the shim and the reference plugins into the node's CNI bin dir"],
  ["midonet-controller", "map Nodes, Pods and Services onto MidoNet (leader-elected)"],
  ["add", "set up a pod's network through the driver's socket (CNI ADD)"],
  ["del", "tear a pod's network down (CNI DEL)"],
  ["check", "check a pod's network (CNI CHECK)"],
  ["status", "ask the driver whether it is ready (CNI STATUS)"],
  ["gc", "remove the attachments --valid does not list (CNI GC)"],
  ["uninstall", "remove from this node everything the driver made (the driver stopped first)"],
  ["version", "print the driver's version"],
];

function commandsHelp(): string {
  const width = Math.max(...COMMANDS.map(([name]) => name.length));
  return [
    "usage: cni-driver COMMAND [flags]    (cni-driver COMMAND --help lists its flags)",
    "",
    ...COMMANDS.map(([name, what]) => `  ${name.padEnd(width)}  ${what}`),
  ].join("\n");
}

/** Each command's flags, for its --help; the controller's are loaded only when asked for. */
async function flagsOf(command: string): Promise<readonly FlagSpec[] | undefined> {
  switch (command) {
    case "serve":
      return SERVE_FLAGS;
    case "install-cni":
      return INSTALL_FLAGS;
    case "uninstall":
      return UNINSTALL_FLAGS;
    case "midonet-controller":
      return (await import("../midonet/controller/main.js")).CONTROLLER_FLAGS;
    case "add":
    case "del":
    case "check":
      return POD_FLAGS;
    case "status":
      return STATUS_FLAGS;
    case "gc":
      return GC_FLAGS;
    case "version":
      return [];
    default:
      return undefined;
  }
}

function defaultShimPath(): string {
  return new URL("../../dist/bin/cni-driver-shim", import.meta.url).pathname.replace(
    "/dist/dist/",
    "/dist/",
  );
}

/**
 * The init container's job: the shim into the host's bin dir (replacing an
 * older one), and the reference plugins the host does not have.
 */
async function installCni(argv: string[]): Promise<number> {
  const f = parseFlags(INSTALL_FLAGS, argv);
  const binDir = f["bin-dir"] as string;
  // A record a newer install-cni wrote is refused (FileFormatError) before anything is installed.
  readInstalled(binDir);
  await installExecutable(f.shim as string, binDir, SHIM_TYPE);
  const plugins = (f.plugins as string)
    .split(",")
    .map((p) => p.trim())
    .filter(Boolean);
  const installed = [SHIM_TYPE];
  const kept: string[] = [];
  for (const p of plugins) {
    const done = await installExecutable(`${f["plugin-dir"] as string}/${p}`, binDir, p, {
      keepExisting: true,
    });
    (done ? installed : kept).push(p);
  }
  await recordInstalled(
    binDir,
    installed.filter((p) => p !== SHIM_TYPE),
  );
  process.stderr.write(
    `installed ${installed.join(", ")} into ${binDir}${kept.length > 0 ? `; kept the host's own ${kept.join(", ")}` : ""}\n`,
  );
  return 0;
}

/** Exit 0 with what was removed on stderr; 1 naming why it refused. */
async function uninstallNode(argv: string[]): Promise<number> {
  const f = parseFlags(UNINSTALL_FLAGS, argv);
  const { uninstall, UninstallRefused } = await import("./lifecycle/uninstall.js");
  try {
    const removed = await uninstall({
      socket: f.socket as string,
      configDir: f["config-dir"] as string,
      stateDir: f["state-dir"] as string,
      cacheDir: f["cache-dir"] as string,
      hostLocalDataDir: f["host-local-data-dir"] as string,
      hostCniConfDir: f["host-cni-conf-dir"] as string,
      hostCniBinDir: f["host-cni-bin-dir"] as string,
      force: f.force === true,
    });
    process.stderr.write(
      removed.length > 0
        ? `removed:\n${removed.map((r) => `  ${r}\n`).join("")}`
        : "nothing to remove\n",
    );
    return 0;
  } catch (err) {
    if (!(err instanceof UninstallRefused)) throw err;
    process.stderr.write(`cni-driver uninstall: ${err.message}\n`);
    return 1;
  }
}

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command !== undefined && wantsHelp(rest)) {
    const specs = await flagsOf(command);
    if (specs) {
      process.stdout.write(`${usage(command, specs)}\n`);
      return 0;
    }
  }
  switch (command) {
    case "serve":
      return serve(rest);
    case "install-cni":
      return installCni(rest);
    case "uninstall":
      return uninstallNode(rest);
    case "midonet-controller":
      // Loaded only here: the node daemon and the client commands never need it.
      return (await import("../midonet/controller/main.js")).runMidonetController(rest);
    case "add":
    case "del":
    case "check":
      return podCommand(command, rest);
    case "status":
      return status(rest);
    case "gc":
      return gc(rest);
    case "version":
    case "--version":
      process.stdout.write(`${driverVersion()}\n`);
      return 0;
    case undefined:
    case "help":
    case "--help":
    case "-h":
      process.stdout.write(`${commandsHelp()}\n`);
      return 0;
    default:
      process.stderr.write(
        `cni-driver: unknown command ${JSON.stringify(command)}\n${commandsHelp()}\n`,
      );
      return 2;
  }
}

async function serve(argv: string[]): Promise<number> {
  const opts = driverOptionsFromFlags(parseFlags(SERVE_FLAGS, argv));
  // Heard from the start: DELs are served during start-up recovery already, so a
  // SIGTERM then drains like any other once the start is done.
  const stopSignal = untilStopSignal();
  let driver: Awaited<ReturnType<typeof startDriver>>;
  try {
    driver = await startDriver(opts);
  } catch (err) {
    // What the start had set going (the config watcher, timers) must not keep a daemon that failed alive.
    process.stderr.write(
      `cni-driver: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
    );
    process.exit(1);
  }
  const signal = await stopSignal;
  driver.logger.info({ signal }, "stopping: not ready, draining in-flight calls");
  await driver.stop();
  driver.logger.info("stopped");
  exitAfterStop(0);
  return 0;
}

/** `--timeout` in ms: a positive number of seconds, else a usage error (not an instant deadline). */
function timeoutMsOf(text: unknown): number {
  const seconds = Number(text);
  if (typeof text !== "string" || text.trim() === "" || !Number.isFinite(seconds) || seconds <= 0)
    throw new UsageError(
      `--timeout must be a positive number of seconds, not ${JSON.stringify(text)}`,
    );
  return seconds * 1000;
}

function printCniError(e: WireCniError, cniVersion: string): void {
  process.stdout.write(
    `${JSON.stringify(fromWireError(e).toJSON(cniVersion || undefined), null, 4)}\n`,
  );
}

async function podCommand(command: "add" | "del" | "check", argv: string[]): Promise<number> {
  const f = parseFlags(POD_FLAGS, argv);
  const s = (k: string) => (typeof f[k] === "string" ? (f[k] as string) : "");
  for (const k of ["container-id", ...(command === "del" ? [] : ["netns"])]) {
    if (!s(k)) throw new UsageError(`--${k} is required\n${usage(command, POD_FLAGS)}`);
  }
  const timeoutMs = timeoutMsOf(s("timeout"));
  // Bad input answers as a plugin would: the CNI error JSON on stdout, exit 1.
  const stdinConfig: Record<string, unknown> = {};
  let cniArgs: KeyValue[];
  try {
    if (s("capabilities")) {
      try {
        stdinConfig.runtimeConfig = JSON.parse(s("capabilities"));
      } catch (err) {
        throw new CniError(
          ErrorCode.DecodingFailure,
          `--capabilities is not JSON: ${(err as Error).message}`,
        );
      }
    }
    cniArgs = parseCniArgs(s("args")).map(([key, value]) => ({ key, value }));
  } catch (err) {
    const e = CniError.from(err);
    printCniError({ code: e.code, msg: e.message, details: e.details }, s("cni-version"));
    return 1;
  }
  const client = await driverClient(s("socket"));
  try {
    const req = {
      pod: { namespace: s("pod-namespace"), name: s("pod-name"), uid: s("pod-uid") },
      container_id: s("container-id"),
      netns: s("netns"),
      ifname: s("ifname"),
      network: s("network"),
      cni_version: s("cni-version"),
      cni_args: cniArgs,
      capabilities: null,
      stdin_config:
        Object.keys(stdinConfig).length > 0
          ? Buffer.from(JSON.stringify(stdinConfig))
          : Buffer.alloc(0),
    };
    if (command === "add") {
      const res = await client.setUpPod(req, { timeoutMs });
      if (res.error && res.error.code !== 0) {
        printCniError(res.error, res.cni_version);
        return 1;
      }
      process.stdout.write(`${res.result_json}\n`);
      return 0;
    }
    const res =
      command === "del"
        ? await client.tearDownPod(req, { timeoutMs })
        : await client.checkPod(req, { timeoutMs });
    if (res.error && res.error.code !== 0) {
      printCniError(res.error, s("cni-version"));
      return 1;
    }
    return 0;
  } finally {
    client.close();
  }
}

/** The socket's client, loaded only by the commands that call it: `serve` never holds gRPC's client library. */
async function driverClient(socket: string): Promise<DriverClient> {
  const { DriverClient } = await import("./rpc/client.js");
  return new DriverClient(socket);
}

async function status(argv: string[]): Promise<number> {
  const f = parseFlags(STATUS_FLAGS, argv);
  const client = await driverClient(f.socket as string);
  try {
    const res = await client.cniStatus(
      { network: (f.network as string) ?? "" },
      { timeoutMs: timeoutMsOf(f.timeout) },
    );
    process.stdout.write(`${JSON.stringify(res, null, 2)}\n`);
    if (res.api_version === 0 && res.error) return 2; // the socket did not answer
    // Ready means the network asked about can serve ADD too (its STATUS gave no error).
    return res.ready && !res.error ? 0 : 1;
  } finally {
    client.close();
  }
}

async function gc(argv: string[]): Promise<number> {
  const f = parseFlags(GC_FLAGS, argv);
  // Comma-separated too, as its env twin is: "a/eth0,b/eth0" is two attachments, not one.
  const valid = ((f.valid as string[] | undefined) ?? [])
    .flatMap((v) => v.split(","))
    .map((v) => {
      const i = v.lastIndexOf("/");
      // An empty part would name no attachment, and GC would tear down the one meant.
      if (i <= 0 || i === v.length - 1)
        throw new UsageError(`--valid takes ID/IFNAME, not ${JSON.stringify(v)}`);
      return { container_id: v.slice(0, i), ifname: v.slice(i + 1) };
    });
  const client = await driverClient(f.socket as string);
  try {
    const res = await client.garbageCollect(
      { networks: [{ network: (f.network as string) ?? "", valid_attachments: valid }] },
      { timeoutMs: timeoutMsOf(f.timeout) },
    );
    if (res.errors.length > 0) {
      for (const e of res.errors) printCniError(e, "");
      return 1;
    }
    process.stderr.write(`removed ${res.removed_attachments} attachment(s)\n`);
    return 0;
  } finally {
    client.close();
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    if (err instanceof UsageError) {
      const command = process.argv[2] ?? "";
      process.stderr.write(
        `cni-driver: ${err.message}\n(cni-driver ${command} --help lists the flags)\n`,
      );
      process.exitCode = 2;
      return;
    }
    process.stderr.write(
      `cni-driver: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
    );
    process.exitCode = 1;
  },
);
