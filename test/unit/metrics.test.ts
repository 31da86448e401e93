import { expect } from "chai";
import {
  Counter,
  DURATION_BUCKETS,
  Gauge,
  Histogram,
  Registry,
} from "../../src/common/prometheus.js";
import { Metrics } from "../../src/driver/metrics.js";
import { find, parseExposition, type Sample, value } from "../support/exposition.js";

/** The driver's own samples, sorted (the process's change from one scrape to the next). */
async function driverSeries(m: Metrics): Promise<Sample[]> {
  const key = (x: Sample) => JSON.stringify([x.name, Object.entries(x.labels).sort()]);
  return parseExposition(await m.render())
    .filter((x) => x.name.startsWith("cni_driver_"))
    .sort((x, y) => (key(x) < key(y) ? -1 : key(x) > key(y) ? 1 : 0));
}

function buckets(samples: Sample[], verb: string): [string, number][] {
  return samples
    .filter((s) => s.name === "cni_driver_call_duration_seconds_bucket" && s.labels.verb === verb)
    .map((s) => [s.labels.le!, s.value]);
}

describe("driver/metrics", () => {
  // The checker below is what the other cases trust; it must reject what is not 0.0.4.
  for (const bad of [
    "x_total 1\n", // sample before HELP/TYPE
    '# HELP x_total h\n# TYPE x_total counter\nx_total{a="b"c"} 1\n', // raw quote
    '# HELP x_total h\n# TYPE x_total counter\nx_total{a="b"}1\n', // no space
    "# HELP x_total h\n# TYPE x_total counter\ny_total 1\n", // foreign sample
    "# HELP x_total h\n# TYPE x_total counter\nx_total 1", // no final newline
  ]) {
    it(`the exposition checker rejects ${JSON.stringify(bad)}`, async () => {
      expect(() => parseExposition(bad)).to.throw();
    });
  }

  it("renders every family with zero values before any call", async () => {
    const samples = parseExposition(await new Metrics().render());
    expect(value(samples, "cni_driver_attachments")).to.equal(0);
    expect(value(samples, "cni_driver_config_reloads_total")).to.equal(0);
    expect(value(samples, "cni_driver_config_reload_errors_total")).to.equal(0);
    expect(value(samples, "cni_driver_config_generation")).to.equal(0);
    expect(value(samples, "cni_driver_ready")).to.equal(0);
    expect(samples.filter((s) => s.name.startsWith("cni_driver_call"))).to.deep.equal([]);
  });

  it("declares each family with HELP and TYPE, in a fixed order, an unset one with no samples", async () => {
    const text = await new Metrics().render();
    const types = text
      .split("\n")
      .filter((l) => l.startsWith("# TYPE cni_driver_"))
      .map((l) => l.slice("# TYPE ".length));
    expect(types).to.deep.equal([
      "cni_driver_calls_total counter",
      "cni_driver_call_errors_total counter",
      "cni_driver_call_duration_seconds histogram",
      "cni_driver_attachments gauge",
      "cni_driver_config_reloads_total counter",
      "cni_driver_config_reload_errors_total counter",
      "cni_driver_config_generation gauge",
      "cni_driver_ready gauge",
      "cni_driver_info gauge",
      "cni_driver_node_link_ready gauge",
      "cni_driver_node_link_failures_total counter",
      "cni_driver_node_link_repairs_total counter",
      "cni_driver_cluster_routes gauge",
      "cni_driver_cluster_unrouted_nodes gauge",
      "cni_driver_cluster_network_applications_total counter",
      "cni_driver_network_policy_syncs_total counter",
      "cni_driver_network_policy_changes_total counter",
      "cni_driver_network_policy_connections_cut_total counter",
      "cni_driver_service_syncs_total counter",
      "cni_driver_service_sync_duration_seconds histogram",
      "cni_driver_services gauge",
      "cni_driver_node_annotation_writes_total counter",
      "cni_driver_pod_annotation_patches_total counter",
      "cni_driver_pod_events_total counter",
    ]);
  });

  it("starts the side-effect series at zero for every outcome, the node link gauge absent", async () => {
    const s = parseExposition(await new Metrics().render());
    expect(find(s, "cni_driver_node_link_ready", {})).to.deep.equal([]);
    expect(value(s, "cni_driver_node_link_failures_total")).to.equal(0);
    const outcomes = (name: string) =>
      s.filter((x) => x.name === name).map((x) => [x.labels.outcome, x.value]);
    expect(outcomes("cni_driver_node_annotation_writes_total")).to.deep.equal([
      ["ok", 0],
      ["retried", 0],
      ["dropped", 0],
    ]);
    expect(outcomes("cni_driver_pod_annotation_patches_total")).to.deep.equal([
      ["ok", 0],
      ["retried", 0],
      ["dropped", 0],
      ["gone", 0],
    ]);
    expect(outcomes("cni_driver_pod_events_total")).to.deep.equal([
      ["created", 0],
      ["updated", 0],
      ["failed", 0],
    ]);
  });

  // Applications of the node link in order → the gauge (undefined: absent), failures, repairs.
  type Applied = ("ok" | "repaired" | "failed" | "none")[];
  const nodeLink: [string, Applied, number | undefined, number, number][] = [
    ["in place", ["ok"], 1, 0, 0],
    ["failed", ["failed"], 0, 1, 0],
    ["failed twice, then in place", ["failed", "failed", "ok"], 1, 2, 0],
    ["in place, then failing on a resync", ["ok", "ok", "failed"], 0, 1, 0],
    ["in place, then repaired twice by resyncs", ["ok", "repaired", "ok", "repaired"], 1, 0, 2],
    ["failed, then repaired", ["failed", "repaired"], 1, 1, 1],
    ["no link planned any more", ["ok", "none"], undefined, 0, 0],
    ["failed, then no link planned: the failure still counts", ["failed", "none"], undefined, 1, 0],
  ];
  for (const [what, applied, gauge, failures, repairs] of nodeLink) {
    it(`node link: ${what}: cni_driver_node_link_ready ${gauge ?? "absent"}, ${failures} failures, ${repairs} repairs`, async () => {
      const m = new Metrics();
      for (const o of applied) m.nodeLinkApplied(o);
      const s = parseExposition(await m.render());
      const ready = find(s, "cni_driver_node_link_ready", {});
      expect(ready.map((x) => x.value)).to.deep.equal(gauge === undefined ? [] : [gauge]);
      expect(value(s, "cni_driver_node_link_failures_total")).to.equal(failures);
      expect(value(s, "cni_driver_node_link_repairs_total")).to.equal(repairs);
    });
  }

  it("counts the cluster network's applications and keeps its routes by how, and the nodes left unrouted", async () => {
    const m = new Metrics();
    m.clusterNetworkApplied("ok", { hostGwRoutes: 3, vxlanRoutes: 2, unroutedNodes: 1 });
    m.clusterNetworkApplied("failed");
    m.clusterNetworkApplied("repaired", { hostGwRoutes: 3, vxlanRoutes: 1, unroutedNodes: 0 });
    const samples = parseExposition(await m.render());
    expect(value(samples, "cni_driver_cluster_routes", { via: "host-gw" })).to.equal(3);
    expect(value(samples, "cni_driver_cluster_routes", { via: "vxlan" })).to.equal(1);
    expect(value(samples, "cni_driver_cluster_unrouted_nodes")).to.equal(0);
    for (const outcome of ["ok", "failed", "repaired"])
      expect(value(samples, "cni_driver_cluster_network_applications_total", { outcome })).to.equal(
        1,
      );
  });

  it("counts NetworkPolicy syncs by outcome, the commands they wrote and the connections they cut", async () => {
    const m = new Metrics();
    m.networkPolicySynced("ok", 7);
    m.networkPolicySynced("failed", 0);
    m.networkPolicySynced("ok", 3);
    m.networkPolicyConnectionsCut(2);
    const samples = parseExposition(await m.render());
    expect(value(samples, "cni_driver_network_policy_syncs_total", { outcome: "ok" })).to.equal(2);
    expect(value(samples, "cni_driver_network_policy_syncs_total", { outcome: "failed" })).to.equal(
      1,
    );
    expect(value(samples, "cni_driver_network_policy_changes_total")).to.equal(10);
    expect(value(samples, "cni_driver_network_policy_connections_cut_total")).to.equal(2);
  });

  it("counts Service syncs by outcome, times them and keeps the number of Services", async () => {
    const m = new Metrics();
    m.servicesSynced("ok", 10_000, 3_600);
    m.servicesSynced("failed", 10_000, 12);
    m.servicesSynced("ok", 9_999, 40);
    const samples = parseExposition(await m.render());
    expect(value(samples, "cni_driver_service_syncs_total", { outcome: "ok" })).to.equal(2);
    expect(value(samples, "cni_driver_service_syncs_total", { outcome: "failed" })).to.equal(1);
    expect(value(samples, "cni_driver_services")).to.equal(9_999);
    expect(value(samples, "cni_driver_service_sync_duration_seconds_count")).to.equal(3);
    expect(value(samples, "cni_driver_service_sync_duration_seconds_sum")).to.be.closeTo(
      3.652,
      1e-9,
    );
  });

  it("counts Node annotation writes, pod annotation patches and pod Events by outcome", async () => {
    const m = new Metrics();
    m.nodeAnnotationWritten("retried");
    m.nodeAnnotationWritten("ok");
    m.nodeAnnotationWritten("dropped");
    m.nodeAnnotationWritten("ok");
    for (const o of ["ok", "ok", "ok", "retried", "gone", "dropped", "retried"] as const)
      m.podAnnotationPatched(o);
    m.podEventWritten("created");
    m.podEventWritten("updated");
    m.podEventWritten("updated");
    m.podEventWritten("failed");
    const s = parseExposition(await m.render());
    const table: [string, string, number][] = [
      ["cni_driver_node_annotation_writes_total", "ok", 2],
      ["cni_driver_node_annotation_writes_total", "retried", 1],
      ["cni_driver_node_annotation_writes_total", "dropped", 1],
      ["cni_driver_pod_annotation_patches_total", "ok", 3],
      ["cni_driver_pod_annotation_patches_total", "retried", 2],
      ["cni_driver_pod_annotation_patches_total", "dropped", 1],
      ["cni_driver_pod_annotation_patches_total", "gone", 1],
      ["cni_driver_pod_events_total", "created", 1],
      ["cni_driver_pod_events_total", "updated", 2],
      ["cni_driver_pod_events_total", "failed", 1],
    ];
    for (const [name, outcome, want] of table)
      expect(value(s, name, { outcome }), `${name}{outcome="${outcome}"}`).to.equal(want);
    // Nothing else moved.
    expect(value(s, "cni_driver_node_link_failures_total")).to.equal(0);
    expect(find(s, "cni_driver_node_link_ready", {})).to.deep.equal([]);
  });

  it("says which version runs, on which Node, and which ways plumbing, execs and host-local go, once told", async () => {
    const m = new Metrics();
    const before = parseExposition(await m.render()).filter((x) => x.name === "cni_driver_info");
    expect(before).to.deep.equal([]);
    m.setInfo({
      version: "0.1.0",
      node: "v24.21.0",
      plumbing: "iproute2",
      spawn: "node",
      host_local: "exec",
    });
    const s = parseExposition(await m.render());
    expect(
      value(s, "cni_driver_info", {
        version: "0.1.0",
        node: "v24.21.0",
        plumbing: "iproute2",
        spawn: "node",
        host_local: "exec",
      }),
    ).to.equal(1);
  });

  it("counts calls by verb and outcome", async () => {
    const m = new Metrics();
    m.recordCall("ADD", "ok", 0.01);
    m.recordCall("ADD", "ok", 0.02);
    m.recordCall("ADD", "error", 0.03, 7);
    m.recordCall("DEL", "ok", 0.04);
    const s = parseExposition(await m.render());
    expect(value(s, "cni_driver_calls_total", { verb: "ADD", outcome: "ok" })).to.equal(2);
    expect(value(s, "cni_driver_calls_total", { verb: "ADD", outcome: "error" })).to.equal(1);
    expect(value(s, "cni_driver_calls_total", { verb: "DEL", outcome: "ok" })).to.equal(1);
    expect(find(s, "cni_driver_calls_total", { verb: "DEL", outcome: "error" })).to.have.length(0);
  });

  it("counts errors by verb and CNI code, 999 when the code is unknown", async () => {
    const m = new Metrics();
    m.recordCall("ADD", "error", 0.1, 7);
    m.recordCall("ADD", "error", 0.1, 7);
    m.recordCall("ADD", "error", 0.1, 11);
    m.recordCall("CHECK", "error", 0.1);
    m.recordCall("ADD", "ok", 0.1);
    const s = parseExposition(await m.render());
    expect(value(s, "cni_driver_call_errors_total", { verb: "ADD", code: "7" })).to.equal(2);
    expect(value(s, "cni_driver_call_errors_total", { verb: "ADD", code: "11" })).to.equal(1);
    expect(value(s, "cni_driver_call_errors_total", { verb: "CHECK", code: "999" })).to.equal(1);
    expect(s.filter((x) => x.name === "cni_driver_call_errors_total")).to.have.length(3);
  });

  it("has histogram buckets from 1 ms to 60 s, then +Inf", async () => {
    const m = new Metrics();
    m.recordCall("ADD", "ok", 0.5);
    const les = buckets(parseExposition(await m.render()), "ADD").map(([le]) => le);
    expect(les).to.deep.equal([...DURATION_BUCKETS.map(String), "+Inf"]);
    expect(les[0]).to.equal("0.001");
    expect(les.at(-2)).to.equal("60");
  });

  it("keeps buckets cumulative, with +Inf equal to _count", async () => {
    const m = new Metrics();
    for (const d of [0.0005, 0.003, 0.003, 0.2, 1, 7, 45]) m.recordCall("ADD", "ok", d);
    const s = parseExposition(await m.render());
    const b = new Map(buckets(s, "ADD"));
    const table: [string, number][] = [
      ["0.001", 1],
      ["0.0025", 1],
      ["0.005", 3],
      ["0.1", 3],
      ["0.25", 4],
      ["1", 5], // le is inclusive: exactly 1 s lands in le="1"
      ["5", 5],
      ["10", 6],
      ["30", 6],
      ["60", 7],
      ["+Inf", 7],
    ];
    for (const [le, want] of table) expect(b.get(le), `le=${le}`).to.equal(want);
    const values = [...b.values()];
    for (let i = 1; i < values.length; i++) expect(values[i]).to.be.at.least(values[i - 1]!);
    expect(value(s, "cni_driver_call_duration_seconds_count", { verb: "ADD" })).to.equal(7);
  });

  it("sums observed durations", async () => {
    const m = new Metrics();
    m.recordCall("DEL", "ok", 0.25);
    m.recordCall("DEL", "error", 1.5, 5);
    const s = parseExposition(await m.render());
    expect(value(s, "cni_driver_call_duration_seconds_sum", { verb: "DEL" })).to.be.closeTo(
      1.75,
      1e-9,
    );
    expect(value(s, "cni_driver_call_duration_seconds_count", { verb: "DEL" })).to.equal(2);
  });

  it("puts a 61 s call only in +Inf", async () => {
    const m = new Metrics();
    m.recordCall("ADD", "ok", 61);
    const s = parseExposition(await m.render());
    for (const [le, n] of buckets(s, "ADD")) expect(n, `le=${le}`).to.equal(le === "+Inf" ? 1 : 0);
    expect(value(s, "cni_driver_call_duration_seconds_sum", { verb: "ADD" })).to.equal(61);
  });

  it("keeps one histogram per verb", async () => {
    const m = new Metrics();
    m.recordCall("ADD", "ok", 0.002);
    m.recordCall("GC", "ok", 20);
    const s = parseExposition(await m.render());
    expect(new Map(buckets(s, "ADD")).get("0.0025")).to.equal(1);
    expect(new Map(buckets(s, "GC")).get("0.0025")).to.equal(0);
    expect(new Map(buckets(s, "GC")).get("30")).to.equal(1);
  });

  it("counts a negative or NaN duration as zero", async () => {
    const m = new Metrics();
    m.recordCall("ADD", "ok", -3);
    m.recordCall("ADD", "ok", Number.NaN);
    const s = parseExposition(await m.render());
    expect(new Map(buckets(s, "ADD")).get("0.001")).to.equal(2);
    expect(value(s, "cni_driver_call_duration_seconds_sum", { verb: "ADD" })).to.equal(0);
  });

  for (const [input, want] of [
    ["plain", "plain"],
    ['a"b', 'a\\"b'],
    ["a\\b", "a\\\\b"],
    ["a\nb", "a\\nb"],
    ['\\"\n', '\\\\\\"\\n'],
  ] as const) {
    it(`escapes label value ${JSON.stringify(input)} in the text, and it reads back intact`, async () => {
      const m = new Metrics();
      m.recordCall(input, "ok", 0.01);
      const text = await m.render();
      expect(text).to.include(`cni_driver_calls_total{verb="${want}",outcome="ok"} 1\n`);
      expect(
        value(parseExposition(text), "cni_driver_calls_total", { verb: input, outcome: "ok" }),
      ).to.equal(1);
    });
  }

  it("escapes label values in the rendered text, and they read back intact", async () => {
    const m = new Metrics();
    const verb = 'we"ird\\verb\nx';
    m.recordCall(verb, "error", 0.01, 3);
    const text = await m.render();
    expect(text).to.include(
      'cni_driver_calls_total{verb="we\\"ird\\\\verb\\nx",outcome="error"} 1',
    );
    const s = parseExposition(text);
    expect(value(s, "cni_driver_calls_total", { verb, outcome: "error" })).to.equal(1);
    expect(value(s, "cni_driver_call_errors_total", { verb, code: "3" })).to.equal(1);
  });

  it("sets gauges and counts config reloads", async () => {
    const m = new Metrics();
    m.setAttachments(12);
    m.setAttachments(9);
    m.configReloaded(true);
    m.configReloaded(false);
    m.configReloaded(true);
    m.setConfigGeneration(4);
    let ready = true;
    m.readinessFrom(() => ready);
    const s = parseExposition(await m.render());
    expect(value(s, "cni_driver_attachments")).to.equal(9);
    expect(value(s, "cni_driver_config_reloads_total")).to.equal(3);
    expect(value(s, "cni_driver_config_reload_errors_total")).to.equal(1);
    expect(value(s, "cni_driver_config_generation")).to.equal(4);
    expect(value(s, "cni_driver_ready")).to.equal(1);
    ready = false;
    expect(
      value(parseExposition(await m.render()), "cni_driver_ready"),
      "read at the scrape",
    ).to.equal(0);
  });

  it("exposes the same series whatever order they were created in", async () => {
    const a = new Metrics();
    const b = new Metrics();
    const calls: [string, "ok" | "error", number, number?][] = [
      ["ADD", "ok", 0.1],
      ["DEL", "error", 0.2, 5],
      ["CHECK", "ok", 0.3],
      ["ADD", "error", 0.4, 7],
    ];
    for (const c of calls) a.recordCall(...c);
    for (const c of [...calls].reverse()) b.recordCall(...c);
    expect(await driverSeries(a)).to.deep.equal(await driverSeries(b));
  });

  it("uses prom-client's own classes, loaded from its files rather than its index", async () => {
    const index = await import("prom-client");
    expect(Registry).to.equal(index.Registry);
    expect(Counter).to.equal(index.Counter);
    expect(Gauge).to.equal(index.Gauge);
    expect(Histogram).to.equal(index.Histogram);
  });

  it("adds every family of prom-client's default metrics", async () => {
    const index = await import("prom-client");
    const defaults = new index.Registry();
    index.collectDefaultMetrics({ register: defaults });
    const names = (r: { getMetricsAsArray(): { name: string }[] }) =>
      r.getMetricsAsArray().map((m) => m.name);
    const text = await new Metrics().render();
    const families = text
      .split("\n")
      .filter((l) => l.startsWith("# TYPE "))
      .map((l) => l.split(" ")[2]!);
    expect(families.filter((f) => !f.startsWith("cni_driver_"))).to.have.members(names(defaults));
  });

  it("keeps each driver's series to itself when several run in one process", async () => {
    const a = new Metrics();
    const b = new Metrics();
    a.recordCall("ADD", "error", 0.1, 7);
    a.readinessFrom(() => true);
    b.setAttachments(5);
    b.nodeLinkApplied("ok");
    const sa = parseExposition(await a.render());
    const sb = parseExposition(await b.render());
    expect(value(sa, "cni_driver_calls_total", { verb: "ADD", outcome: "error" })).to.equal(1);
    expect(value(sa, "cni_driver_call_errors_total", { verb: "ADD", code: "7" })).to.equal(1);
    expect(value(sa, "cni_driver_ready")).to.equal(1);
    expect(value(sa, "cni_driver_attachments")).to.equal(0);
    expect(find(sa, "cni_driver_node_link_ready", {})).to.deep.equal([]);
    expect(sb.filter((x) => x.name.startsWith("cni_driver_call"))).to.deep.equal([]);
    expect(value(sb, "cni_driver_ready")).to.equal(0);
    expect(value(sb, "cni_driver_attachments")).to.equal(5);
    expect(value(sb, "cni_driver_node_link_ready")).to.equal(1);
  });

  it("adds the process's own series after the driver's, once each", async () => {
    // Two registries in the process: the process series are shared, not collected twice.
    new Metrics();
    const text = await new Metrics().render();
    const s = parseExposition(text);
    expect(value(s, "process_resident_memory_bytes")).to.be.greaterThan(1024 * 1024);
    expect(value(s, "process_open_fds")).to.be.greaterThan(2);
    expect(value(s, "process_start_time_seconds")).to.be.closeTo(
      Date.now() / 1000 - process.uptime(),
      2,
    );
    const cpu = value(s, "process_cpu_seconds_total");
    expect(cpu, "CPU time since the process started").to.be.greaterThan(0);
    expect(cpu).to.be.closeTo(
      value(s, "process_cpu_user_seconds_total") + value(s, "process_cpu_system_seconds_total"),
      1e-6,
    );
    expect(find(s, "nodejs_eventloop_lag_seconds", {})).to.have.length(1);
    expect(
      value(s, "nodejs_version_info", s.find((x) => x.name === "nodejs_version_info")!.labels),
    ).to.equal(1);
    const families = text
      .split("\n")
      .filter((l) => l.startsWith("# TYPE "))
      .map((l) => l.split(" ")[2]!);
    const lastDriver = families.findLastIndex((f) => f.startsWith("cni_driver_"));
    const firstOther = families.findIndex((f) => !f.startsWith("cni_driver_"));
    expect(firstOther).to.equal(lastDriver + 1);
  });

  it("parses as valid exposition text after a busy run", async () => {
    const m = new Metrics();
    const verbs = ["ADD", "DEL", "CHECK", "STATUS", "GC", "VERSION"];
    for (let i = 0; i < 200; i++) {
      const verb = verbs[i % verbs.length]!;
      m.recordCall(
        verb,
        i % 7 === 0 ? "error" : "ok",
        (i * 0.37) % 70,
        i % 7 === 0 ? 100 + (i % 3) : undefined,
      );
    }
    m.setAttachments(42);
    const s = parseExposition(await m.render());
    const total = s
      .filter((x) => x.name === "cni_driver_calls_total")
      .reduce((acc, x) => acc + x.value, 0);
    expect(total).to.equal(200);
    for (const verb of verbs) {
      const b = buckets(s, verb);
      expect(b.at(-1)![1]).to.equal(value(s, "cni_driver_call_duration_seconds_count", { verb }));
    }
  });
});
