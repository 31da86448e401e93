/**
 * The Services scripts compiled to nf_tables messages
 * (src/driver/services/netlink-script.ts, netlink-rules.ts): every command
 * the fixture's scripts hold compiles, rules become the expressions nft
 * makes of them (as `nft --debug=netlink` prints them), keys are laid out as
 * the kernel stores them, and a text of any other shape is refused. The
 * kernel's own reading of the messages is test/integration/services-netlink.
 */
import { expect } from "chai";
import { compileRule } from "../../src/driver/services/netlink-rules.js";
import { encodeScript } from "../../src/driver/services/netlink-script.js";
import { SERVICES_TABLE, SERVICES_TABLES } from "../../src/driver/services/ruleset.js";
import { fullScriptParts } from "../../src/driver/services/ruleset-diff.js";
import {
  changes,
  render,
  SERVICES,
  SERVICES_2,
  SLICES,
  SLICES_2,
} from "../support/services-fixture.js";

type Decoded = { [type: string]: string | Decoded };

/** Netlink attributes as a tree: type -> payload hex, or the nested attributes. */
function decode(b: Uint8Array, at = 0, end = b.length): Decoded[] {
  const out: Decoded[] = [];
  while (at + 4 <= end) {
    const len = (b[at] as number) | ((b[at + 1] as number) << 8);
    const type = ((b[at + 2] as number) | ((b[at + 3] as number) << 8)) & 0x3fff;
    const nested = ((b[at + 3] as number) & 0x80) !== 0;
    const payload = b.subarray(at + 4, at + len);
    out.push({
      [type]: nested
        ? Object.assign({}, ...decode(b, at + 4, at + len))
        : Buffer.from(payload).toString("hex"),
    });
    at += (len + 3) & ~3;
  }
  return out;
}

/** One expression as `name {attr: value, ...}`, values in hex as sent. */
function show(e: Uint8Array): string {
  const [elem] = decode(e);
  const body = (elem?.["1"] ?? {}) as Decoded;
  const name = Buffer.from(String(body["1"]), "hex").toString().replace(/\0$/, "");
  return `${name} ${JSON.stringify(body["2"] ?? {})}`;
}

const BEFORE = render(SERVICES, SLICES);
const AFTER = render(SERVICES_2, SLICES_2);

