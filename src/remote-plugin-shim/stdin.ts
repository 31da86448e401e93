/**
 * Reads the runtime's stdin, bounded. A network configuration is a few kilobytes;
 * anything past the cap is not one, and reading (then parsing) megabytes of it
 * would only delay the answer, so the read stops at the cap with code 6.
 *
 * Runtimes hand plugins a blocking pipe, which plain read(2) calls on fd 0 drain
 * without process.stdin (its stream machinery costs every exec a few
 * milliseconds). A stdin that is non-blocking (EAGAIN) is read on through
 * process.stdin from where the synchronous reads stopped.
 */
import { readSync } from "node:fs";
import { CniError, ErrorCode } from "../cni/errors.js";

/** 1 MiB: far above any real configuration (prevResult included). */
export const MAX_STDIN_BYTES = 1024 * 1024;

const CHUNK_BYTES = 64 * 1024;

function tooLarge(maxBytes: number): CniError {
  return new CniError(
    ErrorCode.DecodingFailure,
    `error reading network config from stdin: more than ${maxBytes} bytes, which is no CNI configuration`,
  );
}

function readFailed(err: Error): CniError {
  return new CniError(ErrorCode.IOFailure, `error reading from stdin: ${err.message}`);
}

/** All of fd 0 up to `maxBytes`. */
export async function readStdin(maxBytes = MAX_STDIN_BYTES): Promise<Uint8Array> {
  const chunks: Buffer[] = [];
  let size = 0;
  for (;;) {
    const chunk = Buffer.allocUnsafe(CHUNK_BYTES);
    let n: number;
    try {
      n = readSync(0, chunk, 0, CHUNK_BYTES, null);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === "EAGAIN") return readStream(process.stdin, maxBytes, chunks, size);
      if (code === "EOF") break;
      throw readFailed(err as Error);
    }
    if (n === 0) break;
    size += n;
    if (size > maxBytes) throw tooLarge(maxBytes);
    chunks.push(chunk.subarray(0, n));
  }
  return Buffer.concat(chunks, size);
}

/** The rest of `stream` after what is already in `chunks`, up to `maxBytes` in all. */
function readStream(
  stream: NodeJS.ReadableStream,
  maxBytes = MAX_STDIN_BYTES,
  chunks: Buffer[] = [],
  size = chunks.reduce((n, c) => n + c.length, 0),
): Promise<Uint8Array> {
  return new Promise((resolve, reject) => {
    const done = (err?: CniError): void => {
      stream.removeListener("data", onData);
      stream.removeListener("end", onEnd);
      stream.removeListener("error", onError);
      if (err) {
        // Stop reading at once; the writer gets EPIPE, as with any plugin that exits early.
        (stream as NodeJS.ReadableStream & { destroy?: () => void }).destroy?.();
        reject(err);
      } else resolve(Buffer.concat(chunks, size));
    };
    const onData = (chunk: Buffer | string): void => {
      const b = typeof chunk === "string" ? Buffer.from(chunk) : chunk;
      size += b.length;
      if (size > maxBytes) {
        done(tooLarge(maxBytes));
        return;
      }
      chunks.push(b);
    };
    const onEnd = (): void => done();
    const onError = (err: Error): void => done(readFailed(err));
    stream.on("data", onData);
    stream.on("end", onEnd);
    stream.on("error", onError);
  });
}
