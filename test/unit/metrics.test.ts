import { expect } from "chai";
import { DURATION_BUCKETS, escapeLabelValue } from "../../src/common/prometheus.js";
import { Metrics } from "../../src/driver/metrics.js";

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

const NAME = "[a-zA-Z_:][a-zA-Z0-9_:]*";
const LABEL_VALUE = String.raw`"(?:[^"\\\n]|\\[\\"n])*"`;
const LABEL = `[a-zA-Z_][a-zA-Z0-9_]*=${LABEL_VALUE}`;
const VALUE = String.raw`(?:[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?|[+-]Inf|NaN)`;
const SAMPLE_RE = new RegExp(`^(${NAME})(?:\\{(${LABEL}(?:,${LABEL})*)?\\})? (${VALUE})$`);
const HELP_RE = new RegExp(`^# HELP (${NAME}) .*$`);
const TYPE_RE = new RegExp(`^# TYPE (${NAME}) (counter|gauge|histogram|summary|untyped)$`);

function unescapeLabelValue(v: string): string {
  return v.replace(/\\(.)/g, (_, c: string) => (c === "n" ? "\n" : c));
}

/**
 * A strict reader of text format 0.0.4: every line is HELP, TYPE or a sample; each
 * family has HELP then TYPE before its samples; a sample belongs to the family declared
 * last (histogram samples by their _bucket/_sum/_count suffix); no family twice.
 */
function parseExposition(text: string): Sample[] {
  expect(text.endsWith("\n"), "ends with a newline").to.equal(true);
  const samples: Sample[] = [];
  const seen = new Set<string>();
  let help: string | undefined;
  let family: { name: string; type: string } | undefined;
  for (const line of text.slice(0, -1).split("\n")) {
    const h = HELP_RE.exec(line);
    if (h) {
      expect(seen.has(h[1]!), `family ${h[1]} declared once`).to.equal(false);
      seen.add(h[1]!);
      help = h[1];
      family = undefined;
      continue;
    }
    const t = TYPE_RE.exec(line);
    if (t) {
      expect(t[1], `TYPE follows HELP of the same family: ${line}`).to.equal(help);
      family = { name: t[1]!, type: t[2]! };
      continue;
    }
    const s = SAMPLE_RE.exec(line);
    expect(s, `valid sample line: ${JSON.stringify(line)}`).to.not.equal(null);
    expect(family, `sample after HELP/TYPE: ${line}`).to.not.equal(undefined);
    const name = s![1]!;
    const allowed =
      family!.type === "histogram"
        ? ["_bucket", "_sum", "_count"].map((suffix) => family!.name + suffix)
        : [family!.name];
    expect(allowed, `sample ${name} in family ${family!.name}`).to.include(name);
    const labels: Record<string, string> = {};
    for (const m of (s![2] ?? "").matchAll(
      new RegExp(`([a-zA-Z_][a-zA-Z0-9_]*)=(${LABEL_VALUE})`, "g"),
    )) {
      labels[m[1]!] = unescapeLabelValue(m[2]!.slice(1, -1));
    }
    const raw = s![3]!;
    const value = raw === "+Inf" ? Infinity : raw === "-Inf" ? -Infinity : Number(raw);
    samples.push({ name, labels, value });
  }
  return samples;
}

function find(samples: Sample[], name: string, labels: Record<string, string>): Sample[] {
  return samples.filter(
    (s) =>
      s.name === name &&
      Object.entries(labels).every(([k, v]) => s.labels[k] === v) &&
      Object.keys(s.labels).length === Object.keys(labels).length,
  );
}

