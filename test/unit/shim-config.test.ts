/**
 * The shim's stdin configuration: what parseShimConfig makes of a valid one (its
 * own conflist keys with their defaults). Every refusal, and which config
 * versions allow which verb, is a vector in test/vectors/shim-validation.json
 * (test/unit/shim-validation-vectors.test.ts).
 */
import { expect } from "chai";
import { DEFAULT_SOCKET, DEFAULT_STATE_DIR } from "../../src/cni/socket-path.js";
import { DEFAULT_TIMEOUT_SECONDS, parseShimConfig } from "../support/shim-config.js";

const bytes = (v: unknown): Uint8Array =>
  Buffer.from(typeof v === "string" ? v : JSON.stringify(v));

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
});
