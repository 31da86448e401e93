import { expect } from "chai";
import { parseNetworkConfigList } from "../../src/cni/conflist.js";
import {
  buildGcStdin,
  isValidAttachment,
  parseGcValidAttachments,
  staleAttachments,
} from "../../src/cni/gc.js";
import { cniErrorOf } from "../support/cni-error.js";

const BASE = { cniVersion: "1.1.0", name: "pods", type: "cni-driver-shim" };
const A = { containerID: "c1", ifname: "eth0" };
const B = { containerID: "c2", ifname: "eth0" };

describe("cni/gc", () => {
  describe("parseGcValidAttachments", () => {
    for (const [what, extra, want] of [
      ["null: nothing is valid", { "cni.dev/valid-attachments": null }, []],
      ["absent: nothing is valid", {}, []],
      ["an empty list", { "cni.dev/valid-attachments": [] }, []],
      ["the spec's key", { "cni.dev/valid-attachments": [A, B] }, [A, B]],
      ["the first spec's key", { "cni.dev/attachments": [A] }, [A]],
      [
        "both keys with libcni's same list",
        { "cni.dev/valid-attachments": [A, B], "cni.dev/attachments": [A, B] },
        [A, B],
      ],
      [
        "both keys, different lists: the union",
        { "cni.dev/valid-attachments": [A], "cni.dev/attachments": [B] },
        [A, B],
      ],
      [
        "field names matched ignoring case, as Go does",
        { "cni.dev/valid-attachments": [{ ContainerId: "c1", IfName: "eth0" }] },
        [A],
      ],
      ["duplicates dropped", { "cni.dev/valid-attachments": [A, A] }, [A]],
    ] as const) {
      it(what, () => {
        expect(parseGcValidAttachments({ ...BASE, ...extra })).to.deep.equal(want);
      });
    }

    for (const [what, value, code] of [
      ["a non-list", { containerID: "c1", ifname: "eth0" }, 6],
      ["an entry that is not an object", ["c1"], 6],
      ["a containerID that is a number", [{ containerID: 1, ifname: "eth0" }], 6],
      ["an entry without ifname", [{ containerID: "c1" }], 7],
      ["an entry with an empty containerID", [{ containerID: "", ifname: "eth0" }], 7],
    ] as const) {
      it(`rejects ${what} with code ${code}`, () => {
        const err = cniErrorOf(() =>
          parseGcValidAttachments({ ...BASE, "cni.dev/valid-attachments": value }),
        );
        expect(err.code).to.equal(code);
        expect(err.message).to.include("cni.dev/valid-attachments");
      });
    }
  });

  describe("staleAttachments and isValidAttachment", () => {
    const cached = [
      { containerId: "c1", ifName: "eth0", networkName: "pods" },
      { containerId: "c2", ifName: "eth0", networkName: "pods" },
      { containerId: "c1", ifName: "net1", networkName: "pods" },
      { containerId: "c9", ifName: "eth0", networkName: "other" },
    ];

    it("lists this network's attachments that the valid set does not name", () => {
      expect(staleAttachments(cached, "pods", [A])).to.deep.equal([cached[1], cached[2]]);
    });

    it("with nothing valid, every attachment of this network is stale", () => {
      const none = parseGcValidAttachments({ ...BASE, "cni.dev/valid-attachments": null });
      expect(staleAttachments(cached, "pods", none)).to.have.length(3);
    });

    it("compares containerID and ifname exactly", () => {
      expect(isValidAttachment([A], "c1", "eth0")).to.equal(true);
      expect(isValidAttachment([A], "C1", "eth0")).to.equal(false);
      expect(isValidAttachment([A], "c1", "eth1")).to.equal(false);
    });
  });

  describe("buildGcStdin", () => {
    const list = parseNetworkConfigList(
      JSON.stringify({
        cniVersion: "1.1.0",
        name: "pods",
        plugins: [{ type: "host-local-gc", dataDir: "/x" }],
      }),
    );

    it("is the plugin's object with name, cniVersion and the valid set under both keys", () => {
      expect(JSON.parse(buildGcStdin(list, 0, [A]))).to.deep.equal({
        type: "host-local-gc",
        dataDir: "/x",
        name: "pods",
        cniVersion: "1.1.0",
        "cni.dev/valid-attachments": [A],
        "cni.dev/attachments": [A],
      });
    });

    it("writes an empty set as a list, which reads back as nothing valid", () => {
      const stdin = JSON.parse(buildGcStdin(list, 0, []));
      expect(stdin["cni.dev/valid-attachments"]).to.deep.equal([]);
      expect(parseGcValidAttachments(stdin)).to.deep.equal([]);
    });
  });
});
