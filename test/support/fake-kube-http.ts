/**
 * The HTTP layer of the fake Kubernetes API server (fake-kube-apiserver.ts): the
 * plain-HTTP listener on 127.0.0.1, the bearer token check (401), injected
 * faults, routing a path to a resource and a verb (404 and 405 as the real
 * server answers them), lists (label and field selectors, limit/continue pages
 * that all name the revision the list began at, remainingItemCount, 410 Expired
 * for a continue token older than the compacted history), handing a watch to
 * the watches and a write to the write verbs, the request log, and every
 * StatusError answered as its Status body.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import type { FakeKubeFaults } from "./fake-kube-faults.js";
import { isTrue } from "./fake-kube-json.js";
import type { Route } from "./fake-kube-resources.js";
import { apiVersionOf, routeOf, view } from "./fake-kube-resources.js";
import { parseSelection, selects, selectsAll } from "./fake-kube-selectors.js";
import {
  badRequest,
  expiredContinue,
  failure,
  methodNotAllowed,
  StatusError,
} from "./fake-kube-status.js";
import { type FakeKubeStore, keyOf } from "./fake-kube-store.js";
import type { KubeObject, RequestRecord } from "./fake-kube-types.js";
import type { FakeKubeWatches } from "./fake-kube-watch.js";
import { type FakeKubeWrites, mustFind } from "./fake-kube-writes.js";

/** The index of the first of the sorted `keys` after `key`. */
function firstAfter(keys: readonly string[], key: string): number {
  let lo = 0;
  let hi = keys.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (keys[mid]! <= key) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

export interface FakeKubeHttpParts {
  /** Bearer token the server requires. */
  token: string;
  /** Refuse requests without the token with 401. */
  requireAuth: boolean;
  store: FakeKubeStore;
  watches: FakeKubeWatches;
  writes: FakeKubeWrites;
  faults: FakeKubeFaults;
}

export class FakeKubeHttp {
  private readonly server: http.Server;
  private port = 0;
  /** Every request so far, in order of arrival. */
  readonly log: RequestRecord[] = [];

  constructor(private readonly parts: FakeKubeHttpParts) {
    this.server = http.createServer((req, res) => {
      this.handle(req, res).catch((e: unknown) => {
        if (!res.headersSent)
          this.send(req, res, 500, failure(500, `Internal error occurred: ${String(e)}`));
        else res.destroy();
      });
    });
  }

  async listen(): Promise<void> {
    await new Promise<void>((resolve, reject) => {
      this.server.once("error", reject);
      this.server.listen(0, "127.0.0.1", () => resolve());
    });
    this.port = (this.server.address() as AddressInfo).port;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Stops listening and drops every connection (end the watches first, to end them cleanly). */
  async close(): Promise<void> {
    await new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }

  private send(
    req: http.IncomingMessage,
    res: http.ServerResponse,
    status: number,
    body: unknown,
    extra: Partial<RequestRecord> = {},
    headers: Record<string, string> = {},
  ): void {
    this.logRequest(req, status, extra);
    const text = typeof body === "string" ? body : JSON.stringify(body);
    res.writeHead(status, {
      "Content-Type": typeof body === "string" ? "text/plain; charset=utf-8" : "application/json",
      "Content-Length": Buffer.byteLength(text),
      ...headers,
    });
    res.end(text);
  }

  private logRequest(
    req: http.IncomingMessage,
    status: number,
    extra: Partial<RequestRecord> = {},
  ): void {
    const url = new URL(req.url ?? "/", "http://x");
    this.log.push({
      method: req.method ?? "",
      path: url.pathname,
      query: url.search.slice(1),
      watch: isTrue(url.searchParams.get("watch")),
      ...(req.headers["content-type"] ? { contentType: req.headers["content-type"] } : {}),
      status,
      ...extra,
    });
  }

  private async readBody(req: http.IncomingMessage): Promise<string> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks).toString("utf8");
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", "http://x");
    const method = req.method ?? "GET";
    const body = await this.readBody(req);
    const path = url.pathname.replace(/\/+$/, "") || "/";
    const query = url.searchParams;
    const watch = isTrue(query.get("watch"));

    if (this.parts.requireAuth && req.headers.authorization !== `Bearer ${this.parts.token}`) {
      return this.send(req, res, 401, failure(401, "Unauthorized", "Unauthorized"));
    }

    const fault = this.parts.faults.take(method, path, watch, query);
    if (fault) {
      const status = this.parts.faults.statusOf(fault, path);
      const headers: Record<string, string> =
        fault.retryAfterSeconds !== undefined
          ? { "Retry-After": String(fault.retryAfterSeconds) }
          : {};
      return this.send(req, res, fault.status, status, { fault: true }, headers);
    }

    let route: Route | undefined;
    try {
      route = routeOf(path);
      if (!route) return this.send(req, res, 404, "404 page not found");
      const contentType = (req.headers["content-type"] ?? "").split(";")[0]!.trim().toLowerCase();
      const result = this.dispatch(method, route, query, contentType, body, req, res);
      if (result === "watching") return;
      this.send(req, res, result.status, result.body);
    } catch (e) {
      if (e instanceof StatusError) return this.send(req, res, e.status.code, e.status);
      throw e;
    }
  }

  private dispatch(
    method: string,
    route: Route,
    query: URLSearchParams,
    contentType: string,
    body: string,
    req: http.IncomingMessage,
    res: http.ServerResponse,
  ): { status: number; body: unknown } | "watching" {
    const { def, name, subresource } = route;
    const { store, watches, writes } = this.parts;
    const accepted = () => this.logRequest(req, 200);
    if (
      subresource !== undefined &&
      (subresource !== "status" || !def.statusSubresource || !name)
    ) {
      return { status: 404, body: "404 page not found" };
    }
    if (name === undefined) {
      if (method === "GET") {
        if (isTrue(query.get("watch"))) {
          watches.start(def, route.namespace, query, req, res, accepted);
          return "watching";
        }
        return { status: 200, body: this.listResponse(route, query) };
      }
      if (method === "POST") {
        if (def.namespaced && route.namespace === undefined) throw methodNotAllowed();
        return { status: 201, body: writes.create(route, contentType, body) };
      }
      throw methodNotAllowed();
    }
    switch (method) {
      case "GET":
        if (isTrue(query.get("watch"))) {
          // Watching one object: the deprecated form of fieldSelector=metadata.name=<name>.
          const q = new URLSearchParams(query);
          const selector = q.get("fieldSelector");
          q.set(
            "fieldSelector",
            selector ? `${selector},metadata.name=${name}` : `metadata.name=${name}`,
          );
          watches.start(def, route.namespace, q, req, res, accepted);
          return "watching";
        }
        return { status: 200, body: view(def, mustFind(store, route)) };
      case "PUT":
        return writes.replace(route, contentType, body);
      case "PATCH":
        return { status: 200, body: writes.patch(route, contentType, body) };
      case "DELETE":
        if (subresource) throw methodNotAllowed();
        return { status: 200, body: writes.delete(route, body) };
      default:
        throw methodNotAllowed();
    }
  }

  private listResponse(route: Route, query: URLSearchParams): unknown {
    const { def } = route;
    const { store } = this.parts;
    const selection = parseSelection(def, route.namespace, query);
    const matches = (o: KubeObject) => selects(selection, o);
    const { keys, objects } = store.keyOrder(def.storage);
    /** The revision the list began at: its continue tokens carry it from page to page. */
    let listRv = store.revision;
    let from = 0;
    const token = query.get("continue");
    if (token) {
      let start: string;
      try {
        ({ start, rv: listRv } = JSON.parse(Buffer.from(token, "base64url").toString("utf8")) as {
          start: string;
          rv: number;
        });
        if (typeof start !== "string" || typeof listRv !== "number") throw new Error();
      } catch {
        throw badRequest(
          "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
        );
      }
      // The revision the list began at is compacted away: its continuation cannot be consistent.
      if (listRv < store.compactedThroughOf(def.storage)) throw new StatusError(expiredContinue());
      from = firstAfter(keys, start);
    }
    // Every page of a list names the revision the list began at.
    const metadata: Record<string, unknown> = { resourceVersion: String(listRv) };
    const limit = Number(query.get("limit") ?? "0");
    const items: KubeObject[] = [];
    let i = from;
    for (; i < objects.length && !(limit > 0 && items.length === limit); i++)
      if (matches(objects[i]!)) items.push(objects[i]!);
    // How many more (kube-apiserver counts them only for a list without selectors), or whether any.
    const counted = selectsAll(selection);
    let remaining = 0;
    if (counted && route.namespace === undefined) remaining = objects.length - i;
    else
      for (let j = i; j < objects.length; j++) {
        if (!matches(objects[j]!)) continue;
        remaining++;
        if (!counted) break;
      }
    if (remaining > 0) {
      const last = items.at(-1)!;
      metadata.continue = Buffer.from(
        JSON.stringify({
          rv: listRv,
          start: keyOf(last.metadata?.namespace, last.metadata!.name!),
        }),
      ).toString("base64url");
      if (counted) metadata.remainingItemCount = remaining;
    }
    // Items of a list carry no apiVersion/kind on the wire; the list does.
    return {
      kind: `${def.kind}List`,
      apiVersion: apiVersionOf(def),
      metadata,
      items: items.map((o) => {
        const { apiVersion: _a, kind: _k, ...rest } = view(def, o);
        return rest;
      }),
    };
  }
}