function value(samples: Sample[], name: string, labels: Record<string, string> = {}): number {
  const found = find(samples, name, labels);
  expect(found, `${name}${JSON.stringify(labels)} present once`).to.have.length(1);
  return found[0]!.value;
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
    it(`the exposition checker rejects ${JSON.stringify(bad)}`, () => {
      expect(() => parseExposition(bad)).to.throw();
    });
  }

  it("renders every family with zero values before any call", () => {
    const samples = parseExposition(new Metrics().render());
    expect(value(samples, "cni_driver_attachments")).to.equal(0);
    expect(value(samples, "cni_driver_config_reloads_total")).to.equal(0);
    expect(value(samples, "cni_driver_config_reload_errors_total")).to.equal(0);
    expect(value(samples, "cni_driver_config_generation")).to.equal(0);
    expect(value(samples, "cni_driver_ready")).to.equal(0);
    expect(samples.filter((s) => s.name.startsWith("cni_driver_call"))).to.deep.equal([]);
  });

  it("declares each family with HELP and TYPE, in a fixed order", () => {
    const text = new Metrics().render();
    const types = text
      .split("\n")
      .filter((l) => l.startsWith("# TYPE "))
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
      "cni_driver_node_link_ready gauge",
      "cni_driver_node_link_failures_total counter",
      "cni_driver_node_link_repairs_total counter",
      "cni_driver_cluster_routes gauge",
      "cni_driver_cluster_unrouted_nodes gauge",
      "cni_driver_cluster_network_applications_total counter",
      "cni_driver_node_annotation_writes_total counter",
      "cni_driver_pod_annotation_patches_total counter",
      "cni_driver_pod_events_total counter",
    ]);
  });

  it("starts the side-effect series at zero for every outcome, the node link gauge absent", () => {
    const s = parseExposition(new Metrics().render());
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
    it(`node link: ${what}: cni_driver_node_link_ready ${gauge ?? "absent"}, ${failures} failures, ${repairs} repairs`, () => {
      const m = new Metrics();
      for (const o of applied) m.nodeLinkApplied(o);
      const s = parseExposition(m.render());
      const ready = find(s, "cni_driver_node_link_ready", {});
      expect(ready.map((x) => x.value)).to.deep.equal(gauge === undefined ? [] : [gauge]);
      expect(value(s, "cni_driver_node_link_failures_total")).to.equal(failures);
      expect(value(s, "cni_driver_node_link_repairs_total")).to.equal(repairs);
    });
  }

  it("counts the cluster network's applications and keeps its routes by how, and the nodes left unrouted", () => {
    const m = new Metrics();
    m.clusterNetworkApplied("ok", { hostGwRoutes: 3, vxlanRoutes: 2, unroutedNodes: 1 });
    m.clusterNetworkApplied("failed");
    m.clusterNetworkApplied("repaired", { hostGwRoutes: 3, vxlanRoutes: 1, unroutedNodes: 0 });
    const samples = parseExposition(m.render());
    expect(value(samples, "cni_driver_cluster_routes", { via: "host-gw" })).to.equal(3);
    expect(value(samples, "cni_driver_cluster_routes", { via: "vxlan" })).to.equal(1);
    expect(value(samples, "cni_driver_cluster_unrouted_nodes")).to.equal(0);
    for (const outcome of ["ok", "failed", "repaired"])
      expect(value(samples, "cni_driver_cluster_network_applications_total", { outcome })).to.equal(
        1,
      );
  });

  it("counts Node annotation writes, pod annotation patches and pod Events by outcome", () => {
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
    const s = parseExposition(m.render());
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

  it("says which version runs, on which Node, and which ways plumbing, execs and host-local go, once told", () => {
    const m = new Metrics();
    const before = parseExposition(m.render()).filter((x) => x.name === "cni_driver_info");
    expect(before).to.deep.equal([]);
    m.setInfo({
      version: "0.1.0",
      node: "v24.21.0",
      plumbing: "iproute2",
      spawn: "node",
      host_local: "exec",
    });
    const s = parseExposition(m.render());
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

  it("counts calls by verb and outcome", () => {
    const m = new Metrics();
    m.recordCall("ADD", "ok", 0.01);
    m.recordCall("ADD", "ok", 0.02);
    m.recordCall("ADD", "error", 0.03, 7);
    m.recordCall("DEL", "ok", 0.04);
    const s = parseExposition(m.render());
    expect(value(s, "cni_driver_calls_total", { verb: "ADD", outcome: "ok" })).to.equal(2);
    expect(value(s, "cni_driver_calls_total", { verb: "ADD", outcome: "error" })).to.equal(1);
    expect(value(s, "cni_driver_calls_total", { verb: "DEL", outcome: "ok" })).to.equal(1);
    expect(find(s, "cni_driver_calls_total", { verb: "DEL", outcome: "error" })).to.have.length(0);
  });

  it("counts errors by verb and CNI code, 999 when the code is unknown", () => {
    const m = new Metrics();
    m.recordCall("ADD", "error", 0.1, 7);
    m.recordCall("ADD", "error", 0.1, 7);
    m.recordCall("ADD", "error", 0.1, 11);
    m.recordCall("CHECK", "error", 0.1);
    m.recordCall("ADD", "ok", 0.1);
    const s = parseExposition(m.render());
    expect(value(s, "cni_driver_call_errors_total", { verb: "ADD", code: "7" })).to.equal(2);
    expect(value(s, "cni_driver_call_errors_total", { verb: "ADD", code: "11" })).to.equal(1);
    expect(value(s, "cni_driver_call_errors_total", { verb: "CHECK", code: "999" })).to.equal(1);
    expect(s.filter((x) => x.name === "cni_driver_call_errors_total")).to.have.length(3);
  });

  it("has histogram buckets from 1 ms to 60 s, then +Inf", () => {
    const m = new Metrics();
    m.recordCall("ADD", "ok", 0.5);
    const les = buckets(parseExposition(m.render()), "ADD").map(([le]) => le);
    expect(les).to.deep.equal([...DURATION_BUCKETS.map(String), "+Inf"]);
    expect(les[0]).to.equal("0.001");
    expect(les.at(-2)).to.equal("60");
  });

  it("keeps buckets cumulative, with +Inf equal to _count", () => {
    const m = new Metrics();
    for (const d of [0.0005, 0.003, 0.003, 0.2, 1, 7, 45]) m.recordCall("ADD", "ok", d);
    const s = parseExposition(m.render());
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

  it("sums observed durations", () => {
    const m = new Metrics();
    m.recordCall("DEL", "ok", 0.25);
    m.recordCall("DEL", "error", 1.5, 5);
    const s = parseExposition(m.render());
    expect(value(s, "cni_driver_call_duration_seconds_sum", { verb: "DEL" })).to.be.closeTo(
      1.75,
      1e-9,
    );
    expect(value(s, "cni_driver_call_duration_seconds_count", { verb: "DEL" })).to.equal(2);
  });

  it("puts a 61 s call only in +Inf", () => {
    const m = new Metrics();
    m.recordCall("ADD", "ok", 61);
    const s = parseExposition(m.render());
    for (const [le, n] of buckets(s, "ADD")) expect(n, `le=${le}`).to.equal(le === "+Inf" ? 1 : 0);
    expect(value(s, "cni_driver_call_duration_seconds_sum", { verb: "ADD" })).to.equal(61);
  });

  it("keeps one histogram per verb", () => {
    const m = new Metrics();
    m.recordCall("ADD", "ok", 0.002);
    m.recordCall("GC", "ok", 20);
    const s = parseExposition(m.render());
    expect(new Map(buckets(s, "ADD")).get("0.0025")).to.equal(1);
    expect(new Map(buckets(s, "GC")).get("0.0025")).to.equal(0);
    expect(new Map(buckets(s, "GC")).get("30")).to.equal(1);
  });

  it("counts a negative or NaN duration as zero", () => {
    const m = new Metrics();
    m.recordCall("ADD", "ok", -3);
    m.recordCall("ADD", "ok", Number.NaN);
    const s = parseExposition(m.render());
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
    it(`escapes label value ${JSON.stringify(input)}`, () => {
      expect(escapeLabelValue(input)).to.equal(want);
    });
  }

  it("escapes label values in the rendered text, and they read back intact", () => {
    const m = new Metrics();
    const verb = 'we"ird\\verb\nx';
    m.recordCall(verb, "error", 0.01, 3);
    const text = m.render();
    expect(text).to.include(
      'cni_driver_calls_total{verb="we\\"ird\\\\verb\\nx",outcome="error"} 1',
    );
    const s = parseExposition(text);
    expect(value(s, "cni_driver_calls_total", { verb, outcome: "error" })).to.equal(1);
    expect(value(s, "cni_driver_call_errors_total", { verb, code: "3" })).to.equal(1);
  });

  it("sets gauges and counts config reloads", () => {
    const m = new Metrics();
    m.setAttachments(12);
    m.setAttachments(9);
    m.configReloaded(true);
    m.configReloaded(false);
    m.configReloaded(true);
    m.setConfigGeneration(4);
    m.setReady(true);
    const s = parseExposition(m.render());
    expect(value(s, "cni_driver_attachments")).to.equal(9);
    expect(value(s, "cni_driver_config_reloads_total")).to.equal(3);
    expect(value(s, "cni_driver_config_reload_errors_total")).to.equal(1);
    expect(value(s, "cni_driver_config_generation")).to.equal(4);
    expect(value(s, "cni_driver_ready")).to.equal(1);
    m.setReady(false);
    expect(value(parseExposition(m.render()), "cni_driver_ready")).to.equal(0);
  });

  it("renders the same text whatever order the series were created in", () => {
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
    expect(a.render()).to.equal(b.render());
    parseExposition(a.render());
  });

  it("parses as valid exposition text after a busy run", () => {
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
    const s = parseExposition(m.render());
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
