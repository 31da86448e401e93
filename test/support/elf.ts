/**
 * What an ELF executable needs of the host to start: its interpreter (the
 * dynamic loader named by PT_INTERP) and the shared libraries its dynamic
 * section lists (DT_NEEDED). A statically linked executable has neither, so it
 * runs on any Linux host, whatever its libc. Read from the file itself, so no
 * binutils are needed; 64-bit little-endian only (x86-64, arm64).
 */
import { readFileSync } from "node:fs";

const PT_LOAD = 1;
const PT_DYNAMIC = 2;
const PT_INTERP = 3;
const DT_NULL = 0n;
const DT_NEEDED = 1n;
const DT_STRTAB = 5n;

export interface ElfLinkage {
  /** PT_INTERP's path ("/lib64/ld-linux-x86-64.so.2"), undefined when there is none. */
  interpreter: string | undefined;
  /** The DT_NEEDED libraries, in order; [] without a dynamic section. */
  needed: string[];
}

interface Segment {
  type: number;
  offset: number;
  vaddr: bigint;
  filesz: number;
}

function cString(b: Buffer, at: number): string {
  const end = b.indexOf(0, at);
  return b.toString("latin1", at, end < 0 ? b.length : end);
}

/** The linkage of the ELF file at `path`; throws when it is not a 64-bit little-endian ELF. */
export function elfLinkage(path: string): ElfLinkage {
  const b = readFileSync(path);
  if (b.length < 64 || b.readUInt32BE(0) !== 0x7f454c46) throw new Error(`${path}: not ELF`);
  if (b[4] !== 2 || b[5] !== 1) throw new Error(`${path}: not a 64-bit little-endian ELF`);
  const phoff = Number(b.readBigUInt64LE(0x20));
  const phentsize = b.readUInt16LE(0x36);
  const phnum = b.readUInt16LE(0x38);
  const segments: Segment[] = [];
  for (let i = 0; i < phnum; i++) {
    const at = phoff + i * phentsize;
    segments.push({
      type: b.readUInt32LE(at),
      offset: Number(b.readBigUInt64LE(at + 8)),
      vaddr: b.readBigUInt64LE(at + 16),
      filesz: Number(b.readBigUInt64LE(at + 32)),
    });
  }

  const interp = segments.find((s) => s.type === PT_INTERP);
  const dynamic = segments.find((s) => s.type === PT_DYNAMIC);
  const needed: string[] = [];
  if (dynamic) {
    const neededAt: bigint[] = [];
    let strtab: bigint | undefined;
    for (let at = dynamic.offset; at + 16 <= dynamic.offset + dynamic.filesz; at += 16) {
      const tag = b.readBigInt64LE(at);
      const value = b.readBigUInt64LE(at + 8);
      if (tag === DT_NULL) break;
      if (tag === DT_NEEDED) neededAt.push(value);
      if (tag === DT_STRTAB) strtab = value;
    }
    // DT_STRTAB is an address: the PT_LOAD segment holding it gives its place in the file.
    const load = segments.find(
      (s) =>
        s.type === PT_LOAD &&
        strtab !== undefined &&
        strtab >= s.vaddr &&
        strtab < s.vaddr + BigInt(s.filesz),
    );
    for (const name of neededAt) {
      needed.push(
        strtab !== undefined && load
          ? cString(b, load.offset + Number(strtab - load.vaddr + name))
          : `(string at ${name})`,
      );
    }
  }
  return {
    interpreter: interp ? cString(b, interp.offset) : undefined,
    needed,
  };
}
