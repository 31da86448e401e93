/**
 * The transport under the MidoNet client (api.ts): HTTP calls with a timeout
 * on every attempt, retries, login, the media type of each call, and the
 * mapping of answers to results and errors. Apart from the per-resource views
 * (api-resources.ts), which only say which path and kind each call is for:
 * everything about talking to the server is here, once.
 *
 * What the original integration lacked and this adds: a timeout on every
 * attempt, retries with exponential backoff and jitter on 5xx, network errors and
 * timeouts (never on a 4xx, which would only fail again), and errors that name
 * the call and the object. As there, a 401 leads to one login (Basic auth +
 * X-Auth-Project → Token-v1) and one retry of the call.
 *
 * The outcomes a reconciler treats as success are results, not errors: a GET
 * answered 404 is `undefined`, a DELETE answered 404 is `false` (already gone),
 * a create answered 409 is `"exists"`. MidoNet answers a duplicate MAC or ARP
 * table entry with a 500 instead of a 409 (MNA-1315); for those two kinds a 500
 * on create is checked with a GET before anything is retried.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { type BackoffPolicy, backoffDelay } from "../common/backoff.js";
import { messageOf } from "../common/errors.js";
import {
  APPLICATION_MEDIA_TYPE,
  type Application,
  COLLECTION_MEDIA_TYPES,
  createPath,
  type ErrorBody,
  itemPath,
  loginPath,
  MEDIA_TYPES,
  type MidonetObject,
  objectKey,
  type Port,
  type PortLink,
  portPath,
  type ResourceKind,
  TOKEN_MEDIA_TYPE,
  type Token,
  type UpdatableKind,
} from "./resources.js";

export interface MidonetClientOptions {
  /** e.g. http://midonet-api:8181/midonet-api */
  baseUrl: string;
  /** Credentials for POST /login; without them a 401 is final. */
  user?: string;
  password?: string;
  project?: string;
  /** Limit on each attempt, headers and body. Default 10 s. */
  timeoutMs?: number;
  /** Extra attempts after the first, on 5xx, network errors and timeouts. Default 3. */
  retries?: number;
  /** Delay before the first retry; doubled each time, with jitter. Default 200 ms. */
  backoffMs?: number;
  /** Cap on one delay. Default 5 s. */
  maxBackoffMs?: number;
  /** Default: the global fetch. */
  fetch?: typeof fetch;
  /** Jitter source in [0, 1). Default Math.random. */
  random?: () => number;
  /** Aborts every call in flight and every later one (shutdown). */
  signal?: AbortSignal;
  /** Called after every attempt (for logs and metrics). */
  onAttempt?: (attempt: AttemptInfo) => void;
}

export interface AttemptInfo {
  method: HttpMethod;
  path: string;
  /** 0 when no HTTP answer came. */
  status: number;
  /** 1 for the first try. */
  attempt: number;
  durationMs: number;
  error?: string;
}

export type HttpMethod = "GET" | "POST" | "PUT" | "DELETE";

/** A create either made the object or found one with its id (or key) already there. */
export type CreateResult = "created" | "exists";

/** Why a call failed: an HTTP status, or no answer at all. */
export type FailureReason = "http" | "timeout" | "network" | "aborted";

export interface MidonetApiErrorInit {
  method: HttpMethod;
  path: string;
  status: number;
  reason: FailureReason;
  attempts: number;
  kind?: ResourceKind | undefined;
  objectId?: string | undefined;
  code?: number | undefined;
  serverMessage?: string | undefined;
  cause?: unknown;
}

/**
 * A validation failure's message is only "Validation error(s) found": the
 * reasons are its `violations` (property and message each), added here.
 */
function withViolations(message: string, violations: unknown): string {
  if (!Array.isArray(violations) || violations.length === 0) return message;
  const each = violations.map((v: { property?: unknown; message?: unknown }) =>
    `${typeof v?.property === "string" ? v.property : "?"} ${typeof v?.message === "string" ? v.message : ""}`.trim(),
  );
  return `${message}: ${each.join("; ")}`;
}

/**
 * A failed MidoNet call. The message names the call, the object and what went
 * wrong, e.g. `MidoNet POST /chains/…/rules (Rule 6a1f…): 404 chain … not found`.
 */
