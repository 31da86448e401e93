import { expect } from "chai";
import {
  type CniCommand,
  type EnvRecord,
  parsePluginEnv,
  pluginEnvToProcessEnv,
  REQUIRED_ENV,
  splitCniPath,
} from "../../src/cni/env.js";
import { MAX_CNI_ARGS_BYTES, MAX_NETNS_PATH_BYTES } from "../../src/cni/limits.js";
import { cniErrorOf } from "../support/cni-error.js";

const FULL: Record<string, string> = {
  CNI_CONTAINERID: "abc-1.2_x",
  CNI_NETNS: "/var/run/netns/cni-1234",
  CNI_IFNAME: "eth0",
  CNI_PATH: "/opt/cni/bin:/usr/lib/cni",
  CNI_ARGS: "IgnoreUnknown=1;K8S_POD_NAME=web",
};

function envFor(command: string, overrides: EnvRecord = {}): EnvRecord {
  return { ...FULL, CNI_COMMAND: command, ...overrides };
}

describe("cni/env", () => {
  describe("required variables per verb", () => {
    const table: Array<[CniCommand, string[]]> = [
      ["ADD", ["CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME", "CNI_PATH"]],
      ["CHECK", ["CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME", "CNI_PATH"]],
      ["DEL", ["CNI_CONTAINERID", "CNI_IFNAME", "CNI_PATH"]],
      ["GC", ["CNI_PATH"]],
      ["STATUS", ["CNI_PATH"]],
      ["VERSION", []],
    ];

    it("REQUIRED_ENV matches the spec table", () => {
      for (const [command, vars] of table) {
        expect(REQUIRED_ENV[command], command).to.deep.equal(["CNI_COMMAND", ...vars]);
      }
    });

    for (const [command, vars] of table) {
      for (const name of vars) {
        it(`${command} without ${name}: code 4 naming it`, () => {
          const env = envFor(command);
          delete env[name];
          const err = cniErrorOf(() => parsePluginEnv(env));
          expect(err.code).to.equal(4);
          expect(err.message).to.equal(`required env variables [${name}] missing`);
        });
        it(`${command} with ${name}="": counts as missing`, () => {
          const err = cniErrorOf(() => parsePluginEnv(envFor(command, { [name]: "" })));
          expect(err.code).to.equal(4);
          expect(err.message).to.equal(`required env variables [${name}] missing`);
        });
      }
      if (vars.length > 1) {
        it(`${command} with nothing but CNI_COMMAND: all of ${vars.join(",")} named at once, in order`, () => {
          const err = cniErrorOf(() => parsePluginEnv({ CNI_COMMAND: command }));
          expect(err.code).to.equal(4);
          expect(err.message).to.equal(`required env variables [${vars.join(",")}] missing`);
        });
      }
      it(`${command} with every variable set parses`, () => {
        expect(parsePluginEnv(envFor(command)).command).to.equal(command);
      });
    }
  });

  it("DEL missing two of them names both, in skel's order", () => {
    const err = cniErrorOf(() =>
      parsePluginEnv(envFor("DEL", { CNI_PATH: "", CNI_CONTAINERID: undefined })),
    );
    expect(err.message).to.equal("required env variables [CNI_CONTAINERID,CNI_PATH] missing");
  });

  it("ADD parses every field, CNI_PATH split on ':'", () => {
    expect(parsePluginEnv(envFor("ADD"))).to.deep.equal({
      command: "ADD",
      containerId: "abc-1.2_x",
      netns: "/var/run/netns/cni-1234",
      ifName: "eth0",
      cniPath: ["/opt/cni/bin", "/usr/lib/cni"],
      cniArgs: "IgnoreUnknown=1;K8S_POD_NAME=web",
    });
  });

  it("DEL without CNI_NETNS is fine and carries no netns", () => {
    const env = parsePluginEnv(envFor("DEL", { CNI_NETNS: undefined }));
    expect(env).to.deep.equal({
      command: "DEL",
      containerId: "abc-1.2_x",
      ifName: "eth0",
      cniPath: ["/opt/cni/bin", "/usr/lib/cni"],
      cniArgs: "IgnoreUnknown=1;K8S_POD_NAME=web",
    });
    expect(env).to.not.have.property("netns");
  });

  it('DEL with CNI_NETNS="" (containerd after the sandbox is gone) carries no netns', () => {
    expect(parsePluginEnv(envFor("DEL", { CNI_NETNS: "" }))).to.not.have.property("netns");
  });

  it("DEL keeps a netns path that may no longer exist, as given", () => {
    expect(parsePluginEnv(envFor("DEL", { CNI_NETNS: "/run/netns/gone" })).netns).to.equal(
      "/run/netns/gone",
    );
  });

  it("CNI_NETNS past PATH_MAX: code 4 naming the variable, the path cut short", () => {
    const err = cniErrorOf(() =>
      parsePluginEnv(envFor("ADD", { CNI_NETNS: `/${"n".repeat(MAX_NETNS_PATH_BYTES)}` })),
    );
    expect(err.code).to.equal(4);
    expect(err.message).to.match(
      /^netns path is too long: "\/n{63}"… \(4096 bytes\); at most 4095 bytes \(CNI_NETNS\)$/,
    );
  });

  for (const command of ["ADD", "CHECK", "DEL"]) {
    it(`${command} with CNI_ARGS past ${MAX_CNI_ARGS_BYTES} bytes: code 4`, () => {
      const err = cniErrorOf(() =>
        parsePluginEnv(envFor(command, { CNI_ARGS: `K=${"v".repeat(MAX_CNI_ARGS_BYTES)}` })),
      );
      expect(err.code).to.equal(4);
      expect(err.message).to.match(/^CNI_ARGS is too long: "K=v{62}"… \(65538 bytes\)/);
    });
  }

  it("VERSION ignores a CNI_ARGS past its limit, as it ignores every other variable", () => {
    expect(
      parsePluginEnv({ CNI_COMMAND: "VERSION", CNI_ARGS: "v".repeat(MAX_CNI_ARGS_BYTES + 1) })
        .command,
    ).to.equal("VERSION");
  });

  it("VERSION needs nothing but CNI_COMMAND", () => {
    expect(parsePluginEnv({ CNI_COMMAND: "VERSION" })).to.deep.equal({
      command: "VERSION",
      cniPath: [],
      cniArgs: "",
    });
  });

  for (const command of ["GC", "STATUS"] as const) {
    it(`${command} needs CNI_PATH only, and leaves out the attachment variables`, () => {
      expect(parsePluginEnv({ CNI_COMMAND: command, CNI_PATH: "/opt/cni/bin" })).to.deep.equal({
        command,
        cniPath: ["/opt/cni/bin"],
        cniArgs: "",
      });
      const withAll = parsePluginEnv(envFor(command));
      expect(withAll).to.not.have.any.keys("containerId", "netns", "ifName");
    });
  }

  it("GC does not validate a container id it does not use", () => {
    expect(() => parsePluginEnv(envFor("GC", { CNI_CONTAINERID: "-bad" }))).to.not.throw();
  });

  for (const [what, env] of [
    ["missing", {}],
    ["empty", { CNI_COMMAND: "" }],
  ] as const) {
    it(`CNI_COMMAND ${what}: code 4 naming only CNI_COMMAND`, () => {
      const err = cniErrorOf(() => parsePluginEnv(env));
      expect(err.code).to.equal(4);
      expect(err.message).to.equal("required env variables [CNI_COMMAND] missing");
    });
  }

  for (const command of ["FOO", "add", "GET", "VERSION "]) {
    it(`unknown CNI_COMMAND ${JSON.stringify(command)}: code 4, libcni's wording`, () => {
      const err = cniErrorOf(() => parsePluginEnv(envFor(command)));
      expect(err.code).to.equal(4);
      expect(err.message).to.equal(`unknown CNI_COMMAND: ${command}`);
    });
  }

  for (const [env, code, msg] of [
    [envFor("ADD", { CNI_CONTAINERID: "-abc" }), 4, /containerID: "-abc"/],
    [envFor("CHECK", { CNI_IFNAME: "a/b" }), 4, /interface name contains/],
    [envFor("DEL", { CNI_IFNAME: "abcdefghijklmnop" }), 4, /interface name is too long/],
    [envFor("DEL", { CNI_CONTAINERID: "a b" }), 4, /containerID/],
  ] as const) {
    it(`${env.CNI_COMMAND} validates names: ${msg.source}`, () => {
      const err = cniErrorOf(() => parsePluginEnv(env));
      expect(err.code).to.equal(code);
      expect(err.message).to.match(msg);
    });
  }

  for (const [path, want] of [
    ["/opt/cni/bin", ["/opt/cni/bin"]],
    ["/a::/b", ["/a", "/b"]],
    [":/a:", ["/a"]],
    ["", []],
    [undefined, []],
  ] as const) {
    it(`splitCniPath(${JSON.stringify(path)})`, () => {
      expect(splitCniPath(path)).to.deep.equal(want);
    });
  }

  describe("pluginEnvToProcessEnv", () => {
    const base = {
      PATH: "/usr/sbin:/usr/bin",
      HOME: "/root",
      UNSET: undefined,
      CNI_NETNS: "/stale",
      CNI_COMMAND: "STATUS",
    };

    it("keeps the base, overrides every CNI_* and drops undefined values", () => {
      const env = parsePluginEnv(envFor("ADD"));
      expect(pluginEnvToProcessEnv(env, base)).to.deep.equal({
        PATH: "/usr/sbin:/usr/bin",
        HOME: "/root",
        CNI_COMMAND: "ADD",
        CNI_CONTAINERID: "abc-1.2_x",
        CNI_NETNS: "/var/run/netns/cni-1234",
        CNI_ARGS: "IgnoreUnknown=1;K8S_POD_NAME=web",
        CNI_IFNAME: "eth0",
        CNI_PATH: "/opt/cni/bin:/usr/lib/cni",
      });
    });

    it("does not modify the base", () => {
      const copy = { ...base };
      pluginEnvToProcessEnv(parsePluginEnv(envFor("ADD")), base);
      expect(base).to.deep.equal(copy);
    });

    it("delegating with only the command changed reproduces the plugin's own environment", () => {
      const own = envFor("ADD");
      const delegated = pluginEnvToProcessEnv({ ...parsePluginEnv(own), command: "DEL" }, own);
      expect(delegated).to.deep.equal({ ...own, CNI_COMMAND: "DEL" });
    });

    it("a variable the verb does not carry is emptied, not inherited", () => {
      const out = pluginEnvToProcessEnv(
        parsePluginEnv({ CNI_COMMAND: "GC", CNI_PATH: "/opt/cni/bin" }),
        base,
      );
      expect(out.CNI_NETNS).to.equal("");
      expect(out.CNI_CONTAINERID).to.equal("");
      expect(out.CNI_IFNAME).to.equal("");
    });

    it("round-trips through parsePluginEnv", () => {
      for (const command of ["ADD", "CHECK", "DEL", "GC", "STATUS", "VERSION"]) {
        const env = parsePluginEnv(envFor(command));
        expect(parsePluginEnv(pluginEnvToProcessEnv(env)), command).to.deep.equal(env);
      }
    });
  });
});
