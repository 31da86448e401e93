/** POST /login and X-Auth-Token: the credentials the simulator takes and the tokens it handed out. */
import { randomBytes } from "node:crypto";
import type http from "node:http";
import { ApiError } from "./body.js";

export interface Credentials {
  user: string;
  password: string;
  project: string;
  tokenTtlMs: number;
}

/** Token-v1, as MidoNet's login answers it. */
export interface TokenBody {
  key: string;
  expires: string;
}

const DAYS = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
const two = (n: number) => String(n).padStart(2, "0");

/**
 * A token's expiry as MidoNet writes it: Token.java
 * (midonet-cluster/src/main/java/org/midonet/cluster/auth/Token.java)
 * serialises `expires` with a SimpleDateFormat of
 * HttpSupport.SET_COOKIE_EXPIRES_FORMAT ("EEE, dd-MM-yyyy HH:mm:ss z",
 * midonet-util/src/main/java/org/midonet/util/http/HttpSupport.java)
 * in the UTC time zone, e.g. "Mon, 03-02-2025 14:05:09 UTC": a numeric month
 * after the day, whole seconds, no ISO 8601. Date.parse reads that as
 * month-day (or not at all), so a client must not parse it naively.
 */
export function formatTokenExpiry(ms: number): string {
  const d = new Date(ms);
  const date = `${two(d.getUTCDate())}-${two(d.getUTCMonth() + 1)}-${d.getUTCFullYear()}`;
  const time = `${two(d.getUTCHours())}:${two(d.getUTCMinutes())}:${two(d.getUTCSeconds())}`;
  return `${DAYS[d.getUTCDay()]}, ${date} ${time} UTC`;
}

/** Java's String.split(":"): trailing empty strings dropped, a string without ":" kept whole. */
function javaSplitOnColon(s: string): string[] {
  if (!s.includes(":")) return [s];
  const parts = s.split(":");
  while (parts.length > 0 && parts[parts.length - 1] === "") parts.pop();
  return parts;
}

/**
 * LoginFilter.java answers every refused login through
 * ResponseUtils.setAuthErrorResponse (class org.midonet.cluster.rest_api.ResponseUtils):
 * 401, an Error-v1 body, and this header
 * (HttpSupport.BASIC_AUTH_REALM_FIELD, its double space included).
 */
const loginRefused = (message: string) =>
  new ApiError(401, message, undefined, {
    "WWW-Authenticate": 'Basic  realm="BASIC_AUTH_REALM"',
  });

const BASIC_AUTH_PREFIX = "Basic ";

export class Session {
  private readonly tokens = new Map<string, number>(); // key -> expiry (ms)

  constructor(private readonly credentials: Credentials) {}

  issue(): TokenBody {
    const key = randomBytes(16).toString("hex");
    const expiry = Date.now() + this.credentials.tokenTtlMs;
    this.tokens.set(key, expiry);
    return { key, expires: formatTokenExpiry(expiry) };
  }

  valid(header: string | string[] | undefined): boolean {
    if (typeof header !== "string") return false;
    const expiry = this.tokens.get(header);
    return expiry !== undefined && expiry > Date.now();
  }

  expireAll(): void {
    this.tokens.clear();
  }

  /**
   * Basic auth and X-Auth-Project, answered with a Token-v1 or a 401, in the
   * order and words of LoginFilter.java
   * (midonet-cluster/src/main/java/org/midonet/cluster/rest_api/auth/LoginFilter.java): no
   * Authorization header, then not "Basic ", then the decoded credentials
   * split on ":" with Java's String.split, which must give exactly two parts
   * (so "user" alone, "user:" with an empty password, "user::" and "a:b:c" are
   * all "Authorization header is not valid"; "user:pass:" splits in two).
   */
  login(headers: http.IncomingHttpHeaders): TokenBody {
    const authorization = headers.authorization ?? "";
    if (authorization === "") throw loginRefused("Authorization header is not set.");
    if (!authorization.toLowerCase().startsWith(BASIC_AUTH_PREFIX.toLowerCase())) {
      throw loginRefused("Authorization header does not contain Basic.");
    }
    const encoded = authorization.slice(BASIC_AUTH_PREFIX.length);
    const credList = javaSplitOnColon(Buffer.from(encoded, "base64").toString("utf8"));
    if (credList.length !== 2) throw loginRefused("Authorization header is not valid");
    const [user, password] = credList;
    const c = this.credentials;
    if (user !== c.user || password !== c.password || headers["x-auth-project"] !== c.project) {
      throw loginRefused("Authentication error: invalid credentials");
    }
    return this.issue();
  }
}
