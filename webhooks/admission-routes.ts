/**
 * The hono adapter for the admission webhooks: `POST /mutate` and `POST /validate` (the control
 * plane mounts them at `/admission`). It only translates: body -> AdmissionReview -> pure rules
 * (mutate.ts, validate.ts) -> AdmissionReview. Malformed input is answered with HTTP 400 and a
 * message naming every bad field; nothing a client sends can make it throw.
 */
import type { IncomingMessage } from 'node:http';
import type { Http2ServerRequest } from 'node:http2';
import type { HttpBindings } from '@hono/node-server';
import { type Context, Hono } from 'hono';
import {
  DEFAULT_DRA_DRIVER,
  type EventReason,
  eventReasons,
  type FieldError,
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
  readReviewText,
  refusalMessage,
} from './admission-review.js';
import { judgeClaimReview } from './claim-admission.js';
import { type ClaimAdmissionRequest, parseClaimReviewText } from './claim-review.js';
import { type MutationPolicy, type MutationResult, mutatePodCreate } from './mutate.js';
import type { DraPodPolicy, EnsureClaimTemplates } from './pod-claims.js';
import { measurePodQuotaUsage, type PodQuotaUsage, type QuotaPrecheck } from './quota-precheck.js';
import { limitRequestBody } from './request-body-limit.js';
import { validateCreate, validateUpdate } from './validate.js';
import type { ClaimPolicy } from './validate-claim.js';

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
  observe(hook: Hook, outcome: AdmissionOutcome, durationMs: number): void;
  /** The quota pre-check was skipped: the ledger did not answer in time (`timeout`) or failed (`error`). */
  precheckSkipped?(reason: 'timeout' | 'error'): void;
  /** A review came from a caller that did not prove it is the API server (answered, but left no trace). */
  unauthenticated?(hook: Hook): void;
};

/** A request as the node servers hand it over, HTTP/1.1 or HTTP/2. */
export type CallerRequest = IncomingMessage | Http2ServerRequest;

/**
 * Whether the request came from the API server: it presented the client certificate or token of
 * its AdmissionConfiguration's kubeconfig (the control plane decides; see control-plane/webhook-callers.ts).
 */
export type CallerCheck = (req: CallerRequest | undefined) => boolean;

export type AdmissionRoutesDeps = {
  names: ResourceNames;
  memoryUnitMiB: number;
  clusterName: string;
  schedulerName?: string | undefined;
  privilegedUsernames: readonly string[];
  maxBodyBytes: number;
  logger: AdmissionLogger;
  precheckQuota?: QuotaPrecheck | undefined;
  /** The DeviceClass and driver whose ResourceClaims the claim hooks judge (default `gpu.vcuda.io` both). */
  claims?: ClaimPolicy | undefined;
  /**
   * DRA mode for pods written for the extender: the pods `policy` selects are admitted with claims,
   * once `ensureTemplates` has made their templates exist (never on a dry run), within `timeoutMs`.
   */
  draPods?: { policy: DraPodPolicy; ensureTemplates: EnsureClaimTemplates; timeoutMs: number } | undefined;
  /** The pre-check's deadline; past it the pod is admitted without it (default 1000 ms). */
  precheckTimeoutMs?: number | undefined;
  events?: AdmissionEventRecorder | undefined;
  observer?: AdmissionObserver | undefined;
  /**
   * Only reviews from an authenticated caller leave Events, refusal log lines and dashboard rows:
   * anyone who reaches the port gets the same answers, but writes nothing. None: nobody is.
   */
  authenticateCaller?: CallerCheck | undefined;
  /** Monotonic milliseconds, for durations only. */
  nowMs?: () => number;
};

