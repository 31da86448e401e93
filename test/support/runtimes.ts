/**
 * Real container runtimes that exec CNI plugins, each started and configured under
 * a temporary root of its own, so the e2e suites never write the host's
 * /etc/containers, /etc/cni/net.d or /opt/cni/bin, and the runtimes take their CNI
 * conf and plugin dirs from the test alone:
 *
 * - podman 4 with the CNI backend: a private containers.conf (CONTAINERS_CONF) and
 *   storage.conf (CONTAINERS_STORAGE_CONF) name the conf dir, the plugin dir, the
 *   image store and podman's own state, all under the root.
 * - containerd started by hand with its own config (root, state, socket) inside a
 *   private mount namespace where the test's conf and bin dirs are bound over the
 *   paths `ctr run --cni` has compiled in (/etc/cni/net.d, /opt/cni/bin); every
 *   `ctr` call enters that namespace.
 *
 * The image both run is a busybox rootfs made from Debian's static busybox.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execaSync } from "execa";
import { REPO_ROOT, sleep } from "./driver-harness.js";
import { uniqueTag } from "./netns.js";

/** What the conflists name and the bin dirs hold: the project's classic CNI plugin. */
export const SHIM_TYPE = "cni-driver-shim";
/** `npm run build:shim` writes the shim, a static C program, here. */
export const SHIM_BINARY = join(REPO_ROOT, "dist/bin/cni-driver-shim");
/** Debian's busybox-static: a static binary is the whole userland of the test image. */
export const BUSYBOX = "/bin/busybox";

export interface CommandResult {
  status: number;
  stdout: string;
  stderr: string;
}

/**
 * The environment runtimes run in: no NODE_OPTIONS (a test runner's loader must not
 * leak into the shim) and no NODE_EXTRA_CA_CERTS (it costs every Node start ~60 ms).
 */
export function runtimeEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, ...extra };
  delete env.NODE_OPTIONS;
  delete env.NODE_EXTRA_CA_CERTS;
  return env;
}

/**
 * The environment for fetching from the npm registry (`npm pack`): the user's own,
 * with their npm settings and CA (NODE_EXTRA_CA_CERTS: a TLS proxy's CA), less
 * NODE_OPTIONS (a test runner's loader must not leak into npm).
 */
export function fetchEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env.NODE_OPTIONS;
  return env;
}

/** Runs a command to completion, killed after `timeoutMs`; never throws. */
export function runCommand(
  command: string,
  args: string[],
  opts: { env?: NodeJS.ProcessEnv; timeoutMs?: number; cwd?: string } = {},
): CommandResult {
  const timeoutMs = opts.timeoutMs ?? 30_000;
  const r = execaSync(command, args, {
    // Exactly this env: runtimeEnv() drops variables that must not reach the child.
    env: opts.env ?? runtimeEnv(),
    extendEnv: false,
    ...(opts.cwd !== undefined ? { cwd: opts.cwd } : {}),
    timeout: timeoutMs,
    killSignal: "SIGKILL",
    stdin: "ignore",
    maxBuffer: 16 * 1024 * 1024,
    stripFinalNewline: false,
    reject: false,
  });
  const why = r.timedOut
    ? `\n(killed after ${timeoutMs} ms)`
    : r.cause instanceof Error
      ? `\n${r.cause.message}`
      : "";
  return { status: r.exitCode ?? -1, stdout: r.stdout, stderr: `${r.stderr}${why}` };
}

/** The command's stdout when it exits 0; otherwise an error naming it, with its stderr. */
export function mustSucceed(what: string, r: CommandResult): string {
  if (r.status !== 0) {
    throw new Error(`${what} exited ${r.status}: ${r.stderr.trim() || r.stdout.trim()}`);
  }
  return r.stdout;
}

/** Polls `probe` every 100 ms until it returns a value other than undefined; bounded. */
export async function waitFor<T>(
  what: string,
  probe: () => T | undefined,
  timeoutMs = 20_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = probe();
    if (value !== undefined) return value;
    if (Date.now() >= deadline)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(100);
  }
}

