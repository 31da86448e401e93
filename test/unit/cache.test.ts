import { expect } from "chai";
import {
  attachmentFromCacheEntry,
  attachmentsFromFileNames,
  CACHE_RESULTS_DIR,
  type CachedAttachment,
  cacheFileName,
  decodeCacheEntry,
  encodeCacheEntry,
} from "../../src/cni/cache.js";
import { cniErrorOf } from "../support/cni-error.js";

const CONFIG = '{"cniVersion":"1.0.0","name":"pods","plugins":[{"type":"ptp"}]}';
const CONFIG_B64 =
  "eyJjbmlWZXJzaW9uIjoiMS4wLjAiLCJuYW1lIjoicG9kcyIsInBsdWdpbnMiOlt7InR5cGUiOiJwdHAifV19";

const RESULT = {
  cniVersion: "1.0.0",
  interfaces: [{ name: "eth0", mac: "aa:bb:cc:dd:ee:ff", sandbox: "/run/netns/x" }],
  ips: [{ address: "10.1.0.5/24", gateway: "10.1.0.1", interface: 0 }],
};

describe("cni/cache", () => {
  describe("cacheFileName", () => {
    it("is <network>-<containerID>-<ifname> under results/", () => {
      expect(CACHE_RESULTS_DIR).to.equal("results");
      expect(cacheFileName("pods", "abc123", "eth0")).to.equal("pods-abc123-eth0");
    });

    for (const [net, id, ifn] of [
      ["", "abc", "eth0"],
      ["pods", "", "eth0"],
      ["pods", "abc", ""],
      ["pods", "../x", "eth0"],
    ] as const) {
      it(`refuses ${JSON.stringify([net, id, ifn])}`, () => {
        expect(cniErrorOf(() => cacheFileName(net, id, ifn)).code).to.equal(999);
      });
    }
  });

  describe("encodeCacheEntry", () => {
    it("writes libcni's exact text: field order, base64 config, sorted maps, no empty netns", () => {
      const text = encodeCacheEntry({
        containerId: "abc123",
        config: CONFIG,
        ifName: "eth0",
        networkName: "pods",
        netns: "",
        cniArgs: [
          ["K8S_POD_NAMESPACE", "default"],
          ["IgnoreUnknown", "1"],
        ],
        capabilityArgs: {
          portMappings: [{ hostPort: 8080, containerPort: 80, protocol: "tcp" }],
        },
        result: RESULT,
      });
      expect(text).to.equal(
        `{"kind":"cniCacheV1","containerId":"abc123","config":"${CONFIG_B64}","ifName":"eth0","networkName":"pods",` +
          `"cniArgs":[["K8S_POD_NAMESPACE","default"],["IgnoreUnknown","1"]],` +
          `"capabilityArgs":{"portMappings":[{"containerPort":80,"hostPort":8080,"protocol":"tcp"}]},` +
          `"result":{"cniVersion":"1.0.0","interfaces":[{"mac":"aa:bb:cc:dd:ee:ff","name":"eth0","sandbox":"/run/netns/x"}],"ips":[{"address":"10.1.0.5/24","gateway":"10.1.0.1","interface":0}]}}`,
      );
    });

    it("leaves out empty cniArgs, capabilityArgs and result; keeps a netns", () => {
      const text = encodeCacheEntry({
        containerId: "c",
        config: new TextEncoder().encode("<a>&b"),
        ifName: "eth0",
        networkName: "n",
        netns: "/var/run/netns/cni-1",
        cniArgs: [],
        capabilityArgs: {},
      });
      expect(text).to.equal(
        '{"kind":"cniCacheV1","containerId":"c","config":"PGE+JmI=","ifName":"eth0","networkName":"n","netns":"/var/run/netns/cni-1"}',
      );
    });

    it("escapes <, > and & in strings as Go does", () => {
      const text = encodeCacheEntry({
        containerId: "c",
        config: "{}",
        ifName: "eth0",
        networkName: "n",
        capabilityArgs: { "io.kubernetes.cri.pod-annotations": { note: "a<b>&c" } },
      });
      expect(text).to.include('"note":"a\\u003cb\\u003e\\u0026c"');
      const back = decodeCacheEntry(text) as CachedAttachment;
      expect(back.capabilityArgs).to.deep.equal({
        "io.kubernetes.cri.pod-annotations": { note: "a<b>&c" },
      });
    });
  });

  describe("decodeCacheEntry", () => {
    it("round-trips an entry", () => {
      const input = {
        containerId: "abc123",
        config: CONFIG,
        ifName: "eth0",
        networkName: "pods",
        netns: "/proc/42/ns/net",
        cniArgs: [["IgnoreUnknown", "1"]] as [string, string][],
        capabilityArgs: { mac: "c2:11:22:33:44:55" },
        result: RESULT,
      };
      const text = encodeCacheEntry(input);
      const entry = decodeCacheEntry(text) as CachedAttachment;
      expect(entry.kind).to.equal("cniCacheV1");
      expect(Buffer.from(entry.config).toString()).to.equal(CONFIG);
      expect(entry).to.deep.include({
        containerId: "abc123",
        ifName: "eth0",
        networkName: "pods",
        netns: "/proc/42/ns/net",
        cniArgs: [["IgnoreUnknown", "1"]],
        capabilityArgs: { mac: "c2:11:22:33:44:55" },
        result: RESULT,
      });
      expect(encodeCacheEntry(entry)).to.equal(text);
    });

    it("an entry without optional fields reads back with them empty", () => {
      const entry = decodeCacheEntry(
        `{"kind":"cniCacheV1","containerId":"c","config":"${CONFIG_B64}","ifName":"eth0","networkName":"pods"}`,
      ) as CachedAttachment;
      expect(entry.netns).to.equal("");
      expect(entry.cniArgs).to.equal(undefined);
      expect(entry.capabilityArgs).to.equal(undefined);
      expect(entry.result).to.equal(undefined);
    });

    it("reads a legacy file holding a bare result", () => {
      const legacy =
        '{"cniVersion":"0.3.1","ips":[{"version":"4","address":"10.1.0.5/24"}],"dns":{}}';
      expect(decodeCacheEntry(legacy)).to.deep.equal({
        kind: "legacy",
        result: {
          cniVersion: "0.3.1",
          ips: [{ version: "4", address: "10.1.0.5/24" }],
          dns: {},
        },
      });
    });

    for (const [what, text] of [
      ["not JSON", "{kind"],
      ["empty", ""],
      ["a JSON array", "[]"],
      ["another kind", '{"kind":"cniCacheV2"}'],
      ["a config that is not base64", '{"kind":"cniCacheV1","config":"%%%"}'],
      ["a config that is a number", '{"kind":"cniCacheV1","config":1}'],
      ["a containerId that is a number", '{"kind":"cniCacheV1","containerId":1}'],
      ["cniArgs that are not pairs", '{"kind":"cniCacheV1","cniArgs":[["a"]]}'],
      ["a result that is a list", '{"kind":"cniCacheV1","result":[]}'],
    ] as const) {
      it(`${what} is code 6`, () => {
        const err = cniErrorOf(() => decodeCacheEntry(text));
        expect(err.code).to.equal(6);
        expect(err.message).to.match(/^failed to unmarshal cached network config/);
      });
    }
  });

  describe("enumerating a container's attachments", () => {
    const names = [
      "pods-c1-eth0",
      "pods-c10-eth0",
      "other-c1-net1",
      "c1-eth0",
      "pods-c1-",
      "zz-c2-eth0",
    ];

    for (const [id, want] of [
      ["c1", ["other-c1-net1", "pods-c1-eth0"]],
      ["c10", ["pods-c10-eth0"]],
      [undefined, [...names].sort()],
    ] as const) {
      it(`file names for ${String(id)}`, () => {
        expect(attachmentsFromFileNames(names, id)).to.deep.equal(want);
      });
    }

    it("keeps only cniCacheV1 files of the container that name an interface and a network", () => {
      const entry = (containerId: string, ifName: string, networkName: string) =>
        decodeCacheEntry(
          encodeCacheEntry({ containerId, config: CONFIG, ifName, networkName, result: RESULT }),
        );
      expect(attachmentFromCacheEntry(entry("c1", "eth0", "pods"), "c1")?.ifName).to.equal("eth0");
      expect(attachmentFromCacheEntry(entry("c1", "eth0", "pods"))).to.not.equal(undefined);
      expect(attachmentFromCacheEntry(entry("c1", "eth0", "pods"), "c2")).to.equal(undefined);
      expect(attachmentFromCacheEntry(entry("c1", "", "pods"), "c1")).to.equal(undefined);
      expect(attachmentFromCacheEntry(decodeCacheEntry('{"cniVersion":"0.4.0"}'))).to.equal(
        undefined,
      );
    });
  });
});
