/**
 * Pod ranges that would break the node are refused at config load, the last
 * good config keeps serving, and gateways no config or attachment uses leave
 * the bridge. The driver runs inside a throwaway "node" namespace with an
 * address of its own on a veth (198.51.100.2/24, TEST-NET-2), so nothing here
 * reaches this machine's own interfaces.
 */
import { spawnSync } from "node:child_process";
import { expect } from "chai";
import { podRangeProblem } from "../../src/driver/config/pod-range-guard.js";
import { parseCidr } from "../../src/net/ip.js";
import type { CniStatusResponse } from "../../src/wire/types.js";
import { DriverHarness, expectNoCniError } from "../support/driver-harness.js";
import { createNetns, createNodeNetns, deleteNetns, uniqueTag } from "../support/netns.js";
import { requireReferencePlugins, requireRoot } from "../support/requirements.js";
import { until } from "../support/until.js";

const cidr = (t: string) => parseCidr(t)!;

describe("pod range guard (pure)", () => {
  const node = [{ ifName: "eth0", cidr: "198.51.100.2/24" }];
  const cases: Array<[string, RegExp | undefined]> = [
    ["10.244.0.0/24", undefined],
    ["198.51.100.0/24", /contains the node's address 198\.51\.100\.2\/24 on eth0/],
    ["198.51.0.0/16", /contains the node's address/],
    ["198.51.100.128/25", /lies inside the node's address .* \(network 198\.51\.100\.0\/24\)/],
    ["0.0.0.0/0", /takes every IPv4 address/],
    ["::/0", /takes every IPv6 address/],
    ["127.0.0.0/8", /loopback range 127\.0\.0\.0\/8/],
    ["127.1.0.0/16", /loopback/],
    ["169.254.1.0/24", /link-local/],
    ["224.0.0.0/24", /multicast/],
    ["0.0.0.0/24", /unspecified/],
    ["fe80::/64", /link-local range fe80::\/10/],
    ["ff02::/64", /multicast/],
    ["::/120", /unspecified|loopback/],
    ["fd00:5::/64", undefined],
  ];
  for (const [range, want] of cases) {
    it(`${range}: ${want ?? "allowed"}`, () => {
      const problem = podRangeProblem(cidr(range), node);
      if (want) expect(problem).to.match(want);
      else expect(problem).to.equal(undefined);
    });
  }
});

describe("pod range guard: the driver in a throwaway node namespace", function () {
  this.timeout(90_000);
  let h: DriverHarness;
  let node: string;
  const r = (n: number) => `10.244.${n}`;

  /** A config of the harness network on `subnet`, plus keys that change only its hash. */
  const configOn = (subnet: string, note = "") => ({
    "pod-network.conflist": JSON.stringify({
      ...h.conflist(),
      plugins: [
        {
          type: "midonet",
          datapath: "kernel",
          bridge: h.bridge,
          ipam: { type: "host-local", ranges: [[{ subnet }]], dataDir: h.dataDir },
        },
      ],
    }),
    ...(note ? { notes: note } : {}),
  });

  const status = (): Promise<CniStatusResponse> => h.client.cniStatus({});

  /** The bridge's global addresses, in the node namespace. */
  const gateways = (): string[] => {
    const out = spawnSync("ip", ["-j", "-n", node, "addr", "show", "dev", h.bridge], {
      encoding: "utf8",
    }).stdout;
    const links = JSON.parse(out || "[]") as Array<{
      addr_info?: Array<{ local: string; prefixlen: number; scope: string }>;
    }>;
    return (links[0]?.addr_info ?? [])
      .filter((a) => a.scope === "global")
      .map((a) => `${a.local}/${a.prefixlen}`)
      .sort();
  };

  const addPod = async (i: string) => {
    createNetns(h.netnsName(i));
    const res = await h.client.setUpPod(h.podRequest(i));
    expectNoCniError(res);
    return res.result?.ips[0]?.address as string;
  };
  const delPod = async (i: string) => {
    expectNoCniError(await h.client.tearDownPod(h.podRequest(i)));
    deleteNetns(h.netnsName(i));
  };

  /** Writes a config and waits for it to load (generation up) or be refused (a new error). */
  async function load(files: Record<string, string>): Promise<CniStatusResponse> {
    const before = await status();
    await h.writeConfig(files);
    return until(async () => {
      const s = await status();
      const loaded = (s.config?.generation ?? 0) > (before.config?.generation ?? 0);
      const refused =
        s.last_config_error !== null &&
        s.last_config_error.at_unix_ms !== before.last_config_error?.at_unix_ms;
      return loaded || refused ? s : undefined;
    }, "the config to load or be refused");
  }

  before(async function () {
    requireRoot(this);
    requireReferencePlugins(this, "host-local");
    const name = `cdt-rg${uniqueTag()}-node`;
    createNodeNetns(name, "198.51.100.2/24");
    node = name;
    h = new DriverHarness({ subnetOctet: 164, netns: node });
    await h.writeConfig(configOn(`${r(164)}.0/24`));
    await h.start();
  });

  after(async () => {
    await h?.cleanup();
    if (node) deleteNetns(node);
  });

  it("refuses each range that would break the node; the last good config keeps serving", async () => {
    const p1 = await addPod("p1");
    const good = await status();
    expect(gateways()).to.deep.equal([`${r(164)}.1/24`]);
    for (const [range, words] of [
      ["198.51.100.0/24", "contains the node's address 198.51.100.2/24 on eth0"],
      ["198.51.100.128/25", "lies inside the node's address 198.51.100.2/24 on eth0"],
      ["0.0.0.0/0", "takes every IPv4 address"],
      ["::/0", "takes every IPv6 address"],
      ["127.0.0.0/8", "overlaps the loopback range 127.0.0.0/8"],
      ["169.254.0.0/16", "overlaps the link-local range 169.254.0.0/16"],
      ["224.0.0.0/24", "overlaps the multicast range 224.0.0.0/4"],
      ["fe80::/64", "overlaps the link-local range fe80::/10"],
    ]) {
      const s = await load(configOn(range as string));
      expect(s.last_config_error?.message, range).to.include(`pod range ${range} ${words}`);
      expect(s.last_config_error?.message).to.match(/^pod-network\.conflist: /);
      expect(s.config?.generation, range).to.equal(good.config?.generation);
    }
    // Still serving the good range, and nothing of the refused ones on the bridge.
    const p2 = await addPod("p2");
    expect(p2.startsWith(`${r(164)}.`)).to.equal(true);
    expect(gateways()).to.deep.equal([`${r(164)}.1/24`]);
    await delPod("p2");
    // The bridge's own gateway is the driver's, not the node's: the same range loads again.
    const again = await load(configOn(`${r(164)}.0/24`, "reloaded"));
    expect(again.last_config_error).to.equal(null);
    expect(again.config?.generation).to.be.greaterThan(good.config?.generation ?? 0);
    expect(p1.startsWith(`${r(164)}.`)).to.equal(true);
  });

  it("removes a gateway once no config uses its range and its last attachment is gone", async () => {
    // p1 still holds an address of .164: its gateway stays while it does.
    await load(configOn(`${r(165)}.0/24`));
    expect(gateways()).to.deep.equal([`${r(164)}.1/24`]);
    const p3 = await addPod("p3");
    expect(p3.startsWith(`${r(165)}.`)).to.equal(true);
    expect(gateways()).to.deep.equal([`${r(164)}.1/24`, `${r(165)}.1/24`]);
    await delPod("p1");
    await until(() => gateways().length === 1, "the .164 gateway to go");
    expect(gateways()).to.deep.equal([`${r(165)}.1/24`]);

    // A range no attachment holds goes at the load; coming back, its gateway is put again.
    await delPod("p3");
    await load(configOn(`${r(166)}.0/24`));
    await until(() => !gateways().includes(`${r(165)}.1/24`), "the .165 gateway to go");
    await load(configOn(`${r(165)}.0/24`));
    const p4 = await addPod("p4");
    expect(p4.startsWith(`${r(165)}.`)).to.equal(true);
    expect(gateways()).to.deep.equal([`${r(165)}.1/24`]);
    await delPod("p4");
  });
});