// ---------------------------------------------------------------------------
// The shim

let shimChecked = false;

/** The newest modification time of `path` or any file under it (0 when it does not exist). */
export function newestMtime(path: string): number {
  let st: ReturnType<typeof statSync>;
  try {
    st = statSync(path);
  } catch {
    return 0;
  }
  if (!st.isDirectory()) return st.mtimeMs;
  let newest = 0;
  for (const name of readdirSync(path)) newest = Math.max(newest, newestMtime(join(path, name)));
  return newest;
}

/** What the shim is built from: its C sources and proto, and the build script. */
const SHIM_SOURCES = ["src/remote-plugin-shim", "scripts/build-shim.sh"];

/**
 * Builds the shim (`npm run build:shim`) when its executable is missing or older
 * than any of its sources, once per test process, so a suite never tests a stale shim.
 */
export function ensureShimBuilt(timeoutMs = 180_000): string {
  if (shimChecked) return SHIM_BINARY;
  const builtAt = existsSync(SHIM_BINARY) ? statSync(SHIM_BINARY).mtimeMs : 0;
  const sourcesAt = Math.max(...SHIM_SOURCES.map((s) => newestMtime(join(REPO_ROOT, s))));
  if (builtAt === 0 || builtAt < sourcesAt) {
    const r = runCommand("npm", ["run", "--silent", "build:shim"], {
      cwd: REPO_ROOT,
      timeoutMs,
      env: runtimeEnv(),
    });
    mustSucceed("npm run build:shim", r);
    if (!existsSync(SHIM_BINARY)) {
      throw new Error(`npm run build:shim succeeded but ${SHIM_BINARY} does not exist`);
    }
  }
  shimChecked = true;
  return SHIM_BINARY;
}

/** A conflist plugin entry for the shim, forwarding to the driver at `socket`. */
export function shimPlugin(
  socket: string,
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  return { type: SHIM_TYPE, socket, ...extra };
}

// ---------------------------------------------------------------------------
// The busybox image

/** True when `path` is a static executable (`ldd` finds no dynamic section). */
export function isStaticExecutable(path: string): boolean {
  const r = runCommand("ldd", [path], { timeoutMs: 10_000 });
  return r.status !== 0 && /not a dynamic executable/.test(r.stdout + r.stderr);
}

/**
 * A busybox root filesystem as a plain tar at `<dir>/rootfs.tar`: /bin/busybox, a
 * symlink per applet (sh, ping, ip, sleep, nc, …), and the few files and dirs
 * runtimes expect. Owners are 0 and mtimes fixed, so equal inputs give equal bytes.
 */
export function buildBusyboxRootfsTar(dir: string): string {
  if (!isStaticExecutable(BUSYBOX)) {
    throw new Error(`${BUSYBOX} is not a static executable: install Debian's busybox-static`);
  }
  const rootfs = join(dir, "rootfs");
  for (const d of ["bin", "dev", "etc", "proc", "root", "sys", "tmp"]) {
    mkdirSync(join(rootfs, d), { recursive: true });
  }
  copyFileSync(BUSYBOX, join(rootfs, "bin/busybox"));
  const applets = mustSucceed("busybox --list", runCommand(BUSYBOX, ["--list"]))
    .split("\n")
    .map((a) => a.trim())
    .filter((a) => a && a !== "busybox" && !a.includes("/"));
  for (const applet of applets) symlinkSync("busybox", join(rootfs, "bin", applet));
  writeFileSync(join(rootfs, "etc/passwd"), "root:x:0:0:root:/root:/bin/sh\n");
  writeFileSync(join(rootfs, "etc/group"), "root:x:0:\n");
  const tarPath = join(dir, "rootfs.tar");
  mustSucceed(
    "tar",
    runCommand("tar", [
      "--numeric-owner",
      "--owner=0",
      "--group=0",
      "--mtime=@0",
      "--sort=name",
      "-C",
      rootfs,
      "-cf",
      tarPath,
      ...readdirSync(rootfs).sort(),
    ]),
  );
  rmSync(rootfs, { recursive: true, force: true });
  return tarPath;
}

