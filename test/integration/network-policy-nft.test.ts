/**
 * The NetworkPolicy table as the kernel takes it: each ruleset written whole
 * (fullScript) and each change written as a diff (diffScript) to a real
 * nftables in a network namespace of its own. After every step the table a
 * chain of diffs built must be the table the whole script builds: the
 * incremental path never drifts from the full one.
 */
import { expect } from "chai";
import { execaSync } from "execa";
import {
  buildRuleset,
  type LocalPodRules,
  POLICY_TABLE,
  type Ruleset,
} from "../../src/driver/network-policy/ruleset.js";
import {
  diffCommands,
  diffScript,
  elementsOnly,
  fullScript,
  keepIdle,
  scriptOf,
} from "../../src/driver/network-policy/ruleset-commands.js";
import { PolicyModel } from "../../src/policy/model.js";
import type { NetworkPolicy, PolicyPod } from "../../src/policy/types.js";
import { createNetns, deleteNetns, uniqueTag } from "../support/netns.js";
import { requireCommand, requireRoot } from "../support/requirements.js";

const NAMED = [
  { name: "serve-80-tcp", protocol: "TCP" as const, port: 80 },
  { name: "serve-81-udp", protocol: "UDP" as const, port: 81 },
];

function pod(namespace: string, name: string, ips: string[], labels = { pod: name }): PolicyPod {
  return { namespace, name, labels, ips, namedPorts: NAMED, hostNetwork: false };
}

function nft(ns: string, args: string[], input?: string): string {
  const r = execaSync("ip", ["netns", "exec", ns, "nft", ...args], {
    ...(input !== undefined ? { input } : {}),
    reject: false,
  });
  if (r.exitCode !== 0) throw new Error(`nft ${args.join(" ")}: ${r.stderr}\n${input ?? ""}`);
  return r.stdout;
}

/** The table as nft lists it, each block's lines sorted (the kernel keeps its own order of sets and chains). */
function listing(ns: string): string[] {
  const text = nft(ns, ["list", "table", "inet", POLICY_TABLE]);
  return text
    .split("\n")
    .map((l) => l.trim())
    .filter(Boolean)
    .sort();
}

