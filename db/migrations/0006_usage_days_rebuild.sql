-- Refills the reports' daily roll-up of usage from the samples (downsampling keeps the totals),
-- run once here for samples recorded before this migration.
CREATE OR REPLACE FUNCTION vcuda_rebuild_usage_days() RETURNS void
LANGUAGE sql AS $$
  DELETE FROM usage_days;
  INSERT INTO usage_days (cluster, namespace, day, used_gpu_seconds)
  SELECT cluster, namespace, to_timestamp(86400 * floor(date_part('epoch', sampled_at) / 86400)),
    sum(sm_pct * period_s)::float8 / 100.0
  FROM usage_samples
  GROUP BY 1, 2, 3;
$$;
--> statement-breakpoint
SELECT vcuda_rebuild_usage_days();