function sha256(data: Buffer): string {
  return createHash("sha256").update(data).digest("hex");
}

/** The OCI architecture name of this machine. */
function ociArchitecture(): string {
  const byNode: Record<string, string> = {
    x64: "amd64",
    arm64: "arm64",
    arm: "arm",
    s390x: "s390x",
  };
  return byNode[process.arch] ?? process.arch;
}

/**
 * An OCI image layout tar (what `ctr images import` reads) holding one image, `ref`,
 * whose single uncompressed layer is `layerTar`. Written by hand: no registry and
 * no second runtime needed to make it.
 */
export function buildOciArchive(layerTar: string, ref: string, dir: string): string {
  const layout = join(dir, "oci-layout-dir");
  const blobs = join(layout, "blobs/sha256");
  mkdirSync(blobs, { recursive: true });
  const addBlob = (data: Buffer): { digest: string; size: number } => {
    const hex = sha256(data);
    writeFileSync(join(blobs, hex), data);
    return { digest: `sha256:${hex}`, size: data.length };
  };
  const layer = addBlob(readFileSync(layerTar));
  const config = addBlob(
    Buffer.from(
      JSON.stringify({
        architecture: ociArchitecture(),
        os: "linux",
        config: { Cmd: ["/bin/sh"], Env: ["PATH=/bin"] },
        rootfs: { type: "layers", diff_ids: [layer.digest] },
      }),
    ),
  );
  const manifest = addBlob(
    Buffer.from(
      JSON.stringify({
        schemaVersion: 2,
        mediaType: "application/vnd.oci.image.manifest.v1+json",
        config: { mediaType: "application/vnd.oci.image.config.v1+json", ...config },
        layers: [{ mediaType: "application/vnd.oci.image.layer.v1.tar", ...layer }],
      }),
    ),
  );
  const tag = ref.slice(ref.lastIndexOf(":") + 1);
  writeFileSync(
    join(layout, "index.json"),
    JSON.stringify({
      schemaVersion: 2,
      manifests: [
        {
          mediaType: "application/vnd.oci.image.manifest.v1+json",
          ...manifest,
          // containerd's importer names the image from io.containerd.image.name.
          annotations: {
            "io.containerd.image.name": ref,
            "org.opencontainers.image.ref.name": tag,
          },
        },
      ],
    }),
  );
  writeFileSync(join(layout, "oci-layout"), JSON.stringify({ imageLayoutVersion: "1.0.0" }));
  const archive = join(dir, "image-oci.tar");
  mustSucceed(
    "tar",
    runCommand("tar", [
      "--numeric-owner",
      "--owner=0",
      "--group=0",
      "-C",
      layout,
      "-cf",
      archive,
      "oci-layout",
      "index.json",
      "blobs",
    ]),
  );
  rmSync(layout, { recursive: true, force: true });
  return archive;
}

// ---------------------------------------------------------------------------
// Shared helpers

/** Mount points at or under `dir`, deepest first (to unmount in that order). */
function mountsUnder(dir: string): string[] {
  let text = "";
  try {
    text = readFileSync("/proc/self/mountinfo", "utf8");
  } catch {
    return [];
  }
  const decode = (s: string) =>
    s.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(Number.parseInt(o, 8)));
  return text
    .split("\n")
    .map((line) => decode(line.split(" ")[4] ?? ""))
    .filter((m) => m === dir || m.startsWith(`${dir}/`))
    .sort((a, b) => b.length - a.length);
}

/** Unmounts whatever is still mounted under `dir` (lazily), then removes `dir`. */
export function removeRoot(dir: string): void {
  for (const m of mountsUnder(dir)) runCommand("umount", ["-l", m], { timeoutMs: 10_000 });
  rmSync(dir, { recursive: true, force: true });
}

