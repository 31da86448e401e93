/**
 * The node socket: created 0600 in a directory made 0700 when missing (an
 * existing one keeps its mode); a stale socket file is replaced; a socket a live
 * driver serves, or that a process holds without accepting, is never taken over.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import {
  chmodSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { expect } from "chai";
import { prepareSocketPath } from "../../src/driver/rpc/server.js";
import { DriverHarness, REPO_ROOT } from "../support/driver-harness.js";
import { requireReferencePlugins, requireRoot } from "../support/requirements.js";
import { until } from "../support/until.js";

describe("cni-driver serve: the node socket (integration)", function () {
  this.timeout(30_000);
  let h: DriverHarness;

  before(async function () {
    requireRoot(this);
    requireReferencePlugins(this, "host-local");
    h = new DriverHarness({ subnetOctet: 46 });
    await h.writeDefaultConfig();
    await h.start();
  });

  after(async () => {
    await h?.cleanup();
  });

  it("is a socket of mode 0600 in a directory it made 0700", () => {
    const st = statSync(h.socket);
    expect(st.isSocket()).to.equal(true);
    expect((st.mode & 0o777).toString(8)).to.equal("600");
    expect((statSync(dirname(h.socket)).mode & 0o7777).toString(8)).to.equal("700");
  });

  it("a second driver on the same socket refuses to start; the first keeps serving", () => {
    const { node, args, env } = h.serveCommand({
      stateDir: join(h.root, "state-2"),
      cacheDir: join(h.root, "cache-2"),
    });
    const second = spawnSync(node, args, {
      cwd: REPO_ROOT,
      env,
      encoding: "utf8",
      timeout: 20_000,
    });
    expect(second.status, second.stderr).to.equal(1);
    expect(second.stderr).to.contain(
      `another process is already serving on ${h.socket}; refusing to start`,
    );
    expect(statSync(h.socket).isSocket()).to.equal(true);
  });

  it("refuses a --socket path longer than a unix socket's (107 bytes), naming it (exit 2)", () => {
    const { node, args, env } = h.serveCommand();
    const long = join(h.root, "s".repeat(120));
    args[args.indexOf("--socket") + 1] = long;
    const r = spawnSync(node, args, { cwd: REPO_ROOT, env, encoding: "utf8", timeout: 20_000 });
    expect(r.status, r.stderr).to.equal(2);
    expect(r.stderr).to.contain(
      `--socket: ${long} is ${Buffer.byteLength(long)} bytes long; a unix socket's path holds at most 107`,
    );
  });

  it("replaces the stale socket file a killed driver left", async () => {
    await h.kill();
    expect(statSync(h.socket).isSocket(), "stale socket file").to.equal(true);
    const stale = statSync(h.socket).ctimeMs;
    await h.start(); // binding over the stale file would fail with EADDRINUSE
    expect(statSync(h.socket).ctimeMs).to.be.greaterThan(stale);
    expect((await h.client.cniStatus()).ready).to.equal(true);
  });
});

describe("driver/server prepareSocketPath", function () {
  this.timeout(20_000);
  let dir: string;
  let holder: ChildProcess | undefined;
  const clients: net.Socket[] = [];

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "cni-driver-socket-"));
  });

  afterEach(async () => {
    for (const c of clients.splice(0)) c.destroy();
    if (holder?.pid && holder.exitCode === null) {
      const exited = new Promise((r) => holder?.once("exit", r));
      process.kill(holder.pid, "SIGKILL");
      await exited;
    }
    holder = undefined;
    rmSync(dir, { recursive: true, force: true });
  });

  it("leaves the mode of a shared directory alone (one with other files, like /run, or sticky, like /tmp)", async () => {
    const shared = join(dir, "shared");
    mkdirSync(shared);
    chmodSync(shared, 0o755);
    writeFileSync(join(shared, "other.pid"), "1");
    await prepareSocketPath(join(shared, "driver.sock"));
    expect((statSync(shared).mode & 0o7777).toString(8)).to.equal("755");
    const sticky = join(dir, "sticky");
    mkdirSync(sticky);
    chmodSync(sticky, 0o1777);
    await prepareSocketPath(join(sticky, "driver.sock"));
    expect((statSync(sticky).mode & 0o7777).toString(8)).to.equal("1777");
  });

  it("makes a directory of its own 0700 though it exists (the hostPath kubelet creates 0755)", async () => {
    const own = join(dir, "run-cni-driver");
    mkdirSync(own);
    chmodSync(own, 0o755);
    await prepareSocketPath(join(own, "driver.sock"));
    expect((statSync(own).mode & 0o7777).toString(8)).to.equal("700");
  });

  it("does not replace a socket whose holder does not take connections (backlog full): it names why", async () => {
    const path = join(dir, "held.sock");
    // A listener that stops itself: the kernel queues connections up to the backlog, then refuses with EAGAIN.
    holder = spawn(
      process.execPath,
      [
        "-e",
        `require("node:net").createServer().listen({ path: ${JSON.stringify(path)}, backlog: 1 }, () => process.kill(process.pid, "SIGSTOP"))`,
      ],
      { stdio: "ignore" },
    );
    await until(() => {
      try {
        return statSync(path).isSocket() && readState(holder?.pid) === "T";
      } catch {
        return false;
      }
    }, "the listener to stop itself");
    let refused = "";
    for (let i = 0; i < 50 && !refused; i++) {
      refused = await new Promise<string>((resolve) => {
        const c = net.createConnection({ path });
        clients.push(c);
        c.once("connect", () => resolve(""));
        c.once("error", (err: NodeJS.ErrnoException) => resolve(err.code ?? "error"));
      });
    }
    expect(refused, "a connect refused once the backlog is full").to.equal("EAGAIN");

    const err = await prepareSocketPath(path).then(
      () => undefined,
      (e: Error) => e,
    );
    expect(err?.message).to.equal(
      `a process holds ${path} but did not take a connection (dial ${path}: EAGAIN); refusing to replace it`,
    );
    expect(statSync(path).isSocket(), "left in place").to.equal(true);
  });
});

/** The state letter of /proc/<pid>/stat ("T" once stopped). */
function readState(pid: number | undefined): string {
  if (!pid) return "";
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
}
