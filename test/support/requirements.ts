/**
 * Suites that need root or a system package say so. Outside CI they are skipped
 * with the reason printed; in CI (CI=true), where everything is installed, a
 * missing requirement fails the suite instead of passing silently.
 */
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { findNativeAddon } from "../../src/common/native-addon.js";

function missing(ctx: Mocha.Context, what: string): void {
  const msg = `requirement missing: ${what}`;
  if (process.env.CI === "true")
    throw new Error(`${msg} (CI must provide it: see scripts/setup.sh)`);
  console.warn(`    [skipped: ${msg}]`);
  ctx.skip();
}

export function requireRoot(ctx: Mocha.Context): void {
  if (process.getuid?.() !== 0) missing(ctx, "root (network namespaces, veths and routes need it)");
}

export function requireCommand(ctx: Mocha.Context, command: string, pkg: string): void {
  try {
    execFileSync("sh", ["-c", `command -v ${command}`], { stdio: "ignore" });
  } catch {
    missing(ctx, `the command ${command} (Debian package ${pkg})`);
  }
}

/** The repository's history (a clone, not an exported tree): what a release's commit is found in. */
export function requireGitHistory(ctx: Mocha.Context, root: string): void {
  try {
    execFileSync("git", ["-C", root, "rev-parse", "--git-dir"], { stdio: "ignore" });
  } catch {
    missing(ctx, `the git history of ${root} (a clone of the repository; Debian package git)`);
  }
}

export const REFERENCE_PLUGIN_DIR = "/usr/lib/cni";

export function requireReferencePlugins(ctx: Mocha.Context, ...plugins: string[]): void {
  for (const p of plugins) {
    if (!existsSync(`${REFERENCE_PLUGIN_DIR}/${p}`)) {
      missing(ctx, `${REFERENCE_PLUGIN_DIR}/${p} (Debian package containernetworking-plugins)`);
    }
  }
}

/** A native addon of binding.gyp, built into build/Release (scripts/setup.sh builds them). */
export function requireNativeAddon(ctx: Mocha.Context, name: string): void {
  const file = `build/Release/${name}.node`;
  if (!findNativeAddon({ file, envVar: "CNI_DRIVER_TEST_NO_OVERRIDE" }))
    missing(ctx, `${file} (scripts/build-native.sh)`);
}
