import { expect } from "chai";
import {
  bigIntToIp,
  canonicalCidr,
  canonicalIp,
  cidrContains,
  cidrHasHostBits,
  cidrNetwork,
  cidrsOverlap,
  formatCidr,
  ipFamily,
  ipToBigInt,
  parseCidr,
  parseIp,
} from "../../src/net/ip.js";

describe("net/ip", () => {
  describe("parseIp and canonicalIp write what Go's net.IP.String writes", () => {
    for (const [input, want] of [
      ["10.1.0.5", "10.1.0.5"],
      ["0.0.0.0", "0.0.0.0"],
      ["255.255.255.255", "255.255.255.255"],
      ["::", "::"],
      ["::1", "::1"],
      ["1::", "1::"],
      ["FD00::0005", "fd00::5"],
      ["2001:db8:0:0:0:0:0:1", "2001:db8::1"],
      // One zero group is never shortened; the first of two equal runs is.
      ["2001:db8:0:1:1:1:1:1", "2001:db8:0:1:1:1:1:1"],
      ["1:0:0:1:0:0:0:1", "1:0:0:1::1"],
      ["2001:db8:0:0:1:0:0:1", "2001:db8::1:0:0:1"],
      ["1:2:3:4:5:6:7::", "1:2:3:4:5:6:7:0"],
      ["::ffff:10.1.0.5", "10.1.0.5"],
      ["::1.2.3.4", "::102:304"],
      ["1:2:3:4:5:6:1.2.3.4", "1:2:3:4:5:6:102:304"],
    ] as const) {
      it(`${input} → ${want}`, () => {
        expect(canonicalIp(input)).to.equal(want);
      });
    }
  });

  describe("parseIp refuses what Go refuses", () => {
    for (const input of [
      "",
      "10.1.0",
      "10.1.0.5.6",
      "10.1.0.256",
      "010.1.0.5",
      "10.1..5",
      " 10.1.0.5",
      "10.1.0.5/24",
      "10.1.0.5.",
      ".10.1.0.5",
      "10.1.0.05",
      "10.1.0.1000",
      "10.1.0.5 ",
      "10.1.0.+5",
      "10.1.0.５",
      "::ffff:10.1.0.256",
      ":::",
      "1:::2",
      "1::2::3",
      ":1::2",
      "1:2:3:4:5:6:7:8:9",
      "1:2:3:4:5:6:7:8::",
      "::1:2:3:4:5:6:7:8",
      "12345::1",
      "fe80::1%eth0",
      "1.2.3.4::",
      "1:2:3:4:5:6:7:1.2.3.4",
      "g::1",
    ]) {
      it(`rejects ${JSON.stringify(input)}`, () => {
        expect(parseIp(input)).to.equal(undefined);
      });
    }
  });

  describe("parseCidr keeps host bits and checks the prefix", () => {
    for (const [input, want] of [
      ["10.1.0.5/24", "10.1.0.5/24"],
      ["10.1.0.0/024", "10.1.0.0/24"],
      ["0.0.0.0/0", "0.0.0.0/0"],
      ["2001:DB8::5/64", "2001:db8::5/64"],
      ["::/0", "::/0"],
      // Go prints an IPv4-mapped CIDR as IPv4 with the prefix less 96.
      ["::ffff:10.1.0.5/120", "10.1.0.5/24"],
    ] as const) {
      it(`${input} → ${want}`, () => {
        expect(canonicalCidr(input)).to.equal(want);
      });
    }
    for (const input of ["10.1.0.5", "10.1.0.5/33", "10.1.0.5/", "10.1.0.5/-1", "::/129", "x/8"]) {
      it(`rejects ${JSON.stringify(input)}`, () => {
        expect(parseCidr(input)).to.equal(undefined);
      });
    }
  });

  for (const [input, family] of [
    ["10.1.0.5", 4],
    ["10.1.0.5/24", 4],
    ["fd00::5", 6],
    ["fd00::5/64", 6],
    ["::ffff:10.1.0.5", 4],
    ["nonsense", undefined],
  ] as const) {
    it(`ipFamily(${input}) is ${family}`, () => {
      expect(ipFamily(input)).to.equal(family);
    });
  }

  for (const [input, hostBits] of [
    ["10.1.0.0/24", false],
    ["10.1.0.5/24", true],
    ["10.1.0.4/30", false],
    ["10.1.0.6/31", false],
    ["10.1.0.7/31", true],
    ["0.0.0.0/0", false],
    ["fd00::/64", false],
    ["fd00::1:0:0:0:0/64", false],
    ["fd00::1/64", true],
    ["fd00::/7", true],
  ] as const) {
    it(`cidrHasHostBits(${input}) is ${hostBits}`, () => {
      expect(cidrHasHostBits(parseCidr(input)!)).to.equal(hostBits);
    });
  }

  it("cidrNetwork clears the host bits", () => {
    expect(formatCidr(cidrNetwork(parseCidr("10.1.7.5/22")!))).to.equal("10.1.4.0/22");
    expect(formatCidr(cidrNetwork(parseCidr("fd00::abcd/120")!))).to.equal("fd00::ab00/120");
  });

  for (const [cidr, ip, inside] of [
    ["10.1.0.0/24", "10.1.0.255", true],
    ["10.1.0.0/24", "10.1.1.0", false],
    ["10.1.0.0/24", "fd00::1", false],
    ["fd00::/64", "fd00::ffff", true],
    ["fd00::/64", "fd00:0:0:1::1", false],
    ["0.0.0.0/0", "192.0.2.1", true],
  ] as const) {
    it(`${cidr} ${inside ? "contains" : "does not contain"} ${ip}`, () => {
      expect(cidrContains(parseCidr(cidr)!, parseIp(ip)!)).to.equal(inside);
    });
  }
  it("cidrsOverlap is symmetric and per family", () => {
    const c = (t: string) => parseCidr(t)!;
    expect(cidrsOverlap(c("10.0.0.0/8"), c("10.1.2.0/24"))).to.equal(true);
    expect(cidrsOverlap(c("10.1.2.0/24"), c("10.0.0.0/8"))).to.equal(true);
    expect(cidrsOverlap(c("10.1.2.0/24"), c("10.1.3.0/24"))).to.equal(false);
    expect(cidrsOverlap(c("::/0"), c("10.0.0.0/8"))).to.equal(false);
    expect(cidrsOverlap(c("fd00::/8"), c("fd00:1::/64"))).to.equal(true);
  });

  it("ipToBigInt and bigIntToIp round-trip both families, and step across a byte", () => {
    expect(bigIntToIp(ipToBigInt(parseIp("10.1.0.255")!.bytes) + 1n, 4)).to.equal("10.1.1.0");
    expect(ipToBigInt(parseIp("0.0.1.0")!.bytes)).to.equal(256n);
    expect(bigIntToIp(ipToBigInt(parseIp("fd00::ffff")!.bytes) + 1n, 6)).to.equal("fd00::1:0");
    expect(bigIntToIp(0n, 6)).to.equal("::");
  });
});
