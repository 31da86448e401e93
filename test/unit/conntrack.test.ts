/** conntrack -L's lines as the cut reads them: tuples, state, which flows are live. */
import { expect } from "chai";
import { flowIsLive, parseFlows } from "../../src/plumbing/conntrack.js";

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
