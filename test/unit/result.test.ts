import { expect } from "chai";
import { CniError } from "../../src/cni/errors.js";
import { containerInterfaceIndex, containerIps } from "../../src/cni/result-container.js";
import { convertResult, toResult100 } from "../../src/cni/result-convert.js";
import { formatResult, resultToJSON } from "../../src/cni/result-json.js";
import { parseResult } from "../../src/cni/result-read.js";
import type { AnyResult, Result020, Result040, Result100 } from "../../src/cni/types.js";
import { type CniVersion, resultFamily, SUPPORTED_VERSIONS } from "../../src/cni/versions.js";

const NETNS = "/var/run/netns/cni-1234";

/** A ptp-like 1.1.0 result: host veth, container eth0, two addresses per family. */
function result110(): Result100 {
  return {
    cniVersion: "1.1.0",
    interfaces: [
      { name: "veth1a2b3c4d", mac: "aa:bb:cc:dd:ee:01" },
      {
        name: "eth0",
        mac: "02:42:0a:01:00:05",
        mtu: 1450,
        sandbox: NETNS,
        socketPath: "/run/vhost.sock",
        pciID: "0000:00:1f.6",
      },
    ],
    ips: [
      { address: "10.1.0.5/24", gateway: "10.1.0.1", interface: 1 },
      { address: "fd00::5/64", gateway: "fd00::1", interface: 1 },
      { address: "10.2.0.5/24", interface: 1 },
      { address: "fd01::5/64", interface: 1 },
    ],
    routes: [
      {
        dst: "0.0.0.0/0",
        gw: "10.1.0.1",
        mtu: 1400,
        advmss: 1360,
        priority: 10,
        table: 0,
        scope: 0,
      },
      { dst: "::/0", gw: "fd00::1" },
      { dst: "192.168.0.0/16" },
    ],
    dns: {
      nameservers: ["10.96.0.10"],
      domain: "cluster.local",
      search: ["svc"],
      options: ["ndots:5"],
    },
  };
}

function result040(version = "0.4.0"): Result040 {
  return {
    cniVersion: version,
    interfaces: [{ name: "eth0", mac: "02:42:0a:01:00:05", sandbox: NETNS }],
    ips: [
      { version: "4", interface: 0, address: "10.1.0.5/24", gateway: "10.1.0.1" },
      { version: "6", interface: 0, address: "fd00::5/64" },
    ],
    routes: [{ dst: "0.0.0.0/0", gw: "10.1.0.1" }],
    dns: {},
  };
}

function result020(version = "0.2.0"): Result020 {
  return {
    cniVersion: version,
    ip4: { ip: "10.1.0.5/24", gateway: "10.1.0.1", routes: [{ dst: "0.0.0.0/0", gw: "10.1.0.1" }] },
    ip6: { ip: "fd00::5/64", routes: [{ dst: "::/0" }] },
    dns: { nameservers: ["10.96.0.10"] },
  };
}

function sampleOf(v: CniVersion): AnyResult {
  switch (resultFamily(v)) {
    case "1":
      return { ...result110(), cniVersion: v };
    case "0.3":
      return result040(v);
    case "0.1":
      return result020(v);
  }
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === "object") {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}

function expectCniError(fn: () => unknown, code: number, ...fragments: string[]): void {
  try {
    fn();
  } catch (e) {
    expect(e).to.be.instanceOf(CniError);
    const err = e as CniError;
    expect(err.code, err.message).to.equal(code);
    for (const f of fragments) expect(err.message).to.contain(f);
    return;
  }
  expect.fail("expected a CniError");
}

