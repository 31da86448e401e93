/**
 * NetworkPolicy tests in the shape of upstream's test/e2e/network/netpol: a
 * model of namespaces x, y, z, each with pods a, b, c (labelled `pod: <name>`,
 * namespaces `ns: <name>` and `kubernetes.io/metadata.name: <name>`), every pod
 * serving TCP and UDP on ports 80 and 81 under the upstream port names
 * (`serve-80-tcp` …). A case is a set of policies and the Reachability it
 * should leave (from pod → to pod, on one port and protocol); the whole matrix
 * is probed and, when it differs, printed as upstream's truth tables.
 *
 * Probing is done by one long-lived Node process per pod inside its netns (a
 * PodAgent): it serves the four ports and takes probe commands on stdin, so a
 * 9×9 matrix costs no process starts and runs all at once, each probe bounded.
 *
 * SCTP, which upstream also models, is left out: Node has no SCTP sockets.
 */
import { type ChildProcess, spawn } from "node:child_process";
import type { LabelSelector } from "../../src/policy/types.js";
import { nodeEnv } from "./cluster-nodes.js";
import { patient } from "./patience.js";

// ---------------------------------------------------------------------------
// The model
// ---------------------------------------------------------------------------

export const NAMESPACES = ["x", "y", "z"] as const;
export const POD_NAMES = ["a", "b", "c"] as const;
export const PORTS = [80, 81] as const;
export type Protocol = "TCP" | "UDP";
export const PROTOCOLS: readonly Protocol[] = ["TCP", "UDP"];

/** The label the API server puts on every Namespace (upstream's namespaceLabelKey). */
export const NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name";

/** "x/a": a pod by namespace and name, upstream's PodString. */
export type PodString = string;

export function podString(namespace: string, name: string): PodString {
  return `${namespace}/${name}`;
}

/** The container port name upstream gives each server: `serve-80-tcp`. */
export function portName(port: number, protocol: Protocol): string {
  return `serve-${port}-${protocol.toLowerCase()}`;
}

/** The labels every model namespace carries (upstream's, plus the one the API server sets). */
export function namespaceLabels(namespace: string): Record<string, string> {
  return { ns: namespace, [NAMESPACE_NAME_LABEL]: namespace };
}

/** The labels every model pod carries. */
export function podLabels(name: string): Record<string, string> {
  return { pod: name };
}

/** A Namespace as the API server stores it (the fake's put() fills in none of this by itself). */
export function namespaceObject(namespace: string): {
  metadata: { name: string; labels: Record<string, string> };
  spec: { finalizers: string[] };
  status: { phase: string };
} {
  return {
    metadata: { name: namespace, labels: namespaceLabels(namespace) },
    spec: { finalizers: ["kubernetes"] },
    status: { phase: "Active" },
  };
}

/**
 * A Pod bound to `nodeName`, as the scheduler leaves it (Pending, before
 * kubelet writes its status): one container per port and protocol, each with
 * the upstream container and port names.
 */
export function podObject(
  namespace: string,
  name: string,
  nodeName: string,
): {
  metadata: { name: string; namespace: string; labels: Record<string, string> };
  spec: Record<string, unknown>;
  status: { phase: string };
} {
  const containers = PORTS.flatMap((port) =>
    PROTOCOLS.map((protocol) => ({
      name: `cont-${port}-${protocol.toLowerCase()}`,
      image: "registry.k8s.io/e2e-test-images/agnhost:2.53",
      ports: [{ containerPort: port, name: portName(port, protocol), protocol }],
    })),
  );
  return {
    metadata: { name, namespace, labels: podLabels(name) },
    spec: { nodeName, terminationGracePeriodSeconds: 0, containers },
    status: { phase: "Pending" },
  };
}

/** Every model pod, namespace by namespace: x/a, x/b, x/c, y/a … */
export function allPodStrings(): PodString[] {
  return NAMESPACES.flatMap((ns) => POD_NAMES.map((name) => podString(ns, name)));
}

export function splitPodString(pod: PodString): { namespace: string; name: string } {
  const [namespace = "", name = ""] = pod.split("/");
  return { namespace, name };
}

// ---------------------------------------------------------------------------
// NetworkPolicy objects, in the wire's shape
// ---------------------------------------------------------------------------

