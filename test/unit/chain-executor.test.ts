/**
 * The chain executor's list semantics (libcni's AddNetworkList, DelNetworkList,
 * CheckNetworkList, GCNetworkList, GetStatusNetworkList, and the driver's own
 * undo of a failed ADD), through its RunPlugin seam: a fake that records each
 * invocation and answers from a script, over a real result cache in a
 * temporary directory. GC's and STATUS's stdin are in
 * test/integration/executor-gc-status.test.ts; an ADD answered in another
 * version in test/integration/executor-add.test.ts.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect } from "chai";
import { type NetworkConfigList, parseNetworkConfigList } from "../../src/cni/conflist.js";
import { CniError, ErrorCode } from "../../src/cni/errors.js";
import { type AttachmentArgs, ChainExecutor } from "../../src/driver/chain/executor.js";
import type { PluginInvocation } from "../../src/driver/chain/plugin-runner.js";
import { ResultCache } from "../../src/driver/chain/result-cache.js";
import { cniRejectionOf } from "../support/cni-error.js";

const NETNS = "/run/netns/unit-exec-x";

/** Three plugins: one that makes the interface, one taking port mappings, one taking a MAC. */
function chain(cniVersion: string, extra: Record<string, unknown> = {}): NetworkConfigList {
  return parseNetworkConfigList(
    JSON.stringify({
      cniVersion,
      name: "unit-exec",
      ...extra,
      plugins: [
        { type: "maker", ipam: { type: "host-local" } },
        { type: "ports", capabilities: { portMappings: true, bandwidth: false } },
        { type: "mac", capabilities: { mac: true } },
      ],
    }),
  );
}

const PORTS = [{ hostPort: 8080, containerPort: 80, protocol: "tcp" }];

const ATTACHMENT: AttachmentArgs = {
  containerId: "unit-exec-c1",
  ifName: "eth0",
  netns: NETNS,
  cniArgs: [
    ["IgnoreUnknown", "1"],
    ["K8S_POD_NAME", "p"],
  ],
  capabilityArgs: { portMappings: PORTS, bandwidth: { ingressRate: 1000 } },
};

/** What plugin `type` answers on ADD: an interface of its own and the address so far. */
function resultOf(type: string, cniVersion: string): Record<string, unknown> {
  return {
    cniVersion,
    interfaces: [{ name: `${type}0`, mac: "0a:58:0a:01:00:05", sandbox: NETNS }],
    ips: [
      {
        ...(cniVersion.startsWith("0.") ? { version: "4" } : {}),
        address: "10.1.0.5/24",
        gateway: "10.1.0.1",
        interface: 0,
      },
    ],
    routes: [{ dst: `10.${type.length}.0.0/16` }],
    // Go's 0.x Result always writes its DNS struct; 1.x leaves an empty one out.
    ...(cniVersion.startsWith("0.") ? { dns: {} } : {}),
  };
}

/**
 * A RunPlugin that records each invocation (config deep-copied, as the plugin
 * would read it off its stdin) and answers ADD with resultOf(type), unless
 * `fail` names the type and command: then it throws that error.
 */
class FakeRunner {
  readonly calls: PluginInvocation[] = [];
  readonly fail = new Map<string, CniError>();
  /** ADD's answer by plugin type, in place of resultOf's. */
  readonly answers = new Map<string, unknown>();
  run = async (inv: PluginInvocation): Promise<unknown> => {
    this.calls.push(structuredClone(inv));
    const err = this.fail.get(`${inv.command} ${inv.type}`);
    if (err) throw err;
    if (inv.command !== "ADD") return undefined;
    return this.answers.get(inv.type) ?? resultOf(inv.type, String(inv.config.cniVersion));
  };
  steps(): string[] {
    return this.calls.map((c) => `${c.command} ${c.type}`);
  }
  of(command: string): PluginInvocation[] {
    return this.calls.filter((c) => c.command === command);
  }
}