/** PIDs of processes whose command line contains `needle` (ours: it names our temp root). */
function pidsMentioning(needle: string): number[] {
  const pids: number[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue;
    try {
      const cmdline = readFileSync(`/proc/${name}/cmdline`, "utf8").split("\0").join(" ");
      if (cmdline.includes(needle)) pids.push(Number(name));
    } catch {
      // gone already
    }
  }
  return pids;
}

function killPids(pids: number[]): void {
  for (const pid of pids) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // gone already
    }
  }
}

/** Writes `<dir>/<name>.conflist` for a network whose chain is `plugins`. */
function writeConflist(
  dir: string,
  fileName: string,
  name: string,
  plugins: Array<Record<string, unknown>>,
  cniVersion: string,
): string {
  const path = join(dir, fileName);
  writeFileSync(path, `${JSON.stringify({ cniVersion, name, plugins }, null, 2)}\n`);
  return path;
}

// ---------------------------------------------------------------------------
// podman

/** What `podman inspect` reports of one container's attachment to one network. */
export interface PodmanAttachment {
  ipAddress: string;
  prefixLen: number;
  gateway: string;
  macAddress: string;
}

/** The part of `podman inspect` these tests read. */
interface PodmanNetworkSettings {
  SandboxKey?: string;
  Networks?: Record<
    string,
    { IPAddress: string; IPPrefixLen: number; Gateway: string; MacAddress: string }
  >;
}

/**
 * podman 4 with the CNI backend under a temporary root. Everything podman keeps
 * lives there: images and containers (storage.conf: vfs driver, graphroot, runroot),
 * its own state (tmp_dir, file locks rather than the host-wide /dev/shm lock
 * segment, a file events log), the conflists (network_config_dir) and the plugins
 * (cni_plugin_dirs: nothing but the bin dir here, so a plugin podman runs can only
 * come from it).
 *
 * Outside the root podman still uses, as any podman does: a netns per container
 * under /run/netns (removed with the container), libcni's result cache
 * /var/lib/cni/results (one file per attachment, removed on DEL), runc's state
 * dir /run/runc, and the image copy's blob-info cache under /var/lib/containers/cache.
 */
export interface PodmanOptions {
  /** The CNI conf dir podman reads (default: `<root>/net.d`). */
  confDir?: string;
  /** The CNI plugin dir podman execs from (default: `<root>/bin`). */
  binDir?: string;
  /** A command every podman call runs under, e.g. nsenter into a node's mount namespace. */
  wrap?: string[];
  /** The storage driver (default vfs). */
  storageDriver?: "vfs" | "overlay";
  /** Read-only image stores to take images from (same storage driver), e.g. the host's own. */
  additionalImageStores?: string[];
}

export class Podman {
  readonly tag = uniqueTag();
  readonly root = mkdtempSync(join(tmpdir(), "cdt-podman-"));
  readonly confDir: string;
  readonly binDir: string;
  readonly containersConf = join(this.root, "containers.conf");
  readonly storageConf = join(this.root, "storage.conf");
  readonly registriesConf = join(this.root, "registries.conf");
  readonly image = `localhost/cdt-busybox-${this.tag}:latest`;
  /** Containers this instance created (full ids), for cleanup whatever happened. */
  private readonly created = new Map<string, { sandboxKey: string }>();
  private readonly env: NodeJS.ProcessEnv;

  private readonly wrap: string[];

