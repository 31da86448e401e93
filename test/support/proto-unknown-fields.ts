/**
 * Messages of the wire contract as a later version of it might send them:
 * encoded by the proto (protobufjs), then carrying fields this version does not
 * have, encoded by hand, one of each wire type. Proto3 decoders skip such
 * fields (protobufjs, protobuf-c, grpc-go), which is what lets the contract
 * grow by adding (proto/cni_driver.proto's header).
 */
import { createRequire } from "node:module";
import type * as Protobuf from "protobufjs";
import { PROTO_LOADER_OPTIONS, protoPath } from "../../src/wire/proto-path.js";

// protobufjs is CommonJS and builds its exports at run time: Node's ESM import cannot name them.
const protobuf = createRequire(import.meta.url)("protobufjs") as typeof Protobuf;

/** Field numbers no version of the contract uses: far above any it has. */
const UNKNOWN_FIRST_FIELD = 9000;

function varint(n: number): Buffer {
  const out: number[] = [];
  let v = n;
  while (v > 0x7f) {
    out.push((v & 0x7f) | 0x80);
    v = Math.floor(v / 128);
  }
  out.push(v);
  return Buffer.from(out);
}

const tag = (field: number, wireType: number) => varint(field * 8 + wireType);

/** A length-delimited field (wire type 2). */
export function lengthDelimited(field: number, bytes: Uint8Array): Buffer {
  return Buffer.concat([tag(field, 2), varint(bytes.length), bytes]);
}

/** Unknown fields of every wire type a proto3 peer may send: varint, 64-bit, bytes, 32-bit. */
export function unknownFields(): Buffer {
  const f = UNKNOWN_FIRST_FIELD;
  return Buffer.concat([
    tag(f, 0),
    varint(300),
    tag(f + 1, 1),
    Buffer.alloc(8, 0xab),
    lengthDelimited(f + 2, Buffer.from("a field of a later version")),
    tag(f + 5, 5),
    Buffer.alloc(4, 0xcd),
    // A nested message of a later version: to this one, bytes it skips.
    lengthDelimited(
      f + 3,
      Buffer.concat([tag(1, 0), varint(7), lengthDelimited(2, Buffer.from("x"))]),
    ),
  ]);
}

/** The contract's message types by name ("PodRequest"), for encoding and decoding. */
export function wireType(name: string): Protobuf.Type {
  const root = new protobuf.Root().loadSync(protoPath(), { keepCase: true });
  return root.lookupType(`cnidriver.v1.${name}`);
}

/** `message` encoded as `type`, followed by unknown fields. */
export function encodeWithUnknownFields(
  type: Protobuf.Type,
  message: Record<string, unknown>,
): Buffer {
  return Buffer.concat([type.encode(type.fromObject(message)).finish(), unknownFields()]);
}

/** A message decoded as the driver and its clients see it (proto-loader's options). */
export function decodeWire(type: Protobuf.Type, bytes: Uint8Array): Record<string, unknown> {
  return type.toObject(type.decode(bytes), PROTO_LOADER_OPTIONS);
}
