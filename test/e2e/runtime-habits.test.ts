/**
 * What real runtimes do, replayed through the built shim (dist/bin/cni-driver-shim)
 * against a real driver with the Debian portmap chained after the built-in plugin.
 * Each exec is built as the runtime's libcni builds it:
 *
 * - stdin is the host conflist's one plugin object (src/driver/lifecycle/host-install.ts) with
 *   `name` and `cniVersion` injected, `prevResult` (the cached ADD result) on CHECK
 *   and DEL, and `runtimeConfig` holding the capability args the plugin declares —
 *   re-marshalled by Go, so the keys of every map come out sorted
 *   (libcni buildOneConfig / InjectConf), while values built from Go structs keep
 *   their field order;
 * - the environment is invoke.Args.AsEnv: all six CNI_* variables, empty where the
 *   verb has none (GC and STATUS), CNI_ARGS in the runtime's order.
 *
 * containerd (go-cni) builds CNI_ARGS from a map, so its order is anyone's, and its
 * capability values come from Go structs without JSON tags: `HostPort`, `Servers`…
 * It sends CNI_NETNS="" on DEL once the sandbox's netns is closed. CRI-O (ocicni)
 * sends CNI_ARGS in a fixed order, runs CHECK right after ADD, GC at start-up and
 * polls STATUS. The plugin entry carries the harness's `stateDir`, where the driver
 * replays the shim's deletion queue from.
 */
