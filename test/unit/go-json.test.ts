import { expect } from "chai";
import {
  compareGoStrings,
  goField,
  goTypeName,
  marshalGoStruct,
  marshalGoValue,
} from "../../src/cni/go-json.js";

describe("cni/go-json", () => {
  for (const [what, value, want] of [
    [
      "maps with sorted keys at every level",
      { b: 1, a: { d: [{ z: 1, y: 2 }], c: null } },
      '{"a":{"c":null,"d":[{"y":2,"z":1}]},"b":1}',
    ],
    [
      "HTML characters escaped",
      "<a href='x'>&</a>",
      "\"\\u003ca href='x'\\u003e\\u0026\\u003c/a\\u003e\"",
    ],
    ["line and paragraph separators escaped", "\u2028\u2029", '"\\u2028\\u2029"'],
    ["bytes as base64", new Uint8Array([0, 1, 2, 250]), '"AAEC+g=="'],
    ["-0 kept", -0, "-0"],
    ["small numbers with an exponent", 1e-7, "1e-7"],
    ["large numbers with an exponent", 1e21, "1e+21"],
    ["undefined members left out", { a: undefined, b: 1 }, '{"b":1}'],
  ] as const) {
    it(what, () => {
      expect(marshalGoValue(value)).to.equal(want);
    });
  }

  it("a struct keeps its field order and leaves out undefined fields", () => {
    expect(
      marshalGoStruct([
        ["z", 1],
        ["a", undefined],
        ["m", { y: 1, x: 2 }],
      ]),
    ).to.equal('{"z":1,"m":{"x":2,"y":1}}');
  });

  it("sorts strings by code point as Go does, not by UTF-16 unit", () => {
    expect(["\u{1F600}", "\uFF01", "a"].sort(compareGoStrings)).to.deep.equal([
      "a",
      "\uFF01",
      "\u{1F600}",
    ]);
  });

  for (const [value, want] of [
    [null, "<nil>"],
    [1, "float64"],
    ["s", "string"],
    [true, "bool"],
    [[], "[]interface {}"],
    [{}, "map[string]interface {}"],
  ] as const) {
    it(`goTypeName(${JSON.stringify(value)}) is ${want}`, () => {
      expect(goTypeName(value)).to.equal(want);
    });
  }

  it("goField finds a struct field's key as encoding/json does: any case, the last one wins", () => {
    expect(goField({ dataDir: "/a" }, "dataDir")).to.equal("/a");
    expect(goField({ DATADIR: "/a" }, "dataDir")).to.equal("/a");
    expect(goField({ dataDir: "/a", datadir: "/b" }, "dataDir")).to.equal("/b");
    expect(goField({ datadir: "/b", dataDir: "/a" }, "dataDir")).to.equal("/a");
    // ſ (U+017F) folds to s and K (U+212A, Kelvin) to k; nothing else does.
    expect(goField({ "\u017fubnet": "x" }, "subnet")).to.equal("x");
    expect(goField({ "\u212aey": "x" }, "key")).to.equal("x");
    expect(goField({ "data-dir": "/a" }, "dataDir")).to.equal(undefined);
    expect(goField({ dataDir: null }, "dataDir")).to.equal(null);
  });
});
