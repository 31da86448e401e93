/**
 * `cni-driver --help` and `cni-driver COMMAND --help`: every command answers with
 * its flags, each flag with its environment twin and its default, on stdout with
 * exit 0 (no driver needed); and the package's `cni-driver` bin, once built, runs.
 */
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { expect } from "chai";
import { envName, type FlagSpec } from "../../src/common/flags.js";
import { SERVE_FLAGS } from "../../src/driver/lifecycle/serve-flags.js";
import { CONTROLLER_FLAGS } from "../../src/midonet/controller/main.js";
import { REPO_ROOT, runDriverCli } from "../support/driver-harness.js";
import { ensureDistBuilt } from "../support/shipped-node.js";

interface HelpEntry {
  flag: string;
  env: string;
  default: string | undefined;
}

/** The flags a --help lists: "--name VALUE", its help line, then "env X; default "d"". */
function helpEntries(text: string): HelpEntry[] {
  const lines = text.split("\n");
  const entries: HelpEntry[] = [];
  lines.forEach((line, i) => {
    const flag = /^ {2}--([a-z0-9-]+)/.exec(line)?.[1];
    if (!flag) return;
    const twin = /^ {6}env (\S+); (?:default (".*")|no default)$/.exec(lines[i + 2] ?? "");
    expect(twin, `the env and default line of --${flag}: ${lines[i + 2]}`).to.not.equal(null);
    entries.push({
      flag,
      env: twin?.[1] ?? "",
      default: twin?.[2] === undefined ? undefined : (JSON.parse(twin[2]) as string),
    });
  });
  return entries;
}

function helpOf(...args: string[]): string {
  const r = runDriverCli(args);
  expect(r.status, `cni-driver ${args.join(" ")}: ${r.stderr}`).to.equal(0);
  return r.stdout;
}

describe("cni-driver --help (integration)", function () {
  this.timeout(60_000);

  it("lists every command, and each command's --help answers with exit 0", () => {
    const top = helpOf("--help");
    const commands = [
      "serve",
      "install-cni",
      "midonet-controller",
      "add",
      "del",
      "check",
      "status",
      "gc",
      "version",
    ];
    for (const c of commands) expect(top, c).to.match(new RegExp(`^ {2}${c} +\\S`, "m"));
    expect(helpOf()).to.equal(top);
    expect(helpOf("version", "--help")).to.contain("usage: cni-driver version");
  });

  const sameAsSpecs = (command: string, specs: readonly FlagSpec[]) => {
    const entries = helpEntries(helpOf(command, "--help"));
    expect(entries.map((e) => e.flag)).to.deep.equal(specs.map((s) => s.name));
    for (const s of specs) {
      const e = entries.find((x) => x.flag === s.name);
      expect(e?.env, s.name).to.equal(envName(s.name));
      expect(e?.default, s.name).to.equal(s.default);
    }
  };

  it("serve --help: every flag the daemon takes, its env twin and its default", () => {
    sameAsSpecs("serve", SERVE_FLAGS);
  });

  it("midonet-controller --help: every flag the controller takes, its env twin and its default", () => {
    sameAsSpecs("midonet-controller", CONTROLLER_FLAGS);
  });

  it("add, del, check, status, gc and install-cni --help: their flags with env twins and defaults", () => {
    const expected: Record<string, Record<string, string | undefined>> = {
      add: { socket: "/run/cni-driver/driver.sock", netns: undefined, ifname: "eth0" },
      del: { "container-id": undefined, timeout: "120" },
      check: { netns: undefined, "cni-version": undefined },
      status: { socket: "/run/cni-driver/driver.sock", network: undefined, timeout: "120" },
      gc: { valid: undefined, timeout: "120" },
      "install-cni": { "bin-dir": "/opt/cni/bin", "plugin-dir": "/usr/lib/cni" },
    };
    for (const [command, flags] of Object.entries(expected)) {
      const entries = helpEntries(helpOf(command, "--help"));
      for (const e of entries) expect(e.env, `${command} --${e.flag}`).to.equal(envName(e.flag));
      for (const [flag, def] of Object.entries(flags)) {
        const e = entries.find((x) => x.flag === flag);
        expect(e, `${command} --help lists --${flag}`).to.not.equal(undefined);
        expect(e?.default, `${command} --${flag}`).to.equal(def);
      }
    }
  });

  it("-h is --help, anywhere among the flags; an unknown flag is a usage error pointing at --help", () => {
    expect(helpOf("status", "--socket", "/nowhere", "-h")).to.equal(helpOf("status", "--help"));
    const bad = runDriverCli(["serve", "--no-such-flag"]);
    expect(bad.status).to.equal(2);
    expect(bad.stderr).to.contain("--no-such-flag").and.contain("cni-driver serve --help");
    const unknown = runDriverCli(["no-such-command"]);
    expect(unknown.status).to.equal(2);
    expect(unknown.stderr).to.contain('unknown command "no-such-command"');
  });

  it("the package's cni-driver bin is built by `npm run build` and runs as an executable script", function () {
    this.timeout(240_000);
    ensureDistBuilt();
    const pkg = JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8")) as {
      bin: Record<string, string>;
    };
    const bin = join(REPO_ROOT, pkg.bin["cni-driver"] ?? "(no cni-driver bin)");
    // node, with the driver's V8 flags (src/driver/cli.ts says why).
    expect(readFileSync(bin, "utf8").split("\n")[0]).to.equal(
      "#!/usr/bin/env -S node --max-semi-space-size=1 --expose-gc",
    );
    const env = { ...process.env };
    delete env.NODE_OPTIONS; // no tsx: the compiled file must run on its own
    // Exec'd itself, as the image's ENTRYPOINT runs it: through its shebang.
    const r = spawnSync(bin, ["status", "--help"], { env, encoding: "utf8" });
    expect(r.status, r.stderr).to.equal(0);
    expect(r.stdout).to.contain("env CNI_DRIVER_SOCKET");
  });
});
