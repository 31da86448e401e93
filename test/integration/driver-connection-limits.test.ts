/**
 * The driver's socket bounds its connections, seen through real sockets: one
 * that never starts HTTP/2 is closed after --connection-preface-timeout, and
 * its descriptor goes with it; one with no call in flight is closed after
 * --connection-idle-timeout; past --max-connections one more is closed at
 * once, logged in one JSON line, and calls are served again once one closes.
 * Each timeout runs on a driver where the other is an hour, so what closed a
 * connection is the timeout under test. Every wait is for an event (a close,
 * a log line), bounded only by the test's timeout.
 */
import { readdirSync } from "node:fs";
import http2 from "node:http2";
import net from "node:net";
import { expect } from "chai";
import { DriverClient } from "../../src/driver/rpc/client.js";
import { DriverHarness, expectNoCniError } from "../support/driver-harness.js";
import { requireReferencePlugins, requireRoot } from "../support/requirements.js";
import { until } from "../support/until.js";

const MAX_CONNECTIONS = 4;

function openDescriptors(pid: number): number {
  return readdirSync(`/proc/${pid}/fd`).length;
}

function connectRaw(socket: string): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const s = net.connect(socket, () => resolve(s));
    s.once("error", reject);
    s.on("error", () => {});
    s.resume(); // read what the driver sends (its SETTINGS), so its close reaches us as a 'close' event
  });
}

function closed(s: net.Socket | http2.ClientHttp2Session): Promise<void> {
  return new Promise((resolve) => {
    if (s.destroyed) resolve();
    else s.once("close", () => resolve());
  });
}

/** An HTTP/2 session on the socket that has sent its preface (and SETTINGS). */
function connectHttp2(socket: string): Promise<http2.ClientHttp2Session> {
  return new Promise((resolve, reject) => {
    const session = http2.connect("http://localhost", {
      createConnection: () => net.connect(socket),
    });
    session.once("remoteSettings", () => resolve(session));
    session.once("error", reject);
    session.once("close", () => reject(new Error("closed before the driver's SETTINGS")));
    session.on("error", () => {}); // the driver may close it later: that is what some tests wait for
  });
}

/** A CniStatus call started and never finished: the session has a call in flight. */
function holdCall(session: http2.ClientHttp2Session): http2.ClientHttp2Stream {
  const stream = session.request({
    ":method": "POST",
    ":path": "/cnidriver.v1.CNIDriver/CniStatus",
    "content-type": "application/grpc",
    te: "trailers",
  });
  stream.on("error", () => {});
  return stream;
}

describe("cni-driver serve: connection limits on the socket (integration)", function () {
  this.timeout(120_000);
  let h: DriverHarness;
  const opened: Array<net.Socket | http2.ClientHttp2Session> = [];

  /** Restarts the driver with these timeouts (seconds). */
  async function restartWith(prefaceSeconds: number, idleSeconds: number): Promise<void> {
    await h.stop();
    h.opts.extraFlags = [
      "--max-connections",
      String(MAX_CONNECTIONS),
      "--connection-preface-timeout",
      String(prefaceSeconds),
      "--connection-idle-timeout",
      String(idleSeconds),
    ];
    await h.start();
  }

  before(async function () {
    requireRoot(this);
    requireReferencePlugins(this, "host-local");
    h = new DriverHarness({ subnetOctet: 117 });
    await h.writeDefaultConfig();
    await h.start();
  });

  after(async () => {
    for (const s of opened) s.destroy();
    await h?.cleanup();
  });

  it("closes connections that never send the HTTP/2 preface, and their descriptors go", async () => {
    await restartWith(1, 3600);
    const pid = h.pid as number;
    // The harness's client may still hold a connection here: that only makes the count higher.
    const idle = openDescriptors(pid);
    const silent: net.Socket[] = [];
    for (let i = 0; i < MAX_CONNECTIONS; i++) silent.push(await connectRaw(h.socket));
    // Part of the preface is not the preface.
    (silent[0] as net.Socket).write("PRI * HTTP/2.0\r\n");
    opened.push(...silent);
    await Promise.all(silent.map(closed));
    await until(() => openDescriptors(pid) <= idle, `descriptors back to ${idle}`, 30_000);
  });

  it("closes a connection with no call in flight once idle", async () => {
    await restartWith(3600, 1);
    const session = await connectHttp2(h.socket);
    opened.push(session);
    let goaway = false;
    session.once("goaway", () => {
      goaway = true;
    });
    await closed(session);
    expect(goaway, "the driver said GOAWAY before closing").to.equal(true);
  });

  it(`refuses connection ${MAX_CONNECTIONS + 1} at once, logs it, and serves again once one closes`, async () => {
    // Connections that hold a call are neither silent nor idle: they stay, however long.
    await restartWith(1, 1);
    // The harness's client has a connection since the start: a new client has none until its first call.
    h.client.close();
    h.client = new DriverClient(h.socket);
    const held: http2.ClientHttp2Session[] = [];
    for (let i = 0; i < MAX_CONNECTIONS; i++) {
      // The old client's connection may not have closed on the driver's side yet: then try again.
      const session = await until(
        () => connectHttp2(h.socket).catch(() => undefined),
        `held connection ${i + 1}`,
      );
      held.push(session);
      holdCall(session);
    }
    opened.push(...held);

    const extra = await connectRaw(h.socket);
    opened.push(extra);
    await closed(extra);
    const line = await until(
      () =>
        h.logs
          .split("\n")
          .filter(Boolean)
          .map((l) => JSON.parse(l) as Record<string, unknown>)
          .find((l) => String(l.msg).startsWith("refused a connection")),
      "the refusal's log line",
    );
    expect(line).to.include({ level: "warn", maxConnections: MAX_CONNECTIONS, open: 4 });
    expect(String(line.msg)).to.include("--max-connections");
    for (const session of held) expect(session.closed, "a held session").to.equal(false);

    (held[0] as http2.ClientHttp2Session).destroy();
    await until(
      async () => (await h.client.cniStatus({}, { timeoutMs: 5000 })).error === null,
      "a call served after one connection closed",
      30_000,
    );
    const status = await h.client.cniStatus();
    expectNoCniError(status);
    expect(status.ready).to.equal(true);
  });
});
