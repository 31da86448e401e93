/**
 * CHANGELOG.md: the releases, newest first, each naming the commit it was cut
 * from, and the version in package.json (which the driver reports) being the
 * newest release's. A later upgrade test builds an earlier release from the
 * commit named here, so each must be in the repository's history.
 */
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { expect } from "chai";
import { driverVersion } from "../../src/driver/lifecycle/daemon.js";
import { changelogReleases, type Release } from "../support/changelog.js";
import { REPO_ROOT } from "../support/driver-harness.js";
import { requireGitHistory } from "../support/requirements.js";

const semver = (v: string) => v.split(".").map(Number) as [number, number, number];
const newer = (a: string, b: string) => {
  const [x, y] = [semver(a), semver(b)];
  for (let i = 0; i < 3; i++) if (x[i] !== y[i]) return (x[i] as number) > (y[i] as number);
  return false;
};

describe("CHANGELOG.md: releases and the commits they were cut from", () => {
  const text = readFileSync(join(REPO_ROOT, "CHANGELOG.md"), "utf8");
  const pkg = JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8")) as {
    version: string;
  };
  const { unreleased, releases: list } = changelogReleases(text);

  it("lists releases newest first, by version and by date, with Unreleased (if any) on top", () => {
    expect(list.length, "releases").to.be.at.least(1);
    for (let i = 1; i < list.length; i++) {
      const [later, earlier] = [list[i - 1] as Release, list[i] as Release];
      expect(
        newer(later.version, earlier.version),
        `${later.version} after ${earlier.version}`,
      ).to.equal(true);
      expect(later.date >= earlier.date, `${later.version}'s date`).to.equal(true);
    }
    expect(unreleased || !text.includes("## Unreleased"), "Unreleased comes first").to.equal(true);
  });

  it("the newest release is package.json's version, the one the driver reports", () => {
    expect((list[0] as Release).version).to.equal(pkg.version);
    expect(driverVersion()).to.equal(pkg.version);
  });

  it("every release names a whole commit id that is in the repository's history", function () {
    for (const r of list) expect(r.commit, `${r.version}'s commit`).to.match(/^[0-9a-f]{40}$/);
    requireGitHistory(this, REPO_ROOT);
    for (const r of list) {
      const kind = execFileSync("git", ["-C", REPO_ROOT, "cat-file", "-t", r.commit as string], {
        encoding: "utf8",
      }).trim();
      expect(kind, `${r.version}: ${r.commit}`).to.equal("commit");
    }
  });
});
