import {
  lstat,
  mkdir,
  mkdtemp,
  readdir,
  readFile,
  rm,
  stat,
  symlink,
  writeFile,
} from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect } from "chai";
import { type CacheEntryInput, encodeCacheEntry } from "../../src/cni/cache.js";
import { CniError } from "../../src/cni/errors.js";
import { ResultCache } from "../../src/driver/chain/result-cache.js";

const CONFLIST = '{"cniVersion":"1.0.0","name":"pod-net","plugins":[{"type":"bridge"}]}';

const RESULT = {
  cniVersion: "1.0.0",
  interfaces: [{ name: "eth0", mac: "aa:bb:cc:dd:ee:ff", sandbox: "/var/run/netns/cni-1" }],
  ips: [{ address: "10.1.0.2/24", gateway: "10.1.0.1", interface: 0 }],
};

/** What libcni's cacheAdd writes for `entry()`: struct fields in order, maps with sorted keys, config in base64. */
const LIBCNI_BYTES =
  '{"kind":"cniCacheV1","containerId":"abc-def-123","config":"' +
  Buffer.from(CONFLIST).toString("base64") +
  '","ifName":"eth0","networkName":"pod-net","netns":"/var/run/netns/cni-1",' +
  '"cniArgs":[["IgnoreUnknown","1"],["K8S_POD_NAME","web"]],' +
  '"capabilityArgs":{"portMappings":[{"containerPort":80,"hostPort":8080,"protocol":"tcp"}]},' +
  '"result":{"cniVersion":"1.0.0","interfaces":[{"mac":"aa:bb:cc:dd:ee:ff","name":"eth0","sandbox":"/var/run/netns/cni-1"}],' +
  '"ips":[{"address":"10.1.0.2/24","gateway":"10.1.0.1","interface":0}]}}';

function entry(over: Partial<CacheEntryInput> = {}): CacheEntryInput {
  return {
    containerId: "abc-def-123",
    config: CONFLIST,
    ifName: "eth0",
    networkName: "pod-net",
    netns: "/var/run/netns/cni-1",
    cniArgs: [
      ["IgnoreUnknown", "1"],
      ["K8S_POD_NAME", "web"],
    ],
    capabilityArgs: { portMappings: [{ hostPort: 8080, containerPort: 80, protocol: "tcp" }] },
    result: RESULT,
    ...over,
  };
}

interface Warning {
  obj: Record<string, unknown>;
  msg: string;
}

