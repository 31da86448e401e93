/**
 * scripts/release.sh, run in a clone of this repository: the two commits a
 * release takes, the version set everywhere it is written down, and the
 * CHANGELOG naming the first commit (as test/unit/changelog.test.ts and the
 * upgrade tests read it). It refuses a dirty tree and a version not above the
 * current one, and changes nothing then.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect } from "chai";
import { changelogReleases } from "../support/changelog.js";
import { REPO_ROOT } from "../support/driver-harness.js";
import { requireGitHistory } from "../support/requirements.js";

const GIT_ENV = {
  ...process.env,
  GIT_AUTHOR_NAME: "release test",
  GIT_AUTHOR_EMAIL: "release@test.invalid",
  GIT_COMMITTER_NAME: "release test",
  GIT_COMMITTER_EMAIL: "release@test.invalid",
};

describe("scripts/release.sh: a release in two commits", function () {
  this.timeout(60_000);
  let dir: string;
  let current: string;
  const git = (...args: string[]) =>
    execFileSync("git", ["-C", dir, ...args], { encoding: "utf8", env: GIT_ENV }).trim();
  const release = (version: string) =>
    spawnSync("bash", [join(dir, "scripts/release.sh"), version], {
      encoding: "utf8",
      env: GIT_ENV,
    });
  const next = (v: string) => {
    const [major, minor] = v.split(".").map(Number) as [number, number];
    return `${major}.${minor + 1}.0`;
  };

  before(function () {
    requireGitHistory(this, REPO_ROOT);
    dir = mkdtempSync(join(tmpdir(), "cni-driver-release-"));
    execFileSync("git", ["clone", "-q", REPO_ROOT, dir], { env: GIT_ENV });
    current = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")).version;
    // The script as it is in this checkout, committed or not.
    copyFileSync(join(REPO_ROOT, "scripts/release.sh"), join(dir, "scripts/release.sh"));
    git("add", "scripts/release.sh");
    if (git("status", "--porcelain")) git("commit", "-q", "-m", "The release script");
    // A release needs something unreleased: the clone's head may be a release itself.
    const log = join(dir, "CHANGELOG.md");
    const text = readFileSync(log, "utf8");
    if (!changelogReleases(text).unreleased) {
      const at = text.indexOf("\n## ") + 1;
      writeFileSync(log, `${text.slice(0, at)}## Unreleased\n\n- A change.\n\n${text.slice(at)}`);
      git("commit", "-q", "-am", "A change");
    }
  });

  after(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("refuses a version that is not above the current one, and changes nothing", () => {
    const head = git("rev-parse", "HEAD");
    const r = release(current);
    expect(r.status).to.equal(1);
    expect(r.stderr).to.include(`${current} is not above the current version ${current}`);
    expect(release("not-a-version").stderr).to.include("usage: scripts/release.sh X.Y.Z");
    expect(git("rev-parse", "HEAD")).to.equal(head);
    expect(git("status", "--porcelain")).to.equal("");
  });

  it("refuses a tree with uncommitted changes", () => {
    writeFileSync(join(dir, "README.md"), "changed\n", { flag: "a" });
    try {
      const r = release(next(current));
      expect(r.status).to.equal(1);
      expect(r.stderr).to.include("uncommitted changes");
    } finally {
      git("checkout", "-q", "--", "README.md");
    }
  });

  it("cuts the release: 'Release X' sets the version everywhere, the next commit names it", () => {
    const version = next(current);
    const before = git("rev-parse", "HEAD");
    const r = release(version);
    expect(r.status, r.stderr).to.equal(0);
    const [cut, named] = [git("rev-parse", "HEAD~1"), git("rev-parse", "HEAD")];
    expect(git("rev-parse", "HEAD~2")).to.equal(before);
    expect(git("log", "-1", "--format=%s", cut)).to.equal(`Release ${version}`);
    expect(git("log", "-1", "--format=%s", named)).to.equal(
      `CHANGELOG: ${version} names the commit it was cut from`,
    );
    // The release's own commit carries the version everywhere it is written down.
    const at = (file: string) => git("show", `${cut}:${file}`);
    expect(JSON.parse(at("package.json")).version).to.equal(version);
    const lock = JSON.parse(at("package-lock.json"));
    expect([lock.version, lock.packages[""].version]).to.deep.equal([version, version]);
    for (const file of ["daemonset/daemonset.yaml", "daemonset/midonet-controller.yaml"]) {
      expect(at(file), file).to.include(`cni-driver:${version}`);
      expect(at(file), file).not.to.include(`cni-driver:${current}`);
    }
    for (const file of ["docs/install.md", "docs/image.md"])
      expect(at(file), file).to.include(`cni-driver:${version}`);
    // And the CHANGELOG reads as its test and the upgrade tests read it.
    const { unreleased, releases } = changelogReleases(
      readFileSync(join(dir, "CHANGELOG.md"), "utf8"),
    );
    expect(unreleased).to.equal(false);
    expect(releases[0]).to.deep.include({ version, commit: cut });
    expect(releases[1]?.version).to.equal(current);
    expect(git("status", "--porcelain")).to.equal("");
  });
});
