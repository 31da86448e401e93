/**
 * The project's image for the suites that run it: built by scripts/build-image.sh
 * (once per machine and set of inputs; a no-op when they are unchanged) into the
 * machine's own container storage, which the suites' private podman stores read
 * as an additional image store.
 */
import { REPO_ROOT } from "./driver-harness.js";
import { fetchEnv, mustSucceed, runCommand } from "./runtimes.js";

/** Where root's podman keeps its images (storage.conf's default graphroot). */
export const HOST_IMAGE_STORE = "/var/lib/containers/storage";

/**
 * The storage driver of root's podman: a private store that reads the host's
 * images as an additional store must use the same one.
 */
export function hostStorageDriver(): "overlay" | "vfs" {
  const r = runCommand("podman", ["info", "--format", "{{.Store.GraphDriverName}}"]);
  return mustSucceed("podman info", r).trim() === "vfs" ? "vfs" : "overlay";
}

let built: { image: string; sizeMb: number } | undefined;

/**
 * `scripts/build-image.sh`: the image's full name and size. The first build on a
 * machine debootstraps Debian and compiles everything (minutes); later ones reuse
 * the bases and, with unchanged inputs, the image itself.
 */
export function ensureImage(timeoutMs = 40 * 60_000): { image: string; sizeMb: number } {
  if (built) return built;
  const out = mustSucceed(
    "scripts/build-image.sh",
    runCommand("bash", ["scripts/build-image.sh"], { cwd: REPO_ROOT, timeoutMs, env: fetchEnv() }),
  );
  const m = /^(\S+) (\d+) MB$/m.exec(out.trim());
  if (!m) throw new Error(`scripts/build-image.sh printed no "IMAGE SIZE MB": ${out}`);
  built = { image: `localhost/${m[1]}`, sizeMb: Number(m[2]) };
  return built;
}
