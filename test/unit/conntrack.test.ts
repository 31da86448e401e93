/** conntrack -L's lines as the cut reads them: tuples, state, which flows are live. */
import { expect } from "chai";
import { parseIp } from "../../src/net/ip.js";
import {
  decodeFlows,
  FLOW_RECORD_SIZE,
  flowIsLive,
  parseFlows,
} from "../../src/plumbing/conntrack.js";

const LINES = [
  "tcp      6 431999 ESTABLISHED src=10.244.2.5 dst=10.96.0.10 sport=40000 dport=80 src=10.244.1.2 dst=10.244.2.5 sport=8080 dport=40000 [ASSURED] mark=0 use=1",
  "tcp      6 110 TIME_WAIT src=10.244.2.5 dst=10.244.1.2 sport=40001 dport=81 src=10.244.1.2 dst=10.244.2.5 sport=81 dport=40001 [ASSURED] mark=0 use=1",
  "udp      17 29 src=fd00:2::5 dst=fd00:1::2 sport=5353 dport=80 [UNREPLIED] src=fd00:1::2 dst=fd00:2::5 sport=80 dport=5353 mark=0 use=1",
  "icmp     1 29 src=10.244.2.5 dst=10.244.1.2 type=8 code=0 id=7 src=10.244.1.2 dst=10.244.2.5 type=0 code=0 id=7 mark=0 use=1",
  "conntrack v1.4.7 (conntrack-tools): 4 flow entries have been shown.",
].join("\n");

describe("plumbing/conntrack", () => {
  it("reads the original and reply tuples, the state of TCP, and skips what has no ports", () => {
    const flows = parseFlows(LINES);
    expect(flows).to.have.length(3);
    expect(flows[0]).to.deep.equal({
      protocol: "tcp",
      state: "ESTABLISHED",
      original: { src: "10.244.2.5", dst: "10.96.0.10", sport: 40000, dport: 80 },
      reply: { src: "10.244.1.2", dst: "10.244.2.5", sport: 8080, dport: 40000 },
    });
    expect(flows[2]?.protocol).to.equal("udp");
    expect(flows[2]?.state).to.equal(undefined);
    expect(flows[2]?.reply.src).to.equal("fd00:1::2");
  });

  it("counts established and UDP flows live, closing ones not", () => {
    expect(parseFlows(LINES).map(flowIsLive)).to.deep.equal([true, false, true]);
  });
});

/** One record as native/conntrack packs it: family, protocol, state, ports, addresses. */
function record(
  family: 2 | 10,
  protocol: number,
  state: number,
  ports: [number, number, number, number],
  addrs: [string, string, string, string],
): Buffer {
  const b = Buffer.alloc(FLOW_RECORD_SIZE);
  b.writeUInt8(family, 0);
  b.writeUInt8(protocol, 1);
  b.writeUInt8(state, 2);
  for (const [i, p] of ports.entries()) b.writeUInt16BE(p, 4 + 2 * i);
  for (const [i, a] of addrs.entries()) {
    const ip = parseIp(a);
    if (!ip) throw new Error(a);
    Buffer.from(ip.bytes).copy(b, 12 + 16 * i);
  }
  return b;
}

describe("plumbing/conntrack: the ctnetlink addon's packed list", () => {
  const packed = Buffer.concat([
    record(
      2,
      6,
      3,
      [40000, 80, 8080, 40000],
      ["10.244.2.5", "10.96.0.10", "10.244.1.2", "10.244.2.5"],
    ),
    record(
      2,
      6,
      7,
      [40001, 81, 81, 40001],
      ["10.244.2.5", "10.244.1.2", "10.244.1.2", "10.244.2.5"],
    ),
    record(10, 17, 255, [5353, 80, 80, 5353], ["fd00:2::5", "fd00:1::2", "fd00:1::2", "fd00:2::5"]),
    record(2, 132, 5, [7, 9, 9, 7], ["10.0.0.1", "10.0.0.2", "10.0.0.2", "10.0.0.1"]),
    // A protocol the list leaves out, and a state number no table names.
    record(2, 1, 255, [0, 0, 0, 0], ["10.0.0.1", "10.0.0.2", "10.0.0.2", "10.0.0.1"]),
    record(2, 6, 200, [1, 2, 2, 1], ["10.0.0.1", "10.0.0.2", "10.0.0.2", "10.0.0.1"]),
  ]);

  it("reads the same Flow shape as conntrack -L's text", () => {
    const flows = decodeFlows(packed);
    expect(flows).to.have.length(5);
    const text = parseFlows(LINES);
    expect(flows[0]).to.deep.equal(text[0]);
    expect(flows[1]).to.deep.equal(text[1]);
    expect(flows[2]).to.deep.equal(text[2]);
    expect(flows[3]).to.deep.equal({
      protocol: "sctp",
      state: "SHUTDOWN_SENT",
      original: { src: "10.0.0.1", dst: "10.0.0.2", sport: 7, dport: 9 },
      reply: { src: "10.0.0.2", dst: "10.0.0.1", sport: 9, dport: 7 },
    });
    expect(flows[4]?.state).to.equal(undefined);
  });

  it("keeps flowIsLive's meaning: established and UDP live, closing TCP and SCTP not", () => {
    expect(decodeFlows(packed).map(flowIsLive)).to.deep.equal([true, false, true, false, true]);
  });

  it("ignores a trailing partial record", () => {
    expect(decodeFlows(packed.subarray(0, FLOW_RECORD_SIZE + 10))).to.have.length(1);
  });
});
