/**
 * diffScript's element changes for a hash peer set, from chunks (one a
 * namespace, the same array while unchanged): what goes is deleted unless a
 * pod elsewhere still has it, and no address present is deleted twice or
 * missing afterwards. The kernel side is network-policy-nft.test.ts.
 */
import { expect } from "chai";
import type { Ruleset } from "../../src/driver/network-policy/ruleset.js";
import { diffScript } from "../../src/driver/network-policy/ruleset-commands.js";

function ruleset(chunks: ReadonlyArray<readonly string[]>): Ruleset {
  return {
    sets: new Map([["p_x_4", { type: "ipv4_addr", interval: false, chunks }]]),
    chains: new Map(),
    dispatch: { egress4: new Map(), egress6: new Map(), ingress4: new Map(), ingress6: new Map() },
  };
}

/** The elements deleted and added, as the script writes them. */
function delta(script: string): { gone: string[]; added: string[] } {
  const of = (verb: string) =>
    [
      ...script.matchAll(
        new RegExp(`^${verb} element inet cni-driver-policy p_x_4 \\{ (.*) \\}$`, "gm"),
      ),
    ]
      .flatMap((m) => (m[1] as string).split(", "))
      .sort();
  return { gone: of("delete"), added: of("add") };
}

describe("network policy ruleset: a peer set's change by chunks", () => {
  const a = ["10.0.1.1", "10.0.1.2"];
  const b = ["10.0.2.1"];

  it("unchanged chunks: nothing written", () => {
    expect(diffScript(ruleset([a, b]), ruleset([a, b]))).to.equal("");
  });

  it("a namespace's chunk replaced: only its difference is written", () => {
    const a2 = ["10.0.1.2", "10.0.1.3"];
    expect(delta(diffScript(ruleset([a, b]), ruleset([a2, b])))).to.deep.equal({
      gone: ["10.0.1.1"],
      added: ["10.0.1.3"],
    });
  });

  it("an address that moves to another namespace's new chunk is neither deleted nor added", () => {
    const a2 = ["10.0.1.2"];
    const b2 = ["10.0.2.1", "10.0.1.1"];
    expect(delta(diffScript(ruleset([a, b]), ruleset([a2, b2])))).to.deep.equal({
      gone: [],
      added: [],
    });
  });

  it("an address gone from one chunk but held by an unchanged one is kept", () => {
    const c = ["10.0.1.1"];
    const a2 = ["10.0.1.2"];
    expect(delta(diffScript(ruleset([a, b, c]), ruleset([a2, b, c])))).to.deep.equal({
      gone: [],
      added: [],
    });
  });

  it("a namespace gone deletes its addresses; a new one adds its own", () => {
    const c = ["10.0.3.1"];
    expect(delta(diffScript(ruleset([a, b]), ruleset([b, c])))).to.deep.equal({
      gone: ["10.0.1.1", "10.0.1.2"],
      added: ["10.0.3.1"],
    });
  });
});
