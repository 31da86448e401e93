/**
 * bench/plumbing: the built-in plugin's plumbing calls alone, per backend, in
 * one process: createVethPair (onto a bridge) + configureContainerSide (address,
 * default route) = "set up", deletePodInterface = "tear down".
 *
 * Each pod gets a fresh netns made before the clock starts. Rounds alternate
 * netlink / iproute2 in ABBA order; a few warm-up pods per backend come first.
 * Reported per backend: latency of each phase (p50, p90), CPU of this process
 * and what it exec'd per pod, and how long the main thread's event loop was
 * busy per pod (spawn blocks it; the netlink worker does not), and pods set up
 * and torn down per second of wall time.
 *
 * Run as root: `node --import tsx bench/plumbing.ts [pods per backend, default 50] [concurrency, default 1]`.
 */
import { spawnSync } from "node:child_process";
import { performance } from "node:perf_hooks";
import { choosePlumbing, type PlumbingBackendName } from "../src/plumbing/backend.js";
import { randomMac } from "../src/plumbing/mac.js";
import type { PodPlumbing } from "../src/plumbing/pod-plumbing.js";
import { uniqueTag } from "../test/support/netns.js";
import { ipBatch, percentile, processCpuMs } from "./common.js";

const PODS = Number(process.argv[2] ?? 50);
const CONCURRENCY = Number(process.argv[3] ?? 1);
const WARMUP = 3;
const tag = uniqueTag();
const bridge = `bpb${tag}`;

interface Samples {
  setup: number[];
  teardown: number[];
  cpuMs: number;
  loopBusyMs: number;
  pods: number;
  wallMs: number;
}

/** CPU of this process and the children it reaped, in ms. */
const cpuMs = (): number => processCpuMs([process.pid]);

let podSeq = 0;

async function round(plumbing: PodPlumbing, pods: number, into?: Samples): Promise<void> {
  const names = Array.from({ length: pods }, () => `bp-${tag}-${podSeq++}`);
  ipBatch(names.map((n) => `netns add ${n}`));
  await new Promise((r) => setTimeout(r, 100));
  const elu0 = performance.eventLoopUtilization();
  const cpu0 = cpuMs();
  const wall0 = performance.now();
  let next = 0;
  const worker = async () => {
    while (next < names.length) {
      const i = next++;
      const name = names[i] as string;
      const spec = {
        netns: `/run/netns/${name}`,
        ifName: "eth0",
        hostIfName: `bpv${tag}${i}`.slice(0, 15),
        mtu: 1500,
        containerMac: randomMac(),
        hostMac: randomMac(),
      };
      const t0 = performance.now();
      await plumbing.createVethPair(spec, { bridge });
      await plumbing.configureContainerSide({
        netns: spec.netns,
        ifName: "eth0",
        addresses: [{ cidr: `10.244.235.${(i % 250) + 2}/24` }],
        routes: [{ dst: "0.0.0.0/0", gw: "10.244.235.1" }],
      });
      const t1 = performance.now();
      await plumbing.deletePodInterface({
        netns: spec.netns,
        ifName: "eth0",
        hostIfName: spec.hostIfName,
        hostMac: spec.hostMac,
      });
      const t2 = performance.now();
      into?.setup.push(t1 - t0);
      into?.teardown.push(t2 - t1);
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  const elu = performance.eventLoopUtilization(elu0);
  if (into) {
    into.cpuMs += cpuMs() - cpu0;
    into.loopBusyMs += elu.active;
    into.pods += pods;
    into.wallMs += performance.now() - wall0;
  }
  ipBatch(names.map((n) => `netns del ${n}`));
}

async function main(): Promise<void> {
  if (process.getuid?.() !== 0) throw new Error("run as root");
  const results: Record<PlumbingBackendName, Samples> = {
    netlink: { setup: [], teardown: [], cpuMs: 0, loopBusyMs: 0, pods: 0, wallMs: 0 },
    iproute2: { setup: [], teardown: [], cpuMs: 0, loopBusyMs: 0, pods: 0, wallMs: 0 },
  };
  const impl: Record<PlumbingBackendName, PodPlumbing> = {
    netlink: (await choosePlumbing("netlink")).plumbing,
    iproute2: (await choosePlumbing("iproute2")).plumbing,
  };
  await impl.iproute2.ensureBridge(bridge, ["10.244.235.1/24"], 1500);
  try {
    for (const b of ["netlink", "iproute2"] as const) await round(impl[b], WARMUP);
    const quarter = Math.ceil(PODS / 2);
    for (const b of ["netlink", "iproute2", "iproute2", "netlink"] as const)
      await round(impl[b], quarter, results[b]);
  } finally {
    spawnSync("ip", ["link", "del", bridge], { stdio: "ignore" });
  }
  console.log(`pods per backend: ${results.netlink.pods}, concurrency ${CONCURRENCY}`);
  console.log(
    "backend    set-up p50   p90   tear-down p50   p90   pods/s   CPU ms/pod   main-loop busy ms/pod",
  );
  for (const [name, s] of Object.entries(results)) {
    console.log(
      `${name.padEnd(10)} ${percentile(s.setup, 50).toFixed(2).padStart(10)} ${percentile(s.setup, 90).toFixed(2).padStart(5)} ${percentile(s.teardown, 50).toFixed(2).padStart(15)} ${percentile(s.teardown, 90).toFixed(2).padStart(5)} ${((s.pods * 1000) / s.wallMs).toFixed(0).padStart(8)} ${(s.cpuMs / s.pods).toFixed(2).padStart(12)} ${(s.loopBusyMs / s.pods).toFixed(2).padStart(23)}`,
    );
  }
}

await main();
