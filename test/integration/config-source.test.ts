/**
 * The ConfigSource against a real kubelet-style ConfigMap volume in a temp dir,
 * with the Debian reference plugins as the bin dir. No root needed.
 */

import { existsSync } from "node:fs";
import { chmod, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { expect } from "chai";
import pino from "pino";
import type { JsonObject } from "../../src/common/json.js";
import {
  type ConfigError,
  ConfigSource,
  pluginFinder,
  readConfigDir,
} from "../../src/driver/config/config-source.js";
import type { DriverConfig } from "../../src/driver/config/network-config.js";
import { ConfigMapDir } from "../support/configmap-dir.js";

const CNI_BIN = "/usr/lib/cni";

const ptpList = (mtu: number, extra: JsonObject[] = []): string =>
  JSON.stringify({
    cniVersion: "1.0.0",
    name: "pods",
    plugins: [
      { type: "ptp", mtu, ipam: { type: "host-local", ranges: [[{ subnet: "10.244.0.0/24" }]] } },
      { type: "portmap", capabilities: { portMappings: true } },
      ...extra,
    ],
  });

const mtuOf = (cfg: DriverConfig | undefined): unknown =>
  cfg?.networks.get("pods")?.plugins[0]?.raw.mtu;

/** Polls every 20 ms until `ok()` holds; returns the ms it took, fails after `maxMs` (a hang guard). */
async function waitFor(ok: () => boolean, what: string, maxMs = 30_000): Promise<number> {
  const t0 = performance.now();
  while (!ok()) {
    if (performance.now() - t0 > maxMs)
      expect.fail(`timed out after ${maxMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
  return performance.now() - t0;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A pino logger whose lines the test can read. */
function captureLogger(): { logger: pino.Logger; lines: () => JsonObject[] } {
  const out: string[] = [];
  const stream = new Writable({
    write(chunk, _enc, cb) {
      out.push(String(chunk));
      cb();
    },
  });
  const logger = pino({ level: "debug" }, stream);
  return {
    logger,
    lines: () =>
      out
        .join("")
        .split("\n")
        .filter(Boolean)
        .map((l) => JSON.parse(l) as JsonObject),
  };
}

describe("driver/config-source ConfigSource (ConfigMap volume, chokidar)", function () {
  this.timeout(60_000);

  let vol: ConfigMapDir;
  const sources: ConfigSource[] = [];

  before(() => {
    if (!existsSync(join(CNI_BIN, "host-local")) || !existsSync(join(CNI_BIN, "portmap"))) {
      expect.fail(
        `${CNI_BIN}/host-local and ${CNI_BIN}/portmap are missing: install the Debian package containernetworking-plugins`,
      );
    }
  });

  beforeEach(async () => {
    vol = await ConfigMapDir.create();
  });

  afterEach(async () => {
    for (const s of sources.splice(0)) await s.close();
    await vol.remove();
  });

  function source(extra: Partial<ConstructorParameters<typeof ConfigSource>[0]> = {}) {
    const s = new ConfigSource({ dir: vol.dir, binDirs: [CNI_BIN], ...extra });
    sources.push(s);
    return s;
  }

  it("starts from a good volume: generation 1, no error", async () => {
    await vol.write({
      "10-pods.conflist": ptpList(1500),
      "driver.json": '{"defaultNetwork":"pods"}',
    });
    const s = source();
    await s.start();
    const cfg = s.current();
    expect(cfg?.generation).to.equal(1);
    expect(cfg?.defaultNetwork).to.equal("pods");
    expect(cfg?.source).to.equal(vol.dir);
    expect(mtuOf(cfg)).to.equal(1500);
    expect(s.lastError()).to.equal(undefined);
    expect([s.reloads, s.reloadErrors]).to.deep.equal([1, 0]);
  });

  it("sees kubelet's ..data swap through the watcher within 1 s", async () => {
    await vol.write({ "10-pods.conflist": ptpList(1500) });
    const s = source();
    const reloads: DriverConfig[] = [];
    s.on("reload", (cfg) => reloads.push(cfg));
    await s.start();
    const before = s.current();

    expect(await vol.write({ "10-pods.conflist": ptpList(1400) })).to.equal(true);
    await waitFor(() => mtuOf(s.current()) === 1400, "MTU 1400");
    expect(s.current()?.generation).to.equal(2);
    expect(s.current()?.contentHash).to.not.equal(before?.contentHash);
    expect(reloads.map((c) => c.generation)).to.deep.equal([1, 2]);
    // The config in use before the swap is a separate object, untouched.
    expect(mtuOf(before)).to.equal(1500);
  });

  it("keeps the last good config on invalid JSON, then a good swap clears the error", async () => {
    const log = captureLogger();
    await vol.write({ "10-pods.conflist": ptpList(1500) });
    const s = source({ logger: log.logger });
    const errors: ConfigError[] = [];
    s.on("error", (e) => errors.push(e));
    await s.start();

    await vol.write({ "10-pods.conflist": '{"cniVersion": "1.0.0", "name": "pods", ' });
    await waitFor(() => s.lastError() !== undefined, "the error");
    expect(s.lastError()?.message).to.match(/^10-pods\.conflist: /);
    expect(s.lastError()?.source).to.equal(vol.dir);
    expect(s.lastError()?.at).to.be.instanceOf(Date);
    expect(s.current()?.generation).to.equal(1);
    expect(mtuOf(s.current())).to.equal(1500);
    expect(s.reloadErrors).to.equal(1);
    expect(errors).to.have.length(1);
    const logged = log.lines().find((l) => String(l.msg).includes("rejected"));
    expect(String(logged?.msg)).to.include("10-pods.conflist");
    expect(logged?.code).to.equal(6);

    await vol.write({ "10-pods.conflist": ptpList(9000) });
    await waitFor(() => mtuOf(s.current()) === 9000, "MTU 9000");
    expect(s.lastError()).to.equal(undefined);
    expect(s.current()?.generation).to.equal(2);
  });

  it("rejects a swap to an unknown plugin type, naming the plugin and the bin dir", async () => {
    await vol.write({ "10-pods.conflist": ptpList(1500) });
    const s = source();
    await s.start();

    await vol.write({ "10-pods.conflist": ptpList(1400, [{ type: "portmapx" }]) });
    await waitFor(() => s.lastError() !== undefined, "the error");
    expect(s.lastError()?.message).to.equal(
      `10-pods.conflist: plugins[2] ("portmapx"): no such plugin in ${CNI_BIN}`,
    );
    expect(mtuOf(s.current())).to.equal(1500);
  });

  it("starts from a bad volume with no config and the error, and recovers on a fix", async () => {
    await vol.write({ "README.md": "no networks here" });
    const s = source();
    await s.start();
    expect(s.current()).to.equal(undefined);
    expect(s.lastError()?.message).to.include("no network configured");

    await vol.write({ "10-pods.conflist": ptpList(1500) });
    await waitFor(() => s.current() !== undefined, "the first good config");
    expect(s.current()?.generation).to.equal(1);
    expect(s.lastError()).to.equal(undefined);
  });

  it("records a missing config dir as an error instead of throwing", async () => {
    const s = new ConfigSource({ dir: join(vol.dir, "absent"), binDirs: [CNI_BIN] });
    sources.push(s);
    await s.start();
    expect(s.current()).to.equal(undefined);
    expect(s.lastError()?.message).to.include("cannot read config dir");
  });

  it("stops watching on close(): a later swap changes nothing", async () => {
    await vol.write({ "10-pods.conflist": ptpList(1500) });
    const s = source();
    await s.start();
    await s.close();

    await vol.write({ "10-pods.conflist": ptpList(1400) });
    await sleep(400);
    expect(mtuOf(s.current())).to.equal(1500);
    expect(s.reloads).to.equal(1);
  });

  it("follows a key added and a key removed", async () => {
    const other = JSON.stringify({
      cniVersion: "1.0.0",
      name: "other",
      plugins: [{ type: "portmap" }],
    });
    await vol.write({ "10-pods.conflist": ptpList(1500) });
    const s = source();
    await s.start();

    await vol.write({ "10-pods.conflist": ptpList(1500), "20-other.conflist": other });
    await waitFor(() => s.current()?.networks.has("other") === true, "network other");
    await vol.write({ "20-other.conflist": other });
    await waitFor(() => s.current()?.networks.has("pods") === false, "network pods gone");
    expect(s.current()?.defaultNetwork).to.equal("other");
  });

  it("fills usePodCidr from setPodCidrs, failing until the node has one", async () => {
    const templated = JSON.stringify({
      cniVersion: "1.0.0",
      name: "pods",
      plugins: [{ type: "ptp", ipam: { type: "host-local", subnet: "usePodCidr" } }],
    });
    await vol.write({ "10-pods.conflist": templated });
    const s = source();
    await s.start();
    expect(s.current()).to.equal(undefined);
    expect(s.lastError()?.message).to.include("no IPv4 pod CIDR yet");

    await s.setPodCidrs({ v4: "10.244.7.0/24" });
    expect(s.lastError()).to.equal(undefined);
    const ipam = s.current()?.networks.get("pods")?.plugins[0]?.raw.ipam as JsonObject;
    expect(ipam.subnet).to.equal("10.244.7.0/24");
  });

  it("never runs two loads at once: a burst of reload() calls makes at most two", async () => {
    await vol.write({ "10-pods.conflist": ptpList(1500) });
    const s = source();
    await s.start();
    const before = s.reloads;
    await Promise.all([s.reload(), s.reload(), s.reload(), s.reload(), s.reload()]);
    expect(s.reloads - before).to.be.within(1, 2);
  });

  it("still sees a later swap after two back-to-back swaps (the watcher's blind spot): within the recheck", async () => {
    // Two swaps with no pause left chokidar's key watch on a deleted file in most
    // tries; the `..data` recheck (300 ms here) must catch every later swap.
    for (let trial = 0; trial < 6; trial++) {
      const v = await ConfigMapDir.create();
      try {
        await v.write({ "10-pods.conflist": ptpList(1400) });
        const s = source({ dir: v.dir, dataRecheckMs: 300 });
        await s.start();
        await v.write({ "10-pods.conflist": ptpList(1401) });
        await v.write({ "10-pods.conflist": ptpList(1402) });
        await sleep(400);
        await v.write({ "10-pods.conflist": ptpList(1403) });
        await waitFor(() => mtuOf(s.current()) === 1403, `trial ${trial}: MTU 1403`);
      } finally {
        for (const s of sources.splice(0)) await s.close();
        await v.remove();
      }
    }
  });

  it("debounces a burst of swaps into few loads and ends on the last one", async () => {
    await vol.write({ "10-pods.conflist": ptpList(1500) });
    const s = source({ debounceMs: 300 });
    await s.start();
    for (const mtu of [1401, 1402, 1403, 1404, 1405]) {
      await vol.write({ "10-pods.conflist": ptpList(mtu) });
    }
    await waitFor(() => mtuOf(s.current()) === 1405, "MTU 1405");
    await sleep(300);
    expect(mtuOf(s.current())).to.equal(1405);
    expect(s.reloads).to.be.within(2, 3);
  });
});

describe("driver/config-source readConfigDir and pluginFinder", () => {
  let tmp: string;
  beforeEach(async () => {
    tmp = await mkdtemp(join(tmpdir(), "config-source-"));
  });
  afterEach(async () => {
    await rm(tmp, { recursive: true, force: true });
  });

  it("reads a projected volume's keys from the version ..data points at, skipping ..-names", async () => {
    const vol = await ConfigMapDir.create(tmp);
    await vol.write({ "a.conflist": "A1", "driver.json": "{}" });
    await vol.write({ "a.conflist": "A2", "driver.json": "{}" });
    const files = await readConfigDir(vol.dir);
    expect([...files.keys()]).to.deep.equal(["a.conflist", "driver.json"]);
    expect(Buffer.from(files.get("a.conflist") ?? []).toString()).to.equal("A2");
  });

  it("reads a plain directory's files, leaving out sub-directories", async () => {
    await writeFile(join(tmp, "x.conflist"), "X");
    await mkdir(join(tmp, "sub"));
    await writeFile(join(tmp, "..hidden"), "H");
    const files = await readConfigDir(tmp);
    expect([...files.keys()]).to.deep.equal(["x.conflist"]);
  });

  it("finds only executable regular files in the bin dirs", async () => {
    await writeFile(join(tmp, "exec"), "#!/bin/sh\n");
    await chmod(join(tmp, "exec"), 0o755);
    await writeFile(join(tmp, "plain"), "");
    await chmod(join(tmp, "plain"), 0o644);
    await mkdir(join(tmp, "dir"));
    const exists = pluginFinder([join(tmp, "nowhere"), tmp, CNI_BIN]);
    expect(["exec", "plain", "dir", "host-local", "nope"].map(exists)).to.deep.equal([
      true,
      false,
      false,
      true,
      false,
    ]);
  });
});
