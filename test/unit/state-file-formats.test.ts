/**
 * Each file format the driver owns, seen through the module that keeps it: what
 * release 0.1.0 wrote (no version) is read and, at the next write, migrated; the
 * current layout is 0.1.0's plus a version 0.1.0 ignores, so a rollback reads
 * it; a newer version is refused with an error naming the file and both
 * versions, and the file stays as it was.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect } from "chai";
import pino from "pino";
import { FileFormatError } from "../../src/common/file-format.js";
import type { PodCidrs } from "../../src/driver/config/pod-cidr.js";
import type { KubeApi, KubeObjectView, ObjectWatch } from "../../src/driver/kube/api.js";
import { NodePodCidrs } from "../../src/driver/kube/node-pod-cidrs.js";
import {
  INSTALLED_RECORD,
  readInstalled,
  recordInstalled,
} from "../../src/driver/lifecycle/host-install.js";
import { parseDeletionRecord } from "../../src/wire/deletion-record.js";
import { until } from "../support/until.js";

interface LogLine {
  level: number;
  msg: string;
  err?: string;
}

describe("the driver's own file formats across versions", () => {
  let dir = "";
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "cni-driver-state-formats-"));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  describe("deletion records (written by the shim, kind cniDriverDeletionV1)", () => {
    /** What the shim writes (src/remote-plugin-shim/deletion.c), as 0.1.0's did. */
    const SHIM_RECORD = `{
  "kind": "cniDriverDeletionV1",
  "network": "",
  "containerId": "c1",
  "ifName": "eth0",
  "netns": "/run/netns/p1",
  "cniArgs": [
    [
      "K8S_POD_NAME",
      "web-0"
    ]
  ],
  "cniVersion": "1.0.0",
  "queuedAtUnixMs": 1764400000000
}
`;

    it("reads the shim's record", () => {
      expect(parseDeletionRecord("/q/r.json", SHIM_RECORD)).to.deep.include({
        containerId: "c1",
        ifName: "eth0",
        cniArgs: [["K8S_POD_NAME", "web-0"]],
      });
    });

    it("refuses a later kind, and a kind it does not know, naming the file and both kinds", () => {
      for (const kind of ["cniDriverDeletionV2", "someoneElsesRecord"]) {
        const text = SHIM_RECORD.replace("cniDriverDeletionV1", kind);
        expect(() => parseDeletionRecord("/q/r.json", text))
          .to.throw(FileFormatError)
          .with.property(
            "message",
            `/q/r.json: a deletion record of kind "${kind}", which this cni-driver does not know (it knows up to kind "cniDriverDeletionV1"); left as it is for a cni-driver that knows it`,
          );
      }
    });

    it("reads text that is no record at all as none (the queue drops it, as before)", () => {
      expect(parseDeletionRecord("/q/r.json", '{"kind":"cniDriverDel')).to.equal(undefined);
      expect(parseDeletionRecord("/q/r.json", '{"kind":"cniDriverDeletionV1"}')).to.equal(
        undefined,
      );
    });
  });

  describe("the node's pod CIDRs (<state-dir>/node-pod-cidrs.json)", () => {
    const NODE = "node-a";
    const FILE = () => join(dir, "node-pod-cidrs.json");
    /** 0.1.0's writeRemembered: JSON.stringify({ node, podCidrs }) and a newline. */
    const V010 = `${JSON.stringify({ node: NODE, podCidrs: { v4: "10.244.3.0/24" } })}\n`;
    let logs: LogLine[];
    let applied: PodCidrs[];
    let follower: NodePodCidrs | undefined;

    beforeEach(() => {
      logs = [];
      applied = [];
    });
    afterEach(async () => {
      await follower?.stop();
      follower = undefined;
    });

    /** Follows a Node that the fake API delivers with `podCIDR`, or an API that never comes. */
    function follow(podCIDR?: string): NodePodCidrs {
      const logger = pino({ level: "info" }, { write: (l: string) => logs.push(JSON.parse(l)) });
      follower = new NodePodCidrs({
        nodeName: NODE,
        stateDir: dir,
        rememberedGraceMs: 0,
        logger,
        apply: async (c) => {
          applied.push(c);
        },
      });
      const watch: ObjectWatch = { synced: true, lastError: undefined, stop: async () => {} };
      const api = {
        watchObject: (_r: string, _ref: unknown, h: { onObject(o: KubeObjectView): void }) => {
          h.onObject({ metadata: { name: NODE }, spec: { podCIDR } } as KubeObjectView);
          return watch;
        },
      } as unknown as KubeApi;
      follower.follow(podCIDR ? Promise.resolve(api) : new Promise<KubeApi>(() => {}));
      return follower;
    }

    it("takes up what 0.1.0 kept, and rewrites it as version 1: 0.1.0's layout plus the version", async () => {
      writeFileSync(FILE(), V010);
      follow();
      await until(() => applied.length > 0, "the kept CIDRs applied");
      expect(applied).to.deep.equal([{ v4: "10.244.3.0/24" }]);
      await follower?.stop();

      follow("10.244.3.0/24");
      await until(() => readFileSync(FILE(), "utf8") !== V010, "the file rewritten");
      const written = JSON.parse(readFileSync(FILE(), "utf8")) as Record<string, unknown>;
      expect(written.version).to.equal(1);
      const { version: _, ...layout } = written;
      expect(`${JSON.stringify(layout)}\n`, "0.1.0's layout").to.equal(V010);
    });

    it("refuses a newer version: not taken up, never overwritten, the error naming the file and versions", async () => {
      const newer = `${JSON.stringify({ version: 2, nodes: { [NODE]: ["10.244.3.0/24"] } })}\n`;
      writeFileSync(FILE(), newer);
      follow("10.244.9.0/24");
      const refusal = `${FILE()}: a record of the node's pod CIDRs of version 2, which this cni-driver does not know (it knows up to version 1)`;
      expect(logs.find((l) => l.level === 50)?.err).to.contain(refusal);
      // The Node's CIDRs still serve this run; the file is not replaced by them.
      await until(
        () => logs.find((l) => l.msg === "keeping the pod CIDRs for the next start failed"),
        "the write refused",
      );
      expect(applied).to.deep.equal([{ v4: "10.244.9.0/24" }]);
      expect(readFileSync(FILE(), "utf8")).to.equal(newer);
    });
  });

  describe("install-cni's record (<bin-dir>/.cni-driver-installed.json)", () => {
    it("writes version 1, and reads a record that declares none", async () => {
      writeFileSync(join(dir, INSTALLED_RECORD), '{"plugins":["portmap"]}\n');
      expect(readInstalled(dir)).to.deep.equal(["portmap"]);
      await recordInstalled(dir, ["host-local"]);
      expect(readFileSync(join(dir, INSTALLED_RECORD), "utf8")).to.equal(
        '{"version":1,"plugins":["host-local","portmap"]}\n',
      );
    });

    it("refuses a newer record, and leaves it as it is", async () => {
      const newer = '{"version":2,"installed":{"portmap":"sha256:…"}}\n';
      writeFileSync(join(dir, INSTALLED_RECORD), newer);
      expect(() => readInstalled(dir)).to.throw(
        FileFormatError,
        `${join(dir, INSTALLED_RECORD)}: a record of the plugins install-cni installed of version 2`,
      );
      const err = await recordInstalled(dir, ["host-local"]).catch((e: Error) => e);
      expect(err).to.be.instanceOf(FileFormatError);
      expect(readFileSync(join(dir, INSTALLED_RECORD), "utf8")).to.equal(newer);
    });
  });
});
