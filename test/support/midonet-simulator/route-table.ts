/** The table of routes: a method and a path pattern, the media types, and the handler. */
import type http from "node:http";
import { ApiError, notFound } from "./body.js";
import type { SimulatorState } from "./state.js";

export type Method = "GET" | "POST" | "PUT" | "DELETE";

export interface Ctx {
  params: Record<string, string>;
  body: unknown;
  headers: http.IncomingHttpHeaders;
}

export interface Reply {
  status: number;
  body?: unknown;
  /** A create's Location, relative to the API base. */
  location?: string;
  /** Other headers the answer carries. */
  headers?: Readonly<Record<string, string>>;
}

export type Handler = (s: SimulatorState, ctx: Ctx) => Reply;

export interface RouteDef {
  method: Method;
  /** Relative to the API base, segments separated by "/", ":name" a parameter; "" is the root. */
  path: string;
  /** Content-Type a POST or PUT must carry. */
  consumes?: string[];
  /** Media types the answer can have (Accept selects one). */
  produces?: string[];
  handle: Handler;
}

export const ok = (body: unknown): Reply => ({ status: 200, body });
export const created = (location: string): Reply => ({ status: 201, location });
export const noContent: Reply = { status: 204 };

interface CompiledRoute {
  def: RouteDef;
  segments: string[];
}

export class RouteTable {
  private readonly routes: CompiledRoute[];

  constructor(defs: RouteDef[]) {
    this.routes = defs.map((def) => ({ def, segments: splitPath(def.path) }));
  }

  /** The route for method and path; 404 when no pattern matches, 405 when only the method does not. */
  match(method: string, path: string): { route: RouteDef; params: Record<string, string> } {
    const segments = splitPath(path);
    let pathMatched = false;
    for (const { def, segments: pattern } of this.routes) {
      const params = matchSegments(pattern, segments);
      if (params === undefined) continue;
      pathMatched = true;
      if (def.method === method) return { route: def, params };
    }
    if (pathMatched) throw new ApiError(405, `${method} is not allowed on ${path}`);
    throw notFound(`no such resource: ${path}`);
  }
}

function splitPath(path: string): string[] {
  return path.split("/").filter((s) => s.length > 0);
}

function matchSegments(pattern: string[], segments: string[]): Record<string, string> | undefined {
  if (pattern.length !== segments.length) return undefined;
  const params: Record<string, string> = {};
  for (const [i, p] of pattern.entries()) {
    const s = segments[i] as string;
    if (!p.startsWith(":")) {
      if (p !== s) return undefined;
      continue;
    }
    try {
      params[p.slice(1)] = decodeURIComponent(s);
    } catch {
      return undefined;
    }
  }
  return params;
}
