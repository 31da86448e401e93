/**
 * The Services tables written as nf_tables netlink batches
 * (src/driver/services/netlink-script.ts through native/nftables' `batch`)
 * against the same scripts run by libnftables, in two network namespaces of
 * the test's own: after every step, `nft list ruleset` and the expressions
 * nft reads back (`nft --debug=netlink`) must be the same, so the encoder
 * cannot drift from what nft itself would send. A refused batch changes
 * nothing and names the command the kernel refused. The code runs in a Node
 * process inside each namespace, as the driver runs inside its node's.
 */
import { expect } from "chai";
import { execaSync } from "execa";
import { SERVICES_TABLES } from "../../src/driver/services/ruleset.js";
import { fullScriptParts } from "../../src/driver/services/ruleset-diff.js";
import { runModuleInNetns } from "../support/module-in-netns.js";
import { createNetns, deleteNetns, uniqueTag } from "../support/netns.js";
import { requireCommand, requireNativeAddon, requireRoot } from "../support/requirements.js";
import {
  changes,
  render,
  SERVICES,
  SERVICES_2,
  SLICES,
  SLICES_2,
} from "../support/services-fixture.js";

/**
 * Runs in a namespace: each script in order, as the kernel datapath or as
 * libnftables would; a list of scripts is the tables whole, a table at a time.
 */
const CHILD = `
import { readFileSync } from "node:fs";
import { kernelServicesDatapath } from "./src/driver/services/kernel-datapath.ts";
import * as nft from "./src/plumbing/nftables.ts";
const { way, scripts } = JSON.parse(readFileSync(0, "utf8"));
const out = { batches: nft.nftBatchInProcess(), errors: [] };
for (const s of scripts) {
  try {
    if (way === "text") await nft.applyNftScript("test", [s].flat().join(""));
    else if (Array.isArray(s)) await kernelServicesDatapath.applyWhole(s);
    else await kernelServicesDatapath.applyScript(s);
    out.errors.push(null);
  } catch (err) {
    out.errors.push(err.message);
  }
}
console.log(JSON.stringify(out));
`;

describe("services: the tables as netlink batches, against libnftables (root)", function () {
  this.timeout(180_000);
  const tag = uniqueTag();
  const ns = { netlink: `cdtsnl-${tag}-n`, text: `cdtsnl-${tag}-t` };
  const BEFORE = render(SERVICES, SLICES);
  const AFTER = render(SERVICES_2, SLICES_2);

  before(function () {
    requireRoot(this);
    requireCommand(this, "nft", "nftables");
    requireNativeAddon(this, "cni_driver_nftables");
    for (const n of Object.values(ns)) createNetns(n);
  });

  after(() => {
    for (const n of Object.values(ns)) deleteNetns(n);
  });

  function nft(netns: string, args: string[]): string {
    const r = execaSync("ip", ["netns", "exec", netns, "nft", ...args], { reject: false });
    if (r.exitCode !== 0) throw new Error(`nft ${args.join(" ")}: ${r.stderr}`);
    return r.stdout;
  }

  function apply(way: "netlink" | "text", scripts: Array<string | string[]>) {
    const env = { ...process.env };
    delete env.CNI_DRIVER_NFT_BIN; // the addon, not nft exec'd
    return runModuleInNetns(ns[way], CHILD, { input: JSON.stringify({ way, scripts }), env }) as {
      batches: boolean;
      errors: (string | null)[];
    };
  }

  /** The ruleset as nft lists it, and the expressions of each rule as the kernel holds them. */
  function state(netns: string): { text: string; expressions: string[] } {
    const debug = nft(netns, ["--debug=netlink", "list", "ruleset"])
      .split("\n")
      // Rule handles and positions differ between two loads; element order follows hashing.
      .map((l) => l.replace(/^(inet \S+ \S+)( \d+)+$/, "$1"))
      .filter((l) => l.trim() !== "");
    return { text: nft(netns, ["list", "ruleset"]), expressions: debug.sort() };
  }

  it("the whole tables, a table at a time: the same rules, sets and elements both ways", () => {
    const n = apply("netlink", [[...fullScriptParts(BEFORE.blocks.values(), BEFORE.hairpin)]]);
    expect(n.batches, "the addon sends batches").to.equal(true);
    expect(n.errors).to.deep.equal([null]);
    expect(apply("text", [BEFORE.script]).errors).to.deep.equal([null]);
    const [a, b] = [state(ns.netlink), state(ns.text)];
    for (const t of SERVICES_TABLES) expect(a.text).to.include(`table inet ${t} {`);
    expect(a.text).to.match(/numgen random mod \d+ 0 dnat ip to/);
    expect(a.text).to.include("dnat ip6 to [fd00:10:");
    expect(a.text).to.include("update @aff-");
    expect(a.text).to.equal(b.text);
    expect(a.expressions).to.deep.equal(b.expressions);
  });

  it("a change of several Services at once: the same again", () => {
    const script = changes(BEFORE, AFTER);
    expect(script).to.include("flush chain").and.include("delete chain").and.include("add set");
    expect(apply("netlink", [script]).errors).to.deep.equal([null]);
    expect(apply("text", [script]).errors).to.deep.equal([null]);
    const [a, b] = [state(ns.netlink), state(ns.text)];
    expect(a.text).to.equal(b.text);
    expect(a.expressions).to.deep.equal(b.expressions);
  });

  it("a refused change names its command and leaves the tables as they were", () => {
    const before = state(ns.netlink);
    const chain = /^add chain inet (\S+) (svc-\S+)$/m.exec(AFTER.script) ?? [];
    const script = [
      `flush chain inet ${chain[1]} ${chain[2]}`,
      `add rule inet ${chain[1]} ${chain[2]} drop`,
      `delete chain inet ${chain[1]} svc-000000000000`,
    ].join("\n");
    const [error] = apply("netlink", [`${script}\n`]).errors;
    expect(error).to.include(`delete chain inet ${chain[1]} svc-000000000000`);
    expect(error).to.match(/No such file or directory/);
    expect(state(ns.netlink)).to.deep.equal(before);
  });

  it("the whole tables again over what is there: replaced, as libnftables replaces them", () => {
    expect(apply("netlink", [AFTER.script]).errors).to.deep.equal([null]);
    expect(apply("text", [AFTER.script]).errors).to.deep.equal([null]);
    const [a, b] = [state(ns.netlink), state(ns.text)];
    expect(a.text).to.equal(b.text);
    expect(a.expressions).to.deep.equal(b.expressions);
  });
});
