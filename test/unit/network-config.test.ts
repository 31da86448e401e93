import { expect } from "chai";
import { CniError } from "../../src/cni/errors.js";
import type { JsonObject } from "../../src/common/json.js";
import {
  type BuiltinValidator,
  type LoadOptions,
  loadDriverConfig,
} from "../../src/driver/config/network-config.js";
import { bridgeMac } from "../../src/plumbing/mac.js";
import { cniErrorOf } from "../support/cni-error.js";

/** A volume's keys: objects are written as JSON, strings as they are. */
function files(entries: Record<string, JsonObject | unknown[] | string>): Map<string, Uint8Array> {
  return new Map(
    Object.entries(entries).map(([k, v]) => [
      k,
      Buffer.from(typeof v === "string" ? v : JSON.stringify(v)),
    ]),
  );
}

const INSTALLED = new Set(["ptp", "bridge", "portmap", "bandwidth", "host-local"]);

function opts(extra: Partial<LoadOptions> = {}): LoadOptions {
  return {
    source: "/etc/cni-driver",
    pluginExists: (t) => INSTALLED.has(t),
    binDirs: ["/opt/cni/bin"],
    ...extra,
  };
}

const hostLocal = (ipam: JsonObject = {}): JsonObject => ({
  type: "host-local",
  ranges: [[{ subnet: "10.244.0.0/24" }]],
  ...ipam,
});

const conflist = (
  name: string,
  plugins: JsonObject[] = [{ type: "ptp", ipam: hostLocal() }],
): JsonObject => ({
  cniVersion: "1.0.0",
  name,
  plugins,
});

const load = (f: Map<string, Uint8Array>, o: LoadOptions = opts()) => loadDriverConfig(f, o, 1);

