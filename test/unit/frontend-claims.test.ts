/**
 * FrontendClaims: which Service writes a map key (a frontend) that two
 * Services claim. The first by namespace/name owns it while it wants it;
 * the other's claim waits and takes over when the owner lets go.
 */
import { expect } from "chai";
import { FrontendClaims } from "../../src/driver/services/frontend-claims.js";
import type { Block } from "../../src/driver/services/ruleset.js";

const SHARED = "198.51.100.99 . tcp . 80";
const A = "a/first";
const B = "b/second";

/** A block with one chain and the given elements, each [map, key, value]. */
function block(chain: string, ...elements: Array<[string, string, string]>): Block {
  const b: Block = {
    shard: 0,
    chains: new Map([[chain, ["drop"]]]),
    sets: new Map(),
    elements: new Map(),
  };
  for (const [map, key, value] of elements) {
    const m = b.elements.get(map) ?? new Map<string, string>();
    b.elements.set(map, m);
    m.set(key, value);
  }
  return b;
}

const keysOf = (b: Block, map: string) => [...(b.elements.get(map)?.keys() ?? [])];

describe("frontend claims", () => {
  let claims: FrontendClaims;
  const blockA = block(
    "ext-aaaa",
    ["service-ips", SHARED, "goto ext-aaaa"],
    ["service-ips", "10.96.0.1 . tcp . 80", "goto svc-aaaa"],
  );
  const blockB = block(
    "ext-bbbb",
    ["service-ips", SHARED, "goto ext-bbbb"],
    ["service-ips", "10.96.0.2 . tcp . 80", "goto svc-bbbb"],
    ["service-nodeports", "tcp . 30080", "goto ext-bbbb"],
  );

  beforeEach(() => {
    claims = new FrontendClaims();
  });

  it("the first by namespace/name owns a shared key; the other's claim gains nothing", () => {
    expect([...claims.set(A, [blockA])]).to.deep.equal([]);
    expect([...claims.set(B, [blockB])]).to.deep.equal([]);
    const fa = claims.filter(A, blockA);
    const fb = claims.filter(B, blockB);
    expect(keysOf(fa, "service-ips")).to.have.members([SHARED, "10.96.0.1 . tcp . 80"]);
    expect(keysOf(fb, "service-ips")).to.deep.equal(["10.96.0.2 . tcp . 80"]);
    expect(fa.elements.get("service-ips")?.get(SHARED)).to.equal("goto ext-aaaa");
    // The chains stay whole: only the map elements are filtered.
    expect([...fb.chains.keys()]).to.deep.equal(["ext-bbbb"]);
  });

  it("removing the owner hands the key to the other, which filter then gives the element", () => {
    claims.set(A, [blockA]);
    claims.set(B, [blockB]);
    expect([...claims.set(A, undefined)]).to.deep.equal([B]);
    expect(claims.filter(B, blockB).elements.get("service-ips")?.get(SHARED)).to.equal(
      "goto ext-bbbb",
    );
    expect(claims.filter(A, blockA).elements.size).to.equal(0);
    expect(claims.conflicts()).to.deep.equal([]);
  });

  it("conflicts() lists each shared frontend with its claimants, the owner first", () => {
    const C = "c/third";
    claims.set(A, [blockA]);
    claims.set(C, [block("ext-cccc", ["service-ips", SHARED, "goto ext-cccc"])]);
    claims.set(B, [blockB]);
    expect(claims.conflicts()).to.deep.equal([
      { frontend: `service-ips|${SHARED}`, services: [A, B, C] },
    ]);
    claims.set(A, undefined);
    expect(claims.conflicts()).to.deep.equal([
      { frontend: `service-ips|${SHARED}`, services: [B, C] },
    ]);
  });

  it("a Service that stops wanting a key releases it", () => {
    claims.set(A, [blockA]);
    claims.set(B, [blockB]);
    // A now lists only its ClusterIP.
    const slimA = block("svc-aaaa", ["service-ips", "10.96.0.1 . tcp . 80", "goto svc-aaaa"]);
    expect([...claims.set(A, [slimA])]).to.deep.equal([B]);
    expect(keysOf(claims.filter(B, blockB), "service-ips")).to.include(SHARED);
    expect(keysOf(claims.filter(A, blockA), "service-ips")).to.deep.equal(["10.96.0.1 . tcp . 80"]);
    expect(claims.conflicts()).to.deep.equal([]);
  });

  it("keys no other Service claims are unaffected by a conflict", () => {
    claims.set(A, [blockA]);
    claims.set(B, [blockB]);
    const fb = claims.filter(B, blockB);
    expect(fb.elements.get("service-nodeports")?.get("tcp . 30080")).to.equal("goto ext-bbbb");
    expect(fb.elements.get("service-ips")?.get("10.96.0.2 . tcp . 80")).to.equal("goto svc-bbbb");
    // Releasing the shared key changes nothing of the unrelated ones.
    claims.set(A, undefined);
    const after = claims.filter(B, blockB);
    expect(after.elements.get("service-nodeports")?.get("tcp . 30080")).to.equal("goto ext-bbbb");
    expect(keysOf(after, "service-ips")).to.have.members([SHARED, "10.96.0.2 . tcp . 80"]);
  });

  it("a frontend is one whichever map holds it: a reject and a DNAT of one key are never split between Services", () => {
    claims.set(A, [blockA]);
    const other = block("svc-dddd", ["no-endpoint-services", SHARED, "goto reject-service"]);
    expect([...claims.set("d/fourth", [other])]).to.deep.equal([]);
    expect(claims.filter("d/fourth", other).elements.get("no-endpoint-services")).to.equal(
      undefined,
    );
    expect(claims.conflicts()).to.deep.equal([
      { frontend: `service-ips|${SHARED}`, services: [A, "d/fourth"] },
    ]);
  });

  it("the first by namespace/name takes a frontend over from one that came earlier", () => {
    const late = block("svc-0000", ["service-ips", SHARED, "goto svc-0000"]);
    claims.set(B, [blockB]);
    expect([...claims.set("0/early", [late])]).to.deep.equal([B]);
    expect(keysOf(claims.filter(B, blockB), "service-ips")).to.not.include(SHARED);
    expect(keysOf(claims.filter("0/early", late), "service-ips")).to.deep.equal([SHARED]);
  });

  it("clear() forgets every claim", () => {
    claims.set(A, [blockA]);
    claims.set(B, [blockB]);
    claims.clear();
    expect(claims.conflicts()).to.deep.equal([]);
    expect(claims.filter(A, blockA).elements.size).to.equal(0);
  });
});