/** Pods' hooks, and the claim hooks for ResourceClaims and ResourceClaimTemplates (resource.k8s.io/v1). */
export type Hook = 'mutate' | 'validate' | 'mutate-claims' | 'validate-claims';
export const HOOKS: readonly Hook[] = ['mutate', 'validate', 'mutate-claims', 'validate-claims'];
type Answer = { review: AdmissionReviewOut; outcome: AdmissionOutcome };
const DEFAULT_CLAIM_POLICY: ClaimPolicy = { deviceClassName: DEFAULT_DRA_DRIVER, driverName: DEFAULT_DRA_DRIVER };

/** Who sent a review: an authenticated caller's reviews are the only ones that leave a trace. */
export type AdmissionCaller = { authenticated: boolean };
const UNAUTHENTICATED: AdmissionCaller = { authenticated: false };

function describePod(request: AdmissionRequest, pod: AdmissionPod | null | undefined): PodRef & { label: string } {
  const namespace = request.namespace ?? pod?.metadata?.namespace ?? '';
  const generated = pod?.metadata?.generateName ? `${pod.metadata.generateName}*` : '';
  const name = pod?.metadata?.name || request.name || generated;
  return { namespace, name, uid: pod?.metadata?.uid, label: `pod ${namespace}/${name}` };
}

/** What one POST to a hook is answered: the HTTP status and the JSON text, serialized once. */
export type AdmissionReply = { status: 200 | 400; body: string };

/**
 * Answers a hook's body text; shared by the hono routes and the plain node:https handler. Without
 * `caller`, the review is an unauthenticated one.
 */
export type AdmissionAnswerer = (hook: Hook, text: string, caller?: AdmissionCaller) => Promise<AdmissionReply>;

/** One review being answered: its request, who sent it, and the answerer's settings. */
type Review = { request: AdmissionRequest; caller: AdmissionCaller; hook: Hook };
type Judge = { deps: AdmissionRoutesDeps; policy: MutationPolicy; claims: ClaimPolicy; trace: ReviewTrace };

export function createAdmissionAnswerer(deps: AdmissionRoutesDeps): AdmissionAnswerer {
  const judge: Judge = {
    deps,
    policy: {
      quantity: { names: deps.names, memoryUnitMiB: deps.memoryUnitMiB },
      privilegedUsernames: new Set(deps.privilegedUsernames),
      schedulerName: deps.schedulerName,
      dra: deps.draPods?.policy,
    },
    claims: deps.claims ?? DEFAULT_CLAIM_POLICY,
    trace: createReviewTrace(deps),
  };
  const nowMs = deps.nowMs ?? (() => performance.now());
  return async (hook, text, caller = UNAUTHENTICATED) => {
    const started = nowMs();
    if (!caller.authenticated) deps.observer?.unauthenticated?.(hook);
    const answer =
      hook === 'mutate-claims' || hook === 'validate-claims'
        ? await answerClaimText(judge, hook, text, caller)
        : await answerPodText(judge, hook, text, caller);
    deps.observer?.observe(hook, answer.outcome, nowMs() - started);
    if ('body' in answer) return { status: 400, body: answer.body };
    return { status: 200, body: JSON.stringify(answer.review) };
  };
}

/** An answer, or a 400's body for a review that could not be read. */
type TextAnswer = Answer | { outcome: 'bad-request'; body: string };

function badRequest(message: string): TextAnswer {
  return { outcome: 'bad-request', body: JSON.stringify({ error: { code: 'invalid', message } }) };
}

async function answerPodText(judge: Judge, hook: Hook, text: string, caller: AdmissionCaller): Promise<TextAnswer> {
  const parsed = readReviewText(text, parseAdmissionReview);
  if (!parsed.ok) return badRequest(parsed.message);
  const review: Review = { request: parsed.request, caller, hook };
  return hook === 'mutate' ? await answerMutate(judge, review) : answerValidate(judge, review);
}

