/**
 * The in-process host-local against the host-local binary it replaces
 * (/usr/lib/cni/host-local, Debian's containernetworking-plugins 1.1.1).
 *
 * A differential suite: each case plays one sequence of calls on both, the
 * in-process plugin on data dir A and the binary on data dir B, and requires
 * the same answer at every step (the result's JSON, or the error's code and
 * message) and, at the end, the same lease files, byte for
 * byte. Then the two share one data dir: leases made by one are released by
 * the other, and concurrent ADDs from both never hand out an address twice
 * (the flock on `lock`). GC and STATUS, which the binary predates, are checked
 * against what current host-local does.
 */
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect } from "chai";
import { CniError } from "../../src/cni/errors.js";
import type { JsonObject } from "../../src/common/json.js";
import { createHostLocalPlugin } from "../../src/driver/builtin/host-local/plugin.js";
import { execPlugin, type Verb } from "../../src/driver/chain/plugin-exec.js";
import { spawnBackend } from "../../src/driver/chain/plugin-process.js";
import { REFERENCE_PLUGIN_DIR, requireReferencePlugins } from "../support/requirements.js";

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

/** The network's name: the leases live in <dataDir>/<NET>. */
const NET = "hl-diff";
/** Generous: 20 binaries at once on a loaded CI machine wait on each other's lock. */
const TIMEOUT_MS = 15_000;

/** A call's answer: its result (undefined for DEL and CHECK), or its error's code and message. */
type Answer = { result: unknown } | { error: { code: number; message: string } };

interface Call {
  command: Verb;
  containerId: string;
  /** Default "eth0". */
  ifName?: string;
  /** CNI_ARGS; default "". */
  cniArgs?: string;
}

/** A plugin stdin for a given data dir: the two sides differ only in `ipam.dataDir`. */
type Stdin = (dataDir: string) => JsonObject;

/** The stdin of a standalone host-local: `top` keys (args, runtimeConfig) next to `ipam`. */
function conf(ipam: JsonObject, top: JsonObject = {}, cniVersion = "1.0.0"): Stdin {
  return (dataDir) => ({
    cniVersion,
    name: NET,
    ...top,
    ipam: { type: "host-local", ...ipam, dataDir },
  });
}

const plugin = createHostLocalPlugin({ lockTimeoutMs: TIMEOUT_MS });

const noDelegate = () => Promise.reject(new Error("host-local delegates to no plugin"));

async function answerOf(pending: Promise<unknown>): Promise<Answer> {
  try {
    const result = await pending;
    // Compared as JSON: the binary's side is its parsed stdout.
    return { result: result === undefined ? undefined : JSON.parse(JSON.stringify(result)) };
  } catch (err) {
    if (!(err instanceof CniError)) throw err;
    return { error: { code: err.code, message: err.message } };
  }
}

function inProcess(call: Call, stdin: JsonObject): Promise<Answer> {
  return answerOf(
    plugin.run(
      {
        type: "host-local",
        command: call.command,
        containerId: call.containerId,
        netns: "/var/run/netns/hl-diff",
        ifName: call.ifName ?? "eth0",
        cniArgs: call.cniArgs ?? "",
        config: stdin,
      },
      noDelegate,
    ),
  );
}

/** How the binary is exec'd: as the daemon would choose at start. */
const binarySpawn = spawnBackend();

function binary(call: Call, stdin: JsonObject): Promise<Answer> {
  return answerOf(
    execPlugin({
      type: "host-local",
      binDirs: [REFERENCE_PLUGIN_DIR],
      command: call.command,
      containerId: call.containerId,
      netns: "/var/run/netns/hl-diff",
      ifName: call.ifName ?? "eth0",
      cniArgs: call.cniArgs ?? "",
      stdin: JSON.stringify(stdin),
      timeoutMs: TIMEOUT_MS,
      baseEnv: process.env,
      spawn: binarySpawn,
    }),
  );
}

type Side = typeof inProcess;

const describeCall = (c: Call) =>
  `${c.command} ${c.containerId}/${c.ifName ?? "eth0"}${c.cniArgs ? ` CNI_ARGS=${c.cniArgs}` : ""}`;

/**
 * What a lease directory holds: each file's bytes (latin1, one char per byte,
 * so that "\r\n" shows in a diff) and, but for `lock`, its mode.
 */
async function snapshot(dir: string): Promise<Record<string, string>> {
  let names: string[];
  try {
    names = (await readdir(dir)).sort();
  } catch {
    return { "(no directory)": "" };
  }
  const out: Record<string, string> = {};
  for (const name of names) {
    const path = join(dir, name);
    const bytes = (await readFile(path)).toString("latin1");
    const mode = ((await stat(path)).mode & 0o7777).toString(8);
    out[name] = name === "lock" ? bytes : `${mode} ${JSON.stringify(bytes)}`;
  }
  return out;
}

let root = "";
let pairs = 0;

/** The two data dirs of one case, fresh each time. */
class Differential {
  private constructor(
    readonly a: string,
    readonly b: string,
  ) {}

  static async create(): Promise<Differential> {
    const base = join(root, `case-${++pairs}`);
    await mkdir(join(base, "a"), { recursive: true });
    await mkdir(join(base, "b"), { recursive: true });
    return new Differential(join(base, "a"), join(base, "b"));
  }

  /** One call on both sides (in parallel: they share nothing); the answers must be equal. */
  async call(stdin: Stdin, call: Call): Promise<Answer> {
    const [mine, theirs] = await Promise.all([
      inProcess(call, stdin(this.a)),
      binary(call, stdin(this.b)),
    ]);
    expect(mine, `${describeCall(call)}: in-process answer vs the binary's`).to.deep.equal(theirs);
    return mine;
  }

  async expectSameFiles(network = NET): Promise<void> {
    const [mine, theirs] = await Promise.all([
      snapshot(join(this.a, network)),
      snapshot(join(this.b, network)),
    ]);
    expect(mine, "lease files: in-process data dir vs the binary's").to.deep.equal(theirs);
  }
}

/** What a step expects besides equality: addresses (space-separated), an error message (code 999), or nothing. */
type Want = string | { error: string } | null;

interface Step extends Call {
  want?: Want;
  /** This step's stdin, when it is not the case's. */
  stdin?: Stdin;
}

const add = (containerId: string, want?: Want, more: Partial<Step> = {}): Step => ({
  command: "ADD",
  containerId,
  want,
  ...more,
});
const del = (containerId: string, more: Partial<Step> = {}): Step => ({
  command: "DEL",
  containerId,
  want: null,
  ...more,
});
const check = (containerId: string, want: Want = null, more: Partial<Step> = {}): Step => ({
  command: "CHECK",
  containerId,
  want,
  ...more,
});
const fails = (error: string) => ({ error });
/** A step whose answer is only compared between the two sides. */
const compared = (step: Step): Step => ({ ...step, want: undefined });

/** The addresses of an ADD's result, in any version's shape ("ips", or "ip4" and "ip6"). */
function addressesOf(answer: Answer): string[] {
  if (!("result" in answer)) return [];
  const r = answer.result as {
    ips?: Array<{ address: string }>;
    ip4?: { ip: string };
    ip6?: { ip: string };
  };
  if (r.ips) return r.ips.map((ip) => ip.address);
  return [r.ip4?.ip, r.ip6?.ip].filter((ip): ip is string => ip !== undefined);
}

