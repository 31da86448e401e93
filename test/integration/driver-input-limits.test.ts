/**
 * A request's fields past their limits (src/cni/limits.ts), or holding bytes
 * CNI forbids, through the real driver over its socket: code 4 from the
 * validation, an answer that quotes the bad value cut short, a log line as
 * short, and a driver that still sets up the next good pod. A 3 MB container
 * id used to come back as a 6 MB message the client could not even read.
 */
import { expect } from "chai";
import {
  MAX_CNI_ARGS_BYTES,
  MAX_NETNS_PATH_BYTES,
  MAX_NETWORK_NAME_BYTES,
  MAX_STDIN_CONFIG_BYTES,
} from "../../src/cni/limits.js";
import { ECHO_BYTES } from "../../src/common/cut-short.js";
import type { PodRequest } from "../../src/wire/types.js";
import { DriverHarness, expectNoCniError } from "../support/driver-harness.js";
import { createNetns, linkIn } from "../support/netns.js";
import { requireReferencePlugins, requireRoot } from "../support/requirements.js";

/** An answer that quotes a value cut short stays well under this. */
const SHORT_ANSWER = 512;

describe("cni-driver serve: request fields past their limits (integration)", function () {
  this.timeout(60_000);
  let h: DriverHarness;

  before(async function () {
    requireRoot(this);
    requireReferencePlugins(this, "host-local");
    h = new DriverHarness({ subnetOctet: 119 });
    await h.writeDefaultConfig();
    await h.start();
    createNetns(h.netnsName(1));
  });

  after(async () => {
    await h?.cleanup();
  });

  const cases: Array<[string, Partial<PodRequest>, RegExp]> = [
    [
      "a 3 MB container id",
      { container_id: "c".repeat(3 * 1024 * 1024) },
      /^containerID is too long: "c{64}"… \(3145728 bytes\); at most 128 bytes$/,
    ],
    [
      "a container id with a NUL",
      { container_id: "abc\0def" },
      /^invalid characters in containerID/,
    ],
    [
      "an interface name with a NUL",
      { ifname: "eth\0" },
      /^interface name contains a NUL byte: "eth\\u0000"$/,
    ],
    [
      "a 1 MB interface name",
      { ifname: "e".repeat(1024 * 1024) },
      /^interface name is too long: "e{64}"… \(1048576 bytes\)$/,
    ],
    [
      "a network name with a NUL",
      { network: "pod\0network" },
      /^invalid characters found in network name: "pod\\u0000network"$/,
    ],
    [
      "a network name one byte past its limit",
      { network: "n".repeat(MAX_NETWORK_NAME_BYTES + 1) },
      /^network name is too long: "n{64}"… \(101 bytes\); at most 100 bytes$/,
    ],
    [
      "a netns path one byte past PATH_MAX",
      { netns: `/run/netns/${"x".repeat(MAX_NETNS_PATH_BYTES)}` },
      /^netns path is too long: "\/run\/netns\/x+"… \(\d+ bytes\); at most 4095 bytes$/,
    ],
    ["a netns path with a NUL", { netns: "/run/netns/a\0b" }, /^netns path contains a NUL byte/],
    [
      "CNI_ARGS past 64 KiB",
      { cni_args: [{ key: "BIG", value: "v".repeat(MAX_CNI_ARGS_BYTES) }] },
      /^CNI_ARGS is too long: "IgnoreUnknown=1;BIG=v+"… \(\d+ bytes\); at most 65536 bytes$/,
    ],
    [
      "a 3 MiB stdin config",
      { stdin_config: Buffer.alloc(3 * MAX_STDIN_CONFIG_BYTES, " ") },
      /^stdin config is too large: 3145728 bytes; at most 1048576 bytes$/,
    ],
  ];

  for (const [what, fields, msg] of cases) {
    it(`answers ${what} with code 4 and a short message`, async () => {
      const res = await h.client.setUpPod(h.podRequest(1, fields));
      expect(res.error?.code, JSON.stringify(res.error).slice(0, 300)).to.equal(4);
      expect(res.error?.msg).to.match(msg);
      expect(JSON.stringify(res.error).length).to.be.below(SHORT_ANSWER);
    });
  }

  it("TearDownPod and CheckPod apply the same limits", async () => {
    const long = { container_id: "d".repeat(1024 * 1024) };
    for (const res of [
      await h.client.tearDownPod(h.podRequest(1, long)),
      await h.client.checkPod(h.podRequest(1, long)),
    ]) {
      expect(res.error?.code).to.equal(4);
      expect(res.error?.msg).to.match(/^containerID is too long/);
    }
  });

  it("logged every refusal in lines as short, and still sets up a good pod", async () => {
    for (const line of h.logs.split("\n").filter(Boolean)) {
      expect(line.length, line.slice(0, 200)).to.be.below(SHORT_ANSWER + 4 * ECHO_BYTES);
    }
    expectNoCniError(await h.client.setUpPod(h.podRequest(1)));
    expect(linkIn(h.netnsName(1), "eth0")?.ipv4).to.have.length(1);
    expectNoCniError(await h.client.tearDownPod(h.podRequest(1)));
    expect(h.leases()).to.deep.equal([]);
  });
});
