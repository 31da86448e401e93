/**
 * CHANGELOG.md read as data: its `## Unreleased` section (on top, when there is
 * one) and its releases, `## <version> — <date>`, each with the commit it was cut
 * from (`Commit: <sha>`). test/unit/changelog.test.ts holds the file to this
 * shape; test/support/previous-release.ts builds a release from its commit.
 */

export interface Release {
  version: string;
  date: string;
  commit: string | undefined;
}

/** The releases, in the file's order (newest first), and whether Unreleased comes first. */
export function changelogReleases(text: string): { unreleased: boolean; releases: Release[] } {
  const out: Release[] = [];
  let unreleased = false;
  for (const section of text.split(/^## /m).slice(1)) {
    const [heading = "", ...body] = section.split("\n");
    if (heading.trim() === "Unreleased") {
      unreleased = out.length === 0;
      continue;
    }
    const m = /^(\d+\.\d+\.\d+) — (\d{4}-\d{2}-\d{2})$/.exec(heading.trim());
    if (!m)
      throw new Error(
        `CHANGELOG.md: a heading that is neither "Unreleased" nor "<version> — <date>": ${heading}`,
      );
    const commit = body.map((l) => /^Commit: (\S+)$/.exec(l)?.[1]).find(Boolean);
    out.push({ version: m[1] as string, date: m[2] as string, commit });
  }
  return { unreleased, releases: out };
}
