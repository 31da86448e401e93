/**
 * Reads the runtime's stdin, bounded. A network configuration is a few kilobytes;
 * anything past the cap is not one, and reading (then parsing) megabytes of it
 * would only delay the answer, so the read stops at the cap with code 6.
 */
import { CniError, ErrorCode } from "../cni/errors.js";

/** 1 MiB: far above any real configuration (prevResult included). */
export const MAX_STDIN_BYTES = 1024 * 1024;

export function readStdin(
  stream: NodeJS.ReadableStream = process.stdin,
  maxBytes = MAX_STDIN_BYTES,
): Promise<Uint8Array> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
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
        done(
          new CniError(
            ErrorCode.DecodingFailure,
            `error reading network config from stdin: more than ${maxBytes} bytes, which is no CNI configuration`,
          ),
        );
        return;
      }
      chunks.push(b);
    };
    const onEnd = (): void => done();
    const onError = (err: Error): void =>
      done(new CniError(ErrorCode.IOFailure, `error reading from stdin: ${err.message}`));
    stream.on("data", onData);
    stream.on("end", onEnd);
    stream.on("error", onError);
  });
}