/** The error of an answer that must be one. */
function errorOf(answer: Answer, what: string): { code: number; message: string } {
  if (!("error" in answer))
    expect.fail(`${what}: expected an error, got ${JSON.stringify(answer)}`);
  return answer.error;
}

function expectWanted(answer: Answer, want: Want | undefined, what: string): void {
  if (want === undefined) return;
  if (want === null) expect(answer, what).to.deep.equal({ result: undefined });
  else if (typeof want === "string") expect(addressesOf(answer).join(" "), what).to.equal(want);
  else expect(answer, what).to.deep.equal({ error: { code: 999, message: want.error } });
}

/** Plays the steps on both sides, then compares the lease files. */
async function play(stdin: Stdin, steps: Step[]): Promise<Differential> {
  const pair = await Differential.create();
  for (const step of steps) {
    const answer = await pair.call(step.stdin ?? stdin, step);
    expectWanted(answer, step.want, describeCall(step));
  }
  await pair.expectSameFiles();
  return pair;
}

/** A small v4 range: 10.9.0.1–10.9.0.6, gateway 10.9.0.1, so five addresses to give. */
const SMALL_V4 = { ranges: [[{ subnet: "10.9.0.0/29" }]] };
const SMALL_V4_SET = "10.9.0.1-10.9.0.6";
const DUAL_STACK = {
  ranges: [[{ subnet: "10.9.0.0/29" }], [{ subnet: "fd00:9::/125" }]],
};

// ---------------------------------------------------------------------------
// Suites
// ---------------------------------------------------------------------------

