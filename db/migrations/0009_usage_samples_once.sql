-- A raw usage sample counts once per (cluster, pod, container, card, time). Copies already stored
-- (reports retried or replayed before this index) are removed first, keeping the oldest row,
-- and what they added to the daily roll-up is taken back out.
WITH dropped AS (
  DELETE FROM "usage_samples" u
  USING "usage_samples" k
  WHERE u."resolution" = 'raw' AND k."resolution" = 'raw'
    AND u."cluster" = k."cluster" AND u."pod_uid" = k."pod_uid" AND u."container" = k."container"
    AND u."card_uuid" = k."card_uuid" AND u."sampled_at" = k."sampled_at" AND u."id" > k."id"
  RETURNING u.*
), per_day AS (
  SELECT "cluster", "namespace", date_trunc('day', "sampled_at" at time zone 'UTC') at time zone 'UTC' AS "day",
    sum("sm_pct"::float8 * "period_s"::float8) / 100 AS "seconds"
  FROM dropped
  GROUP BY 1, 2, 3
)
UPDATE "usage_days" d SET "used_gpu_seconds" = greatest(d."used_gpu_seconds" - p."seconds", 0)
FROM per_day p
WHERE d."cluster" = p."cluster" AND d."namespace" = p."namespace" AND d."day" = p."day";--> statement-breakpoint
CREATE UNIQUE INDEX "usage_samples_raw_once_idx" ON "usage_samples" USING btree ("cluster","pod_uid","container","card_uuid","sampled_at") WHERE "usage_samples"."resolution" = 'raw';