export class MidonetApiError extends Error {
  readonly method: HttpMethod;
  readonly path: string;
  /** HTTP status; 0 when no answer came (timeout, network, aborted). */
  readonly status: number;
  readonly reason: FailureReason;
  /** The Error-v1 `code` of the answer, when it had one. */
  readonly code: number | undefined;
  /** The Error-v1 `message` of the answer, when it had one. */
  readonly serverMessage: string | undefined;
  readonly kind: ResourceKind | undefined;
  readonly objectId: string | undefined;
  readonly attempts: number;

  constructor(init: MidonetApiErrorInit) {
    super(MidonetApiError.describe(init), init.cause === undefined ? {} : { cause: init.cause });
    this.name = "MidonetApiError";
    this.method = init.method;
    this.path = init.path;
    this.status = init.status;
    this.reason = init.reason;
    this.code = init.code;
    this.serverMessage = init.serverMessage;
    this.kind = init.kind;
    this.objectId = init.objectId;
    this.attempts = init.attempts;
  }

  /** Worth trying again later: no answer, or a server-side failure. */
  get retryable(): boolean {
    return this.reason === "timeout" || this.reason === "network" || this.status >= 500;
  }

  private static describe(init: MidonetApiErrorInit): string {
    const object =
      init.kind === undefined
        ? ""
        : ` (${init.kind}${init.objectId === undefined ? "" : ` ${init.objectId}`})`;
    let what: string;
    switch (init.reason) {
      case "timeout":
        what = "timed out";
        break;
      case "aborted":
        what = "aborted";
        break;
      case "network": {
        const cause = init.cause as { message?: string; cause?: { message?: string } } | undefined;
        what = `network error: ${cause?.cause?.message ?? cause?.message ?? "unknown"}`;
        break;
      }
      default:
        what = `${init.status}${init.serverMessage ? ` ${init.serverMessage}` : ""}`;
    }
    const tries = init.attempts > 1 ? ` after ${init.attempts} attempts` : "";
    return `MidoNet ${init.method} ${init.path}${object}: ${what}${tries}`;
  }
}

interface Call {
  method: HttpMethod;
  path: string;
  kind?: ResourceKind | undefined;
  objectId?: string | undefined;
  /** Content-Type of the JSON body (POST, PUT). */
  contentType?: string;
  accept?: string;
  body?: unknown;
  headers?: Record<string, string>;
  /** The login call itself: no token, no re-login. */
  isLogin?: boolean;
  /** On a 5xx, asked before retrying: true means the object is there (a hidden 409). */
  probeOn5xx?: () => Promise<boolean>;
}

interface Answer {
  status: number;
  body: unknown;
  attempts: number;
}

function ok(status: number): boolean {
  return status >= 200 && status < 300;
}

/** The calls on any MidoNet object, and the request loop under them. */
export class MidonetTransport {
  private readonly baseUrl: string;
  private readonly user: string | undefined;
  private readonly password: string | undefined;
  private readonly project: string | undefined;
  private readonly timeoutMs: number;
  private readonly retries: number;
  private readonly backoff: BackoffPolicy;
  private readonly fetchFn: typeof fetch;
  private readonly random: () => number;
  private readonly signal: AbortSignal | undefined;
  private readonly onAttempt: ((a: AttemptInfo) => void) | undefined;
  private token: string | undefined;
  private loginInFlight: Promise<Token> | undefined;