export interface PolicyPeer {
  podSelector?: LabelSelector;
  namespaceSelector?: LabelSelector;
  ipBlock?: { cidr: string; except?: string[] };
}

export interface PolicyPort {
  protocol?: Protocol | "SCTP";
  /** A number, or a container port's name. */
  port?: number | string;
  endPort?: number;
}

export interface IngressRule {
  from?: PolicyPeer[];
  ports?: PolicyPort[];
}

export interface EgressRule {
  to?: PolicyPeer[];
  ports?: PolicyPort[];
}

export interface NetworkPolicySpec {
  podSelector: LabelSelector;
  policyTypes?: ("Ingress" | "Egress")[];
  ingress?: IngressRule[];
  egress?: EgressRule[];
}

export interface NetworkPolicy {
  apiVersion: "networking.k8s.io/v1";
  kind: "NetworkPolicy";
  metadata: { name: string; namespace: string };
  spec: NetworkPolicySpec;
}

/**
 * A NetworkPolicy as the API server stores it: with the defaults it fills in
 * (policyTypes Ingress, plus Egress when there are egress rules; every port's
 * protocol TCP), which the fake API server does not.
 */
export function networkPolicy(
  namespace: string,
  name: string,
  spec: NetworkPolicySpec,
): NetworkPolicy {
  const withProtocol = (ports?: PolicyPort[]) =>
    ports?.map((p) => ({ ...p, protocol: p.protocol ?? "TCP" }));
  const policyTypes =
    spec.policyTypes ??
    (spec.egress && spec.egress.length > 0 ? ["Ingress", "Egress"] : ["Ingress"]);
  const out: NetworkPolicySpec = { podSelector: spec.podSelector, policyTypes };
  if (spec.ingress)
    out.ingress = spec.ingress.map((r) => ({
      ...r,
      ...(r.ports ? { ports: withProtocol(r.ports) } : {}),
    }));
  if (spec.egress)
    out.egress = spec.egress.map((r) => ({
      ...r,
      ...(r.ports ? { ports: withProtocol(r.ports) } : {}),
    }));
  return {
    apiVersion: "networking.k8s.io/v1",
    kind: "NetworkPolicy",
    metadata: { name, namespace },
    spec: out,
  };
}

// ---------------------------------------------------------------------------
// Truth tables and reachability (upstream's truthtable.go and reachability.go)
// ---------------------------------------------------------------------------

/** n×m booleans, one per ordered pair (from, to); undefined until set. */
export class TruthTable {
  private readonly values = new Map<string, Map<string, boolean | undefined>>();

  constructor(
    readonly froms: readonly string[],
    readonly tos: readonly string[],
    defaultValue?: boolean,
  ) {
    for (const from of froms) {
      const row = new Map<string, boolean | undefined>();
      for (const to of tos) row.set(to, defaultValue);
      this.values.set(from, row);
    }
  }

  private row(from: string): Map<string, boolean | undefined> {
    const row = this.values.get(from);
    if (!row) throw new Error(`truth table: from-key ${from} not found`);
    return row;
  }

  private checkTo(to: string): void {
    if (!this.tos.includes(to)) throw new Error(`truth table: to-key ${to} not found`);
  }

  set(from: string, to: string, value: boolean): void {
    this.checkTo(to);
    this.row(from).set(to, value);
  }

  setAllFrom(from: string, value: boolean): void {
    const row = this.row(from);
    for (const to of this.tos) row.set(to, value);
  }

  setAllTo(to: string, value: boolean): void {
    this.checkTo(to);
    for (const from of this.froms) this.row(from).set(to, value);
  }

  get(from: string, to: string): boolean | undefined {
    this.checkTo(to);
    return this.row(from).get(to);
  }

  isComplete(): boolean {
    return this.froms.every((f) => this.tos.every((t) => this.get(f, t) !== undefined));
  }

  /** A table of the same keys: true where this and `other` agree. */
  compare(other: TruthTable): TruthTable {
    const out = new TruthTable(this.froms, this.tos);
    for (const from of this.froms)
      for (const to of this.tos) out.set(from, to, this.get(from, to) === other.get(from, to));
    return out;
  }

