/**
 * The previous release, built from the commit CHANGELOG.md names for it, for the
 * tests that run two versions side by side (upgrade, rollback, an old shim
 * against a new driver and the reverse).
 *
 * The release is checked out with `git worktree add --detach` into a directory
 * of its own and built there as scripts/setup.sh builds a checkout: `npm ci`,
 * its native addons (its scripts/build-native.sh), its shim (its
 * scripts/build-shim.sh) and its dist/ (`npm run build`). The worktree is then
 * unregistered (its `.git` file removed, `git worktree prune`) and the build
 * renamed into place, so the main checkout's files and branches are never
 * touched and `git worktree list` shows nothing of it.
 *
 * The builds are kept between runs under CNI_DRIVER_RELEASE_CACHE (default
 * /var/tmp/cni-driver-releases), one directory per commit and Node ABI (the
 * addons are built for one). A build counts once its marker file is there
 * (written last, just before the build is renamed into place) and every output
 * with it; anything else in its place is an interrupted build and is redone. An
 * exclusive flock on the cache's lock file keeps two test processes from
 * building at once: the second waits, then finds the first's build.
 */
import {
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { basename, dirname, join } from "node:path";
import { execa } from "execa";
import { withFileLock } from "../../src/driver/builtin/host-local/file-lock.js";
import { changelogReleases } from "./changelog.js";
import { REPO_ROOT } from "./driver-harness.js";
import { fetchEnv } from "./runtimes.js";

/** A release as CHANGELOG.md names it: its version and the commit it was cut from. */
export interface ReleaseEntry {
  version: string;
  commit: string;
}

/** A release built and ready to run. */
export interface ReleaseBuild extends ReleaseEntry {
  /** The package root of the build: DriverHarness's `driverRoot`, runDriverCli's `packageRoot`. */
  root: string;
  /** Its `cni-driver` entry point (dist/). */
  cli: string;
  /** Its static shim. */
  shim: string;
}

/** The addons every release so far builds (build/Release); the driver falls back without them. */
const REQUIRED_ADDONS = ["cni_driver_netlink", "cni_driver_spawn", "cni_driver_flock"];
const MARKER = ".cni-driver-release.json";

/**
 * The release before this checkout's code, and the commit it names: the newest
 * release of the changelog, below its "Unreleased" section. A changelog with no
 * "Unreleased" on top is that of a checkout cut as its newest release: then the
 * one before. Throws naming what is missing.
 */
export function previousReleaseEntry(changelog: string): ReleaseEntry {
  const { unreleased, releases } = changelogReleases(changelog);
  const previous = releases[unreleased ? 0 : 1];
  if (!previous) throw new Error("CHANGELOG.md names no release before this checkout's");
  if (!previous.commit || !/^[0-9a-f]{40}$/.test(previous.commit))
    throw new Error(`CHANGELOG.md: release ${previous.version} names no whole "Commit:" id`);
  return { version: previous.version, commit: previous.commit };
}

/** The cache's root: created 0700 and required to be this user's own (root runs what it holds). */
function cacheRoot(): string {
  const dir = process.env.CNI_DRIVER_RELEASE_CACHE || "/var/tmp/cni-driver-releases";
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const st = lstatSync(dir);
  const uid = process.getuid?.() ?? st.uid;
  if (!st.isDirectory() || st.uid !== uid || (st.mode & 0o022) !== 0) {
    throw new Error(
      `${dir} must be a directory owned by uid ${uid} and writable by no one else (it holds builds the tests run)`,
    );
  }
  return dir;
}

function buildOf(entry: ReleaseEntry, root: string): ReleaseBuild {
  return {
    ...entry,
    root,
    cli: join(root, "dist/src/driver/cli.js"),
    shim: join(root, "dist/bin/cni-driver-shim"),
  };
}

/** The build at `root` is whole: its marker (written last) names the commit, and every output is there. */
function complete(build: ReleaseBuild): boolean {
  try {
    const marker = JSON.parse(readFileSync(join(build.root, MARKER), "utf8")) as {
      commit?: string;
    };
    if (marker.commit !== build.commit) return false;
  } catch {
    return false;
  }
  return [
    build.cli,
    build.shim,
    ...REQUIRED_ADDONS.map((a) => join(build.root, `build/Release/${a}.node`)),
  ].every((p) => existsSync(p));
}

/** Runs one build step in the worktree; fails with its output. */
async function step(cwd: string, what: string, command: string, args: string[]): Promise<void> {
  const env = fetchEnv();
  // This Node (and its npm) first on PATH, and its own headers and node-gyp when it
  // has them beside it: the release's addons are built for the Node that loads them,
  // whatever an outer `npm run` exported (scripts/use-node24.sh does the same).
  for (const k of Object.keys(env)) {
    if (/^npm_config_(nodedir|node_gyp|prefix|global_prefix|npm_version|user_agent)$/.test(k))
      delete env[k];
  }
  for (const k of ["npm_node_execpath", "npm_execpath", "NODE"]) delete env[k];
  const prefix = dirname(dirname(process.execPath));
  env.PATH = `${dirname(process.execPath)}:${env.PATH ?? "/usr/sbin:/usr/bin:/sbin:/bin"}`;
  if (existsSync(join(prefix, "include/node/node_api.h"))) env.npm_config_nodedir = prefix;
  const nodeGyp = join(prefix, "lib/node_modules/npm/node_modules/node-gyp/bin/node-gyp.js");
  if (existsSync(nodeGyp)) env.npm_config_node_gyp = nodeGyp;
  // An addon path set for this checkout must not stand in for the release's own.
  for (const k of Object.keys(env)) if (/^CNI_DRIVER_.*_ADDON$/.test(k)) delete env[k];
  const r = await execa(command, args, {
    cwd,
    env,
    extendEnv: false,
    stdin: "ignore",
    all: true,
    reject: false,
    timeout: 15 * 60_000,
    killSignal: "SIGKILL",
  });
  if (r.exitCode !== 0) {
    throw new Error(
      `previous release: ${what} in ${cwd} failed (${r.timedOut ? "timed out" : `exit ${r.exitCode}`}):\n${String(r.all).slice(-4000)}`,
    );
  }
}

async function git(args: string[]): Promise<void> {
  await step(REPO_ROOT, `git ${args[0]}`, "git", ["-C", REPO_ROOT, ...args]);
}

/** Checks the commit out in a temporary worktree, builds it, and renames the build to `dest`. */
async function build(entry: ReleaseEntry, dest: string): Promise<void> {
  // What a build killed part-way left (the lock is ours: nobody else is building).
  for (const name of readdirSync(dirname(dest))) {
    if (name.startsWith(`${basename(dest)}.building-`))
      rmSync(join(dirname(dest), name), { recursive: true, force: true });
  }
  await git(["worktree", "prune"]);
  const work = `${dest}.building-${process.pid}`;
  await git(["cat-file", "-e", `${entry.commit}^{commit}`]).catch((err: Error) => {
    throw new Error(
      `the commit of release ${entry.version}, ${entry.commit}, is not in this clone's history (a shallow clone?): ${err.message}`,
    );
  });
  await git(["worktree", "add", "--detach", work, entry.commit]);
  try {
    await step(work, "npm ci", "npm", [
      "ci",
      "--prefer-offline",
      "--no-audit",
      "--no-fund",
      "--loglevel=error",
    ]);
    await step(work, "scripts/build-native.sh", "bash", ["scripts/build-native.sh"]);
    await step(work, "scripts/build-shim.sh", "bash", ["scripts/build-shim.sh"]);
    await step(work, "npm run build", "npm", ["run", "--silent", "build"]);
    // From here on a plain directory: the registration goes, the build stays.
    rmSync(join(work, ".git"), { force: true });
    writeFileSync(
      join(work, MARKER),
      `${JSON.stringify({ ...entry, node: process.version, builtAt: new Date().toISOString() })}\n`,
    );
    rmSync(dest, { recursive: true, force: true });
    renameSync(work, dest);
  } finally {
    rmSync(work, { recursive: true, force: true });
    await git(["worktree", "prune"]);
  }
}

let built: Promise<ReleaseBuild> | undefined;

/**
 * The previous release (the newest released section of CHANGELOG.md), built once
 * and cached; a build takes from seconds (npm's cache warm) to minutes. Needs the repository's
 * history (requirements.ts: requireGitHistory).
 */
export function previousRelease(): Promise<ReleaseBuild> {
  built ??= (async () => {
    const entry = previousReleaseEntry(readFileSync(join(REPO_ROOT, "CHANGELOG.md"), "utf8"));
    const root = cacheRoot();
    const release = buildOf(entry, join(root, `${entry.commit}-abi${process.versions.modules}`));
    if (complete(release)) return release;
    return withFileLock(join(root, "lock"), 30 * 60_000, async () => {
      if (!complete(release)) await build(entry, release.root);
      if (!complete(release))
        throw new Error(`the build of ${entry.version} in ${release.root} is incomplete`);
      return release;
    });
  })();
  built.catch(() => {
    built = undefined;
  });
  return built;
}
