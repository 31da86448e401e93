/**
 * The errors of the fake Kubernetes API server (fake-kube-apiserver.ts), as
 * kube-apiserver words them: Status bodies with the real reasons, messages and
 * details (`pods "x" not found`, `Operation cannot be fulfilled on
 * leases.coordination.k8s.io "x": the object has been modified; ...`, the 410
 * of a compacted continue token). Any part throws a StatusError; the HTTP layer
 * answers it with the Status as the body and its code as the HTTP status.
 */
import type { ResourceDef } from "./fake-kube-resources.js";
import { qualifiedResource } from "./fake-kube-resources.js";
import type { KubeStatus } from "./fake-kube-types.js";

export const REASONS: Record<number, string> = {
  400: "BadRequest",
  401: "Unauthorized",
  403: "Forbidden",
  404: "NotFound",
  405: "MethodNotAllowed",
  406: "NotAcceptable",
  409: "Conflict",
  410: "Expired",
  413: "RequestEntityTooLarge",
  415: "UnsupportedMediaType",
  422: "Invalid",
  429: "TooManyRequests",
  500: "InternalError",
  503: "ServiceUnavailable",
  504: "Timeout",
};

export class StatusError extends Error {
  constructor(readonly status: KubeStatus) {
    super(status.message);
  }
}

export function failure(
  code: number,
  message: string,
  reason = REASONS[code] ?? "Unknown",
  details?: KubeStatus["details"],
): KubeStatus {
  const status: KubeStatus = {
    kind: "Status",
    apiVersion: "v1",
    metadata: {},
    status: "Failure",
    message,
    reason,
    code,
  };
  if (details) status.details = details;
  return status;
}

/** kube-apiserver's answer to a continue token whose revision etcd compacted. */
export function expiredContinue(): KubeStatus {
  return failure(
    410,
    "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.",
    "Expired",
  );
}

export function objectDetails(def: ResourceDef, name: string): KubeStatus["details"] {
  return def.group === ""
    ? { name, kind: def.resource }
    : { name, group: def.group, kind: def.resource };
}

/** An error about one object, with its name and resource in the details. */
function objectError(
  def: ResourceDef,
  name: string,
  code: number,
  reason: string,
  message: string,
): StatusError {
  return new StatusError(failure(code, message, reason, objectDetails(def, name)));
}

export function notFound(def: ResourceDef, name: string): StatusError {
  return objectError(def, name, 404, "NotFound", `${qualifiedResource(def)} "${name}" not found`);
}

export function alreadyExists(def: ResourceDef, name: string): StatusError {
  return objectError(
    def,
    name,
    409,
    "AlreadyExists",
    `${qualifiedResource(def)} "${name}" already exists`,
  );
}

const OPTIMISTIC_LOCK_MESSAGE =
  "the object has been modified; please apply your changes to the latest version and try again";

export function conflict(
  def: ResourceDef,
  name: string,
  why = OPTIMISTIC_LOCK_MESSAGE,
): StatusError {
  return objectError(
    def,
    name,
    409,
    "Conflict",
    `Operation cannot be fulfilled on ${qualifiedResource(def)} "${name}": ${why}`,
  );
}

export function badRequest(message: string): StatusError {
  return new StatusError(failure(400, message, "BadRequest"));
}

export function invalid(
  def: ResourceDef,
  name: string,
  causes: { field: string; message: string }[],
): StatusError {
  const text = causes.map((c) => `${c.field}: ${c.message}`).join(", ");
  return new StatusError(
    failure(422, `${def.kind} "${name}" is invalid: ${text}`, "Invalid", {
      name,
      ...(def.group ? { group: def.group } : {}),
      kind: def.kind,
      causes: causes.map((c) => ({
        reason: "FieldValueRequired",
        message: c.message,
        field: c.field,
      })),
    }),
  );
}

/** 415 for a body whose media type the endpoint does not take. */
export function unsupportedMediaType(accepted: string): StatusError {
  return new StatusError(
    failure(
      415,
      `the body of the request was in an unknown format - accepted media types include: ${accepted}`,
      "UnsupportedMediaType",
    ),
  );
}

export function methodNotAllowed(): StatusError {
  return new StatusError(
    failure(
      405,
      "the server does not allow this method on the requested resource",
      "MethodNotAllowed",
    ),
  );
}
