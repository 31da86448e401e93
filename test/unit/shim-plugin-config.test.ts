/**
 * The shim's stdin configuration: skel's checks (JSON, name, version), its own
 * conflist keys with their defaults, and which config versions allow which verb.
 */
import { expect } from "chai";
import { CniError } from "../../src/cni/errors.js";
import { requireVerbSupported } from "../../src/cni/versions.js";
import {
  DEFAULT_SOCKET,
  DEFAULT_STATE_DIR,
  DEFAULT_TIMEOUT_SECONDS,
  parseShimConfig,
} from "../../src/remote-plugin-shim/plugin-config.js";

const bytes = (v: unknown): Uint8Array =>
  Buffer.from(typeof v === "string" ? v : JSON.stringify(v));

function errorOf(fn: () => unknown): CniError {
  try {
    fn();
  } catch (err) {
    if (err instanceof CniError) return err;
    throw err;
  }
  throw new Error("expected a CniError");
}

describe("shim plugin config", () => {
  it("fills every shim key with its default", () => {
    const conf = parseShimConfig(
      bytes({ cniVersion: "1.0.0", name: "pods", type: "cni-driver-shim" }),
    );
    expect(conf).to.deep.include({
      name: "pods",
      cniVersion: "1.0.0",
      socket: DEFAULT_SOCKET,
      network: "",
      timeoutMs: DEFAULT_TIMEOUT_SECONDS * 1000,
      stateDir: DEFAULT_STATE_DIR,
    });
    expect(conf).not.to.have.property("logFile");
    expect(DEFAULT_SOCKET).to.equal("/run/cni-driver/driver.sock");
    expect(DEFAULT_STATE_DIR).to.equal("/var/lib/cni-driver");
    expect(DEFAULT_TIMEOUT_SECONDS).to.equal(30);
  });

  it("reads every shim key, and keeps the whole object for GC", () => {
    const raw = {
      cniVersion: "1.1.0",
      name: "pods",
      socket: "/run/x/driver.sock",
      network: "blue",
      timeoutSeconds: 2.5,
      stateDir: "/var/lib/x",
      logFile: "/var/log/shim.log",
      capabilities: { portMappings: true },
      "cni.dev/valid-attachments": [],
    };
    const conf = parseShimConfig(bytes(raw));
    expect(conf).to.deep.equal({
      name: "pods",
      cniVersion: "1.1.0",
      socket: "/run/x/driver.sock",
      network: "blue",
      timeoutMs: 2500,
      stateDir: "/var/lib/x",
      logFile: "/var/log/shim.log",
      raw,
    });
  });

  it("reads a config without cniVersion as 0.1.0, as libcni does", () => {
    expect(parseShimConfig(bytes({ name: "pods" })).cniVersion).to.equal("0.1.0");
    expect(parseShimConfig(bytes({ name: "pods", cniVersion: "" })).cniVersion).to.equal("0.1.0");
  });

  const bad: Array<[string, string | object, number, RegExp]> = [
    ["empty input", "", 6, /unmarshalling network config/],
    ["not JSON", "{", 6, /unmarshalling network config/],
    ["a JSON number", "5", 6, /cannot decode float64/],
    ["a JSON array", "[]", 6, /cannot decode \[\]interface/],
    ["JSON null (no name)", "null", 7, /^missing network name$/],
    ["no name", { cniVersion: "1.0.0" }, 7, /^missing network name$/],
    ["a name that is a number", { name: 5 }, 7, /invalid network name/],
    ["a name with a space", { name: "a b" }, 7, /invalid characters found in network name/],
    [
      "a cniVersion we do not speak",
      { name: "n", cniVersion: "1.2.0" },
      1,
      /incompatible CNI versions/,
    ],
    [
      "a cniVersion that is not a string",
      { name: "n", cniVersion: 1 },
      6,
      /"cniVersion" must be a string/,
    ],
    [
      "a socket that is not a string",
      { name: "n", socket: 5 },
      7,
      /"socket" must be an absolute path/,
    ],
    ["a relative socket", { name: "n", socket: "x.sock" }, 7, /"socket" must be an absolute path/],
    [
      "a network that is not a string",
      { name: "n", network: true },
      7,
      /"network" must be a string/,
    ],
    ["a network that is no network name", { name: "n", network: "-x" }, 7, /network name/],
    ["a negative timeoutSeconds", { name: "n", timeoutSeconds: -1 }, 7, /"timeoutSeconds"/],
    ["a timeoutSeconds in a string", { name: "n", timeoutSeconds: "5" }, 7, /"timeoutSeconds"/],
    [
      "a socket path longer than a unix socket's (107 bytes)",
      { name: "n", socket: `/run/${"s".repeat(103)}` },
      7,
      /"socket" cannot be used: \/run\/s+ is 108 bytes long; a unix socket's path holds at most 107/,
    ],
    [
      "a timeoutSeconds longer than a timer can wait (24.8 days)",
      { name: "n", timeoutSeconds: 3_000_000 },
      7,
      /"timeoutSeconds" must be a positive number of seconds, at most 2147483/,
    ],
    ["a relative stateDir", { name: "n", stateDir: "state" }, 7, /"stateDir"/],
    ["a logFile that is not a string", { name: "n", logFile: {} }, 7, /"logFile"/],
  ];
  for (const [what, input, code, msg] of bad) {
    it(`refuses ${what}: code ${code}`, () => {
      const err = errorOf(() => parseShimConfig(bytes(input)));
      expect(err.code).to.equal(code);
      expect(err.message).to.match(msg);
    });
  }

  describe("which config versions allow which verb (skel's rule)", () => {
    const table: Array<[string, string, boolean]> = [
      ["ADD", "0.1.0", true],
      ["DEL", "0.1.0", true],
      ["CHECK", "0.3.1", false],
      ["CHECK", "0.4.0", true],
      ["CHECK", "1.1.0", true],
      ["STATUS", "1.0.0", false],
      ["STATUS", "1.1.0", true],
      ["GC", "1.0.0", false],
      ["GC", "1.1.0", true],
    ];
    for (const [verb, version, allowed] of table) {
      it(`${verb} at ${version}: ${allowed ? "allowed" : "code 1"}`, () => {
        const check = () => requireVerbSupported(verb, version as never);
        if (allowed) expect(check).not.to.throw();
        else {
          const err = errorOf(check);
          expect(err.code).to.equal(1);
          expect(err.message).to.equal(
            `configuration version "${version}" does not support the ${verb} command`,
          );
        }
      });
    }
  });
});
