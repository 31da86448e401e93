import { execFile } from "node:child_process";
import {
  mkdir,
  mkdtemp,
  open,
  readdir,
  readFile,
  readlink,
  rm,
  stat,
  writeFile,
} from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { expect } from "chai";
import { CniError } from "../../src/cni/errors.js";
import { findNativeAddon } from "../../src/common/native-addon.js";
import {
  type ExecRequest,
  execPlugin,
  findPlugin,
  PluginExecError,
} from "../../src/driver/chain/plugin-exec.js";
import type { SpawnBackend } from "../../src/driver/chain/plugin-process.js";
import { useSpawn } from "../support/plugin-spawn.js";

const DEBIAN_PLUGINS = "/usr/lib/cni";

/** Runs `fn`, expecting it to reject; returns the rejection. */
async function rejection(fn: () => Promise<unknown>): Promise<unknown> {
  try {
    await fn();
  } catch (err) {
    return err;
  }
  throw new Error("expected a rejection");
}

async function execError(req: ExecRequest): Promise<PluginExecError> {
  const err = await rejection(() => execPlugin(req));
  expect(err).to.be.instanceOf(PluginExecError);
  expect(err).to.be.instanceOf(CniError);
  return err as PluginExecError;
}

/** True while the process exists and is not a zombie. */
async function isAlive(pid: number): Promise<boolean> {
  try {
    const statLine = await readFile(`/proc/${pid}/stat`, "utf8");
    // Field 3, after the parenthesised command name.
    return statLine.slice(statLine.lastIndexOf(")") + 2, statLine.lastIndexOf(")") + 3) !== "Z";
  } catch {
    return false;
  }
}

/** How long killed processes get to go before a test gives up: a guard against a hang, not a measure. */
const GONE_GUARD_MS = 30_000;

async function waitGone(pids: number[], withinMs: number): Promise<boolean> {
  const until = Date.now() + withinMs;
  for (;;) {
    const alive = await Promise.all(pids.map(isAlive));
    if (!alive.some(Boolean)) return true;
    if (Date.now() > until) return false;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** How many pipes and eventfds this process holds: what a run opens for itself. */
async function pipesAndEventfds(): Promise<number> {
  const targets = await Promise.all(
    (await readdir("/proc/self/fd")).map((fd) => readlink(`/proc/self/fd/${fd}`).catch(() => "")),
  );
  return targets.filter((t) => t.startsWith("pipe:") || t === "anon_inode:[eventfd]").length;
}

/**
 * A full garbage collection, its finalizers run: what runs before left behind for
 * the collector no longer counts. Node exposes gc() only to a new context.
 */
async function collectGarbage(): Promise<void> {
  setFlagsFromString("--expose-gc");
  (runInNewContext("gc") as () => void)();
  await new Promise((resolve) => setImmediate(resolve));
}

/** Runs a CommonJS script in a fresh node; resolves with how it ended, never rejects. */
function runNode(
  script: string,
  args: string[],
): Promise<{ code: number | null; signal: string | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ["-e", script, ...args],
      { timeout: 15_000 },
      (err, stdout, stderr) => {
        const e = err as (Error & { code?: unknown; signal?: string | null }) | null;
        resolve({
          code: e ? (typeof e.code === "number" ? e.code : null) : 0,
          signal: e?.signal ?? null,
          stdout,
          stderr,
        });
      },
    );
  });
}

