/**
 * HairpinRefs (src/driver/services/hairpin-refs.ts): the hairpin set's
 * elements counted per written plan, so a change adds and deletes only what
 * its own Services make appear or disappear.
 */
import { expect } from "chai";
import { HairpinRefs } from "../../src/driver/services/hairpin-refs.js";
import { localEndpointTest } from "../../src/driver/services/ruleset.js";
import type { PortPlan } from "../../src/services/model.js";

const isLocal = localEndpointTest("node-a", { 4: ["10.0.1.0/24"], 6: [] });

/** A plan with these endpoints (address, node); only what the hairpin set reads is filled in. */
const plan = (key: string, eps: Array<[string, string?]>): PortPlan =>
  ({
    key,
    family: 4,
    internal: eps.map(([ip, nodeName]) => ({ ip, port: 8080, ...(nodeName ? { nodeName } : {}) })),
    external: [],
  }) as unknown as PortPlan;

const keys = (e: Map<string, Map<string, string>>) => [...(e.get("hairpin")?.keys() ?? [])].sort();

describe("services: hairpin elements counted per plan", () => {
  it("a whole write: every local endpoint once, by its node or, without one, by the pod CIDR", () => {
    const h = new HairpinRefs();
    const all = h.reset(
      [
        plan("a", [
          ["10.0.1.5", "node-a"],
          ["10.0.2.5", "node-b"],
        ]),
        plan("b", [["10.0.1.5"]]),
      ],
      isLocal,
    );
    expect(keys(all)).to.deep.equal(["10.0.1.5 . 10.0.1.5"]);
  });

  it("an endpoint two Services share stays until neither has it", () => {
    const h = new HairpinRefs();
    const [a, b] = [plan("a", [["10.0.1.5", "node-a"]]), plan("b", [["10.0.1.5", "node-a"]])];
    h.reset([a, b], isLocal);
    const one = h.change([a], [], isLocal);
    expect([keys(one.gone), keys(one.added)]).to.deep.equal([[], []]);
    one.commit();
    const both = h.change([b], [], isLocal);
    expect(keys(both.gone)).to.deep.equal(["10.0.1.5 . 10.0.1.5"]);
  });

  it("a change not committed (its write failed) leaves the counts as they were", () => {
    const h = new HairpinRefs();
    const a = plan("a", [["10.0.1.5", "node-a"]]);
    h.reset([], isLocal);
    expect(keys(h.change([], [a], isLocal).added)).to.deep.equal(["10.0.1.5 . 10.0.1.5"]);
    // Not committed: the element is still to be added.
    expect(keys(h.change([], [a], isLocal).added)).to.deep.equal(["10.0.1.5 . 10.0.1.5"]);
  });

  it("an endpoint moving between Services in one change: nothing to write", () => {
    const h = new HairpinRefs();
    const [a, b] = [plan("a", [["10.0.1.5", "node-a"]]), plan("b", [["10.0.1.5", "node-a"]])];
    h.reset([a], isLocal);
    const c = h.change([a], [b], isLocal);
    expect([keys(c.gone), keys(c.added)]).to.deep.equal([[], []]);
  });
});
