/** Where the wire contract lives and how it is loaded (see the header of the .proto). */
import { fileURLToPath } from "node:url";

/** proto/cni_driver.proto, found from here both in the source tree and under dist/. */
export function protoPath(): string {
  const here = fileURLToPath(new URL(".", import.meta.url));
  const root = here.includes("/dist/")
    ? `${here.slice(0, here.lastIndexOf("/dist/"))}/`
    : `${here}../../`;
  return `${root}proto/cni_driver.proto`;
}

export const PROTO_LOADER_OPTIONS = {
  keepCase: true,
  longs: Number,
  enums: String,
  defaults: true,
  oneofs: false,
} as const;