for (const backend of ["native", "node"] as const)
  describe(`plugin-exec (${backend} spawn)`, function () {
    this.timeout(60_000);

    let root: string;
    let binDir: string;
    let otherBinDir: string;
    /** This suite's implementation, as the daemon hands it to the plugin runner. */
    let spawn: SpawnBackend;

    /** Writes an executable sh script as a fake plugin into binDir. */
    async function fakePlugin(name: string, body: string, dir = binDir): Promise<string> {
      const path = join(dir, name);
      await writeFile(path, `#!/bin/sh\n${body}\n`, { mode: 0o755 });
      return path;
    }

    const request = (
      type: string,
      extra: Partial<Omit<ExecRequest, "spawn">> = {},
    ): ExecRequest => ({
      type,
      binDirs: [binDir],
      command: "ADD",
      containerId: "ctr-1",
      netns: "/var/run/netns/test",
      ifName: "eth0",
      stdin: '{"cniVersion":"1.0.0","name":"net"}',
      timeoutMs: 10_000,
      spawn,
      ...extra,
    });

    before(async function () {
      spawn = useSpawn(this, backend);
      root = await mkdtemp(join(tmpdir(), "cni-plugin-exec-"));
      binDir = join(root, "bin");
      otherBinDir = join(root, "bin2");
      await mkdir(binDir);
      await mkdir(otherBinDir);
    });

    after(async () => {
      if (root) await rm(root, { recursive: true, force: true });
    });

    describe("findPlugin", () => {
      it("returns the path in the first bin dir that holds the plugin", async () => {
        await fakePlugin("only-in-second", "exit 0", otherBinDir);
        await fakePlugin("in-both", "exit 0", binDir);
        await fakePlugin("in-both", "exit 0", otherBinDir);
        const dirs = [join(root, "missing"), binDir, otherBinDir];
        expect(await findPlugin("only-in-second", dirs)).to.equal(
          join(otherBinDir, "only-in-second"),
        );
        expect(await findPlugin("in-both", dirs)).to.equal(join(binDir, "in-both"));
      });

      it("skips an entry of that name that is not a regular file", async () => {
        await mkdir(join(binDir, "a-directory"));
        await fakePlugin("a-directory", "exit 0", otherBinDir);
        expect(await findPlugin("a-directory", [binDir, otherBinDir])).to.equal(
          join(otherBinDir, "a-directory"),
        );
      });

      it("fails with code 7 naming the type and every dir when no dir holds it", async () => {
        const err = await rejection(() => findPlugin("no-such-plugin", [binDir, otherBinDir]));
        expect(err).to.be.instanceOf(CniError);
        expect((err as CniError).code).to.equal(7);
        expect((err as CniError).message).to.equal(
          `failed to find plugin "no-such-plugin" in path [${binDir} ${otherBinDir}]`,
        );
      });

      for (const type of [
        "../bin/x",
        "/usr/lib/cni/host-local",
        "sub/plugin",
        "",
        ".",
        "..",
        "a\0b",
      ]) {
        it(`refuses type ${JSON.stringify(type)}: not a bare file name (code 7)`, async () => {
          const err = await rejection(() => findPlugin(type, [binDir, DEBIAN_PLUGINS]));
          expect((err as CniError).code).to.equal(7);
          expect((err as CniError).message).to.include("bare file name");
        });
      }
    });

    describe("with the Debian reference plugins", () => {
      it("runs VERSION of host-local", async () => {
        const out = await execPlugin({
          type: "host-local",
          binDirs: [binDir, DEBIAN_PLUGINS],
          command: "VERSION",
          stdin: '{"cniVersion":"1.0.0"}',
          timeoutMs: 10_000,
          spawn,
        });
        expect(out).to.have.property("cniVersion", "1.0.0");
        expect((out as { supportedVersions: string[] }).supportedVersions).to.include.members([
          "0.3.1",
          "0.4.0",
          "1.0.0",
        ]);
      });

      it("allocates with host-local ADD and releases with DEL, in a private dataDir", async () => {
        const dataDir = join(root, "host-local-data");
        const network = `pe-test-${process.pid}`;
        const conf = JSON.stringify({
          cniVersion: "1.0.0",
          name: network,
          type: "host-local",
          ipam: { type: "host-local", dataDir, ranges: [[{ subnet: "10.250.7.0/24" }]] },
        });
        const base = request("host-local", { binDirs: [DEBIAN_PLUGINS], stdin: conf });
        const added = await execPlugin({ ...base, containerId: "pod-a-1" });
        expect(added).to.deep.equal({
          cniVersion: "1.0.0",
          ips: [{ address: "10.250.7.2/24", gateway: "10.250.7.1" }],
          dns: {},
        });
        const lease = join(dataDir, network, "10.250.7.2");
        expect(await readFile(lease, "utf8")).to.equal("pod-a-1\r\neth0");

        expect(await execPlugin({ ...base, command: "DEL", containerId: "pod-a-1" })).to.equal(
          undefined,
        );
        expect(await rejection(() => stat(lease))).to.have.property("code", "ENOENT");
      });

      it("passes a plugin's own error through with its code and message", async () => {
        const err = await execError(
          request("host-local", { binDirs: [DEBIAN_PLUGINS], netns: "", command: "ADD" }),
        );
        expect(err.code).to.equal(4);
        expect(err.message).to.equal("required env variables [CNI_NETNS] missing");
        expect(err.plugin).to.equal("host-local");
        expect(err.command).to.equal("ADD");
      });
    });

    describe("environment and stdin", () => {
      const envScript = `printf '{"CNI_COMMAND":"%s","CNI_CONTAINERID":"%s","CNI_NETNS":"%s","CNI_IFNAME":"%s","CNI_ARGS":"%s","CNI_PATH":"%s","FOO":"%s","MARKER":"%s"}' "$CNI_COMMAND" "$CNI_CONTAINERID" "$CNI_NETNS" "$CNI_IFNAME" "$CNI_ARGS" "$CNI_PATH" "$FOO" "$PLUGIN_EXEC_TEST_MARKER" | tee "\${ENV_ECHO_FILE:-/dev/null}"`;

      before(async () => {
        await fakePlugin("env-echo", envScript);
        await fakePlugin("stdin-echo", "cat");
      });

      it("sets every CNI_* variable from the request and keeps the rest of the base env", async () => {
        const out = await execPlugin(
          request("env-echo", {
            binDirs: [binDir, otherBinDir],
            cniArgs: "IgnoreUnknown=1;K8S_POD_NAME=web",
            baseEnv: { FOO: "bar", CNI_CONTAINERID: "stale", CNI_ARGS: "stale" },
          }),
        );
        expect(out).to.deep.equal({
          CNI_COMMAND: "ADD",
          CNI_CONTAINERID: "ctr-1",
          CNI_NETNS: "/var/run/netns/test",
          CNI_IFNAME: "eth0",
          CNI_ARGS: "IgnoreUnknown=1;K8S_POD_NAME=web",
          CNI_PATH: `${binDir}:${otherBinDir}`,
          FOO: "bar",
          MARKER: "",
        });
      });

      it("clears attachment variables a verb does not carry, even when the base env has them", async () => {
        // GC's stdout is discarded (libcni): the plugin also writes what it saw to a file.
        const seen = join(binDir, `gc-env-${backend}.json`);
        await execPlugin({
          type: "env-echo",
          binDirs: [binDir],
          command: "GC",
          stdin: "{}",
          timeoutMs: 10_000,
          spawn,
          baseEnv: {
            CNI_NETNS: "/proc/1/ns/net",
            CNI_IFNAME: "eth9",
            CNI_CONTAINERID: "old",
            ENV_ECHO_FILE: seen,
          },
        });
        const out = JSON.parse(await readFile(seen, "utf8")) as Record<string, string>;
        expect(out).to.include({
          CNI_COMMAND: "GC",
          CNI_CONTAINERID: "",
          CNI_NETNS: "",
          CNI_IFNAME: "",
          CNI_ARGS: "",
        });
      });

      it("inherits process.env when no base env is given", async () => {
        process.env.PLUGIN_EXEC_TEST_MARKER = "from-process-env";
        try {
          const out = await execPlugin(request("env-echo"));
          expect(out).to.have.property("MARKER", "from-process-env");
        } finally {
          delete process.env.PLUGIN_EXEC_TEST_MARKER;
        }
      });

      it("starts the plugin as a session leader with no signal ignored or blocked", async () => {
        // Node ignores SIGPIPE; an ignored signal survives exec unless the spawn resets it.
        await fakePlugin(
          "proc-echo",
          `set -- $(sed 's/.*) //' /proc/$$/stat)
printf '{"pid":%s,"pgrp":%s,"sid":%s,"ign":"%s","blk":"%s"}' $$ $3 $4 \
  $(awk '/^SigIgn/{print $2}' /proc/$$/status) $(awk '/^SigBlk/{print $2}' /proc/$$/status)`,
        );
        const out = (await execPlugin(request("proc-echo"))) as Record<string, unknown>;
        expect(out.pgrp).to.equal(out.pid);
        expect(out.sid).to.equal(out.pid);
        const standard = (mask: unknown) => Number.parseInt(String(mask), 16) % 2 ** 31;
        expect(standard(out.ign), `SigIgn ${out.ign}`).to.equal(0);
        expect(standard(out.blk), `SigBlk ${out.blk}`).to.equal(0);
      });

      // Node's spawn passes on every descriptor the process holds without O_CLOEXEC
      // (under npm, one of npm's pipes): only the native spawn closes them.
      if (backend === "native")
        it("hands the plugin no descriptor beyond stdin, stdout and stderr", async () => {
          // ls lists its own fds: the three pipes, its directory handle, nothing inherited.
          await fakePlugin("fd-echo", `printf '{"fds":"%s"}' "$(ls /proc/self/fd | tr '\\n' ' ')"`);
          expect(await execPlugin(request("fd-echo"))).to.deep.equal({ fds: "0 1 2 3 " });
        });

      it("feeds the config on stdin byte for byte", async () => {
        const config = '{"cniVersion":"1.0.0","name":"net","ipam":{"note":"ü <&>"}}';
        expect(await execPlugin(request("stdin-echo", { stdin: config }))).to.deep.equal(
          JSON.parse(config),
        );
      });
    });

    describe("outcomes", () => {
      before(async () => {
        await fakePlugin(
          "cni-error",
          `echo '{"cniVersion":"1.0.0","code":117,"msg":"no leases left","details":"range 10.0.0.0/30"}'\nexit 1`,
        );
        await fakePlugin(
          "stderr-only",
          "echo 'cannot open /run/thing: permission denied' >&2\nexit 1",
        );
        await fakePlugin("silent-failure", "exit 3");
        await fakePlugin("garbage-ok", "echo 'this is not json'");
        await fakePlugin("garbage-fail", "echo 'panic: nil map'\nexit 2");
        await fakePlugin("json-not-error", `echo '{"code":"7"}'\nexit 1`);
        await fakePlugin("empty-ok", "exit 0");
        await fakePlugin("newline-ok", "echo");
        await fakePlugin("chatty-ok", "echo 'warning: slow disk' >&2\necho '{}'");
        await fakePlugin(
          "code-zero",
          `echo '{"code":0,"msg":"iptables: Resource temporarily unavailable"}'\nexit 1`,
        );
        await fakePlugin("code-too-large", `echo '{"code":4294967296,"msg":"odd"}'\nexit 1`);
        await writeFile(join(binDir, "not-executable"), "#!/bin/sh\nexit 0\n", { mode: 0o644 });
      });

      it("rethrows a CNI error from stdout with its code, msg and details unchanged", async () => {
        const err = await execError(request("cni-error"));
        expect(err.code).to.equal(117);
        expect(err.message).to.equal("no leases left");
        expect(err.details).to.equal("range 10.0.0.0/30");
        expect(err.plugin).to.equal("cni-error");
      });

      it("takes the message from stderr when stdout is empty (code 999)", async () => {
        const err = await execError(request("stderr-only"));
        expect(err.code).to.equal(999);
        expect(err.message).to.equal(
          'stderr-only: netplugin failed: "cannot open /run/thing: permission denied": exit status 1',
        );
      });

      it("says so when a failing plugin printed nothing at all", async () => {
        const err = await execError(request("silent-failure"));
        expect(err.code).to.equal(999);
        expect(err.message).to.equal(
          "silent-failure: netplugin failed with no error message: exit status 3",
        );
      });

      it("fails with 999, keeping the message, when a failing plugin's error has code 0 (on the wire: success)", async () => {
        const err = await execError(request("code-zero", { command: "DEL" }));
        expect(err.code).to.equal(999);
        expect(err.message).to.equal(
          "code-zero: iptables: Resource temporarily unavailable (the plugin failed with error code 0: exit status 1)",
        );
        const big = await execError(request("code-too-large"));
        expect(big.code).to.equal(999);
        expect(big.message).to.contain("error code 4294967296");
      });

      for (const command of ["DEL", "CHECK", "GC", "STATUS"] as const) {
        it(`ignores what a successful ${command} prints, as libcni does`, async () => {
          expect(await execPlugin(request("garbage-ok", { command }))).to.equal(undefined);
        });
      }

      it("fails with code 6 naming the plugin when a success prints something not JSON", async () => {
        const err = await execError(request("garbage-ok"));
        expect(err.code).to.equal(6);
        expect(err.message).to.match(/^garbage-ok: ADD printed output that is not JSON/);
        expect(err.details).to.include("this is not json");
      });

      it("quotes stdout when a failing plugin printed something that is not a CNI error", async () => {
        const err = await execError(request("garbage-fail"));
        expect(err.code).to.equal(999);
        expect(err.message).to.match(
          /^garbage-fail: netplugin failed but error parsing its diagnostic message "panic: nil map": /,
        );
      });

      it("does not take JSON without an integer code for a CNI error", async () => {
        const err = await execError(request("json-not-error"));
        expect(err.code).to.equal(999);
        expect(err.message).to.equal(
          'json-not-error: netplugin failed but error parsing its diagnostic message "{\\"code\\":\\"7\\"}": not a CNI error object',
        );
      });

      for (const type of ["empty-ok", "newline-ok"]) {
        it(`returns undefined when a successful plugin prints nothing (${type})`, async () => {
          expect(await execPlugin(request(type, { command: "DEL" }))).to.equal(undefined);
        });
      }

      it("hands stderr of a successful plugin to onStderr", async () => {
        const seen: string[] = [];
        const out = await execPlugin(request("chatty-ok", { onStderr: (t) => seen.push(t) }));
        expect(out).to.deep.equal({});
        expect(seen).to.deep.equal(["warning: slow disk\n"]);
      });

      it("fails with code 7 naming the type and the dirs when the plugin is missing", async () => {
        const err = await execError(request("absent", { binDirs: [binDir, otherBinDir] }));
        expect(err.code).to.equal(7);
        expect(err.message).to.equal(
          `failed to find plugin "absent" in path [${binDir} ${otherBinDir}]`,
        );
      });

      it("refuses a type that is a path without running anything (code 7)", async () => {
        const err = await execError(request(join(binDir, "empty-ok")));
        expect(err.code).to.equal(7);
      });

      it("reports a file that cannot be executed (code 999)", async () => {
        const err = await execError(request("not-executable"));
        expect(err.code).to.equal(999);
        expect(err.message).to.equal(
          `not-executable: cannot exec ${join(binDir, "not-executable")}: EACCES`,
        );
      });
    });

    describe("timeouts and cancellation", () => {
      let pidDir: string;

      before(async () => {
        pidDir = join(root, "pids");
        await mkdir(pidDir);
        // Writes its own pid and its child's, then waits: a kill must reach both.
        await fakePlugin("sleeper", `sleep 30 &\necho "$$ $!" > "$PID_FILE"\nwait`);
        await fakePlugin("stubborn", `trap '' TERM\nsleep 30 &\necho "$$ $!" > "$PID_FILE"\nwait`);
      });

      const pidsOf = async (file: string): Promise<number[]> =>
        (await readFile(file, "utf8")).trim().split(" ").map(Number);

      it("kills a plugin that overruns its timeout, with its children, and says so (code 11)", async () => {
        const pidFile = join(pidDir, "sleeper");
        const err = await execError(
          request("sleeper", {
            command: "DEL",
            timeoutMs: 300,
            baseEnv: { ...process.env, PID_FILE: pidFile },
          }),
        );
        expect(err.code).to.equal(11);
        expect(err.message).to.equal("sleeper: DEL timed out after 300 ms; plugin killed");
        const pids = await pidsOf(pidFile);
        expect(pids).to.have.length(2);
        expect(await waitGone(pids, GONE_GUARD_MS)).to.equal(true);
      });

      it("SIGKILLs a plugin that ignores SIGTERM once the grace has passed", async () => {
        const pidFile = join(pidDir, "stubborn");
        const started = Date.now();
        const err = await execError(
          request("stubborn", {
            timeoutMs: 300,
            killGraceMs: 300,
            baseEnv: { ...process.env, PID_FILE: pidFile },
          }),
        );
        expect(err.code).to.equal(11);
        // Not before the deadline and the grace: the SIGTERM did not end it, the SIGKILL did.
        expect(Date.now() - started).to.be.at.least(550);
        expect(await waitGone(await pidsOf(pidFile), GONE_GUARD_MS)).to.equal(true);
      });

      it("kills the plugin when the caller aborts", async () => {
        const pidFile = join(pidDir, "aborted");
        const controller = new AbortController();
        setTimeout(() => controller.abort(), 200);
        const err = await execError(
          request("sleeper", {
            signal: controller.signal,
            baseEnv: { ...process.env, PID_FILE: pidFile },
          }),
        );
        expect(err.code).to.equal(11);
        expect(err.message).to.equal("sleeper: ADD canceled; plugin killed");
        expect(await waitGone(await pidsOf(pidFile), GONE_GUARD_MS)).to.equal(true);
      });

      it("returns at the deadline when a process that left the group holds stdout open", async () => {
        const pidFile = join(pidDir, "escaped");
        // It holds stdout for an hour (killed below): a call that waited for it would not return.
        await fakePlugin(
          "escaper",
          `setsid sh -c 'echo $$ > "$PID_FILE"; exec sleep 3600' &\nwhile [ ! -s "$PID_FILE" ]; do sleep 0.01; done`,
        );
        try {
          const err = await execError(
            request("escaper", {
              timeoutMs: 300,
              killGraceMs: 200,
              baseEnv: { ...process.env, PID_FILE: pidFile },
            }),
          );
          expect(err.code).to.equal(11);
          expect(err.message).to.equal("escaper: ADD timed out after 300 ms; plugin killed");
        } finally {
          const [escaped] = await pidsOf(pidFile).catch(() => []);
          if (escaped) process.kill(escaped, "SIGKILL");
        }
      });

      it("kills a plugin that floods its output and says so (code 999)", async () => {
        await fakePlugin("flood", "exec yes");
        // Code 999, not the timeout's 11: the bound on output stopped it.
        const err = await execError(request("flood", { timeoutMs: 60_000 }));
        expect(err.code).to.equal(999);
        expect(err.message).to.equal("flood: ADD wrote more than 16777216 bytes of output");
      });

      it("does not start the plugin when the signal is already aborted", async () => {
        const marker = join(pidDir, "never-written");
        await fakePlugin("touch-marker", `touch "${marker}"`);
        const err = await execError(request("touch-marker", { signal: AbortSignal.abort() }));
        expect(err.code).to.equal(11);
        expect(await rejection(() => stat(marker))).to.have.property("code", "ENOENT");
      });
    });

    describe("resources and teardown", () => {
      it("holds no descriptor once a run has ended, garbage collected or not", async () => {
        await fakePlugin("cat-config", "cat");
        await collectGarbage();
        const before = await pipesAndEventfds();
        for (let i = 0; i < 20; i++) {
          expect(await execPlugin(request("cat-config", { stdin: `{"run":${i}}` }))).to.deep.equal({
            run: i,
          });
        }
        // At once: waiting could let a collection finalize what a run still held.
        expect(await pipesAndEventfds()).to.be.at.most(before);
      });

      // A worker's environment is torn down (and its addons unloaded) while the
      // pool's threads still run its plugins; only the native spawn has a pool.
      if (backend === "native")
        it("survives a worker that is terminated while its plugins run", async () => {
          const plugin = await fakePlugin("slow-ok", "sleep 0.3\necho '{}'");
          const addon = findNativeAddon({
            file: "build/Release/cni_driver_spawn.node",
            envVar: "CNI_DRIVER_SPAWN_ADDON",
          });
          expect(addon, "the spawn addon").to.be.a("string");
          const script = `
            const { Worker } = require("node:worker_threads");
            const [addon, plugin] = process.argv.slice(1);
            const worker = new Worker(
              \`const { parentPort, workerData } = require("node:worker_threads");
              const spawn = require(workerData.addon);
              for (let i = 0; i < 8; i++)
                spawn.spawn(workerData.plugin, [], Buffer.from("{}"), 1024, () => {});
              parentPort.postMessage("started");
              setInterval(() => {}, 1000);\`,
              { eval: true, workerData: { addon, plugin } },
            );
            worker.once("message", () => void worker.terminate());
            // The plugins end 0.3 s after the start: their jobs finish with the worker gone.
            worker.once("exit", () => setTimeout(() => process.stdout.write("survived"), 1000));
          `;
          const ended = await runNode(script, [addon as string, plugin]);
          expect(ended, ended.stderr).to.deep.include({
            code: 0,
            signal: null,
            stdout: "survived",
          });
        });
    });

    describe("text file busy", () => {
      it("retries the exec while the binary is open for writing, then succeeds", async () => {
        const path = await fakePlugin("being-installed", `echo '{"cniVersion":"1.0.0"}'`);
        const writer = await open(path, "r+");
        let writerClosed = false;
        const closed = new Promise<void>((resolve) => {
          setTimeout(() => {
            void writer.close().then(() => {
              writerClosed = true;
              resolve();
            });
          }, 1_500);
        });
        try {
          const out = await execPlugin(request("being-installed", { timeoutMs: 10_000 }));
          expect(out).to.deep.equal({ cniVersion: "1.0.0" });
          expect(writerClosed, "the exec succeeded only once the writer had closed").to.equal(true);
        } finally {
          await closed;
        }
      });

      it("gives up at the call's timeout while the binary stays busy", async () => {
        const path = await fakePlugin("stuck-install", "echo '{}'");
        const writer = await open(path, "r+");
        try {
          const started = Date.now();
          const err = await execError(request("stuck-install", { timeoutMs: 1_500 }));
          expect(err.code).to.equal(11);
          // Not before its timeout: it kept retrying until then.
          expect(Date.now() - started).to.be.at.least(1_400);
        } finally {
          await writer.close();
        }
      });
    });
  });