  constructor(options: PodmanOptions = {}) {
    this.confDir = options.confDir ?? join(this.root, "net.d");
    this.binDir = options.binDir ?? join(this.root, "bin");
    this.wrap = options.wrap ?? [];
    const state = join(this.root, "state");
    for (const d of [this.confDir, this.binDir, state]) mkdirSync(d, { recursive: true });
    const toml = (s: string) => JSON.stringify(s);
    writeFileSync(
      this.containersConf,
      [
        "[containers]",
        // podman's defaults for root (nofile 1048576, nproc 4194304) exceed this
        // machine's hard limits, and runc then fails to start the container.
        'default_ulimits = ["nofile=4096:4096", "nproc=4096:4096"]',
        'log_driver = "k8s-file"',
        "",
        "[network]",
        'network_backend = "cni"',
        `cni_plugin_dirs = [${toml(this.binDir)}]`,
        `network_config_dir = ${toml(this.confDir)}`,
        "",
        "[engine]",
        // crun fails on this machine's hybrid cgroup layout; runc does not.
        'runtime = "runc"',
        'cgroup_manager = "cgroupfs"',
        'events_logger = "file"',
        `events_logfile_path = ${toml(join(state, "events.log"))}`,
        `tmp_dir = ${toml(state)}`,
        'lock_type = "file"',
        "",
      ].join("\n"),
    );
    writeFileSync(
      this.storageConf,
      [
        "[storage]",
        // vfs: no overlay mounts to leak, and the image is 2 MB.
        `driver = ${toml(options.storageDriver ?? "vfs")}`,
        `graphroot = ${toml(join(this.root, "storage"))}`,
        `runroot = ${toml(join(this.root, "storage-run"))}`,
        ...(options.additionalImageStores?.length
          ? [
              "[storage.options]",
              `additionalimagestores = [${options.additionalImageStores.map(toml).join(", ")}]`,
            ]
          : []),
        "",
      ].join("\n"),
    );
    writeFileSync(this.registriesConf, "unqualified-search-registries = []\n");
    this.env = runtimeEnv({
      CONTAINERS_CONF: this.containersConf,
      CONTAINERS_STORAGE_CONF: this.storageConf,
      CONTAINERS_REGISTRIES_CONF: this.registriesConf,
    });
  }

  /** Puts `binary` into the plugin dir as `type` (a symlink: the same file the runtime execs). */
  installPlugin(type: string, binary: string): void {
    symlinkSync(binary, join(this.binDir, type));
  }

  /**
   * A network podman knows by `name` (podman maps network names to the conflist
   * `name`). 0.4.0 is what podman's own generated conflists use.
   */
  writeNetwork(
    name: string,
    plugins: Array<Record<string, unknown>>,
    cniVersion = "0.4.0",
  ): string {
    return writeConflist(this.confDir, `${name}.conflist`, name, plugins, cniVersion);
  }

  /** `podman <args>` with the private configuration; bounded. */
  run(args: string[], timeoutMs = 60_000): CommandResult {
    const [command = "podman", ...wrapArgs] = [...this.wrap, "podman"];
    return runCommand(command, [...wrapArgs, ...args], { env: this.env, timeoutMs });
  }

  /** `podman <args>`, its stdout trimmed; throws with podman's stderr when it fails. */
  must(args: string[], timeoutMs = 60_000): string {
    return mustSucceed(`podman ${args.join(" ")}`, this.run(args, timeoutMs)).trim();
  }

  /** `podman import` of the busybox rootfs tarball as {@link image}. */
  importBusybox(): string {
    const tar = buildBusyboxRootfsTar(mkdtempSync(join(this.root, "image-")));
    this.must(["import", "--quiet", tar, this.image]);
    return this.image;
  }

  /**
   * `podman run -d` of `command` on `network`; returns the full container id.
   * busybox's ping needs CAP_NET_RAW (it has no ICMP-datagram fallback), hence the cap.
   */
  runDetached(name: string, network: string, command: string[]): string {
    const id = this.must([
      "run",
      "-d",
      "--name",
      name,
      "--network",
      network,
      "--cap-add",
      "NET_RAW",
      this.image,
      ...command,
    ]);
    this.created.set(id, { sandboxKey: "" });
    try {
      this.created.set(id, { sandboxKey: this.sandboxKey(id) });
    } catch {
      // the id alone is enough to clean up
    }
    return id;
  }

  /** `podman inspect` of one container: the network part of it. */
  private inspectNetwork(nameOrId: string): PodmanNetworkSettings {
    const [info] = JSON.parse(this.must(["inspect", nameOrId])) as Array<{
      NetworkSettings?: PodmanNetworkSettings;
    }>;
    return info?.NetworkSettings ?? {};
  }

