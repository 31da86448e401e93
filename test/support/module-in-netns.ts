/**
 * An ES module (TypeScript, through tsx) run by a Node process inside a
 * network namespace, from the repository's root: how a test drives code
 * that opens netlink sockets, which belong to the namespace of the thread
 * that opens them, as the driver does inside its node's.
 */
import { spawnSync } from "node:child_process";
import { expect } from "chai";
import { patient } from "./patience.js";

/** Runs `source` in `ns` with `input` on its stdin; answers its last line of output, parsed as JSON. */
export function runModuleInNetns(
  ns: string,
  source: string,
  o: { input?: string; env?: NodeJS.ProcessEnv } = {},
): unknown {
  const r = spawnSync(
    "ip",
    ["netns", "exec", ns, process.execPath, "--import", "tsx", "--input-type=module", "-e", source],
    {
      encoding: "utf8",
      ...(o.input !== undefined ? { input: o.input } : {}),
      cwd: new URL("../../", import.meta.url).pathname,
      env: o.env ?? process.env,
      timeout: patient(60_000),
      maxBuffer: 16 * 1024 * 1024,
    },
  );
  expect(r.status, `${r.signal ?? ""} ${r.stderr}`).to.equal(0);
  return JSON.parse(r.stdout.trim().split("\n").pop() ?? "null");
}
