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

/** An addon loaded, or one line saying why it cannot be used. */
export type LoadedAddon<T> = { addon: T; path: string } | { reason: string };

/** Loads the addon, or says in one line why it cannot be used. */
export function loadNativeAddon<T>(spec: NativeAddonSpec): LoadedAddon<T> {
  const path = findNativeAddon(spec);
  if (!path) return { reason: `${spec.file} not found (build it with scripts/build-native.sh)` };
  try {
    return { addon: createRequire(import.meta.url)(path) as T, path };
  } catch (err) {
    return { reason: `cannot load ${path}: ${(err as Error).message.split("\n")[0]}` };
  }
}

/**
 * The addon looked up at the first call and remembered, so that every caller in
 * a process agrees on one backend (a write and its read-back never mix them).
 * `unusable` may turn down an addon that loaded: it names why (an environment
 * override, the addon's own check), or gives null.
 */
export function addonOnce<T>(
  spec: NativeAddonSpec,
  unusable: (addon: T) => string | null = () => null,
): () => LoadedAddon<T> {
  let loaded: LoadedAddon<T> | undefined;
  return () => {
    if (loaded) return loaded;
    const got = loadNativeAddon<T>(spec);
    const reason = "addon" in got ? unusable(got.addon) : null;
    loaded = reason === null ? got : { reason };
    return loaded;
  };
}

/** The addon itself, or null when it could not be had. */
export function addonOrNull<T>(loaded: LoadedAddon<T>): T | null {
  return "addon" in loaded ? loaded.addon : null;
}