describe("network policy: the nftables table, whole and by diffs", function () {
  this.timeout(60_000);
  const tag = uniqueTag();
  const byDiff = `npt-${tag}-diff`;
  const wholeNs = `npt-${tag}-whole`;
  const model = new PolicyModel();
  /** The node's pods, named as the plugin names their host ends. */
  type NodePod = LocalPodRules & { hostIf: string };
  const local: NodePod[] = [];
  let applied: Ruleset | undefined;

  const localPods = (): NodePod[] =>
    local.map((lp) => {
      const [namespace, name] = lp.hostIf.replace(/^mido/, "").split("-") as [string, string];
      const p = model.pod(namespace, name);
      const policy = p ? model.podPolicy(p) : {};
      return {
        ...lp,
        standing:
          lp.standing.kind === "deny"
            ? lp.standing
            : policy.ingress || policy.egress
              ? { kind: "policy", policy }
              : { kind: "open" },
      };
    });

  /**
   * Applies the change as a diff in one namespace and whole in the other;
   * the two must agree. With `idle`, what no pod uses is kept (the enforcer's
   * keepIdle) and compared apart.
   */
  function step(opts: { idle?: boolean } = {}): string {
    const next = buildRuleset(model, localPods());
    const whole = fullScript(next);
    if (opts.idle && applied) keepIdle(applied, next);
    const script = applied ? diffScript(applied, next) : fullScript(next);
    if (script) nft(byDiff, ["-f", "-"], script);
    nft(wholeNs, ["-f", "-"], whole);
    applied = next;
    if (!opts.idle) expect(listing(byDiff)).to.deep.equal(listing(wholeNs));
    return script;
  }

  before(function () {
    requireRoot(this);
    requireCommand(this, "nft", "nftables");
    createNetns(byDiff);
    createNetns(wholeNs);
    model.upsertNamespace({ name: "x", labels: { ns: "x" } });
    model.upsertNamespace({ name: "y", labels: { ns: "y" } });
    for (const [ns, n, ips] of [
      ["x", "a", ["10.244.1.2", "fd00:1::2"]],
      ["x", "b", ["10.244.1.3"]],
      ["y", "a", ["10.244.2.2", "fd00:2::2"]],
      ["y", "b", ["10.244.2.3"]],
    ] as const) {
      model.upsertPod(pod(ns, n, [...ips]));
    }
    local.push(
      { hostIf: "midox-a", ips: ["10.244.1.2", "fd00:1::2"], standing: { kind: "open" } },
      { hostIf: "midox-b", ips: ["10.244.1.3"], standing: { kind: "open" } },
    );
  });

  after(() => {
    for (const ns of [byDiff, wholeNs]) deleteNetns(ns);
  });

  it("starts empty: the maps and the two forward chains, no pod chain", () => {
    step();
    const text = nft(byDiff, ["list", "table", "inet", POLICY_TABLE]);
    expect(text).to.include("hook forward priority filter;");
    expect(text).to.include("hook forward priority filter + 1;");
    expect(text).to.include("ct state established,related accept");
    expect(text).not.to.include("chain in-");
  });

  it("a policy selecting x/a: its chains, a peer set of both families, the verdicts", () => {
    const policy: NetworkPolicy = {
      namespace: "x",
      name: "allow-y",
      podSelector: { matchLabels: { pod: "a" } },
      ingress: [
        {
          peers: [{ namespaceSelector: { matchLabels: { ns: "y" } } }],
          ports: [{ port: "serve-80-tcp" }, { protocol: "UDP", port: 81, endPort: 90 }],
        },
      ],
      egress: [{ ports: [{ port: "serve-81-udp", protocol: "UDP" }] }],
      policyTypes: ["Ingress", "Egress"],
    };
    expect(model.upsertPolicy(policy)).to.equal(undefined);
    step();
    const text = nft(byDiff, ["list", "table", "inet", POLICY_TABLE]);
    const inChain = /10\.244\.1\.2 : jump (in-[0-9a-f]{16})/.exec(text)?.[1];
    expect(inChain, "x/a's ingress verdict").to.be.a("string");
    expect(text).to.match(/chain eg-[0-9a-f]{16}/);
    expect(text).to.include(`fd00:1::2 : jump ${inChain}`);
    // The port before the peer: a packet for another port never meets the set.
    expect(text).to.match(/tcp dport 80 jump k_\w+/);
    // The peer lookups sit in a chain of their own: a port edit rewrites lines that name no set.
    expect(text).to.match(
      /chain k_\w+ \{\s*ip saddr @p_\w+_4 accept\s*ip6 saddr @p_\w+_6 accept\s*\}/,
    );
    expect(text).to.include("udp dport 81-90");
    expect(text).to.match(new RegExp(`chain ${inChain} \\{\\s*jump r_\\w+\\s*drop\\s*\\}`));
    expect(text).not.to.match(/10\.244\.1\.3 : jump/);
  });

  it("a new peer pod adds its address, a pod gone deletes it: no chain is touched", () => {
    model.upsertPod(pod("y", "c", ["10.244.2.4"]));
    let script = step();
    expect(script).to.match(/^add element inet cni-driver-policy p_\w+_4 \{ 10\.244\.2\.4 \}$/m);
    // Besides: the egress rule's named port resolves on the new pod too (its t_ set).
    expect(script).not.to.match(/chain|rule|flush/);
    model.deletePod("y", "c");
    script = step();
    expect(script).to.match(/^delete element inet cni-driver-policy p_\w+_4 \{ 10\.244\.2\.4 \}$/m);
    expect(script).not.to.match(/chain|rule|flush/);
  });

  it("a pod the same rules apply to shares their chains: its setup and teardown are element changes only", () => {
    model.upsertPod(pod("x", "d", ["10.244.1.9"], { pod: "a" }));
    local.push({ hostIf: "midox-d", ips: ["10.244.1.9"], standing: { kind: "open" } });
    const setup = diffCommands(applied as Ruleset, buildRuleset(model, localPods()));
    expect(elementsOnly(setup), scriptOf(setup)).not.to.equal(undefined);
    step();
    const map = nft(byDiff, ["list", "map", "inet", POLICY_TABLE, "ingress4"]);
    const shared = /10\.244\.1\.2 : jump (in-[0-9a-f]{16})/.exec(map)?.[1];
    expect(map).to.include(`10.244.1.9 : jump ${shared}`);
    local.pop();
    model.deletePod("x", "d");
    const teardown = diffCommands(applied as Ruleset, buildRuleset(model, localPods()));
    expect(elementsOnly(teardown), scriptOf(teardown)).not.to.equal(undefined);
    step();
  });

  it("what no pod uses stays while kept idle, and goes when collected", () => {
    model.upsertPod(pod("x", "a", ["10.244.1.2", "fd00:1::2"], { pod: "idle" }));
    const kept = step({ idle: true });
    // x/a's verdicts go; its chains and sets stay, inert.
    expect(kept).not.to.match(/delete (chain|set)/);
    const text = nft(byDiff, ["list", "table", "inet", POLICY_TABLE]);
    expect(text).to.match(/chain in-[0-9a-f]{16}/);
    expect(nft(byDiff, ["list", "map", "inet", POLICY_TABLE, "ingress4"])).not.to.include(
      "10.244.1.2",
    );
    // A pod of that kind again: its verdicts only, to the kept chains.
    model.upsertPod(pod("x", "a", ["10.244.1.2", "fd00:1::2"]));
    const back = buildRuleset(model, localPods());
    keepIdle(applied as Ruleset, back);
    const again = diffCommands(applied as Ruleset, back);
    expect(elementsOnly(again), scriptOf(again)).not.to.equal(undefined);
    step({ idle: true });
    // Collected: a diff without keepIdle deletes them, and the table is the whole script's again.
    model.upsertPod(pod("x", "a", ["10.244.1.2", "fd00:1::2"], { pod: "idle" }));
    step({ idle: true });
    const collected = step();
    expect(collected).to.match(/delete chain .* in-[0-9a-f]{16}/);
    model.upsertPod(pod("x", "a", ["10.244.1.2", "fd00:1::2"]));
    step();
  });

  it("a policy's port change rewrites its rule's chain only, whatever the pods it selects", () => {
    const before = model.pod("x", "b");
    model.upsertPod(pod("x", "b", ["10.244.1.3"], { pod: "a" }));
    local[1] = { ...(local[1] as NodePod), standing: { kind: "open" } };
    step();
    const policy = {
      namespace: "x",
      name: "ports",
      podSelector: { matchLabels: { pod: "a" } },
      ingress: [{ peers: [{ podSelector: {} }], ports: [{ port: 8080 }] }],
    };
    model.upsertPolicy(policy);
    step();
    model.upsertPolicy({
      ...policy,
      ingress: [{ peers: [{ podSelector: {} }], ports: [{ port: 8081 }] }],
    });
    const script = step();
    const lines = script.trim().split("\n");
    expect(lines[0]).to.match(/^flush chain inet cni-driver-policy r_\w+$/);
    expect(
      lines.slice(1).every((l) => /^add rule inet cni-driver-policy r_\w+ .*8081/.test(l)),
    ).to.equal(true);
    model.deletePolicy("x", "ports");
    model.upsertPod(before as PolicyPod);
    step();
  });

  it("many single-port rules: one map of protocol . port, a q_ chain where two share a port", () => {
    const ports = [
      ["TCP", 80],
      ["TCP", 80],
      ["TCP", 81],
      ["UDP", 53],
      ["SCTP", 9000],
    ] as const;
    ports.forEach(([protocol, port], i) => {
      model.upsertPolicy({
        namespace: "x",
        name: `single-${i}`,
        podSelector: { matchLabels: { pod: "a" } },
        ingress: [
          {
            peers: [{ podSelector: { matchLabels: { pod: `p${i}` } } }],
            ports: [{ protocol, port }],
          },
        ],
      });
    });
    step();
    const text = nft(byDiff, ["list", "table", "inet", POLICY_TABLE]);
    const map = /meta l4proto \. th dport vmap \{([^}]*)\}/.exec(text)?.[1] ?? "";
    expect(map).to.match(/tcp \. 80 : jump q_\w+/);
    expect(map).to.match(/udp \. 53 : jump r_\w+/);
    expect(map).to.match(/sctp \. 9000 : jump r_\w+/);
    expect(text).to.match(/chain q_\w+ \{\s*jump r_\w+\s*jump r_\w+\s*\}/);
    for (let i = 0; i < ports.length; i++) model.deletePolicy("x", `single-${i}`);
    step();
    expect(nft(byDiff, ["list", "table", "inet", POLICY_TABLE])).not.to.include("vmap {");
  });

  it("a label change moves a pod out of the policy: its chains and verdicts go", () => {
    model.upsertPod(pod("x", "a", ["10.244.1.2", "fd00:1::2"], { pod: "z" }));
    const script = step();
    expect(script).to.match(/delete chain .* in-[0-9a-f]{16}/);
    const text = nft(byDiff, ["list", "table", "inet", POLICY_TABLE]);
    expect(text).not.to.match(/chain in-/);
  });

  it("an unknown pod's verdicts jump to the deny chain, and back", () => {
    local[1] = { ...(local[1] as NodePod), standing: { kind: "deny" } };
    step();
    expect(nft(byDiff, ["list", "map", "inet", POLICY_TABLE, "ingress4"])).to.include(
      "10.244.1.3 : jump deny",
    );
    local[1] = { ...(local[1] as NodePod), standing: { kind: "open" } };
    step();
    expect(nft(byDiff, ["list", "map", "inet", POLICY_TABLE, "ingress4"])).not.to.include(
      "10.244.1.3",
    );
  });

  it("ipBlock with except, several policies, then every policy deleted", () => {
    model.upsertPod(pod("x", "a", ["10.244.1.2", "fd00:1::2"]));
    model.upsertPolicy({
      namespace: "x",
      name: "block",
      podSelector: {},
      ingress: [{ peers: [{ ipBlock: { cidr: "10.244.0.0/16", except: ["10.244.2.0/24"] } }] }],
    });
    step();
    const sets = nft(byDiff, ["list", "sets", "inet"]);
    expect(sets).to.include("10.244.0.0/23");
    expect(sets).to.include("10.244.3.0-10.244.255.255");
    model.deletePolicy("x", "block");
    model.deletePolicy("x", "allow-y");
    step();
    const text = nft(byDiff, ["list", "table", "inet", POLICY_TABLE]);
    expect(text).not.to.match(/chain (in|eg)-/);
    expect(text).not.to.match(/set p_/);
  });
});
