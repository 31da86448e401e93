/**
 * Who owns each frontend (a key of the service-ips, nodeports and
 * no-endpoint maps) when two Services claim the same one: nothing in the API
 * stops two Services listing one externalIP and port. A map key leads to one
 * chain, so one Service gets it (the first by namespace/name, as long as it
 * wants it) and the other's claim waits; when the owner lets it go, the next
 * one takes it over. Without this, the second Service's element would fail
 * the whole transaction, and deleting either would delete the key from under
 * the other. Pure.
 */
import { type Block, NO_ENDPOINT_MAP } from "./ruleset.js";

/**
 * A frontend whatever map holds it: a port with endpoints is in service-ips,
 * one without in no-endpoint-services, and the two must not be split between
 * Services (the reject, in the filter hooks, would win for the node's own traffic).
 */
const DNAT_MAP_OF = new Map(
  Object.entries(NO_ENDPOINT_MAP).map(([dnat, reject]) => [reject, dnat]),
);
const frontendId = (map: string, key: string) => `${DNAT_MAP_OF.get(map) ?? map}|${key}`;

const frontendsOf = (blocks: Iterable<Block>): string[] => {
  const out: string[] = [];
  for (const b of blocks)
    for (const [map, m] of b.elements) for (const key of m.keys()) out.push(frontendId(map, key));
  return out;
};

export class FrontendClaims {
  private readonly owner = new Map<string, string>();
  private readonly wanted = new Map<string, Set<string>>();
  private readonly wants = new Map<string, string[]>();
  /** Frontends more than one Service wants: kept as they change, so conflicts() costs what they are. */
  private readonly contested = new Set<string>();

  /**
   * What `service` claims now (undefined: it is gone). Answers the other
   * Services whose frontends changed (taken over, or lost to `service`):
   * their blocks must be written again.
   */
  set(service: string, blocks: Iterable<Block> | undefined): Set<string> {
    const touched = new Set<string>(this.wants.get(service) ?? []);
    for (const f of touched) this.wanted.get(f)?.delete(service);
    const now = blocks ? frontendsOf(blocks) : [];
    if (now.length > 0) this.wants.set(service, now);
    else this.wants.delete(service);
    for (const f of now) {
      touched.add(f);
      const w = this.wanted.get(f) ?? new Set<string>();
      this.wanted.set(f, w);
      w.add(service);
    }
    const changed = new Set<string>();
    for (const f of touched) {
      const w = this.wanted.get(f);
      const held = this.owner.get(f);
      if (w && w.size > 1) this.contested.add(f);
      else this.contested.delete(f);
      if (!w || w.size === 0) {
        this.wanted.delete(f);
        this.owner.delete(f);
        continue;
      }
      // The first by namespace/name, whatever the order they came in: a restart decides alike.
      const next = [...w].sort()[0] as string;
      if (next === held) continue;
      this.owner.set(f, next);
      for (const s of [next, held]) if (s !== undefined && s !== service) changed.add(s);
    }
    return changed;
  }

  /** The block with only the map elements `service` owns. */
  filter(service: string, block: Block): Block {
    const elements = new Map<string, Map<string, string>>();
    for (const [map, m] of block.elements) {
      const kept = new Map(
        [...m].filter(([key]) => this.owner.get(frontendId(map, key)) === service),
      );
      if (kept.size > 0) elements.set(map, kept);
    }
    return { shard: block.shard, chains: block.chains, sets: block.sets, elements };
  }

  /** Frontends more than one Service claims, with the claimants (the owner first), by frontend. */
  conflicts(): Array<{ frontend: string; services: string[] }> {
    const out: Array<{ frontend: string; services: string[] }> = [];
    for (const f of [...this.contested].sort()) {
      const w = this.wanted.get(f) ?? new Set<string>();
      const owner = this.owner.get(f) as string;
      out.push({ frontend: f, services: [owner, ...[...w].filter((s) => s !== owner).sort()] });
    }
    return out;
  }

  clear(): void {
    this.contested.clear();
    this.owner.clear();
    this.wanted.clear();
    this.wants.clear();
  }
}
