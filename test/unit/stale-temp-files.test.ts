import { mkdirSync, mkdtempSync, readdirSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect } from "chai";
import { removeStaleTempFiles } from "../../src/common/stale-temp-files.js";
import {
  deletionRecordFileName,
  deletionRecordTempName,
  isDeletionRecordTempName,
} from "../../src/wire/deletion-record.js";

describe("removeStaleTempFiles", () => {
  let dir = "";
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "cni-driver-stale-"));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  const isTemp = (n: string) => n.endsWith(".tmp");

  it("removes the matching files older than the age given, and returns their names", () => {
    for (const n of ["old.tmp", "new.tmp", "old.json"]) writeFileSync(join(dir, n), "");
    const old = new Date(Date.now() - 10_000);
    utimesSync(join(dir, "old.tmp"), old, old);
    utimesSync(join(dir, "old.json"), old, old);
    expect(removeStaleTempFiles(dir, { isTemp, olderThanMs: 5_000 })).to.deep.equal(["old.tmp"]);
    expect(readdirSync(dir).sort()).to.deep.equal(["new.tmp", "old.json"]);
    expect(removeStaleTempFiles(dir, { isTemp, olderThanMs: 0 })).to.deep.equal(["new.tmp"]);
  });

  it("leaves a directory of a matching name alone, and answers nothing for a missing dir", () => {
    mkdirSync(join(dir, "sub.tmp"));
    expect(removeStaleTempFiles(dir, { isTemp, olderThanMs: 0 })).to.deep.equal([]);
    expect(readdirSync(dir)).to.deep.equal(["sub.tmp"]);
    expect(removeStaleTempFiles(join(dir, "missing"), { isTemp, olderThanMs: 0 })).to.deep.equal(
      [],
    );
  });
});

describe("deletion record temporary names", () => {
  const record = { network: "pod-network", containerId: "abc-123", ifName: "eth0" };

  it("are recognised, and never taken for a record", () => {
    const temp = deletionRecordTempName(record, 4242);
    expect(isDeletionRecordTempName(temp)).to.equal(true);
    expect(temp.endsWith(".json")).to.equal(false);
    expect(isDeletionRecordTempName(deletionRecordFileName(record))).to.equal(false);
    expect(isDeletionRecordTempName(".pod-network-abc-123-eth0.json.tmp")).to.equal(false);
    expect(isDeletionRecordTempName("x.json.42.tmp")).to.equal(false);
  });
});
