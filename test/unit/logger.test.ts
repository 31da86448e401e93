import { Writable } from "node:stream";
import { expect } from "chai";
import { createLogger, logCall } from "../../src/common/logger.js";

/** A stream that keeps what is written, split into lines. */
function capture(): { stream: Writable; lines: () => string[] } {
  let text = "";
  const stream = new Writable({
    write(chunk: Buffer | string, _enc, done) {
      text += chunk.toString();
      done();
    },
  });
  return { stream, lines: () => text.split("\n").filter((l) => l !== "") };
}

describe("driver/logger", () => {
  it("writes one JSON line per call with verb, container, network, duration and outcome", () => {
    const out = capture();
    const logger = createLogger({ level: "info", name: "cni-driver", destination: out.stream });
    logCall(logger, {
      verb: "ADD",
      containerId: "c0ffee",
      ifName: "eth0",
      network: "pods",
      durationMs: 12.34567,
      outcome: "ok",
    });
    const lines = out.lines();
    expect(lines).to.have.length(1);
    const rec = JSON.parse(lines[0]!) as Record<string, unknown>;
    expect(rec).to.include({
      level: "info",
      name: "cni-driver",
      verb: "ADD",
      containerId: "c0ffee",
      ifName: "eth0",
      network: "pods",
      durationMs: 12.346,
      outcome: "ok",
      msg: "ADD ok",
    });
    expect(rec).to.not.have.property("code");
    expect(new Date(rec.time as string).toISOString()).to.equal(rec.time);
  });

  it("logs a failed call at error level with its code and message", () => {
    const out = capture();
    const logger = createLogger({ level: "info", destination: out.stream });
    logCall(logger, {
      verb: "DEL",
      containerId: "abc",
      durationMs: 3,
      outcome: "error",
      code: 7,
      msg: "network gone not found",
    });
    const lines = out.lines();
    expect(lines).to.have.length(1);
    const rec = JSON.parse(lines[0]!) as Record<string, unknown>;
    expect(rec).to.include({
      level: "error",
      verb: "DEL",
      containerId: "abc",
      outcome: "error",
      code: 7,
      msg: "network gone not found",
    });
    expect(rec).to.not.have.property("network");
    expect(rec).to.not.have.property("ifName");
  });

  for (const [level, lines] of [
    ["warn", 1],
    ["silent", 0],
  ] as const) {
    it(`at level ${level}, keeps ${lines} of one ok call and one failed call`, () => {
      const out = capture();
      const logger = createLogger({ level, destination: out.stream });
      logCall(logger, { verb: "CHECK", durationMs: 1, outcome: "ok" });
      logCall(logger, { verb: "CHECK", durationMs: 1, outcome: "error", code: 3 });
      expect(out.lines()).to.have.length(lines);
    });
  }
});