  /**
   * Upstream's rendering: a header of the tos, one row per from; `.` true, `X`
   * false, `?` unset, and `-` where `ignored` says the cell does not count.
   */
  prettyPrint(indent = "", ignored: (from: string, to: string) => boolean = () => false): string {
    const width = Math.max(1, ...this.froms.map((f) => f.length), ...this.tos.map((t) => t.length));
    const cell = (s: string) => s.padEnd(width + 1);
    const lines = [indent + ["-", ...this.tos].map(cell).join("").trimEnd()];
    for (const from of this.froms) {
      const marks = this.tos.map((to) => {
        const v = this.get(from, to);
        return ignored(from, to) ? "-" : v === undefined ? "?" : v ? "." : "X";
      });
      lines.push(indent + [from, ...marks].map(cell).join("").trimEnd());
    }
    return lines.join("\n");
  }
}

/** Matches pods by namespace, name, or both; an empty field matches any (upstream's Peer). */
export interface Peer {
  namespace?: string;
  pod?: string;
}

function peerMatches(peer: Peer, pod: PodString): boolean {
  const { namespace, name } = splitPodString(pod);
  return (
    (peer.namespace === undefined || peer.namespace === namespace) &&
    (peer.pod === undefined || peer.pod === name)
  );
}

export interface ReachabilitySummary {
  correct: number;
  incorrect: number;
  /** Loopback (a pod to itself): never counted, as upstream (no policy semantics defined). */
  ignored: number;
  comparison: TruthTable;
}

/** What every pod should reach (expected) and did (observed), upstream's Reachability. */
export class Reachability {
  readonly expected: TruthTable;
  observed: TruthTable;

  constructor(
    readonly pods: readonly PodString[] = allPodStrings(),
    defaultExpectation = true,
  ) {
    this.expected = new TruthTable(pods, pods, defaultExpectation);
    this.observed = new TruthTable(pods, pods);
  }

  /** Expects every pod to reach itself (upstream calls it after the other rules). */
  allowLoopback(): this {
    for (const p of this.pods) this.expected.set(p, p, true);
    return this;
  }

  expect(from: PodString, to: PodString, connected: boolean): this {
    this.expected.set(from, to, connected);
    return this;
  }

  /** Everything into `pod` allowed or denied. */
  expectAllIngress(pod: PodString, connected: boolean): this {
    this.expected.setAllTo(pod, connected);
    return this;
  }

  /** Everything out of `pod` allowed or denied. */
  expectAllEgress(pod: PodString, connected: boolean): this {
    this.expected.setAllFrom(pod, connected);
    return this;
  }

  expectPeer(from: Peer, to: Peer, connected: boolean): this {
    for (const f of this.pods) {
      if (!peerMatches(from, f)) continue;
      for (const t of this.pods) if (peerMatches(to, t)) this.expected.set(f, t, connected);
    }
    return this;
  }

  observe(from: PodString, to: PodString, connected: boolean): void {
    this.observed.set(from, to, connected);
  }

  /** Starts a fresh set of observations (a retry probes the whole matrix again). */
  resetObserved(): void {
    this.observed = new TruthTable(this.pods, this.pods);
  }

  summary(ignoreLoopback = true): ReachabilitySummary {
    const comparison = this.expected.compare(this.observed);
    let correct = 0;
    let incorrect = 0;
    let ignored = 0;
    for (const from of this.pods) {
      for (const to of this.pods) {
        if (ignoreLoopback && from === to) ignored++;
        else if (comparison.get(from, to)) correct++;
        else incorrect++;
      }
    }
    return { correct, incorrect, ignored, comparison };
  }

  /** The three tables, as upstream's PrintSummary logs them. */
  printSummary(title: string): string {
    const { correct, incorrect, ignored, comparison } = this.summary();
    return [
      `${title}: correct ${correct}, incorrect ${incorrect}, ignored (loopback) ${ignored}`,
      "",
      "expected:",
      this.expected.prettyPrint("  "),
      "",
      "observed:",
      this.observed.prettyPrint("  "),
      "",
      "comparison (X: observed differs from expected; -: loopback, not counted):",
      comparison.prettyPrint("  ", (from, to) => from === to),
    ].join("\n");
  }
}

// ---------------------------------------------------------------------------
// The prober
// ---------------------------------------------------------------------------