describe("host-local in-process vs the host-local binary", function () {
  this.timeout(60_000);

  before(async function () {
    requireReferencePlugins(this, "host-local");
    root = await mkdtemp(join(tmpdir(), "hl-in-process-"));
  });

  after(async () => {
    if (root) await rm(root, { recursive: true, force: true });
  });

  describe("allocation order and round robin", () => {
    const cases: Array<{ title: string; stdin: Stdin; steps: Step[] }> = [
      {
        title:
          "hands out addresses in order, skips the gateway, and resumes after the last one reserved",
        stdin: conf(SMALL_V4),
        steps: [
          add("c1", "10.9.0.2/29"),
          add("c2", "10.9.0.3/29"),
          add("c3", "10.9.0.4/29"),
          del("c2"),
          // Round robin: the freed .3 waits until the walk wraps.
          add("c4", "10.9.0.5/29"),
          add("c5", "10.9.0.6/29"),
          // Past rangeEnd the walk wraps to the start: .2 is taken, .3 is free again.
          add("c6", "10.9.0.3/29"),
          add(
            "c7",
            fails(
              `failed to allocate for range 0: no IP addresses available in range set: ${SMALL_V4_SET}`,
            ),
          ),
          del("c4"),
          add("c8", "10.9.0.5/29"),
        ],
      },
      {
        title: "a custom gateway in the middle of rangeStart..rangeEnd is skipped",
        stdin: conf({
          ranges: [
            [
              {
                subnet: "10.9.0.0/28",
                gateway: "10.9.0.5",
                rangeStart: "10.9.0.3",
                rangeEnd: "10.9.0.7",
              },
            ],
          ],
        }),
        steps: [
          add("c1", "10.9.0.3/28"),
          add("c2", "10.9.0.4/28"),
          add("c3", "10.9.0.6/28"),
          add("c4", "10.9.0.7/28"),
          add(
            "c5",
            fails(
              "failed to allocate for range 0: no IP addresses available in range set: 10.9.0.3-10.9.0.7",
            ),
          ),
        ],
      },
      {
        title: "a gateway at rangeStart and one at rangeEnd are skipped",
        stdin: conf({
          ranges: [
            [
              {
                subnet: "10.9.0.0/28",
                gateway: "10.9.0.8",
                rangeStart: "10.9.0.8",
                rangeEnd: "10.9.0.10",
              },
            ],
            [
              {
                subnet: "10.8.0.0/28",
                gateway: "10.8.0.10",
                rangeStart: "10.8.0.8",
                rangeEnd: "10.8.0.10",
              },
            ],
          ],
        }),
        steps: [
          add("c1", "10.9.0.9/28 10.8.0.8/28"),
          add("c2", "10.9.0.10/28 10.8.0.9/28"),
          add(
            "c3",
            fails(
              "failed to allocate for range 0: no IP addresses available in range set: 10.9.0.8-10.9.0.10",
            ),
          ),
          // Range 0 failed first, so range 1 was never tried: c3 holds nothing.
          del("c1"),
          add("c4", "10.9.0.9/28 10.8.0.8/28"),
        ],
      },
      {
        title: "IPv6: no broadcast to leave out, the walk wraps at the subnet's last address",
        stdin: conf({ ranges: [[{ subnet: "fd00:9::/125" }]] }),
        steps: [
          ...["c1", "c2", "c3", "c4", "c5", "c6"].map((id, i) => add(id, `fd00:9::${i + 2}/125`)),
          add(
            "c7",
            fails(
              "failed to allocate for range 0: no IP addresses available in range set: fd00:9::1-fd00:9::7",
            ),
          ),
          del("c3"),
          add("c8", "fd00:9::4/125"),
        ],
      },
      {
        // The range changed under existing leases: last_reserved_ip no longer
        // lies in the set, so the walk starts over at rangeStart.
        title: "a last_reserved_ip outside the current range set restarts from rangeStart",
        stdin: conf(SMALL_V4),
        steps: [
          add("c1", "10.9.0.2/29"),
          add("c2", "10.9.0.3/29"),
          add("c3", "10.9.0.10/28", {
            stdin: conf({ ranges: [[{ subnet: "10.9.0.0/28", rangeStart: "10.9.0.10" }]] }),
          }),
          add("c4", "10.9.0.4/29"),
        ],
      },
      {
        title: "a last_reserved_ip at the gateway (gateway moved) resumes after it",
        stdin: conf(SMALL_V4),
        steps: [
          add("c1", "10.9.0.2/29"),
          add("c2", "10.9.0.3/29"),
          add("c3", "10.9.0.4/29", {
            stdin: conf({ ranges: [[{ subnet: "10.9.0.0/29", gateway: "10.9.0.3" }]] }),
          }),
          add("c4", "10.9.0.5/29", {
            stdin: conf({ ranges: [[{ subnet: "10.9.0.0/29", gateway: "10.9.0.4" }]] }),
          }),
        ],
      },
      {
        // 1.1.1 takes the gateway as given: .1 is not skipped, and the result names fd00::1.
        title: "a gateway of the other family is the result's gateway and skips nothing",
        stdin: conf(
          {},
          { runtimeConfig: { ipRanges: [[{ subnet: "10.5.0.0/29", gateway: "fd00::1" }]] } },
        ),
        steps: [
          add("c1", "10.5.0.1/29"),
          add("c2", "10.5.0.2/29", {
            stdin: conf(
              {},
              { runtimeConfig: { ipRanges: [[{ subnet: "10.5.0.0/29", gateway: "fd00::1" }]] } },
              "0.3.1",
            ),
          }),
        ],
      },
    ];
    for (const c of cases) it(c.title, () => play(c.stdin, c.steps));
  });

  describe("range sets, result versions and the legacy form", () => {
    it("takes the ranges of one range set in order and wraps across them", () =>
      play(
        conf({
          ranges: [
            [
              { subnet: "10.1.0.0/30" },
              { subnet: "10.2.0.0/29", rangeStart: "10.2.0.5" },
              { subnet: "10.3.0.0/30" },
            ],
          ],
        }),
        [
          add("c1", "10.1.0.2/30"),
          add("c2", "10.2.0.5/29"),
          add("c3", "10.2.0.6/29"),
          add("c4", "10.3.0.2/30"),
          add(
            "c5",
            fails(
              "failed to allocate for range 0: no IP addresses available in range set: 10.1.0.1-10.1.0.2,10.2.0.5-10.2.0.6,10.3.0.1-10.3.0.2",
            ),
          ),
          del("c1"),
          del("c3"),
          // After 10.3.0.2 the walk wraps to the first range.
          add("c6", "10.1.0.2/30"),
          add("c7", "10.2.0.6/29"),
        ],
      ));

    const ROUTES = [
      { dst: "0.0.0.0/0" },
      { dst: "192.168.0.0/16", gw: "10.9.0.6" },
      { dst: "::/0", gw: "fd00:9::1" },
    ];
    // Result shapes: 0.1.0/0.2.0 "ip4"/"ip6", 0.3.x/0.4.0 "ips" with "version", 1.0.0 "ips" without.
    for (const version of ["0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0"]) {
      it(`dual stack, cniVersion ${version}: the result's shape, routes and both families`, async () => {
        const stdin = conf({ ...DUAL_STACK, routes: ROUTES }, {}, version);
        const pair = await play(stdin, [
          add("c1", "10.9.0.2/29 fd00:9::2/125"),
          add("c2", "10.9.0.3/29 fd00:9::3/125"),
          del("c1"),
        ]);
        const answer = await pair.call(stdin, add("c3"));
        const result = (answer as { result: JsonObject }).result;
        if (version === "0.1.0" || version === "0.2.0")
          expect(result).to.have.keys("cniVersion", "ip4", "ip6", "dns");
        else if (version === "1.0.0")
          expect((result.ips as JsonObject[])[0]).to.not.have.key("version");
        else expect((result.ips as JsonObject[])[0]).to.include({ version: "4" });
        await pair.expectSameFiles();
      });
    }

    it("two IPv4 range sets and one IPv6: one address from each, in range set order", () =>
      play(
        conf({
          ranges: [
            [{ subnet: "10.9.0.0/29" }],
            [{ subnet: "fd00:9::/125" }],
            [{ subnet: "10.8.0.0/29" }],
          ],
        }),
        [
          add("c1", "10.9.0.2/29 fd00:9::2/125 10.8.0.2/29"),
          add("c2", "10.9.0.3/29 fd00:9::3/125 10.8.0.3/29"),
          del("c1"),
          add("c3", "10.9.0.4/29 fd00:9::4/125 10.8.0.4/29"),
        ],
      ));

    it("two range sets of one family are refused below cniVersion 0.3.0", () =>
      play(
        conf({ ranges: [[{ subnet: "10.9.0.0/29" }], [{ subnet: "10.8.0.0/29" }]] }, {}, "0.2.0"),
        [add("c1", fails("CNI version 0.2.0 does not support more than 1 address per family"))],
      ));

    for (const version of ["0.2.0", "0.4.0", "1.0.0"]) {
      it(`the legacy top-level subnet/rangeStart/rangeEnd/gateway, cniVersion ${version}`, () =>
        play(
          conf(
            {
              subnet: "10.7.0.0/24",
              rangeStart: "10.7.0.10",
              rangeEnd: "10.7.0.12",
              gateway: "10.7.0.11",
              routes: [{ dst: "0.0.0.0/0" }],
            },
            {},
            version,
          ),
          [
            add("c1", "10.7.0.10/24"),
            add("c2", "10.7.0.12/24"),
            add(
              "c3",
              fails(
                "failed to allocate for range 0: no IP addresses available in range set: 10.7.0.10-10.7.0.12",
              ),
            ),
          ],
        ));
    }

    it("the legacy form comes before `ranges` (range set 0)", () =>
      play(conf({ subnet: "10.7.0.0/29", ranges: [[{ subnet: "fd00:7::/125" }]] }), [
        add("c1", "10.7.0.2/29 fd00:7::2/125"),
      ]));
  });

  describe("requested addresses", () => {
    const withArgs = (cniArgs: string, want?: Want) => add("c1", want, { cniArgs });
    const cases: Array<{ title: string; stdin?: Stdin; steps: Step[] }> = [
      { title: "CNI_ARGS IP= alone", steps: [withArgs("IP=10.9.0.4", "10.9.0.4/29")] },
      {
        title: "CNI_ARGS IP= with IgnoreUnknown=1 and unknown keys",
        steps: [
          withArgs(
            "IgnoreUnknown=1;K8S_POD_NAME=p;K8S_POD_NAMESPACE=ns;IP=10.9.0.4",
            "10.9.0.4/29",
          ),
        ],
      },
      {
        title: "CNI_ARGS IgnoreUnknown=true",
        steps: [withArgs("IgnoreUnknown=true;FOO=bar;IP=10.9.0.4", "10.9.0.4/29")],
      },
      {
        title: "CNI_ARGS unknown keys without IgnoreUnknown",
        steps: [
          withArgs(
            "K8S_POD_NAME=p;IP=10.9.0.4;FOO=bar",
            fails('ARGS: unknown args ["K8S_POD_NAME=p" "FOO=bar"]'),
          ),
        ],
      },
      {
        title: "CNI_ARGS IgnoreUnknown=0 with unknown keys",
        steps: [withArgs("IgnoreUnknown=0;FOO=bar", fails('ARGS: unknown args ["FOO=bar"]'))],
      },
      {
        title: "CNI_ARGS IgnoreUnknown=banana",
        steps: [withArgs("IgnoreUnknown=banana;IP=10.9.0.4")],
      },
      { title: "CNI_ARGS IP= not an address", steps: [withArgs("IP=banana")] },
      { title: "CNI_ARGS IP= empty: no address asked", steps: [withArgs("IP=", "10.9.0.2/29")] },
      { title: "CNI_ARGS without '='", steps: [withArgs("IP")] },
      // ip.IP, which CNI_ARGS IP= decodes into, takes an address with a prefix.
      { title: "CNI_ARGS IP= with a /prefix", steps: [withArgs("IP=10.9.0.4/24", "10.9.0.4/29")] },
      {
        title: "args.cni.ips",
        stdin: conf(SMALL_V4, { args: { cni: { ips: ["10.9.0.5"] } } }),
        steps: [add("c1", "10.9.0.5/29")],
      },
      {
        title: "args.cni.ips not an address",
        stdin: conf(SMALL_V4, { args: { cni: { ips: ["banana"] } } }),
        steps: [add("c1", fails("invalid IP address banana"))],
      },
      {
        title: "runtimeConfig.ips without a prefix",
        stdin: conf(SMALL_V4, { runtimeConfig: { ips: ["10.9.0.6"] } }),
        steps: [add("c1", "10.9.0.6/29")],
      },
      {
        title: "runtimeConfig.ips with a /prefix (the address is taken, the prefix is the range's)",
        stdin: conf(SMALL_V4, { runtimeConfig: { ips: ["10.9.0.6/24"] } }),
        steps: [add("c1", "10.9.0.6/29")],
      },
      {
        title: "a requested address does not move last_reserved_ip's walk back",
        stdin: conf(SMALL_V4),
        steps: [
          add("c1", "10.9.0.5/29", { cniArgs: "IP=10.9.0.5" }),
          add("c2", "10.9.0.6/29"),
          add("c3", "10.9.0.2/29"),
        ],
      },
      {
        title: "the gateway requested",
        steps: [
          withArgs(
            "IP=10.9.0.1",
            fails("failed to allocate for range 0: requested ip 10.9.0.1 is subnet's gateway"),
          ),
        ],
      },
      {
        title: "an address outside every range",
        steps: [withArgs("IP=10.99.0.1", fails("failed to allocate all requested IPs: 10.99.0.1"))],
      },
      {
        title: "the subnet's broadcast address (outside rangeEnd)",
        steps: [withArgs("IP=10.9.0.7", fails("failed to allocate all requested IPs: 10.9.0.7"))],
      },
      {
        title: "an address already leased",
        steps: [
          add("c1", "10.9.0.4/29", { cniArgs: "IP=10.9.0.4" }),
          add(
            "c2",
            fails(
              `failed to allocate for range 0: requested IP address 10.9.0.4 is not available in range set ${SMALL_V4_SET}`,
            ),
            {
              cniArgs: "IP=10.9.0.4",
            },
          ),
        ],
      },
      {
        title: "the same address asked through CNI_ARGS and runtimeConfig.ips is asked once",
        stdin: conf(SMALL_V4, {
          runtimeConfig: { ips: ["10.9.0.3/24"] },
          args: { cni: { ips: ["10.9.0.3"] } },
        }),
        steps: [add("c1", "10.9.0.3/29", { cniArgs: "IP=10.9.0.3" })],
      },
      {
        title: "an IPv4-mapped IPv6 address is the IPv4 address",
        steps: [withArgs("IP=::ffff:10.9.0.5", "10.9.0.5/29")],
      },
      {
        title: "an IPv6 address outside every range is named in Go's form",
        stdin: conf(DUAL_STACK),
        steps: [
          add("c1", fails("failed to allocate all requested IPs: fd00:99::1"), {
            cniArgs: "IP=fd00:0099:0:0::1",
          }),
        ],
      },
      { title: "CNI_ARGS IP= with a prefix too long", steps: [withArgs("IP=10.9.0.4/33")] },
      { title: "CNI_ARGS IP= quoted", steps: [withArgs('IP="10.9.0.4"')] },
      {
        title: "runtimeConfig.ips with a prefix that is not a number",
        stdin: conf(SMALL_V4, { runtimeConfig: { ips: ["10.9.0.6/banana"] } }),
        steps: [add("c1", fails("invalid IP address 10.9.0.6/banana"))],
      },
      {
        title: "two requested addresses for one family and two range sets of it",
        stdin: conf(
          { ranges: [[{ subnet: "10.9.0.0/29" }], [{ subnet: "10.8.0.0/29" }]] },
          { runtimeConfig: { ips: ["10.8.0.4", "10.9.0.5"] } },
        ),
        steps: [add("c1", "10.9.0.5/29 10.8.0.4/29")],
      },
      {
        // One address per range set: host-local's choice among several for one
        // set follows Go's map order (see the test after this table).
        title: "CNI_ARGS IP, args.cni.ips and runtimeConfig.ips together, one per range set",
        stdin: conf(
          {
            ranges: [
              [{ subnet: "10.9.0.0/29" }],
              [{ subnet: "10.8.0.0/29" }],
              [{ subnet: "fd00:9::/125" }],
            ],
          },
          { args: { cni: { ips: ["fd00:9::6"] } }, runtimeConfig: { ips: ["10.8.0.6/29"] } },
        ),
        steps: [add("c1", "10.9.0.4/29 10.8.0.6/29 fd00:9::6/125", { cniArgs: "IP=10.9.0.4" })],
      },
      {
        title: "dual stack with only the IPv6 address requested",
        stdin: conf(DUAL_STACK),
        steps: [add("c1", "10.9.0.2/29 fd00:9::5/125", { cniArgs: "IP=fd00:9::5" })],
      },
      {
        // The failure in range set 1 undoes range set 0's lease.
        title: "a failure in the second range set releases the first one's lease",
        stdin: conf(DUAL_STACK),
        steps: [
          add(
            "c1",
            fails("failed to allocate for range 1: requested ip fd00:9::1 is subnet's gateway"),
            { cniArgs: "IP=fd00:9::1" },
          ),
          add("c2", "10.9.0.3/29 fd00:9::2/125"),
        ],
      },
    ];
    for (const c of cases) {
      it(c.title, () => play(c.stdin ?? conf(SMALL_V4), c.steps));
    }

    // host-local walks its requested addresses in Go's map order, which is
    // random: with two for one range set, either may be the one left over. The
    // in-process answer must be one the binary can give; on each side the ADD
    // is undone, last_reserved_ip naming the address that was taken, then freed.
    it("two requested addresses for one family and one range set: either is left over", async () => {
      const stdin = conf(SMALL_V4, { runtimeConfig: { ips: ["10.9.0.4", "10.9.0.5"] } });
      const pair = await Differential.create();
      const call = add("c1");
      const sides: Array<[Side, string]> = [
        [inProcess, pair.a],
        [binary, pair.b],
      ];
      for (const [side, dir] of sides) {
        const error = errorOf(await side(call, stdin(dir)), side.name);
        const leftOver = error.message.replace("failed to allocate all requested IPs: ", "");
        expect(error, side.name).to.deep.equal({
          code: 999,
          message: `failed to allocate all requested IPs: ${leftOver}`,
        });
        expect(leftOver, side.name).to.be.oneOf(["10.9.0.4", "10.9.0.5"]);
        const taken = leftOver === "10.9.0.4" ? "10.9.0.5" : "10.9.0.4";
        expect(await snapshot(join(dir, NET)), side.name).to.deep.equal({
          "last_reserved_ip.0": `644 ${JSON.stringify(taken)}`,
          lock: "",
        });
      }
    });
  });

  describe("ADD, DEL and CHECK of attachments; routes and DNS", () => {
    const stdin = conf(DUAL_STACK);
    it("a duplicate ADD of one container id and ifname is refused", () =>
      play(stdin, [
        add("c1", "10.9.0.2/29 fd00:9::2/125"),
        add(
          "c1",
          fails(
            "failed to allocate for range 0: 10.9.0.2 has been allocated to c1, duplicate allocation is not allowed",
          ),
        ),
        add("c2", "10.9.0.3/29 fd00:9::3/125"),
      ]));

    it("the same container id with another ifname gets its own addresses, released apart", () =>
      play(stdin, [
        add("c1", "10.9.0.2/29 fd00:9::2/125"),
        add("c1", "10.9.0.3/29 fd00:9::3/125", { ifName: "net1" }),
        check("c1", null, { ifName: "net1" }),
        del("c1", { ifName: "net1" }),
        check("c1", fails("host-local: Failed to find address added by container c1"), {
          ifName: "net1",
        }),
        check("c1"),
      ]));

    it("DEL twice, and DEL of an id never added, succeed", () =>
      play(stdin, [
        add("c1"),
        del("c1"),
        del("c1"),
        del("nobody"),
        add("c2", "10.9.0.3/29 fd00:9::3/125"),
      ]));

    it("CHECK of a present and of an absent attachment", () =>
      play(stdin, [
        add("c1"),
        check("c1"),
        check("c2", fails("host-local: Failed to find address added by container c2")),
        del("c1"),
        check("c1", fails("host-local: Failed to find address added by container c1")),
      ]));

    it("CHECK under a cniVersion that predates it is refused by skel (code 1)", async () => {
      const old = conf(DUAL_STACK, {}, "0.3.1");
      const pair = await play(old, [add("c1")]);
      expect(await pair.call(old, check("c1"))).to.deep.equal({
        error: { code: 1, message: "config version does not allow CHECK" },
      });
    });

    it("cniVersion written twice in two cases: the last key is checked, before anything is made", async () => {
      const twice: Stdin = (dataDir) => ({
        cniVersion: "1.0.0",
        name: NET,
        CNIVersion: "9.9.9",
        ipam: { type: "host-local", ...SMALL_V4, dataDir },
      });
      const pair = await Differential.create();
      expect(errorOf(await pair.call(twice, add("c1")), "ADD").code).to.equal(1);
      expect(existsSync(join(pair.a, NET)), "the network's directory").to.equal(false);
      await pair.expectSameFiles();
    });

    it("leases in the pre-0.7 format (the id alone) are found and released by id", async () => {
      const pair = await Differential.create();
      // Written by an old host-local: no ifname line.
      for (const dir of [pair.a, pair.b]) {
        await mkdir(join(dir, NET), { recursive: true });
        await writeFile(join(dir, NET, "10.9.0.3"), "old-c\n", { mode: 0o644 });
      }
      for (const step of [
        add("c1", "10.9.0.2/29 fd00:9::2/125"),
        add("c2", "10.9.0.4/29 fd00:9::3/125"),
        check("old-c"),
        check("old-c", null, { ifName: "anything" }),
        del("old-c"),
        check("old-c", fails("host-local: Failed to find address added by container old-c")),
      ]) {
        expectWanted(await pair.call(stdin, step), step.want, describeCall(step));
      }
      await pair.expectSameFiles();
    });

    // Go's encoding/json matches keys to fields ignoring case: the binary
    // reads these keys, and a lease in another dataDir would be a second lease.
    it("keys in any case, as Go's JSON decoder matches them", () => {
      const anyCase =
        (top: JsonObject): Stdin =>
        (dir) => ({
          cniVersion: "1.0.0",
          name: NET,
          ...top,
          IPAM: {
            type: "host-local",
            DataDir: dir,
            Routes: [{ DST: "0.0.0.0/0", GW: "10.9.0.1" }],
            RANGES: [[{ Subnet: "10.9.0.0/29", rangestart: "10.9.0.3" }]],
          },
        });
      return play(anyCase({}), [
        add("c1", "10.9.0.3/29"),
        add("c2", "10.9.0.5/29", { stdin: anyCase({ RuntimeConfig: { IPS: ["10.9.0.5"] } }) }),
        add("c3", "10.9.0.6/29"),
        del("c1"),
      ]);
    });

    it("a lease file with a BOM or a non-canonical IPv6 name", async () => {
      const pair = await Differential.create();
      const v6 = conf({ ranges: [[{ subnet: "fd00:9::/125" }]] });
      for (const dir of [pair.a, pair.b]) {
        await mkdir(join(dir, NET), { recursive: true });
        // Go's TrimSpace keeps a BOM: this lease is nobody's.
        await writeFile(join(dir, NET, "fd00:9::5"), "\ufeffbom\r\neth0");
        await writeFile(join(dir, NET, "fd00:9:0::2"), "c1\r\neth0");
      }
      for (const step of [
        check("bom", fails("host-local: Failed to find address added by container bom")),
        del("bom"),
        // Named as Go prints the address.
        add(
          "c1",
          fails(
            "failed to allocate for range 0: fd00:9::2 has been allocated to c1, duplicate allocation is not allowed",
          ),
        ),
      ]) {
        expectWanted(await pair.call(v6, step), step.want, describeCall(step));
      }
      await pair.expectSameFiles();
    });

    it("routes and resolvConf go into the result", async () => {
      const resolv = join(root, "resolv.conf");
      await writeFile(
        resolv,
        [
          "# a comment",
          "; another",
          "nameserver 10.0.0.53",
          "nameserver\tfd00::53",
          "nameserver",
          "domain example.com extra",
          "search a.example b.example\r",
          "search c.example",
          "options ndots:5 timeout:1",
          "  options   rotate  ",
          "sortlist 10.0.0.0",
          "",
        ].join("\n"),
      );
      const withDns = conf({
        ...DUAL_STACK,
        resolvConf: resolv,
        routes: [{ dst: "0.0.0.0/0" }, { dst: "10.10.0.0/16", gw: "10.9.0.6" }, { dst: "::/0" }],
      });
      const pair = await play(withDns, [add("c1", "10.9.0.2/29 fd00:9::2/125")]);
      // Equal, and not equally empty.
      const answer = await pair.call(withDns, add("c2"));
      expect(answer)
        .to.have.nested.property("result.dns")
        .that.deep.equals({
          nameservers: ["10.0.0.53", "fd00::53"],
          domain: "example.com",
          search: ["a.example", "b.example", "c.example"],
          options: ["ndots:5", "timeout:1", "rotate"],
        });
      expect(answer).to.have.nested.property("result.routes").with.length(3);
      await pair.expectSameFiles();
    });

    it("an empty routes list and an empty resolv.conf", async () => {
      const resolv = join(root, "empty-resolv.conf");
      await writeFile(resolv, "");
      await play(conf({ ...SMALL_V4, resolvConf: resolv, routes: [] }), [add("c1", "10.9.0.2/29")]);
    });

    it("a route with keys host-local 1.1.1 does not know", () =>
      play(conf({ ...SMALL_V4, routes: [{ dst: "0.0.0.0/0", mtu: 1400, priority: 7 }] }), [
        add("c1", "10.9.0.2/29"),
      ]));

    it("a route dst with host bits and an empty gw", () =>
      play(
        conf({
          ...SMALL_V4,
          routes: [
            { dst: "10.0.0.5/8", gw: "" },
            { dst: "fd00::5/64", gw: "fd00:9::1" },
          ],
        }),
        [add("c1", "10.9.0.2/29")],
      ));

    for (const [what, route, message] of [
      ["dst", { dst: "banana" }, "invalid CIDR address: banana"],
      ["gw", { dst: "0.0.0.0/0", gw: "banana" }, "invalid IP address: banana"],
    ] as const) {
      it(`a route with an invalid ${what} fails ADD, DEL and CHECK alike`, () =>
        play(conf({ ...SMALL_V4, routes: [route] }), [
          add("c1", fails(message)),
          del("c1", { want: fails(message) }),
          check("c1", fails(message)),
        ]));
    }

    it("a missing resolvConf fails the ADD and leaves no lease", () => {
      const missing = join(root, "no-such-resolv.conf");
      return play(conf({ ...SMALL_V4, resolvConf: missing }), [
        add("c1", fails(`open ${missing}: no such file or directory`)),
        del("c1"),
      ]);
    });

    // host-local reads resolvConf before it makes <dataDir>/<network>.
    it("a resolvConf that cannot be read fails the ADD before the network's directory is made", async () => {
      const missing = join(root, "no-such-resolv.conf");
      await play(conf({ ...SMALL_V4, resolvConf: missing }), [
        add("c1", fails(`open ${missing}: no such file or directory`)),
      ]);
      await play(conf({ ...SMALL_V4, resolvConf: root }), [
        add("c1", fails(`read ${root}: is a directory`)),
      ]);
    });

    it("a resolv.conf line of 64 KiB fails the ADD as bufio.Scanner does", async () => {
      const resolv = join(root, "long-resolv.conf");
      await writeFile(resolv, `nameserver 10.0.0.53\nsearch ${"x".repeat(65_536)}\n`);
      await play(conf({ ...SMALL_V4, resolvConf: resolv }), [
        add("c1", fails("bufio.Scanner: token too long")),
      ]);
    });

    // The binary prints such a route as {"dst":"<nil>"}, a result no CNI
    // consumer decodes; in-process the ADD fails, and must not keep its lease.
    it("a route without dst: the in-process ADD fails and keeps no lease", async () => {
      const pair = await Differential.create();
      const stdin = conf({ ...SMALL_V4, routes: [{ gw: "10.9.0.1" }] });
      const error = errorOf(await inProcess(add("c1"), stdin(pair.a)), "in-process");
      expect(error.message).to.include("routes[0].dst");
      expect(await snapshot(join(pair.a, NET))).to.deep.equal({
        "last_reserved_ip.0": `644 ${JSON.stringify("10.9.0.2")}`,
        lock: "",
      });
      const theirs = await binary(add("c1"), stdin(pair.b));
      expect(theirs).to.have.nested.property("result.routes[0].dst", "<nil>");
    });
  });

  describe("config errors host-local reports at run time", () => {
    const ipRanges = (ranges: unknown, ipam: JsonObject = SMALL_V4) =>
      conf(ipam, { runtimeConfig: { ipRanges: ranges } });
    // `message` is the binary's (code 999 unless `code` says otherwise).
    const cases: Array<{ title: string; stdin: Stdin; message?: string; code?: number }> = [
      {
        title: "runtimeConfig ipRanges overlapping the configured ranges",
        stdin: ipRanges([[{ subnet: "10.9.0.0/28" }]]),
        message: "range set 0 overlaps with 1",
      },
      {
        title: "runtimeConfig ipRanges overlapping each other within a set",
        stdin: ipRanges([[{ subnet: "10.5.0.0/24" }, { subnet: "10.5.0.128/25" }]]),
        message:
          "invalid range set 0: subnets 10.5.0.1-10.5.0.254 and 10.5.0.129-10.5.0.254 overlap",
      },
      {
        title: "runtimeConfig ipRanges used alone (no ranges in the config)",
        stdin: ipRanges([[{ subnet: "10.5.0.0/29" }]], {}),
      },
      {
        title: "runtimeConfig ipRanges: rangeStart outside the subnet",
        stdin: ipRanges([[{ subnet: "10.5.0.0/29", rangeStart: "10.6.0.1" }]]),
        message: "invalid range set 0: RangeStart 10.6.0.1 not in network 10.5.0.0/29",
      },
      {
        // 1.1.1 checks rangeStart against the subnet and the given rangeEnd.
        title: "runtimeConfig ipRanges: rangeEnd before rangeStart",
        stdin: ipRanges([
          [{ subnet: "10.5.0.0/29", rangeStart: "10.5.0.4", rangeEnd: "10.5.0.3" }],
        ]),
        message: "invalid range set 0: RangeStart 10.5.0.4 not in network 10.5.0.0/29",
      },
      {
        // 1.1.1 does not check the gateway: it is taken, and .1 handed out.
        title: "runtimeConfig ipRanges: a gateway outside the subnet",
        stdin: ipRanges([[{ subnet: "10.5.0.0/29", gateway: "10.6.0.1" }]]),
      },
      {
        title: "runtimeConfig ipRanges: an IPv6 rangeStart in an IPv4 subnet",
        stdin: ipRanges([[{ subnet: "10.5.0.0/29", rangeStart: "fd00::1" }]]),
        message: "invalid range set 0: RangeStart fd00::1 not in network 10.5.0.0/29",
      },
      {
        title: "runtimeConfig ipRanges: mixed families in one set",
        stdin: ipRanges([[{ subnet: "10.5.0.0/29" }, { subnet: "fd00:5::/125" }]]),
        message: "invalid range set 0: mixed address families",
      },
      {
        title: "runtimeConfig ipRanges: an empty range set",
        stdin: ipRanges([[]]),
        message: "invalid range set 0: empty range set",
      },
      {
        title: "runtimeConfig ipRanges: a /31 (too small)",
        stdin: ipRanges([[{ subnet: "10.5.0.0/31" }]]),
        message: "invalid range set 0: Network 10.5.0.0/31 too small to allocate from",
      },
      {
        title: "runtimeConfig ipRanges: a range without a subnet",
        stdin: ipRanges([[{ rangeStart: "10.5.0.2" }]]),
        message: "invalid range set 0: IP <nil> not v4 nor v6",
      },
      {
        title: "a subnet with host bits",
        stdin: conf({ ranges: [[{ subnet: "10.9.0.5/24" }]] }),
        message:
          "invalid range set 0: Network has host bits set. For a subnet mask of length 24 the network address is 10.9.0.0",
      },
      {
        title: "an IPv6 subnet with host bits",
        stdin: conf({ ranges: [[{ subnet: "fd00:9::5/64" }]] }),
        message:
          "invalid range set 0: Network has host bits set. For a subnet mask of length 64 the network address is fd00:9::",
      },
      { title: "no ranges at all", stdin: conf({}), message: "no IP ranges specified" },
      {
        title: "an empty ranges list",
        stdin: conf({ ranges: [] }),
        message: "no IP ranges specified",
      },
      {
        title: "no ipam key",
        stdin: () => ({ cniVersion: "1.0.0", name: NET }),
        message: "IPAM config missing 'ipam' key",
      },
      {
        title: "overlapping range sets in the config",
        stdin: conf({ ranges: [[{ subnet: "10.9.0.0/29" }], [{ subnet: "10.9.0.0/24" }]] }),
        message: "range set 0 overlaps with 1",
      },
      {
        // skel refuses it before host-local runs (CHECK: "plugin version does not allow CHECK").
        title: "a cniVersion the plugin does not support",
        stdin: conf(SMALL_V4, {}, "9.9.9"),
        message: "incompatible CNI versions",
        code: 1,
      },
      {
        title: "a cniVersion the plugin does not support, with invalid ranges too",
        stdin: conf({ ranges: [[{ subnet: "10.9.0.5/24" }]] }, {}, "0.4.5"),
        message: "incompatible CNI versions",
        code: 1,
      },
      {
        // The per-family limit is checked before overlaps.
        title: "two overlapping IPv4 range sets under cniVersion 0.2.0",
        stdin: conf(
          { ranges: [[{ subnet: "10.9.0.0/29" }], [{ subnet: "10.9.0.0/24" }]] },
          {},
          "0.2.0",
        ),
        message: "CNI version 0.2.0 does not support more than 1 address per family",
      },
      {
        // net.ParseCIDR keeps the address IPv4 and the mask IPv6.
        title: "an IPv4-mapped IPv6 subnet",
        stdin: conf({ ranges: [[{ subnet: "::ffff:10.9.0.0/120" }]] }),
        message: "invalid range set 0: IPNet IP and Mask version mismatch",
      },
      {
        title: "an IPv4-mapped IPv6 subnet of /96",
        stdin: conf({ ranges: [[{ subnet: "::ffff:0:0/96" }]] }),
        message: "invalid range set 0: IPNet IP and Mask version mismatch",
      },
      {
        // rangeStart defaults to network+1 before rangeEnd is checked against it.
        title: "a rangeEnd at the network address without a rangeStart",
        stdin: conf({ ranges: [[{ subnet: "10.9.0.0/29", rangeEnd: "10.9.0.0" }]] }),
        message: "invalid range set 0: RangeEnd 10.9.0.0 not in network 10.9.0.0/29",
      },
      {
        title: "an empty subnet",
        stdin: conf({ ranges: [[{ subnet: "" }]] }),
        message: "invalid CIDR address: ",
      },
      {
        title: "a null subnet",
        stdin: conf({ ranges: [[{ subnet: null }]] }),
        message: "invalid CIDR address: ",
      },
      {
        title: "an empty legacy subnet next to valid ranges",
        stdin: conf({ subnet: "", ...SMALL_V4 }),
        message: "invalid CIDR address: ",
      },
      {
        title: "a null range set",
        stdin: conf({ ranges: [null] }),
        message: "invalid range set 0: empty range set",
      },
      {
        title: "a null range",
        stdin: conf({ ranges: [[null]] }),
        message: "invalid range set 0: IP <nil> not v4 nor v6",
      },
      {
        title: "a dataDir that is not a string",
        stdin: (dir) => ({
          ...conf(SMALL_V4)(dir),
          ipam: { ...SMALL_V4, type: "host-local", dataDir: 5 },
        }),
        message:
          "json: cannot unmarshal number into Go struct field IPAMConfig.ipam.dataDir of type string",
      },
      {
        title: "a dataDir that is a regular file",
        stdin: (dir) => ({
          ...conf(SMALL_V4)(dir),
          ipam: { ...SMALL_V4, type: "host-local", dataDir: "/etc/hostname" },
        }),
        message: "mkdir /etc/hostname: not a directory",
      },
      {
        title: "a resolvConf that is not a string",
        stdin: conf({ ...SMALL_V4, resolvConf: true }),
        message:
          "json: cannot unmarshal bool into Go struct field IPAMConfig.ipam.resolvConf of type string",
      },
      {
        title: "routes not a list",
        stdin: conf({ ...SMALL_V4, routes: { dst: "0.0.0.0/0" } }),
        message:
          "json: cannot unmarshal object into Go struct field IPAMConfig.ipam.routes of type []*types.Route",
      },
      {
        title: "a route that is not an object",
        stdin: conf({ ...SMALL_V4, routes: [5] }),
        message:
          "json: cannot unmarshal number into Go struct field IPAMConfig.ipam.routes of type types.route",
      },
      {
        title: "a route with a null dst",
        stdin: conf({ ...SMALL_V4, routes: [{ dst: null }] }),
        message: "invalid CIDR address: ",
      },
      {
        title: "args not an object",
        stdin: conf(SMALL_V4, { args: "x" }),
        message:
          'json: cannot unmarshal string into Go struct field Net.args of type struct { A *allocator.IPAMArgs "json:\\"cni\\"" }',
      },
      {
        title: "runtimeConfig not an object",
        stdin: conf(SMALL_V4, { runtimeConfig: 5 }),
        message:
          'json: cannot unmarshal number into Go struct field Net.runtimeConfig of type struct { IPRanges []allocator.RangeSet "json:\\"ipRanges,omitempty\\""; IPs []*ip.IP "json:\\"ips,omitempty\\"" }',
      },
      {
        title: "an empty address in args.cni.ips (Go's nil net.IP)",
        stdin: conf(SMALL_V4, { args: { cni: { ips: [""] } } }),
        message: "cannot understand ip: IP <nil> not v4 nor v6",
      },
    ];
    for (const c of cases) {
      it(c.title, async () => {
        // ADD, DEL and CHECK load the config alike: compared, whatever they answer.
        const pair = await play(c.stdin, [add("c1"), compared(del("c1")), compared(check("c1"))]);
        if (c.message) {
          const answer = await pair.call(c.stdin, add("c2"));
          expect(answer).to.deep.equal({ error: { code: c.code ?? 999, message: c.message } });
        }
      });
    }

    // Go's encoding/json words type errors its own way ("json: cannot unmarshal
    // string into Go struct field …"); the in-process plugin names the key
    // instead. Only the code is compared for these.
    const decodeCases: Array<{ title: string; stdin: Stdin }> = [
      { title: "ranges not a list", stdin: conf({ ranges: "10.9.0.0/29" }) },
      { title: "a subnet that is not a CIDR", stdin: conf({ ranges: [[{ subnet: "banana" }]] }) },
      {
        title: "a rangeStart that is not an address",
        stdin: conf({ ranges: [[{ subnet: "10.9.0.0/29", rangeStart: "x" }]] }),
      },
      {
        title: "runtimeConfig.ips holding a number",
        stdin: conf(SMALL_V4, { runtimeConfig: { ips: [5] } }),
      },
    ];
    for (const c of decodeCases) {
      it(`${c.title}: same code, Go's JSON decoder wording not compared`, async () => {
        const pair = await Differential.create();
        for (const call of [add("c1"), del("c1")]) {
          const [mine, theirs] = await Promise.all([
            inProcess(call, c.stdin(pair.a)),
            binary(call, c.stdin(pair.b)),
          ]);
          const what = describeCall(call);
          expect(errorOf(mine, `in-process ${what}`).code, what).to.equal(
            errorOf(theirs, `binary ${what}`).code,
          );
        }
        await pair.expectSameFiles();
      });
    }
  });

  describe("one data dir shared by the binary and the in-process plugin", () => {
    it("leases made by one are seen and released by the other", async () => {
      const dir = await mkdtemp(join(root, "shared-"));
      const stdin = conf(DUAL_STACK)(dir);
      const steps: Array<[Side, Step]> = [
        [binary, add("b1", "10.9.0.2/29 fd00:9::2/125")],
        [inProcess, add("i1", "10.9.0.3/29 fd00:9::3/125")],
        [binary, add("b2", "10.9.0.4/29 fd00:9::4/125")],
        // Each side sees the other's leases: a duplicate is refused either way.
        [
          inProcess,
          add(
            "b1",
            fails(
              "failed to allocate for range 0: 10.9.0.2 has been allocated to b1, duplicate allocation is not allowed",
            ),
          ),
        ],
        [
          binary,
          add(
            "i1",
            fails(
              "failed to allocate for range 0: 10.9.0.3 has been allocated to i1, duplicate allocation is not allowed",
            ),
          ),
        ],
        [inProcess, check("b1")],
        [binary, check("i1")],
        [inProcess, del("b1")],
        [binary, del("i1")],
        [binary, check("b1", fails("host-local: Failed to find address added by container b1"))],
        [inProcess, check("i1", fails("host-local: Failed to find address added by container i1"))],
        // Round robin goes on from the other's last_reserved_ip.
        [inProcess, add("i2", "10.9.0.5/29 fd00:9::5/125")],
        [binary, add("b3", "10.9.0.6/29 fd00:9::6/125")],
        [inProcess, add("i3", "10.9.0.2/29 fd00:9::7/125")],
        [binary, add("b4", "10.9.0.3/29 fd00:9::2/125")],
        [inProcess, del("b2")],
        [inProcess, del("b3")],
        [inProcess, del("b4")],
        [binary, del("i2")],
        [binary, del("i3")],
      ];
      for (const [side, step] of steps) {
        expectWanted(await side(step, stdin), step.want, `${side.name}: ${describeCall(step)}`);
      }
      expect(Object.keys(await snapshot(join(dir, NET)))).to.deep.equal([
        "last_reserved_ip.0",
        "last_reserved_ip.1",
        "lock",
      ]);
    });

    it("a lease removed, rewritten or added by hand between two calls is seen by the next (the files kept between calls are not trusted blindly)", async () => {
      const dir = await mkdtemp(join(root, "by-hand-"));
      const stdin = conf({ ranges: [[{ subnet: "10.9.1.0/29" }]] })(dir);
      const leases = join(dir, NET);
      const step = async (s: Step) =>
        expectWanted(await inProcess(s, stdin), s.want, describeCall(s));
      await step(add("h1", "10.9.1.2/29"));
      await step(add("h2", "10.9.1.3/29"));
      await step(check("h1"));
      await rm(join(leases, "10.9.1.2"));
      await step(check("h1", fails("host-local: Failed to find address added by container h1")));
      await writeFile(join(leases, "10.9.1.3"), "h9\r\neth0");
      await step(check("h2", fails("host-local: Failed to find address added by container h2")));
      await step(check("h9"));
      await step(del("h9"));
      expect(existsSync(join(leases, "10.9.1.3")), "h9's lease released").to.equal(false);
      await writeFile(join(leases, "10.9.1.6"), "h7\r\neth0");
      await step(
        add(
          "h7",
          fails(
            "failed to allocate for range 0: 10.9.1.6 has been allocated to h7, duplicate allocation is not allowed",
          ),
        ),
      );
      await rm(leases, { recursive: true });
      await step(add("h8", "10.9.1.2/29"));
      await step(check("h7", fails("host-local: Failed to find address added by container h7")));
      await writeFile(join(leases, "10.9.1.5"), "h6\r\neth0");
      await step(del("h6"));
      expect(Object.keys(await snapshot(leases))).to.deep.equal([
        "10.9.1.2",
        "last_reserved_ip.0",
        "lock",
      ]);
    });

    it("40 concurrent ADDs, half through the binary, give 40 distinct addresses; 40 DELs free them", async () => {
      const dir = await mkdtemp(join(root, "concurrent-"));
      const stdin = conf({ ranges: [[{ subnet: "10.20.0.0/24" }]] })(dir);
      const ids = Array.from({ length: 40 }, (_, i) => `conc-${i}`);
      // Even ids through the binary, odd ones in-process, all started at once.
      const sideOf = (i: number): Side => (i % 2 === 0 ? binary : inProcess);
      const adds = await Promise.all(ids.map((id, i) => sideOf(i)(add(id), stdin)));
      const addresses = adds.map((a, i) => {
        expect(a, `ADD ${ids[i]} (${sideOf(i).name})`).to.have.property("result");
        return addressesOf(a)[0]!.split("/")[0]!;
      });
      expect(new Set(addresses).size, addresses.join(" ")).to.equal(40);

      // Each lease file names the attachment that got the address.
      const files = await snapshot(join(dir, NET));
      expect(Object.keys(files)).to.have.length(42);
      addresses.forEach((ip, i) => {
        expect(files[ip]).to.equal(`644 ${JSON.stringify(`${ids[i]}\r\neth0`)}`);
      });

      // Released crosswise: what the binary leased, the in-process plugin frees.
      const dels = await Promise.all(ids.map((id, i) => sideOf(i + 1)(del(id), stdin)));
      for (const d of dels) expect(d).to.deep.equal({ result: undefined });
      expect(Object.keys(await snapshot(join(dir, NET)))).to.deep.equal([
        "last_reserved_ip.0",
        "lock",
      ]);
    });
  });

  describe("GC and STATUS (in-process only: the Debian binary predates them)", () => {
    const gcStdin = (dir: string, valid: Array<[string, string]>) => ({
      cniVersion: "1.1.0",
      name: NET,
      ipam: { type: "host-local", ...DUAL_STACK, dataDir: dir },
      "cni.dev/valid-attachments": valid.map(([containerID, ifname]) => ({ containerID, ifname })),
    });

    it("GC releases the leases of attachments not listed and keeps the listed ones", async () => {
      const dir = await mkdtemp(join(root, "gc-"));
      const stdin = conf(DUAL_STACK)(dir);
      // Leases from both: GC must not care who wrote them.
      for (const [side, id, ifName] of [
        [binary, "keep", "eth0"],
        [inProcess, "keep", "net1"],
        [inProcess, "drop", "eth0"],
        [binary, "drop2", "eth0"],
        [inProcess, "keep2", "eth0"],
      ] as Array<[Side, string, string]>) {
        expect(await side(add(id, undefined, { ifName }), stdin)).to.have.property("result");
      }
      const gc = await inProcess(
        { command: "GC", containerId: "" },
        gcStdin(dir, [
          ["keep", "eth0"],
          ["keep2", "eth0"],
          ["gone", "eth0"],
        ]),
      );
      expect(gc).to.deep.equal({ result: undefined });

      const left = await snapshot(join(dir, NET));
      const owners = Object.entries(left)
        .filter(([name]) => !name.startsWith("last_reserved_ip.") && name !== "lock")
        .map(([, content]) => content)
        .sort();
      // keep/eth0 and keep2/eth0 hold one v4 and one v6 lease each; keep/net1 (not listed) is gone.
      expect(owners).to.deep.equal(
        ["keep\r\neth0", "keep\r\neth0", "keep2\r\neth0", "keep2\r\neth0"]
          .map((c) => `644 ${JSON.stringify(c)}`)
          .sort(),
      );
      expect(left).to.include.keys("last_reserved_ip.0", "last_reserved_ip.1", "lock");

      // What GC kept, the binary still finds and releases.
      expect(await binary(check("keep"), stdin)).to.deep.equal({ result: undefined });
      expect(await binary(check("keep", undefined, { ifName: "net1" }), stdin)).to.have.property(
        "error",
      );
      expect(await binary(del("keep2"), stdin)).to.deep.equal({ result: undefined });
    });

    it("GC with no valid attachments releases every lease", async () => {
      const dir = await mkdtemp(join(root, "gc-all-"));
      const stdin = conf(DUAL_STACK)(dir);
      await inProcess(add("a"), stdin);
      await binary(add("b"), stdin);
      expect(await inProcess({ command: "GC", containerId: "" }, gcStdin(dir, []))).to.deep.equal({
        result: undefined,
      });
      expect(Object.keys(await snapshot(join(dir, NET)))).to.deep.equal([
        "last_reserved_ip.0",
        "last_reserved_ip.1",
        "lock",
      ]);
    });

    it("STATUS resolves", async () => {
      const dir = await mkdtemp(join(root, "status-"));
      const stdin = {
        cniVersion: "1.1.0",
        name: NET,
        ipam: { type: "host-local", ...DUAL_STACK, dataDir: dir },
      };
      expect(await inProcess({ command: "STATUS", containerId: "" }, stdin)).to.deep.equal({
        result: undefined,
      });
    });
  });
});
