/**
 * The Service proxy's decisions, on a fake API and a datapath that records
 * what it is told: when it follows Services at all, what the first sync and a
 * change write, who writes a frontend two Services claim, which UDP flows a
 * change deletes, the retry after a failed transaction, and the health check
 * node ports of Local-policy Services. The nftables text itself is traced in
 * test/unit/services-packet-flow.test.ts.
 */
import http from "node:http";
import net from "node:net";
import { expect } from "chai";
import pino from "pino";
import type {
  FollowedCollection,
  KubeApi,
  KubeObjectView,
  ResourceEventHandlers,
} from "../../src/driver/kube/api.js";
import type { ServicesDatapath } from "../../src/driver/services/kernel-datapath.js";
import { ServiceProxy } from "../../src/driver/services/proxy.js";
import type { Flow } from "../../src/plumbing/conntrack.js";
import { driverConfig } from "../support/driver-config.js";
import { until } from "../support/until.js";

const logger = pino({ level: "silent" });
const NODE = "node-a";
const TABLE = "inet cni-driver-services";
/** A command about a chain of one of the shard tables, whichever holds it. */
const inShard = (command: string, chain: string) =>
  new RegExp(`${command} inet cni-driver-services-\\d+ ${chain}(?:\\s|$)`, "m");

const config = driverConfig;

/**
 * A KubeApi whose collections the test feeds; a collection is listed when the test
 * says so. Objects pass through the watch's transform, as the real API passes them.
 */
class FakeApi {
  readonly handlers = new Map<FollowedCollection, ResourceEventHandlers>();
  private readonly transforms = new Map<FollowedCollection, (o: unknown) => KubeObjectView>();
  stopped: FollowedCollection[] = [];
  readonly server = "fake";

  watchEach(
    resource: FollowedCollection,
    handlers: ResourceEventHandlers,
    transform?: (o: unknown) => KubeObjectView,
  ) {
    this.handlers.set(resource, handlers);
    if (transform) this.transforms.set(resource, transform);
    return {
      synced: false,
      lastError: undefined,
      stop: async () => {
        this.stopped.push(resource);
      },
    };
  }
  private h(resource: FollowedCollection): ResourceEventHandlers {
    const h = this.handlers.get(resource);
    if (!h) throw new Error(`no watch of ${resource}`);
    return h;
  }
  private view(resource: FollowedCollection, o: unknown): KubeObjectView {
    return this.transforms.get(resource)?.(o) ?? (o as KubeObjectView);
  }
  /** Delivers objects and the first list of a collection. */
  list(resource: FollowedCollection, objs: unknown[]) {
    const h = this.h(resource);
    for (const o of objs) h.upsert(this.view(resource, o));
    h.onSynced?.();
  }
  upsert(resource: FollowedCollection, o: unknown) {
    this.h(resource).upsert(this.view(resource, o));
  }
  remove(resource: FollowedCollection, o: unknown) {
    this.h(resource).remove(this.view(resource, o));
  }
}

/**
 * Records the scripts it is given. It follows the map elements the scripts
 * add and delete, and refuses a script that adds a key its map already holds
 * (the kernel's EEXIST) or deletes one it does not (ENOENT), as one
 * transaction: a refused script changes nothing.
 */
class RecordingDatapath implements ServicesDatapath {
  scripts: string[] = [];
  /** Scripts refused for a duplicate or missing element. */
  refused: string[] = [];
  /** Transactions to fail before accepting again. */
  failures = 0;
  flows: Flow[] = [];
  deleted: Flow[] = [];
  listed = 0;
  tableDeleted = 0;
  /** map|key of the elements the table holds. */
  elements = new Set<string>();

  async applyScript(script: string) {
    if (this.failures > 0) {
      this.failures--;
      throw new Error("nft: Could not process rule: Operation not permitted");
    }
    const els = new Set(this.elements);
    for (const line of script.split("\n")) {
      if (line === `delete table ${TABLE}`) els.clear();
      const m = /^(add|delete) element inet cni-driver-services(?:-\d+)? (\S+) \{ (.*) \}$/.exec(
        line,
      );
      if (!m) continue;
      const [, verb, map, items] = m as unknown as [string, string, string, string];
      for (const item of items.split(", ")) {
        const k = `${map}|${item.split(" : ")[0]}`;
        if (verb === "add" ? els.has(k) : !els.has(k)) {
          this.refused.push(script);
          throw new Error(`nft: ${verb} element ${k}: ${verb === "add" ? "EEXIST" : "ENOENT"}`);
        }
        if (verb === "add") els.add(k);
        else els.delete(k);
      }
    }
    this.elements = els;
    this.scripts.push(script);
  }
  async deleteTable() {
    this.tableDeleted++;
    this.elements.clear();
  }
  async listFlows() {
    this.listed++;
    return this.flows;
  }
  async deleteFlow(f: Flow) {
    this.deleted.push(f);
  }
  get last(): string {
    return this.scripts[this.scripts.length - 1] ?? "";
  }
}

