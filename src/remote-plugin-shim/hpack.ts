/**
 * HPACK (RFC 7541), as much as a client of one unary call needs: a full decoder
 * for the server's header blocks (indexed fields, literals with and without
 * indexing, the static and dynamic tables, table size updates, Huffman-coded
 * strings — nghttp2, under grpc-js, uses all of them), and an encoder that writes
 * only literal fields without indexing and without Huffman coding, which every
 * decoder must accept and which leaves the server's dynamic table alone.
 *
 * Names and values are byte strings; they are read as latin1, one character per
 * byte, as Node's own HTTP/2 does, so a value's length is its size in the table.
 */

export type HeaderField = readonly [name: string, value: string];

/** A header block the decoder cannot read: the connection is unusable (COMPRESSION_ERROR). */
export class HpackError extends Error {
  override name = "HpackError";
}

/** RFC 7541 Appendix A: index 1 is the first entry. */
const STATIC_TABLE: readonly HeaderField[] = [
  [":authority", ""],
  [":method", "GET"],
  [":method", "POST"],
  [":path", "/"],
  [":path", "/index.html"],
  [":scheme", "http"],
  [":scheme", "https"],
  [":status", "200"],
  [":status", "204"],
  [":status", "206"],
  [":status", "304"],
  [":status", "400"],
  [":status", "404"],
  [":status", "500"],
  ["accept-charset", ""],
  ["accept-encoding", "gzip, deflate"],
  ["accept-language", ""],
  ["accept-ranges", ""],
  ["accept", ""],
  ["access-control-allow-origin", ""],
  ["age", ""],
  ["allow", ""],
  ["authorization", ""],
  ["cache-control", ""],
  ["content-disposition", ""],
  ["content-encoding", ""],
  ["content-language", ""],
  ["content-length", ""],
  ["content-location", ""],
  ["content-range", ""],
  ["content-type", ""],
  ["cookie", ""],
  ["date", ""],
  ["etag", ""],
  ["expect", ""],
  ["expires", ""],
  ["from", ""],
  ["host", ""],
  ["if-match", ""],
  ["if-modified-since", ""],
  ["if-none-match", ""],
  ["if-range", ""],
  ["if-unmodified-since", ""],
  ["last-modified", ""],
  ["link", ""],
  ["location", ""],
  ["max-forwards", ""],
  ["proxy-authenticate", ""],
  ["proxy-authorization", ""],
  ["range", ""],
  ["referer", ""],
  ["refresh", ""],
  ["retry-after", ""],
  ["server", ""],
  ["set-cookie", ""],
  ["strict-transport-security", ""],
  ["transfer-encoding", ""],
  ["user-agent", ""],
  ["vary", ""],
  ["via", ""],
  ["www-authenticate", ""],
];

/**
 * The length in bits of the Huffman code of each symbol 0–255 and EOS (256), one
 * base-36 digit each (RFC 7541 Appendix B). The code is canonical — codes of one
 * length are consecutive in symbol order, each length following on from the
 * shorter ones — so the lengths alone define it.
 */
export const HUFFMAN_CODE_LENGTHS =
  "dnsssssssoussussssssssusssssssss6aacd68baa8b8666555666666678f6cad677777777777777777777778" +
  "78djde6f56565666577666567655677777fbedskmkkmmmnmnnnnnonoomnonnnnlmnmnnomlkmmnnlnmmolmnnl" +
  "lmlnmnnkmmmnmmnqqkjmnmpqqqrrqopjlqrrqrollqqsrrrkoklmllnmmppooqnqrqqrrrrrsrrrrrqu";

const EOS = 256;

/** The canonical decoding tables: per code length, the first code, how many, where in `symbols`. */
interface HuffmanTables {
  firstCode: number[];
  count: number[];
  offset: number[];
  /** Symbols sorted by (code length, symbol). */
  symbols: number[];
}

let huffman: HuffmanTables | undefined;

/** Built on first use: most header blocks of a call need it, VERSION never does. */
function huffmanTables(): HuffmanTables {
  if (huffman) return huffman;
  const lengths = Array.from(HUFFMAN_CODE_LENGTHS, (c) => Number.parseInt(c, 36));
  const count = new Array<number>(31).fill(0);
  for (const l of lengths) count[l] = (count[l] ?? 0) + 1;
  const symbols = lengths
    .map((l, s) => [l, s] as const)
    .sort((a, b) => a[0] - b[0] || a[1] - b[1])
    .map(([, s]) => s);
  const firstCode = new Array<number>(31).fill(0);
  const offset = new Array<number>(31).fill(0);
  let code = 0;
  let index = 0;
  for (let len = 1; len <= 30; len++) {
    firstCode[len] = code;
    offset[len] = index;
    index += count[len] ?? 0;
    code = (code + (count[len] ?? 0)) * 2;
  }
  huffman = { firstCode, count, offset, symbols };
  return huffman;
}

/** Decodes a Huffman-coded string (RFC 7541 §5.2), checking the padding as the RFC requires. */
export function huffmanDecode(bytes: Uint8Array): string {
  const { firstCode, count, offset, symbols } = huffmanTables();
  let out = "";
  let code = 0;
  let len = 0;
  for (const byte of bytes) {
    for (let bit = 7; bit >= 0; bit--) {
      code = code * 2 + ((byte >> bit) & 1);
      len++;
      const i = code - (firstCode[len] as number);
      if (i >= 0 && i < (count[len] as number)) {
        const symbol = symbols[(offset[len] as number) + i] as number;
        if (symbol === EOS) throw new HpackError("a Huffman-coded string holds EOS");
        out += String.fromCharCode(symbol);
        code = 0;
        len = 0;
      } else if (len >= 30) {
        throw new HpackError("an invalid Huffman code");
      }
    }
  }
  // What is left is padding: fewer than 8 bits, all ones (a prefix of EOS).
  if (len > 7) throw new HpackError("Huffman padding longer than 7 bits");
  if (code !== 2 ** len - 1) throw new HpackError("Huffman padding that is not a prefix of EOS");
  return out;
}