  /** The container's attachment to `network`, as `podman inspect` reports it. */
  attachment(nameOrId: string, network: string): PodmanAttachment | undefined {
    const n = this.inspectNetwork(nameOrId).Networks?.[network];
    if (!n) return undefined;
    return {
      ipAddress: n.IPAddress,
      prefixLen: n.IPPrefixLen,
      gateway: n.Gateway,
      macAddress: n.MacAddress,
    };
  }

  /** The path of the container's netns (podman's `/run/netns/netns-<uuid>`). */
  sandboxKey(nameOrId: string): string {
    return this.inspectNetwork(nameOrId).SandboxKey ?? "";
  }

  /** `podman exec <container> <command>`; bounded, never throws. */
  exec(nameOrId: string, command: string[], timeoutMs = 20_000): CommandResult {
    return this.run(["exec", nameOrId, ...command], timeoutMs);
  }

  /** Full ids of the containers podman lists (running or not). */
  containerIds(): string[] {
    return this.must(["ps", "-a", "--no-trunc", "--format", "{{.ID}}"]).split("\n").filter(Boolean);
  }

  /** `podman rm -f -t 0` (the runtime's DEL path); forgets the containers it removed. */
  remove(...namesOrIds: string[]): CommandResult {
    const r = this.run(["rm", "-f", "-t", "0", ...namesOrIds], 60_000);
    if (r.status === 0) {
      const left = new Set(this.containerIds());
      for (const id of [...this.created.keys()]) if (!left.has(id)) this.created.delete(id);
    }
    return r;
  }

  /** Removes every container (podman runs CNI DEL for each), then the whole root. */
  async cleanup(): Promise<void> {
    if (existsSync(this.containersConf)) this.run(["rm", "-a", "-f", "-t", "0"], 60_000);
    // What podman could not remove: its conmon processes, netns mounts and libcni cache files.
    killPids(pidsMentioning(this.root));
    for (const [id, { sandboxKey }] of this.created) {
      if (sandboxKey && existsSync(sandboxKey)) {
        runCommand("umount", ["-l", sandboxKey], { timeoutMs: 10_000 });
        rmSync(sandboxKey, { force: true });
      }
      for (const f of listDir("/var/lib/cni/results")) {
        if (f.includes(id)) rmSync(join("/var/lib/cni/results", f), { force: true });
      }
    }
    this.created.clear();
    removeRoot(this.root);
  }
}