describe("driver/network-config loadDriverConfig", () => {
  describe("networks and the default", () => {
    it("loads one conflist: keyed by its name, the default, empty settings", () => {
      const cfg = loadDriverConfig(files({ "10-pods.conflist": conflist("pods") }), opts(), 7);
      expect([...cfg.networks.keys()]).to.deep.equal(["pods"]);
      expect(cfg.networks.get("pods")?.plugins.map((p) => p.type)).to.deep.equal(["ptp"]);
      expect(cfg.defaultNetwork).to.equal("pods");
      expect(cfg.settings).to.deep.equal({});
      expect(cfg.source).to.equal("/etc/cni-driver");
      expect(cfg.generation).to.equal(7);
      expect(cfg.loadedAt).to.be.instanceOf(Date);
      expect(cfg.contentHash).to.match(/^[0-9a-f]{64}$/);
    });

    it("takes the default network from driver.json and passes its other keys through", () => {
      const cfg = load(
        files({
          "a.conflist": conflist("alpha"),
          "b.conflist": conflist("beta"),
          "driver.json": { defaultNetwork: "beta", logLevel: "debug", extra: { x: 1 } },
        }),
      );
      expect(cfg.defaultNetwork).to.equal("beta");
      expect(cfg.settings).to.deep.equal({
        defaultNetwork: "beta",
        logLevel: "debug",
        extra: { x: 1 },
      });
    });

    it("without driver.json, the default is the first conflist by key name, not by network name", () => {
      const cfg = load(
        files({ "20-b.conflist": conflist("alpha"), "10-a.conflist": conflist("zeta") }),
      );
      expect(cfg.defaultNetwork).to.equal("zeta");
      expect([...cfg.networks.keys()]).to.deep.equal(["zeta", "alpha"]);
    });

    it("driver.json without defaultNetwork falls back to the first conflist", () => {
      const cfg = load(
        files({ "b.conflist": conflist("two"), "a.conflist": conflist("one"), "driver.json": {} }),
      );
      expect(cfg.defaultNetwork).to.equal("one");
    });

    it("ignores keys that are neither .conflist nor driver.json, whatever they hold", () => {
      const cfg = load(
        files({
          "pods.conflist": conflist("pods"),
          "README.md": "# not JSON at all {",
          "old.conf": "{broken",
          "settings.json": "[]",
        }),
      );
      expect([...cfg.networks.keys()]).to.deep.equal(["pods"]);
    });

    it("rejects a volume without any .conflist key (code 7)", () => {
      const err = cniErrorOf(() => load(files({ "driver.json": {}, "pods.conf": conflist("p") })));
      expect(err.code).to.equal(7);
      expect(err.message).to.include("no network configured");
      expect(err.message).to.include(".conflist");
    });

    it("rejects two conflists with the same network name, naming both keys", () => {
      const err = cniErrorOf(() =>
        load(files({ "a.conflist": conflist("pods"), "b.conflist": conflist("pods") })),
      );
      expect(err.code).to.equal(7);
      expect(err.message).to.match(/^b\.conflist: /);
      expect(err.message).to.include('"pods"');
      expect(err.message).to.include("a.conflist");
    });

    it("rejects a defaultNetwork that names no network", () => {
      const err = cniErrorOf(() =>
        load(files({ "a.conflist": conflist("pods"), "driver.json": { defaultNetwork: "podz" } })),
      );
      expect(err.code).to.equal(7);
      expect(err.message).to.match(/^driver\.json: /);
      expect(err.message).to.include('"podz"');
    });

    for (const [text, code] of [
      ["[]", 7],
      ['"pods"', 7],
      ["null", 7],
      ["42", 7],
      ['{"defaultNetwork": 3}', 7],
      ['{"defaultNetwork": ""}', 7],
      ["{not json", 6],
    ] as const) {
      it(`rejects driver.json ${text} with code ${code}, naming driver.json`, () => {
        const err = cniErrorOf(() =>
          load(files({ "a.conflist": conflist("pods"), "driver.json": text })),
        );
        expect(err.code).to.equal(code);
        expect(err.message).to.match(/^driver\.json: /);
      });
    }
  });

  describe("each conflist", () => {
    it("rejects invalid JSON with code 6, naming the file", () => {
      const err = cniErrorOf(() =>
        load(files({ "a.conflist": conflist("ok"), "networks.conflist": '{"name": "x",' })),
      );
      expect(err.code).to.equal(6);
      expect(err.message).to.match(/^networks\.conflist: /);
    });

    it("keeps code 1 for an unsupported cniVersion, naming the file", () => {
      const err = cniErrorOf(() =>
        load(files({ "v.conflist": { ...conflist("pods"), cniVersion: "0.9.9" } })),
      );
      expect(err.code).to.equal(1);
      expect(err.message).to.match(/^v\.conflist: /);
    });

    it("rejects a plugin type that is not installed, naming the file, the plugin and the dirs", () => {
      const err = cniErrorOf(() =>
        load(
          files({
            "networks.conflist": conflist("pods", [
              { type: "ptp", ipam: hostLocal() },
              { type: "portmapx", capabilities: { portMappings: true } },
            ]),
          }),
        ),
      );
      expect(err.code).to.equal(7);
      expect(err.message).to.equal(
        'networks.conflist: plugins[1] ("portmapx"): no such plugin in /opt/cni/bin',
      );
    });

    for (const type of ["../../bin/sh", "/usr/lib/cni/ptp", "sub/ptp", ".."]) {
      it(`rejects type ${JSON.stringify(type)} as a path without looking it up`, () => {
        const asked: string[] = [];
        const err = cniErrorOf(() =>
          load(
            files({ "p.conflist": conflist("pods", [{ type }]) }),
            opts({
              pluginExists: (t) => {
                asked.push(t);
                return true;
              },
            }),
          ),
        );
        expect(err.code).to.equal(7);
        expect(err.message).to.match(/^p\.conflist: /);
        expect(err.message).to.include("not a path");
        expect(asked).to.deep.equal([]);
      });
    }

    it("accepts a built-in type without an executable, running its validator on its object", () => {
      const seen: JsonObject[] = [];
      const midonet: BuiltinValidator = (conf) => {
        seen.push(conf);
      };
      const plugin = { type: "midonet", datapath: "kernel", ipam: hostLocal() };
      const cfg = load(
        files({ "m.conflist": conflist("mido", [plugin]) }),
        opts({ builtins: new Map([["midonet", midonet]]) }),
      );
      expect(cfg.networks.has("mido")).to.equal(true);
      expect(seen).to.deep.equal([plugin]);
    });

    it("reports a built-in validator's error with the file and the plugin", () => {
      const midonet: BuiltinValidator = (conf) => {
        if (conf.datapath !== "kernel" && conf.datapath !== "midonet") {
          throw new CniError(7, `datapath: must be "kernel" or "midonet"`);
        }
      };
      const err = cniErrorOf(() =>
        load(
          files({ "m.conflist": conflist("mido", [{ type: "midonet", datapath: "ovs" }]) }),
          opts({ builtins: new Map([["midonet", midonet]]) }),
        ),
      );
      expect(err.code).to.equal(7);
      expect(err.message).to.equal(
        'm.conflist: plugins[0] ("midonet"): datapath: must be "kernel" or "midonet"',
      );
    });
  });

  describe("host-local ipam", () => {
    const withIpam = (ipam: JsonObject, plugin: JsonObject = { type: "ptp" }) =>
      files({ "hl.conflist": conflist("pods", [{ ...plugin, ipam }]) });

    const good: [string, JsonObject][] = [
      ["a /24 in ranges", hostLocal()],
      ["a legacy top-level /16", { type: "host-local", subnet: "10.1.0.0/16" }],
      ["the smallest IPv4 subnet, a /30", { type: "host-local", subnet: "10.1.0.4/30" }],
      [
        "rangeStart, rangeEnd and gateway inside the subnet",
        {
          type: "host-local",
          ranges: [
            [
              {
                subnet: "10.1.0.0/24",
                rangeStart: "10.1.0.10",
                rangeEnd: "10.1.0.20",
                gateway: "10.1.0.1",
              },
            ],
          ],
        },
      ],
      [
        "dual stack: one IPv4 and one IPv6 range set",
        { type: "host-local", ranges: [[{ subnet: "10.1.0.0/24" }], [{ subnet: "fd00:1::/64" }]] },
      ],
      [
        "two disjoint ranges in one set",
        { type: "host-local", ranges: [[{ subnet: "10.1.0.0/24" }, { subnet: "10.2.0.0/24" }]] },
      ],
    ];
    for (const [what, ipam] of good) {
      it(`accepts ${what}`, () => {
        expect(load(withIpam(ipam)).networks.has("pods")).to.equal(true);
      });
    }

    const bad: [string, JsonObject, string][] = [
      [
        "a subnet with host bits",
        hostLocal({ ranges: [[{ subnet: "10.1.0.5/24" }]] }),
        "host bits",
      ],
      [
        "a legacy subnet with host bits",
        { type: "host-local", subnet: "10.1.0.5/16" },
        "host bits",
      ],
      [
        "an address without a prefix",
        hostLocal({ ranges: [[{ subnet: "10.1.0.0" }]] }),
        "invalid CIDR address: 10.1.0.0",
      ],
      ["a word", { type: "host-local", subnet: "banana" }, "invalid CIDR address: banana"],
      ["an IPv4 /31", hostLocal({ ranges: [[{ subnet: "10.1.0.0/31" }]] }), "too small"],
      ["an IPv4 /32", { type: "host-local", subnet: "10.1.0.1/32" }, "too small"],
      ["an IPv6 /127", hostLocal({ ranges: [[{ subnet: "fd00::/127" }]] }), "too small"],
      [
        "a gateway outside the subnet",
        hostLocal({ ranges: [[{ subnet: "10.1.0.0/24", gateway: "10.2.0.1" }]] }),
        "gateway 10.2.0.1 not in network 10.1.0.0/24",
      ],
      [
        "a gateway of the other family",
        hostLocal({ ranges: [[{ subnet: "10.1.0.0/24", gateway: "fd00::1" }]] }),
        "gateway fd00::1 not in network 10.1.0.0/24",
      ],
      [
        "a rangeStart outside the subnet",
        hostLocal({ ranges: [[{ subnet: "10.1.0.0/24", rangeStart: "10.1.1.10" }]] }),
        "invalid range set 0: RangeStart 10.1.1.10 not in network 10.1.0.0/24",
      ],
      [
        "a rangeStart of the other family",
        hostLocal({ ranges: [[{ subnet: "10.1.0.0/24", rangeStart: "fd00::5" }]] }),
        "RangeStart fd00::5 not in network 10.1.0.0/24",
      ],
      [
        "a rangeEnd before the rangeStart",
        hostLocal({
          ranges: [[{ subnet: "10.1.0.0/24", rangeStart: "10.1.0.50", rangeEnd: "10.1.0.20" }]],
        }),
        "RangeStart 10.1.0.50 not in network 10.1.0.0/24 (it is after rangeEnd 10.1.0.20)",
      ],
      ["an empty range set", hostLocal({ ranges: [[]] }), "empty range set"],
      [
        "a range without a subnet",
        hostLocal({ ranges: [[{ rangeStart: "10.1.0.5" }]] }),
        "invalid range set 0: missing 'subnet'",
      ],
      ["no ranges at all", { type: "host-local" }, "no IP ranges specified"],
      [
        "mixed families in one set",
        hostLocal({ ranges: [[{ subnet: "10.1.0.0/24" }, { subnet: "fd00::/64" }]] }),
        "mixed address families",
      ],
      [
        "two range sets that overlap",
        hostLocal({ ranges: [[{ subnet: "10.1.0.0/16" }], [{ subnet: "10.1.2.0/24" }]] }),
        "range set 0 overlaps with 1",
      ],
      [
        "the legacy subnet overlapping ranges",
        { type: "host-local", subnet: "10.1.0.0/24", ranges: [[{ subnet: "10.1.0.0/25" }]] },
        "range set 0 overlaps with 1",
      ],
    ];
    for (const [what, ipam, text] of bad) {
      it(`rejects ${what}, naming the file and the plugin`, () => {
        const err = cniErrorOf(() => load(withIpam(ipam)));
        expect(err.code).to.equal(7);
        expect(err.message).to.match(/^hl\.conflist: plugins\[0\] \("ptp"\): ipam: /);
        expect(err.message).to.include(text);
      });
    }

    it("accepts no ranges when the plugin takes ipRanges at runtime", () => {
      const cfg = load(
        withIpam({ type: "host-local" }, { type: "ptp", capabilities: { ipRanges: true } }),
      );
      expect(cfg.networks.has("pods")).to.equal(true);
    });

    it("validates the host-local ipam of a built-in plugin too", () => {
      const err = cniErrorOf(() =>
        load(
          withIpam({ type: "host-local", subnet: "10.1.0.0/31" }, { type: "midonet" }),
          opts({ builtins: new Map([["midonet", () => {}]]) }),
        ),
      );
      expect(err.message).to.match(/^hl\.conflist: plugins\[0\] \("midonet"\): ipam: .*too small/);
    });

    it("leaves other IPAM types to their plugin", () => {
      const cfg = load(withIpam({ type: "dhcp", subnet: "nonsense" }));
      expect(cfg.networks.has("pods")).to.equal(true);
    });
  });

  describe("the usePodCidr template", () => {
    const templated = conflist("pods", [
      {
        type: "ptp",
        ipam: {
          type: "host-local",
          ranges: [[{ subnet: "usePodCidr" }], [{ subnet: "usePodCidrIPv6" }]],
        },
      },
    ]);

    it("is filled before parsing, so the list's bytes hold the node's CIDRs", () => {
      const cfg = load(
        files({ "p.conflist": templated }),
        opts({ podCidrs: { v4: "10.244.3.0/24", v6: "fd00:10:244:3::/64" } }),
      );
      const list = cfg.networks.get("pods")!;
      const text = Buffer.from(list.bytes).toString();
      expect(JSON.parse(text).plugins[0].ipam.ranges).to.deep.equal([
        [{ subnet: "10.244.3.0/24" }],
        [{ subnet: "fd00:10:244:3::/64" }],
      ]);
      expect(text).to.not.include("usePodCidr");
      expect((list.plugins[0]!.raw.ipam as JsonObject).ranges).to.deep.equal([
        [{ subnet: "10.244.3.0/24" }],
        [{ subnet: "fd00:10:244:3::/64" }],
      ]);
    });

    it("keeps a list without templates byte for byte", () => {
      const text = `{ "cniVersion": "1.0.0",\n  "name": "pods",\n  "plugins": [ {"type": "portmap"} ] }\n`;
      const cfg = load(files({ "p.conflist": text }), opts({ podCidrs: { v4: "10.244.3.0/24" } }));
      expect(Buffer.from(cfg.networks.get("pods")?.bytes ?? []).toString()).to.equal(text);
    });

    it("fails the load, naming the file, while the node has no pod CIDR", () => {
      const err = cniErrorOf(() =>
        load(files({ "p.conflist": templated }), opts({ podCidrs: { v4: "10.244.3.0/24" } })),
      );
      expect(err.code).to.equal(7);
      expect(err.message).to.match(/^p\.conflist: plugins\[0\] \("ptp"\)/);
      expect(err.message).to.include("no IPv6 pod CIDR yet");
    });

    it("validates the filled-in subnet like any other", () => {
      const err = cniErrorOf(() =>
        load(
          files({ "p.conflist": templated }),
          opts({ podCidrs: { v4: "10.244.3.7/24", v6: "fd00:10:244:3::/64" } }),
        ),
      );
      expect(err.message).to.include("host bits");
    });
  });

  describe("pod ranges against the node (pod-range-guard.ts)", () => {
    const on = (subnet: string) =>
      files({
        "p.conflist": conflist("p", [{ type: "ptp", ipam: hostLocal({ ranges: [[{ subnet }]] }) }]),
      });

    it("refuses a range over a node address, naming the key, the range and the interface", () => {
      const err = cniErrorOf(() =>
        load(
          on("192.0.2.0/24"),
          opts({ nodeAddresses: [{ ifName: "eth0", cidr: "192.0.2.2/24" }] }),
        ),
      );
      expect(err.code).to.equal(7);
      expect(err.message).to.equal(
        `p.conflist: plugins[0] ("ptp"): ipam: pod range 192.0.2.0/24 contains the node's address 192.0.2.2/24 on eth0`,
      );
    });

    it("refuses a filled-in usePodCidr the same way", () => {
      const templated = files({
        "p.conflist": conflist("p", [
          { type: "ptp", ipam: hostLocal({ ranges: [[{ subnet: "usePodCidr" }]] }) },
        ]),
      });
      const err = cniErrorOf(() => load(templated, opts({ podCidrs: { v4: "127.0.0.0/24" } })));
      expect(err.message).to.include("pod range 127.0.0.0/24 overlaps the loopback range");
    });

    it("leaves out the interfaces the driver made: its bridges, the node link", () => {
      const own = [
        // A bridge carrying the MAC the driver derives from its name (plumbing/mac.ts bridgeMac).
        {
          ifName: "midokube-br0",
          cidr: "10.244.0.1/24",
          kind: "bridge",
          mac: bridgeMac("midokube-br0"),
        },
        { ifName: "midokube-node", cidr: "10.244.0.2/24", kind: "veth" },
        { ifName: "old-node-if", cidr: "10.244.0.3/24", kind: "veth" },
      ];
      const cfg = load(
        on("10.244.0.0/24"),
        opts({ nodeAddresses: own, ownInterfaces: ["old-node-if"] }),
      );
      expect([...cfg.networks.keys()]).to.deep.equal(["p"]);
      // The same bridge name with another MAC is not the driver's.
      const err = cniErrorOf(() =>
        load(
          on("10.244.0.0/24"),
          opts({ nodeAddresses: [{ ...own[0]!, mac: "02:00:00:00:00:01" }] }),
        ),
      );
      expect(err.message).to.include("contains the node's address 10.244.0.1/24 on midokube-br0");
    });
  });

  describe("contentHash", () => {
    const base = { "a.conflist": conflist("one"), "driver.json": { defaultNetwork: "one" } };

    it("is stable across key order", () => {
      const h1 = load(files(base)).contentHash;
      const h2 = load(
        files({ "driver.json": base["driver.json"], "a.conflist": base["a.conflist"] }),
      ).contentHash;
      expect(h1).to.equal(h2);
    });

    it("changes with any byte of content", () => {
      const h1 = load(files(base)).contentHash;
      const h2 = load(
        files({ ...base, "driver.json": { defaultNetwork: "one", x: 1 } }),
      ).contentHash;
      const h3 = load(
        files({
          ...base,
          "a.conflist": conflist("one", [{ type: "ptp", ipam: hostLocal(), mtu: 1400 }]),
        }),
      ).contentHash;
      expect(new Set([h1, h2, h3]).size).to.equal(3);
    });

    it("changes when a key is renamed with the same bytes", () => {
      const h1 = load(files({ "a.conflist": conflist("one") })).contentHash;
      const h2 = load(files({ "b.conflist": conflist("one") })).contentHash;
      expect(h1).to.not.equal(h2);
    });
  });
});
