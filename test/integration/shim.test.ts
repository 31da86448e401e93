/**
 * cni-driver-shim as runtimes see it: the built static executable
 * (dist/bin/cni-driver-shim, rebuilt when older than its sources), exec'd with a
 * CNI environment and a stdin config, its stdout and exit code read back.
 *
 * Without a driver: an unreachable or bogus socket; every bad input (and
 * VERSION) is a vector of test/vectors/shim-validation.json, run through this
 * binary by test/integration/shim-validation-vectors.test.ts. With a real driver (test/support/driver-harness.ts) in real
 * network namespaces: ADD, CHECK, DEL, STATUS and GC at every result version, and
 * DEL while the driver is stopped, replayed when it starts again.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect } from "chai";
import { DELETION_QUEUE_DIR, parseDeletionRecord } from "../../src/wire/deletion-record.js";
import { DriverHarness } from "../support/driver-harness.js";
import { createNetns, deleteNetns, listHostLinks } from "../support/netns.js";
import { requireReferencePlugins, requireRoot } from "../support/requirements.js";
import { ensureShimBuilt } from "../support/runtimes.js";
import { execShim, type ShimRun } from "../support/shim-exec.js";
import { Tripwire } from "../support/tripwire.js";

type Run = ShimRun;

let shimPath = "";

/**
 * Execs the shim with exactly `env` (plus PATH): no NODE_OPTIONS, no
 * NODE_EXTRA_CA_CERTS, nothing of the test runner's. Bounded by `timeoutMs`.
 */
function runShim(
  env: Record<string, string | undefined>,
  stdin: string | Buffer,
  timeoutMs = 20_000,
): Promise<Run> {
  const clean: Record<string, string> = {
    PATH: process.env.PATH ?? "/usr/sbin:/usr/bin:/sbin:/bin",
  };
  for (const [k, v] of Object.entries(env)) if (v !== undefined) clean[k] = v;
  return execShim(shimPath, clean, stdin, timeoutMs);
}

/** Asserts a CNI error answer: exit 1, the code, a message matching `msg`. */
function expectCniError(r: Run, code: number, msg?: RegExp): void {
  expect(r.status, `exit status; stdout ${r.stdout} stderr ${r.stderr}`).to.equal(1);
  expect(r.json, `stdout is the CNI error JSON: ${r.stdout}`).to.be.an("object");
  expect(r.json?.code, r.stdout).to.equal(code);
  if (msg) expect(String(r.json?.msg), r.stdout).to.match(msg);
}

/** Asserts a silent success: exit 0 and nothing on stdout (DEL, CHECK, STATUS, GC). */
function expectSilentSuccess(r: Run): void {
  expect(r.status, `exit status; stdout ${r.stdout} stderr ${r.stderr}`).to.equal(0);
  expect(r.stdout).to.equal("");
}

function filesUnder(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { recursive: true }).map(String);
}

