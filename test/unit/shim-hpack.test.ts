/**
 * The shim's HPACK: the decoder against RFC 7541's own examples (Appendix C: the
 * static and dynamic tables, eviction, Huffman coding) and against nghttp2, the
 * encoder behind every grpc-js server (Node's HTTP/2 client encodes request
 * headers with it, over one connection, so later blocks refer to the dynamic
 * table the earlier ones filled); the encoder's literal fields read back by the
 * decoder; and each malformed input refused.
 */
import { mkdtempSync, rmSync } from "node:fs";
import http2 from "node:http2";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect } from "chai";
import {
  encodeHeaderBlock,
  type HeaderField,
  HpackDecoder,
  HpackError,
  HUFFMAN_CODE_LENGTHS,
  huffmanDecode,
} from "../../src/remote-plugin-shim/hpack.js";

const hex = (s: string): Buffer => Buffer.from(s.replace(/\s+/g, ""), "hex");

interface Step {
  block: string;
  fields: HeaderField[];
  tableSize: number;
}

const DATE_21 = "Mon, 21 Oct 2013 20:13:21 GMT";
const DATE_22 = "Mon, 21 Oct 2013 20:13:22 GMT";
const COOKIE = "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1";
const REQUEST_1: HeaderField[] = [
  [":method", "GET"],
  [":scheme", "http"],
  [":path", "/"],
  [":authority", "www.example.com"],
];
const REQUEST_2: HeaderField[] = [...REQUEST_1, ["cache-control", "no-cache"]];
const REQUEST_3: HeaderField[] = [
  [":method", "GET"],
  [":scheme", "https"],
  [":path", "/index.html"],
  [":authority", "www.example.com"],
  ["custom-key", "custom-value"],
];
const RESPONSE_1: HeaderField[] = [
  [":status", "302"],
  ["cache-control", "private"],
  ["date", DATE_21],
  ["location", "https://www.example.com"],
];
const RESPONSE_2: HeaderField[] = [[":status", "307"], ...RESPONSE_1.slice(1)];
const RESPONSE_3: HeaderField[] = [
  [":status", "200"],
  ["cache-control", "private"],
  ["date", DATE_22],
  ["location", "https://www.example.com"],
  ["content-encoding", "gzip"],
  ["set-cookie", COOKIE],
];

/** RFC 7541 Appendix C.3–C.6: each a sequence of blocks through one decoder. */
const SEQUENCES: Array<[string, number, Step[]]> = [
  [
    "C.3 requests without Huffman coding",
    4096,
    [
      { block: "828684410f7777772e6578616d706c652e636f6d", fields: REQUEST_1, tableSize: 57 },
      { block: "828684be58086e6f2d6361636865", fields: REQUEST_2, tableSize: 110 },
      {
        block: "828785bf400a637573746f6d2d6b65790c637573746f6d2d76616c7565",
        fields: REQUEST_3,
        tableSize: 164,
      },
    ],
  ],
  [
    "C.4 requests with Huffman coding",
    4096,
    [
      { block: "828684418cf1e3c2e5f23a6ba0ab90f4ff", fields: REQUEST_1, tableSize: 57 },
      { block: "828684be5886a8eb10649cbf", fields: REQUEST_2, tableSize: 110 },
      {
        block: "828785bf408825a849e95ba97d7f8925a849e95bb8e8b4bf",
        fields: REQUEST_3,
        tableSize: 164,
      },
    ],
  ],
  [
    "C.5 responses without Huffman coding, a 256-byte table (eviction)",
    256,
    [
      {
        block: `4803333032580770726976617465611d4d6f6e2c203231204f637420323031332032303a31333a32312047
          4d546e1768747470733a2f2f7777772e6578616d706c652e636f6d`,
        fields: RESPONSE_1,
        tableSize: 222,
      },
      { block: "4803333037c1c0bf", fields: RESPONSE_2, tableSize: 222 },
      {
        block: `88c1611d4d6f6e2c203231204f637420323031332032303a31333a323220474d54c05a04677a69707738
          666f6f3d4153444a4b48514b425a584f5157454f50495541585157454f49553b206d61782d6167653d33
          3630303b2076657273696f6e3d31`,
        fields: RESPONSE_3,
        tableSize: 215,
      },
    ],
  ],
  [
    "C.6 responses with Huffman coding, a 256-byte table (eviction)",
    256,
    [
      {
        block: `488264025885aec3771a4b6196d07abe941054d444a8200595040b8166e082a62d1bff6e919d29ad1718
          63c78f0b97c8e9ae82ae43d3`,
        fields: RESPONSE_1,
        tableSize: 222,
      },
      { block: "4883640effc1c0bf", fields: RESPONSE_2, tableSize: 222 },
      {
        block: `88c16196d07abe941054d444a8200595040b8166e084a62d1bffc05a839bd9ab77ad94e7821dd7f2e6c7
          b335dfdfcd5b3960d5af27087f3672c1ab270fb5291f9587316065c003ed4ee5b1063d5007`,
        fields: RESPONSE_3,
        tableSize: 215,
      },
    ],
  ],
];