/** Size of an entry in the dynamic table (RFC 7541 §4.1). */
function entrySize(name: string, value: string): number {
  return name.length + value.length + 32;
}

/**
 * The decoding context of one connection: its dynamic table lives from one
 * header block to the next, so every block the server sends must pass through
 * the same decoder, in order.
 */
export class HpackDecoder {
  /** Newest first: dynamic index 62 is entries[0]. */
  private readonly entries: HeaderField[] = [];
  private size = 0;
  private maxSize: number;

  /** `maxTableSize`: our SETTINGS_HEADER_TABLE_SIZE, the most a size update may ask for. */
  constructor(readonly maxTableSize = 4096) {
    this.maxSize = maxTableSize;
  }

  /** The size of the dynamic table now, as RFC 7541 §4.1 counts it. */
  get tableSize(): number {
    return this.size;
  }

  /** The header fields of one complete header block (HEADERS plus its CONTINUATIONs). */
  decode(block: Uint8Array): HeaderField[] {
    const fields: HeaderField[] = [];
    let pos = 0;

    const integer = (prefixBits: number): number => {
      const mask = 2 ** prefixBits - 1;
      let value = (block[pos++] as number) & mask;
      if (value < mask) return value;
      for (let shift = 0; ; shift += 7) {
        if (pos >= block.length) throw new HpackError("a truncated integer");
        const b = block[pos++] as number;
        value += (b & 0x7f) * 2 ** shift;
        if (value > 0xffffffff) throw new HpackError("an integer larger than 32 bits");
        if ((b & 0x80) === 0) return value;
      }
    };
    const string = (): string => {
      if (pos >= block.length) throw new HpackError("a missing string");
      const huffmanCoded = ((block[pos] as number) & 0x80) !== 0;
      const length = integer(7);
      if (pos + length > block.length) throw new HpackError("a truncated string");
      const bytes = block.subarray(pos, pos + length);
      pos += length;
      return huffmanCoded ? huffmanDecode(bytes) : Buffer.from(bytes).toString("latin1");
    };

    while (pos < block.length) {
      const b = block[pos] as number;
      if (b & 0x80) {
        // Indexed header field (§6.1).
        fields.push(this.at(integer(7)));
      } else if (b & 0x40) {
        // Literal with incremental indexing (§6.2.1).
        const index = integer(6);
        const name = index === 0 ? string() : (this.at(index)[0] as string);
        const field: HeaderField = [name, string()];
        fields.push(field);
        this.insert(field);
      } else if (b & 0x20) {
        // Dynamic table size update (§6.3): only before the block's first field.
        if (fields.length > 0) throw new HpackError("a table size update after a header field");
        const size = integer(5);
        if (size > this.maxTableSize) {
          throw new HpackError(`a table size update to ${size}, above ${this.maxTableSize}`);
        }
        this.maxSize = size;
        this.evict(0);
      } else {
        // Literal without indexing (§6.2.2) or never indexed (§6.2.3).
        const index = integer(4);
        const name = index === 0 ? string() : (this.at(index)[0] as string);
        fields.push([name, string()]);
      }
    }
    return fields;
  }

  private at(index: number): HeaderField {
    if (index === 0) throw new HpackError("index 0");
    const field =
      index <= STATIC_TABLE.length
        ? STATIC_TABLE[index - 1]
        : this.entries[index - STATIC_TABLE.length - 1];
    if (!field) throw new HpackError(`index ${index} is in neither table`);
    return field;
  }

  private insert(field: HeaderField): void {
    const size = entrySize(field[0], field[1]);
    // An entry larger than the table empties it and is not added (§4.4).
    this.evict(size);
    if (size <= this.maxSize) {
      this.entries.unshift(field);
      this.size += size;
    }
  }

  /** Evicts the oldest entries until `room` more bytes fit (§4.3, §4.4). */
  private evict(room: number): void {
    while (this.entries.length > 0 && this.size + room > this.maxSize) {
      const [name, value] = this.entries.pop() as HeaderField;
      this.size -= entrySize(name, value);
    }
  }
}

function encodeInteger(out: number[], value: number, prefixBits: number, firstByte: number): void {
  const max = 2 ** prefixBits - 1;
  if (value < max) {
    out.push(firstByte | value);
    return;
  }
  out.push(firstByte | max);
  let rest = value - max;
  while (rest >= 0x80) {
    out.push((rest % 0x80) | 0x80);
    rest = Math.floor(rest / 0x80);
  }
  out.push(rest);
}

function encodeString(out: number[], s: string): void {
  const bytes = Buffer.from(s, "latin1");
  encodeInteger(out, bytes.length, 7, 0);
  for (const b of bytes) out.push(b);
}

/**
 * A header block of literal fields without indexing (RFC 7541 §6.2.2), the name
 * taken from the static table where it is there, nothing Huffman-coded. Names
 * must be lower case already (HTTP/2 requires it).
 */
export function encodeHeaderBlock(headers: readonly HeaderField[]): Buffer {
  const out: number[] = [];
  for (const [name, value] of headers) {
    const index = STATIC_TABLE.findIndex(([n]) => n === name) + 1;
    encodeInteger(out, index, 4, 0x00);
    if (index === 0) encodeString(out, name);
    encodeString(out, value);
  }
  return Buffer.from(out);
}