describe("cni-driver-shim: the built executable (integration)", function () {
  this.timeout(30_000);
  let dir: string;

  before(function () {
    this.timeout(300_000);
    shimPath = ensureShimBuilt();
    dir = mkdtempSync(join(tmpdir(), "cni-driver-shim-test-"));
  });

  after(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  describe("without a driver", () => {
    let tripwire: Tripwire;
    let stateDir: string;
    const conf = (extra: Record<string, unknown> = {}) =>
      JSON.stringify({
        cniVersion: "1.1.0",
        name: "pods",
        type: "cni-driver-shim",
        socket: tripwire.path,
        stateDir,
        timeoutSeconds: 1,
        ...extra,
      });
    const env = (command: string, overrides: Record<string, string | undefined> = {}) => ({
      CNI_COMMAND: command,
      CNI_CONTAINERID: "c0ffee",
      CNI_NETNS: "/run/netns/does-not-exist",
      CNI_IFNAME: "eth0",
      CNI_PATH: "/opt/cni/bin",
      CNI_ARGS: "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=p",
      ...overrides,
    });

    before(async () => {
      tripwire = new Tripwire(join(dir, "tripwire.sock"));
      await tripwire.listen();
      stateDir = join(dir, "state-no-driver");
    });

    beforeEach(() => {
      if (tripwire) tripwire.connections = 0;
    });

    after(async () => {
      await tripwire?.close();
    });

    /** Bad input changes nothing: no call reached the socket, nothing in the state dir. */
    async function expectNothingChanged(): Promise<void> {
      await new Promise((r) => setTimeout(r, 20));
      expect(tripwire.connections, "calls that reached the driver socket").to.equal(0);
      expect(filesUnder(stateDir), "files in the state dir").to.deep.equal([]);
    }

    describe("the environment", () => {
      it("DEL accepts a missing CNI_NETNS (containerd sends none once the sandbox is gone)", async () => {
        // Not an environment error: it gets as far as the socket, where the tripwire
        // hangs up, which is a driver away (code 11): the deletion is queued.
        const state = join(dir, "state-del-no-netns");
        const r = await runShim(env("DEL", { CNI_NETNS: "" }), conf({ stateDir: state }));
        expectSilentSuccess(r);
        expect(tripwire.connections).to.equal(1);
        const [record] = readdirSync(join(state, DELETION_QUEUE_DIR));
        const path = join(state, DELETION_QUEUE_DIR, record as string);
        expect(parseDeletionRecord(path, readFileSync(path, "utf8"))?.netns).to.equal("");
      });
    });

    describe("bad stdin", () => {
      it("prints the error in the config's version", async () => {
        const r = await runShim(env("CHECK"), conf({ cniVersion: "0.3.1" }));
        expectCniError(r, 1);
        expect(r.json?.cniVersion).to.equal("0.3.1");
        await expectNothingChanged();
      });
    });

    describe("an unreachable driver", () => {
      it("ADD against a socket path that is a regular file: code 11 after timeoutSeconds, naming the socket", async () => {
        const file = join(dir, "not-a-socket");
        writeFileSync(file, "");
        const r = await runShim(env("ADD"), conf({ socket: file, timeoutSeconds: 1 }));
        expectCniError(r, 11, new RegExp(file));
        expect(String(r.json?.msg)).to.match(/gave up after \d+ attempts? in 1 s\)$/);
        // Not before its deadline: a loaded machine can only make it later.
        expect(r.ms, "milliseconds").to.be.at.least(900);
      });

      it("CHECK against a missing socket: code 11 after timeoutSeconds", async () => {
        const sock = join(dir, "missing.sock");
        const r = await runShim(env("CHECK"), conf({ socket: sock, timeoutSeconds: 0.5 }));
        expectCniError(r, 11, new RegExp(sock));
        expect(r.ms, "milliseconds").to.be.at.least(400);
      });

      it("STATUS: code 50 at once, naming the socket", async () => {
        const sock = join(dir, "missing.sock");
        // An hour-long timeout: answered within the test's own time means it did not wait.
        const r = await runShim(env("STATUS"), conf({ socket: sock, timeoutSeconds: 3600 }));
        expectCniError(r, 50, new RegExp(sock));
      });

      it("GC: code 11, naming the socket", async () => {
        const sock = join(dir, "missing.sock");
        const r = await runShim(env("GC"), conf({ socket: sock }));
        expectCniError(r, 11, new RegExp(sock));
      });

      it("DEL: exit 0 at once, and the teardown queued durably in stateDir", async () => {
        const state = join(dir, "state-queued");
        const r = await runShim(
          env("DEL", { CNI_CONTAINERID: "queued1", CNI_IFNAME: "net1" }),
          conf({
            socket: join(dir, "missing.sock"),
            stateDir: state,
            network: "blue",
            cniVersion: "0.4.0",
            // An hour-long timeout: answered within the test's own time means it did not wait.
            timeoutSeconds: 3600,
          }),
        );
        const after = Date.now();
        expectSilentSuccess(r);
        const queue = join(state, DELETION_QUEUE_DIR);
        expect(readdirSync(queue)).to.deep.equal(["blue-queued1-net1.json"]);
        const path = join(queue, "blue-queued1-net1.json");
        const record = parseDeletionRecord(path, readFileSync(path, "utf8"));
        expect(record).to.deep.include({
          kind: "cniDriverDeletionV1",
          network: "blue",
          containerId: "queued1",
          ifName: "net1",
          netns: "/run/netns/does-not-exist",
          cniVersion: "0.4.0",
        });
        expect(record?.cniArgs).to.deep.equal([
          ["IgnoreUnknown", "1"],
          ["K8S_POD_NAMESPACE", "default"],
          ["K8S_POD_NAME", "p"],
        ]);
        expect(record?.queuedAtUnixMs ?? 0, "queued during the DEL").to.be.within(
          after - r.ms - 1,
          after,
        );
      });

      it("DEL fails (code 5) when it can neither reach the driver nor queue the deletion", async () => {
        const file = join(dir, "a-file");
        writeFileSync(file, "");
        const r = await runShim(
          env("DEL"),
          conf({ socket: join(dir, "missing.sock"), stateDir: file }),
        );
        expectCniError(r, 5, /queueing the deletion/);
      });

      it("never writes to stdout or stderr beyond the answer, and logs only to logFile", async () => {
        const logFile = join(dir, "shim.log");
        const r = await runShim(
          env("STATUS"),
          conf({ socket: join(dir, "missing.sock"), logFile }),
        );
        expectCniError(r, 50);
        expect(r.stderr).to.equal("");
        const lines = readFileSync(logFile, "utf8").trim().split("\n");
        expect(lines).to.have.length(1);
        expect(JSON.parse(lines[0] as string)).to.deep.include({
          event: "error",
          command: "STATUS",
          code: 50,
        });
      });

      it("ignores NODE_OPTIONS from the runtime's environment", async () => {
        const r = await runShim(
          { CNI_COMMAND: "VERSION", NODE_OPTIONS: "--require /nonexistent.js" },
          "",
        );
        expect(r.status, r.stderr).to.equal(0);
        expect(r.json?.cniVersion).to.equal("1.1.0");
      });
    });
  });

  describe("with a driver", () => {
    let h: DriverHarness;

    before(async function () {
      requireRoot(this);
      requireReferencePlugins(this, "host-local");
      h = new DriverHarness({ subnetOctet: 51 });
      await h.writeDefaultConfig();
      await h.start();
    });

    after(async () => {
      await h?.cleanup();
    });

    const conf = (cniVersion: string, extra: Record<string, unknown> = {}) =>
      JSON.stringify({
        cniVersion,
        name: "shim-net",
        type: "cni-driver-shim",
        socket: h.socket,
        stateDir: h.stateDir,
        ...extra,
      });
    const env = (
      command: string,
      i: number | string,
      overrides: Record<string, string | undefined> = {},
    ) => ({
      CNI_COMMAND: command,
      CNI_CONTAINERID: h.containerId(i),
      CNI_NETNS: h.netnsPath(i),
      CNI_IFNAME: "eth0",
      CNI_PATH: "/opt/cni/bin",
      CNI_ARGS: `IgnoreUnknown=1;K8S_POD_NAMESPACE=${h.podNamespace};K8S_POD_NAME=${h.podName(i)};K8S_POD_INFRA_CONTAINER_ID=${h.containerId(i)}`,
      ...overrides,
    });

    /** The IPv4 addresses (CIDR) of `ifName` in the netns, [] when it does not exist. */
    function addressesIn(netns: string, ifName = "eth0"): string[] {
      const r = spawnSync("ip", ["-n", netns, "-j", "addr", "show", "dev", ifName], {
        encoding: "utf8",
      });
      if (r.status !== 0) return [];
      const links = JSON.parse(r.stdout) as Array<{
        addr_info: Array<{ family: string; local: string; prefixlen: number }>;
      }>;
      return (links[0]?.addr_info ?? [])
        .filter((a) => a.family === "inet")
        .map((a) => `${a.local}/${a.prefixlen}`);
    }

    function linkExistsIn(netns: string, ifName = "eth0"): boolean {
      return (
        spawnSync("ip", ["-n", netns, "link", "show", "dev", ifName], { stdio: "ignore" })
          .status === 0
      );
    }

    for (const [n, version] of (["0.3.1", "0.4.0", "1.0.0", "1.1.0"] as const).entries()) {
      it(`ADD prints the result in exactly ${version}; CHECK and DEL print nothing`, async () => {
        const i = `v${n}`;
        createNetns(h.netnsName(i));
        try {
          const add = await runShim(env("ADD", i), conf(version));
          expect(add.status, add.stdout + add.stderr).to.equal(0);
          expect(add.stderr).to.equal("");
          const result = add.json as {
            cniVersion: string;
            interfaces: Array<{ name: string; sandbox?: string; mac?: string }>;
            ips: Array<{ address: string; version?: string; interface?: number; gateway?: string }>;
          };
          expect(result.cniVersion).to.equal(version);
          const ip = result.ips[0];
          expect(ip?.address).to.match(/^10\.244\.51\.\d+\/24$/);
          if (version.startsWith("0.")) expect(ip?.version).to.equal("4");
          else expect(ip).not.to.have.property("version");
          expect(result.interfaces[ip?.interface ?? -1]).to.deep.include({
            name: "eth0",
            sandbox: h.netnsPath(i),
          });
          expect(addressesIn(h.netnsName(i))).to.deep.equal([ip?.address]);
          expect(listHostLinks(h.hostVeth(i))).to.deep.equal([h.hostVeth(i)]);
          expect(h.leases()).to.include(ip?.address.split("/")[0]);

          if (version !== "0.3.1")
            expectSilentSuccess(await runShim(env("CHECK", i), conf(version)));

          expectSilentSuccess(await runShim(env("DEL", i), conf(version)));
          expect(linkExistsIn(h.netnsName(i)), "eth0 after DEL").to.equal(false);
          expect(listHostLinks(h.hostVeth(i)), "host veth after DEL").to.deep.equal([]);
          expect(h.leases()).not.to.include(ip?.address.split("/")[0]);
          // DEL is idempotent.
          expectSilentSuccess(await runShim(env("DEL", i), conf(version)));
        } finally {
          await h.client.tearDownPod(h.podRequest(i), { timeoutMs: 10_000 });
          deleteNetns(h.netnsName(i));
        }
      });
    }

    it("passes the driver's CNI errors through unchanged", async () => {
      createNetns(h.netnsName("err"));
      try {
        const r = await runShim(env("ADD", "err"), conf("1.0.0", { network: "no-such-network" }));
        expectCniError(r, 7, /^no network named "no-such-network" in the driver's configuration/);
        expect(r.json?.cniVersion).to.equal("1.0.0");
        // CHECK of an attachment the driver never made: its own error, not the shim's.
        const check = await runShim(env("CHECK", "err"), conf("1.0.0"));
        expect(check.status).to.equal(1);
        expect(check.json?.code).to.not.equal(11);
      } finally {
        deleteNetns(h.netnsName("err"));
      }
    });

    it("STATUS exits 0 with nothing on stdout while the driver is ready", async () => {
      expectSilentSuccess(await runShim(env("STATUS", 0), conf("1.1.0")));
    });

    it("GC removes the attachments that are not in the valid set", async () => {
      createNetns(h.netnsName("gc1"));
      createNetns(h.netnsName("gc2"));
      try {
        for (const i of ["gc1", "gc2"]) {
          const add = await runShim(env("ADD", i), conf("1.1.0"));
          expect(add.status, add.stdout).to.equal(0);
        }
        expect(h.leases()).to.have.length(2);
        const gc = await runShim(
          env("GC", 0),
          conf("1.1.0", {
            "cni.dev/valid-attachments": [{ containerID: h.containerId("gc1"), ifname: "eth0" }],
          }),
        );
        expectSilentSuccess(gc);
        expect(h.leases()).to.have.length(1);
        expect(linkExistsIn(h.netnsName("gc1"))).to.equal(true);
        expect(listHostLinks(h.hostVeth("gc2"))).to.deep.equal([]);
      } finally {
        for (const i of ["gc1", "gc2"]) {
          await h.client.tearDownPod(h.podRequest(i), { timeoutMs: 10_000 });
          deleteNetns(h.netnsName(i));
        }
      }
    });

    it("DEL while the driver is stopped: exit 0 without waiting, eth0 gone, queued; replayed when the driver starts", async function () {
      this.timeout(60_000);
      const i = "queued";
      createNetns(h.netnsName(i));
      try {
        const add = await runShim(env("ADD", i), conf("1.0.0"));
        expect(add.status, add.stdout).to.equal(0);
        const address = (
          (add.json as { ips: Array<{ address: string }> }).ips[0]?.address ?? ""
        ).split("/")[0];
        expect(h.leases()).to.include(address);

        await h.stop();
        const status = await runShim(env("STATUS", i), conf("1.1.0"));
        expectCniError(status, 50, new RegExp(h.socket));

        // An hour-long timeout: answered within the test's own time means it did not wait.
        const del = await runShim(env("DEL", i), conf("1.0.0", { timeoutSeconds: 3600 }));
        expectSilentSuccess(del);
        expect(linkExistsIn(h.netnsName(i)), "eth0 removed by the shim itself").to.equal(false);
        expect(listHostLinks(h.hostVeth(i)), "the host veth went with it").to.deep.equal([]);
        const queue = join(h.stateDir, DELETION_QUEUE_DIR);
        const records = readdirSync(queue).filter((f) => f.endsWith(".json"));
        expect(records).to.deep.equal([`_default-${h.containerId(i)}-eth0.json`]);
        expect(h.leases(), "the lease waits for the driver").to.include(address);

        await h.start();
        expect(h.leases(), "the lease after the replay").not.to.include(address);
        expect(h.cacheFiles().filter((f) => f.includes(h.containerId(i)))).to.deep.equal([]);
        expect(listHostLinks(h.hostVeth(i))).to.deep.equal([]);
        expect(
          readdirSync(queue).filter((f) => f.endsWith(".json")),
          "records after the replay",
        ).to.deep.equal([]);
      } finally {
        if (!h.pid) await h.start().catch(() => {});
        await h.client.tearDownPod(h.podRequest(i), { timeoutMs: 10_000 }).catch(() => {});
        deleteNetns(h.netnsName(i));
      }
    });

    it("ADD waits for a driver that comes back within timeoutSeconds", async function () {
      this.timeout(60_000);
      const i = "late";
      createNetns(h.netnsName(i));
      try {
        await h.stop();
        const pending = runShim(env("ADD", i), conf("1.0.0", { timeoutSeconds: 30 }), 40_000);
        await new Promise((r) => setTimeout(r, 500));
        await h.start();
        const add = await pending;
        expect(add.status, add.stdout).to.equal(0);
        expect(add.json?.cniVersion).to.equal("1.0.0");
        expect(addressesIn(h.netnsName(i))).to.have.length(1);
      } finally {
        if (!h.pid) await h.start().catch(() => {});
        await h.client.tearDownPod(h.podRequest(i), { timeoutMs: 10_000 }).catch(() => {});
        deleteNetns(h.netnsName(i));
      }
    });
  });
});
