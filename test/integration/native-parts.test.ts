/**
 * The project's native parts, as `scripts/setup.sh` and `npm run build:shim` build
 * them on this machine: the six addons in build/Release load and answer (the
 * driver would otherwise fall back to iproute2, Node's spawn and the host-local
 * binary), and the shim binary answers CNI VERSION. scripts/fresh-machine-check.sh
 * runs this file in a bare Debian root, where nothing was built before.
 */
import { spawnSync } from "node:child_process";
import { closeSync, mkdtempSync, openSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect } from "chai";
import { loadNativeAddon } from "../../src/common/native-addon.js";
import { spawnBackend } from "../../src/driver/chain/plugin-process.js";
import { readExchange } from "../../src/plumbing/netlink/rtnetlink-decode.js";
import { encodeGetLink } from "../../src/plumbing/netlink/rtnetlink-encode.js";
import { type NetlinkAddon, NetlinkSession } from "../../src/plumbing/netlink/session.js";
import { REPO_ROOT } from "../support/driver-harness.js";
import { requireCommand } from "../support/requirements.js";
import { ensureShimBuilt } from "../support/runtimes.js";
import { execShim } from "../support/shim-exec.js";

/** Where the build puts them; an env override would test something else, so none is honoured. */
const release = (name: string) => ({
  file: `build/Release/${name}.node`,
  envVar: "CNI_DRIVER_TEST_NO_OVERRIDE",
});

function loaded<T>(name: string): T {
  const r = loadNativeAddon<T>(release(name));
  if ("reason" in r) throw new Error(`${name}: ${r.reason}`);
  expect(r.path).to.equal(join(REPO_ROOT, "build/Release", `${name}.node`));
  return r.addon;
}

