/**
 * A socket the shim may not open: the driver's socket is root's, mode 0600, and
 * the shim runs as nobody (uid/gid 65534, no supplementary groups). connect(2)
 * fails with EACCES. That is no driver away that time would bring back: every
 * verb answers at once, code 5 (I/O failure), saying permission denied and
 * naming the socket. DEL fails too, and queues nothing: a queued DEL would be a
 * silent success while the driver never hears of it, and a failed one is retried
 * by the runtime while the operator sees why.
 *
 * "At once": the config's timeoutSeconds is 600, and the shim is killed long
 * before that; an answer at all means it did not wait.
 */
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect } from "chai";
import { requireRoot } from "../support/requirements.js";
import { ensureShimBuilt } from "../support/runtimes.js";
import { execShim } from "../support/shim-exec.js";
import { Tripwire } from "../support/tripwire.js";

const NOBODY = 65534;

describe("cni-driver-shim: a socket it may not open (integration)", function () {
  this.timeout(60_000);
  let shimPath = "";
  let dir = "";
  let stateDir = "";
  let socket: Tripwire;

  before(async function () {
    this.timeout(300_000);
    requireRoot(this);
    shimPath = ensureShimBuilt();
    dir = mkdtempSync(join(tmpdir(), "cni-driver-shim-eacces-"));
    chmodSync(dir, 0o755); // nobody may reach the socket's directory, but not open the socket
    socket = new Tripwire(join(dir, "driver.sock"));
    await socket.listen();
    chmodSync(socket.path, 0o600);
    // Writable by nobody: a shim that queued the DEL would leave its record here.
    stateDir = join(dir, "state");
    mkdirSync(stateDir);
    chmodSync(stateDir, 0o777);
  });

  after(async () => {
    await socket?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const conf = (cniVersion = "1.1.0") =>
    JSON.stringify({
      cniVersion,
      name: "pods",
      type: "cni-driver-shim",
      socket: socket.path,
      stateDir,
      timeoutSeconds: 600,
    });
  const env = (command: string): Record<string, string> => ({
    CNI_COMMAND: command,
    CNI_CONTAINERID: "eacces1",
    CNI_NETNS: "/run/netns/cni-driver-eacces-none",
    CNI_IFNAME: "eth0",
    CNI_PATH: "/opt/cni/bin",
    CNI_ARGS: "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=p",
  });

  it("the socket is root's, mode 0600, and the shim runs as nobody", () => {
    const st = statSync(socket.path);
    expect(st.isSocket()).to.equal(true);
    expect(st.uid).to.equal(0);
    expect(st.mode & 0o777).to.equal(0o600);
  });

  for (const command of ["ADD", "CHECK", "DEL", "STATUS", "GC"]) {
    it(`${command}: code 5 at once, permission denied, naming the socket${command === "DEL" ? "; nothing queued" : ""}`, async () => {
      const before = socket.connections;
      const r = await execShim(shimPath, env(command), conf(), 30_000, {
        uid: NOBODY,
        gid: NOBODY,
      });
      expect(r.status, `killed before it answered: ${r.stdout}${r.stderr}`).to.not.equal(null);
      expect(r.status, `exit status; stdout ${r.stdout} stderr ${r.stderr}`).to.equal(1);
      expect(r.json, `stdout is the CNI error JSON: ${r.stdout}`).to.be.an("object");
      expect(r.json?.code, r.stdout).to.equal(5);
      const msg = String(r.json?.msg);
      expect(msg).to.match(/permission denied/i);
      expect(msg).to.contain(socket.path);
      expect(r.stderr).to.equal("");
      expect(socket.connections - before, "connections accepted").to.equal(0);
      expect(readdirSync(stateDir, { recursive: true }), "files in the state dir").to.deep.equal(
        [],
      );
    });
  }
});
