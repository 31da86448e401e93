/**
 * src/plumbing/nftables' applyNftElements, written in-process as nf_tables
 * netlink messages (native/nftables' `elements`), against a real nftables in
 * a network namespace of the test's own. Two tables of the same shape: each
 * step's changes go to one through applyNftElements and, as nft text, to the
 * other through applyNftScript (libnftables); the two must agree after every
 * step, failures included. The module runs in a Node process inside the
 * namespace, as the driver runs inside its node's: a netlink socket belongs
 * to the namespace of the thread that opens it.
 */
import { expect } from "chai";
import { execaSync } from "execa";
import type { NftElementChange } from "../../src/plumbing/nftables.js";
import { runModuleInNetns } from "../support/module-in-netns.js";
import { createNetns, deleteNetns, uniqueTag } from "../support/netns.js";
import { requireCommand, requireNativeAddon, requireRoot } from "../support/requirements.js";

/** The tables: `raw` written by applyNftElements, `txt` by the same changes as nft text. */
const BODY = `{
  set s4 { type ipv4_addr; }
  set s6 { type ipv6_addr; }
  map m4 { type ipv4_addr : verdict; }
  map m6 { type ipv6_addr : verdict; }
  set t4 { type ipv4_addr . inet_proto . inet_service; }
  set t6 { type ipv6_addr . inet_proto . inet_service; }
  chain c1 { }
  chain c2 { }
}`;

/** One step of the child: element changes in-process, a script as text, or the addon called bare. */
type Step =
  | { table: string; changes: readonly NftElementChange[] }
  | { script: string }
  | { addon: { table: unknown; changes: unknown } };

/** Runs in the namespace: every step in order, each one's error message or null. */
const CHILD = `
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import * as nft from "./src/plumbing/nftables.ts";
const steps = JSON.parse(readFileSync(0, "utf8"));
const out = { inProcess: nft.nftElementsInProcess(), errors: [] };
const hexKeys = (changes) =>
  Array.isArray(changes)
    ? changes.map((c) => (typeof c?.keys === "string" ? { ...c, keys: Buffer.from(c.keys, "hex") } : c))
    : changes;
for (const s of steps) {
  try {
    if ("script" in s) await nft.applyNftScript("test", s.script);
    else if ("addon" in s) {
      const addon = createRequire(import.meta.url)("./build/Release/cni_driver_nftables.node");
      await addon.elements(s.addon.table, hexKeys(s.addon.changes));
    } else await nft.applyNftElements("test", s.table, s.changes);
    out.errors.push(null);
  } catch (err) {
    out.errors.push(err.name + ": " + err.message);
  }
}
console.log(JSON.stringify(out));
`;

/** The changes as nft text for table inet <table>. */
function asText(table: string, changes: readonly NftElementChange[]): string {
  return changes
    .filter((c) => c.keys.length > 0)
    .map((c) => {
      const items = c.keys.map((k, i) =>
        c.jumps && c.op === "add" ? `${k} : jump ${c.jumps[i]}` : k,
      );
      return `${c.op} element inet ${table} ${c.set} { ${items.join(", ")} }\n`;
    })
    .join("");
}

const range = (n: number, key: (i: number) => string) =>
  Array.from({ length: n }, (_, i) => key(i));
const v4 = (prefix: string) => (i: number) => `${prefix}.${i >> 8}.${i & 255}`;
const v6 = (prefix: string) => (i: number) => `${prefix}:${i.toString(16)}`;

