/**
 * Which release the upgrade tests build (test/support/previous-release.ts): the
 * newest one below CHANGELOG.md's "Unreleased", by the commit it names.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { expect } from "chai";
import { REPO_ROOT } from "../support/driver-harness.js";
import { previousReleaseEntry } from "../support/previous-release.js";

const A = "a".repeat(40);
const B = "b".repeat(40);
const section = (version: string, commit?: string) =>
  `## ${version} — 2026-11-29\n\n${commit ? `Commit: ${commit}\n\n` : ""}- a change\n\n`;

describe("the previous release, as CHANGELOG.md names it", () => {
  it("today's changelog: the newest release and its commit", () => {
    const changelog = readFileSync(join(REPO_ROOT, "CHANGELOG.md"), "utf8");
    const entry = previousReleaseEntry(changelog);
    expect(entry.version).to.match(/^\d+\.\d+\.\d+$/);
    expect(entry.commit).to.match(/^[0-9a-f]{40}$/);
  });

  it("below an Unreleased section: the newest release", () => {
    const text = `# Changelog\n\n## Unreleased\n\n- work\n\n${section("0.2.0", B)}${section("0.1.0", A)}`;
    expect(previousReleaseEntry(text)).to.deep.equal({ version: "0.2.0", commit: B });
  });

  it("a checkout cut as the newest release (no Unreleased): the release before it", () => {
    const text = `# Changelog\n\n${section("0.2.0", B)}${section("0.1.0", A)}`;
    expect(previousReleaseEntry(text)).to.deep.equal({ version: "0.1.0", commit: A });
    expect(() => previousReleaseEntry(`# Changelog\n\n${section("0.1.0", A)}`)).to.throw(
      /no release before/,
    );
  });

  it("a release without a whole commit id is an error naming it", () => {
    const text = `## Unreleased\n\n${section("0.1.0")}`;
    expect(() => previousReleaseEntry(text)).to.throw(/0\.1\.0 names no whole "Commit:" id/);
    expect(() => previousReleaseEntry(`## Unreleased\n\n${section("0.1.0", "0c9fa4a")}`)).to.throw(
      /0\.1\.0/,
    );
  });
});