/** A probe's bound: about a second, as upstream's, stretched by the patience factor. */
export const PROBE_TIMEOUT_MS = patient(1000);
/** How long a matrix may take to come right (policy lands asynchronously on remote nodes). */
export const CONVERGE_MS = patient(5000);

export interface ProbeTarget {
  host: string;
  port: number;
  protocol: Protocol;
}

export interface ProbeAnswer {
  ok: boolean;
  /** What the server said: its pod string for TCP, the echoed datagram for UDP. */
  reply?: string;
  /** Why not, when not ok: an errno code, "timeout", "closed". */
  err?: string;
}

/**
 * The agent's script: (a) unless told not to, serves TCP and UDP on ports 80
 * and 81 on every address of its netns (TCP: writes its name and a newline,
 * then echoes what it gets until the client leaves, so one server also serves
 * a held connection; UDP: echoes each datagram); (b) reads probe commands, one
 * JSON line each, `{id, host, port, protocol, timeoutMs}` and answers `{id,
 * ok, reply, err}`: TCP connects and waits for the greeting line; UDP sends
 * from a connected socket (so an ICMP error is seen) three times within the
 * timeout and waits for an echo. It exits when its stdin closes.
 */
function agentScript(name: string, serve: boolean): string {
  return `"use strict";
const net = require("node:net");
const dgram = require("node:dgram");
const NAME = ${JSON.stringify(name)};
let pending = 0;
const ready = () => { if (--pending === 0) process.stdout.write("listening\\n"); };
const fail = (e) => { process.stderr.write(String(e && e.stack || e) + "\\n"); process.exit(1); };
if (${JSON.stringify(serve)}) {
  for (const port of [80, 81]) {
    pending += 2;
    const tcp = net.createServer((s) => {
      s.on("error", () => {});
      s.setTimeout(60000, () => s.destroy());
      s.write(NAME + "\\n");
      s.on("data", (d) => s.write(d));
    });
    tcp.on("error", fail);
    tcp.listen({ port, host: "::", ipv6Only: false }, ready);
    const udp = dgram.createSocket({ type: "udp6", ipv6Only: false });
    udp.on("message", (msg, rinfo) => udp.send(msg, rinfo.port, rinfo.address));
    udp.on("error", fail);
    udp.bind(port, "::", ready);
  }
} else {
  pending = 1;
  ready();
}
function tcpProbe(c) {
  return new Promise((resolve) => {
    let data = "";
    let done = false;
    const s = net.connect({ host: c.host, port: c.port });
    const finish = (ok, err) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      s.destroy();
      resolve({ ok, reply: data.trim(), err });
    };
    const timer = setTimeout(() => finish(false, "timeout"), c.timeoutMs);
    s.setEncoding("utf8");
    s.on("data", (d) => { data += d; if (data.includes("\\n")) finish(true); });
    s.on("end", () => finish(false, "closed"));
    s.on("error", (e) => finish(false, e.code || String(e)));
  });
}
function udpProbe(c) {
  return new Promise((resolve) => {
    const s = dgram.createSocket(c.host.includes(":") ? "udp6" : "udp4");
    const timers = [];
    let done = false;
    const finish = (ok, reply, err) => {
      if (done) return;
      done = true;
      for (const t of timers) clearTimeout(t);
      try { s.close(); } catch {}
      resolve({ ok, reply, err });
    };
    s.on("message", (m) => finish(true, m.toString().trim()));
    s.on("error", (e) => finish(false, "", e.code || String(e)));
    const payload = NAME + " " + c.id;
    const send = () => { if (!done) s.send(payload, (e) => { if (e) finish(false, "", e.code || String(e)); }); };
    s.connect(c.port, c.host, (e) => {
      if (e) return finish(false, "", e.code || String(e));
      for (let i = 0; i < 3; i++) timers.push(setTimeout(send, (c.timeoutMs * i) / 3));
    });
    timers.push(setTimeout(() => finish(false, "", "timeout"), c.timeoutMs));
  });
}
let buf = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk) => {
  buf += chunk;
  for (let i = buf.indexOf("\\n"); i >= 0; i = buf.indexOf("\\n")) {
    const line = buf.slice(0, i);
    buf = buf.slice(i + 1);
    let c;
    try { c = JSON.parse(line); } catch { continue; }
    (c.protocol === "UDP" ? udpProbe : tcpProbe)(c).then((r) =>
      process.stdout.write(JSON.stringify({ id: c.id, ...r }) + "\\n"));
  }
});
process.stdin.on("end", () => process.exit(0));
`;
}