/** A claim or template: the rules (validate-claim.ts), then, for a claim at the mutating hook, the quota. */
async function answerClaimText(
  judge: Judge,
  hook: 'mutate-claims' | 'validate-claims',
  text: string,
  caller: AdmissionCaller,
): Promise<TextAnswer> {
  const parsed = parseClaimReviewText(text);
  if (!parsed.ok) return badRequest(parsed.message);
  const request = parsed.request;
  const verdict = judgeClaimReview(request, judge.claims, hook === 'mutate-claims' ? 'mutate' : 'validate');
  if (verdict.kind === 'allow') return { review: allowResponse(request.uid), outcome: 'allowed' };
  if (verdict.kind === 'refuse') {
    if (caller.authenticated) judge.trace.claimRefused(hook, request, verdict.rules);
    return { review: denyResponse(request.uid, verdict.message), outcome: 'refused' };
  }
  const quota = await precheck(judge, claimTarget(request, caller), verdict.usage);
  if (quota.ok) return { review: allowResponse(request.uid, [], quota.warnings), outcome: 'allowed' };
  if (caller.authenticated) judge.trace.claimRefused(hook, request, ['quota']);
  return { review: denyResponse(request.uid, quota.message, { code: 403, reason: 'Forbidden' }), outcome: 'refused' };
}

/** Whose quota a review asks, how it is named in messages and log lines, and what it is (a pod when absent). */
type PrecheckTarget = { caller: AdmissionCaller; ref: PodRef & { label: string }; holderKind?: 'claim' };

function claimTarget(request: ClaimAdmissionRequest, caller: AdmissionCaller): PrecheckTarget {
  const name = request.label.slice(request.label.indexOf('/') + 1);
  return { caller, ref: { namespace: request.namespace, name, label: request.label }, holderKind: 'claim' };
}

async function answerMutate(judge: Judge, review: Review): Promise<Answer> {
  const { request } = review;
  if (request.operation !== 'CREATE' || !request.object)
    return { review: allowResponse(request.uid), outcome: 'allowed' };
  const result = mutatePodCreate(request.object, judge.policy, request.namespace);
  if (result.kind === 'not-vcuda') return { review: allowResponse(request.uid), outcome: 'allowed' };
  if (result.kind === 'refused') return refuse(judge, review, result.errors, result.warnings);
  const target = { caller: review.caller, ref: describePod(request, request.object) };
  const quota = await precheck(judge, target, measurePodQuotaUsage(result.request));
  if (!quota.ok) {
    const pod = describePod(request, request.object);
    judge.trace.refused(review, pod, eventReasons.quotaRefused, quota.message, ['quota']);
    const denied = denyResponse(request.uid, quota.message, {
      code: 403,
      reason: 'Forbidden',
      warnings: result.warnings,
    });
    return { review: denied, outcome: 'refused' };
  }
  const failed = await ensureTemplates(judge, review, result);
  if (failed) return failed;
  const warnings = [...result.warnings, ...quota.warnings];
  return {
    review: allowResponse(request.uid, result.patch, warnings),
    outcome: result.patch.length ? 'patched' : 'allowed',
  };
}

/**
 * DRA mode: the templates the pod's claims name exist before the pod does (the resourceclaim
 * controller makes its claims from them). Not on a dry run: nothing is written then. A failure
 * refuses the pod with the reason (HTTP 500: retrying may succeed).
 */
async function ensureTemplates(
  { deps }: Judge,
  { request }: Review,
  result: Extract<MutationResult, { kind: 'admitted' }>,
): Promise<Answer | undefined> {
  const dra = deps.draPods;
  if (!dra || !result.templates?.length || request.dryRun) return undefined;
  try {
    await withDeadline(dra.ensureTemplates(result.templates), dra.timeoutMs, 'claim templates');
    return undefined;
  } catch (err) {
    const pod = describePod(request, request.object);
    const names = result.templates.map((t) => t.metadata.name).join(', ');
    deps.logger.warn({ err, pod: pod.label, templates: names }, 'claim templates not ensured');
    const why = err instanceof Error ? err.message : String(err);
    const message = `vcuda could not ensure ResourceClaimTemplates ${names} for ${pod.label}: ${why}; retry`;
    const denied = denyResponse(request.uid, message, {
      code: 500,
      reason: 'InternalError',
      warnings: result.warnings,
    });
    return { review: denied, outcome: 'refused' };
  }
}