describe("chain executor through a fake RunPlugin", () => {
  let dir = "";
  let cache: ResultCache;
  let fake: FakeRunner;
  let builtins: Set<string>;
  const executor = () =>
    new ChainExecutor(cache, fake.run, undefined, (type) => builtins.has(type));

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "cni-driver-unit-exec-"));
    cache = new ResultCache(dir);
    fake = new FakeRunner();
    builtins = new Set();
  });

  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  describe("ADD", () => {
    it("runs the plugins in order, each given the previous plugin's result, and caches the last", async () => {
      const list = chain("1.0.0");
      const result = await executor().add(list, ATTACHMENT);

      expect(fake.steps()).to.deep.equal(["ADD maker", "ADD ports", "ADD mac"]);
      const [maker, ports, mac] = fake.calls;
      expect(maker?.config).to.not.have.property("prevResult");
      expect(ports?.config.prevResult).to.deep.equal(resultOf("maker", "1.0.0"));
      expect(mac?.config.prevResult).to.deep.equal(resultOf("ports", "1.0.0"));
      for (const c of fake.calls) {
        expect(c.config).to.include({ name: "unit-exec", cniVersion: "1.0.0" });
        expect(c).to.include({
          containerId: "unit-exec-c1",
          netns: NETNS,
          ifName: "eth0",
          cniArgs: "IgnoreUnknown=1;K8S_POD_NAME=p",
        });
        expect(c).to.not.have.property("cachedResult");
      }
      expect(maker?.config.ipam).to.deep.equal({ type: "host-local" });

      expect(result).to.deep.equal(resultOf("mac", "1.0.0"));
      const entry = await cache.read("unit-exec", "unit-exec-c1", "eth0");
      expect(entry?.result).to.deep.equal(resultOf("mac", "1.0.0"));
      expect(entry?.netns).to.equal(NETNS);
      expect(entry?.capabilityArgs).to.deep.equal(ATTACHMENT.capabilityArgs);
    });

    it("gives a plugin runtimeConfig only for the capabilities it declares true", async () => {
      await executor().add(chain("1.0.0"), {
        ...ATTACHMENT,
        capabilityArgs: { ...ATTACHMENT.capabilityArgs, mac: "0a:58:0a:01:00:09" },
      });
      const [maker, ports, mac] = fake.calls;
      // maker declares nothing; ports declares bandwidth false; mac gets only its own.
      expect(maker?.config).to.not.have.property("runtimeConfig");
      expect(ports?.config.runtimeConfig).to.deep.equal({ portMappings: PORTS });
      expect(mac?.config.runtimeConfig).to.deep.equal({ mac: "0a:58:0a:01:00:09" });
    });

    it("chains prevResult on ADD below 0.4.0 too, as libcni does from 0.3.0", async () => {
      await executor().add(chain("0.3.1"), ATTACHMENT);
      expect(fake.calls[0]?.config).to.not.have.property("prevResult");
      expect(fake.calls[1]?.config.prevResult).to.deep.equal(resultOf("maker", "0.3.1"));
    });

    it("undoes a chain that fails in the middle: DEL of the plugins that ran, newest first; nothing cached", async () => {
      fake.fail.set(
        "ADD ports",
        new CniError(ErrorCode.TryAgainLater, "iptables is locked", "xtables"),
      );
      const err = await cniRejectionOf(executor().add(chain("1.0.0"), ATTACHMENT));

      // The failed plugin may have done part of its work: it gets its DEL too; mac never ran.
      expect(fake.steps()).to.deep.equal(["ADD maker", "ADD ports", "DEL ports", "DEL maker"]);
      for (const del of fake.of("DEL")) {
        // The last result that was had: what the failed plugin was given.
        expect(del.config.prevResult).to.deep.equal(resultOf("maker", "1.0.0"));
        expect(del.netns).to.equal(NETNS);
      }
      expect(fake.of("DEL")[0]?.config.runtimeConfig).to.deep.equal({ portMappings: PORTS });
      expect(err.code).to.equal(ErrorCode.TryAgainLater);
      expect(err.message).to.equal(
        'plugin type="ports" (#2 of network "unit-exec") failed (add): iptables is locked',
      );
      expect(err.details).to.equal("xtables");
      expect(await cache.list()).to.deep.equal([]);
    });

    it("undoes below 0.4.0 without a prevResult, and names a failed undo in the details, keeping the cause's code", async () => {
      fake.fail.set("ADD mac", new CniError(ErrorCode.InvalidNetworkConfig, "bad mac"));
      fake.fail.set("DEL ports", new CniError(ErrorCode.IOFailure, "cannot read rules"));
      const err = await cniRejectionOf(executor().add(chain("0.3.1"), ATTACHMENT));

      // One undo failing does not stop the others.
      expect(fake.steps()).to.deep.equal([
        "ADD maker",
        "ADD ports",
        "ADD mac",
        "DEL mac",
        "DEL ports",
        "DEL maker",
      ]);
      for (const del of fake.of("DEL")) expect(del.config).to.not.have.property("prevResult");
      expect(err.code).to.equal(ErrorCode.InvalidNetworkConfig);
      expect(err.message).to.equal(
        'plugin type="mac" (#3 of network "unit-exec") failed (add): bad mac',
      );
      expect(err.details).to.equal(
        'undo: type="ports" (#2 of network "unit-exec"): plugin type="ports" (#2 of network "unit-exec") failed (del): cannot read rules',
      );
      expect(await cache.list()).to.deep.equal([]);
    });

    it("fails with code 6 naming the plugin when one prints no result, and undoes it", async () => {
      const list = chain("1.0.0");
      const silent = async (inv: PluginInvocation) => {
        const out = await fake.run(inv);
        return inv.type === "ports" ? undefined : out;
      };
      const err = await cniRejectionOf(new ChainExecutor(cache, silent).add(list, ATTACHMENT));
      expect(err.code).to.equal(ErrorCode.DecodingFailure);
      expect(err.message).to.equal(
        'plugin type="ports" (#2 of network "unit-exec") printed no result on ADD',
      );
      expect(fake.steps()).to.deep.equal(["ADD maker", "ADD ports", "DEL ports", "DEL maker"]);
      expect(await cache.list()).to.deep.equal([]);
    });

    it("answers an ADD of an attachment already set up from its cache, running nothing", async () => {
      const first = await executor().add(chain("1.0.0"), ATTACHMENT);
      fake.calls.length = 0;
      const again = await executor().add(chain("1.0.0"), ATTACHMENT);
      expect(again).to.deep.equal(first);
      expect(fake.calls).to.deep.equal([]);
    });

    it("refuses an ADD answered from the cache in a version that cannot carry the result, and keeps the attachment", async () => {
      const list = chain("1.0.0");
      const last = list.plugins[list.plugins.length - 1]?.type as string;
      // Interfaces and no address: 0.2.0 holds only addresses.
      fake.answers.set(last, { cniVersion: "1.0.0", interfaces: [{ name: "eth0" }] });
      await executor().add(list, ATTACHMENT);
      fake.calls.length = 0;
      const err = await cniRejectionOf(executor().add(list, ATTACHMENT, "0.2.0"));
      expect(err.message).to.include("cannot be given in CNI 0.2.0");
      expect(fake.calls, "nothing run, nothing undone").to.deep.equal([]);
      expect(await cache.read("unit-exec", "unit-exec-c1", "eth0")).to.not.equal(undefined);
    });

    it("refuses the same container and interface in another netns until its DEL (code 999)", async () => {
      await executor().add(chain("1.0.0"), ATTACHMENT);
      fake.calls.length = 0;
      const err = await cniRejectionOf(
        executor().add(chain("1.0.0"), { ...ATTACHMENT, netns: "/run/netns/unit-exec-y" }),
      );
      expect(err.code).to.equal(ErrorCode.Internal);
      expect(err.message).to.include(`already set up on network unit-exec in netns ${NETNS}`);
      expect(fake.calls).to.deep.equal([]);
      expect((await cache.read("unit-exec", "unit-exec-c1", "eth0"))?.netns).to.equal(NETNS);
    });
  });

  describe("DEL", () => {
    it("runs the plugins in reverse, each given the cached result, with the ADD's capability args; then drops the cache entry", async () => {
      const list = chain("1.0.0");
      await executor().add(list, ATTACHMENT);
      fake.calls.length = 0;
      await executor().del(list, list.name, { ...ATTACHMENT, capabilityArgs: {} });

      expect(fake.steps()).to.deep.equal(["DEL mac", "DEL ports", "DEL maker"]);
      for (const c of fake.calls) {
        expect(c.config.prevResult).to.deep.equal(resultOf("mac", "1.0.0"));
        expect(c.cachedResult).to.deep.equal(resultOf("mac", "1.0.0"));
      }
      expect(fake.calls[1]?.config.runtimeConfig).to.deep.equal({ portMappings: PORTS });
      expect(await cache.list()).to.deep.equal([]);
    });

    it("gives no prevResult below 0.4.0; the cached result goes aside, for built-in plugins", async () => {
      const list = chain("0.3.1");
      await executor().add(list, ATTACHMENT);
      fake.calls.length = 0;
      await executor().del(list, list.name, ATTACHMENT);

      expect(fake.steps()).to.deep.equal(["DEL mac", "DEL ports", "DEL maker"]);
      for (const c of fake.calls) {
        expect(c.config).to.not.have.property("prevResult");
        expect(c.cachedResult).to.deep.equal(resultOf("mac", "0.3.1"));
      }
    });

    it("tears the attachment down as it was set up: the cached config wins over the current one", async () => {
      const list = chain("1.0.0");
      await executor().add(list, ATTACHMENT);
      fake.calls.length = 0;
      const changed = parseNetworkConfigList(
        JSON.stringify({ cniVersion: "1.0.0", name: "unit-exec", plugins: [{ type: "other" }] }),
      );
      await executor().del(changed, list.name, ATTACHMENT);
      expect(fake.steps()).to.deep.equal(["DEL mac", "DEL ports", "DEL maker"]);
    });

    it("of a network gone from the config, runs from the cached config; without a cache entry, does nothing", async () => {
      const list = chain("1.0.0");
      await executor().add(list, ATTACHMENT);
      fake.calls.length = 0;
      await executor().del(undefined, list.name, ATTACHMENT);
      expect(fake.steps()).to.deep.equal(["DEL mac", "DEL ports", "DEL maker"]);

      fake.calls.length = 0;
      await executor().del(undefined, list.name, ATTACHMENT);
      expect(fake.calls).to.deep.equal([]);
    });

    it("of a network gone from the config, whose cache entry holds no config, fails naming why (code 7)", async () => {
      await cache.write({
        containerId: ATTACHMENT.containerId,
        config: new Uint8Array(),
        ifName: ATTACHMENT.ifName,
        networkName: "unit-gone",
        netns: ATTACHMENT.netns,
        result: { cniVersion: "1.0.0" },
      });
      const err = await cniRejectionOf(executor().del(undefined, "unit-gone", ATTACHMENT));
      expect(err.code).to.equal(ErrorCode.InvalidNetworkConfig);
      expect(err.message).to.include("holds no config");
      expect(fake.calls).to.deep.equal([]);
    });

    it("without a cache entry, runs the current config without prevResult", async () => {
      const list = chain("1.0.0");
      await executor().del(list, list.name, ATTACHMENT);
      expect(fake.steps()).to.deep.equal(["DEL mac", "DEL ports", "DEL maker"]);
      for (const c of fake.calls) expect(c.config).to.not.have.property("prevResult");
    });

    it("stops at the first failing plugin and keeps the cache entry for the runtime's retry", async () => {
      const list = chain("1.0.0");
      await executor().add(list, ATTACHMENT);
      fake.calls.length = 0;
      fake.fail.set("DEL ports", new CniError(ErrorCode.IOFailure, "busy"));
      const err = await cniRejectionOf(executor().del(list, list.name, ATTACHMENT));

      expect(fake.steps()).to.deep.equal(["DEL mac", "DEL ports"]);
      expect(err.code).to.equal(ErrorCode.IOFailure);
      expect(err.message).to.equal(
        'plugin type="ports" (#2 of network "unit-exec") failed (del): busy',
      );
      expect((await cache.list()).map((e) => e.containerId)).to.deep.equal(["unit-exec-c1"]);
    });
  });

  describe("CHECK", () => {
    it("runs the plugins in order, each given the cached result", async () => {
      const list = chain("1.0.0");
      await executor().add(list, ATTACHMENT);
      fake.calls.length = 0;
      await executor().check(list, ATTACHMENT);
      expect(fake.steps()).to.deep.equal(["CHECK maker", "CHECK ports", "CHECK mac"]);
      for (const c of fake.calls)
        expect(c.config.prevResult).to.deep.equal(resultOf("mac", "1.0.0"));
    });

    it("fails with code 3 naming the attachment when nothing is cached, asking no plugin", async () => {
      const err = await cniRejectionOf(executor().check(chain("1.0.0"), ATTACHMENT));
      expect(err.code).to.equal(ErrorCode.UnknownContainer);
      expect(err.message).to.equal(
        'could not retrieve cached result for network "unit-exec", container unit-exec-c1, interface eth0',
      );
      expect(fake.calls).to.deep.equal([]);
    });

    it("stops at the first failing plugin with its code", async () => {
      const list = chain("1.0.0");
      await executor().add(list, ATTACHMENT);
      fake.calls.length = 0;
      fake.fail.set("CHECK maker", new CniError(101, "address 10.1.0.5/24 is missing"));
      const err = await cniRejectionOf(executor().check(list, ATTACHMENT));
      expect(err.code).to.equal(101);
      expect(err.message).to.equal(
        'plugin type="maker" (#1 of network "unit-exec") failed (check): address 10.1.0.5/24 is missing',
      );
      expect(fake.steps()).to.deep.equal(["CHECK maker"]);
    });

    it("succeeds at once when the list disables CHECK", async () => {
      const list = chain("1.0.0", { disableCheck: true });
      await executor().check(list, ATTACHMENT);
      expect(fake.calls).to.deep.equal([]);
    });

    it("refuses a network below 0.4.0 with code 1 when the caller speaks no newer version", async () => {
      const list = chain("0.3.1");
      await executor().add(list, ATTACHMENT);
      fake.calls.length = 0;
      const err = await cniRejectionOf(executor().check(list, ATTACHMENT));
      expect(err.code).to.equal(ErrorCode.IncompatibleVersion);
      expect(err.message).to.equal(
        'configuration version "0.3.1" does not support the CHECK command',
      );
      expect(fake.calls).to.deep.equal([]);
    });

    it("below 0.4.0, for a caller that has CHECK, checks only the built-in plugins, the cached result aside", async () => {
      builtins.add("maker");
      const list = chain("0.3.1");
      await executor().add(list, ATTACHMENT);
      fake.calls.length = 0;
      await executor().check(list, ATTACHMENT, "1.0.0");
      expect(fake.steps()).to.deep.equal(["CHECK maker"]);
      expect(fake.calls[0]?.config).to.not.have.property("prevResult");
      expect(fake.calls[0]?.cachedResult).to.deep.equal(resultOf("mac", "0.3.1"));
    });
  });

  describe("GC and STATUS", () => {
    it("STATUS asks nothing below 1.1.0", async () => {
      await executor().status(chain("1.0.0"));
      expect(fake.calls).to.deep.equal([]);
    });

    it("STATUS stops at the first plugin that fails, passing its code on", async () => {
      fake.fail.set("STATUS ports", new CniError(ErrorCode.PluginNotAvailable, "no leases left"));
      const err = await cniRejectionOf(executor().status(chain("1.1.0")));
      expect(err.code).to.equal(ErrorCode.PluginNotAvailable);
      expect(err.message).to.equal("no leases left");
      expect(fake.steps()).to.deep.equal(["STATUS maker", "STATUS ports"]);
    });

    it("GC keeps going past a failing plugin and returns every error, each naming its plugin", async () => {
      fake.fail.set("GC maker", new CniError(ErrorCode.IOFailure, "disk"));
      fake.fail.set("GC ports", new CniError(ErrorCode.TryAgainLater, "locked"));
      const out = await executor().gc(chain("1.1.0"), []);
      expect(fake.steps()).to.deep.equal(["GC maker", "GC ports", "GC mac"]);
      expect(out.errors.map((e) => [e.code, e.message])).to.deep.equal([
        [ErrorCode.IOFailure, 'failed to GC plugin type="maker" (#1 of network "unit-exec"): disk'],
        [
          ErrorCode.TryAgainLater,
          'failed to GC plugin type="ports" (#2 of network "unit-exec"): locked',
        ],
      ]);
      expect(out.removed).to.equal(0);
    });

    it("GC of a stale attachment whose DEL fails reports it and keeps its cache entry", async () => {
      const list = chain("1.0.0");
      await executor().add(list, ATTACHMENT);
      fake.calls.length = 0;
      fake.fail.set("DEL maker", new CniError(ErrorCode.IOFailure, "stuck"));
      const out = await executor().gc(list, []);
      // Below 1.1.0 no plugin gets GC: only the stale attachment's DEL runs.
      expect(fake.steps()).to.deep.equal(["DEL mac", "DEL ports", "DEL maker"]);
      expect(out.removed).to.equal(0);
      expect(out.errors.map((e) => e.message)).to.deep.equal([
        'failed to delete stale attachment unit-exec-c1 eth0: plugin type="maker" (#1 of network "unit-exec") failed (del): stuck',
      ]);
      expect((await cache.list()).map((e) => e.containerId)).to.deep.equal(["unit-exec-c1"]);
    });

    it("GC does nothing when the list disables it, not even the DEL of a stale attachment", async () => {
      const list = chain("1.1.0", { disableGC: true });
      await executor().add(list, ATTACHMENT);
      fake.calls.length = 0;
      const out = await executor().gc(list, []);
      expect(out).to.deep.equal({ removed: 0, removedAttachments: [], errors: [] });
      expect(fake.calls).to.deep.equal([]);
      expect((await cache.list()).map((e) => e.containerId)).to.deep.equal(["unit-exec-c1"]);
    });
  });
});