/** One long-lived prober (and, in a pod, server) inside a netns. */
export class PodAgent {
  private nextId = 1;
  private readonly waiting = new Map<number, (a: ProbeAnswer) => void>();
  private stderr = "";
  private exited = false;

  private constructor(
    readonly name: string,
    readonly netns: string,
    private readonly child: ChildProcess,
  ) {}

  /**
   * Starts the agent in `netns` and resolves once its servers listen (bounded:
   * 10 s). `serve: false` for a node's netns: probes only.
   */
  static async start(
    netns: string,
    name: string,
    opts: { serve?: boolean } = {},
  ): Promise<PodAgent> {
    const child = spawn(
      "ip",
      ["netns", "exec", netns, process.execPath, "-e", agentScript(name, opts.serve ?? true)],
      { env: nodeEnv(), stdio: ["pipe", "pipe", "pipe"] },
    );
    const agent = new PodAgent(name, netns, child);
    child.stderr?.on("data", (b: Buffer) => {
      agent.stderr += b.toString();
    });
    child.stdin?.on("error", () => {});
    let timer: NodeJS.Timeout | undefined;
    try {
      await new Promise<void>((resolve, reject) => {
        let out = "";
        let listening = false;
        child.stdout?.setEncoding("utf8");
        child.stdout?.on("data", (chunk: string) => {
          out += chunk;
          for (let i = out.indexOf("\n"); i >= 0; i = out.indexOf("\n")) {
            const line = out.slice(0, i);
            out = out.slice(i + 1);
            if (!listening) {
              if (line === "listening") {
                listening = true;
                resolve();
              }
              continue;
            }
            agent.answer(line);
          }
        });
        child.once("exit", (code) => {
          agent.exited = true;
          for (const done of agent.waiting.values()) done({ ok: false, err: "agent exited" });
          agent.waiting.clear();
          reject(new Error(`agent ${name} in ${netns} exited with ${code}: ${agent.stderr}`));
        });
        const bound = patient(10_000);
        timer = setTimeout(
          () => reject(new Error(`agent ${name} in ${netns} not listening after ${bound} ms`)),
          bound,
        );
      });
    } catch (err) {
      child.kill("SIGKILL");
      throw err;
    } finally {
      clearTimeout(timer);
    }
    return agent;
  }

  private answer(line: string): void {
    let a: { id?: number } & ProbeAnswer;
    try {
      a = JSON.parse(line);
    } catch {
      return;
    }
    const done = a.id === undefined ? undefined : this.waiting.get(a.id);
    if (!done || a.id === undefined) return;
    this.waiting.delete(a.id);
    done({
      ok: a.ok === true,
      ...(a.reply ? { reply: a.reply } : {}),
      ...(a.err ? { err: a.err } : {}),
    });
  }

  /** One probe from this agent's netns; never rejects, never outlives its bound by much. */
  probe(target: ProbeTarget, timeoutMs = PROBE_TIMEOUT_MS): Promise<ProbeAnswer> {
    if (this.exited) return Promise.resolve({ ok: false, err: "agent exited" });
    const id = this.nextId++;
    return new Promise((resolve) => {
      // The agent answers within timeoutMs; this bounds a wedged agent.
      const guard = setTimeout(() => {
        this.waiting.delete(id);
        resolve({ ok: false, err: "agent did not answer" });
      }, timeoutMs + patient(5000));
      this.waiting.set(id, (a) => {
        clearTimeout(guard);
        resolve(a);
      });
      this.child.stdin?.write(`${JSON.stringify({ id, ...target, timeoutMs })}\n`);
    });
  }

  get logs(): string {
    return this.stderr;
  }

  async stop(): Promise<void> {
    if (this.exited || this.child.exitCode !== null || this.child.signalCode !== null) return;
    await new Promise<void>((resolve) => {
      this.child.once("exit", () => resolve());
      this.child.kill("SIGKILL");
    });
  }
}