describe("native parts: the addons and the shim binary (integration)", function () {
  this.timeout(240_000);

  describe("the addons in build/Release", () => {
    before(function () {
      // What node-gyp needs; without it setup falls back, and says so, outside CI.
      requireCommand(this, "make", "build-essential");
      requireCommand(this, "g++", "build-essential");
      requireCommand(this, "python3", "python3");
    });

    it("cni_driver_netlink loads and answers RTM_GETLINK for lo", () => {
      const session = new NetlinkSession(loaded<NetlinkAddon>("cni_driver_netlink"));
      try {
        const out = readExchange(session.request(undefined, encodeGetLink(1, { name: "lo" })), 1);
        expect(out.error, "RTM_GETLINK lo").to.equal(undefined);
      } finally {
        session.close();
      }
    });

    it("cni_driver_spawn loads and is the driver's way of exec'ing plugins", () => {
      const addon = loaded<{ supported(): boolean }>("cni_driver_spawn");
      expect(addon.supported(), "pidfd_open").to.equal(true);
      // Throws, naming why, when the driver could not use it.
      const backend = spawnBackend("native");
      expect(backend.reason).to.contain(join(REPO_ROOT, "build/Release/cni_driver_spawn.node"));
    });

    it("cni_driver_flock loads, and a lock it holds keeps a second open of the file out", () => {
      const addon = loaded<{ flock(fd: number, op: number): boolean }>("cni_driver_flock");
      const dir = mkdtempSync(join(tmpdir(), "cni-native-parts-"));
      const first = openSync(join(dir, "lock"), "w");
      const second = openSync(join(dir, "lock"), "r");
      try {
        const LOCK_EX_NB = 2 | 4;
        const LOCK_UN = 8;
        expect(addon.flock(first, LOCK_EX_NB), "first").to.equal(true);
        expect(addon.flock(second, LOCK_EX_NB), "second, while held").to.equal(false);
        expect(addon.flock(first, LOCK_UN), "release").to.equal(true);
        expect(addon.flock(second, LOCK_EX_NB), "second, once released").to.equal(true);
      } finally {
        closeSync(first);
        closeSync(second);
        rmSync(dir, { recursive: true, force: true });
      }
    });

    it("cni_driver_flock watches a directory: the events name what changed, and its removal makes the watch untrusted", () => {
      const addon = loaded<{
        inotifyInit(): number;
        watchDir(fd: number, path: string): number;
        drainEvents(fd: number): Array<[number, string, boolean]>;
      }>("cni_driver_flock");
      const dir = mkdtempSync(join(tmpdir(), "cni-native-parts-"));
      const fd = addon.inotifyInit();
      try {
        const wd = addon.watchDir(fd, dir);
        expect(addon.drainEvents(fd), "nothing yet").to.deep.equal([]);
        closeSync(openSync(join(dir, "10.0.0.2"), "w"));
        rmSync(join(dir, "10.0.0.2"));
        expect(addon.drainEvents(fd)).to.deep.equal([
          [wd, "10.0.0.2", false],
          [wd, "10.0.0.2", false],
        ]);
        rmSync(dir, { recursive: true });
        const gone = addon.drainEvents(fd);
        expect(gone.length).to.be.greaterThan(0);
        expect(gone.every(([w, , untrusted]) => w === wd && untrusted)).to.equal(true);
      } finally {
        closeSync(fd);
        rmSync(dir, { recursive: true, force: true });
      }
    });

    it("cni_driver_memory loads, and gives back the pages of memory freed in the arenas", () => {
      loaded<{ trim(): boolean }>("cni_driver_memory");
      // In a process of its own: 40,000 small buffers (malloc'd, not mmap'd), freed, then trimmed.
      const script = `
        const addon = require(${JSON.stringify(join(REPO_ROOT, "build/Release/cni_driver_memory.node"))});
        const rss = () => Number(/VmRSS:\\s+(\\d+)/.exec(require("fs").readFileSync("/proc/self/status", "utf8"))[1]);
        let held = Array.from({ length: 40000 }, () => Buffer.alloc(1000, 1));
        held = null;
        globalThis.gc();
        const before = rss();
        const trimmed = addon.trim();
        console.log(JSON.stringify({ trimmed, before, after: rss() }));
      `;
      const r = spawnSync(process.execPath, ["--expose-gc", "-e", script], { encoding: "utf8" });
      expect(r.status, r.stderr).to.equal(0);
      const out = JSON.parse(r.stdout.trim()) as {
        trimmed: boolean;
        before: number;
        after: number;
      };
      expect(out.trimmed).to.equal(true);
      expect(out.after, `RSS ${out.before} kB before the trim`).to.be.lessThan(out.before);
    });
    it("cni_driver_nftables loads libnftables and writes a transaction whole, or nothing with nft's own error", function () {
      requireCommand(this, "nft", "nftables");
      const addon = loaded<{ available(): string | null }>("cni_driver_nftables");
      expect(addon.available()).to.equal(null);
      // In a network namespace of its own (unshare): the host's ruleset is never touched.
      const script = `
        const addon = require(${JSON.stringify(join(REPO_ROOT, "build/Release/cni_driver_nftables.node"))});
        const { execFileSync } = require("child_process");
        const list = () => execFileSync("nft", ["list", "ruleset"], { encoding: "utf8" });
        (async () => {
          await addon.run("add table inet t\\nadd set inet t s { type ipv4_addr; }\\nadd element inet t s { 10.0.0.1 }\\n");
          const first = list();
          let error = "";
          try {
            await addon.run("add element inet t s { 10.0.0.2 }\\nadd element inet t nosuch { 10.0.0.3 }\\n");
          } catch (e) { error = e.message; }
          console.log(JSON.stringify({ first, error, after: list() }));
        })();
      `;
      const r = spawnSync("unshare", ["--net", process.execPath, "-e", script], {
        encoding: "utf8",
      });
      expect(r.status, r.stderr).to.equal(0);
      const out = JSON.parse(r.stdout.trim()) as { first: string; error: string; after: string };
      expect(out.first).to.include("10.0.0.1");
      expect(out.error, out.error).to.include("nosuch");
      // The failed transaction left nothing: not even its first, valid, element.
      expect(out.after).not.to.include("10.0.0.2");
      expect(out.after).to.equal(out.first);
    });

    it("cni_driver_conntrack loads, dumps the connection tracking table and deletes from it", () => {
      loaded<{ list(): Promise<Buffer> }>("cni_driver_conntrack");
      // In a network namespace of its own (unshare): an empty table, the host's never touched.
      const script = `
        const addon = require(${JSON.stringify(join(REPO_ROOT, "build/Release/cni_driver_conntrack.node"))});
        (async () => {
          const listed = (await addon.list()).length;
          const removed = await addon.remove(6, Buffer.from([10, 0, 0, 1]), Buffer.from([10, 0, 0, 2]), 80);
          let error = "";
          try { addon.remove(1, Buffer.alloc(4), Buffer.alloc(4), 0); } catch (e) { error = e.name; }
          console.log(JSON.stringify({ listed, removed, error }));
        })();
      `;
      const r = spawnSync("unshare", ["--net", process.execPath, "-e", script], {
        encoding: "utf8",
      });
      expect(r.status, r.stderr).to.equal(0);
      expect(JSON.parse(r.stdout.trim())).to.deep.equal({
        listed: 0,
        removed: 0,
        error: "TypeError",
      });
    });
  });

  describe("the shim binary", () => {
    before(function () {
      requireCommand(this, "cc", "build-essential");
      requireCommand(this, "protoc-c", "protobuf-c-compiler");
    });

    it("`npm run build:shim` builds dist/bin/cni-driver-shim, and it answers CNI VERSION", async () => {
      const shim = ensureShimBuilt();
      const r = await execShim(shim, { CNI_COMMAND: "VERSION" }, '{"cniVersion":"1.1.0"}');
      expect(r.status, r.stderr).to.equal(0);
      expect(r.json?.cniVersion).to.equal("1.1.0");
      expect(r.json?.supportedVersions).to.include.members(["0.4.0", "1.0.0", "1.1.0"]);
    });
  });
});