interface SvcOpts {
  ip: string;
  port?: number;
  protocol?: "TCP" | "UDP";
  type?: "ClusterIP" | "NodePort";
  nodePort?: number;
  externalIPs?: string[];
  local?: boolean;
  healthCheckNodePort?: number;
}

function service(namespace: string, name: string, o: SvcOpts) {
  return {
    metadata: { namespace, name, resourceVersion: "1" },
    spec: {
      type: o.type ?? "ClusterIP",
      clusterIP: o.ip,
      clusterIPs: [o.ip],
      ports: [
        {
          name: "p",
          protocol: o.protocol ?? "TCP",
          port: o.port ?? 80,
          ...(o.nodePort ? { nodePort: o.nodePort } : {}),
        },
      ],
      ...(o.externalIPs ? { externalIPs: o.externalIPs } : {}),
      ...(o.local ? { externalTrafficPolicy: "Local" } : {}),
      ...(o.healthCheckNodePort ? { healthCheckNodePort: o.healthCheckNodePort } : {}),
    },
  };
}

/** The EndpointSlice `<name>-1` of a Service; endpoints as [ip, node]. */
function slice(
  namespace: string,
  name: string,
  eps: Array<[string, string]>,
  o: { port?: number; protocol?: "TCP" | "UDP" } = {},
) {
  return {
    metadata: {
      namespace,
      name: `${name}-1`,
      resourceVersion: "1",
      labels: { "kubernetes.io/service-name": name },
    },
    addressType: "IPv4",
    endpoints: eps.map(([ip, nodeName]) => ({
      addresses: [ip],
      conditions: { ready: true },
      nodeName,
    })),
    ports: [{ name: "p", protocol: o.protocol ?? "TCP", port: o.port ?? 8080 }],
  };
}

const udpFlow = (dst: string, dport: number, ep: string, epPort: number, src = "10.244.1.9") => ({
  protocol: "udp" as const,
  original: { src, dst, sport: 40_000, dport },
  reply: { src: ep, dst: src, sport: epPort, dport: 40_000 },
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The `svc-` chain a ClusterIP's element leads to, read from a script. */
function chainOf(script: string, clusterIp: string, proto = "tcp", port = 80): string {
  const m = new RegExp(
    `${clusterIp.replaceAll(".", "\\.")} \\. ${proto} \\. ${port} : goto (svc-[0-9a-f]+)`,
  ).exec(script);
  if (!m) throw new Error(`no element for ${clusterIp} in the script`);
  return m[1] as string;
}

/** A TCP port nothing listens on now. */
async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise((r) => s.close(r));
  return port;
}

/** A GET of the health check: status and body, or undefined when the port refuses. */
function healthz(
  port: number,
): Promise<{ status: number; body: Record<string, unknown> } | undefined> {
  return new Promise((resolve) => {
    const req = http.get({ host: "127.0.0.1", port, path: "/healthz", agent: false }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (c) => {
        text += c;
      });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) }));
    });
    req.on("error", () => resolve(undefined));
  });
}