  constructor(options: MidonetClientOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, "");
    this.user = options.user;
    this.password = options.password;
    this.project = options.project;
    this.timeoutMs = options.timeoutMs ?? 10_000;
    this.retries = Math.max(0, options.retries ?? 3);
    this.backoff = { baseMs: options.backoffMs ?? 200, maxMs: options.maxBackoffMs ?? 5_000 };
    this.fetchFn = options.fetch ?? globalThis.fetch;
    this.random = options.random ?? Math.random;
    this.signal = options.signal;
    this.onAttempt = options.onAttempt;
  }

  // -- generic operations on any object -------------------------------------

  /** POST the object where it belongs. 409 (or MidoNet's 500 for a duplicate MAC/ARP entry) is "exists". */
  async create(obj: MidonetObject): Promise<CreateResult> {
    const call: Call = {
      method: "POST",
      path: createPath(obj),
      kind: obj.kind,
      objectId: objectKey(obj),
      contentType: MEDIA_TYPES[obj.kind],
      body: obj.body,
    };
    if (obj.kind === "MacPort" || obj.kind === "IP4Mac") {
      call.probeOn5xx = async () => {
        try {
          return (await this.get(obj)) !== undefined;
        } catch {
          return false;
        }
      };
    }
    const answer = await this.send(call);
    if (ok(answer.status)) return "created";
    if (answer.status === 409) return "exists";
    throw this.failure(call, answer);
  }

  /** GET the object as the server has it; undefined when it does not exist. */
  async get<O extends MidonetObject>(obj: O): Promise<O["body"] | undefined> {
    if (obj.kind === "PortLink") {
      const port = await this.getAt<Port>("PortLink", portPath(obj.parentId), obj.parentId);
      if (!port?.peerId) return undefined;
      return { portId: obj.parentId, peerId: port.peerId } satisfies PortLink;
    }
    return this.getAt<O["body"]>(obj.kind, itemPath(obj), objectKey(obj));
  }

  /** PUT the object's writable fields. A missing object is an error (status 404). */
  async update(obj: MidonetObject & { kind: UpdatableKind }): Promise<void> {
    return this.putAt(obj.kind, itemPath(obj), objectKey(obj), obj.body);
  }

  /** DELETE the object; false when it was already gone. */
  async delete(obj: MidonetObject): Promise<boolean> {
    return this.deleteAt(obj.kind, itemPath(obj), objectKey(obj));
  }

  /** GET / : the Application object. */
  async application(): Promise<Application> {
    const call: Call = { method: "GET", path: "/", accept: APPLICATION_MEDIA_TYPE };
    const answer = await this.send(call);
    if (answer.status !== 200) throw this.failure(call, answer);
    return answer.body as Application;
  }

  /** POST /login now; normally done on the first 401. */
  async login(): Promise<Token> {
    this.loginInFlight ??= this.doLogin().finally(() => {
      this.loginInFlight = undefined;
    });
    return this.loginInFlight;
  }

  // -- the calls at a path, for the typed views (api-resources.ts) ----------

  /** GET one object at `path`; undefined when it does not exist. */
  async getAt<T>(kind: ResourceKind, path: string, objectId?: string): Promise<T | undefined> {
    const call: Call = {
      method: "GET",
      path,
      kind,
      objectId,
      accept: MEDIA_TYPES[kind === "PortLink" ? "Port" : kind],
    };
    const answer = await this.send(call);
    if (answer.status === 200) return answer.body as T;
    if (answer.status === 404) return undefined;
    throw this.failure(call, answer);
  }

  /** PUT the writable fields at `path`. A missing object is an error (status 404). */
  async putAt(
    kind: UpdatableKind,
    path: string,
    objectId: string | undefined,
    body: unknown,
  ): Promise<void> {
    const call: Call = {
      method: "PUT",
      path,
      kind,
      objectId,
      contentType: MEDIA_TYPES[kind],
      body,
    };
    const answer = await this.send(call);
    if (!ok(answer.status)) throw this.failure(call, answer);
  }

  /** DELETE at `path`; false when it was already gone. */
  async deleteAt(kind: ResourceKind, path: string, objectId?: string): Promise<boolean> {
    const call: Call = { method: "DELETE", path, kind, objectId };
    const answer = await this.send(call);
    if (ok(answer.status)) return true;
    if (answer.status === 404) return false;
    throw this.failure(call, answer);
  }

  /** GET the collection at `path`. */
  async listAt<T>(kind: ResourceKind, path: string): Promise<T[]> {
    const call: Call = { method: "GET", path, kind, accept: COLLECTION_MEDIA_TYPES[kind] };
    const answer = await this.send(call);
    if (answer.status !== 200 || !Array.isArray(answer.body)) throw this.failure(call, answer);
    return answer.body as T[];
  }

  private async doLogin(): Promise<Token> {
    if (this.user === undefined) {
      throw new MidonetApiError({
        method: "POST",
        path: loginPath(),
        status: 401,
        reason: "http",
        attempts: 0,
        serverMessage: "no credentials configured",
      });
    }
    const basic = Buffer.from(`${this.user}:${this.password ?? ""}`).toString("base64");
    const headers: Record<string, string> = { Authorization: `Basic ${basic}` };
    if (this.project !== undefined) headers["X-Auth-Project"] = this.project;
    const call: Call = {
      method: "POST",
      path: loginPath(),
      accept: TOKEN_MEDIA_TYPE,
      headers,
      isLogin: true,
    };
    const answer = await this.send(call);
    const token = answer.body as Partial<Token> | undefined;
    if (answer.status !== 200 || typeof token?.key !== "string") {
      throw this.failure(call, answer);
    }
    this.token = token.key;
    return token as Token;
  }

  // -- the request loop -----------------------------------------------------

  private async send(call: Call): Promise<Answer> {
    let attempts = 0;
    let reloggedIn = false;
    for (;;) {
      attempts++;
      const tokenUsed = this.token;
      let answer: { status: number; body: unknown };
      try {
        answer = await this.attempt(call, attempts);
      } catch (err) {
        const reason: FailureReason = this.signal?.aborted
          ? "aborted"
          : (err as { name?: string }).name === "TimeoutError"
            ? "timeout"
            : "network";
        if (reason !== "aborted" && attempts <= this.retries) {
          await this.pause(attempts, call, reason);
          continue;
        }
        throw new MidonetApiError({
          method: call.method,
          path: call.path,
          status: 0,
          reason,
          attempts,
          kind: call.kind,
          objectId: call.objectId,
          cause: err,
        });
      }
      if (answer.status === 401 && !call.isLogin && !reloggedIn && this.user !== undefined) {
        // One login, then the call again; a token another call renewed meanwhile is reused.
        reloggedIn = true;
        attempts--;
        if (this.token === tokenUsed) {
          try {
            await this.login();
          } catch (err) {
            throw new MidonetApiError({
              method: call.method,
              path: call.path,
              status: err instanceof MidonetApiError ? err.status : 401,
              reason: err instanceof MidonetApiError ? err.reason : "http",
              attempts: attempts + 1,
              kind: call.kind,
              objectId: call.objectId,
              serverMessage: `login failed: ${messageOf(err)}`,
              cause: err,
            });
          }
        }
        continue;
      }
      if (answer.status >= 500) {
        if (call.probeOn5xx && (await call.probeOn5xx())) {
          return { status: 409, body: answer.body, attempts };
        }
        if (attempts <= this.retries) {
          await this.pause(attempts, call, "http");
          continue;
        }
      }
      return { ...answer, attempts };
    }
  }

  private async attempt(call: Call, attempt: number): Promise<{ status: number; body: unknown }> {
    const headers: Record<string, string> = { ...call.headers };
    if (call.accept !== undefined) headers.Accept = call.accept;
    if (call.contentType !== undefined) headers["Content-Type"] = call.contentType;
    if (!call.isLogin && this.token !== undefined) headers["X-Auth-Token"] = this.token;
    const timeout = AbortSignal.timeout(this.timeoutMs);
    const signal = this.signal ? AbortSignal.any([timeout, this.signal]) : timeout;
    const started = performance.now();
    const report = (status: number, error?: string) => {
      if (!this.onAttempt) return;
      const info: AttemptInfo = {
        method: call.method,
        path: call.path,
        status,
        attempt,
        durationMs: performance.now() - started,
      };
      if (error !== undefined) info.error = error;
      this.onAttempt(info);
    };
    try {
      const res = await this.fetchFn(this.baseUrl + call.path, {
        method: call.method,
        headers,
        body: call.body === undefined ? null : JSON.stringify(call.body),
        signal,
      });
      const text = await res.text();
      let body: unknown;
      if (text.length > 0) {
        try {
          body = JSON.parse(text);
        } catch {
          body = text;
        }
      }
      report(res.status);
      return { status: res.status, body };
    } catch (err) {
      report(0, messageOf(err));
      throw err;
    }
  }

  /** The common backoff (src/common/backoff.ts) before retry number `attempt` (1 = the first). */
  private async pause(attempt: number, call: Call, reason: FailureReason): Promise<void> {
    const delay = backoffDelay(this.backoff, attempt - 1, this.random);
    try {
      await sleep(delay, undefined, this.signal ? { signal: this.signal } : {});
    } catch (err) {
      throw new MidonetApiError({
        method: call.method,
        path: call.path,
        status: 0,
        reason: "aborted",
        attempts: attempt,
        kind: call.kind,
        objectId: call.objectId,
        cause: err ?? reason,
      });
    }
  }

  private failure(call: Call, answer: Answer): MidonetApiError {
    const error = answer.body as Partial<ErrorBody> | undefined;
    const isErrorBody = typeof error === "object" && error !== null;
    return new MidonetApiError({
      method: call.method,
      path: call.path,
      status: answer.status,
      reason: "http",
      attempts: answer.attempts,
      kind: call.kind,
      objectId: call.objectId,
      code: isErrorBody && typeof error.code === "number" ? error.code : undefined,
      serverMessage:
        isErrorBody && typeof error.message === "string"
          ? withViolations(error.message, error.violations)
          : typeof answer.body === "string"
            ? answer.body
            : undefined,
    });
  }
}
