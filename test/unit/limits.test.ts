import { expect } from "chai";
import {
  echo,
  MAX_CNI_ARGS_BYTES,
  MAX_NETNS_PATH_BYTES,
  MAX_STDIN_CONFIG_BYTES,
  requireAtMostBytes,
  requireStdinConfigSize,
  validateCniArgsText,
  validateNetnsPath,
} from "../../src/cni/limits.js";
import { cutShort, ECHO_BYTES } from "../../src/common/cut-short.js";
import { cniErrorOf } from "../support/cni-error.js";

describe("cni/limits", () => {
  describe("echo and cutShort", () => {
    it("quote a value of at most ECHO_BYTES bytes whole", () => {
      const v = "a".repeat(ECHO_BYTES);
      expect(echo(v)).to.equal(JSON.stringify(v));
      expect(cutShort(v)).to.equal(v);
      expect(echo("a\0b")).to.equal('"a\\u0000b"');
    });

    it("cut a longer one to its first ECHO_BYTES bytes and say how long it was", () => {
      const v = `${"a".repeat(ECHO_BYTES)}b`;
      expect(echo(v)).to.equal(`"${"a".repeat(ECHO_BYTES)}"… (65 bytes)`);
      expect(cutShort(v)).to.equal(`${"a".repeat(ECHO_BYTES)}… (65 bytes)`);
    });

    it("count bytes of UTF-8, and never cut a character in two", () => {
      // 21 × 3 bytes = 63, then a 3-byte character that does not fit.
      const v = "€".repeat(30);
      expect(echo(v)).to.equal(`"${"€".repeat(21)}"… (90 bytes)`);
      // A 4-byte character (a surrogate pair) across the cut.
      const w = `${"a".repeat(62)}😀😀`;
      expect(cutShort(w)).to.equal(`${"a".repeat(62)}… (70 bytes)`);
    });
  });

  describe("requireAtMostBytes", () => {
    it("passes the limit itself, in bytes, and refuses one more with code 4", () => {
      requireAtMostBytes("thing", "é".repeat(5), 10);
      const err = cniErrorOf(() => requireAtMostBytes("thing", `${"é".repeat(5)}x`, 10));
      expect(err.code).to.equal(4);
      expect(err.message).to.equal('thing is too long: "éééééx"; at most 10 bytes');
    });
  });

  describe("validateNetnsPath", () => {
    it(`passes ${MAX_NETNS_PATH_BYTES} bytes`, () => {
      const p = `/${"p".repeat(MAX_NETNS_PATH_BYTES - 1)}`;
      expect(validateNetnsPath(p)).to.equal(p);
    });

    for (const [what, path, msg] of [
      [
        "PATH_MAX bytes",
        `/${"p".repeat(MAX_NETNS_PATH_BYTES)}`,
        /^netns path is too long: "\/p{63}"… \(4096 bytes\); at most 4095 bytes$/,
      ],
      ["a NUL", "/run/netns/a\0b", /^netns path contains a NUL byte: "\/run\/netns\/a\\u0000b"$/],
    ] as const) {
      it(`refuses ${what} with code 4`, () => {
        const err = cniErrorOf(() => validateNetnsPath(path));
        expect(err.code).to.equal(4);
        expect(err.message).to.match(msg);
      });
    }
  });

  describe("validateCniArgsText", () => {
    it(`passes ${MAX_CNI_ARGS_BYTES} bytes and refuses one more, or a NUL, with code 4`, () => {
      const text = `K=${"v".repeat(MAX_CNI_ARGS_BYTES - 2)}`;
      expect(validateCniArgsText(text)).to.equal(text);
      const long = cniErrorOf(() => validateCniArgsText(`${text}v`));
      expect(long.code).to.equal(4);
      expect(long.message).to.match(
        /^CNI_ARGS is too long: "K=v{62}"… \(65537 bytes\); at most 65536 bytes$/,
      );
      const nul = cniErrorOf(() => validateCniArgsText("K=a\0b"));
      expect(nul.code).to.equal(4);
      expect(nul.message).to.equal('CNI_ARGS contains a NUL byte: "K=a\\u0000b"');
    });
  });

  describe("requireStdinConfigSize", () => {
    it("passes 1 MiB and refuses a byte more with code 4", () => {
      requireStdinConfigSize(MAX_STDIN_CONFIG_BYTES);
      const err = cniErrorOf(() => requireStdinConfigSize(MAX_STDIN_CONFIG_BYTES + 1));
      expect(err.code).to.equal(4);
      expect(err.message).to.equal(
        "stdin config is too large: 1048577 bytes; at most 1048576 bytes",
      );
    });
  });
});
