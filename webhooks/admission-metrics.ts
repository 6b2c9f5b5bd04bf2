/** The admission webhooks' Prometheus metrics, registered on the registry the process serves at /metrics. */
import { Counter, Histogram, type Registry } from 'prom-client';
import type { AdmissionObserver } from './admission-routes.js';

export function createAdmissionMetrics(registry: Registry): AdmissionObserver {
  const registers = [registry];
  const reviews = new Counter({
    name: 'vcuda_admission_reviews_total',
    help: 'AdmissionReviews answered, by hook (mutate, validate, mutate-claims, validate-claims) and outcome (allowed, patched, refused, bad-request)',
    labelNames: ['hook', 'outcome'],
    registers,
  });
  const seconds = new Histogram({
    name: 'vcuda_admission_duration_seconds',
    help: 'Time from request to answer, quota pre-check included, by hook',
    labelNames: ['hook'],
    buckets: [0.0005, 0.001, 0.002, 0.003, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
    registers,
  });
  const skipped = new Counter({
    name: 'vcuda_admission_quota_precheck_skipped_total',
    help: 'GPU pods admitted without the quota pre-check, by reason (timeout: no answer from the ledger in time; error)',
    labelNames: ['reason'],
    registers,
  });
  const unauthenticated = new Counter({
    name: 'vcuda_admission_unauthenticated_reviews_total',
    help: 'AdmissionReviews from a caller that proved no API server identity (answered; no Event, log line or dashboard row), by hook',
    labelNames: ['hook'],
    registers,
  });
  return {
    unauthenticated(hook) {
      unauthenticated.inc({ hook });
    },
    observe(hook, outcome, durationMs) {
      reviews.inc({ hook, outcome });
      seconds.observe({ hook }, durationMs / 1000);
    },
    precheckSkipped(reason) {
      skipped.inc({ reason });
    },
  };
}
