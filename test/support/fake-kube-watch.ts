/**
 * The watches of the fake Kubernetes API server (fake-kube-apiserver.ts), as
 * kube-apiserver's watch cache serves them: a watch starts from a
 * resourceVersion (replaying the store's history after it), or from none (the
 * current state as synthetic ADDED events), and is refused with 410 Expired
 * once that history is compacted; it then streams the changes the store
 * commits as JSON lines, through its label, field and namespace selection, with
 * the cacher's ADDED/DELETED when an object enters or leaves it; BOOKMARK
 * events for watches that ask; timeoutSeconds and endAll() end a watch cleanly,
 * as the server's watch timeout does.
 *
 * The HTTP layer decides a request is a watch and hands over the request and
 * its response; this module parses the watch's parameters and owns the
 * response from there.
 */
import type http from "node:http";
import { isTrue, metaOf } from "./fake-kube-json.js";
import type { ResourceDef } from "./fake-kube-resources.js";
import { apiVersionOf, qualifiedResource, view } from "./fake-kube-resources.js";
import { parseSelection, type Selection, selects } from "./fake-kube-selectors.js";
import { badRequest, failure, StatusError } from "./fake-kube-status.js";
import type { FakeKubeStore, HistoryEntry } from "./fake-kube-store.js";
import type { FakeResource, WatchInfo } from "./fake-kube-types.js";

interface Watcher {
  def: ResourceDef;
  info: WatchInfo;
  selection: Selection;
  res: http.ServerResponse;
  timer?: NodeJS.Timeout;
}

export class FakeKubeWatches {
  private readonly watchers = new Set<Watcher>();

  /**
   * @param expiredWatchAs how a watch from a compacted resourceVersion is refused:
   *   "event" (200, one ERROR event, end of stream) or "status" (HTTP 410)
   */
  constructor(
    private readonly store: FakeKubeStore,
    private readonly expiredWatchAs: "event" | "status",
  ) {}

  /**
   * Starts a watch of `def` (in `namespace`, all when undefined) on `res`. Throws
   * a StatusError for a request it refuses before answering; calls `accepted`
   * just before it writes the 200 headers (the request log's entry).
   */
  start(
    def: ResourceDef,
    namespace: string | undefined,
    query: URLSearchParams,
    req: http.IncomingMessage,
    res: http.ServerResponse,
    accepted: () => void,
  ): void {
    const selection = parseSelection(def, namespace, query);
    const rvParam = query.get("resourceVersion") ?? "";
    let from: number | undefined;
    if (rvParam !== "" && rvParam !== "0") {
      if (!/^\d+$/.test(rvParam)) throw badRequest(`invalid resource version: ${rvParam}`);
      from = Number(rvParam);
    }
    const info: WatchInfo = {
      path: new URL(req.url ?? "/", "http://x").pathname,
      resource: qualifiedResource(def),
      ...(namespace !== undefined ? { namespace } : {}),
      ...(rvParam ? { resourceVersion: rvParam } : {}),
      ...(query.get("labelSelector") ? { labelSelector: query.get("labelSelector")! } : {}),
      ...(query.get("fieldSelector") ? { fieldSelector: query.get("fieldSelector")! } : {}),
      bookmarks: isTrue(query.get("allowWatchBookmarks")),
    };
    const compacted = this.store.compactedThroughOf(def.storage);
    if (from !== undefined && from < compacted) {
      const expired = failure(410, `too old resource version: ${from} (${compacted})`, "Expired");
      if (this.expiredWatchAs === "status") throw new StatusError(expired);
      accepted();
      res.writeHead(200, { "Content-Type": "application/json" });
      res.end(`${JSON.stringify({ type: "ERROR", object: expired })}\n`);
      return;
    }
    accepted();
    res.writeHead(200, { "Content-Type": "application/json", "Transfer-Encoding": "chunked" });
    res.flushHeaders();
    const w: Watcher = { def, info, selection, res };
    if (from === undefined) {
      // No resourceVersion: the current state as synthetic ADDED events, then changes.
      for (const o of this.store.sorted(def.storage))
        if (selects(selection, o)) this.writeEvent(w, "ADDED", view(def, o));
    } else {
      for (const entry of this.store.historyOf(def.storage))
        if (entry.rv > from) this.deliver(w, entry);
    }
    this.watchers.add(w);
    const timeout = Number(query.get("timeoutSeconds") ?? "0");
    if (timeout > 0) w.timer = setTimeout(() => this.end(w), timeout * 1000);
    res.on("close", () => {
      this.watchers.delete(w);
      if (w.timer) clearTimeout(w.timer);
    });
  }

  /** Delivers a change the store committed to every watch of its resource. */
  publish(storage: FakeResource, entry: HistoryEntry): void {
    for (const w of this.watchers) {
      if (w.def.storage === storage) this.deliver(w, entry);
    }
  }

  /** Sends a BOOKMARK at the current revision to every watch that asked for bookmarks. */
  bookmark(): void {
    for (const w of this.watchers) {
      if (!w.info.bookmarks) continue;
      this.writeEvent(w, "BOOKMARK", {
        apiVersion: apiVersionOf(w.def),
        kind: w.def.kind,
        metadata: { resourceVersion: String(this.store.revision) },
      });
    }
  }

  /** Ends every open watch cleanly. */
  endAll(): void {
    for (const w of [...this.watchers]) this.end(w);
  }

  open(): WatchInfo[] {
    return [...this.watchers].map((w) => ({ ...w.info }));
  }

  /** The cacher's rule: an object entering the selector is ADDED, leaving it is DELETED. */
  private deliver(w: Watcher, entry: HistoryEntry): void {
    const now = entry.type !== "DELETED" && selects(w.selection, entry.object);
    const before = entry.prev !== undefined && selects(w.selection, entry.prev);
    if (now && !before) this.writeEvent(w, "ADDED", view(w.def, entry.object));
    else if (now && before) this.writeEvent(w, "MODIFIED", view(w.def, entry.object));
    else if (!now && before) {
      const last = structuredClone(entry.prev!);
      metaOf(last).resourceVersion = String(entry.rv);
      this.writeEvent(w, "DELETED", view(w.def, last));
    }
  }

  private writeEvent(w: Watcher, type: string, object: unknown): void {
    if (!w.res.writableEnded) w.res.write(`${JSON.stringify({ type, object })}\n`);
  }

  private end(w: Watcher): void {
    this.watchers.delete(w);
    if (w.timer) clearTimeout(w.timer);
    if (!w.res.writableEnded) w.res.end();
  }
}
