import { expect } from "chai";
import { CniError } from "../../src/cni/errors.js";
import {
  compareVersions,
  isSupportedVersion,
  requireSkelVersion,
  requireSupportedVersion,
  resultFamily,
  SUPPORTED_VERSIONS,
  versionInfo,
} from "../../src/cni/versions.js";

describe("cni/versions", () => {
  it("speaks every version from 0.1.0 to 1.1.0", () => {
    expect(SUPPORTED_VERSIONS).to.deep.equal([
      "0.1.0",
      "0.2.0",
      "0.3.0",
      "0.3.1",
      "0.4.0",
      "1.0.0",
      "1.1.0",
    ]);
  });

  for (const [v, ok] of [
    ["1.1.0", true],
    ["0.3.1", true],
    ["1.2.0", false],
    ["0.3", false],
    ["", false],
    ["v1.0.0", false],
  ] as const) {
    it(`isSupportedVersion(${JSON.stringify(v)}) is ${ok}`, () => {
      expect(isSupportedVersion(v)).to.equal(ok);
    });
  }

  for (const [a, b, want] of [
    ["0.3.1", "0.4.0", -1],
    ["1.0.0", "0.4.0", 1],
    ["1.1.0", "1.1.0", 0],
    ["0.10.0", "0.9.0", 1],
  ] as const) {
    it(`compareVersions(${a}, ${b}) = ${want}`, () => {
      expect(compareVersions(a, b)).to.equal(want);
    });
  }

  it("compareVersions rejects a malformed version with code 1", () => {
    expect(() => compareVersions("1.0", "1.0.0"))
      .to.throw(CniError)
      .with.property("code", 1);
  });

  for (const [v, fam] of [
    ["0.1.0", "0.1"],
    ["0.2.0", "0.1"],
    ["0.3.0", "0.3"],
    ["0.3.1", "0.3"],
    ["0.4.0", "0.3"],
    ["1.0.0", "1"],
    ["1.1.0", "1"],
  ] as const) {
    it(`${v} results have the ${fam} shape`, () => {
      expect(resultFamily(v)).to.equal(fam);
    });
  }

  it("an unsupported config version is code 1 with details naming both", () => {
    try {
      requireSupportedVersion("2.0.0");
      expect.fail("should throw");
    } catch (e) {
      expect(e).to.be.instanceOf(CniError);
      const err = e as CniError;
      expect(err.code).to.equal(1);
      expect(err.message).to.contain('"2.0.0"');
      expect(err.details).to.contain("2.0.0").and.to.contain("1.1.0");
    }
  });

  it("VERSION lists every supported version", () => {
    expect(versionInfo("0.4.0")).to.deep.equal({
      cniVersion: "0.4.0",
      supportedVersions: [...SUPPORTED_VERSIONS],
    });
  });

  describe("requireSkelVersion: what a plugin's skel refuses before the plugin runs", () => {
    const refused = (command: string, version: unknown) => {
      try {
        requireSkelVersion(command, version);
      } catch (e) {
        expect(e).to.be.instanceOf(CniError);
        return {
          code: (e as CniError).code,
          msg: (e as CniError).message,
          details: (e as CniError).details,
        };
      }
      return undefined;
    };
    for (const [command, version, msg] of [
      ["ADD", "1.0.0", undefined],
      ["ADD", undefined, undefined],
      ["CHECK", "0.4.0", undefined],
      ["CHECK", "0.3.1", "config version does not allow CHECK"],
      ["CHECK", "", "config version does not allow CHECK"],
      ["ADD", "9.9.9", "incompatible CNI versions"],
      ["DEL", "0.4.5", "incompatible CNI versions"],
      ["CHECK", "9.9.9", "plugin version does not allow CHECK"],
    ] as const) {
      it(`${command} at ${JSON.stringify(version)}: ${msg ?? "passes"}`, () => {
        const got = refused(command, version);
        if (msg === undefined) expect(got).to.equal(undefined);
        else expect(got).to.deep.include({ code: 1, msg });
      });
    }

    it("names the config's version and every supported one in the details", () => {
      expect(refused("ADD", "9.9.9")?.details).to.equal(
        `config is "9.9.9", plugin supports [${SUPPORTED_VERSIONS.map((v) => `"${v}"`).join(" ")}]`,
      );
    });
  });
});
