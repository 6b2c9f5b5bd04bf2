/**
 * The hono adapter for the admission webhooks: `POST /mutate` and `POST /validate` (the control
 * plane mounts them at `/admission`). It only translates: body -> AdmissionReview -> pure rules
 * (mutate.ts, validate.ts) -> AdmissionReview. Malformed input is answered with HTTP 400 and a
 * message naming every bad field; nothing a client sends can make it throw.
 */
import { type Context, Hono, type MiddlewareHandler } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import {
  type EventReason,
  eventReasons,
  type FieldError,
  formatFieldErrors,
  type PodRef,
  type ResourceNames,
} from '../contract/index.js';
import { LedgerTimeoutError, withDeadline } from '../db/deadline.js';
import {
  type AdmissionPod,
  type AdmissionRequest,
  type AdmissionReviewOut,
  allowResponse,
  denyResponse,
  parseAdmissionReview,
  refusalMessage,
} from './admission-review.js';
import { type MutationPolicy, mutatePodCreate } from './mutate.js';
import { measurePodQuotaUsage, type QuotaPrecheck } from './quota-precheck.js';
import { validateCreate, validateUpdate } from './validate.js';

/** Deadline of the quota pre-check when none is configured: well inside the API server's 5 s. */
const DEFAULT_PRECHECK_TIMEOUT_MS = 1000;

export type AdmissionLogger = {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
};

/** Records refusals as Events on the pod (contract/events.ts); failures are logged, never fatal. */
export type AdmissionEventRecorder = {
  record(pod: PodRef, reason: EventReason, message: string): Promise<void> | void;
};

export type AdmissionOutcome = 'allowed' | 'patched' | 'refused' | 'bad-request';

/** Counts and times each answer (see metrics.ts for the Prometheus version). */
export type AdmissionObserver = {
  observe(hook: 'mutate' | 'validate', outcome: AdmissionOutcome, durationMs: number): void;
  /** The quota pre-check was skipped: the ledger did not answer in time (`timeout`) or failed (`error`). */
  precheckSkipped?(reason: 'timeout' | 'error'): void;
};

export type AdmissionRoutesDeps = {
  names: ResourceNames;
  memoryUnitMiB: number;
  clusterName: string;
  schedulerName?: string | undefined;
  privilegedUsernames: readonly string[];
  maxBodyBytes: number;
  logger: AdmissionLogger;
  precheckQuota?: QuotaPrecheck | undefined;
  /** The pre-check's deadline; past it the pod is admitted without it (default 1000 ms). */
  precheckTimeoutMs?: number | undefined;
  events?: AdmissionEventRecorder | undefined;
  observer?: AdmissionObserver | undefined;
  /** Monotonic milliseconds, for durations only. */
  nowMs?: () => number;
};

export type Hook = 'mutate' | 'validate';
type Answer = { review: AdmissionReviewOut; outcome: AdmissionOutcome };

function describePod(request: AdmissionRequest, pod: AdmissionPod | null | undefined): PodRef & { label: string } {
  const namespace = request.namespace ?? pod?.metadata?.namespace ?? '';
  const generated = pod?.metadata?.generateName ? `${pod.metadata.generateName}*` : '';
  const name = pod?.metadata?.name || request.name || generated;
  return { namespace, name, uid: pod?.metadata?.uid, label: `pod ${namespace}/${name}` };
}

/** What one POST to a hook is answered: the HTTP status and the JSON text, serialized once. */
export type AdmissionReply = { status: 200 | 400; body: string };

/** Answers a hook's body text; shared by the hono routes and the plain node:https handler. */
export type AdmissionAnswerer = (hook: Hook, text: string) => Promise<AdmissionReply>;