describe("ResultCache", () => {
  let root: string;
  let n = 0;
  let cacheDir: string;
  let warnings: Warning[];
  let cache: ResultCache;

  before(async () => {
    root = await mkdtemp(join(tmpdir(), "cni-result-cache-"));
  });

  after(async () => {
    await rm(root, { recursive: true, force: true });
  });

  beforeEach(() => {
    cacheDir = join(root, `cache-${n++}`);
    warnings = [];
    cache = new ResultCache(cacheDir, {
      log: { warn: (obj, msg) => warnings.push({ obj: obj as Record<string, unknown>, msg }) },
    });
  });

  const resultsDir = (): string => join(cacheDir, "results");

  it("writes <cacheDir>/results/<network>-<containerID>-<ifName> with libcni's bytes", async () => {
    await cache.write(entry());
    const path = join(resultsDir(), "pod-net-abc-def-123-eth0");
    expect(cache.path("pod-net", "abc-def-123", "eth0")).to.equal(path);
    expect(await readFile(path, "utf8")).to.equal(LIBCNI_BYTES);
    expect(LIBCNI_BYTES).to.equal(encodeCacheEntry(entry()));
  });

  it("creates the directory 0700 and the file 0600", async () => {
    await cache.write(entry());
    expect((await stat(resultsDir())).mode & 0o777).to.equal(0o700);
    expect((await stat(cache.path("pod-net", "abc-def-123", "eth0"))).mode & 0o777).to.equal(0o600);
  });

  it("reads back what it wrote", async () => {
    await cache.write(entry());
    const got = await cache.read("pod-net", "abc-def-123", "eth0");
    expect(got).to.deep.equal({
      kind: "cniCacheV1",
      containerId: "abc-def-123",
      config: new Uint8Array(Buffer.from(CONFLIST)),
      ifName: "eth0",
      networkName: "pod-net",
      netns: "/var/run/netns/cni-1",
      cniArgs: [
        ["IgnoreUnknown", "1"],
        ["K8S_POD_NAME", "web"],
      ],
      capabilityArgs: { portMappings: [{ containerPort: 80, hostPort: 8080, protocol: "tcp" }] },
      result: RESULT,
    });
    expect(warnings).to.deep.equal([]);
  });

  it("reads a file libcni wrote, without an optional field", async () => {
    await mkdir(resultsDir(), { recursive: true });
    const minimal = `{"kind":"cniCacheV1","containerId":"c1","config":"${Buffer.from(CONFLIST).toString("base64")}","ifName":"eth0","networkName":"pod-net","result":{"cniVersion":"0.4.0","ips":[{"version":"4","address":"10.1.0.9/24"}]}}`;
    await writeFile(join(resultsDir(), "pod-net-c1-eth0"), minimal, { mode: 0o600 });
    const got = await cache.read("pod-net", "c1", "eth0");
    expect(got?.netns).to.equal("");
    expect(got?.cniArgs).to.equal(undefined);
    expect(got?.result).to.deep.equal({
      cniVersion: "0.4.0",
      ips: [{ version: "4", address: "10.1.0.9/24" }],
    });
  });

  it("replaces an existing file and leaves no temporary file behind", async () => {
    await cache.write(entry());
    await cache.write(entry({ netns: "/proc/42/ns/net" }));
    expect((await cache.read("pod-net", "abc-def-123", "eth0"))?.netns).to.equal("/proc/42/ns/net");
    expect(await readdir(resultsDir())).to.deep.equal(["pod-net-abc-def-123-eth0"]);
  });

  it("never exposes half a file to concurrent writers and readers", async () => {
    const netnses = Array.from({ length: 20 }, (_, i) => `/var/run/netns/cni-${i}`);
    const big = { ...RESULT, padding: "x".repeat(256 * 1024) };
    const reads: Promise<unknown>[] = [];
    await Promise.all(
      netnses.map(async (netns) => {
        reads.push(cache.read("pod-net", "abc-def-123", "eth0"));
        await cache.write(entry({ netns, result: big }));
      }),
    );
    await Promise.all(reads);
    expect(warnings, "no reader saw a partial file").to.deep.equal([]);
    const final = await cache.read("pod-net", "abc-def-123", "eth0");
    expect(netnses).to.include(final?.netns);
    expect(await readdir(resultsDir())).to.have.length(1);
  });

  it("reads a missing attachment as undefined", async () => {
    expect(await cache.read("pod-net", "nobody", "eth0")).to.equal(undefined);
    await cache.write(entry());
    expect(await cache.read("pod-net", "abc-def-123", "eth1")).to.equal(undefined);
  });

  for (const [what, content] of [
    ["text that is not JSON", "not json at all"],
    ["a truncated file", LIBCNI_BYTES.slice(0, 80)],
    ["a JSON array", "[1,2,3]"],
    ["a config that is not base64", '{"kind":"cniCacheV1","containerId":"c1","config":"%%%"}'],
  ] as const) {
    it(`deletes ${what} on read, says why, and reads it as absent`, async () => {
      await mkdir(resultsDir(), { recursive: true });
      const path = join(resultsDir(), "pod-net-c1-eth0");
      await writeFile(path, content);
      expect(await cache.read("pod-net", "c1", "eth0")).to.equal(undefined);
      expect(await stat(path).catch((e: NodeJS.ErrnoException) => e.code)).to.equal("ENOENT");
      expect(warnings).to.have.length(1);
      expect(warnings[0]?.obj).to.include({ path });
      expect(warnings[0]?.obj.reason).to.be.a("string").and.not.equal("");
    });
  }

  for (const kind of ["cniCacheV2", "someoneElsesCache"]) {
    it(`refuses a file of kind ${kind} (a later driver's), naming it and both kinds, and keeps it for every verb`, async () => {
      await mkdir(resultsDir(), { recursive: true });
      const path = join(resultsDir(), "pod-net-c1-eth0");
      const content = `{"kind":"${kind}","containerId":"c1","ifName":"eth0","networkName":"pod-net"}`;
      await writeFile(path, content);
      const refusal = `${path}: a result cache entry of kind "${kind}", which this cni-driver does not know (it knows up to kind "cniCacheV1"); left as it is for a cni-driver that knows it`;
      for (const discardUnusable of [true, false]) {
        const err = await cache.read("pod-net", "c1", "eth0", { discardUnusable }).catch((e) => e);
        expect(err).to.be.instanceOf(CniError);
        expect(err).to.include({ code: 6, message: refusal });
      }
      const scan = await cache.scan();
      expect(scan.attachments).to.deep.equal([]);
      expect(scan.unknownFormat.map((e) => e.message)).to.deep.equal([refusal]);
      expect(await readFile(path, "utf8")).to.equal(content);
    });
  }

  it("deletes an unreadable entry (a directory in the file's place) on read", async () => {
    const path = join(resultsDir(), "pod-net-c1-eth0");
    await mkdir(path, { recursive: true });
    expect(await cache.read("pod-net", "c1", "eth0")).to.equal(undefined);
    expect(await stat(path).catch((e: NodeJS.ErrnoException) => e.code)).to.equal("ENOENT");
    expect(warnings[0]?.obj.reason).to.match(/^unreadable: /);
  });

  it("keeps an undecodable file when told not to discard (CHECK), and reads it as absent", async () => {
    await mkdir(resultsDir(), { recursive: true });
    const path = join(resultsDir(), "pod-net-c1-eth0");
    await writeFile(path, "not json at all");
    expect(await cache.read("pod-net", "c1", "eth0", { discardUnusable: false })).to.equal(
      undefined,
    );
    expect((await stat(path)).isFile()).to.equal(true);
    expect(warnings[0]?.msg).to.equal("cache file unusable; kept");
  });

  it("fails with code 5 and keeps the file when it exists but cannot be read now", async () => {
    await mkdir(resultsDir(), { recursive: true });
    const path = join(resultsDir(), "pod-net-c1-eth0");
    // A symlink to itself: ELOOP on open, the stand-in for EMFILE or EIO here (root reads anything).
    await symlink(path, path);
    const err = await cache.read("pod-net", "c1", "eth0").then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).to.be.instanceOf(CniError);
    expect((err as CniError).code).to.equal(5);
    expect((err as CniError).message)
      .to.contain(path)
      .and.to.contain("ELOOP");
    expect((await lstat(path)).isSymbolicLink(), "kept").to.equal(true);
  });

  it("reads a legacy file (a bare result) as an attachment holding only that result", async () => {
    await mkdir(resultsDir(), { recursive: true });
    const path = join(resultsDir(), "pod-net-c1-eth0");
    await writeFile(path, JSON.stringify(RESULT));
    expect(await cache.read("pod-net", "c1", "eth0")).to.deep.equal({
      kind: "cniCacheV1",
      containerId: "c1",
      config: new Uint8Array(),
      ifName: "eth0",
      networkName: "pod-net",
      netns: "",
      result: RESULT,
    });
    expect((await stat(path)).isFile()).to.equal(true);
  });

  it("removes a file, and accepts removing one that is not there", async () => {
    await cache.write(entry());
    await cache.remove("pod-net", "abc-def-123", "eth0");
    expect(await cache.read("pod-net", "abc-def-123", "eth0")).to.equal(undefined);
    await cache.remove("pod-net", "abc-def-123", "eth0");
    await cache.remove("other-net", "never", "eth0");
  });

  for (const [network, containerId, ifName] of [
    ["../escape", "c1", "eth0"],
    ["pod-net", "a/b", "eth0"],
    ["pod-net", "c1", ""],
  ] as const) {
    it(`refuses names that would leave the results dir or be ambiguous: ${JSON.stringify([network, containerId, ifName])}`, async () => {
      let caught: unknown;
      try {
        await cache.write(entry({ networkName: network, containerId, ifName }));
      } catch (err) {
        caught = err;
      }
      expect(caught).to.be.instanceOf(CniError);
      expect((caught as CniError).code).to.equal(999);
      expect(await readdir(root)).to.not.include("escape");
    });
  }

  describe("list", () => {
    it("is empty when the cache directory does not exist", async () => {
      expect(await cache.list()).to.deep.equal([]);
    });

    it("takes identities from the content, not the file name, when names contain '-'", async () => {
      const written: CacheEntryInput[] = [
        entry({ networkName: "pod-net", containerId: "abc-def-123", ifName: "eth0" }),
        entry({ networkName: "pod", containerId: "net-xyz", ifName: "net1", netns: "" }),
        entry({ networkName: "a-b", containerId: "c-d-e", ifName: "f-g", cniArgs: [] }),
      ];
      for (const e of written) await cache.write(e);
      const listed = await cache.list();
      expect(listed.map((e) => [e.networkName, e.containerId, e.ifName])).to.deep.equal([
        // File-name order (Go's sort): "a-b-c-d-e-f-g", "pod-net-abc-…", "pod-net-xyz-net1".
        ["a-b", "c-d-e", "f-g"],
        ["pod-net", "abc-def-123", "eth0"],
        ["pod", "net-xyz", "net1"],
      ]);
      expect(listed[2]?.netns).to.equal("");
      expect(listed[1]?.result).to.deep.equal(RESULT);
    });

    it("skips garbage, legacy and temporary files, and leaves them in place", async () => {
      await cache.write(entry());
      const dir = resultsDir();
      await writeFile(join(dir, "pod-net-garbage-eth0"), "{{{");
      await writeFile(join(dir, "pod-net-legacy-eth0"), JSON.stringify(RESULT));
      await writeFile(
        join(dir, ".tmp-pod-net-half-eth0-0a1b2c3d"),
        encodeCacheEntry(entry({ containerId: "half" })),
      );
      await mkdir(join(dir, "pod-net-dir-eth0"));
      const listed = await cache.list();
      expect(listed.map((e) => e.containerId)).to.deep.equal(["abc-def-123"]);
      expect((await readdir(dir)).sort()).to.deep.equal([
        ".tmp-pod-net-half-eth0-0a1b2c3d",
        "pod-net-abc-def-123-eth0",
        "pod-net-dir-eth0",
        "pod-net-garbage-eth0",
        "pod-net-legacy-eth0",
      ]);
      expect(warnings.map((w) => w.obj.path)).to.include(join(dir, "pod-net-garbage-eth0"));
    });

    it("skips an entry that names no interface or network", async () => {
      await cache.write(entry());
      await writeFile(
        join(resultsDir(), "pod-net-noif-x"),
        '{"kind":"cniCacheV1","containerId":"noif","networkName":"pod-net"}',
      );
      expect((await cache.list()).map((e) => e.containerId)).to.deep.equal(["abc-def-123"]);
    });

    it("no longer lists a removed attachment", async () => {
      await cache.write(entry({ containerId: "one" }));
      await cache.write(entry({ containerId: "two" }));
      await cache.remove("pod-net", "one", "eth0");
      expect((await cache.list()).map((e) => e.containerId)).to.deep.equal(["two"]);
    });
  });
});