describe("service proxy", () => {
  let api: FakeApi;
  let dp: RecordingDatapath;
  let proxy: ServiceProxy;

  const start = async (
    settings: Record<string, unknown> = { services: "driver" },
    datapath = "kernel",
  ) => {
    proxy = new ServiceProxy({
      logger,
      api: Promise.resolve(api as unknown as KubeApi),
      nodeName: NODE,
      datapath: dp,
    });
    await proxy.apply(config(settings, datapath));
  };

  /** Waits for the n-th script, then a moment more to be sure no other follows. */
  const scripts = async (n: number) => {
    await until(() => dp.scripts.length >= n, `script ${n}`, 2_000, 5);
    await sleep(20);
    expect(dp.scripts, "scripts written").to.have.length(n);
  };

  beforeEach(() => {
    api = new FakeApi();
    dp = new RecordingDatapath();
  });
  afterEach(async () => {
    await proxy?.stop();
    expect(dp.refused, "scripts the kernel would refuse").to.deep.equal([]);
  });

  describe("switching", () => {
    it('is off by default and with "kube-proxy": nothing followed, nothing written', async () => {
      await start({});
      await proxy.apply(config({ services: "kube-proxy" }));
      expect(api.handlers.size).to.equal(0);
      expect(dp.scripts).to.deep.equal([]);
      expect(dp.tableDeleted).to.equal(0);
    });

    it('with "driver" but no kernel-datapath network, nothing is followed', async () => {
      await start({ services: "driver" }, "midonet");
      expect(api.handlers.size).to.equal(0);
      expect(dp.scripts).to.deep.equal([]);
    });

    it("follows services and endpointslices when on; switching off stops both and deletes the table", async () => {
      await start();
      expect([...api.handlers.keys()]).to.have.members(["services", "endpointslices"]);
      api.list("services", [service("default", "web", { ip: "10.96.0.10" })]);
      api.list("endpointslices", []);
      await scripts(1);
      await proxy.apply(config({ services: "kube-proxy" }));
      expect(api.stopped).to.have.members(["services", "endpointslices"]);
      expect(dp.tableDeleted).to.equal(1);
      // A late event of the stopped watch writes nothing.
      api.upsert("endpointslices", slice("default", "web", [["10.244.1.5", NODE]]));
      await sleep(20);
      expect(dp.scripts).to.have.length(1);
    });

    it("switching on again writes the table whole", async () => {
      await start();
      api.list("services", [service("default", "web", { ip: "10.96.0.10" })]);
      api.list("endpointslices", []);
      await scripts(1);
      await proxy.apply(config({}));
      await proxy.apply(config({ services: "driver" }));
      api.list("services", [service("default", "web", { ip: "10.96.0.10" })]);
      api.list("endpointslices", []);
      await scripts(2);
      expect(dp.last).to.include(`delete table ${TABLE}`);
    });
  });

  describe("syncing", () => {
    const web = service("default", "web", { ip: "10.96.0.10" });
    const db = service("default", "db", { ip: "10.96.0.11" });
    const dns = service("kube-system", "dns", { ip: "10.96.0.12" });

    it("writes nothing before both collections are listed, then the whole table in one script", async () => {
      await start();
      api.list("services", [web, db, dns]);
      await sleep(30);
      expect(dp.scripts).to.deep.equal([]);
      api.list("endpointslices", [
        slice("default", "web", [["10.244.1.5", NODE]]),
        slice("kube-system", "dns", [["10.244.2.6", "node-b"]]),
      ]);
      await scripts(1);
      const s = dp.scripts[0] as string;
      expect(s).to.match(new RegExp(`^table ${TABLE} \\{\\}\\ndelete table ${TABLE}\\n`));
      expect(s).to.match(/10\.96\.0\.10 \. tcp \. 80 : goto svc-/);
      expect(s).to.match(/10\.96\.0\.12 \. tcp \. 80 : goto svc-/);
      // db has no endpoint: its ClusterIP is rejected.
      expect(s).to.match(
        /no-endpoint-services \{[^}]*10\.96\.0\.11 \. tcp \. 80 : goto reject-service/,
      );
      expect(s).to.include("dnat ip to 10.244.1.5:8080");
      expect(s).to.include("dnat ip to 10.244.2.6:8080");
    });

    it("the slices listed first and the Services second make the same single script", async () => {
      await start();
      api.list("endpointslices", [slice("default", "web", [["10.244.1.5", NODE]])]);
      await sleep(30);
      expect(dp.scripts).to.deep.equal([]);
      api.list("services", [web]);
      await scripts(1);
      expect(dp.last).to.include(`delete table ${TABLE}`);
      expect(dp.last).to.include("dnat ip to 10.244.1.5:8080");
    });

    it("one EndpointSlice change rewrites that Service's chain alone, without dropping the table", async () => {
      await start();
      api.list("services", [web, db]);
      api.list("endpointslices", [
        slice("default", "web", [["10.244.1.5", NODE]]),
        slice("default", "db", [["10.244.1.6", NODE]]),
      ]);
      await scripts(1);
      const webChain = chainOf(dp.last, "10.96.0.10");
      const dbChain = chainOf(dp.last, "10.96.0.11");
      expect(webChain).not.to.equal(dbChain);
      api.upsert("endpointslices", slice("default", "web", [["10.244.1.7", NODE]]));
      await scripts(2);
      const s = dp.last;
      expect(s).not.to.include("delete table");
      expect(s).to.match(inShard("flush chain", webChain));
      expect(s).to.include("dnat ip to 10.244.1.7:8080");
      expect(s).not.to.include(dbChain);
      expect(s).not.to.include("10.244.1.6");
    });

    it("a burst of events for several Services is one script", async () => {
      await start();
      api.list("services", [web, db, dns]);
      api.list("endpointslices", [
        slice("default", "web", [["10.244.1.5", NODE]]),
        slice("default", "db", [["10.244.1.6", NODE]]),
        slice("kube-system", "dns", [["10.244.2.6", "node-b"]]),
      ]);
      await scripts(1);
      const [webChain, dbChain, dnsChain] = ["10.96.0.10", "10.96.0.11", "10.96.0.12"].map((ip) =>
        chainOf(dp.last, ip),
      );
      api.upsert("endpointslices", slice("default", "web", [["10.244.1.7", NODE]]));
      api.upsert("endpointslices", slice("kube-system", "dns", [["10.244.2.8", "node-b"]]));
      api.upsert("services", service("default", "web", { ip: "10.96.0.10", port: 81 }));
      await scripts(2);
      const s = dp.last;
      expect(s).not.to.include("delete table");
      expect(s).to.include("dnat ip to 10.244.1.7:8080");
      expect(s).to.include("dnat ip to 10.244.2.8:8080");
      expect(s).to.match(inShard("flush chain", dnsChain as string));
      // web's port changed: a new chain for the new port, the old one deleted.
      expect(s).to.match(inShard("delete chain", webChain as string));
      expect(s).to.match(/10\.96\.0\.10 \. tcp \. 81 : goto svc-/);
      expect(s).not.to.include(dbChain as string);
    });

    it("a change that alters nothing writes nothing", async () => {
      await start();
      api.list("services", [web]);
      api.list("endpointslices", [slice("default", "web", [["10.244.1.5", NODE]])]);
      await scripts(1);
      api.upsert("endpointslices", slice("default", "web", [["10.244.1.5", NODE]]));
      api.upsert("services", web);
      await scripts(1);
    });

    it("a Service deleted takes its chain and elements away", async () => {
      await start();
      api.list("services", [web, db]);
      api.list("endpointslices", [slice("default", "web", [["10.244.1.5", NODE]])]);
      await scripts(1);
      const webChain = chainOf(dp.last, "10.96.0.10");
      api.remove("services", { metadata: { namespace: "default", name: "web" } });
      await scripts(2);
      expect(dp.last).to.match(inShard("delete chain", webChain));
      expect(dp.last).to.match(
        /delete element inet cni-driver-services-\d+ service-ips \{ 10\.96\.0\.10 \. tcp \. 80 \}/,
      );
      expect(dp.elements.has("service-ips|10.96.0.10 . tcp . 80")).to.equal(false);
    });
  });

  describe("two Services claiming one externalIP and port", () => {
    const SHARED = "198.51.100.99 . tcp . 80";
    const one = service("a", "one", { ip: "10.96.0.21", externalIPs: ["198.51.100.99"] });
    const two = service("b", "two", { ip: "10.96.0.22", externalIPs: ["198.51.100.99"] });
    const count = (s: string, what: string) => s.split(what).length - 1;

    it("the first by namespace/name gets the element; deleting it hands the frontend to the other", async () => {
      await start();
      // Listed in the other order: the owner is still a/one.
      api.list("services", [two, one]);
      api.list("endpointslices", [
        slice("a", "one", [["10.244.1.5", NODE]]),
        slice("b", "two", [["10.244.1.6", NODE]]),
      ]);
      await scripts(1);
      const oneExt = chainOf(dp.last, "10.96.0.21").replace(/^svc-/, "ext-");
      const twoExt = chainOf(dp.last, "10.96.0.22").replace(/^svc-/, "ext-");
      expect(count(dp.last, SHARED)).to.equal(1);
      expect(dp.last).to.include(`${SHARED} : goto ${oneExt}`);
      // The other's chains are written all the same, ready for a takeover.
      expect(dp.last).to.match(inShard("add chain", twoExt));

      api.remove("services", { metadata: { namespace: "a", name: "one" } });
      await scripts(2);
      expect(dp.last).not.to.include("delete table");
      expect(dp.last).to.include(`${SHARED} : goto ${twoExt}`);
      expect(dp.last).to.match(inShard("delete chain", oneExt));
      expect(dp.elements.has(`service-ips|${SHARED}`)).to.equal(true);
    });

    it("a second claimant arriving later writes nothing for the shared key, and the owner's deletion later still works", async () => {
      await start();
      api.list("services", [one]);
      api.list("endpointslices", [
        slice("a", "one", [["10.244.1.5", NODE]]),
        slice("b", "two", [["10.244.1.6", NODE]]),
      ]);
      await scripts(1);
      api.upsert("services", two);
      await scripts(2);
      expect(dp.last).not.to.include(SHARED);
      expect(dp.last).to.include("10.96.0.22 . tcp . 80 : goto svc-");
      // The other Service changing does not touch the owner's element.
      api.upsert("endpointslices", slice("b", "two", [["10.244.1.8", NODE]]));
      await scripts(3);
      expect(dp.last).not.to.include(SHARED);
      api.remove("services", { metadata: { namespace: "a", name: "one" } });
      await scripts(4);
      const twoExt = chainOf(dp.scripts[1] as string, "10.96.0.22").replace(/^svc-/, "ext-");
      expect(dp.last).to.include(`${SHARED} : goto ${twoExt}`);
      // And the last claimant gone, the key goes too.
      api.remove("services", { metadata: { namespace: "b", name: "two" } });
      await scripts(5);
      expect(dp.elements.has(`service-ips|${SHARED}`)).to.equal(false);
    });

    it("the owner losing its endpoints rejects the frontend: one Service answers it, never half of each", async () => {
      await start();
      api.list("services", [one, two]);
      api.list("endpointslices", [
        slice("a", "one", [["10.244.1.5", NODE]]),
        slice("b", "two", [["10.244.1.6", NODE]]),
      ]);
      await scripts(1);
      api.remove("endpointslices", slice("a", "one", []));
      await scripts(2);
      const line = (verb: string, map: string) =>
        dp.last
          .split("\n")
          .find((l) =>
            new RegExp(`^${verb} element inet cni-driver-services(-\\d+)? ${map} `).test(l),
          ) ?? "";
      expect(line("add", "no-endpoint-services")).to.include(`${SHARED} : goto reject-service`);
      expect(line("delete", "service-ips")).to.include(SHARED);
      const twoExt = chainOf(dp.scripts[0] as string, "10.96.0.22").replace(/^svc-/, "ext-");
      expect(dp.last).to.not.include(`${SHARED} : goto ${twoExt}`);
    });
  });

  describe("UDP conntrack hygiene", () => {
    const dnsSvc = service("kube-system", "dns", { ip: "10.96.0.10", port: 53, protocol: "UDP" });
    const other = service("default", "syslog", { ip: "10.96.0.11", port: 53, protocol: "UDP" });
    const dnsSlice = (eps: Array<[string, string]>) =>
      slice("kube-system", "dns", eps, { port: 5353, protocol: "UDP" });

    const startUdp = async () => {
      await start();
      api.list("services", [dnsSvc, other]);
      api.list("endpointslices", [
        dnsSlice([
          ["10.244.1.5", NODE],
          ["10.244.2.6", "node-b"],
        ]),
        slice("default", "syslog", [["10.244.3.3", "node-c"]], { port: 5353, protocol: "UDP" }),
      ]);
      await scripts(1);
    };

    it("replacing an endpoint deletes exactly the UDP flows it answered through the Service", async () => {
      await startUdp();
      const viaOld = udpFlow("10.96.0.10", 53, "10.244.1.5", 5353);
      const viaKept = udpFlow("10.96.0.10", 53, "10.244.2.6", 5353, "10.244.1.10");
      const tcpToOld: Flow = {
        protocol: "tcp",
        state: "ESTABLISHED",
        original: { src: "10.244.1.9", dst: "10.96.0.10", sport: 40_001, dport: 53 },
        reply: { src: "10.244.1.5", dst: "10.244.1.9", sport: 5353, dport: 40_001 },
      };
      const oldOtherPort = udpFlow("10.96.0.99", 53, "10.244.1.5", 9999);
      const directToOld = udpFlow("10.244.1.5", 5353, "10.244.1.5", 5353, "10.244.1.11");
      const otherService = udpFlow("10.96.0.11", 53, "10.244.3.3", 5353);
      dp.flows = [viaOld, viaKept, tcpToOld, oldOtherPort, directToOld, otherService];
      api.upsert(
        "endpointslices",
        dnsSlice([
          ["10.244.1.7", NODE],
          ["10.244.2.6", "node-b"],
        ]),
      );
      await scripts(2);
      await until(() => dp.listed > 0, "the flows listed", 2_000, 5);
      await sleep(20);
      expect(dp.deleted).to.deep.equal([viaOld]);
    });

    it("deleting a UDP Service deletes the flows to its ClusterIP and port", async () => {
      await startUdp();
      const toDns = udpFlow("10.96.0.10", 53, "10.244.2.6", 5353);
      const toDnsOtherPort = udpFlow("10.96.0.10", 54, "10.244.9.9", 54);
      const toOther = udpFlow("10.96.0.11", 53, "10.244.3.3", 5353);
      const tcpToDns: Flow = {
        protocol: "tcp",
        original: { src: "10.244.1.9", dst: "10.96.0.10", sport: 40_001, dport: 53 },
        reply: { src: "10.244.9.8", dst: "10.244.1.9", sport: 53, dport: 40_001 },
      };
      dp.flows = [toDns, toDnsOtherPort, toOther, tcpToDns];
      api.remove("services", { metadata: { namespace: "kube-system", name: "dns" } });
      await scripts(2);
      await until(() => dp.listed > 0, "the flows listed", 2_000, 5);
      await sleep(20);
      expect(dp.deleted).to.deep.equal([toDns]);
    });

    it("a UDP Service getting its first endpoint deletes the flows of the reject", async () => {
      await start();
      api.list("services", [dnsSvc]);
      api.list("endpointslices", []);
      await scripts(1);
      const rejected = udpFlow("10.96.0.10", 53, "10.244.1.9", 40_000);
      rejected.reply = { src: "10.96.0.10", dst: "10.244.1.9", sport: 53, dport: 40_000 };
      dp.flows = [rejected];
      api.upsert("endpointslices", dnsSlice([["10.244.1.5", NODE]]));
      await scripts(2);
      await until(() => dp.deleted.length > 0, "the flow deleted", 2_000, 5);
      expect(dp.deleted).to.deep.equal([rejected]);
    });

    it("a TCP endpoint change deletes nothing", async () => {
      await start();
      api.list("services", [service("default", "web", { ip: "10.96.0.20" })]);
      api.list("endpointslices", [slice("default", "web", [["10.244.1.5", NODE]])]);
      await scripts(1);
      dp.flows = [
        {
          protocol: "tcp",
          state: "ESTABLISHED",
          original: { src: "10.244.1.9", dst: "10.96.0.20", sport: 40_001, dport: 80 },
          reply: { src: "10.244.1.5", dst: "10.244.1.9", sport: 8080, dport: 40_001 },
        },
      ];
      api.upsert("endpointslices", slice("default", "web", [["10.244.1.7", NODE]]));
      await scripts(2);
      await sleep(20);
      expect(dp.deleted).to.deep.equal([]);
      expect(dp.listed).to.equal(0);
    });
  });

  describe("slices, stops and switches under way", () => {
    it("a slice is known by namespace and name: removing one leaves a same-named slice of another namespace", async () => {
      await start();
      api.list("services", [
        service("ns1", "db", { ip: "10.96.0.31" }),
        service("ns2", "db", { ip: "10.96.0.32" }),
      ]);
      api.list("endpointslices", [
        slice("ns1", "db", [["10.244.1.5", NODE]]),
        slice("ns2", "db", [["10.244.1.6", NODE]]),
      ]);
      await scripts(1);
      // What a re-list delivers for a slice gone meanwhile: its namespace and name only.
      api.remove("endpointslices", { metadata: { namespace: "ns1", name: "db-1" } });
      await scripts(2);
      expect(dp.last).to.include("10.96.0.31 . tcp . 80 : goto reject-service");
      expect(dp.last).to.not.include("10.96.0.32");
    });

    it("a slice relabelled to another Service leaves the old one", async () => {
      await start();
      api.list("services", [
        service("ns1", "a", { ip: "10.96.0.41" }),
        service("ns1", "b", { ip: "10.96.0.42" }),
      ]);
      api.list("endpointslices", [slice("ns1", "a", [["10.244.1.5", NODE]])]);
      await scripts(1);
      const moved = slice("ns1", "a", [["10.244.1.5", NODE]]);
      moved.metadata.labels["kubernetes.io/service-name"] = "b";
      api.upsert("endpointslices", moved);
      await scripts(2);
      expect(dp.last).to.include("10.96.0.41 . tcp . 80 : goto reject-service");
      expect(dp.last).to.match(/10\.96\.0\.42 \. tcp \. 80 : goto svc-/);
    });

    /** The datapath's next script waits until the test lets it go; `entered` and `ended` say how far it got. */
    const holdNextScript = () => {
      const hold = { entered: false, ended: false, release: () => {} };
      const held = new Promise<void>((r) => {
        hold.release = r;
      });
      const apply = dp.applyScript.bind(dp);
      dp.applyScript = async (script: string) => {
        dp.applyScript = apply;
        hold.entered = true;
        await held;
        await apply(script);
        hold.ended = true;
      };
      return hold;
    };

    it("stop() during a write: the health check port stays closed after the write ends", async () => {
      const port = await freePort();
      await start();
      const hold = holdNextScript();
      api.list("services", [
        service("default", "lb", {
          ip: "10.96.0.50",
          type: "NodePort",
          nodePort: 30050,
          local: true,
          healthCheckNodePort: port,
        }),
      ]);
      api.list("endpointslices", [slice("default", "lb", [["10.244.1.5", NODE]])]);
      await until(() => hold.entered, "the write under way", 2_000, 5);
      await proxy.stop();
      hold.release();
      await until(() => hold.ended, "the write's end", 2_000, 5);
      expect(await healthz(port)).to.equal(undefined);
    });

    it("switching off during a write deletes the table after the write, never before", async () => {
      await start();
      const hold = holdNextScript();
      let writeEndedFirst: boolean | undefined;
      const del = dp.deleteTable.bind(dp);
      dp.deleteTable = async () => {
        writeEndedFirst = hold.ended;
        await del();
      };
      api.list("services", [service("default", "web", { ip: "10.96.0.10" })]);
      api.list("endpointslices", []);
      await until(() => hold.entered, "the write under way", 2_000, 5);
      const off = proxy.apply(config({ services: "kube-proxy" }));
      // Time for a switch that does not wait to delete the table under the write.
      await sleep(20);
      hold.release();
      await off;
      expect(writeEndedFirst).to.equal(true);
    });

    it("a failed write of an endpoint change still deletes the old endpoint's UDP flows after the retry", async () => {
      await start();
      const dns = service("kube-system", "dns", { ip: "10.96.0.10", port: 53, protocol: "UDP" });
      const eps = (ip: string) =>
        slice("kube-system", "dns", [[ip, NODE]], { port: 5353, protocol: "UDP" });
      api.list("services", [dns]);
      api.list("endpointslices", [eps("10.244.1.5")]);
      await scripts(1);
      dp.flows = [udpFlow("10.96.0.10", 53, "10.244.1.5", 5353)];
      dp.failures = 1;
      api.upsert("endpointslices", eps("10.244.1.6"));
      await until(() => dp.deleted.length > 0, "the old endpoint's flow deleted", 3_000, 10);
      expect(dp.last).to.include(`delete table ${TABLE}`);
      expect(dp.deleted).to.deep.equal(dp.flows);
    });
  });

  describe("a failed transaction", () => {
    it("is retried, and the retry writes the table whole", async () => {
      await start();
      api.list("services", [service("default", "web", { ip: "10.96.0.10" })]);
      api.list("endpointslices", [slice("default", "web", [["10.244.1.5", NODE]])]);
      await scripts(1);
      dp.failures = 1;
      api.upsert("endpointslices", slice("default", "web", [["10.244.1.7", NODE]]));
      await until(() => dp.failures === 0, "the failure", 2_000, 5);
      await until(() => dp.scripts.length === 2, "the retry", 3_000, 10);
      const s = dp.last;
      expect(s).to.include(`delete table ${TABLE}`);
      expect(s).to.include("dnat ip to 10.244.1.7:8080");
      expect(s).not.to.include("10.244.1.5");
    });

    it("a first sync that fails is retried whole too", async () => {
      await start();
      dp.failures = 1;
      api.list("services", [service("default", "web", { ip: "10.96.0.10" })]);
      api.list("endpointslices", [slice("default", "web", [["10.244.1.5", NODE]])]);
      await until(() => dp.scripts.length === 1, "the retry", 3_000, 10);
      expect(dp.last).to.include(`delete table ${TABLE}`);
      expect(dp.last).to.include("10.96.0.10 . tcp . 80 : goto svc-");
    });
  });

  describe("health check node ports", () => {
    let port: number;
    const web = () =>
      service("default", "web", {
        ip: "10.96.0.30",
        type: "NodePort",
        nodePort: 30_080,
        local: true,
        healthCheckNodePort: port,
      });

    beforeEach(async () => {
      port = await freePort();
    });

    const startWeb = async () => {
      await start();
      api.list("services", [web()]);
      api.list("endpointslices", [slice("default", "web", [["10.244.2.6", "node-b"]])]);
      await scripts(1);
      return until(() => healthz(port), "the health check port", 2_000, 10);
    };

    it("answers 503 without a local endpoint, 200 once one is on this node", async () => {
      const first = await startWeb();
      expect(first.status).to.equal(503);
      expect(first.body).to.deep.equal({
        service: { namespace: "default", name: "web" },
        localEndpoints: 0,
        serviceProxyHealthy: true,
      });
      api.upsert(
        "endpointslices",
        slice("default", "web", [
          ["10.244.2.6", "node-b"],
          ["10.244.1.5", NODE],
        ]),
      );
      const ok = await until(
        async () => {
          const r = await healthz(port);
          return r?.status === 200 ? r : undefined;
        },
        "a 200",
        2_000,
        10,
      );
      expect(ok.body.localEndpoints).to.equal(1);
    });

    it("closes when the Service is deleted", async () => {
      await startWeb();
      api.remove("services", { metadata: { namespace: "default", name: "web" } });
      await until(async () => (await healthz(port)) === undefined, "the port closed", 2_000, 10);
    });

    it("closes when the proxy stops", async () => {
      await startWeb();
      await proxy.stop();
      await until(async () => (await healthz(port)) === undefined, "the port closed", 2_000, 10);
    });

    it("closes when the Service no longer asks for Local policy", async () => {
      await startWeb();
      const cluster = web();
      (cluster.spec as Record<string, unknown>).externalTrafficPolicy = "Cluster";
      api.upsert("services", cluster);
      await until(async () => (await healthz(port)) === undefined, "the port closed", 2_000, 10);
    });
  });

  describe("what of its own Node the proxy reads: IPs and zone", () => {
    let facts: { ipv4?: string; zone?: string };
    const startWith = async (f: { ipv4?: string; zone?: string }) => {
      facts = f;
      proxy = new ServiceProxy({
        logger,
        api: Promise.resolve(api as unknown as KubeApi),
        nodeName: NODE,
        localNode: () => facts,
        datapath: dp,
      });
      await proxy.apply(config({ services: "driver" }));
    };
    /** Endpoints [ip, node, zone hint], as the EndpointSlice controller writes them for PreferSameZone. */
    const zonal = (eps: Array<[string, string, string]>) => {
      const o = slice(
        "default",
        "web",
        eps.map(([ip, node]) => [ip, node]),
      );
      o.endpoints.forEach((e, i) => {
        Object.assign(e, { hints: { forZones: [{ name: eps[i]?.[2] }] } });
      });
      return o;
    };

    it("loadBalancerSourceRanges reach the script through the watch: a fw- chain in front of the load balancer's IP", async () => {
      await startWith({ ipv4: "192.168.0.2" });
      const lb = service("default", "web", { ip: "10.96.0.10" });
      Object.assign(lb.spec, {
        type: "LoadBalancer",
        loadBalancerSourceRanges: [" 203.0.113.9/24"],
      });
      Object.assign(lb, { status: { loadBalancer: { ingress: [{ ip: "198.51.100.5" }] } } });
      api.list("services", [lb]);
      api.list("endpointslices", [slice("default", "web", [["10.244.2.5", "node-b"]])]);
      await scripts(1);
      const fw = /198\.51\.100\.5 \. tcp \. 80 : goto (fw-[0-9a-f]+)/.exec(dp.last)?.[1];
      expect(fw, "the load balancer IP's element").to.be.a("string");
      expect(dp.last).to.match(
        new RegExp(`add rule inet \\S+ ${fw} ip saddr 203\\.0\\.113\\.0/24 goto ext-`),
      );
      expect(dp.last).to.match(new RegExp(`add rule inet \\S+ ${fw} drop`));
    });

    it("topology hints reach the script through the watch: this zone's endpoints only, and a new zone rewrites", async () => {
      await startWith({ zone: "zone-a" });
      api.list("services", [service("default", "web", { ip: "10.96.0.10" })]);
      api.list("endpointslices", [
        zonal([
          ["10.244.1.5", "node-a", "zone-a"],
          ["10.244.2.5", "node-b", "zone-b"],
        ]),
      ]);
      await scripts(1);
      expect(dp.last).to.include("dnat ip to 10.244.1.5:8080");
      expect(dp.last).not.to.include("10.244.2.5");
      facts = { zone: "zone-b" };
      proxy.nodeChanged();
      await scripts(2);
      expect(dp.last).to.include("dnat ip to 10.244.2.5:8080");
      expect(dp.last).not.to.include("dnat ip to 10.244.1.5:8080");
    });

    it("a node change that changes nothing the rules depend on writes nothing", async () => {
      await startWith({ zone: "zone-a" });
      api.list("services", [service("default", "web", { ip: "10.96.0.10" })]);
      api.list("endpointslices", [slice("default", "web", [["10.244.1.5", NODE]])]);
      await scripts(1);
      proxy.nodeChanged();
      await scripts(1);
    });
  });
});