describe("services: the scripts as nf_tables messages", () => {
  it("every command of the fixture's whole and incremental scripts compiles, one message or more each", () => {
    for (const script of [BEFORE.script, AFTER.script, changes(BEFORE, AFTER)]) {
      const commands = script.split("\n").filter((l) => /^(add|delete|flush) /.test(l)).length;
      const encoded = encodeScript(script);
      expect(encoded.count).to.be.at.least(commands);
      expect(encoded.messages.length).to.be.greaterThan(encoded.count * 20);
    }
  });

  it("a DNAT rule: the expressions nft makes of it", () => {
    const exprs = compileRule("meta l4proto tcp numgen random mod 3 == 0 dnat ip to 10.1.2.3:8080");
    expect(exprs.map(show)).to.deep.equal([
      // [ meta load l4proto => reg 1 ] [ cmp eq reg 1 0x00000006 ]
      'meta {"1":"00000001","2":"00000010"}',
      'cmp {"1":"00000001","2":"00000000","3":{"1":"06"}}',
      // [ numgen reg 1 = random mod 3 ] [ cmp eq reg 1 0x00000000 ]
      'numgen {"1":"00000001","2":"00000003","3":"00000001"}',
      'cmp {"1":"00000001","2":"00000000","3":{"1":"00000000"}}',
      // [ immediate reg 1 0x0302010a ] [ immediate reg 2 0x0000901f ]
      'immediate {"1":"00000001","2":{"1":"0a010203"}}',
      'immediate {"1":"00000002","2":{"1":"1f90"}}',
      // [ nat dnat ip addr_min reg 1 proto_min reg 2 flags 0x2 ]
      'nat {"1":"00000001","2":"00000002","3":"00000001","5":"00000002","7":"00000002"}',
    ]);
  });

  it("addresses: the family's dependency once, whole bytes of a prefix compared, else masked", () => {
    const exprs = compileRule(
      "ip daddr 10.96.0.1 ip saddr != 10.244.0.0/24 ip saddr != 10.244.16.0/20 goto svc-x",
    ).map(show);
    expect(exprs).to.deep.equal([
      // [ meta load nfproto => reg 1 ] [ cmp eq reg 1 0x00000002 ]
      'meta {"1":"00000001","2":"0000000f"}',
      'cmp {"1":"00000001","2":"00000000","3":{"1":"02"}}',
      // [ payload load 4b @ network header + 16 => reg 1 ] [ cmp eq reg 1 0x0100600a ]
      'payload {"1":"00000001","2":"00000001","3":"00000010","4":"00000004"}',
      'cmp {"1":"00000001","2":"00000000","3":{"1":"0a600001"}}',
      // [ payload load 3b @ network header + 12 => reg 1 ] [ cmp neq reg 1 0x0000f40a ]
      'payload {"1":"00000001","2":"00000001","3":"0000000c","4":"00000003"}',
      'cmp {"1":"00000001","2":"00000001","3":{"1":"0af400"}}',
      // [ payload load 4b ... + 12 ] [ bitwise reg 1 = ( reg 1 & 0x00f0ffff ) ^ 0 ] [ cmp neq 0x0010f40a ]
      'payload {"1":"00000001","2":"00000001","3":"0000000c","4":"00000004"}',
      'bitwise {"1":"00000001","2":"00000001","3":"00000004","4":{"1":"fffff000"},"5":{"1":"00000000"}}',
      'cmp {"1":"00000001","2":"00000001","3":{"1":"0af41000"}}',
      // [ immediate reg 0 goto -> svc-x ]
      'immediate {"1":"00000000","2":{"2":{"1":"fffffffc","2":"7376632d7800"}}}',
    ]);
  });

  it("a concatenation fills 32-bit registers in order, as nft numbers them", () => {
    const v4 = compileRule("ip daddr . meta l4proto . th dport vmap @service-ips").map(show);
    expect(v4.slice(2, 5).map((e) => JSON.parse(e.split(" ")[1] as string)["1"])).to.deep.equal([
      "00000001", // reg 1
      "00000009", // reg 9
      "0000000a", // reg 10
    ]);
    const v6 = compileRule("ip6 daddr . meta l4proto . th dport vmap @service-ips6").map(show);
    expect(v6.slice(2, 5).map((e) => JSON.parse(e.split(" ")[1] as string)["1"])).to.deep.equal([
      "00000001", // reg 1 (16 bytes)
      "00000002", // reg 2
      "0000000d", // reg 13
    ]);
    // The lookup's verdict goes to the verdict register.
    expect(v6[5]).to.equal(
      `lookup {"1":"${Buffer.from("service-ips6\0").toString("hex")}","2":"00000001","3":"00000000"}`,
    );
  });

  it("a rule of any other shape is refused, not sent", () => {
    expect(() => compileRule("tcp dport 80 counter accept")).to.throw(/cannot encode rule/);
    expect(() => compileRule("ip daddr fd00::1 drop")).to.throw(/not an ip address/);
    expect(() => encodeScript("add rule inet t c drop\nlist ruleset\n")).to.throw(/cannot encode/);
  });

  it("a verdict map's key and verdict as the kernel stores them", () => {
    const e = encodeScript(
      `add element inet ${SERVICES_TABLE} no-endpoint-services { 10.96.0.1 . tcp . 80 : goto reject-service }\n`,
    );
    expect(e.count).to.equal(1);
    expect(e.describe(0)).to.equal(`add element inet ${SERVICES_TABLE} no-endpoint-services`);
    const hex = e.messages.toString("hex");
    expect(hex).to.include("0a600001" + "06000000" + "00500000"); // address . protocol . port
    expect(hex).to.include("fffffffc"); // NFT_GOTO
  });

  it("the whole tables a table at a time: the shared one first, each part about one table", () => {
    const parts = [...fullScriptParts(BEFORE.blocks.values(), BEFORE.hairpin)];
    expect(parts[0]?.startsWith(`table inet ${SERVICES_TABLE} {}\n`)).to.equal(true);
    expect(parts).to.have.length(SERVICES_TABLES.length);
    for (const [i, p] of parts.entries()) {
      const tables = new Set(p.split("\n").flatMap((l) => /inet (\S+)/.exec(l)?.[1] ?? []));
      expect([...tables]).to.deep.equal([SERVICES_TABLES[i]]);
    }
    expect(parts.join("")).to.equal(BEFORE.script);
  });
});