export function createAdmissionAnswerer(deps: AdmissionRoutesDeps): AdmissionAnswerer {
  const policy: MutationPolicy = {
    quantity: { names: deps.names, memoryUnitMiB: deps.memoryUnitMiB },
    privilegedUsernames: new Set(deps.privilegedUsernames),
    schedulerName: deps.schedulerName,
  };
  const nowMs = deps.nowMs ?? (() => performance.now());

  function recordEvent(request: AdmissionRequest, pod: PodRef, reason: EventReason, message: string): void {
    // A dry run must leave no trace; a pod without a name yet has nothing to attach an Event to.
    if (!deps.events || request.dryRun || !pod.name || pod.name.endsWith('*')) return;
    const events = deps.events;
    Promise.resolve()
      .then(() => events.record(pod, reason, message))
      .catch((err: unknown) => deps.logger.warn({ err, pod: pod.name }, 'recording admission event failed'));
  }

  function refuse(request: AdmissionRequest, hook: Hook, errors: FieldError[], warnings: string[] = []): Answer {
    const pod = describePod(request, request.object);
    const message = refusalMessage(pod.label, errors);
    const isForgery = errors.some((e) => e.rule === 'vcuda-annotation-reserved');
    deps.logger.info(
      { hook, pod: pod.label, user: request.userInfo?.username, rules: errors.map((e) => e.rule) },
      'refused',
    );
    recordEvent(request, pod, eventReasons.admissionRefused, message);
    const code = isForgery ? 403 : 422;
    const reason = isForgery ? 'Forbidden' : 'Invalid';
    return { review: denyResponse(request.uid, message, { code, reason, warnings }), outcome: 'refused' };
  }

  async function precheck(request: AdmissionRequest, usage: ReturnType<typeof measurePodQuotaUsage>) {
    if (!deps.precheckQuota) return { ok: true as const, warnings: [] };
    const pod = describePod(request, request.object);
    const uncounted = usage.hasUncountedMemory
      ? " (whole cards' memory is not counted here: the cards, and so their memory, are chosen at bind)"
      : '';
    const timeoutMs = deps.precheckTimeoutMs ?? DEFAULT_PRECHECK_TIMEOUT_MS;
    try {
      const check = deps.precheckQuota({
        cluster: deps.clusterName,
        namespace: pod.namespace,
        core: usage.core,
        memoryMiB: usage.memoryMiB,
      });
      // A known answer (a cached "ok") needs no deadline: no timer, no race, per review.
      const result = 'then' in check ? await withDeadline(check, timeoutMs, 'quota pre-check') : check;
      if (result.ok)
        return {
          ok: true as const,
          warnings: usage.hasUncountedMemory ? ['quota: whole cards memory is checked at bind'] : [],
        };
      return { ok: false as const, message: `vcuda refused ${pod.label}: quota: ${result.message}${uncounted}` };
    } catch (err) {
      // The reservation at bind is the real gate: an unreachable or slow ledger must not block
      // admission, nor hold the API server past its webhook timeout.
      const reason = err instanceof LedgerTimeoutError ? 'timeout' : 'error';
      deps.observer?.precheckSkipped?.(reason);
      deps.logger.warn({ err, pod: pod.label, reason }, 'quota pre-check skipped');
      const why = reason === 'timeout' ? `no answer from the ledger within ${timeoutMs} ms` : 'the ledger failed';
      return { ok: true as const, warnings: [`quota pre-check skipped (${why}); the ledger checks the quota at bind`] };
    }
  }

  async function answerMutate(request: AdmissionRequest): Promise<Answer> {
    if (request.operation !== 'CREATE' || !request.object)
      return { review: allowResponse(request.uid), outcome: 'allowed' };
    const result = mutatePodCreate(request.object, policy);
    if (result.kind === 'not-vcuda') return { review: allowResponse(request.uid), outcome: 'allowed' };
    if (result.kind === 'refused') return refuse(request, 'mutate', result.errors, result.warnings);
    const quota = await precheck(request, measurePodQuotaUsage(result.request));
    if (!quota.ok) {
      const pod = describePod(request, request.object);
      deps.logger.info({ hook: 'mutate', pod: pod.label }, 'refused by quota pre-check');
      recordEvent(request, pod, eventReasons.quotaRefused, quota.message);
      const review = denyResponse(request.uid, quota.message, {
        code: 403,
        reason: 'Forbidden',
        warnings: result.warnings,
      });
      return { review, outcome: 'refused' };
    }
    const warnings = [...result.warnings, ...quota.warnings];
    return {
      review: allowResponse(request.uid, result.patch, warnings),
      outcome: result.patch.length ? 'patched' : 'allowed',
    };
  }

  function answerValidate(request: AdmissionRequest): Answer {
    const username = request.userInfo?.username;
    let errors: FieldError[] = [];
    if (request.operation === 'CREATE' && request.object) errors = validateCreate(request.object, policy);
    else if (request.operation === 'UPDATE' && request.object && request.oldObject) {
      errors = validateUpdate(request.object, request.oldObject, username, policy);
    }
    return errors.length
      ? refuse(request, 'validate', errors)
      : { review: allowResponse(request.uid), outcome: 'allowed' };
  }

  const nowMsOf = nowMs;
  return async (hook, text) => {
    const started = nowMsOf();
    const badRequest = (message: string): AdmissionReply => {
      deps.observer?.observe(hook, 'bad-request', nowMsOf() - started);
      return { status: 400, body: JSON.stringify({ error: { code: 'invalid', message } }) };
    };
    if (text.trim() === '') return badRequest('request body is empty; expected an AdmissionReview (JSON)');
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch (err) {
      return badRequest(`request body is not JSON: ${err instanceof Error ? err.message : String(err)}`);
    }
    const parsed = parseAdmissionReview(body);
    if (!parsed.ok)
      return badRequest(`not an admission.k8s.io/v1 AdmissionReview:\n${formatFieldErrors(parsed.errors)}`);
    const answer = hook === 'mutate' ? await answerMutate(parsed.request) : answerValidate(parsed.request);
    deps.observer?.observe(hook, answer.outcome, nowMsOf() - started);
    return { status: 200, body: JSON.stringify(answer.review) };
  };
}

export function admissionRoutes(deps: AdmissionRoutesDeps): Hono {
  const answer = createAdmissionAnswerer(deps);
  const app = new Hono();
  const tooLarge = (c: Context) =>
    c.json({ error: { code: 'invalid', message: `request body exceeds ${deps.maxBodyBytes} bytes` } }, 400);
  const streamingLimit = bodyLimit({ maxSize: deps.maxBodyBytes, onError: tooLarge });
  // The API server always sends Content-Length: checking it up front keeps the Node adapter's
  // direct body read (hono's bodyLimit would build a full web Request for every review).
  const limit: MiddlewareHandler = async (c, next) => {
    const declared = c.req.header('content-length');
    if (declared === undefined || c.req.header('transfer-encoding') !== undefined) return streamingLimit(c, next);
    if (Number(declared) > deps.maxBodyBytes) return tooLarge(c);
    await next();
  };

  for (const hook of ['mutate', 'validate'] as const) {
    app.post(`/${hook}`, limit, async (c) => {
      let text: string;
      try {
        text = await c.req.text();
      } catch (err) {
        return c.json({ error: { code: 'invalid', message: `request body unreadable: ${String(err)}` } }, 400);
      }
      const reply = await answer(hook, text);
      return c.body(reply.body, reply.status, { 'content-type': 'application/json' });
    });
  }
  return app;
}
