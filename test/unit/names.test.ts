import { expect } from "chai";
import { MAX_CONTAINER_ID_BYTES, MAX_NETWORK_NAME_BYTES } from "../../src/cni/limits.js";
import {
  validateContainerId,
  validateInterfaceName,
  validateNetworkName,
  validateRequestedNetworkName,
} from "../../src/cni/names.js";
import { cniErrorOf } from "../support/cni-error.js";

/** Runs fn, expecting a CniError; returns it. */

describe("cni/names", () => {
  describe("validateContainerId", () => {
    for (const id of [
      "abc-1.2_x",
      "a",
      "0",
      "Z9",
      "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
      "cni-3c1c9d32-7a8b-4b0c-9d6e-0f1e2d3c4b5a",
    ]) {
      it(`accepts ${JSON.stringify(id)}`, () => {
        expect(validateContainerId(id)).to.equal(id);
      });
    }

    it(`accepts ${MAX_CONTAINER_ID_BYTES} bytes, and refuses one more with code 4, quoting 64 of them`, () => {
      const id = "a".repeat(MAX_CONTAINER_ID_BYTES);
      expect(validateContainerId(id)).to.equal(id);
      const err = cniErrorOf(() => validateContainerId(`${id}b`));
      expect(err.code).to.equal(4);
      expect(err.message).to.equal(
        `containerID is too long: "${"a".repeat(64)}"… (129 bytes); at most 128 bytes`,
      );
    });

    it("quotes a 3 MB id cut short", () => {
      const err = cniErrorOf(() => validateContainerId("x".repeat(3_000_000)));
      expect(err.code).to.equal(4);
      expect(err.message).to.have.length.below(200);
      expect(err.details).to.equal("");
    });

    for (const id of ["-abc", "_abc", ".abc", "a b", "a/b", "a:b", "abc\n", "é", "ab;c", "a\0b"]) {
      it(`rejects ${JSON.stringify(id)} with code 4 naming it`, () => {
        const err = cniErrorOf(() => validateContainerId(id));
        expect(err.code).to.equal(4);
        expect(err.message).to.match(/^invalid characters in containerID/);
        expect(err.message).to.include(JSON.stringify(id));
        expect(err.details).to.equal(id);
      });
    }

    for (const id of ["", undefined]) {
      it(`rejects ${String(JSON.stringify(id))} as missing with code 3`, () => {
        const err = cniErrorOf(() => validateContainerId(id));
        expect(err.code).to.equal(3);
        expect(err.message).to.equal("missing containerID");
      });
    }
  });

  describe("validateInterfaceName", () => {
    for (const [name, why] of [
      ["eth0", "the usual name"],
      ["a", "one byte"],
      ["abcdefghijklmno", "15 bytes"],
      ["net1.100", "a dot inside"],
      ["veth_a-b", "underscore and dash"],
      ["...", "three dots"],
      ["ééééééé", "7 two-byte characters (14 bytes)"],
      ["abcdefghijklmé", "13 + 2 = 15 bytes"],
    ] as const) {
      it(`accepts ${JSON.stringify(name)} (${why})`, () => {
        expect(validateInterfaceName(name)).to.equal(name);
      });
    }

    for (const [name, rule] of [
      ["", /^interface name is empty$/],
      ["abcdefghijklmnop", /^interface name is too long/],
      ["ab€€€€€", /^interface name is too long/], // 2 + 5×3 = 17 bytes, 7 characters
      ["abcdefghijklmné", /^interface name is too long/], // 14 + 2 = 16 bytes
      [".", /^interface name is \. or \.\./],
      ["..", /^interface name is \. or \.\./],
      ["a/b", /contains \/ or : or whitespace/],
      ["a:b", /contains \/ or : or whitespace/],
      ["a b", /contains \/ or : or whitespace/],
      ["a\tb", /contains \/ or : or whitespace/],
      ["eth0\n", /contains \/ or : or whitespace/],
      ["a\u00a0b", /contains \/ or : or whitespace/], // Go's unicode.IsSpace counts NBSP
      ["a\u0085b", /contains \/ or : or whitespace/], // and NEL
      ["eth\0", /^interface name contains a NUL byte: "eth\\u0000"$/],
      ["\0", /^interface name contains a NUL byte/],
    ] as const) {
      it(`rejects ${JSON.stringify(name)} with code 4: ${rule.source}`, () => {
        const err = cniErrorOf(() => validateInterfaceName(name));
        expect(err.code).to.equal(4);
        expect(err.message).to.match(rule);
        if (name !== "") expect(err.message).to.include(JSON.stringify(name));
      });
    }

    it("quotes a 1 MB name cut short", () => {
      const err = cniErrorOf(() => validateInterfaceName("i".repeat(1 << 20)));
      expect(err.message).to.equal(
        `interface name is too long: "${"i".repeat(64)}"… (1048576 bytes)`,
      );
    });

    it("says how long a too-long name is, in bytes", () => {
      const err = cniErrorOf(() => validateInterfaceName("ab€€€€€"));
      expect(err.details).to.include("17 bytes");
    });

    it("accepts U+FEFF, which Go does not count as whitespace", () => {
      expect(validateInterfaceName("a\ufeffb")).to.equal("a\ufeffb");
    });
  });

  describe("validateNetworkName", () => {
    for (const name of ["cni-driver", "k8s-pod-network", "net_1.v2", "9"]) {
      it(`accepts ${JSON.stringify(name)}`, () => {
        expect(validateNetworkName(name)).to.equal(name);
      });
    }

    for (const [name, msg] of [
      [undefined, /^missing network name$/],
      [null, /^missing network name$/],
      ["", /^missing network name$/],
      [42, /must be a string, not number/],
      [["a"], /must be a string, not array/],
      ["-net", /^invalid characters found in network name: "-net"$/],
      ["my net", /^invalid characters found in network name: "my net"$/],
      ["a/b", /^invalid characters found in network name: "a\/b"$/],
      ["a\0b", /^invalid characters found in network name: "a\\u0000b"$/],
      [
        "n".repeat(MAX_NETWORK_NAME_BYTES + 1),
        /^network name is too long: "n{64}"… \(101 bytes\); at most 100 bytes$/,
      ],
    ] as const) {
      it(`rejects ${JSON.stringify(name)} with code 7`, () => {
        const err = cniErrorOf(() => validateNetworkName(name));
        expect(err.code).to.equal(7);
        expect(err.message).to.match(msg);
      });
    }

    it(`accepts a name of ${MAX_NETWORK_NAME_BYTES} bytes`, () => {
      const name = "n".repeat(MAX_NETWORK_NAME_BYTES);
      expect(validateNetworkName(name)).to.equal(name);
    });
  });

  describe("validateRequestedNetworkName: a request's network field", () => {
    it("accepts what a config's name may be", () => {
      expect(validateRequestedNetworkName("k8s-pod-network")).to.equal("k8s-pod-network");
    });

    for (const [name, msg] of [
      ["", /^missing network name$/],
      ["pod\0net", /^invalid characters found in network name: "pod\\u0000net"$/],
      ["my net", /^invalid characters found in network name/],
      [
        "n".repeat(1 << 20),
        /^network name is too long: "n{64}"… \(1048576 bytes\); at most 100 bytes$/,
      ],
    ] as const) {
      it(`rejects ${JSON.stringify(name.slice(0, 20))} with code 4, as any bad field of a request`, () => {
        const err = cniErrorOf(() => validateRequestedNetworkName(name));
        expect(err.code).to.equal(4);
        expect(err.message).to.match(msg);
      });
    }
  });
});
