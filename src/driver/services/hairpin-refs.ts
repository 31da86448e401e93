/**
 * The `hairpin` sets' elements (ruleset.ts) kept as counts: how many written
 * port plans hold each (one endpoint can serve several Services). A change
 * looks at its own Services' plans only, where recomputing the sets from
 * every plan costs milliseconds at 100,000 endpoints on every change.
 */
import type { ServiceEndpoint } from "../../services/endpoints.js";
import type { PortPlan } from "../../services/model.js";
import { addElement, hairpinPairs } from "./ruleset.js";
import type { Elements } from "./ruleset-diff.js";

type IsLocal = (ep: ServiceEndpoint) => boolean;

const id = (map: string, key: string) => `${map} ${key}`;

export class HairpinRefs {
  private refs = new Map<string, { map: string; key: string; n: number }>();

  /** Counted afresh from all the plans; answers every element (for a whole write). */
  reset(plans: Iterable<PortPlan>, isLocal: IsLocal): Elements {
    this.refs.clear();
    const all: Elements = new Map([
      ["hairpin", new Map()],
      ["hairpin6", new Map()],
    ]);
    for (const [map, key] of hairpinPairs(plans, isLocal)) {
      const r = this.refs.get(id(map, key));
      if (r) r.n++;
      else this.refs.set(id(map, key), { map, key, n: 1 });
      addElement(all, map, key, "");
    }
    return all;
  }

  /**
   * The elements that go and come when plans `before` are replaced by
   * `after` (the changed Services' alone); `commit` keeps the new counts,
   * once the change is written.
   */
  change(
    before: Iterable<PortPlan>,
    after: Iterable<PortPlan>,
    isLocal: IsLocal,
  ): { gone: Elements; added: Elements; commit(): void } {
    const delta = new Map<string, { map: string; key: string; d: number }>();
    const count = (plans: Iterable<PortPlan>, d: number) => {
      for (const [map, key] of hairpinPairs(plans, isLocal)) {
        const e = delta.get(id(map, key)) ?? { map, key, d: 0 };
        e.d += d;
        delta.set(id(map, key), e);
      }
    };
    count(before, -1);
    count(after, 1);
    const gone: Elements = new Map();
    const added: Elements = new Map();
    for (const [k, e] of delta) {
      const was = this.refs.get(k)?.n ?? 0;
      if (was > 0 && was + e.d === 0) addElement(gone, e.map, e.key, "");
      if (was === 0 && e.d > 0) addElement(added, e.map, e.key, "");
    }
    const commit = () => {
      for (const [k, e] of delta) {
        const n = (this.refs.get(k)?.n ?? 0) + e.d;
        if (n > 0) this.refs.set(k, { map: e.map, key: e.key, n });
        else this.refs.delete(k);
      }
    };
    return { gone, added, commit };
  }

  clear(): void {
    this.refs.clear();
  }
}
