/**
 * The driver's RPC handlers (DriverService) through their seams: a config that
 * is just a value, an executor that records its calls and answers as each test
 * scripts it, a recording metrics sink, a host-netns guard that names one fake
 * path the host's, and the real attachment locks and index. What is asserted
 * is what a caller sees: the response's error (code, message, not_ready), and
 * what reached the executor, in which order.
 */
import { expect } from "chai";
import pino from "pino";
import { type NetworkConfigList, parseNetworkConfigList } from "../../src/cni/conflist.js";
import { CniError, ErrorCode } from "../../src/cni/errors.js";
import type { AnyResult } from "../../src/cni/types.js";
import type { CniVersion } from "../../src/cni/versions.js";
import type {
  AttachmentArgs,
  RemovedAttachment,
  ValidAttachment,
} from "../../src/driver/chain/executor.js";
import { AttachmentLocks } from "../../src/driver/chain/locks.js";
import type { ConfigError } from "../../src/driver/config/config-source.js";
import type { DriverConfig } from "../../src/driver/config/network-config.js";
import { HostNetnsGuard, type ProtectedNetns } from "../../src/driver/rpc/host-netns-guard.js";
import {
  AttachmentIndex,
  DriverService,
  type PodNetworkObserver,
  type ServiceDeps,
} from "../../src/driver/rpc/service.js";
import { API_VERSION, NOT_READY_DETAILS, type PodRequest } from "../../src/wire/types.js";

const NETNS = "/run/netns/unit-svc-pod";
/** The path the fake guard takes for the host's namespace; nothing is ever looked up there. */
const FAKE_HOST_NETNS = "/run/netns/unit-svc-host";

function network(name: string): NetworkConfigList {
  return parseNetworkConfigList(
    JSON.stringify({ cniVersion: "1.0.0", name, plugins: [{ type: "unit-svc-plugin" }] }),
  );
}

function driverConfig(...names: string[]): DriverConfig {
  return {
    networks: new Map(names.map((n) => [n, network(n)])),
    defaultNetwork: names[0] ?? "",
    settings: {},
    source: "unit-svc",
    contentHash: "0",
    generation: 1,
    loadedAt: new Date(0),
  };
}

const RESULT: AnyResult = {
  cniVersion: "1.0.0",
  interfaces: [{ name: "eth0", mac: "0a:58:0a:01:00:05", sandbox: NETNS }],
  ips: [{ address: "10.1.0.5/24", gateway: "10.1.0.1", interface: 0 }],
};

function podRequest(o: Partial<PodRequest> = {}): PodRequest {
  return {
    api_version: API_VERSION,
    pod: { namespace: "unit-svc", name: "p", uid: "" },
    container_id: "unit-svc-c1",
    netns: NETNS,
    ifname: "eth0",
    network: "",
    cni_version: "",
    cni_args: [],
    capabilities: null,
    stdin_config: new Uint8Array(),
    ...o,
  };
}

interface ExecutorCall {
  verb: "ADD" | "DEL" | "CHECK" | "GC" | "STATUS";
  network: string;
  /** DEL: whether the executor was handed the network's current config. */
  hasConfig?: boolean;
  att?: AttachmentArgs;
  answerVersion?: CniVersion;
}

/** Records every call in order; `events` marks when each starts and ends; `hold` keeps the next ADD running. */
class FakeExecutor {
  readonly calls: ExecutorCall[] = [];
  readonly events: string[] = [];
  /** Settles the ADD in flight when set (by hold()). */
  private release: (() => void) | undefined;
  private held: Promise<void> | undefined;
  /** Thrown by ADD (once it ends) or STATUS. */
  failWith: CniError | undefined;
  /** What GC answers it removed. */
  gcRemoved: RemovedAttachment[] = [];

  /** The next ADD waits until the returned function is called. */
  hold(): () => void {
    this.held = new Promise((resolve) => {
      this.release = resolve;
    });
    return () => this.release?.();
  }

  async add(list: NetworkConfigList, att: AttachmentArgs, answerVersion?: CniVersion) {
    this.calls.push({ verb: "ADD", network: list.name, att, answerVersion });
    this.events.push("ADD start");
    await this.held;
    this.held = undefined;
    this.events.push("ADD end");
    if (this.failWith) throw this.failWith;
    return RESULT;
  }

