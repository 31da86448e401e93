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

export class Session {
  private readonly tokens = new Map<string, number>(); // key -> expiry (ms)

  constructor(private readonly credentials: Credentials) {}

  issue(): { key: string; expires: string } {
    const key = randomBytes(16).toString("hex");
    const expiry = Date.now() + this.credentials.tokenTtlMs;
    this.tokens.set(key, expiry);
    return { key, expires: new Date(expiry).toISOString() };
  }

  valid(header: string | string[] | undefined): boolean {
    if (typeof header !== "string") return false;
    const expiry = this.tokens.get(header);
    return expiry !== undefined && expiry > Date.now();
  }

  expireAll(): void {
    this.tokens.clear();
  }

  /** Basic auth and X-Auth-Project, answered with a Token-v1 or a 401. */
  login(headers: http.IncomingHttpHeaders): { key: string; expires: string } {
    const m = /^Basic\s+(.+)$/i.exec(headers.authorization ?? "");
    const decoded = m ? Buffer.from(m[1] as string, "base64").toString("utf8") : "";
    const sep = decoded.indexOf(":");
    const user = sep < 0 ? "" : decoded.slice(0, sep);
    const password = sep < 0 ? "" : decoded.slice(sep + 1);
    const c = this.credentials;
    if (user !== c.user || password !== c.password || headers["x-auth-project"] !== c.project) {
      throw new ApiError(401, "Authentication error: invalid credentials");
    }
    return this.issue();
  }
}
