/**
 * Every vector of test/vectors/shim-validation.json through the built shim
 * (dist/bin/cni-driver-shim), exec'd with exactly the vector's environment and
 * stdin. The unit tests run the same table through test/support/shim-config.ts.
 *
 * The config's socket is a tripwire (a unix socket that counts connections) and
 * its stateDir a temporary directory, each put in only where the vector's
 * config names none; a config that names an absolute socket of its own gets the
 * tripwire there. A refusal must be exit 1 with the CNI error JSON of the
 * vector's code and message, nothing on stderr, no connection, nothing written.
 * An "ok" VERSION prints the version info; any other "ok" vector must reach the
 * tripwire (the shim is stopped there: what follows is the driver's business).
 * "ok" vectors whose config sends the shim to the default socket are checked by
 * the unit test only.
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { expect } from "chai";
import { MAX_SOCKET_PATH_BYTES } from "../../src/cni/socket-path.js";
import { versionInfo } from "../../src/cni/versions.js";
import { isObject } from "../../src/common/json.js";
import { ensureShimBuilt } from "../support/runtimes.js";
import { execShim } from "../support/shim-exec.js";
import {
  isOkVector,
  loadShimVectors,
  type ShimVector,
  vectorEnv,
  vectorStdin,
} from "../support/shim-vectors.js";
import { Tripwire } from "../support/tripwire.js";

const vectors = loadShimVectors();

/** The config object a vector's stdin holds, when it is one. */
function configObject(v: ShimVector): Record<string, unknown> | undefined {
  if (typeof v.stdin !== "string") return undefined;
  try {
    const value: unknown = JSON.parse(v.stdin);
    return isObject(value) ? value : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The vector's stdin with `keys` added where its config lacks them, written in
 * at the opening brace so every other byte stays as the vector has it.
 */
function withKeys(v: ShimVector, keys: Record<string, string>): Buffer {
  const conf = configObject(v);
  if (!conf) return vectorStdin(v);
  const text = v.stdin as string;
  const add = Object.entries(keys)
    .filter(([k]) => !Object.hasOwn(conf, k))
    .map(([k, value]) => `${JSON.stringify(k)}:${JSON.stringify(value)}`);
  if (add.length === 0) return vectorStdin(v);
  const brace = text.indexOf("{");
  const empty = /^\{\s*\}/.test(text.slice(brace));
  const inserted = `${text.slice(0, brace + 1)}${add.join(",")}${empty ? "" : ","}${text.slice(brace + 1)}`;
  return Buffer.from(inserted, "utf8");
}

/** The socket the vector's own config names, when a tripwire can listen there. */
function ownSocket(v: ShimVector): string | undefined {
  const socket = configObject(v)?.socket;
  if (typeof socket === "string" && socket.startsWith("/")) {
    return Buffer.byteLength(socket) <= MAX_SOCKET_PATH_BYTES ? socket : undefined;
  }
  if (typeof v.stdin !== "string" && v.stdin.suffix) {
    const suffix = JSON.parse(v.stdin.suffix) as { socket?: unknown };
    if (typeof suffix.socket === "string") return suffix.socket;
  }
  return undefined;
}

/** Whether the config leaves the socket to the test (no `socket` key of its own). */
function socketLeftToTest(v: ShimVector): boolean {
  const conf = configObject(v);
  return conf !== undefined && !Object.hasOwn(conf, "socket");
}

function filesUnder(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { recursive: true }).map(String);
}

describe("shim validation vectors through the built shim (integration)", function () {
  this.timeout(30_000);
  let shimPath = "";
  let dir = "";
  let tripwire: Tripwire;
  /** Tripwires at sockets the vectors' configs name themselves. */
  const own = new Map<string, Tripwire>();
  const madeDirs: string[] = [];

  before(async function () {
    this.timeout(300_000);
    shimPath = ensureShimBuilt();
    dir = mkdtempSync(join(tmpdir(), "cni-driver-shim-vectors-"));
    tripwire = new Tripwire(join(dir, "tripwire.sock"));
    await tripwire.listen();
    for (const v of vectors) {
      const path = ownSocket(v);
      if (!path || own.has(path)) continue;
      if (!existsSync(dirname(path))) {
        mkdirSync(dirname(path), { recursive: true });
        madeDirs.push(dirname(path));
      }
      rmSync(path, { force: true });
      const t = new Tripwire(path);
      await t.listen();
      own.set(path, t);
    }
  });

  after(async () => {
    await tripwire?.close();
    for (const t of own.values()) await t.close();
    for (const d of madeDirs) rmSync(d, { recursive: true, force: true });
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const connections = (): number =>
    tripwire.connections + [...own.values()].reduce((n, t) => n + t.connections, 0);

  vectors.forEach((v, i) => {
    const want = v.expect;
    if (isOkVector(v) && v.env.CNI_COMMAND !== "VERSION" && !socketLeftToTest(v) && !ownSocket(v))
      return;
    it(`${v.name}: ${"ok" in want ? "ok" : `code ${want.code}`}`, async () => {
      const stateDir = join(dir, `state-${i}`);
      const stdin = withKeys(v, { socket: tripwire.path, stateDir });
      const before = connections();

      if (isOkVector(v) && v.env.CNI_COMMAND !== "VERSION") {
        const wire = own.get(ownSocket(v) ?? "") ?? tripwire;
        const reached = wire.nextConnection();
        const r = await execShim(shimPath, vectorEnv(v), stdin, 25_000, { killWhen: reached });
        expect(connections() - before, `the call reached the socket; ${r.stdout}`).to.be.above(0);
        expect(r.stderr).to.equal("");
        return;
      }

      const r = await execShim(shimPath, vectorEnv(v), stdin);
      await new Promise((resolve) => setTimeout(resolve, 10));
      if ("ok" in want) {
        expect(r.status, `${r.stdout}${r.stderr}`).to.equal(0);
        expect(r.json).to.deep.equal(versionInfo());
      } else {
        expect(r.status, `exit status; stdout ${r.stdout} stderr ${r.stderr}`).to.equal(1);
        expect(r.json, `stdout is the CNI error JSON: ${r.stdout}`).to.be.an("object");
        expect(r.json?.code, r.stdout).to.equal(want.code);
        expect(String(r.json?.msg), r.stdout).to.match(new RegExp(want.msg));
      }
      expect(r.stderr, "stderr").to.equal("");
      expect(connections() - before, "calls that reached a socket").to.equal(0);
      expect(filesUnder(stateDir), "files in the state dir").to.deep.equal([]);
    });
  });
});
