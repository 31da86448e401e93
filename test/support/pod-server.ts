/**
 * A pod-side TCP server for host-port tests: a Node one-liner inside the test's
 * netns, answering every connection with a fixed reply. Bounded waits only.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { undoOnInterrupt } from "./interrupt-cleanup.js";

/** The port the pod servers listen on inside their netns. */
export const CONTAINER_PORT = 8080;

/** A TCP server in the netns answering every connection with `reply`; resolves once it listens. */
export async function startPodServer(netns: string, reply: string): Promise<ChildProcess> {
  const script = `require("node:net").createServer((s) => s.end(${JSON.stringify(reply)}))
    .listen(${CONTAINER_PORT}, "0.0.0.0", () => console.log("listening"));`;
  return startNetnsScript(netns, script);
}

/**
 * A Node script inside the netns (`ip netns exec`); resolves once it prints
 * "listening", rejects when it exits first or has not within 10 s.
 */
export async function startNetnsScript(netns: string, script: string): Promise<ChildProcess> {
  const env = { ...process.env };
  delete env.NODE_EXTRA_CA_CERTS;
  delete env.NODE_OPTIONS;
  const child = spawn("ip", ["netns", "exec", netns, process.execPath, "-e", script], {
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  child.once(
    "exit",
    undoOnInterrupt(() => child.kill("SIGKILL")),
  );
  let stderr = "";
  child.stderr?.on("data", (b: Buffer) => {
    stderr += b.toString();
  });
  let timer: NodeJS.Timeout | undefined;
  try {
    await new Promise<void>((resolve, reject) => {
      child.stdout?.on("data", (b: Buffer) => {
        if (b.toString().includes("listening")) resolve();
      });
      child.once("exit", (code) =>
        reject(new Error(`script in ${netns} exited with ${code}: ${stderr}`)),
      );
      timer = setTimeout(
        () => reject(new Error(`script in ${netns} not listening after 10 s: ${stderr}`)),
        10_000,
      );
    });
  } catch (err) {
    child.kill("SIGKILL");
    throw err;
  } finally {
    clearTimeout(timer);
  }
  return child;
}

export function stopPodServer(child: ChildProcess | undefined): Promise<void> {
  if (!child || child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    child.once("exit", () => resolve());
    child.kill("SIGKILL");
  });
}

/** `n` distinct ports in 20000-30000 for host mappings (random, so parallel runs rarely meet). */
export function randomPorts(n: number): number[] {
  const ports = new Set<number>();
  while (ports.size < n) ports.add(20000 + Math.floor(Math.random() * 10001));
  return [...ports];
}
