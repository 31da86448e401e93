/** Faults a test injects: answer a status, delay or hang, for the next N calls or for a while. */

export interface FaultSpec {
  /** Only this method (any when omitted). */
  method?: string;
  /** Path relative to the API base: a RegExp, or a string where `*` matches anything. Any when omitted. */
  path?: string | RegExp;
  /** Answer this status with an Error-v1 body (default 500, unless hang or delayMs is set). */
  status?: number;
  /** Never answer (the connection stays open until the client gives up or close()). */
  hang?: boolean;
  /** Answer normally, but only after this long. */
  delayMs?: number;
  /** Only for the next N matching calls. */
  times?: number;
  /** Only for this long from now. */
  forMs?: number;
}

export interface FaultHandle {
  /** Calls the fault has shaped so far. */
  readonly hits: number;
  remove(): void;
}

interface ActiveFault {
  spec: FaultSpec;
  pathRe: RegExp | undefined;
  remaining: number | undefined;
  until: number | undefined;
  hits: number;
  removed: boolean;
}

function globToRegExp(glob: string): RegExp {
  const escaped = glob.replace(/[.+?^${}()|[\]\\]/g, "\\$&").replaceAll("*", ".*");
  return new RegExp(`^${escaped}$`);
}

export class Faults {
  private readonly active: ActiveFault[] = [];

  add(spec: FaultSpec): FaultHandle {
    const fault: ActiveFault = {
      spec,
      pathRe: typeof spec.path === "string" ? globToRegExp(spec.path) : spec.path,
      remaining: spec.times,
      until: spec.forMs === undefined ? undefined : Date.now() + spec.forMs,
      hits: 0,
      removed: false,
    };
    this.active.push(fault);
    return {
      get hits() {
        return fault.hits;
      },
      remove: () => {
        fault.removed = true;
      },
    };
  }

  clear(): void {
    for (const f of this.active) f.removed = true;
    this.active.length = 0;
  }

  /** The first live fault matching the call, counted as used. */
  take(method: string, path: string): FaultSpec | undefined {
    const now = Date.now();
    for (const f of this.active) {
      if (f.removed) continue;
      if (f.until !== undefined && now > f.until) continue;
      if (f.remaining !== undefined && f.remaining <= 0) continue;
      if (f.spec.method !== undefined && f.spec.method.toUpperCase() !== method) continue;
      if (f.pathRe !== undefined && !f.pathRe.test(path)) continue;
      if (f.remaining !== undefined) f.remaining--;
      f.hits++;
      return f.spec;
    }
    return undefined;
  }
}
