/**
 * What a failed Kubernetes API call says, in one line, for both daemons' logs
 * and errors: a client-node ApiException, a watch's HTTP status, a socket
 * error, a timeout. Duck-typed, so the driver can keep loading client-node
 * lazily (its types only, with `import type`, compile to nothing).
 */

/** The `message` of a Status body (client-node hands it over as the raw string). */
export function statusMessage(body: unknown): string | undefined {
  let b = body;
  if (typeof b === "string") {
    try {
      b = JSON.parse(b);
    } catch {
      return body === "" ? undefined : (body as string).slice(0, 200);
    }
  }
  const m = (b as { message?: unknown } | null)?.message;
  return typeof m === "string" ? m : undefined;
}

/** One line for any failure: a watch's HTTP status, a socket error's code, a timeout. */
export function describeKubeError(err: unknown): string {
  const e = err as { statusCode?: number; code?: unknown; name?: string; message?: string } | null;
  if (e && typeof e.statusCode === "number")
    return `HTTP ${e.statusCode}: ${e.message ?? ""}`.trim();
  if (e && typeof e.code === "number" && typeof e.message === "string") {
    // An ApiException that reached here untranslated (a watch's list, a controller's call).
    return `HTTP ${e.code}: ${statusMessage((e as { body?: unknown }).body) ?? "no message"}`;
  }
  if (e?.name === "AbortError") return "request timed out or aborted";
  const code = typeof e?.code === "string" ? ` (${e.code})` : "";
  return `${e?.message ?? String(err)}${code}`;
}