function answerValidate(judge: Judge, review: Review): Answer {
  const { request } = review;
  const username = request.userInfo?.username;
  let errors: FieldError[] = [];
  if (request.operation === 'CREATE' && request.object) errors = validateCreate(request.object, judge.policy);
  else if (request.operation === 'UPDATE' && request.object && request.oldObject) {
    errors = validateUpdate(request.object, request.oldObject, username, judge.policy);
  }
  return errors.length ? refuse(judge, review, errors) : { review: allowResponse(request.uid), outcome: 'allowed' };
}

function refuse(judge: Judge, review: Review, errors: FieldError[], warnings: string[] = []): Answer {
  const { request } = review;
  const pod = describePod(request, request.object);
  const message = refusalMessage(pod.label, errors);
  const isForgery = errors.some((e) => e.rule === 'vcuda-annotation-reserved');
  const rules = errors.map((e) => e.rule);
  judge.trace.refused(review, pod, eventReasons.admissionRefused, message, rules);
  const code = isForgery ? 403 : 422;
  const reason = isForgery ? 'Forbidden' : 'Invalid';
  return { review: denyResponse(request.uid, message, { code, reason, warnings }), outcome: 'refused' };
}

type Precheck = { ok: true; warnings: string[] } | { ok: false; message: string };

/** The namespace's quota, asked early with a deadline; an unreachable ledger admits (bind is the gate). */
async function precheck({ deps, trace }: Judge, target: PrecheckTarget, usage: PodQuotaUsage): Promise<Precheck> {
  if (!deps.precheckQuota) return { ok: true, warnings: [] };
  const pod = target.ref;
  const uncounted = usage.hasUncountedMemory
    ? " (whole cards' memory is not counted here: the cards, and so their memory, are chosen at bind)"
    : '';
  const timeoutMs = deps.precheckTimeoutMs ?? DEFAULT_PRECHECK_TIMEOUT_MS;
  try {
    const check = deps.precheckQuota({
      cluster: deps.clusterName,
      namespace: pod.namespace,
      core: usage.core,
      ...(usage.shareCore > 0 ? { shareCore: usage.shareCore } : {}),
      memoryMiB: usage.memoryMiB,
      ...(target.holderKind ? { holderKind: target.holderKind } : {}),
    });
    // A known answer (a cached "ok") needs no deadline: no timer, no race, per review.
    const result = 'then' in check ? await withDeadline(check, timeoutMs, 'quota pre-check') : check;
    if (result.ok)
      return { ok: true, warnings: usage.hasUncountedMemory ? ['quota: whole cards memory is checked at bind'] : [] };
    return { ok: false, message: `vcuda refused ${pod.label}: quota: ${result.message}${uncounted}` };
  } catch (err) {
    // The reservation at bind is the real gate: an unreachable or slow ledger must not block
    // admission, nor hold the API server past its webhook timeout.
    const reason = err instanceof LedgerTimeoutError ? 'timeout' : 'error';
    deps.observer?.precheckSkipped?.(reason);
    trace.precheckSkipped(target.caller, pod, err, reason);
    const why = reason === 'timeout' ? `no answer from the ledger within ${timeoutMs} ms` : 'the ledger failed';
    return { ok: true, warnings: [`quota pre-check skipped (${why}); the ledger checks the quota at bind`] };
  }
}

/** How often one pod's refusal (or skipped pre-check) is logged, however often it is reviewed. */
const TRACE_INTERVAL_MS = 60_000;
/** Pods remembered for that; past it the table starts over (a log line more, never a leak). */
const TRACE_MAX_KEYS = 4096;