function decodeError(decoder: HpackDecoder, block: Buffer): string {
  try {
    decoder.decode(block);
  } catch (err) {
    if (err instanceof HpackError) return err.message;
    throw err;
  }
  throw new Error("expected an HpackError");
}

function huffmanError(bytes: Buffer): string {
  try {
    huffmanDecode(bytes);
  } catch (err) {
    if (err instanceof HpackError) return err.message;
    throw err;
  }
  throw new Error("expected an HpackError");
}

describe("shim HPACK", () => {
  describe("RFC 7541 Appendix C", () => {
    for (const [what, tableSize, steps] of SEQUENCES) {
      it(what, () => {
        const decoder = new HpackDecoder(tableSize);
        steps.forEach((step, i) => {
          expect(decoder.decode(hex(step.block)), `block ${i + 1}`).to.deep.equal(step.fields);
          expect(decoder.tableSize, `table size after block ${i + 1}`).to.equal(step.tableSize);
        });
      });
    }

    const single: Array<[string, string, HeaderField, number]> = [
      [
        "C.2.1 literal with indexing",
        "400a637573746f6d2d6b65790d637573746f6d2d686561646572",
        ["custom-key", "custom-header"],
        55,
      ],
      [
        "C.2.2 literal without indexing",
        "040c2f73616d706c652f70617468",
        [":path", "/sample/path"],
        0,
      ],
      [
        "C.2.3 literal never indexed",
        "100870617373776f726406736563726574",
        ["password", "secret"],
        0,
      ],
      ["C.2.4 indexed", "82", [":method", "GET"], 0],
    ];
    for (const [what, block, field, size] of single) {
      it(`${what}: the field, and what it leaves in the table`, () => {
        const decoder = new HpackDecoder();
        expect(decoder.decode(hex(block))).to.deep.equal([field]);
        expect(decoder.tableSize).to.equal(size);
      });
    }
  });

  describe("Huffman code", () => {
    it("is a complete prefix code of 257 symbols, 5 to 30 bits, EOS the longest", () => {
      const lengths = Array.from(HUFFMAN_CODE_LENGTHS, (c) => Number.parseInt(c, 36));
      expect(lengths).to.have.length(257);
      expect(Math.min(...lengths)).to.equal(5);
      expect(lengths[256]).to.equal(30);
      // Kraft: a complete prefix code fills the code space exactly.
      expect(lengths.reduce((sum, l) => sum + 2 ** -l, 0)).to.equal(1);
    });

    it("decodes the long codes, up to 30 bits, that the RFC's examples do not use", () => {
      const cases: Array<[string, string]> = [
        ["ffc7", "\x00"], // 13 bits, then 3 bits of padding
        ["ffffea", "\x09"], // 24 bits, no padding
        ["fffe6f", "\x80"], // 20 bits
        ["fffffbbf", "\xff"], // 26 bits
        ["fffffff3", "\x0a"], // 30 bits
        ["ffc7ffff57fff37ffffddf", "\x00\x09\x80\xff"],
      ];
      for (const [bytes, text] of cases) expect(huffmanDecode(hex(bytes)), bytes).to.equal(text);
    });

    const bad: Array<[string, string, RegExp]> = [
      ["padding of 8 bits or more", "f1e3c2e5f23a6ba0ab90f4ffff", /longer than 7 bits/],
      ["padding that is not all ones", "18", /not a prefix of EOS/],
      ["the EOS symbol", "fffffffc", /EOS/],
    ];
    for (const [what, bytes, msg] of bad) {
      it(`refuses ${what}`, () => {
        expect(huffmanError(hex(bytes))).to.match(msg);
      });
    }
  });

  describe("malformed blocks", () => {
    const cases: Array<[string, string, RegExp]> = [
      ["index 0", "80", /index 0/],
      ["an index in neither table", "be", /index 62 is in neither table/],
      ["a literal naming a missing index", "7f00", /neither table/],
      ["a truncated integer", "ff", /truncated integer/],
      ["an integer larger than 32 bits", "ffffffffffff7f", /larger than 32 bits/],
      ["a string past the end of the block", "000a61", /truncated string/],
      ["a missing value", "0001", /truncated string|missing string/],
      ["a table size update above our limit", "3fe21f", /above 4096/],
      ["a table size update after a field", "8220", /after a header field/],
    ];
    for (const [what, block, msg] of cases) {
      it(`refuses ${what}`, () => {
        expect(decodeError(new HpackDecoder(), hex(block))).to.match(msg);
      });
    }

    it("a table size update shrinks the table, evicting the oldest entries", () => {
      const decoder = new HpackDecoder();
      decoder.decode(hex("400a637573746f6d2d6b65790d637573746f6d2d686561646572")); // 55 bytes
      decoder.decode(hex("3f11")); // size update to 48
      expect(decoder.tableSize).to.equal(0);
      expect(decodeError(decoder, hex("be"))).to.match(/neither table/);
    });

    it("an entry larger than the whole table empties it and is not added", () => {
      const decoder = new HpackDecoder(60);
      decoder.decode(hex("400a637573746f6d2d6b65790d637573746f6d2d686561646572")); // 55 bytes
      const big = Buffer.concat([hex("4001"), Buffer.from("x"), hex("1e"), Buffer.alloc(30, "y")]);
      expect(decoder.decode(big)).to.deep.equal([["x", "y".repeat(30)]]);
      expect(decoder.tableSize).to.equal(0);
    });
  });

  describe("encoder", () => {
    it("writes literals without indexing, naming static-table names by index", () => {
      const block = encodeHeaderBlock([
        [":path", "/a"],
        ["te", "trailers"],
      ]);
      expect(block.toString("hex")).to.equal(
        `04022f61 0002${Buffer.from("te").toString("hex")}08${Buffer.from("trailers").toString("hex")}`.replace(
          /\s/g,
          "",
        ),
      );
    });

    it("round-trips through the decoder, long values and every byte value included", () => {
      const fields: HeaderField[] = [
        [":method", "POST"],
        [":path", "/cnidriver.v1.CNIDriver/SetUpPod"],
        ["x-long", "v".repeat(5000)],
        ["x-bytes", Array.from({ length: 256 }, (_, i) => String.fromCharCode(i)).join("")],
      ];
      const decoder = new HpackDecoder();
      expect(decoder.decode(encodeHeaderBlock(fields))).to.deep.equal(fields);
      expect(decoder.tableSize, "literals without indexing leave the table alone").to.equal(0);
    });
  });

  describe("against nghttp2 (Node's HTTP/2 client as the encoder)", function () {
    this.timeout(10_000);
    let dir: string;

    beforeEach(() => {
      dir = mkdtempSync(join(tmpdir(), "cni-driver-hpack-"));
    });
    afterEach(() => rmSync(dir, { recursive: true, force: true }));

    /** The header blocks of `count` requests Node's client sent on one connection, in order. */
    async function captureBlocks(
      send: (session: http2.ClientHttp2Session) => void,
      count: number,
    ): Promise<Buffer[]> {
      const socket = join(dir, "capture.sock");
      let received = Buffer.alloc(0);
      const blocks: Buffer[] = [];
      let done: () => void = () => {};
      const finished = new Promise<void>((r) => {
        done = r;
      });
      const server = net.createServer((conn) => {
        // Our SETTINGS, so the client goes on; then read its frames.
        conn.write(hex("000000040000000000"));
        conn.on("data", (chunk: Buffer) => {
          received = Buffer.concat([received, chunk]);
          let at = received.subarray(0, 24).toString("latin1").startsWith("PRI *") ? 24 : 0;
          const pending: Buffer[] = [];
          blocks.length = 0;
          while (at + 9 <= received.length) {
            const length = received.readUIntBE(at, 3);
            if (at + 9 + length > received.length) break;
            const type = received[at + 3];
            const flags = received[at + 4] ?? 0;
            let payload = received.subarray(at + 9, at + 9 + length);
            if (type === 1) {
              if (flags & 0x8) payload = payload.subarray(1, payload.length - (payload[0] ?? 0));
              if (flags & 0x20) payload = payload.subarray(5);
            }
            if (type === 1 || type === 9) {
              pending.push(payload);
              if (flags & 0x4) blocks.push(Buffer.concat(pending.splice(0)));
            }
            at += 9 + length;
          }
          if (blocks.length >= count) done();
        });
      });
      await new Promise<void>((r) => server.listen(socket, () => r()));
      const session = http2.connect("http://localhost", {
        createConnection: () => net.connect(socket),
      });
      session.on("error", () => {});
      try {
        send(session);
        await finished;
        return [...blocks];
      } finally {
        session.destroy();
        server.close();
      }
    }

    it("decodes each block of a connection, dynamic table and Huffman coding included", async () => {
      // Header values with every byte Node lets through (tab, 0x20–0x7e, 0x80–0xff),
      // repeated across requests so later blocks index what earlier ones added.
      const printable = Array.from({ length: 0x7f - 0x20 }, (_, i) =>
        String.fromCharCode(0x20 + i),
      );
      const high = Array.from({ length: 0x80 }, (_, i) => String.fromCharCode(0x80 + i));
      const values = [`\t${printable.join("")}`, high.join(""), "grpc-message%20100%25%20%C3%A9"];
      const requests = Array.from({ length: 6 }, (_, i) => ({
        ":method": "POST",
        ":path": `/cnidriver.v1.CNIDriver/SetUpPod${i % 2}`,
        "content-type": "application/grpc",
        "x-value": values[i % values.length] as string,
        [`x-n${i}`]: "a".repeat(i * 40),
      }));
      const blocks = await captureBlocks((session) => {
        for (const headers of requests) session.request(headers).on("error", () => {});
      }, requests.length);
      expect(blocks).to.have.length(requests.length);
      const decoder = new HpackDecoder();
      blocks.forEach((block, i) => {
        const fields = decoder.decode(block);
        const got = Object.fromEntries(fields);
        for (const [name, value] of Object.entries(requests[i] ?? {})) {
          expect(got[name], `request ${i}: ${name}`).to.equal(value);
        }
      });
      expect(decoder.tableSize, "nghttp2 indexed some of them").to.be.above(0);
    });
  });
});
