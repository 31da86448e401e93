import { expect } from "chai";
import { CniError } from "../../src/cni/errors.js";
import type { AnyResult } from "../../src/cni/types.js";
import { toleratedCheckFailure } from "../../src/driver/chain/plugin-bugs.js";

const v4Only: AnyResult = {
  cniVersion: "1.0.0",
  interfaces: [{ name: "eth0", sandbox: "/run/netns/p" }],
  ips: [{ address: "10.1.0.5/24", interface: 0 }],
};
const dualStack: AnyResult = {
  cniVersion: "1.0.0",
  interfaces: [{ name: "eth0", sandbox: "/run/netns/p" }],
  ips: [
    { address: "10.1.0.5/24", interface: 0 },
    { address: "fd00::5/64", interface: 0 },
  ],
};
const noIps: AnyResult = { cniVersion: "1.0.0", interfaces: [] };
const v6Failed = 'could not check ipv6 dnat: chain "CNI-DN-1" does not exist';
const wrapped = `plugin type="portmap" (#2 of network "n") failed (check): ${v6Failed}`;

describe("plugin-bugs: CHECK failures that are a plugin's bug", () => {
  const cases: [string, string, string, AnyResult | undefined, boolean][] = [
    ["portmap's IPv6 check on an IPv4-only pod", "portmap", v6Failed, v4Only, true],
    ["the same, as the executor words it", "portmap", wrapped, v4Only, true],
    ["a dual-stack pod: its IPv6 rules are real", "portmap", v6Failed, dualStack, false],
    ["a missing IPv4 rule", "portmap", "could not check ipv4 dnat: rule missing", v4Only, false],
    ["another plugin saying the same words", "bandwidth", v6Failed, v4Only, false],
    ["no prevResult to tell the families from", "portmap", v6Failed, undefined, false],
    ["a prevResult without addresses", "portmap", v6Failed, noIps, false],
  ];
  for (const [what, type, msg, prev, excused] of cases) {
    it(`${excused ? "excuses" : "does not excuse"} ${what}`, () => {
      const reason = toleratedCheckFailure(type, new CniError(999, msg), prev);
      if (excused) expect(reason).to.be.a("string").and.to.contain("plugins#819");
      else expect(reason).to.equal(undefined);
    });
  }
});