describe("cni/result", () => {
  describe("convertResult: every pair of versions", () => {
    for (const from of SUPPORTED_VERSIONS) {
      for (const to of SUPPORTED_VERSIONS) {
        it(`${from} → ${to} has the ${to} shape and leaves its input alone`, () => {
          const input = deepFreeze(sampleOf(from));
          const before = structuredClone(input);
          const out = convertResult(input, to) as unknown as Record<string, unknown>;
          expect(input).to.deep.equal(before);
          expect(out.cniVersion).to.equal(to);
          const fam = resultFamily(to);
          expect("ip4" in out, "ip4").to.equal(fam === "0.1");
          expect("ips" in out, "ips").to.equal(fam !== "0.1");
          const ips = (out.ips ?? []) as Record<string, unknown>[];
          for (const ip of ips) expect("version" in ip).to.equal(fam === "0.3");
          // The output is fresh: changing it does not reach the input.
          expect(out).to.not.equal(input);
        });
      }
    }
  });

  it("1.0.0 → 1.1.0 changes only cniVersion", () => {
    const r = { ...result110(), cniVersion: "1.0.0" };
    expect(convertResult(r, "1.1.0")).to.deep.equal({ ...r, cniVersion: "1.1.0" });
    expect(convertResult(result110(), "1.0.0")).to.deep.equal({
      ...result110(),
      cniVersion: "1.0.0",
    });
  });

  it("1.1.0 → 0.3.1 gains ip version by family and drops interface mtu, socketPath, pciID", () => {
    const out = convertResult(result110(), "0.3.1") as Result040;
    expect(out.ips!.map((ip) => ip.version)).to.deep.equal(["4", "6", "4", "6"]);
    expect(out.ips![0]).to.deep.equal({
      version: "4",
      address: "10.1.0.5/24",
      gateway: "10.1.0.1",
      interface: 1,
    });
    expect(out.interfaces![1]).to.deep.equal({
      name: "eth0",
      mac: "02:42:0a:01:00:05",
      sandbox: NETNS,
    });
    expect(out.dns).to.deep.equal(result110().dns);
  });

  it("1.1.0 → 0.4.0 keeps the 1.1.0 route fields, as libcni's shared Route type does", () => {
    const out = convertResult(result110(), "0.4.0") as Result040;
    expect(out.routes).to.deep.equal(result110().routes);
  });

  it("1.1.0 → 0.2.0 keeps the first IPv4 and the first IPv6 only, routes by dst family", () => {
    expect(convertResult(result110(), "0.2.0")).to.deep.equal({
      cniVersion: "0.2.0",
      ip4: {
        ip: "10.1.0.5/24",
        gateway: "10.1.0.1",
        // dst and gw only: mtu, advmss, priority, table and scope are gone.
        routes: [{ dst: "0.0.0.0/0", gw: "10.1.0.1" }, { dst: "192.168.0.0/16" }],
      },
      ip6: { ip: "fd00::5/64", gateway: "fd00::1", routes: [{ dst: "::/0", gw: "fd00::1" }] },
      dns: result110().dns,
    });
  });

  it("to 0.2.0, a route of a family without an address is dropped", () => {
    const r: Result100 = {
      cniVersion: "1.0.0",
      ips: [{ address: "10.1.0.5/24" }],
      routes: [{ dst: "::/0" }, { dst: "0.0.0.0/0" }],
    };
    expect(convertResult(r, "0.1.0")).to.deep.equal({
      cniVersion: "0.1.0",
      ip4: { ip: "10.1.0.5/24", routes: [{ dst: "0.0.0.0/0" }] },
      dns: {},
    });
  });

  it("0.4.0 → 0.2.0 picks by the ip's version field, as libcni does", () => {
    const r: Result040 = {
      cniVersion: "0.4.0",
      ips: [
        { version: "6", address: "fd00::5/64" },
        { version: "6", address: "fd00::6/64" },
        { version: "4", address: "10.1.0.6/24" },
      ],
      dns: {},
    };
    const out = convertResult(r, "0.2.0") as Result020;
    expect(out.ip4).to.deep.equal({ ip: "10.1.0.6/24" });
    expect(out.ip6).to.deep.equal({ ip: "fd00::5/64" });
  });

  for (const [from, r] of [
    ["1.1.0", { cniVersion: "1.1.0", interfaces: [{ name: "eth0", sandbox: NETNS }] }],
    ["1.0.0", { cniVersion: "1.0.0" }],
    ["0.4.0", { cniVersion: "0.4.0", ips: [], dns: {} }],
  ] as const) {
    it(`converting a ${from} result without IPs to 0.2.0 fails like libcni`, () => {
      expectCniError(
        () => convertResult(r as AnyResult, "0.2.0"),
        999,
        "cannot convert: no valid IP addresses",
      );
    });
  }

  it("0.2.0 → 1.0.0 → 0.2.0 gives back the same result", () => {
    const there = convertResult(result020(), "1.0.0");
    expect(there).to.deep.equal({
      cniVersion: "1.0.0",
      ips: [{ address: "10.1.0.5/24", gateway: "10.1.0.1" }, { address: "fd00::5/64" }],
      routes: [{ dst: "0.0.0.0/0", gw: "10.1.0.1" }, { dst: "::/0" }],
      dns: { nameservers: ["10.96.0.10"] },
    });
    expect(convertResult(there, "0.2.0")).to.deep.equal(result020());
  });

  it("0.1.0 → 0.3.0: ip4/ip6 become ips with version and no interface, routes go top-level", () => {
    expect(convertResult(result020("0.1.0"), "0.3.0")).to.deep.equal({
      cniVersion: "0.3.0",
      ips: [
        { version: "4", address: "10.1.0.5/24", gateway: "10.1.0.1" },
        { version: "6", address: "fd00::5/64" },
      ],
      routes: [{ dst: "0.0.0.0/0", gw: "10.1.0.1" }, { dst: "::/0" }],
      dns: { nameservers: ["10.96.0.10"] },
    });
  });

  it("0.4.0 → 1.1.0 drops version and keeps interface indexes", () => {
    expect(convertResult(result040(), "1.1.0")).to.deep.equal({
      cniVersion: "1.1.0",
      interfaces: [{ name: "eth0", mac: "02:42:0a:01:00:05", sandbox: NETNS }],
      ips: [
        { address: "10.1.0.5/24", gateway: "10.1.0.1", interface: 0 },
        { address: "fd00::5/64", interface: 0 },
      ],
      routes: [{ dst: "0.0.0.0/0", gw: "10.1.0.1" }],
    });
  });

  it("a result whose cniVersion we do not speak cannot be converted (code 1)", () => {
    expectCniError(() => convertResult({ cniVersion: "0.5.0" }, "1.0.0"), 1, '"0.5.0"');
  });

  describe("toResult100", () => {
    for (const [from, want] of [
      ["0.1.0", "1.1.0"],
      ["0.2.0", "1.1.0"],
      ["0.3.1", "1.1.0"],
      ["0.4.0", "1.1.0"],
      ["1.0.0", "1.0.0"],
      ["1.1.0", "1.1.0"],
    ] as const) {
      it(`a ${from} result becomes ${want}`, () => {
        const out = toResult100(sampleOf(from));
        expect(out.cniVersion).to.equal(want);
        expect(out.ips![0]).to.not.have.property("version");
      });
    }
  });

  describe("formatResult: the bytes a Go plugin prints", () => {
    it("1.1.0, indented, keys sorted at every level (libcni's map round trip)", () => {
      expect(formatResult(result110())).to.equal(`{
    "cniVersion": "1.1.0",
    "dns": {
        "domain": "cluster.local",
        "nameservers": [
            "10.96.0.10"
        ],
        "options": [
            "ndots:5"
        ],
        "search": [
            "svc"
        ]
    },
    "interfaces": [
        {
            "mac": "aa:bb:cc:dd:ee:01",
            "name": "veth1a2b3c4d"
        },
        {
            "mac": "02:42:0a:01:00:05",
            "mtu": 1450,
            "name": "eth0",
            "pciID": "0000:00:1f.6",
            "sandbox": "/var/run/netns/cni-1234",
            "socketPath": "/run/vhost.sock"
        }
    ],
    "ips": [
        {
            "address": "10.1.0.5/24",
            "gateway": "10.1.0.1",
            "interface": 1
        },
        {
            "address": "fd00::5/64",
            "gateway": "fd00::1",
            "interface": 1
        },
        {
            "address": "10.2.0.5/24",
            "interface": 1
        },
        {
            "address": "fd01::5/64",
            "interface": 1
        }
    ],
    "routes": [
        {
            "advmss": 1360,
            "dst": "0.0.0.0/0",
            "gw": "10.1.0.1",
            "mtu": 1400,
            "priority": 10,
            "scope": 0,
            "table": 0
        },
        {
            "dst": "::/0",
            "gw": "fd00::1"
        },
        {
            "dst": "192.168.0.0/16"
        }
    ]
}`);
    });

    it("1.0.0 omits empty arrays and an empty dns", () => {
      const r: Result100 = {
        cniVersion: "1.0.0",
        interfaces: [],
        ips: [{ address: "10.1.0.5/24", interface: 0 }],
        routes: [],
        dns: { nameservers: [], search: [] },
      };
      expect(formatResult(r, { indent: false })).to.equal(
        '{"cniVersion":"1.0.0","ips":[{"address":"10.1.0.5/24","interface":0}]}',
      );
    });

    it("0.4.0 in Go's struct order, ip version before interface", () => {
      expect(formatResult(result040(), { indent: false })).to.equal(
        '{"cniVersion":"0.4.0",' +
          '"interfaces":[{"name":"eth0","mac":"02:42:0a:01:00:05","sandbox":"/var/run/netns/cni-1234"}],' +
          '"ips":[{"version":"4","interface":0,"address":"10.1.0.5/24","gateway":"10.1.0.1"},' +
          '{"version":"6","interface":0,"address":"fd00::5/64"}],' +
          '"routes":[{"dst":"0.0.0.0/0","gw":"10.1.0.1"}],"dns":{}}',
      );
    });

    for (const v of ["0.3.0", "0.3.1", "0.4.0"] as const) {
      it(`${v} always writes "dns":{}, even from a 1.x result without dns`, () => {
        const r: Result100 = { cniVersion: "1.1.0", ips: [{ address: "10.1.0.5/24" }] };
        expect(formatResult(convertResult(r, v), { indent: false })).to.equal(
          `{"cniVersion":"${v}","ips":[{"version":"4","address":"10.1.0.5/24"}],"dns":{}}`,
        );
      });
    }

    it("0.3.1 route fields in types.Route order", () => {
      const out = formatResult(convertResult(result110(), "0.3.1"), { indent: false });
      expect(out).to.contain(
        '"routes":[{"dst":"0.0.0.0/0","gw":"10.1.0.1","mtu":1400,"advmss":1360,"priority":10,"table":0,"scope":0},',
      );
    });

    it("0.2.0, indented, in Go's struct order", () => {
      expect(formatResult(result020())).to.equal(`{
    "cniVersion": "0.2.0",
    "ip4": {
        "ip": "10.1.0.5/24",
        "gateway": "10.1.0.1",
        "routes": [
            {
                "dst": "0.0.0.0/0",
                "gw": "10.1.0.1"
            }
        ]
    },
    "ip6": {
        "ip": "fd00::5/64",
        "routes": [
            {
                "dst": "::/0"
            }
        ]
    },
    "dns": {
        "nameservers": [
            "10.96.0.10"
        ]
    }
}`);
    });

    it("escapes <, > and & as Go's encoding/json does", () => {
      const r: Result100 = {
        cniVersion: "1.1.0",
        interfaces: [{ name: "eth0", sandbox: "/run/netns/a<b>&c" }],
      };
      expect(formatResult(r, { indent: false })).to.equal(
        '{"cniVersion":"1.1.0","interfaces":[{"name":"eth0","sandbox":"/run/netns/a\\u003cb\\u003e\\u0026c"}]}',
      );
    });

    it("writes addresses in Go's canonical text", () => {
      const r: Result100 = {
        cniVersion: "1.0.0",
        ips: [{ address: "FD00:0:0:0:0:0:0:5/64", gateway: "FD00::0001" }],
      };
      expect(resultToJSON(r)).to.deep.equal({
        cniVersion: "1.0.0",
        ips: [{ address: "fd00::5/64", gateway: "fd00::1" }],
      });
    });

    it("interface mtu is not written below 1.0.0", () => {
      const out = formatResult(convertResult(result110(), "0.4.0"));
      expect(out).to.not.contain('"mtu": 1450');
      expect(out).to.not.contain("socketPath");
      expect(out).to.not.contain("pciID");
    });
  });

  describe("parseResult", () => {
    it("reads a 1.1.0 result printed by a plugin back into the same data", () => {
      expect(parseResult(formatResult(result110()))).to.deep.equal(result110());
    });

    for (const v of SUPPORTED_VERSIONS) {
      it(`formatResult then parseResult is the identity for ${v}`, () => {
        const r = convertResult(sampleOf(v), v);
        expect(parseResult(formatResult(r))).to.deep.equal(r);
      });
    }

    it("reads a result without cniVersion as 0.1.0 (libcni's DecodeVersion)", () => {
      expect(parseResult({ ip4: { ip: "10.1.0.5/24" } })).to.deep.equal({
        cniVersion: "0.1.0",
        ip4: { ip: "10.1.0.5/24" },
        dns: {},
      });
    });

    it("reads a prevResult without cniVersion in the config's version when asked", () => {
      const r = parseResult({ ips: [{ version: "4", address: "10.1.0.5/24" }] }, "0.4.0");
      expect(r).to.deep.equal({
        cniVersion: "0.4.0",
        ips: [{ version: "4", address: "10.1.0.5/24" }],
        dns: {},
      });
    });

    it("drops unknown keys and applies Go's omitempty", () => {
      const r = parseResult({
        cniVersion: "1.0.0",
        interfaces: [{ name: "eth0", mac: "", mtu: 0, sandbox: NETNS, extra: true }],
        ips: [{ version: "4", address: "10.1.0.5/24", gateway: "" }],
        routes: [{ dst: "0.0.0.0/0", mtu: 0, table: 0 }],
        dns: { nameservers: [] },
        somethingElse: 1,
      });
      expect(r).to.deep.equal({
        cniVersion: "1.0.0",
        interfaces: [{ name: "eth0", sandbox: NETNS }],
        ips: [{ address: "10.1.0.5/24" }],
        routes: [{ dst: "0.0.0.0/0", table: 0 }],
      });
    });

    it("takes a missing 0.4.0 ip version from the address family", () => {
      const r = parseResult({ cniVersion: "0.4.0", ips: [{ address: "fd00::5/64" }] }) as Result040;
      expect(r.ips![0]!.version).to.equal("6");
    });

    it("does not change its input", () => {
      const input = deepFreeze({
        cniVersion: "1.1.0",
        ips: [{ address: "FD00::5/64" }],
        dns: { nameservers: ["10.96.0.10"] },
      });
      const before = structuredClone(input);
      parseResult(input);
      expect(input).to.deep.equal(before);
    });

    for (const [what, input, field] of [
      ["null", null, "not a JSON object"],
      ["a number", 42, "not a JSON object"],
      ["an array", [], "not a JSON object"],
      ["text that is not JSON", "{not json", "failed to decode result"],
      ["a numeric cniVersion", { cniVersion: 1 }, "cniVersion"],
      ["ips that are not an array", { cniVersion: "1.0.0", ips: {} }, "ips: must be an array"],
      ["an ip that is not an object", { cniVersion: "1.0.0", ips: ["10.1.0.5/24"] }, "ips[0]"],
      [
        "an address that is not a CIDR",
        { cniVersion: "1.0.0", ips: [{ address: "10.1.0.5" }] },
        "ips[0].address: invalid CIDR address: 10.1.0.5",
      ],
      ["a missing address", { cniVersion: "1.1.0", ips: [{ interface: 0 }] }, "ips[0].address"],
      [
        "a bad gateway",
        { cniVersion: "1.1.0", ips: [{ address: "10.1.0.5/24", gateway: "10.1.0" }] },
        "ips[0].gateway: invalid IP address",
      ],
      [
        "a fractional interface index",
        { cniVersion: "1.1.0", ips: [{ address: "10.1.0.5/24", interface: 0.5 }] },
        "ips[0].interface",
      ],
      [
        "an interface mtu that is a string",
        { cniVersion: "1.1.0", interfaces: [{ name: "eth0", mtu: "1500" }] },
        "interfaces[0].mtu",
      ],
      [
        "a route dst that is not a CIDR",
        { cniVersion: "0.4.0", routes: [{ dst: "default" }] },
        "routes[0].dst",
      ],
      [
        "an ip version that is neither 4 nor 6",
        { cniVersion: "0.3.1", ips: [{ version: "5", address: "10.1.0.5/24" }] },
        "ips[0].version",
      ],
      ["an ip4 that is not an object", { cniVersion: "0.2.0", ip4: "10.1.0.5/24" }, "ip4"],
      ["an ip4 without ip", { cniVersion: "0.2.0", ip4: { gateway: "10.1.0.1" } }, "ip4.ip"],
      [
        "dns nameservers that are not an array",
        { cniVersion: "1.0.0", dns: { nameservers: "10.96.0.10" } },
        "dns.nameservers",
      ],
    ] as const) {
      it(`rejects ${what} with code 6`, () => {
        expectCniError(() => parseResult(input), 6, field);
      });
    }

    for (const v of ["2.0.0", "0.5.0", "1.0", "v1.0.0"]) {
      it(`rejects cniVersion ${v} with code 1`, () => {
        expectCniError(
          () => parseResult({ cniVersion: v }),
          1,
          `unsupported CNI result version "${v}"`,
        );
      });
    }
  });

  describe("the container interface", () => {
    it("containerIps follows portmap: the ips of the sandboxed ifname, and those without an index", () => {
      const r: Result100 = {
        cniVersion: "1.1.0",
        interfaces: [
          { name: "cni0" },
          { name: "veth1" },
          { name: "eth0", sandbox: NETNS },
          { name: "net1", sandbox: NETNS },
        ],
        ips: [
          { address: "10.1.0.1/24", interface: 0 },
          { address: "10.1.0.5/24", interface: 2 },
          { address: "10.9.0.5/24", interface: 3 },
          { address: "fd00::5/64" },
          { address: "fd01::5/64", interface: 9 },
        ],
      };
      expect(containerIps(r, "eth0").map((ip) => ip.address)).to.deep.equal([
        "10.1.0.5/24",
        "fd00::5/64",
        "fd01::5/64",
      ]);
      expect(containerInterfaceIndex(r, "eth0")).to.equal(2);
      expect(containerInterfaceIndex(r, "veth1")).to.equal(-1);
    });
  });
});
