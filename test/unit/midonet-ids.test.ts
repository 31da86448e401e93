import { expect } from "chai";
import {
  idForKey,
  isUuid,
  MIDONET_TENANT_SPACE,
  macForKey,
  subId,
  TRANSLATION_VERSION,
  tenantSpace,
  uuid5,
} from "../../src/midonet/ids.js";

const TENANT = "midonetkube";
const GLOBAL = "23b6f94b-2fb5-55b0-9614-3cbb6d6dc17f";

describe("midonet/ids", () => {
  describe("uuid5", () => {
    it("gives RFC 4122's DNS-namespace vector for python.org", () => {
      expect(uuid5("6ba7b810-9dad-11d1-80b4-00c04fd430c8", "python.org")).to.equal(
        "886313e1-3b8a-5372-9b90-0c9aee199e5d",
      );
    });

    it("reads the namespace in any case and writes lowercase", () => {
      const upper = uuid5("6BA7B810-9DAD-11D1-80B4-00C04FD430C8", "python.org");
      expect(upper).to.equal("886313e1-3b8a-5372-9b90-0c9aee199e5d");
    });

    it("sets version 5 and the RFC 4122 variant", () => {
      for (const name of ["", "a", "é/ü", "x".repeat(1000)]) {
        const id = uuid5(MIDONET_TENANT_SPACE, name);
        expect(isUuid(id)).to.equal(true);
        expect(id[14]).to.equal("5");
        expect("89ab").to.include(id[19] as string);
      }
    });

    it("throws on a namespace that is not a UUID", () => {
      expect(() => uuid5("not-a-uuid", "x")).to.throw(TypeError, /not a UUID/);
    });
  });

  describe("the midonet-kubernetes scheme", () => {
    const global = idForKey(TENANT, "midonet-global", "chain");
    const vectors: [string, string][] = [
      ['IDForKey("midonet-global", "chain")', GLOBAL],
      ['SubID(global, "Cluster Router")', "21607839-c6b4-5b98-8aa1-89a1aab61bca"],
      ['SubID(global, "Services Chain")', "8ba7d5a7-f323-53d4-8522-ddb2c7158ef0"],
      ['SubID(global, "Default Tunnel Zone")', "51329ede-9b0f-5923-98ee-bf4ef08af54f"],
      ['IDForKey("Node", "node1")', "d1c5f0f1-d501-5330-b521-b2daaf3d238b"],
    ];
    const computed: Record<string, string> = {
      'IDForKey("midonet-global", "chain")': global,
      'SubID(global, "Cluster Router")': subId(global, "Cluster Router"),
      'SubID(global, "Services Chain")': subId(global, "Services Chain"),
      'SubID(global, "Default Tunnel Zone")': subId(global, "Default Tunnel Zone"),
      'IDForKey("Node", "node1")': idForKey(TENANT, "Node", "node1"),
    };
    for (const [label, want] of vectors) {
      it(`${label} = ${want}`, () => {
        expect(computed[label]).to.equal(want);
      });
    }

    it("tenantSpace is uuid5(the MidoNet tenant space, '<version>/<tenant>')", () => {
      expect(TRANSLATION_VERSION).to.equal("4");
      expect(tenantSpace(TENANT)).to.equal(uuid5(MIDONET_TENANT_SPACE, `4/${TENANT}`));
    });

    it("idForKey is uuid5(tenantSpace, '<version>/<kind>/<key>')", () => {
      expect(idForKey(TENANT, "Pod", "default/web-0")).to.equal(
        uuid5(tenantSpace(TENANT), "4/Pod/default/web-0"),
      );
    });

    it("another tenant or version gives other ids", () => {
      const base = idForKey(TENANT, "Node", "node1");
      expect(idForKey("other", "Node", "node1")).to.not.equal(base);
      expect(idForKey(TENANT, "Node", "node1", "3")).to.not.equal(base);
      expect(tenantSpace(TENANT, "3")).to.equal(uuid5(MIDONET_TENANT_SPACE, `3/${TENANT}`));
    });
  });

  describe("macForKey", () => {
    it('"hey" → ac:ca:ba:fa:69:0b', () => {
      expect(macForKey("hey")).to.equal("ac:ca:ba:fa:69:0b");
    });

    it("always carries Midokura's OUI and six lowercase octets", () => {
      for (const key of ["", "node1", "a-very-long-node-name.example.com"]) {
        expect(macForKey(key)).to.match(/^ac:ca:ba(:[0-9a-f]{2}){3}$/);
      }
    });
  });
});
