/**
 * A small tmpfs on a fresh directory, for a test that needs a filesystem that
 * fills up or turns read-only: mounted (root only), then unmounted whatever
 * the test did.
 */
import { execFileSync } from "node:child_process";
import { mkdirSync } from "node:fs";

export async function withTmpfs<T>(dir: string, size: string, fn: () => Promise<T>): Promise<T> {
  mkdirSync(dir);
  execFileSync("mount", ["-t", "tmpfs", "-o", `size=${size}`, "tmpfs", dir]);
  try {
    return await fn();
  } finally {
    execFileSync("umount", [dir]);
  }
}
