/**
 * What the chain executor sends plugins for GC and STATUS, with a recording
 * plugin runner over a real result cache: the stale attachments of the network
 * (only those) get a full DEL, then each plugin gets libcni's GC stdin (the
 * valid set under both keys) and STATUS stdin.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect } from "chai";
import { parseNetworkConfigList } from "../../src/cni/conflist.js";
import { buildGcStdin } from "../../src/cni/gc.js";
import { buildStatusStdin } from "../../src/cni/plugin-config.js";
import { ChainExecutor } from "../../src/driver/chain/executor.js";
import type { PluginInvocation } from "../../src/driver/chain/plugin-runner.js";
import { ResultCache } from "../../src/driver/chain/result-cache.js";

const CONFLIST = JSON.stringify({
  cniVersion: "1.1.0",
  name: "n",
  plugins: [
    { type: "first", mtu: 1400 },
    { type: "second", capabilities: { portMappings: true } },
  ],
});

const RESULT = {
  cniVersion: "1.1.0",
  interfaces: [{ name: "eth0", sandbox: "/run/netns/x" }],
  ips: [{ address: "10.1.0.5/24", interface: 0 }],
};

describe("chain executor: GC and STATUS stdin", () => {
  let dir = "";
  let cache: ResultCache;
  const calls: PluginInvocation[] = [];
  const list = parseNetworkConfigList(CONFLIST);
  const other = parseNetworkConfigList(CONFLIST.replace('"name":"n"', '"name":"other"'));

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), "cni-driver-executor-"));
    cache = new ResultCache(dir);
    calls.length = 0;
    for (const [l, id] of [
      [list, "keep"],
      [list, "stale"],
      [other, "elsewhere"],
    ] as const) {
      await cache.write({
        containerId: id,
        config: l.bytes,
        ifName: "eth0",
        networkName: l.name,
        netns: "/run/netns/x",
        result: RESULT,
      });
    }
  });

  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  const executor = () =>
    new ChainExecutor(cache, async (inv) => {
      calls.push(inv);
      return undefined;
    });

  it("DELs only this network's attachments the valid set leaves out, then sends each plugin libcni's GC stdin", async () => {
    const out = await executor().gc(list, [{ containerId: "keep", ifName: "eth0" }]);
    expect(out.errors).to.deep.equal([]);
    expect(out.removedAttachments.map((a) => a.containerId)).to.deep.equal(["stale"]);
    const dels = calls.filter((c) => c.command === "DEL");
    expect(dels.map((c) => [c.type, c.containerId])).to.deep.equal([
      ["second", "stale"],
      ["first", "stale"],
    ]);
    const gcs = calls.filter((c) => c.command === "GC");
    const valid = [{ containerID: "keep", ifname: "eth0" }];
    expect(gcs.map((c) => c.config)).to.deep.equal([
      JSON.parse(buildGcStdin(list, 0, valid)),
      JSON.parse(buildGcStdin(list, 1, valid)),
    ]);
    // Both keys, as libcni writes them: plugins of either generation read their own.
    expect(gcs[0]?.config).to.include.keys("cni.dev/valid-attachments", "cni.dev/attachments");
    expect((await cache.list()).map((e) => e.containerId).sort()).to.deep.equal([
      "elsewhere",
      "keep",
    ]);
  });

  it("sends each plugin libcni's STATUS stdin, in order", async () => {
    await executor().status(list);
    expect(calls.map((c) => [c.command, c.type])).to.deep.equal([
      ["STATUS", "first"],
      ["STATUS", "second"],
    ]);
    expect(calls.map((c) => c.config)).to.deep.equal([
      JSON.parse(buildStatusStdin(list, 0)),
      JSON.parse(buildStatusStdin(list, 1)),
    ]);
  });
});