/**
 * What a review leaves behind besides its answer: an Event on the refused pod (aggregated by the
 * recorder) and a log line. Only an authenticated caller's reviews leave any, and log lines at
 * most once a minute per pod and reason: the port's answers are open to whoever reaches it, its
 * writes are not. A dry run and a pod without a name yet get no Event.
 */
type ReviewTrace = {
  refused(review: Review, pod: PodRef & { label: string }, reason: EventReason, message: string, rules: string[]): void;
  precheckSkipped(
    caller: AdmissionCaller,
    pod: PodRef & { label: string },
    err: unknown,
    reason: 'timeout' | 'error',
  ): void;
  /** A claim or template refused: a log line, no Event (the recorder writes Events on pods). */
  claimRefused(hook: Hook, request: ClaimAdmissionRequest, rules: string[]): void;
};

function createReviewTrace(deps: AdmissionRoutesDeps): ReviewTrace {
  const nowMs = deps.nowMs ?? (() => performance.now());
  const loggedAt = new Map<string, number>();
  const firstInInterval = (key: string): boolean => {
    const now = nowMs();
    const last = loggedAt.get(key);
    if (last !== undefined && now - last < TRACE_INTERVAL_MS) return false;
    if (loggedAt.size >= TRACE_MAX_KEYS) loggedAt.clear();
    loggedAt.set(key, now);
    return true;
  };
  const keyOf = (pod: PodRef, what: string) => `${pod.namespace}/${pod.name}/${pod.uid ?? ''}/${what}`;
  return {
    refused({ request, caller, hook }, pod, reason, message, rules) {
      if (!caller.authenticated) return;
      if (firstInInterval(keyOf(pod, `${hook}/${reason}`)))
        deps.logger.info({ hook, pod: pod.label, user: request.userInfo?.username, rules }, 'refused');
      if (!deps.events || request.dryRun || !pod.name || pod.name.endsWith('*')) return;
      const events = deps.events;
      Promise.resolve()
        .then(() => events.record({ namespace: pod.namespace, name: pod.name, uid: pod.uid }, reason, message))
        .catch((err: unknown) => deps.logger.warn({ err, pod: pod.name }, 'recording admission event failed'));
    },
    precheckSkipped(caller, pod, err, reason) {
      if (caller.authenticated && firstInInterval(keyOf(pod, 'precheck-skipped')))
        deps.logger.warn({ err, pod: pod.label, reason }, 'quota pre-check skipped');
    },
    claimRefused(hook, request, rules) {
      if (firstInInterval(`${request.label}/${hook}`))
        deps.logger.info({ hook, claim: request.label, rules }, 'refused');
    },
  };
}

export function admissionRoutes(deps: AdmissionRoutesDeps): Hono {
  const answer = createAdmissionAnswerer(deps);
  const app = new Hono();
  const tooLarge = (c: Context) =>
    c.json({ error: { code: 'invalid', message: `request body exceeds ${deps.maxBodyBytes} bytes` } }, 400);
  // The API server always sends Content-Length: judged by it, the body is read directly.
  const limit = limitRequestBody(deps.maxBodyBytes, tooLarge);

  for (const hook of HOOKS) {
    app.post(`/${hook}`, limit, async (c) => {
      let text: string;
      try {
        text = await c.req.text();
      } catch (err) {
        return c.json({ error: { code: 'invalid', message: `request body unreadable: ${String(err)}` } }, 400);
      }
      const incoming = (c.env as Partial<HttpBindings> | undefined)?.incoming as CallerRequest | undefined;
      const authenticated = deps.authenticateCaller?.(incoming) ?? false;
      const reply = await answer(hook, text, { authenticated });
      return c.body(reply.body, reply.status, { 'content-type': 'application/json' });
    });
  }
  return app;
}