describe("plumbing/nftables: element changes in-process (root)", function () {
  this.timeout(120_000);
  const ns = `cdtnfe-${uniqueTag()}`;

  function nft(args: string[], input?: string): string {
    const r = execaSync("ip", ["netns", "exec", ns, "nft", ...args], {
      ...(input !== undefined ? { input } : {}),
      reject: false,
    });
    if (r.exitCode !== 0) throw new Error(`nft ${args.join(" ")}: ${r.stderr}`);
    return r.stdout;
  }

  function inNetns(steps: Step[]): { inProcess: boolean; errors: (string | null)[] } {
    const env = { ...process.env };
    delete env.CNI_DRIVER_NFT_BIN; // the addon, not nft exec'd
    return runModuleInNetns(ns, CHILD, { input: JSON.stringify(steps), env }) as {
      inProcess: boolean;
      errors: (string | null)[];
    };
  }

  /** Each set's and map's elements, sorted; a map's as "key : jump chain". */
  function contents(table: string): Record<string, string[]> {
    const listed = JSON.parse(nft(["-j", "list", "table", "inet", table])) as {
      nftables: Array<{
        set?: { name: string; elem?: unknown[] };
        map?: { name: string; elem?: unknown[] };
      }>;
    };
    const out: Record<string, string[]> = {};
    for (const o of listed.nftables) {
      const s = o.set ?? o.map;
      if (!s) continue;
      out[s.name] = (s.elem ?? [])
        .map((e) =>
          Array.isArray(e)
            ? `${e[0]} : jump ${(e[1] as { jump: { target: string } }).jump.target}`
            : typeof e === "object" && e !== null && "concat" in e
              ? (e as { concat: unknown[] }).concat.join(" . ")
              : String(e),
        )
        .sort();
    }
    return out;
  }

  /**
   * The changes in-process to `raw` and as text to `txt`, in one child:
   * answers the in-process error (null when it applied). Both must fail or
   * both succeed, and leave the two tables alike.
   */
  function both(changes: readonly NftElementChange[]): string | null {
    const { inProcess, errors } = inNetns([
      { table: "raw", changes },
      { script: asText("txt", changes) || "\n" },
    ]);
    expect(inProcess, "the addon writes elements").to.equal(true);
    const [raw, txt] = errors;
    expect(raw === null, `in-process: ${raw}; as text: ${txt}`).to.equal(txt === null);
    expect(contents("raw")).to.deep.equal(contents("txt"));
    return raw ?? null;
  }

  before(function () {
    requireRoot(this);
    requireCommand(this, "nft", "nftables");
    requireNativeAddon(this, "cni_driver_nftables");
    createNetns(ns);
    const { errors } = inNetns([{ script: `table inet raw ${BODY}\ntable inet txt ${BODY}\n` }]);
    expect(errors).to.deep.equal([null]);
  });

  after(() => {
    deleteNetns(ns);
  });

  it("adds elements to sets of both families and to verdict maps", () => {
    expect(
      both([
        { op: "add", set: "s4", keys: ["10.1.0.1", "10.1.0.2", "10.1.0.3"] },
        { op: "add", set: "s6", keys: ["fd00:1::1", "fd00:1::2", "::ffff:10.9.0.1"] },
        {
          op: "add",
          set: "m4",
          keys: ["10.2.0.1", "10.2.0.2", "10.2.0.3"],
          jumps: ["c1", "c2", "c1"],
        },
        { op: "add", set: "m6", keys: ["fd00:2::1", "fd00:2::2"], jumps: ["c2", "c1"] },
      ]),
    ).to.equal(null);
    expect(contents("raw")).to.deep.equal({
      s4: ["10.1.0.1", "10.1.0.2", "10.1.0.3"],
      s6: ["::ffff:10.9.0.1", "fd00:1::1", "fd00:1::2"],
      m4: ["10.2.0.1 : jump c1", "10.2.0.2 : jump c2", "10.2.0.3 : jump c1"],
      m6: ["fd00:2::1 : jump c2", "fd00:2::2 : jump c1"],
      t4: [],
      t6: [],
    });
  });

  it("an add of a present element is no error; a change without keys is skipped", () => {
    expect(
      both([
        { op: "add", set: "s4", keys: ["10.1.0.1", "10.1.0.4"] },
        { op: "add", set: "m4", keys: ["10.2.0.1"], jumps: ["c1"] },
        { op: "delete", set: "nosuch", keys: [] },
      ]),
    ).to.equal(null);
    expect(contents("raw").s4).to.deep.equal(["10.1.0.1", "10.1.0.2", "10.1.0.3", "10.1.0.4"]);
    expect(inNetns([{ table: "raw", changes: [] }]).errors).to.deep.equal([null]);
  });

  it("deletes elements from sets and maps", () => {
    expect(
      both([
        { op: "delete", set: "s4", keys: ["10.1.0.2", "10.1.0.4"] },
        { op: "delete", set: "s6", keys: ["fd00:1::2"] },
        { op: "delete", set: "m4", keys: ["10.2.0.2"] },
        { op: "delete", set: "m6", keys: ["fd00:2::1"] },
      ]),
    ).to.equal(null);
    expect(contents("raw")).to.deep.equal({
      s4: ["10.1.0.1", "10.1.0.3"],
      s6: ["::ffff:10.9.0.1", "fd00:1::1"],
      m4: ["10.2.0.1 : jump c1", "10.2.0.3 : jump c1"],
      m6: ["fd00:2::2 : jump c1"],
      t4: [],
      t6: [],
    });
  });

  it("address . protocol . port keys: added and deleted as nft writes them", () => {
    expect(
      both([
        {
          op: "add",
          set: "t4",
          keys: ["10.3.0.1 . tcp . 80", "10.3.0.2 . udp . 53", "10.3.0.3 . sctp . 65535"],
        },
        { op: "add", set: "t6", keys: ["fd00:3::1 . tcp . 8080", "fd00:3::2 . udp . 1"] },
      ]),
    ).to.equal(null);
    expect(contents("raw").t4).to.deep.equal([
      "10.3.0.1 . tcp . 80",
      "10.3.0.2 . udp . 53",
      "10.3.0.3 . sctp . 65535",
    ]);
    expect(both([{ op: "delete", set: "t4", keys: ["10.3.0.2 . udp . 53"] }])).to.equal(null);
    expect(contents("raw").t4).to.deep.equal(["10.3.0.1 . tcp . 80", "10.3.0.3 . sctp . 65535"]);
    const { errors } = inNetns([
      { table: "raw", changes: [{ op: "add", set: "t4", keys: ["10.3.0.1 . icmp . 80"] }] },
    ]);
    expect(errors[0]).to.include("10.3.0.1 . icmp . 80 is not an IPv4 address . protocol . port");
  });

  it("a delete of a missing element fails the whole batch, naming the set and the element", () => {
    const before = contents("raw");
    const err = both([
      { op: "add", set: "s4", keys: ["10.1.0.9"] },
      { op: "add", set: "m6", keys: ["fd00:2::9"], jumps: ["c2"] },
      { op: "delete", set: "s6", keys: ["fd00:1::1", "fd00:1::77"] },
      { op: "add", set: "s4", keys: ["10.1.0.10"] },
    ]);
    expect(err).to.equal(
      "NftError: nft test: delete element inet raw s6 (2 elements): No such file or directory (element fd00:1::77)",
    );
    // Nothing of it applied: neither the adds before the failure nor the one after it.
    expect(contents("raw")).to.deep.equal(before);
  });

  it("a missing set, a missing chain and a key of the wrong family fail, naming the change", () => {
    const before = contents("raw");
    expect(both([{ op: "add", set: "nosuch", keys: ["10.1.0.9"] }])).to.equal(
      "NftError: nft test: add element inet raw nosuch (1 element): No such file or directory",
    );
    expect(
      both([
        { op: "add", set: "s4", keys: ["10.1.0.9"] },
        { op: "add", set: "m4", keys: ["10.2.0.9"], jumps: ["nochain"] },
      ]),
    ).to.match(
      /^NftError: nft test: add element inet raw m4 \(1 element\): No such file or directory/,
    );
    expect(both([{ op: "add", set: "s4", keys: ["fd00:1::9"] }])).to.match(
      /^NftError: nft test: add element inet raw s4 \(1 element\): Invalid argument/,
    );
    expect(contents("raw")).to.deep.equal(before);
    const { errors } = inNetns([
      { table: "raw", changes: [{ op: "add", set: "s4", keys: ["10.1.0.9", "fd00:1::9"] }] },
      { table: "raw", changes: [{ op: "add", set: "s4", keys: ["10.1.0.300"] }] },
      { table: "raw", changes: [{ op: "add", set: "m4", keys: ["10.2.0.9"], jumps: [] }] },
    ]);
    expect(errors).to.deep.equal([
      "NftError: nft test: add element inet raw s4: fd00:1::9 is not an IPv4 address (one shape per change)",
      "NftError: nft test: add element inet raw s4: 10.1.0.300 is not an IPv4 address (one shape per change)",
      "NftError: nft test: add element inet raw m4: 0 jumps for 1 keys",
    ]);
    expect(contents("raw")).to.deep.equal(before);
  });

  it("the addon refuses bad arguments with a TypeError naming the field", () => {
    const change = { op: "add", set: "s4", keyLength: 4, keys: "0a010009" };
    const { errors } = inNetns([
      { addon: { table: "", changes: [change] } },
      { addon: { table: "raw", changes: {} } },
      { addon: { table: "raw", changes: [{ ...change, op: "replace" }] } },
      { addon: { table: "raw", changes: [change, { ...change, set: 7 }] } },
      { addon: { table: "raw", changes: [{ ...change, keyLength: 5 }] } },
      { addon: { table: "raw", changes: [{ ...change, keys: "0a0100" }] } },
      { addon: { table: "raw", changes: [{ ...change, jumps: ["c1", "c2"] }] } },
      { addon: { table: "raw", changes: [{ ...change, jumps: [""] }] } },
    ]);
    const pre = "TypeError: elements(table, changes): ";
    expect(errors).to.deep.equal([
      `${pre}table must be a name of 1 to 255 bytes`,
      `${pre}changes must be an array`,
      `${pre}changes[0].op must be "add" or "delete"`,
      `${pre}changes[1].set must be a name of 1 to 255 bytes`,
      `${pre}changes[0].keyLength must be 4, 16, 12 or 24`,
      `${pre}changes[0].keys must be a Buffer of 4-byte keys`,
      `${pre}changes[0].jumps must be an array of one chain per key`,
      `${pre}changes[0].jumps[0] must be a chain name of 1 to 255 bytes`,
    ]);
    expect(contents("raw").s4).to.not.include("10.1.0.9");
  });

  it("a big batch: 5,000 addresses per change, split across messages, all or nothing", () => {
    const before = contents("raw");
    // 5,000 IPv6 map elements take some 260 KB: more than one message can hold
    // (an attribute's length is 16 bits), so the change is split.
    const big4 = range(5000, v4("10.3"));
    const big6 = range(5000, v6("fd00:3:"));
    const jumps = big6.map((_, i) => (i % 2 ? "c1" : "c2"));
    expect(
      both([
        { op: "add", set: "s4", keys: big4 },
        { op: "add", set: "m6", keys: big6, jumps },
      ]),
    ).to.equal(null);
    const after = contents("raw");
    expect(after.s4).to.have.length((before.s4?.length ?? 0) + 5000);
    expect(after.m6).to.have.length((before.m6?.length ?? 0) + 5000);
    expect(after.m6).to.include("fd00:3::1387 : jump c1");

    // The failing element is the last of a change of several messages: the
    // error names it, and none of the 10,000 adds before it applied.
    const more4 = range(5000, v4("10.4"));
    const more6 = range(5000, v6("fd00:4:"));
    expect(
      both([
        { op: "add", set: "s4", keys: more4 },
        { op: "add", set: "s6", keys: more6 },
        { op: "delete", set: "m6", keys: [...big6.slice(0, 4999), "fd00:3::ffff"] },
      ]),
    ).to.equal(
      "NftError: nft test: delete element inet raw m6 (5000 elements): No such file or directory (element fd00:3::ffff)",
    );
    expect(contents("raw")).to.deep.equal(after);

    expect(
      both([
        { op: "delete", set: "s4", keys: big4 },
        { op: "delete", set: "m6", keys: big6 },
      ]),
    ).to.equal(null);
    expect(contents("raw")).to.deep.equal(before);
  });
});
