import { expect } from "chai";
import { parseNetworkConfigList } from "../../src/cni/conflist.js";
import { cniErrorOf } from "../support/cni-error.js";

/** A valid list with `extra` keys set over it (undefined removes a key). */
function list(extra: Record<string, unknown> = {}): string {
  const base: Record<string, unknown> = {
    cniVersion: "1.0.0",
    name: "pods",
    plugins: [{ type: "bridge" }],
  };
  for (const [k, v] of Object.entries(extra)) {
    if (v === undefined) delete base[k];
    else base[k] = v;
  }
  return JSON.stringify(base);
}

describe("cni/conflist", () => {
  describe("parseNetworkConfigList: cniVersion and cniVersions", () => {
    for (const [what, extra, want] of [
      ["missing cniVersion is 0.1.0", { cniVersion: undefined }, "0.1.0"],
      ["an empty cniVersion is 0.1.0", { cniVersion: "" }, "0.1.0"],
      ["cniVersion as written", { cniVersion: "0.3.1" }, "0.3.1"],
      [
        "cniVersions picks the highest we speak",
        { cniVersion: undefined, cniVersions: ["1.0.0", "1.1.0", "9.9.9"] },
        "1.1.0",
      ],
      [
        "cniVersion joins the cniVersions set",
        { cniVersion: "0.4.0", cniVersions: ["0.3.1"] },
        "0.4.0",
      ],
      [
        "a higher cniVersions entry beats cniVersion",
        { cniVersion: "0.4.0", cniVersions: ["1.0.0"] },
        "1.0.0",
      ],
      [
        "a too-new cniVersion is dropped when cniVersions has a usable entry",
        { cniVersion: "9.9.9", cniVersions: ["1.0.0"] },
        "1.0.0",
      ],
      ["an empty cniVersions leaves cniVersion", { cniVersion: "0.3.0", cniVersions: [] }, "0.3.0"],
      [
        "only too-new entries and no cniVersion: 0.1.0, as libcni",
        { cniVersion: undefined, cniVersions: ["2.0.0"] },
        "0.1.0",
      ],
    ] as const) {
      it(what, () => {
        expect(parseNetworkConfigList(list(extra)).cniVersion).to.equal(want);
      });
    }

    for (const [what, extra, code, pattern] of [
      ["an unsupported version", { cniVersion: "0.5.0" }, 1, /incompatible CNI versions/],
      ["a version newer than ours", { cniVersion: "1.2.0" }, 1, /incompatible CNI versions/],
      ["cniVersion not a string", { cniVersion: 1 }, 7, /invalid cniVersion type float64/],
      ["cniVersions not a list", { cniVersions: "1.1.0" }, 7, /invalid type for cniVersions/],
      [
        "a cniVersions entry not a string",
        { cniVersions: ["1.0.0", 2] },
        7,
        /cniVersions index 1: float64/,
      ],
      [
        "an unparsable cniVersions entry",
        { cniVersions: ["1.0.0", "one"] },
        1,
        /invalid cniVersions entry one at index 1/,
      ],
    ] as const) {
      it(`rejects ${what} with code ${code}`, () => {
        const err = cniErrorOf(() => parseNetworkConfigList(list(extra)));
        expect(err.code).to.equal(code);
        expect(err.message).to.match(pattern);
      });
    }
  });

  describe("parseNetworkConfigList: booleans", () => {
    for (const [value, want] of [
      [true, true],
      [false, false],
      ["true", true],
      ["TRUE", true],
      ["False", false],
      [undefined, false],
    ] as const) {
      for (const key of ["disableCheck", "disableGC", "loadOnlyInlinedPlugins"] as const) {
        it(`${key}: ${JSON.stringify(value)} is ${want}`, () => {
          expect(parseNetworkConfigList(list({ [key]: value }))[key]).to.equal(want);
        });
      }
    }

    for (const [value, pattern] of [
      ["yes", /invalid value "yes" for disableCheck/],
      [1, /invalid type float64 for disableCheck/],
      [null, /invalid type <nil> for disableCheck/],
    ] as const) {
      it(`disableCheck: ${JSON.stringify(value)} is code 7 naming the key`, () => {
        const err = cniErrorOf(() => parseNetworkConfigList(list({ disableCheck: value })));
        expect(err.code).to.equal(7);
        expect(err.message).to.match(pattern);
      });
    }
  });

  describe("parseNetworkConfigList: name, JSON and plugins", () => {
    for (const [what, text, code, pattern] of [
      ["non-JSON", "{name: pods", 6, /^error parsing configuration list: /],
      ["a JSON array", "[]", 6, /cannot decode \[\]interface \{\}/],
      ["a byte order mark", `\ufeff${list()}`, 6, /error parsing configuration list/],
      ["JSON null (no name)", "null", 7, /no name/],
      ["a missing name", list({ name: undefined }), 7, /error parsing configuration list: no name/],
      ["an empty name", list({ name: "" }), 7, /missing network name/],
      ["a name with a slash", list({ name: "a/b" }), 7, /invalid characters found in network name/],
      ["no plugins key", list({ plugins: undefined }), 7, /no plugin configs found/],
      [
        "no plugins key with loadOnlyInlinedPlugins",
        list({ plugins: undefined, loadOnlyInlinedPlugins: true }),
        7,
        /`loadOnlyInlinedPlugins` is true, and no 'plugins' key/,
      ],
      ["plugins not a list", list({ plugins: {} }), 7, /invalid 'plugins' type/],
      ["an empty plugins list", list({ plugins: [] }), 7, /no plugins in list/],
      [
        "a plugin without type",
        list({ plugins: [{ type: "bridge" }, { name: "x" }] }),
        7,
        /^failed to parse plugin config 1: error parsing configuration: missing 'type'/,
      ],
      [
        "a type with a slash",
        list({ plugins: [{ type: "../../bin/sh" }] }),
        7,
        /^failed to parse plugin config 0: .*invalid 'type' "..\/..\/bin\/sh"/,
      ],
      ["a type of ..", list({ plugins: [{ type: ".." }] }), 7, /plugin config 0: .*invalid 'type'/],
      ["a type that is not a string", list({ plugins: [{ type: 7 }] }), 7, /plugin config 0/],
      ["a plugin that is not an object", list({ plugins: ["bridge"] }), 7, /plugin config 0/],
      [
        "a capability that is not a boolean",
        list({ plugins: [{ type: "portmap", capabilities: { portMappings: "yes" } }] }),
        7,
        /plugin config 0: .*capability "portMappings"/,
      ],
    ] as const) {
      it(`rejects ${what} with code ${code}`, () => {
        const err = cniErrorOf(() => parseNetworkConfigList(text));
        expect(err.code).to.equal(code);
        expect(err.message).to.match(pattern);
      });
    }

    it("keeps each plugin's raw object, unknown keys included, and its capabilities", () => {
      const l = parseNetworkConfigList(
        list({
          plugins: [
            { type: "bridge", bridge: "cni0", ipam: { type: "host-local", weird: [1, { a: 2 }] } },
            { type: "portmap", capabilities: { portMappings: true, bandwidth: false } },
          ],
        }),
      );
      expect(l.plugins.map((p) => p.type)).to.deep.equal(["bridge", "portmap"]);
      expect(l.plugins[0]?.raw).to.deep.equal({
        type: "bridge",
        bridge: "cni0",
        ipam: { type: "host-local", weird: [1, { a: 2 }] },
      });
      expect(l.plugins[0]?.capabilities).to.deep.equal({});
      expect(l.plugins[1]?.capabilities).to.deep.equal({ portMappings: true, bandwidth: false });
      expect(Object.isFrozen(l.plugins[0]?.raw.ipam)).to.equal(true);
    });

    it("keeps the original bytes, from a string or from bytes", () => {
      const text = ` ${list()}\n`;
      expect(Buffer.from(parseNetworkConfigList(text).bytes).toString()).to.equal(text);
      const bytes = new TextEncoder().encode(text);
      expect(parseNetworkConfigList(bytes).bytes).to.equal(bytes);
    });
  });
});
