/** One violated rule on one field of an input object. Sorted and joined into messages users read. */
export type FieldError = {
  /** Where, in the object's own field syntax: `spec.containers[0].resources.limits["nvidia.com/vcuda-core"]`. */
  readonly path: string;
  /** The rule, stable and short: tests assert on it. */
  readonly rule: string;
  /** The full sentence a person reads. */
  readonly message: string;
};

export function fieldError(path: string, rule: string, detail: string): FieldError {
  return { path, rule, message: `${path}: ${detail}` };
}

export function sortFieldErrors(errors: readonly FieldError[]): FieldError[] {
  return [...errors].sort((a, b) => a.path.localeCompare(b.path) || a.rule.localeCompare(b.rule));
}

/** Joins violations into one message, one per line, stable order. */
export function formatFieldErrors(errors: readonly FieldError[]): string {
  return sortFieldErrors(errors)
    .map((e) => e.message)
    .join('\n');
}

/**
 * The codes any component may raise. Each maps to exactly one HTTP status where an error reaches
 * a caller (control-plane/app.ts, checked exhaustively by the compiler); a component's own error
 * class carries its own codes instead (AssignmentError, AllocationError, LimitConfigError, and the
 * node agent's NvmlError and RegionError), which never answer an HTTP caller.
 */
export type VcudaErrorCode =
  | 'invalid'
  | 'too-large'
  | 'unauthenticated'
  | 'forbidden'
  | 'not-found'
  | 'conflict'
  | 'capacity-conflict'
  | 'quota-exceeded'
  | 'unavailable'
  | 'internal';

/** Base class of vcuda's errors: a stable `code` for programs, a message for people. */
export class VcudaError<Code extends string = VcudaErrorCode> extends Error {
  constructor(
    readonly code: Code,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = new.target.name;
  }
}

/**
 * The message of anything thrown, for a sentence a person reads (a refusal, an HTTP answer, a
 * health line). Logs take the error itself instead (`log.warn({ err }, …)`), which keeps its code,
 * cause and stack.
 */
export function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** Input failed validation; carries every violation, not only the first. */
export class ValidationError extends VcudaError {
  constructor(
    readonly errors: readonly FieldError[],
    what = 'input',
  ) {
    super('invalid', `${what} is invalid:\n${formatFieldErrors(errors)}`);
  }

  /** One bad value, named by its field (a flag, a config key): the message is that one line. */
  static forField(field: string, rule: string, detail: string): ValidationError {
    const error = new ValidationError([fieldError(field, rule, detail)]);
    error.message = fieldError(field, rule, detail).message;
    return error;
  }
}

/** Turns zod issues into FieldErrors so every boundary reports the same way. */
export function fieldErrorsFromZod(
  issues: readonly { path: readonly PropertyKey[]; message: string; code: string }[],
  root = '',
): FieldError[] {
  return issues.map((issue) => {
    const path = formatPath(root, issue.path);
    return { path: path || '(root)', rule: issue.code, message: `${path || '(root)'}: ${issue.message}` };
  });
}

/** `spec.containers[0].resources.limits["nvidia.com/vcuda-core"]` from its segments. */
export function formatPath(root: string, segments: readonly PropertyKey[]): string {
  let out = root;
  for (const s of segments) {
    if (typeof s === 'number') out += `[${s}]`;
    else if (typeof s === 'string' && /^[A-Za-z_][A-Za-z0-9_]*$/.test(s)) out += out ? `.${s}` : s;
    else out += `[${JSON.stringify(String(s))}]`;
  }
  return out;
}