import type { ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import { readdirSync } from "node:fs";
import net from "node:net";
import { join } from "node:path";
import { expect } from "chai";
import { hostConflist } from "../../src/driver/lifecycle/host-install.js";
import { DELETION_QUEUE_DIR } from "../../src/wire/deletion-record.js";
import { DriverHarness, natRulesMentioning, sleep } from "../support/driver-harness.js";
import { createNetns, deleteNetns, linkIn, listHostLinks } from "../support/netns.js";
import {
  CONTAINER_PORT,
  randomPorts,
  startPodServer,
  stopPodServer,
} from "../support/pod-server.js";
import { requireReferencePlugins, requireRoot } from "../support/requirements.js";
import { ensureShimBuilt } from "../support/runtimes.js";
import { execShim, type ShimRun } from "../support/shim-exec.js";

const SUBNET_OCTET = 70;
/** containerd's and CRI-O's default plugin dir: the shim never looks in it. */
const CNI_PATH = "/opt/cni/bin";

let shimPath = "";

// ---------------------------------------------------------------------------
// Exec'ing the shim as libcni does

type Run = ShimRun;

/** The runtime side of one exec (libcni's RuntimeConf): what becomes the CNI_* variables. */
interface RuntimeConf {
  containerId: string;
  netns: string;
  ifName: string;
  args: Array<[string, string]>;
}

/**
 * invoke.Args.AsEnv: every CNI_* variable is set, to "" when the verb has no value
 * for it (GC and STATUS run with an empty RuntimeConf). Only PATH of the runtime's
 * own environment: nothing of the test runner's reaches the shim.
 */
function libcniEnv(command: string, rt?: RuntimeConf): Record<string, string> {
  return {
    PATH: process.env.PATH ?? "/usr/sbin:/usr/bin:/sbin:/bin",
    CNI_COMMAND: command,
    CNI_CONTAINERID: rt?.containerId ?? "",
    CNI_NETNS: rt?.netns ?? "",
    CNI_ARGS: (rt?.args ?? []).map(([k, v]) => `${k}=${v}`).join(";"),
    CNI_IFNAME: rt?.ifName ?? "",
    CNI_PATH,
  };
}

/** A Go map marshalled by encoding/json: keys in sorted order. */
function goMap(m: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(m).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

/**
 * The stdin libcni gives the one plugin of the list: the plugin object, `inject`
 * added, `runtimeConfig` holding only the declared capabilities the runtime has
 * values for; the object and the maps in it marshalled with sorted keys.
 */
function libcniStdin(
  plugin: Record<string, unknown>,
  inject: Record<string, unknown>,
  capabilityArgs: Record<string, unknown> = {},
): string {
  const declared = (plugin.capabilities ?? {}) as Record<string, boolean>;
  const runtimeConfig = Object.fromEntries(
    Object.entries(capabilityArgs).filter(([cap]) => declared[cap] === true),
  );
  const conf: Record<string, unknown> = { ...plugin, ...inject };
  if (conf.capabilities) conf.capabilities = goMap(declared);
  if (Object.keys(runtimeConfig).length > 0) conf.runtimeConfig = goMap(runtimeConfig);
  return JSON.stringify(goMap(conf));
}

function describeRun(r: Run): string {
  return `exit ${r.status}; stdout ${JSON.stringify(r.stdout)}; stderr ${JSON.stringify(r.stderr)}`;
}

/** DEL, CHECK, STATUS and GC succeed silently: exit 0, nothing on stdout. */
function expectSilentSuccess(r: Run): void {
  expect(r.status, describeRun(r)).to.equal(0);
  expect(r.stdout, describeRun(r)).to.equal("");
}

interface AddResult {
  cniVersion: string;
  interfaces: Array<{ name: string; mac?: string; sandbox?: string }>;
  ips: Array<{ address: string; gateway?: string; interface?: number }>;
}

/** ADD succeeded: exit 0, a result in `cniVersion` whose eth0 (in `netns`) has an address. */
function expectAddResult(r: Run, cniVersion: string, netns: string): AddResult {
  expect(r.status, describeRun(r)).to.equal(0);
  const result = r.json as unknown as AddResult;
  expect(result?.cniVersion, describeRun(r)).to.equal(cniVersion);
  // containerd fails a sandbox whose eth0 has no IP; the sandbox must be CNI_NETNS byte for byte.
  const ip = result.ips.find((i) => result.interfaces[i.interface ?? -1]?.name === "eth0");
  expect(ip, `an IP on eth0 in ${r.stdout}`).to.not.equal(undefined);
  expect(result.interfaces[ip?.interface ?? -1]?.sandbox).to.equal(netns);
  return result;
}

function addressOf(result: AddResult): string {
  return (result.ips[0]?.address ?? "").split("/")[0] ?? "";
}

// ---------------------------------------------------------------------------
// A pod that listens, and the host that connects

/** Connects to host:port and reads until the server closes; the error code when it fails (5 s). */
function readFrom(host: string, port: number): Promise<string> {
  return new Promise((resolve) => {
    let data = "";
    const sock = net.connect({ host, port, timeout: 5000 });
    sock.setEncoding("utf8");
    sock.on("data", (c: string) => {
      data += c;
    });
    sock.on("end", () => resolve(data));
    sock.on("timeout", () =>
      sock.destroy(Object.assign(new Error("timeout"), { code: "TIMEOUT" })),
    );
    sock.on("error", (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
  });
}

/** Distinct random host ports in 20000–30000. */

function listDir(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

// ---------------------------------------------------------------------------

describe("e2e: real runtimes' habits, replayed through the built shim", function () {
  this.timeout(60_000);
  let h: DriverHarness;
  let servers: ChildProcess[] = [];
  const [containerdPort, stoppedPort, crioPort] = randomPorts(3) as [number, number, number];

  before(async function () {
    this.timeout(300_000);
    requireRoot(this);
    requireReferencePlugins(this, "host-local", "portmap");
    shimPath = ensureShimBuilt();
    h = new DriverHarness({
      subnetOctet: SUBNET_OCTET,
      chain: [{ type: "portmap", capabilities: { portMappings: true } }],
    });
    await h.writeDefaultConfig();
    await h.start();
  });

  afterEach(async () => {
    await Promise.all(servers.map(stopPodServer));
    servers = [];
  });

  after(async () => {
    await h?.cleanup();
  });

  /** The host conflist's one plugin, as the driver installs it, with the harness's state dir. */
  function hostPlugin(): Record<string, unknown> {
    const list = JSON.parse(hostConflist({ socket: h.socket, stateDir: h.stateDir })) as {
      plugins: Array<Record<string, unknown>>;
    };
    return { ...(list.plugins[0] as Record<string, unknown>), stateDir: h.stateDir };
  }
  /** The host conflist's name: what libcni injects as `name`. */
  const NETWORK_NAME = "cni-driver";

  /** CNI_NETNS as containerd and CRI-O spell it (/var/run/netns/…), for netns `i`. */
  const varRunNetns = (i: string): string => `/var/run/netns/${h.netnsName(i)}`;

  /** go-cni's labels, IgnoreUnknown included, in the order a Go map happened to give. */
  function containerdArgs(i: string, uid: string): Array<[string, string]> {
    return [
      ["K8S_POD_UID", uid],
      ["IgnoreUnknown", "1"],
      ["K8S_POD_NAME", h.podName(i)],
      ["K8S_POD_INFRA_CONTAINER_ID", h.containerId(i)],
      ["K8S_POD_NAMESPACE", h.podNamespace],
    ];
  }

  /** ocicni's fixed order. */
  function crioArgs(i: string, uid: string): Array<[string, string]> {
    return [
      ["IgnoreUnknown", "1"],
      ["K8S_POD_NAMESPACE", h.podNamespace],
      ["K8S_POD_NAME", h.podName(i)],
      ["K8S_POD_INFRA_CONTAINER_ID", h.containerId(i)],
      ["K8S_POD_UID", uid],
    ];
  }

  /** containerd CRI's capability args for a pod mapping `hostPort`: Go structs, no JSON tags. */
  function containerdCapabilityArgs(hostPort: number, uid: string): Record<string, unknown> {
    return {
      portMappings: [
        { HostPort: hostPort, ContainerPort: CONTAINER_PORT, Protocol: "TCP", HostIP: "" },
      ],
      dns: { Servers: ["10.96.0.10"], Searches: ["default.svc.cluster.local"], Options: [] },
      "io.kubernetes.cri.pod-annotations": {
        "kubernetes.io/config.seen": "2024-01-01T00:00:00Z",
        "kubernetes.io/config.source": "api",
      },
      cgroupPath: `/kubepods/besteffort/pod${uid}`,
    };
  }

  /**
   * CRI-O's, with a host port when asked (lower-case keys). Its CHECK right after
   * ADD then reaches the Debian portmap, whose CHECK of an IPv4-only pod fails
   * (containernetworking/plugins#819) unless the driver lets that bug through.
   */
  function crioCapabilityArgs(uid: string, hostPort?: number): Record<string, unknown> {
    return {
      ...(hostPort !== undefined
        ? {
            portMappings: [
              { hostPort, containerPort: CONTAINER_PORT, protocol: "tcp", hostIP: "" },
            ],
          }
        : {}),
      cgroupPath: `/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod${uid.replaceAll("-", "_")}.slice`,
      "io.kubernetes.cri.pod-annotations": { "kubernetes.io/config.source": "api" },
    };
  }

  /**
   * Pod `i`'s sandbox: its netns made, then its ADD through the shim exactly as
   * the runtime whose CNI_ARGS and capability args are given sends it; the
   * result checked for that version.
   */
  async function addThroughShim(
    i: string,
    argsOf: (i: string, uid: string) => Array<[string, string]>,
    capsOf: (uid: string) => Record<string, unknown>,
    cniVersion: string,
  ) {
    const uid = randomUUID();
    createNetns(h.netnsName(i));
    const rt: RuntimeConf = {
      containerId: h.containerId(i),
      netns: varRunNetns(i),
      ifName: "eth0",
      args: argsOf(i, uid),
    };
    const caps = capsOf(uid);
    const inject = { name: NETWORK_NAME, cniVersion };
    const add = await execShim(
      shimPath,
      libcniEnv("ADD", rt),
      libcniStdin(hostPlugin(), inject, caps),
    );
    const result = expectAddResult(add, cniVersion, rt.netns);
    return { rt, caps, inject, result, address: addressOf(result) };
  }

  /** Everything of attachment `i` the driver or a chained plugin keeps on the host. */
  function footprint(i: string, address: string) {
    return {
      lease: h.leases().includes(address),
      hostVeth: listHostLinks(h.hostVeth(i)).length > 0,
      cache: h.cacheFiles().some((f) => f.includes(`-${h.containerId(i)}-`)),
      natRules: natRulesMentioning(h.containerId(i)),
    };
  }
  const NOTHING = { lease: false, hostVeth: false, cache: false, natRules: [] };

  it("containerd: capitalised capability keys and shuffled CNI_ARGS, the mapped port answers; DEL with an empty CNI_NETNS leaves nothing", async () => {
    const i = "ctrd";
    const { rt, caps, inject, result, address } = await addThroughShim(
      i,
      containerdArgs,
      (uid) => containerdCapabilityArgs(containerdPort, uid),
      "1.0.0",
    );
    expect(linkIn(h.netnsName(i), "eth0")?.ipv4).to.deep.equal([result.ips[0]?.address]);
    expect(footprint(i, address)).to.deep.include({ lease: true, hostVeth: true, cache: true });
    const rules = natRulesMentioning(h.containerId(i));
    expect(rules.join("\n"), "portmap's DNAT rule").to.contain(`--dports ${containerdPort}`);
    const chains = rules.flatMap((r) => /-j (CNI-DN-[0-9a-f]+)/.exec(r)?.[1] ?? []);

    const reply = `hello from ${h.podName(i)}`;
    servers.push(await startPodServer(h.netnsName(i), reply));
    expect(await readFrom(h.gateway, containerdPort)).to.equal(reply);

    // The sandbox is gone: its netns unmounted, so containerd sends CNI_NETNS="" and
    // the cached result as prevResult, with the same capability args. The pod server
    // still holds the namespace, so the veth outlives the mount: only an explicit
    // delete removes the host end, and only portmap's DEL stops the port answering.
    deleteNetns(h.netnsName(i));
    expect(listHostLinks(h.hostVeth(i)), "the host veth before DEL").to.have.length(1);
    const del = await execShim(
      shimPath,
      libcniEnv("DEL", { ...rt, netns: "" }),
      libcniStdin(hostPlugin(), { ...inject, prevResult: result }, caps),
    );
    expectSilentSuccess(del);
    expect(footprint(i, address)).to.deep.equal(NOTHING);
    for (const chain of chains) expect(natRulesMentioning(chain), chain).to.deep.equal([]);
    expect(await readFrom(h.gateway, containerdPort)).to.equal("ECONNREFUSED");
  });

  it("CRI-O: a 1.1.0 config with a host port, ADD then CHECK at once passes silently; DEL leaves nothing", async () => {
    const i = "crio";
    try {
      const { rt, caps, inject, result, address } = await addThroughShim(
        i,
        crioArgs,
        (uid) => crioCapabilityArgs(uid, crioPort),
        "1.1.0",
      );

      const check = await execShim(
        shimPath,
        libcniEnv("CHECK", rt),
        libcniStdin(hostPlugin(), { ...inject, prevResult: result }, caps),
      );
      expectSilentSuccess(check);
      expect(footprint(i, address)).to.deep.include({ lease: true, hostVeth: true, cache: true });
      expect(natRulesMentioning(h.containerId(i)).join("\n"), "portmap's DNAT rule").to.contain(
        `--dports ${crioPort}`,
      );

      const del = await execShim(
        shimPath,
        libcniEnv("DEL", rt),
        // An hour-long timeout: answered within the test's own time means it did not wait.
        libcniStdin(
          { ...hostPlugin(), timeoutSeconds: 3600 },
          { ...inject, prevResult: result },
          caps,
        ),
      );
      expectSilentSuccess(del);
      expect(footprint(i, address)).to.deep.equal(NOTHING);
      expect(linkIn(h.netnsName(i), "eth0"), "eth0 after DEL").to.equal(undefined);
    } finally {
      deleteNetns(h.netnsName(i));
    }
  });

  it("GC with a valid set that leaves out one attachment releases it and keeps the other", async () => {
    const inject = { name: NETWORK_NAME, cniVersion: "1.1.0" };
    const pods = ["gc-keep", "gc-drop"] as const;
    const added = new Map<string, { rt: RuntimeConf; result: AddResult; address: string }>();
    try {
      for (const i of pods) {
        const { rt, result, address } = await addThroughShim(
          i,
          crioArgs,
          (uid) => crioCapabilityArgs(uid),
          inject.cniVersion,
        );
        added.set(i, { rt, result, address });
      }
      const keep = added.get("gc-keep");
      const drop = added.get("gc-drop");
      if (!keep || !drop) throw new Error("both ADDs must have succeeded");

      const gc = await execShim(
        shimPath,
        libcniEnv("GC"),
        libcniStdin(hostPlugin(), {
          ...inject,
          "cni.dev/valid-attachments": [{ containerID: keep.rt.containerId, ifname: "eth0" }],
        }),
      );
      expectSilentSuccess(gc);
      expect(footprint("gc-drop", drop.address), "the left-out attachment").to.deep.equal(NOTHING);
      expect(footprint("gc-keep", keep.address), "the valid attachment").to.deep.include({
        lease: true,
        hostVeth: true,
        cache: true,
      });
      expect(linkIn(h.netnsName("gc-keep"), "eth0")?.ipv4).to.deep.equal([
        keep.result.ips[0]?.address,
      ]);

      const del = await execShim(
        shimPath,
        libcniEnv("DEL", keep.rt),
        libcniStdin(hostPlugin(), { ...inject, prevResult: keep.result }),
      );
      expectSilentSuccess(del);
      expect(footprint("gc-keep", keep.address)).to.deep.equal(NOTHING);
    } finally {
      for (const i of pods) deleteNetns(h.netnsName(i));
    }
  });

  it("STATUS: code 50 from a driver that is up without a usable config, exit 0 once a good one arrives", async () => {
    const status = () =>
      execShim(
        shimPath,
        libcniEnv("STATUS"),
        libcniStdin(hostPlugin(), { name: NETWORK_NAME, cniVersion: "1.1.0" }),
      );
    await h.stop();
    await h.writeConfig({ "pod-network.conflist": "{ broken" });
    await h.start({ waitReady: false });
    try {
      // Up: the driver itself answers (not ready, its config refused), so the 50 below
      // is the driver's "cannot serve ADD", not the shim's "unreachable".
      const deadline = Date.now() + 20_000;
      for (;;) {
        const answer = await h.client.cniStatus({}, { timeoutMs: 1000 });
        if (answer.driver_version !== "") {
          expect(answer.ready).to.equal(false);
          expect(answer.last_config_error, "the refused config").to.not.equal(null);
          break;
        }
        if (Date.now() > deadline) throw new Error(`driver silent after 20 s: ${h.logs}`);
        await sleep(100);
      }
      const before = await status();
      expect(before.status, describeRun(before)).to.equal(1);
      expect(before.json?.code, describeRun(before)).to.equal(50);
      expect(before.json?.cniVersion).to.equal("1.1.0");
      expect(String(before.json?.msg)).to.match(/cannot serve ADD/);

      await h.writeDefaultConfig();
      // As CRI-O polls until ready: every 500 ms, bounded.
      let after = await status();
      for (let n = 0; n < 40 && after.status !== 0; n++) {
        await sleep(500);
        after = await status();
      }
      expectSilentSuccess(after);
    } finally {
      // The next test needs a ready driver whatever happened here.
      await h.writeDefaultConfig();
      if (h.running) await h.waitReady();
      else await h.start();
    }
  });

  it("DEL while the driver is stopped exits 0 without waiting; after the restart nothing leaks", async () => {
    const i = "stopped";
    try {
      const { rt, caps, inject, result, address } = await addThroughShim(
        i,
        containerdArgs,
        (uid) => containerdCapabilityArgs(stoppedPort, uid),
        "1.0.0",
      );
      expect(natRulesMentioning(h.containerId(i)).join("\n")).to.contain(`--dports ${stoppedPort}`);

      await h.stop();
      const del = await execShim(
        shimPath,
        libcniEnv("DEL", rt),
        // An hour-long timeout: answered within the test's own time means it did not wait.
        libcniStdin(
          { ...hostPlugin(), timeoutSeconds: 3600 },
          { ...inject, prevResult: result },
          caps,
        ),
      );
      expectSilentSuccess(del);
      const queue = join(h.stateDir, DELETION_QUEUE_DIR);
      expect(listDir(queue).filter((f) => f.endsWith(".json"))).to.have.length(1);

      await h.start();
      expect(footprint(i, address)).to.deep.equal(NOTHING);
      expect(
        listDir(queue).filter((f) => f.endsWith(".json")),
        "deletion records after the restart",
      ).to.deep.equal([]);
      expect(linkIn(h.netnsName(i), "eth0"), "eth0").to.equal(undefined);
    } finally {
      if (!h.running) await h.start().catch(() => {});
      deleteNetns(h.netnsName(i));
    }
  });
});
