/**
 * The native addons (binding.gyp, built into build/Release by scripts/setup.sh):
 * found the same way for each, so that the driver runs from the source tree
 * (tsx), from dist/ and from the image alike. Each addon is optional: its user
 * falls back to a pure-Node way and logs why.
 */
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export interface NativeAddonSpec {
  /** Relative to the package root, e.g. "build/Release/cni_driver_spawn.node". */
  file: string;
  /** An environment variable that, when set, gives the addon's path instead. */
  envVar: string;
}

/**
 * The env variable's path, else `file` under the package root: found by walking
 * up from this module, which sits at src/common (tsx) or dist/src/common.
 */
export function findNativeAddon(spec: NativeAddonSpec): string | undefined {
  const fromEnv = process.env[spec.envVar];
  if (fromEnv) return fromEnv;
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 8; i++) {
    const candidate = join(dir, spec.file);
    if (existsSync(candidate)) return candidate;
    const up = dirname(dir);
    if (up === dir) break;
    dir = up;
  }
  return undefined;
}

/** Loads the addon, or says in one line why it cannot be used. */
export function loadNativeAddon<T>(
  spec: NativeAddonSpec,
): { addon: T; path: string } | { reason: string } {
  const path = findNativeAddon(spec);
  if (!path) return { reason: `${spec.file} not found (build it with scripts/build-native.sh)` };
  try {
    return { addon: createRequire(import.meta.url)(path) as T, path };
  } catch (err) {
    return { reason: `cannot load ${path}: ${(err as Error).message.split("\n")[0]}` };
  }
}