/** How the suite probes one pair: from a pod, to a pod's address, on a port. */
export type Prober = (
  from: PodString,
  to: PodString,
  port: number,
  protocol: Protocol,
) => Promise<ProbeAnswer>;

export interface TestCase {
  port: number;
  protocol: Protocol;
  reachability: Reachability;
  /** Said in the report: "IPv6" for a matrix probed over the pods' IPv6 addresses. */
  label?: string;
}

/** Probes every pair of the matrix at once and records what each saw. */
export async function probeConnectivity(prober: Prober, tc: TestCase): Promise<void> {
  const r = tc.reachability;
  r.resetObserved();
  await Promise.all(
    r.pods.flatMap((from) =>
      r.pods.map(async (to) => {
        const a = await prober(from, to, tc.port, tc.protocol);
        r.observe(from, to, a.ok);
      }),
    ),
  );
}

/**
 * Probes the matrix until it matches the expectation, for at most `withinMs`
 * (policy reaches a remote node's kernel asynchronously), as upstream retries
 * its probe; fails with the expected, observed and comparison tables.
 */
export async function validateOrFail(
  prober: Prober,
  tc: TestCase,
  withinMs = CONVERGE_MS,
): Promise<void> {
  const started = Date.now();
  let tries = 0;
  for (;;) {
    tries++;
    await probeConnectivity(prober, tc);
    const { incorrect } = tc.reachability.summary();
    if (incorrect === 0) return;
    if (Date.now() - started >= withinMs) {
      const what = `${tc.label ? `${tc.label} ` : ""}${tc.protocol}/${tc.port}`;
      throw new Error(
        `reachability matrix for ${what} still wrong after ${tries} tries in ${Date.now() - started} ms\n\n${tc.reachability.printSummary(what)}\n`,
      );
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

// ---------------------------------------------------------------------------
// A held connection
// ---------------------------------------------------------------------------

/**
 * A TCP client in `netns` holding one connection to an agent's server, sending
 * a byte every 100 ms and noting when each echo comes back (in this process's
 * clock). `greeted` resolves with the server's name.
 */
export class HeldConnection {
  /** Date.now() of every echo received. */
  readonly echoes: number[] = [];
  /** "error ECONNRESET", "closed": how the connection ended, if it did. */
  ended: string | undefined;
  readonly greeted: Promise<string>;
  private readonly child: ChildProcess;

  constructor(netns: string, host: string, port: number) {
    const script = `"use strict";
const s = require("node:net").connect({ host: ${JSON.stringify(host)}, port: ${port} });
let greeting = "";
let greeted = false;
s.setEncoding("utf8");
s.on("connect", () => setInterval(() => s.write("."), 100));
s.on("data", (d) => {
  for (const ch of d) {
    if (!greeted) {
      if (ch === "\\n") { greeted = true; console.log("greeted " + greeting); } else greeting += ch;
    } else if (ch === ".") console.log("echo");
  }
});
s.on("error", (e) => { console.log("error " + (e.code || e)); process.exit(0); });
s.on("close", () => { console.log("closed"); process.exit(0); });
process.stdin.on("end", () => process.exit(0));
process.stdin.resume();`;
    this.child = spawn("ip", ["netns", "exec", netns, process.execPath, "-e", script], {
      env: nodeEnv(),
      stdio: ["pipe", "pipe", "ignore"],
    });
    this.child.stdin?.on("error", () => {});
    let out = "";
    let onGreeting: (name: string) => void = () => {};
    this.greeted = new Promise((resolve) => {
      onGreeting = resolve;
    });
    this.child.stdout?.setEncoding("utf8");
    this.child.stdout?.on("data", (chunk: string) => {
      const now = Date.now();
      out += chunk;
      for (let i = out.indexOf("\n"); i >= 0; i = out.indexOf("\n")) {
        const line = out.slice(0, i);
        out = out.slice(i + 1);
        if (line === "echo") this.echoes.push(now);
        else if (line.startsWith("greeted ")) onGreeting(line.slice("greeted ".length));
        else if (line) this.ended = line;
      }
    });
    this.child.once("exit", () => {
      this.ended ??= "exited";
    });
  }

  async stop(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    await new Promise<void>((resolve) => {
      this.child.once("exit", () => resolve());
      this.child.kill("SIGKILL");
    });
  }
}
