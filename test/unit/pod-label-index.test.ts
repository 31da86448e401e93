import { expect } from "chai";
import { PodLabelIndex } from "../../src/policy/pod-label-index.js";
import { selectorMatches } from "../../src/policy/selector.js";

describe("policy/pod-label-index", () => {
  const labels: Record<string, Record<string, string>> = {
    "x/a": { app: "a", tier: "web" },
    "x/b": { app: "b", tier: "web" },
    "x/c": { app: "a", tier: "db" },
    "y/a": { app: "a", tier: "web" },
  };
  const index = () => {
    const i = new PodLabelIndex();
    for (const [k, l] of Object.entries(labels)) i.add(k.split("/")[0] as string, k, l);
    return i;
  };

  it("answers the pods holding the rarest matchLabels pair, of that namespace only", () => {
    const i = index();
    expect([...i.candidates("x", { matchLabels: { app: "a", tier: "db" } })]).to.deep.equal([
      "x/c",
    ]);
    expect([...i.candidates("x", { matchLabels: { app: "a" } })].sort()).to.deep.equal([
      "x/a",
      "x/c",
    ]);
    expect([...i.candidates("x", { matchLabels: { app: "zzz" } })]).to.deep.equal([]);
    expect([...i.candidates("z", {})]).to.deep.equal([]);
  });

  it("without matchLabels, answers every pod of the namespace (expressions are the caller's check)", () => {
    const i = index();
    const sel = { matchExpressions: [{ key: "tier", operator: "NotIn" as const, values: ["db"] }] };
    const got = [...i.candidates("x", sel)].sort();
    expect(got).to.deep.equal(["x/a", "x/b", "x/c"]);
    expect(
      got.filter((k) => selectorMatches(sel, labels[k] as Record<string, string>)),
    ).to.deep.equal(["x/a", "x/b"]);
  });

  it("forgets a removed pod and an emptied namespace, and follows a relabel", () => {
    const i = index();
    i.remove("x", "x/c", labels["x/c"] as Record<string, string>);
    expect([...i.candidates("x", { matchLabels: { tier: "db" } })]).to.deep.equal([]);
    i.remove("x", "x/a", labels["x/a"] as Record<string, string>);
    i.add("x", "x/a", { app: "b" });
    expect([...i.candidates("x", { matchLabels: { app: "b" } })].sort()).to.deep.equal([
      "x/a",
      "x/b",
    ]);
    i.remove("y", "y/a", labels["y/a"] as Record<string, string>);
    expect([...i.candidates("y", {})]).to.deep.equal([]);
  });
});
