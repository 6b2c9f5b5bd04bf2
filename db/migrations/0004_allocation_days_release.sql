-- The reports' daily roll-up of released allocations: vcuda_release now adds each released
-- row's GPU-seconds per UTC day to allocation_days, and vcuda_rebuild_allocation_days() refills
-- it from the rows (run once here for rows released before this migration).
CREATE OR REPLACE FUNCTION vcuda_rebuild_allocation_days() RETURNS void
LANGUAGE sql AS $$
  DELETE FROM allocation_days;
  INSERT INTO allocation_days (cluster, namespace, day, gpu_seconds)
  SELECT a.cluster, a.namespace, d,
    sum(extract(epoch FROM least(a.released_at, d + interval '1 day') - greatest(a.reserved_at, d)) * a.core / 100.0)::float8
  FROM allocations a,
    generate_series(date_trunc('day', a.reserved_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC', a.released_at, interval '1 day') AS d
  WHERE a.state = 'released' AND a.released_at > a.reserved_at AND d < a.released_at
  GROUP BY 1, 2, 3;
$$;
--> statement-breakpoint
SELECT vcuda_rebuild_allocation_days();
--> statement-breakpoint
CREATE OR REPLACE FUNCTION vcuda_release(p_cluster text, p_pod_uid text, p_at timestamptz, p_only_state text)
RETURNS int LANGUAGE plpgsql AS $$
DECLARE
  v_ns text;
  v_released int;
BEGIN
  -- Lock the pod's cards first (same order as vcuda_reserve); a concurrent release of the
  -- same pod waits here and then finds nothing left.
  PERFORM 1 FROM cards
  WHERE uuid IN (SELECT card_uuid FROM allocations
                 WHERE cluster = p_cluster AND pod_uid = p_pod_uid AND state <> 'released')
  ORDER BY uuid FOR UPDATE;

  SELECT namespace INTO v_ns FROM allocations
  WHERE cluster = p_cluster AND pod_uid = p_pod_uid AND state <> 'released' LIMIT 1;
  IF NOT FOUND THEN
    RETURN 0;
  END IF;
  -- An expiry must not release a pod that was confirmed since it was picked.
  IF p_only_state IS NOT NULL AND EXISTS (
    SELECT 1 FROM allocations WHERE cluster = p_cluster AND pod_uid = p_pod_uid
      AND state <> 'released' AND state <> p_only_state) THEN
    RETURN 0;
  END IF;

  PERFORM 1 FROM quotas
  WHERE (scope = 'namespace' AND cluster = p_cluster AND namespace = v_ns)
     OR (scope = 'team' AND team IN (
           SELECT t.team FROM team_namespaces t WHERE t.cluster = p_cluster AND t.namespace = v_ns))
  ORDER BY id FOR UPDATE;

  UPDATE quotas q SET core_used = q.core_used - s.core, memory_used_mib = q.memory_used_mib - s.mem
  FROM (
    SELECT q2.id, sum(a.core)::int AS core, sum(a.memory_mib)::int AS mem
    FROM quotas q2 JOIN allocations a
      ON a.cluster = p_cluster AND a.pod_uid = p_pod_uid AND a.state <> 'released'
     AND (q2.gpu_model = '' OR a.gpu_model = q2.gpu_model)
    WHERE (q2.scope = 'namespace' AND q2.cluster = p_cluster AND q2.namespace = v_ns)
       OR (q2.scope = 'team' AND q2.team IN (
             SELECT t.team FROM team_namespaces t WHERE t.cluster = p_cluster AND t.namespace = v_ns))
    GROUP BY q2.id
  ) s
  WHERE q.id = s.id;

  UPDATE cards c SET core_used = c.core_used - s.core, memory_used_mib = c.memory_used_mib - s.mem
  FROM (
    SELECT card_uuid, sum(core)::int AS core, sum(memory_mib)::int AS mem FROM allocations
    WHERE cluster = p_cluster AND pod_uid = p_pod_uid AND state <> 'released' GROUP BY card_uuid
  ) s
  WHERE c.uuid = s.card_uuid;

  -- The GPU-seconds these rows held, per UTC day, into the reports' daily roll-up.
  INSERT INTO allocation_days (cluster, namespace, day, gpu_seconds)
  SELECT a.cluster, a.namespace, d,
    sum(extract(epoch FROM least(p_at, d + interval '1 day') - greatest(a.reserved_at, d)) * a.core / 100.0)::float8
  FROM allocations a,
    generate_series(date_trunc('day', a.reserved_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC', p_at, interval '1 day') AS d
  WHERE a.cluster = p_cluster AND a.pod_uid = p_pod_uid AND a.state <> 'released'
    AND p_at > a.reserved_at AND d < p_at
  GROUP BY 1, 2, 3
  ON CONFLICT (cluster, namespace, day) DO UPDATE SET gpu_seconds = allocation_days.gpu_seconds + excluded.gpu_seconds;

  UPDATE allocations SET state = 'released', released_at = p_at
  WHERE cluster = p_cluster AND pod_uid = p_pod_uid AND state <> 'released';
  GET DIAGNOSTICS v_released = ROW_COUNT;
  DELETE FROM pod_holds WHERE cluster = p_cluster AND pod_uid = p_pod_uid;
  RETURN v_released;
END;
$$;
