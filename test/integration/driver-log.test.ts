/**
 * The driver's log is JSON lines and nothing else, also while many plugins run
 * at once: each exec'd plugin used to add its abort listener to the one
 * shutdown signal, and past ten of them Node printed a
 * MaxListenersExceededWarning on stderr.
 *
 * The chain ends in a plugin that waits until every pod's run of it has
 * started (a barrier of files), so all of them are in flight together whatever
 * the machine's load; it then hands over to Debian's `tuning`, which passes
 * the previous result through.
 */
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect } from "chai";
import { DriverHarness, expectNoCniError } from "../support/driver-harness.js";
import { createNetns } from "../support/netns.js";
import {
  REFERENCE_PLUGIN_DIR,
  requireReferencePlugins,
  requireRoot,
} from "../support/requirements.js";

const PODS = 16;
const BARRIER_PLUGIN = "cdt-barrier";

/** Lines of `text` that are not a JSON object. */
function nonJsonLines(text: string): string[] {
  return text
    .split("\n")
    .filter((line) => line !== "")
    .filter((line) => {
      try {
        const v: unknown = JSON.parse(line);
        return typeof v !== "object" || v === null || Array.isArray(v);
      } catch {
        return true;
      }
    });
}

describe("cni-driver serve: the log is JSON lines only (integration)", function () {
  this.timeout(120_000);
  let h: DriverHarness;
  let binDir: string;

  before(async function () {
    requireRoot(this);
    requireReferencePlugins(this, "host-local", "tuning");
    binDir = mkdtempSync(join(tmpdir(), "cni-driver-log-bin-"));
    const barrier = join(binDir, "barrier");
    mkdirSync(barrier);
    // ADD waits (at most ~30 s, so a failure cannot hang the suite) until every pod's ADD got here.
    const script = join(binDir, BARRIER_PLUGIN);
    writeFileSync(
      script,
      `#!/bin/sh
if [ "$CNI_COMMAND" = ADD ]; then
  : > "${barrier}/$CNI_CONTAINERID"
  i=0
  while [ "$(ls "${barrier}" | wc -l)" -lt ${PODS} ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done
fi
exec ${REFERENCE_PLUGIN_DIR}/tuning
`,
    );
    chmodSync(script, 0o755);
    h = new DriverHarness({
      subnetOctet: 118,
      chain: [{ type: BARRIER_PLUGIN }],
      extraFlags: ["--cni-bin-dir", `${binDir}:${REFERENCE_PLUGIN_DIR}`, "--log-level", "info"],
    });
    await h.writeDefaultConfig();
    await h.start();
  });

  after(async () => {
    await h?.cleanup();
    if (binDir) rmSync(binDir, { recursive: true, force: true });
  });

  it(`${PODS} pods set up and torn down at once: every stderr line is a JSON object`, async () => {
    const pods = Array.from({ length: PODS }, (_, i) => i);
    for (const i of pods) createNetns(h.netnsName(i));
    const added = await Promise.all(pods.map((i) => h.client.setUpPod(h.podRequest(i))));
    for (const res of added) expectNoCniError(res);
    const removed = await Promise.all(pods.map((i) => h.client.tearDownPod(h.podRequest(i))));
    for (const res of removed) expectNoCniError(res);
    expect(h.leases(), "leases left").to.deep.equal([]);

    expect(await h.stop()).to.equal(0);
    expect(h.logs, "the driver logged at info").to.not.equal("");
    expect(nonJsonLines(h.logs)).to.deep.equal([]);
  });
});