  async del(current: NetworkConfigList | undefined, name: string, att: AttachmentArgs) {
    this.calls.push({ verb: "DEL", network: name, hasConfig: current !== undefined, att });
    this.events.push("DEL start");
    this.events.push("DEL end");
  }

  async check(list: NetworkConfigList, att: AttachmentArgs) {
    this.calls.push({ verb: "CHECK", network: list.name, att });
  }

  async gc(list: NetworkConfigList, _valid: readonly ValidAttachment[]) {
    this.calls.push({ verb: "GC", network: list.name });
    this.events.push("GC");
    const removedAttachments = this.gcRemoved.splice(0);
    return { removed: removedAttachments.length, removedAttachments, errors: [] };
  }

  async status(list: NetworkConfigList) {
    this.calls.push({ verb: "STATUS", network: list.name });
    if (this.failWith) throw this.failWith;
  }
}

/** A guard for which FAKE_HOST_NETNS is the host's namespace, and no other path is looked at. */
class FakeHostNetnsGuard extends HostNetnsGuard {
  override async which(netns: string): Promise<ProtectedNetns | undefined> {
    return netns === FAKE_HOST_NETNS
      ? { path: FAKE_HOST_NETNS, what: "the host's network namespace" }
      : undefined;
  }
}

/** Lets every callback already queued run. */
const settle = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe("DriverService through fakes", () => {
  let config: DriverConfig | undefined;
  let configError: ConfigError | undefined;
  let notReady: string[];
  let executor: FakeExecutor;
  let attachments: AttachmentIndex;
  let recorded: Array<{ verb: string; outcome: string; code?: number }>;
  let service: DriverService;
  /** What the pod observer heard, in order. */
  let heard: string[];

  beforeEach(() => {
    config = driverConfig("unit-net", "unit-other");
    configError = undefined;
    notReady = [];
    executor = new FakeExecutor();
    attachments = new AttachmentIndex();
    recorded = [];
    heard = [];
    const observer: PodNetworkObserver = {
      attached: (a, result) =>
        heard.push(`attached ${a.pod.namespace}/${a.pod.name} ${a.network} ${result.cniVersion}`),
      detached: (a) => heard.push(`detached ${a.pod.namespace}/${a.pod.name} ${a.network}`),
      setUpFailed: (a, step, e) =>
        heard.push(`failed ${a.pod.namespace}/${a.pod.name} ${a.network} at ${step}: ${e.code}`),
    };
    const deps: ServiceDeps = {
      config: { current: () => config, lastError: () => configError },
      executor,
      locks: new AttachmentLocks({ maxConcurrent: 4 }),
      metrics: {
        recordCall: (verb, outcome, _seconds, code) => recorded.push({ verb, outcome, code }),
      },
      logger: pino({ level: "silent" }),
      driverVersion: "0.0.0-unit",
      notReadyReasons: () => notReady,
      attachments,
      hostNetns: new FakeHostNetnsGuard([]),
      podObserver: observer,
    };
    service = new DriverService(deps);
  });

  describe("a request with a bad field is refused with code 4 naming it, before the executor", () => {
    const cases: Array<[string, Partial<PodRequest>, string]> = [
      ["container id", { container_id: "unit svc/c1" }, "invalid characters in containerID"],
      ["interface name", { ifname: "eth0:1" }, "interface name"],
      ["interface name's length", { ifname: "unit-svc-eth0-long" }, "interface name is too long"],
      ["netns path", { netns: "/run/netns/a\u0000b" }, "netns path contains a NUL byte"],
      ["netns, missing on ADD", { netns: "" }, "netns is required for ADD (CNI_NETNS missing)"],
      ["network name", { network: "unit/net" }, "invalid characters found in network name"],
    ];
    for (const [what, bad, message] of cases) {
      it(`the ${what}`, async () => {
        const res = await service.setUpPod(podRequest(bad));
        expect(res.error?.code).to.equal(ErrorCode.InvalidEnvironment);
        expect(res.error?.msg).to.include(message);
        expect(res.error?.not_ready).to.equal(false);
        expect(res.result).to.equal(null);
        expect(executor.calls).to.deep.equal([]);
        expect(recorded).to.deep.equal([
          { verb: "ADD", outcome: "error", code: ErrorCode.InvalidEnvironment },
        ]);
      });
    }

    it("on DEL and CHECK as on ADD", async () => {
      const del = await service.tearDownPod(podRequest({ container_id: "unit svc" }));
      const check = await service.checkPod(podRequest({ ifname: "eth/0" }));
      expect(del.error?.code).to.equal(ErrorCode.InvalidEnvironment);
      expect(del.error?.msg).to.include("containerID");
      expect(check.error?.code).to.equal(ErrorCode.InvalidEnvironment);
      expect(check.error?.msg).to.include("interface name");
      expect(executor.calls).to.deep.equal([]);
    });
  });

  describe("not ready", () => {
    it("refuses ADD with code 11 and not_ready set, naming the reasons; the executor is not called", async () => {
      notReady = ["replaying queued deletions"];
      const res = await service.setUpPod(podRequest());
      expect(res.error).to.deep.equal({
        code: ErrorCode.TryAgainLater,
        msg: "cni-driver is not ready: replaying queued deletions",
        details: NOT_READY_DETAILS,
        not_ready: true,
      });
      expect(executor.calls).to.deep.equal([]);
      expect(attachments.size).to.equal(0);
    });

    it("refuses ADD with code 11 and not_ready set while no config is loaded, giving the config's error", async () => {
      config = undefined;
      configError = { message: "unit-net.conflist: bad JSON", at: new Date(0), source: "dir" };
      const res = await service.setUpPod(podRequest());
      expect(res.error?.code).to.equal(ErrorCode.TryAgainLater);
      expect(res.error?.not_ready).to.equal(true);
      expect(res.error?.msg).to.equal("cni-driver is not ready: unit-net.conflist: bad JSON");
      expect(executor.calls).to.deep.equal([]);
    });

    it("refuses a DEL that names no network while no config is loaded, so that it is queued", async () => {
      config = undefined;
      const res = await service.tearDownPod(podRequest());
      expect(res.error?.code).to.equal(ErrorCode.TryAgainLater);
      expect(res.error?.not_ready).to.equal(true);
      expect(executor.calls).to.deep.equal([]);
    });

    it("leaves not_ready unset on a code 11 that is the plugin chain's own outcome", async () => {
      executor.failWith = new CniError(ErrorCode.TryAgainLater, "plugin timed out");
      const res = await service.setUpPod(podRequest());
      expect(res.error?.code).to.equal(ErrorCode.TryAgainLater);
      expect(res.error?.not_ready).to.equal(false);
      expect(res.error?.msg).to.equal("plugin timed out");
      expect(attachments.size).to.equal(0);
    });
  });

  it("answers an ADD on a network the config lacks with code 7 naming it and the networks there are", async () => {
    const res = await service.setUpPod(podRequest({ network: "unit-missing" }));
    expect(res.error?.code).to.equal(ErrorCode.InvalidNetworkConfig);
    expect(res.error?.msg).to.equal(
      'no network named "unit-missing" in the driver\'s configuration (networks: unit-net, unit-other)',
    );
    expect(executor.calls).to.deep.equal([]);
  });

  it("runs an ADD on the default network, answers in the caller's version, and indexes the attachment", async () => {
    const res = await service.setUpPod(podRequest({ cni_version: "0.4.0" }));
    expect(res.error).to.equal(null);
    expect(res.cni_version).to.equal("0.4.0");
    expect(JSON.parse(res.result_json).cniVersion).to.equal("0.4.0");
    expect(res.result?.ips.map((ip) => ip.address)).to.deep.equal(["10.1.0.5/24"]);
    expect(executor.calls.map((c) => [c.verb, c.network, c.answerVersion])).to.deep.equal([
      ["ADD", "unit-net", "0.4.0"],
    ]);
    // The pod's identity goes to the plugins in CNI_ARGS.
    expect(executor.calls[0]?.att?.cniArgs).to.deep.include(["K8S_POD_NAME", "p"]);
    expect(recorded).to.deep.equal([{ verb: "ADD", outcome: "ok", code: undefined }]);
    expect(attachments.size).to.equal(1);
    const status = await service.cniStatus({
      api_version: API_VERSION,
      network: "",
      cni_version: "",
    });
    expect(status.attachments).to.equal(1);
  });

  it("serializes an ADD and a DEL of one attachment: the DEL reaches the executor once the ADD is done, on the ADD's network", async () => {
    const release = executor.hold();
    const adding = service.setUpPod(podRequest({ network: "unit-other" }));
    await settle();
    const deleting = service.tearDownPod(podRequest());
    await settle();
    await settle();
    // The DEL waits on the lock while the ADD runs.
    expect(executor.events).to.deep.equal(["ADD start"]);
    release();
    const [added, deleted] = await Promise.all([adding, deleting]);
    expect(added.error).to.equal(null);
    expect(deleted.error).to.equal(null);
    expect(executor.events).to.deep.equal(["ADD start", "ADD end", "DEL start", "DEL end"]);
    // The DEL named no network: it goes to the one the ADD indexed, not the default.
    expect(executor.calls.map((c) => [c.verb, c.network])).to.deep.equal([
      ["ADD", "unit-other"],
      ["DEL", "unit-other"],
    ]);
    expect(attachments.size).to.equal(0);
  });

  it("runs a DEL on another attachment while an ADD holds its own", async () => {
    const release = executor.hold();
    const adding = service.setUpPod(podRequest());
    await settle();
    const other = await service.tearDownPod(podRequest({ container_id: "unit-svc-c2" }));
    expect(other.error).to.equal(null);
    expect(executor.events).to.deep.equal(["ADD start", "DEL start", "DEL end"]);
    release();
    await adding;
  });

  it("sends the DEL of a network gone from the config to the executor without a config, and answers success", async () => {
    await service.setUpPod(podRequest({ network: "unit-other" }));
    config = driverConfig("unit-net");
    const res = await service.tearDownPod(podRequest({ network: "unit-other" }));
    expect(res.error).to.equal(null);
    expect(executor.calls.at(-1)).to.include({
      verb: "DEL",
      network: "unit-other",
      hasConfig: false,
    });
    expect(attachments.size).to.equal(0);
  });

  describe("the host's network namespace", () => {
    it("is refused on ADD with code 4 naming the path, before the executor", async () => {
      const res = await service.setUpPod(podRequest({ netns: FAKE_HOST_NETNS }));
      expect(res.error?.code).to.equal(ErrorCode.InvalidEnvironment);
      expect(res.error?.msg).to.equal(
        `ADD refused: netns "${FAKE_HOST_NETNS}" is the host's network namespace, never a pod's`,
      );
      expect(res.error?.details).to.equal(`CNI_NETNS=${FAKE_HOST_NETNS}`);
      expect(executor.calls).to.deep.equal([]);
      expect(attachments.size).to.equal(0);
    });

    it("is refused on ADD even while the driver is not ready, with code 4", async () => {
      notReady = ["starting"];
      const res = await service.setUpPod(podRequest({ netns: FAKE_HOST_NETNS }));
      expect(res.error?.code).to.equal(ErrorCode.InvalidEnvironment);
      expect(executor.calls).to.deep.equal([]);
    });

    it("is refused on CHECK with code 4", async () => {
      const res = await service.checkPod(podRequest({ netns: FAKE_HOST_NETNS }));
      expect(res.error?.code).to.equal(ErrorCode.InvalidEnvironment);
      expect(res.error?.msg).to.include("CHECK refused");
      expect(executor.calls).to.deep.equal([]);
    });

    it("on DEL, is torn down as if the netns were gone: the executor gets no netns", async () => {
      const res = await service.tearDownPod(podRequest({ netns: FAKE_HOST_NETNS }));
      expect(res.error).to.equal(null);
      expect(executor.calls.map((c) => [c.verb, c.att?.netns])).to.deep.equal([["DEL", ""]]);
    });
  });

  describe("the pod observer", () => {
    it("hears of a pod set up only after the answer is given", async () => {
      const res = await service.setUpPod(podRequest({ network: "unit-other" }));
      expect(res.error).to.equal(null);
      expect(heard).to.deep.equal([]);
      await settle();
      expect(heard).to.deep.equal(["attached unit-svc/p unit-other 1.0.0"]);
    });

    it("hears where an ADD failed, with the code the caller got", async () => {
      executor.failWith = new CniError(ErrorCode.IOFailure, "disk full");
      await service.setUpPod(podRequest());
      notReady = ["shutting down"];
      await service.setUpPod(podRequest());
      await settle();
      expect(heard).to.deep.equal([
        "failed unit-svc/p unit-net at running the plugin chain: 5",
        "failed unit-svc/p unit-net at waiting for the driver to be ready: 11",
      ]);
    });

    it("hears of a pod torn down, on the network the DEL went to", async () => {
      await service.setUpPod(podRequest({ network: "unit-other" }));
      await service.tearDownPod(podRequest());
      await settle();
      expect(heard).to.deep.equal([
        "attached unit-svc/p unit-other 1.0.0",
        "detached unit-svc/p unit-other",
      ]);
    });
  });

  it("sends a CHECK that names no network to the attachment's own", async () => {
    await service.setUpPod(podRequest({ network: "unit-other" }));
    const res = await service.checkPod(podRequest());
    expect(res.error).to.equal(null);
    expect(executor.calls.map((c) => [c.verb, c.network])).to.deep.equal([
      ["ADD", "unit-other"],
      ["CHECK", "unit-other"],
    ]);
  });

  describe("STATUS", () => {
    const status = (network = "") =>
      service.cniStatus({ api_version: API_VERSION, network, cni_version: "" });

    it("answers 50 with the reasons when not ready, asking no plugin", async () => {
      notReady = ["no valid network configuration loaded"];
      const res = await status();
      expect(res.ready).to.equal(false);
      expect(res.not_ready_reasons).to.deep.equal(["no valid network configuration loaded"]);
      expect(res.error?.code).to.equal(ErrorCode.PluginNotAvailable);
      expect(res.error?.msg).to.equal(
        "cni-driver cannot serve ADD: no valid network configuration loaded",
      );
      expect(executor.calls).to.deep.equal([]);
    });

    it("passes a plugin's own 51 on, and makes any other failure 50", async () => {
      executor.failWith = new CniError(
        ErrorCode.PluginNotAvailableLimitedConnectivity,
        "uplink down",
      );
      const limited = await status("unit-other");
      expect(limited.error?.code).to.equal(ErrorCode.PluginNotAvailableLimitedConnectivity);
      expect(limited.error?.msg).to.equal("uplink down");

      executor.failWith = new CniError(ErrorCode.IOFailure, "cannot read leases");
      const other = await status();
      expect(other.error?.code).to.equal(ErrorCode.PluginNotAvailable);
      expect(other.error?.msg).to.equal("cannot read leases");
      expect(executor.calls.map((c) => [c.verb, c.network])).to.deep.equal([
        ["STATUS", "unit-other"],
        ["STATUS", "unit-net"],
      ]);
    });

    it("is ready, with the config, when the default network's plugins answer", async () => {
      const res = await status();
      expect(res.error).to.equal(null);
      expect(res.ready).to.equal(true);
      expect(res.config?.networks).to.deep.equal(["unit-net", "unit-other"]);
      expect(res.config?.default_network).to.equal("unit-net");
    });
  });

  describe("GC", () => {
    it("waits for the ADD in flight, then drops what it removed from the index and tells the observer", async () => {
      const release = executor.hold();
      const adding = service.setUpPod(podRequest());
      await settle();
      executor.gcRemoved = [
        {
          containerId: "unit-svc-c1",
          ifName: "eth0",
          cniArgs: [
            ["K8S_POD_NAMESPACE", "unit-svc"],
            ["K8S_POD_NAME", "p"],
          ],
        },
      ];
      const collecting = service.garbageCollect({
        api_version: API_VERSION,
        networks: [{ network: "unit-net", valid_attachments: [] }],
        cni_version: "",
      });
      await settle();
      await settle();
      expect(executor.events).to.deep.equal(["ADD start"]);
      release();
      await adding;
      const res = await collecting;
      expect(executor.events).to.deep.equal(["ADD start", "ADD end", "GC"]);
      expect(res).to.deep.equal({ error: null, errors: [], removed_attachments: 1 });
      expect(attachments.size).to.equal(0);
      await settle();
      expect(heard).to.deep.equal([
        "attached unit-svc/p unit-net 1.0.0",
        "detached unit-svc/p unit-net",
      ]);
    });

    it("collects nothing when a network it names is unknown, even one named after a known one", async () => {
      const res = await service.garbageCollect({
        api_version: API_VERSION,
        networks: [
          { network: "unit-net", valid_attachments: [] },
          { network: "unit-nowhere", valid_attachments: [] },
        ],
        cni_version: "",
      });
      expect(res.error?.code).to.equal(ErrorCode.InvalidNetworkConfig);
      expect(res.error?.msg).to.include("unit-nowhere");
      expect(res.removed_attachments).to.equal(0);
      expect(executor.calls.map((c) => c.verb)).to.deep.equal([]);
    });
  });
});
