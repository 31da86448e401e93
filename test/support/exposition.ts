/**
 * Reads a /metrics body as Prometheus would: a strict parser of the text exposition
 * format 0.0.4, and look-ups of one sample by name and exact label set.
 */
import { expect } from "chai";

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

const NAME = "[a-zA-Z_:][a-zA-Z0-9_:]*";
const LABEL_VALUE = String.raw`"(?:[^"\\\n]|\\[\\"n])*"`;
const LABEL = `[a-zA-Z_][a-zA-Z0-9_]*=${LABEL_VALUE}`;
/** NaN in any case, as Prometheus's parser (Go's strconv.ParseFloat) reads it; prom-client writes "Nan". */
const VALUE = String.raw`(?:[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?|[+-]Inf|[Nn][Aa][Nn])`;
const SAMPLE_RE = new RegExp(`^(${NAME})(?:\\{(${LABEL}(?:,${LABEL})*)?\\})? (${VALUE})$`);
const HELP_RE = new RegExp(`^# HELP (${NAME}) .*$`);
const TYPE_RE = new RegExp(`^# TYPE (${NAME}) (counter|gauge|histogram|summary|untyped)$`);

function unescapeLabelValue(v: string): string {
  return v.replace(/\\(.)/g, (_, c: string) => (c === "n" ? "\n" : c));
}

/**
 * Every line is HELP, TYPE, a sample or empty (the format ignores empty lines); each
 * family has HELP then TYPE before its samples; a sample belongs to the family declared
 * last (histogram samples by their _bucket/_sum/_count suffix, summary samples by _sum
 * and _count); no family twice; the text ends with a newline. Throws otherwise.
 */
export function parseExposition(text: string): Sample[] {
  expect(text.endsWith("\n"), "ends with a newline").to.equal(true);
  const samples: Sample[] = [];
  const seen = new Set<string>();
  let help: string | undefined;
  let family: { name: string; type: string } | undefined;
  for (const line of text.slice(0, -1).split("\n")) {
    if (line === "") continue;
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
    const suffixes =
      family!.type === "histogram"
        ? ["_bucket", "_sum", "_count"]
        : family!.type === "summary"
          ? ["", "_sum", "_count"]
          : [""];
    expect(
      suffixes.map((suffix) => family!.name + suffix),
      `sample ${name} in family ${family!.name}`,
    ).to.include(name);
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

/** The samples named `name` with exactly these labels (no more, no fewer). */
export function find(samples: Sample[], name: string, labels: Record<string, string>): Sample[] {
  return samples.filter(
    (s) =>
      s.name === name &&
      Object.entries(labels).every(([k, v]) => s.labels[k] === v) &&
      Object.keys(s.labels).length === Object.keys(labels).length,
  );
}

/** The value of the one sample named `name` with exactly these labels; fails if not exactly one. */
export function value(
  samples: Sample[],
  name: string,
  labels: Record<string, string> = {},
): number {
  const found = find(samples, name, labels);
  expect(found, `${name}${JSON.stringify(labels)} present once`).to.have.length(1);
  return found[0]!.value;
}
