/** The simulator's errors (status + Error-v1 message) and request body validation. */
import { randomBytes } from "node:crypto";
import { isIPv4 } from "node:net";

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    /** A bean-validation failure's violations, which MidoNet lists beside its message. */
    readonly violations?: ReadonlyArray<{ property: string; message: string }>,
    /** Headers the error answer carries besides Content-Type. */
    readonly headers?: Readonly<Record<string, string>>,
  ) {
    super(message);
  }
}

/**
 * A field MidoNet's DTO validation refuses: its answer is not the reason but
 * `{code: 400, message: "Validation error(s) found", violations: [{property,
 * message}]}` (midonet-cluster's rest_api ResponseUtils), the message of each
 * in Hibernate Validator's words.
 */
export const violation = (property: string, message: string) =>
  new ApiError(400, "Validation error(s) found", [{ property, message }]);

export const badRequest = (m: string) => new ApiError(400, m);
export const notFound = (m: string) => new ApiError(404, m);
export const conflict = (m: string) => new ApiError(409, m);

export const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const MAC_RE = /^[0-9a-f]{2}(:[0-9a-f]{2}){5}$/i;

/** A locally administered unicast MAC: what MidoNet's MAC.random() hands out. */
export function randomMac(): string {
  const b = randomBytes(5);
  return ["02", ...Array.from(b, (x) => x.toString(16).padStart(2, "0"))].join(":");
}

/** "aa-bb-cc-dd-ee-ff" (as entry paths carry it) → "aa:bb:cc:dd:ee:ff", or undefined. */
export function macFromPath(s: string): string | undefined {
  const mac = s.replaceAll("-", ":").toLowerCase();
  return MAC_RE.test(mac) ? mac : undefined;
}

export function validCidr(s: unknown): s is string {
  if (typeof s !== "string") return false;
  const [addr, len, extra] = s.split("/");
  if (extra !== undefined || addr === undefined || len === undefined) return false;
  const n = Number(len);
  return isIPv4(addr) && /^\d{1,2}$/.test(len) && n >= 0 && n <= 32;
}

/**
 * A request body read the way MidoNet's JSON binding reads it: only the
 * fields the resource accepts (accepted-fields.ts) count, any other (read-only
 * ones, unknown ones) is ignored, as ObjectMapperProvider.java's
 * FAIL_ON_UNKNOWN_PROPERTIES false has it. null stands for "not set".
 */
export class Body {
  private constructor(
    private readonly kind: string,
    private readonly obj: Record<string, unknown>,
  ) {}

  static parse(kind: string, raw: unknown, writable: readonly string[]): Body {
    if (typeof raw !== "object" || raw === null || Array.isArray(raw)) {
      throw badRequest(`${kind}: the body must be a JSON object`);
    }
    const obj = raw as Record<string, unknown>;
    const writableOnly: Record<string, unknown> = {};
    for (const key of writable) if (key in obj) writableOnly[key] = obj[key];
    return new Body(kind, writableOnly);
  }

  has(key: string): boolean {
    return this.obj[key] !== undefined && this.obj[key] !== null;
  }

  raw(key: string): unknown {
    return this.obj[key];
  }

  private fail(key: string, what: string): never {
    throw badRequest(`${this.kind}.${key}: ${what}`);
  }

  uuid(key: string, required = false): string | null {
    if (!this.has(key)) return required ? this.fail(key, "may not be null") : null;
    const v = this.obj[key];
    if (typeof v !== "string" || !UUID_RE.test(v)) this.fail(key, "is not a valid UUID");
    return v.toLowerCase();
  }

  /** A list of UUIDs (lower-cased); null when absent. */
  uuidList(key: string): string[] | null {
    if (!this.has(key)) return null;
    const v = this.obj[key];
    if (!Array.isArray(v) || !v.every((x) => typeof x === "string" && UUID_RE.test(x))) {
      this.fail(key, "must be a list of UUIDs");
    }
    return (v as string[]).map((x) => x.toLowerCase());
  }

  str(key: string, required = false): string | null {
    if (!this.has(key)) return required ? this.fail(key, "may not be null") : null;
    const v = this.obj[key];
    if (typeof v !== "string") this.fail(key, "must be a string");
    return v;
  }

  oneOf<T extends string>(key: string, values: readonly T[], required = false): T | null {
    const v = this.str(key, required);
    if (v === null) return null;
    if (!(values as readonly string[]).includes(v)) {
      this.fail(key, `must be one of ${values.join(", ")}`);
    }
    return v as T;
  }

  bool(key: string): boolean | null {
    if (!this.has(key)) return null;
    const v = this.obj[key];
    if (typeof v !== "boolean") this.fail(key, "must be true or false");
    return v;
  }

  int(key: string, min: number, max: number, required = false): number | null {
    if (!this.has(key)) return required ? this.fail(key, "may not be null") : null;
    const v = this.obj[key];
    if (typeof v !== "number" || !Number.isInteger(v)) this.fail(key, "must be an integer");
    if (v < min || v > max) this.fail(key, `must be between ${min} and ${max}`);
    return v;
  }

  ipv4(key: string, required = false): string | null {
    const v = this.str(key, required);
    if (v !== null && !isIPv4(v)) this.fail(key, "is an invalid IP format");
    return v;
  }

  mac(key: string, required = false): string | null {
    const v = this.str(key, required);
    if (v !== null && !MAC_RE.test(v)) this.fail(key, "is an invalid MAC format");
    return v === null ? null : v.toLowerCase();
  }
}
