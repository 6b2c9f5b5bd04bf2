/**
 * `meta/v1 Status` objects exactly as kube-apiserver writes them, so clients (kubectl,
 * @kubernetes/client-node) read our errors the way they read a real cluster's.
 */
export type StatusReason =
  | 'NotFound'
  | 'AlreadyExists'
  | 'Conflict'
  | 'Invalid'
  | 'BadRequest'
  | 'Expired'
  | 'MethodNotAllowed'
  | 'UnsupportedMediaType'
  | 'InternalError'
  | 'ServiceUnavailable'
  | 'Forbidden'
  | 'Unauthorized';

export type ApiStatus = {
  kind: 'Status';
  apiVersion: 'v1';
  metadata: Record<string, never>;
  status: 'Failure' | 'Success';
  message: string;
  reason?: StatusReason;
  details?: { name?: string; group?: string; kind?: string; uid?: string; causes?: { message: string }[] };
  code: number;
};

/** An error that the HTTP layer turns into a Status body with `code` as the HTTP status. */
export class ApiError extends Error {
  constructor(readonly status: ApiStatus) {
    super(status.message);
  }
}

function failure(code: number, reason: StatusReason, message: string, details?: ApiStatus['details']): ApiError {
  const status: ApiStatus = {
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message,
    reason,
    code,
  };
  if (details) status.details = details;
  return new ApiError(status);
}

/** `pods "x" not found`; `group` is empty for the core group. */
export function notFound(resource: string, group: string, name: string): ApiError {
  const qualified = group ? `${resource}.${group}` : resource;
  return failure(404, 'NotFound', `${qualified} "${name}" not found`, { name, group, kind: resource });
}

export function alreadyExists(resource: string, group: string, name: string): ApiError {
  const qualified = group ? `${resource}.${group}` : resource;
  return failure(409, 'AlreadyExists', `${qualified} "${name}" already exists`, { name, group, kind: resource });
}

export function conflict(resource: string, group: string, name: string, why: string): ApiError {
  const qualified = group ? `${resource}.${group}` : resource;
  return failure(409, 'Conflict', `Operation cannot be fulfilled on ${qualified} "${name}": ${why}`, {
    name,
    group,
    kind: resource,
  });
}

export function invalid(kind: string, name: string, causes: string[]): ApiError {
  return failure(422, 'Invalid', `${kind} "${name}" is invalid: ${causes.join(', ')}`, {
    name,
    kind,
    causes: causes.map((message) => ({ message })),
  });
}

/** kube-apiserver's answer to a request with no credentials, or with credentials it does not know. */
export function unauthorized(): ApiError {
  return failure(401, 'Unauthorized', 'Unauthorized');
}

export function badRequest(message: string): ApiError {
  return failure(400, 'BadRequest', message);
}

export function gone(message: string): ApiError {
  return failure(410, 'Expired', message);
}

export function methodNotAllowed(message: string): ApiError {
  return failure(405, 'MethodNotAllowed', message);
}

export function unsupportedMediaType(contentType: string): ApiError {
  return failure(415, 'UnsupportedMediaType', `the body of the request was in an unknown format: ${contentType}`);
}

export function internal(message: string): ApiError {
  return failure(500, 'InternalError', message);
}

/** An admission refusal; `code` is the webhook's own status code (kube-apiserver passes it through). */
export function admissionDenied(code: number, message: string, reason?: string): ApiError {
  const status: ApiStatus = { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, code };
  if (reason) status.reason = reason as StatusReason;
  return new ApiError(status);
}

export function successStatus(details: ApiStatus['details']): Omit<ApiStatus, 'message'> & { message?: string } {
  return {
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Success',
    code: 200,
    ...(details ? { details } : {}),
  };
}
