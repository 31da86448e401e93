/**
 * The controller's pure parts: its flags (defaults, env twins, refusals), the
 * Node annotations it writes (the tunnel zone record through a fake API), and
 * its metrics text.
 */
import { expect } from "chai";
import { parseFlags, UsageError } from "../../src/common/flags.js";
import { DURATION_BUCKETS } from "../../src/common/prometheus.js";
import { MidonetApiError } from "../../src/midonet/api.js";
import { CONTROLLER_FLAGS, controllerOptionsFromFlags } from "../../src/midonet/controller/main.js";
import { ControllerMetrics, errorCode } from "../../src/midonet/controller/metrics.js";
import {
  type AnnotatedNode,
  NodeAnnotator,
  nodeAnnotationPatch,
  recordedTunnelZone,
} from "../../src/midonet/controller/node-annotations.js";
import { parseExposition, value } from "../support/exposition.js";

const API = "http://midonet-api:8181/midonet-api";
const ZONE = "51329ede-9b0f-5923-98ee-bf4ef08af54f";
const HOST = "0b7c3a4e-1111-4a1a-8a1a-000000000001";

const options = (argv: string[], env: NodeJS.ProcessEnv = {}) =>
  controllerOptionsFromFlags(parseFlags(CONTROLLER_FLAGS, argv, env), env);

