/**
 * The chain executor's ADD with a recording plugin runner over a real result
 * cache: a result the caller's CNI version cannot carry fails the ADD whole
 * (every plugin that ran gets its DEL, nothing is cached), and the error names
 * the network and the version.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect } from "chai";
import { parseNetworkConfigList } from "../../src/cni/conflist.js";
import { CniError, ErrorCode } from "../../src/cni/errors.js";
import { type AttachmentArgs, ChainExecutor } from "../../src/driver/chain/executor.js";
import type { PluginInvocation } from "../../src/driver/chain/plugin-runner.js";
import { ResultCache } from "../../src/driver/chain/result-cache.js";

const list = parseNetworkConfigList(
  JSON.stringify({
    cniVersion: "1.0.0",
    name: "no-ipam",
    plugins: [{ type: "links-only" }, { type: "tuning" }],
  }),
);

/** What a plugin that makes an interface but hands out no address answers. */
const IP_LESS = {
  cniVersion: "1.0.0",
  interfaces: [{ name: "eth0", sandbox: "/run/netns/x", mac: "0a:58:0a:01:00:05" }],
};

const ATTACHMENT: AttachmentArgs = {
  containerId: "c1",
  ifName: "eth0",
  netns: "/run/netns/x",
  cniArgs: [],
  capabilityArgs: {},
};

describe("chain executor: ADD answered in the caller's CNI version", () => {
  let dir = "";
  let cache: ResultCache;
  const calls: PluginInvocation[] = [];
  const executor = () =>
    new ChainExecutor(cache, async (inv) => {
      calls.push(inv);
      return inv.command === "ADD" ? IP_LESS : undefined;
    });

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "cni-driver-executor-add-"));
    cache = new ResultCache(dir);
    calls.length = 0;
  });

  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it("fails an ADD whose result 0.2.0 cannot carry, undoing every plugin and caching nothing", async () => {
    const err = await executor()
      .add(list, ATTACHMENT, "0.2.0")
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(err).to.be.instanceOf(CniError);
    expect((err as CniError).code).to.equal(ErrorCode.Internal);
    expect((err as CniError).message).to.equal(
      "the result of network no-ipam cannot be given in CNI 0.2.0: cannot convert: no valid IP addresses",
    );
    expect(calls.map((c) => [c.command, c.type])).to.deep.equal([
      ["ADD", "links-only"],
      ["ADD", "tuning"],
      ["DEL", "tuning"],
      ["DEL", "links-only"],
    ]);
    expect(await cache.list()).to.deep.equal([]);
  });

  it("keeps the same ADD when the caller asks for a version that carries it", async () => {
    const result = await executor().add(list, ATTACHMENT, "0.4.0");
    expect(result.cniVersion).to.equal("1.0.0");
    expect(calls.map((c) => c.command)).to.deep.equal(["ADD", "ADD"]);
    expect((await cache.list()).map((e) => e.containerId)).to.deep.equal(["c1"]);
  });
});