function listDir(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

// ---------------------------------------------------------------------------
// containerd

/**
 * Shell lines that, in a fresh mount namespace, show `source` at `target`. When
 * `target` does not exist on the host, an overlay over its nearest existing
 * ancestor (upper and work dirs under `scratch`) makes room for it there without
 * creating anything on the host.
 */
export function bindOverScript(target: string, source: string, scratch: string): string {
  const q = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
  return [
    `t=${q(target)}; a="$t"`,
    `while [ ! -d "$a" ]; do a=$(dirname "$a"); done`,
    `if [ "$a" != "$t" ]; then`,
    `  mkdir -p ${q(`${scratch}/upper`)} ${q(`${scratch}/work`)}`,
    `  mount -t overlay overlay -o "lowerdir=$a,upperdir=${scratch}/upper,workdir=${scratch}/work" "$a"`,
    `  mkdir -p "$t"`,
    "fi",
    `mount --bind ${q(source)} "$t"`,
  ].join("\n");
}

/**
 * containerd started by hand under a temporary root, inside a private mount
 * namespace of its own: there the test's conf dir is /etc/cni/net.d, its bin dir
 * /opt/cni/bin (the paths `ctr run --cni` has compiled in: gocni.WithDefaultConf),
 * libcni's cache /var/lib/cni and containerd's hard-coded /run/containerd (shim
 * sockets) are dirs under the root. Every `ctr` runs in that namespace (nsenter),
 * so the CNI plugins it execs are the test's. The CRI plugin is disabled: `ctr`
 * does not need it, and it would want the host's CNI dirs. (Its
 * `restrict_oom_score_adj`, which runc needs under CRI, is a CRI setting: `ctr`'s
 * containers start without it.)
 */
export class Containerd {
  readonly tag = uniqueTag();
  readonly root = mkdtempSync(join(tmpdir(), "cdt-ctrd-"));
  readonly confDir = join(this.root, "net.d");
  readonly binDir = join(this.root, "bin");
  readonly cniCacheDir = join(this.root, "var-lib-cni");
  readonly socket = join(this.root, "containerd.sock");
  readonly configFile = join(this.root, "config.toml");
  readonly fifoDir = join(this.root, "fifo");
  readonly runcRoot = join(this.root, "runc");
  /** The containerd namespace the test's images and containers live in. */
  readonly namespace = `cdt-${this.tag}`;
  readonly image = `localhost/cdt-busybox-${this.tag}:latest`;
  private child: ChildProcess | undefined;
  private log = "";

  constructor() {
    for (const d of [this.confDir, this.binDir, this.cniCacheDir, this.fifoDir, this.runcRoot]) {
      mkdirSync(d, { recursive: true });
    }
    const toml = (s: string) => JSON.stringify(s);
    writeFileSync(
      this.configFile,
      [
        "version = 2",
        `root = ${toml(join(this.root, "lib"))}`,
        `state = ${toml(join(this.root, "state"))}`,
        'disabled_plugins = ["io.containerd.grpc.v1.cri"]',
        "",
        "[grpc]",
        `  address = ${toml(this.socket)}`,
        "[ttrpc]",
        `  address = ${toml(`${this.socket}.ttrpc`)}`,
        "[debug]",
        '  address = ""',
        "[metrics]",
        '  address = ""',
        "",
        // Its default is /opt/containerd, created at start.
        '[plugins."io.containerd.internal.v1.opt"]',
        `  path = ${toml(join(this.root, "opt"))}`,
        "",
      ].join("\n"),
    );
  }

  /** Puts `binary` into the bin dir as `type`. */
  installPlugin(type: string, binary: string): void {
    symlinkSync(binary, join(this.binDir, type));
  }

  /**
   * The network `ctr run --cni` uses: it loads the first conf file of the dir in
   * sorted order (gocni.WithDefaultConf), so this one is the only one.
   */
  writeNetwork(
    name: string,
    plugins: Array<Record<string, unknown>>,
    cniVersion = "1.0.0",
  ): string {
    return writeConflist(this.confDir, `10-${name}.conflist`, name, plugins, cniVersion);
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  get logs(): string {
    return this.log;
  }

  /** Starts containerd in its private mount namespace and waits until it answers (bounded). */
  async start(timeoutMs = 20_000): Promise<void> {
    const scratch = join(this.root, "mnt");
    const script = [
      "set -e",
      bindOverScript("/etc/cni/net.d", this.confDir, `${scratch}/etc`),
      bindOverScript("/opt/cni/bin", this.binDir, `${scratch}/opt`),
      bindOverScript("/var/lib/cni", this.cniCacheDir, `${scratch}/var-lib`),
      bindOverScript("/run/containerd", join(this.root, "run-containerd"), `${scratch}/run`),
      'exec containerd --config "$0"',
    ].join("\n");
    mkdirSync(join(this.root, "run-containerd"), { recursive: true });
    const child = spawn(
      "unshare",
      ["--mount", "--propagation", "private", "sh", "-c", script, this.configFile],
      { env: runtimeEnv(), stdio: ["ignore", "ignore", "pipe"] },
    );
    this.child = child;
    child.stderr?.on("data", (b: Buffer) => {
      this.log = (this.log + b.toString()).slice(-200_000);
    });
    await waitFor(
      `containerd to answer on ${this.socket}`,
      () => {
        if (child.exitCode !== null) {
          throw new Error(`containerd exited with ${child.exitCode}: ${this.log.slice(-2000)}`);
        }
        if (!existsSync(this.socket)) return undefined;
        return this.ctr(["version"], 5_000).status === 0 ? true : undefined;
      },
      timeoutMs,
    );
  }

  /** The argv that runs `ctr <args>` inside containerd's mount namespace. */
  private ctrArgv(args: string[]): string[] {
    if (!this.child?.pid) throw new Error("containerd is not running");
    return [
      "-t",
      String(this.child.pid),
      "-m",
      "--",
      "ctr",
      "--address",
      this.socket,
      "--namespace",
      this.namespace,
      ...args,
    ];
  }

  /** `ctr <args>` in containerd's mount namespace and the test's ctr namespace; bounded. */
  ctr(args: string[], timeoutMs = 30_000): CommandResult {
    return runCommand("nsenter", this.ctrArgv(args), { timeoutMs });
  }

  /** `ctr <args>`, stdout trimmed; throws with ctr's stderr when it fails. */
  must(args: string[], timeoutMs = 30_000): string {
    return mustSucceed(`ctr ${args.join(" ")}`, this.ctr(args, timeoutMs)).trim();
  }

  /** `ctr <args>` as a child process that runs on (e.g. a foreground `ctr run`). */
  spawnCtr(args: string[]): ChildProcess {
    return spawn("nsenter", this.ctrArgv(args), {
      env: runtimeEnv(),
      stdio: ["ignore", "pipe", "pipe"],
    });
  }

  /** Imports the busybox image (an OCI archive built by hand) as {@link image}. */
  importBusybox(): string {
    const dir = mkdtempSync(join(this.root, "image-"));
    const archive = buildOciArchive(buildBusyboxRootfsTar(dir), this.image, dir);
    this.must(["images", "import", archive], 60_000);
    return this.image;
  }

  /** The argv of `ctr run --cni --rm <image> <id> <command>` (foreground: see the suite). */
  runArgs(id: string, command: string[]): string[] {
    return [
      "run",
      "--cni",
      "--rm",
      "--fifo-dir",
      this.fifoDir,
      "--runc-root",
      this.runcRoot,
      this.image,
      id,
      ...command,
    ];
  }

  /** `ctr tasks exec` of `command` in the running container `id`; bounded, never throws. */
  exec(id: string, command: string[], timeoutMs = 20_000): CommandResult {
    return this.ctr(
      ["tasks", "exec", "--exec-id", `e${uniqueTag()}`, "--fifo-dir", this.fifoDir, id, ...command],
      timeoutMs,
    );
  }

  /** Tasks of the test's namespace: id → status (RUNNING, STOPPED, …). */
  tasks(): Map<string, string> {
    const out = this.must(["tasks", "ls"]);
    const tasks = new Map<string, string>();
    for (const line of out.split("\n").slice(1)) {
      const [id, , status] = line.trim().split(/\s+/);
      if (id && status) tasks.set(id, status);
    }
    return tasks;
  }

  /** Container ids of the test's namespace. */
  containers(): string[] {
    return this.must(["containers", "ls", "-q"]).split("\n").filter(Boolean);
  }

  /**
   * Kills every task and removes every container of the test's namespace, stops
   * containerd (SIGTERM, then SIGKILL after 10 s) and its shims, and removes the root.
   * The private mount namespace ends with its last process, taking its mounts with it.
   */
  async cleanup(): Promise<void> {
    const child = this.child;
    if (child && child.exitCode === null && child.signalCode === null) {
      try {
        for (const id of this.tasks().keys()) {
          this.ctr(["tasks", "kill", "-s", "SIGKILL", id], 10_000);
        }
        const deadline = Date.now() + 10_000;
        while (Date.now() < deadline && [...this.tasks().values()].some((s) => s !== "STOPPED")) {
          await sleep(100);
        }
        for (const id of this.tasks().keys()) this.ctr(["tasks", "delete", "--force", id], 10_000);
        for (const id of this.containers()) this.ctr(["containers", "delete", id], 10_000);
      } catch {
        // containerd is unwell: the kills below still end everything it started
      }
      const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
      await exited;
      clearTimeout(timer);
    }
    this.child = undefined;
    // Shims and ctr processes name our socket or root on their command lines.
    killPids(pidsMentioning(this.root));
    removeRoot(this.root);
  }
}