describe("midonet controller", () => {
  describe("flags", () => {
    it("defaults: in-cluster config, tenant midonetkube, the Lease kube-system/cni-driver-midonet-controller for 15 s renewed every 5 s", () => {
      const o = options(["--midonet-api", API], { POD_NAME: "ctl-7d9f-abcde" });
      expect(o).to.deep.include({
        kubeconfig: "",
        logLevel: "info",
        healthAddr: "127.0.0.1:9768",
        resyncPeriodMs: 600_000,
        hostRefreshMs: 30_000,
        backoffMs: 500,
        maxBackoffMs: 60_000,
      });
      expect(o.mapping).to.deep.equal({ tenant: "midonetkube", tunnelZoneType: "vxlan" });
      expect(o.lease).to.deep.equal({
        namespace: "kube-system",
        name: "cni-driver-midonet-controller",
        identity: "ctl-7d9f-abcde",
        durationMs: 15_000,
        renewPeriodMs: 5_000,
        renewDeadlineMs: 10_000,
      });
      expect(o.midonet).to.deep.equal({
        baseUrl: API,
        user: undefined,
        password: undefined,
        project: undefined,
        timeoutMs: 10_000,
      });
    });

    it("without POD_NAME the identity is hostname_pid", () => {
      expect(options(["--midonet-api", API]).lease.identity).to.match(
        new RegExp(`_${process.pid}$`),
      );
    });

    it("every flag has its env twin; a flag given wins over it", () => {
      const env = {
        CNI_DRIVER_MIDONET_API: API,
        CNI_DRIVER_MIDONET_USER: "admin",
        CNI_DRIVER_MIDONET_PASSWORD: "secret",
        CNI_DRIVER_MIDONET_PROJECT: "admin",
        CNI_DRIVER_TENANT: "envtenant",
        CNI_DRIVER_LEASE_DURATION: "1",
        CNI_DRIVER_LEASE_RENEW_PERIOD: "0.1",
        CNI_DRIVER_LEASE_RENEW_DEADLINE: "0.6",
      };
      const o = options(["--tenant", "flagtenant", "--identity", "me"], env);
      expect(o.midonet).to.deep.include({ user: "admin", password: "secret", project: "admin" });
      expect(o.mapping.tenant).to.equal("flagtenant");
      expect(o.lease).to.deep.include({
        identity: "me",
        durationMs: 1000,
        renewPeriodMs: 100,
        renewDeadlineMs: 600,
      });
    });

    const refused: { argv: string[]; message: RegExp }[] = [
      { argv: [], message: /--midonet-api is required/ },
      { argv: ["--midonet-api", "midonet:8181"], message: /not an http\(s\) URL/ },
      { argv: ["--midonet-api", API, "--tunnel-zone-type", "vtep"], message: /vxlan or gre/ },
      { argv: ["--midonet-api", API, "--tenant", ""], message: /--tenant may not be empty/ },
      { argv: ["--midonet-api", API, "--lease-duration", "0"], message: /positive number/ },
      { argv: ["--midonet-api", API, "--lease-renew-period", "soon"], message: /positive number/ },
      {
        argv: ["--midonet-api", API, "--lease-renew-deadline", "15"],
        message: /deadline must be shorter than --lease-duration/,
      },
      {
        argv: ["--midonet-api", API, "--lease-renew-period", "10"],
        message: /period must be shorter than --lease-renew-deadline/,
      },
      { argv: ["--midonet-api", API, "--log-level", "loud"], message: /unknown level/ },
      // MidoNet's LoginFilter.java refuses credentials that do not split in two on ':'.
      {
        argv: ["--midonet-api", API, "--midonet-user", "admin"],
        message: /non-empty --midonet-password/,
      },
      {
        argv: ["--midonet-api", API, "--midonet-user", "ad:min", "--midonet-password", "x"],
        message: /':'/,
      },
      { argv: ["--midonet-api", API, "--resync"], message: /Unknown option/ },
    ];
    for (const r of refused) {
      it(`refuses ${r.argv.slice(2).join(" ") || r.argv.join(" ") || "no flags"} with a usage error`, () => {
        expect(() => options(r.argv)).to.throw(UsageError, r.message);
      });
    }

    it("--resync-period 0 turns periodic resyncs off", () => {
      expect(options(["--midonet-api", API, "--resync-period", "0"]).resyncPeriodMs).to.equal(0);
    });
  });

  describe("Node annotations", () => {
    const hosts = new Map([
      ["node1", HOST],
      ["node2", "0b7c3a4e-2222-4a2a-8a2a-000000000002"],
    ]);
    const node = (
      name: string,
      annotations: Record<string, string> = {},
      addresses = [{ type: "InternalIP", address: "192.168.0.11" }],
    ): AnnotatedNode => ({ metadata: { name, annotations }, status: { addresses } });

    const table: {
      what: string;
      node: AnnotatedNode;
      patch: Record<string, string> | undefined;
    }[] = [
      {
        what: "a new node: host id by name, the default zone, the first IPv4 InternalIP",
        node: node("node1", {}, [
          { type: "Hostname", address: "node1" },
          { type: "InternalIP", address: "fd00::11" },
          { type: "InternalIP", address: "192.168.0.11" },
        ]),
        patch: {
          "midonet.org/host-id": HOST,
          "midonet.org/tunnel-zone-id": ZONE,
          "midonet.org/tunnel-endpoint-ip": "192.168.0.11",
        },
      },
      {
        what: "a node already annotated: nothing",
        node: node("node1", {
          "midonet.org/host-id": HOST.toUpperCase(),
          "midonet.org/tunnel-zone-id": ZONE,
          "midonet.org/tunnel-endpoint-ip": "192.168.0.11",
        }),
        patch: undefined,
      },
      {
        what: "a host id MidoNet now reports differently (agent re-registered): rewritten",
        node: node("node1", {
          "midonet.org/host-id": "0b7c3a4e-9999-4a1a-8a1a-000000000009",
          "midonet.org/tunnel-zone-id": ZONE,
          "midonet.org/tunnel-endpoint-ip": "192.168.0.11",
        }),
        patch: { "midonet.org/host-id": HOST },
      },
      {
        what: "the operator's tunnel zone and endpoint: kept",
        node: node("node1", {
          "midonet.org/tunnel-zone-id": "aaaaaaaa-0000-4000-8000-000000000001",
          "midonet.org/tunnel-endpoint-ip": "10.0.0.1",
        }),
        patch: { "midonet.org/host-id": HOST },
      },
      {
        what: "no IPv4 InternalIP: no endpoint annotation (the mapping warns)",
        node: node("node2", {}, [{ type: "ExternalIP", address: "203.0.113.1" }]),
        patch: {
          "midonet.org/host-id": "0b7c3a4e-2222-4a2a-8a2a-000000000002",
          "midonet.org/tunnel-zone-id": ZONE,
        },
      },
      {
        what: "a node MidoNet has no host for: nothing yet",
        node: node("node3"),
        patch: undefined,
      },
    ];
    for (const t of table) {
      it(t.what, () => {
        expect(nodeAnnotationPatch(t.node, hosts, ZONE)).to.deep.equal(t.patch);
      });
    }
  });

  describe("the tunnel zone record on the Node (midonet.org/tunnel-zone-joined)", () => {
    const JOINED = "midonet.org/tunnel-zone-joined";
    const OTHER = "aaaaaaaa-0000-4000-8000-000000000001";

    it("reads a UUID, lowercased; anything else is no record", () => {
      const n = (v: string) => ({ metadata: { name: "n", annotations: { [JOINED]: v } } });
      expect(recordedTunnelZone(n(` ${ZONE.toUpperCase()} `))).to.equal(ZONE);
      expect(recordedTunnelZone(n("default"))).to.equal(undefined);
      expect(recordedTunnelZone({ metadata: { name: "n" } })).to.equal(undefined);
    });

    /** An annotator over `nodes` (the informer), its merge patches kept in `patches`. */
    function annotator(nodes: Map<string, AnnotatedNode>, fail = false) {
      const patches: { name: string; body: unknown }[] = [];
      const core = {
        patchNode: async (req: { name: string; body: unknown }) => {
          if (fail) throw Object.assign(new Error("conflict"), { code: 500 });
          patches.push(req);
          return {};
        },
      };
      const a = new NodeAnnotator({
        core: core as never,
        midonet: { hosts: { list: async () => [] } } as never,
        defaultTunnelZone: ZONE,
        getNode: (name) => nodes.get(name),
        listNodes: () => [...nodes.values()],
      });
      return { a, patches };
    }

    it("writes the record as a merge patch of that key alone, and reads its own write before the informer has it", async () => {
      const nodes = new Map<string, AnnotatedNode>([
        ["node1", { metadata: { name: "node1", annotations: { "midonet.org/host-id": HOST } } }],
        ["node2", { metadata: { name: "node2", annotations: { [JOINED]: OTHER } } }],
      ]);
      const { a, patches } = annotator(nodes);
      a.start();
      try {
        expect(a.zoneOf("node1")).to.equal(undefined);
        await a.write("node1", ZONE);
        expect(patches).to.deep.equal([
          { name: "node1", body: { metadata: { annotations: { [JOINED]: ZONE } } } },
        ]);
        expect(a.zoneOf("node1")).to.equal(ZONE);
        // node2 has no host id yet: its record names nothing MidoNet could hold.
        expect([...a.all()]).to.deep.equal([{ node: "node1", zone: ZONE, hostId: HOST }]);

        // The informer catches up, then a removal: null in the merge patch.
        nodes.set("node1", {
          metadata: { name: "node1", annotations: { "midonet.org/host-id": HOST, [JOINED]: ZONE } },
        });
        a.nodeChanged("node1");
        await a.write("node1", undefined);
        expect(patches[1]).to.deep.equal({
          name: "node1",
          body: { metadata: { annotations: { [JOINED]: null } } },
        });
        expect(a.zoneOf("node1")).to.equal(undefined);
        expect([...a.all()]).to.deep.equal([]);
      } finally {
        await a.stop();
      }
    });

    it("a failed write rejects (the reconciler retries the join), as does one after leadership ended", async () => {
      const nodes = new Map<string, AnnotatedNode>([["node1", { metadata: { name: "node1" } }]]);
      const failing = annotator(nodes, true).a;
      failing.start();
      try {
        await failing.write("node1", ZONE).then(
          () => expect.fail("written"),
          (err: Error) => expect(err.message).to.include("HTTP 500"),
        );
        expect(failing.zoneOf("node1")).to.equal(undefined);
      } finally {
        await failing.stop();
      }
      await failing.write("node1", ZONE).then(
        () => expect.fail("written"),
        (err: Error) => expect(err.message).to.include("not leading"),
      );
    });
  });

  describe("metrics", () => {
    const idle = () => ({ desired: 0, pending: 0, held: 0, converged: false });

    it("exposes its counters, gauges and latency histogram in the Prometheus text format", async () => {
      const m = new ControllerMetrics(idle);
      m.write("create", "Bridge");
      m.write("create", "Bridge");
      m.failure(
        "create",
        "Rule",
        new MidonetApiError({
          method: "POST",
          path: "/chains/x/rules",
          status: 500,
          reason: "http",
          attempts: 1,
        }),
      );
      m.apiAttempt({ method: "GET", path: "/", status: 200, attempt: 1, durationMs: 3 });
      m.set("midonet_controller_leader", {}, 1);
      m.inc("midonet_controller_kube_errors_total", { op: "watch-pods" });
      m.inc("midonet_controller_kube_errors_total", { op: "patch-node", code: "409" });
      const text = await m.render();
      expect(text).to.match(/^# TYPE midonet_controller_writes_total counter$/m);
      expect(text).to.match(/^midonet_controller_writes_total\{op="create",kind="Bridge"\} 2$/m);
      const s = parseExposition(text);
      expect(
        value(s, "midonet_controller_errors_total", { op: "create", kind: "Rule", code: "500" }),
      ).to.equal(1);
      expect(value(s, "midonet_controller_leader")).to.equal(1);
      expect(value(s, "midonet_controller_ready")).to.equal(0);
      const hist = "midonet_controller_api_request_duration_seconds";
      expect(value(s, `${hist}_bucket`, { method: "GET", le: "0.0025" })).to.equal(0);
      expect(value(s, `${hist}_bucket`, { method: "GET", le: "0.005" })).to.equal(1);
      expect(value(s, `${hist}_bucket`, { method: "GET", le: "+Inf" })).to.equal(1);
      expect(value(s, `${hist}_count`, { method: "GET" })).to.equal(1);
      expect(value(s, `${hist}_sum`, { method: "GET" })).to.equal(0.003);
      expect(s.filter((x) => x.name === `${hist}_bucket`).map((x) => x.labels.le)).to.deep.equal([
        ...DURATION_BUCKETS.map(String),
        "+Inf",
      ]);
      expect(
        value(s, "midonet_controller_api_requests_total", { method: "GET", code: "200" }),
      ).to.equal(1);
      // One family, two label sets: the code only where there is one.
      expect(value(s, "midonet_controller_kube_errors_total", { op: "watch-pods" })).to.equal(1);
      expect(
        value(s, "midonet_controller_kube_errors_total", { op: "patch-node", code: "409" }),
      ).to.equal(1);
      expect(value(s, "process_resident_memory_bytes")).to.be.greaterThan(0);
    });

    it("reads the state gauges from the controller at each scrape", async () => {
      let state = { desired: 7, pending: 3, held: 1, converged: false };
      const m = new ControllerMetrics(() => state);
      const gauges = async () => {
        const s = parseExposition(await m.render());
        return ["desired_resources", "pending_resources", "held_resources", "converged"].map((g) =>
          value(s, `midonet_controller_${g}`),
        );
      };
      expect(await gauges()).to.deep.equal([7, 3, 1, 0]);
      state = { desired: 9, pending: 0, held: 0, converged: true };
      expect(await gauges()).to.deep.equal([9, 0, 0, 1]);
    });

    it("replaces the mapping warnings by code, dropping codes no longer seen", async () => {
      const m = new ControllerMetrics(idle);
      m.replace("midonet_controller_mapping_warnings", [
        [{ code: "a" }, 2],
        [{ code: "b" }, 1],
      ]);
      m.replace("midonet_controller_mapping_warnings", [[{ code: "b" }, 4]]);
      const s = parseExposition(await m.render());
      const warnings = s.filter((x) => x.name === "midonet_controller_mapping_warnings");
      expect(warnings).to.deep.equal([
        { name: "midonet_controller_mapping_warnings", labels: { code: "b" }, value: 4 },
      ]);
    });

    it("keeps each controller's series to itself when several run in one process", async () => {
      const a = new ControllerMetrics(idle);
      const b = new ControllerMetrics(() => ({ ...idle(), desired: 5 }));
      a.write("delete", "Port");
      b.set("midonet_controller_leader", {}, 1);
      const sa = parseExposition(await a.render());
      const sb = parseExposition(await b.render());
      expect(value(sa, "midonet_controller_writes_total", { op: "delete", kind: "Port" })).to.equal(
        1,
      );
      expect(value(sa, "midonet_controller_leader")).to.equal(0);
      expect(value(sa, "midonet_controller_desired_resources")).to.equal(0);
      expect(sb.filter((x) => x.name === "midonet_controller_writes_total")).to.deep.equal([]);
      expect(value(sb, "midonet_controller_leader")).to.equal(1);
      expect(value(sb, "midonet_controller_desired_resources")).to.equal(5);
    });

    const codes: { err: unknown; code: string }[] = [
      {
        err: new MidonetApiError({
          method: "GET",
          path: "/",
          status: 0,
          reason: "timeout",
          attempts: 1,
        }),
        code: "timeout",
      },
      {
        err: new MidonetApiError({
          method: "GET",
          path: "/",
          status: 404,
          reason: "http",
          attempts: 1,
        }),
        code: "404",
      },
      { err: Object.assign(new Error("x"), { code: 409 }), code: "409" },
      { err: new Error("boom"), code: "error" },
    ];
    for (const c of codes) {
      it(`errorCode: ${(c.err as Error).message || c.code} → ${c.code}`, () => {
        expect(errorCode(c.err)).to.equal(c.code);
      });
    }
  });
});
