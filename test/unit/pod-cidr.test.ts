import { expect } from "chai";
import type { JsonObject } from "../../src/common/json.js";
import { expandPodCidr } from "../../src/driver/config/pod-cidr.js";
import { cniErrorOf } from "../support/cni-error.js";

const list = (...plugins: JsonObject[]): JsonObject => ({
  cniVersion: "1.0.0",
  name: "pods",
  plugins,
});
const ptp = (ipam: JsonObject): JsonObject => ({ type: "ptp", ipam });
const ipamOf = (out: unknown, i = 0): JsonObject =>
  ((out as { plugins: JsonObject[] }).plugins[i] as JsonObject).ipam as JsonObject;

const BOTH = { v4: "10.244.1.0/24", v6: "fd00:10:244:1::/64" };

describe("driver/pod-cidr expandPodCidr", () => {
  it("fills a top-level legacy host-local subnet with the IPv4 pod CIDR", () => {
    const out = expandPodCidr(list(ptp({ type: "host-local", subnet: "usePodCidr" })), BOTH);
    expect(ipamOf(out)).to.deep.equal({ type: "host-local", subnet: "10.244.1.0/24" });
  });

  it("fills subnets inside ranges, v4 and v6, leaving the other range keys alone", () => {
    const out = expandPodCidr(
      list(
        ptp({
          type: "host-local",
          ranges: [
            [{ subnet: "usePodCidr", gateway: "10.244.1.1" }],
            [{ subnet: "usePodCidrIPv6" }],
            [{ subnet: "192.168.0.0/24" }],
          ],
        }),
      ),
      BOTH,
    );
    expect(ipamOf(out).ranges).to.deep.equal([
      [{ subnet: "10.244.1.0/24", gateway: "10.244.1.1" }],
      [{ subnet: "fd00:10:244:1::/64" }],
      [{ subnet: "192.168.0.0/24" }],
    ]);
  });

  it("expands every plugin of the list, not only the first", () => {
    const out = expandPodCidr(
      list(
        { type: "bridge", ipam: { type: "host-local", subnet: "usePodCidr" } },
        { type: "midonet", ipam: { type: "host-local", ranges: [[{ subnet: "usePodCidrIPv6" }]] } },
      ),
      BOTH,
    );
    expect(ipamOf(out, 0).subnet).to.equal("10.244.1.0/24");
    expect((ipamOf(out, 1).ranges as JsonObject[][])[0]?.[0]?.subnet).to.equal(
      "fd00:10:244:1::/64",
    );
  });

  it("leaves the input untouched and returns a new object", () => {
    const input = list(ptp({ type: "host-local", ranges: [[{ subnet: "usePodCidr" }]] }));
    const before = structuredClone(input);
    const out = expandPodCidr(input, BOTH);
    expect(input).to.deep.equal(before);
    expect(out).to.not.equal(input);
    expect(ipamOf(out)).to.not.equal(ipamOf(input));
  });

  it("gives host-local the node's lease directory only where the network names none, in any case of the key", () => {
    const dirOf = (ipam: JsonObject) =>
      ipamOf(expandPodCidr(list(ptp({ type: "host-local", ...ipam })), BOTH, "/node/leases"));
    expect(dirOf({}).dataDir).to.equal("/node/leases");
    expect(dirOf({ dataDir: "/own" }).dataDir).to.equal("/own");
    // host-local decodes "datadir" as dataDir: adding "dataDir" beside it would win over it.
    expect(dirOf({ datadir: "/own" })).to.not.have.property("dataDir");
  });

  it("does not touch another IPAM type's subnet", () => {
    const input = list(ptp({ type: "whereabouts", subnet: "usePodCidr" }));
    expect(expandPodCidr(input, BOTH)).to.deep.equal(input);
  });

  it("needs no pod CIDR when no template is used", () => {
    const input = list(ptp({ type: "host-local", subnet: "10.1.0.0/16" }));
    expect(expandPodCidr(input, {})).to.deep.equal(input);
  });

  for (const [template, cidrs, family] of [
    ["usePodCidr", {}, "IPv4"],
    ["usePodCidr", { v6: "fd00::/64" }, "IPv4"],
    ["usePodCidrIPv6", { v4: "10.244.1.0/24" }, "IPv6"],
    ["usePodCidrIPv6", { v6: "" }, "IPv6"],
  ] as const) {
    it(`rejects "${template}" with ${JSON.stringify(cidrs)}: code 7, no ${family} pod CIDR yet`, () => {
      const err = cniErrorOf(() =>
        expandPodCidr(list(ptp({ type: "host-local", ranges: [[{ subnet: template }]] })), cidrs),
      );
      expect(err.code).to.equal(7);
      expect(err.message).to.include(`no ${family} pod CIDR yet`);
      expect(err.message).to.include("--pod-cidr");
      expect(err.message).to.include('plugins[0] ("ptp"): ipam.ranges[0][0].subnet');
    });
  }

  it("rejects a pod CIDR of the wrong family for the template", () => {
    const err = cniErrorOf(() =>
      expandPodCidr(list(ptp({ type: "host-local", subnet: "usePodCidr" })), { v4: "fd00::/64" }),
    );
    expect(err.code).to.equal(7);
    expect(err.message).to.include('"fd00::/64" is not an IPv4 CIDR');
  });

  for (const odd of [null, 42, "text", [], { name: "x" }, { plugins: "no" }]) {
    it(`returns a copy of ${JSON.stringify(odd)} as it is (the parser reports its shape)`, () => {
      expect(expandPodCidr(odd, BOTH)).to.deep.equal(odd);
    });
  }
});
