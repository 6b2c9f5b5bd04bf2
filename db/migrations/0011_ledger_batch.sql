-- Group commit: several pods' reservations and releases in ONE transaction, so that they share
-- one commit (one WAL flush) instead of paying one each. Reservations that touch a hot row (one
-- team quota for many namespaces) queue on it until the holder's commit has flushed; in a batch
-- they pay that wait once. Each operation runs vcuda_reserve / vcuda_release unchanged, a
-- reservation in its own subtransaction, so a refusal (VC001) undoes only that pod's rows and
-- the others still commit. p: [{op: 'reserve', request, at} | {op: 'release', cluster, podUid,
-- at, onlyState}]; returns one result per operation, in order: the reservation's verdict, or
-- {"released": rows}.
--
-- Before any operation runs, the batch locks every card and then every quota row any of them
-- will touch, each set in key order (cards by uuid, quotas by id: the order vcuda_reserve and
-- vcuda_release take them in). A batch therefore never holds one of these rows while it waits
-- for another that a later operation of its own needs, so batches of two replicas queue on
-- each other instead of deadlocking.
CREATE OR REPLACE FUNCTION vcuda_ledger_batch(p jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  v_op jsonb;
  v_result jsonb;
  v_out jsonb := '[]'::jsonb;
BEGIN
  PERFORM 1 FROM cards
  WHERE uuid IN (
    SELECT d->>'cardUuid' FROM jsonb_array_elements(p) AS o, jsonb_array_elements(o->'request'->'demand') AS d
    WHERE o->>'op' = 'reserve'
    UNION
    SELECT a.card_uuid FROM jsonb_array_elements(p) AS o
    JOIN allocations a ON a.cluster = o->>'cluster' AND a.pod_uid = o->>'podUid' AND a.state <> 'released'
    WHERE o->>'op' = 'release')
  ORDER BY uuid FOR UPDATE;

  PERFORM 1 FROM quotas q
  WHERE EXISTS (
    SELECT 1 FROM (
      SELECT o->'request'->>'cluster' AS cluster, o->'request'->>'namespace' AS namespace
      FROM jsonb_array_elements(p) AS o WHERE o->>'op' = 'reserve'
      UNION
      SELECT a.cluster, a.namespace FROM jsonb_array_elements(p) AS o
      JOIN allocations a ON a.cluster = o->>'cluster' AND a.pod_uid = o->>'podUid' AND a.state <> 'released'
      WHERE o->>'op' = 'release'
    ) AS ns
    WHERE (q.scope = 'namespace' AND q.cluster = ns.cluster AND q.namespace = ns.namespace)
       OR (q.scope = 'team' AND q.team IN (
             SELECT t.team FROM team_namespaces t WHERE t.cluster = ns.cluster AND t.namespace = ns.namespace)))
  ORDER BY q.id FOR UPDATE;

  FOR v_op IN SELECT x FROM jsonb_array_elements(p) AS x LOOP
    IF v_op->>'op' = 'reserve' THEN
      BEGIN
        v_result := vcuda_reserve(v_op->'request', (v_op->>'at')::timestamptz);
      EXCEPTION WHEN SQLSTATE 'VC001' THEN
        v_result := jsonb_build_object('violations', SQLERRM::jsonb);
      END;
    ELSIF v_op->>'op' = 'release' THEN
      v_result := jsonb_build_object('released',
        vcuda_release(v_op->>'cluster', v_op->>'podUid', (v_op->>'at')::timestamptz, v_op->>'onlyState'));
    ELSE
      RAISE EXCEPTION 'vcuda_ledger_batch: unknown op %', v_op->>'op';
    END IF;
    v_out := v_out || jsonb_build_array(v_result);
  END LOOP;
  RETURN v_out;
END;
$$;
