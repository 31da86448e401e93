/**
 * The demo behind `npm run demo`. Everything it makes is under a temporary root or
 * named with a random tag, and removed at the end, also on failure.
 */
import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parse } from "yaml";
import { createLogger } from "../src/common/logger.js";
import { startDriver } from "../src/driver/lifecycle/daemon.js";
import { DriverClient } from "../src/driver/rpc/client.js";

const tag = randomBytes(3).toString("hex");
const root = mkdtempSync(join(tmpdir(), "cni-driver-demo-"));
const bridge = `demo${tag}`;
const podCidr = "10.244.250.0/24";
const pods = ["a", "b"].map((p) => ({
  name: `demo-${tag}-${p}`,
  netns: `cnidemo-${tag}-${p}`,
  id: `demo${tag}${p}`,
}));

function sh(cmd: string, args: string[]): { status: number; out: string } {
  const r = spawnSync(cmd, args, { encoding: "utf8", timeout: 15_000 });
  return {
    status: r.status ?? -1,
    out: `${r.stdout ?? ""}${r.stderr ?? ""}${r.error ? `${r.error.message}\n` : ""}`,
  };
}

/** Runs a command the demo cannot go on without; its failure carries the command's own output. */
function mustRun(cmd: string, args: string[]): string {
  const r = sh(cmd, args);
  if (r.status !== 0) {
    throw new Error(
      `\`${[cmd, ...args].join(" ")}\` exited ${r.status}:\n${r.out.trim() || "(no output)"}`,
    );
  }
  return r.out;
}

function say(msg: string): void {
  process.stdout.write(`${msg}\n`);
}

async function main(): Promise<void> {
  // The embedded default config, as the DaemonSet would mount it.
  const cm = parse(
    readFileSync(new URL("../configmap/cni-driver-config.yaml", import.meta.url), "utf8"),
  ) as {
    data: Record<string, string>;
  };
  const configDir = join(root, "etc-cni-driver");
  mkdirSync(configDir);
  for (const [key, value] of Object.entries(cm.data)) {
    // Only the bridge name changes, so the demo never touches a real node's bridge.
    writeFileSync(
      join(configDir, key),
      key.endsWith(".conflist") ? value.replaceAll('"midokube-br0"', `"${bridge}"`) : value,
    );
  }
  say(
    `config: configmap/cni-driver-config.yaml (networks: ${Object.keys(cm.data)
      .filter((k) => k.endsWith(".conflist"))
      .join(", ")}; bridge renamed ${bridge}; pod CIDR ${podCidr})`,
  );

  const socket = join(root, "run", "driver.sock");
  const driver = await startDriver(
    {
      socket,
      configDir,
      stateDir: join(root, "state"),
      cacheDir: join(root, "cache"),
      binDirs: ["/usr/lib/cni", "/opt/cni/bin"],
      hostLocalDataDir: join(root, "networks"),
      podCidrs: { v4: podCidr },
      healthAddr: "127.0.0.1:0",
      logLevel: "warn",
      pluginTimeoutMs: 30_000,
      maxConcurrent: 16,
      drainTimeoutMs: 5000,
    },
    createLogger({ level: "warn", name: "cni-driver" }),
  );
  const client = new DriverClient(socket);
  try {
    const status = await client.cniStatus();
    say(
      `driver serving on ${socket}: ready=${status.ready}, version ${status.driver_version}, health http://${driver.healthAddress}/readyz`,
    );
    const addrs: string[] = [];
    for (const p of pods) {
      mustRun("ip", ["netns", "add", p.netns]);
      const res = await client.setUpPod({
        pod: { namespace: "default", name: p.name, uid: "" },
        container_id: p.id,
        netns: `/run/netns/${p.netns}`,
        ifname: "eth0",
      });
      if (res.error)
        throw new Error(`SetUpPod ${p.name}: CNI error ${res.error.code}: ${res.error.msg}`);
      const ip = res.result?.ips[0]?.address ?? "?";
      const host = res.result?.interfaces.find((i) => !i.sandbox)?.name;
      addrs.push(ip.split("/")[0] ?? "");
      say(
        `pod ${p.name}: eth0 ${ip} via ${res.result?.ips[0]?.gateway} (host veth ${host} on ${bridge})`,
      );
    }
    const ping = mustRun("ip", [
      "netns",
      "exec",
      pods[0]!.netns,
      "ping",
      "-c",
      "3",
      "-i",
      "0.2",
      "-W",
      "2",
      addrs[1]!,
    ]);
    say(`ping ${pods[0]!.name} -> ${pods[1]!.name} (${addrs[1]}):`);
    say(
      ping
        .trim()
        .split("\n")
        .filter((l) => /bytes from|packet loss/.test(l))
        .map((l) => `  ${l}`)
        .join("\n"),
    );
    for (const p of pods) {
      const res = await client.tearDownPod({
        container_id: p.id,
        netns: `/run/netns/${p.netns}`,
        ifname: "eth0",
        pod: { namespace: "default", name: p.name, uid: "" },
      });
      if (res.error)
        throw new Error(`TearDownPod ${p.name}: CNI error ${res.error.code}: ${res.error.msg}`);
      say(`pod ${p.name}: torn down`);
    }
    const leases = readdirSync(join(root, "networks", "pod-network")).filter((f) => /^\d/.test(f));
    say(`leases left: ${leases.length}, attachments: ${(await client.cniStatus()).attachments}`);
  } finally {
    client.close();
    await driver.stop();
  }
}

function cleanup(): void {
  // Host veths first (a dying netns takes its pair down only asynchronously), then the rest.
  const ports = sh("ip", ["-o", "link", "show", "master", bridge]).out;
  for (const line of ports.split("\n")) {
    const name = (line.split(": ")[1] ?? "").split("@")[0];
    if (name) sh("ip", ["link", "del", name]);
  }
  for (const p of pods) sh("ip", ["netns", "del", p.netns]);
  sh("ip", ["link", "del", bridge]);
  rmSync(root, { recursive: true, force: true });
}

// A reader that goes away (`npm run demo | head`) or a signal must not skip the cleanup.
process.stdout.on("error", () => {});
for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
  process.once(sig, () => {
    cleanup();
    process.exit(130);
  });
}

main().then(
  () => {
    cleanup();
    const left =
      sh("ip", ["-o", "link", "show"]).out.includes(bridge) ||
      sh("ip", ["netns", "list"]).out.includes(tag);
    say(
      left
        ? "cleanup: something was left behind"
        : "cleanup: nothing left behind (namespaces, veths, bridge, temp root removed)",
    );
    process.exitCode = left ? 1 : 0;
  },
  (err: unknown) => {
    cleanup();
    process.stderr.write(`demo failed: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = 1;
  },
);
