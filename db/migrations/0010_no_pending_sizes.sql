-- The node agent ties each container to its pod by the kubelet's device IDs at
-- PreStartContainer, so the ledger no longer refuses a reserve while another pod with one of its
-- container core amounts is still starting on the node: identical pods are placed in parallel.
-- vcuda_reserve ignores a "pending" key; pod_holds keeps its node, core_amounts and allocated_at
-- columns (allocated_at is still written, core_amounts stays empty).
CREATE OR REPLACE FUNCTION vcuda_reserve(p jsonb, p_at timestamptz) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  v_cluster text := p->>'cluster';
  v_pod_uid text := p->>'podUid';
  v_ns text := p->>'namespace';
  v_node text := p->>'node';
  v_violations jsonb := '[]'::jsonb;
  d record;
  q record;
  v_core int;
  v_mem int;
  v_subject text;
BEGIN
  -- A second reservation of the same pod waits here until the first ends, then sees it held.
  INSERT INTO pod_holds (cluster, pod_uid, namespace, pod, reserved_at, node)
  VALUES (v_cluster, v_pod_uid, v_ns, p->>'pod', p_at, v_node) ON CONFLICT DO NOTHING;
  IF NOT FOUND THEN
    RETURN '{"reused": true}'::jsonb;
  END IF;

  PERFORM 1 FROM cards
  WHERE uuid IN (SELECT x->>'cardUuid' FROM jsonb_array_elements(p->'demand') x)
  ORDER BY uuid FOR UPDATE;

  FOR d IN
    SELECT x."cardUuid" AS uuid, x.core, x."memoryMiB" AS mem, c.uuid IS NULL AS missing,
      c.cluster, c.node, c.is_present, c.memory_mib, c.core_used, c.memory_used_mib
    FROM jsonb_to_recordset(p->'demand') AS x("cardUuid" text, core int, "memoryMiB" int)
    LEFT JOIN cards c ON c.uuid = x."cardUuid"
    ORDER BY x."cardUuid"
  LOOP
    IF d.missing THEN
      v_violations := v_violations || jsonb_build_object('code', 'not-found',
        'message', format('card %s is not known to the ledger', d.uuid));
    ELSIF d.cluster <> v_cluster OR d.node <> v_node THEN
      v_violations := v_violations || jsonb_build_object('code', 'invalid',
        'message', format('card %s is on %s/%s, not on %s/%s', d.uuid, d.cluster, d.node, v_cluster, v_node));
    ELSIF NOT d.is_present THEN
      v_violations := v_violations || jsonb_build_object('code', 'capacity-conflict',
        'message', format('card %s is no longer reported by %s', d.uuid, d.node));
    ELSE
      IF d.core > 100 - d.core_used THEN
        v_violations := v_violations || jsonb_build_object('code', 'capacity-conflict',
          'message', format('card %s has %s core free, pod asks %s (over by %s)',
            d.uuid, 100 - d.core_used, d.core, d.core - (100 - d.core_used)));
      END IF;
      IF d.mem > d.memory_mib - d.memory_used_mib THEN
        v_violations := v_violations || jsonb_build_object('code', 'capacity-conflict',
          'message', format('card %s has %s MiB free, pod asks %s MiB (over by %s MiB)',
            d.uuid, d.memory_mib - d.memory_used_mib, d.mem, d.mem - (d.memory_mib - d.memory_used_mib)));
      END IF;
    END IF;
  END LOOP;
  IF jsonb_array_length(v_violations) > 0 THEN
    DELETE FROM pod_holds WHERE cluster = v_cluster AND pod_uid = v_pod_uid;
    RETURN jsonb_build_object('violations', v_violations);
  END IF;

  FOR q IN
    SELECT * FROM quotas
    WHERE (scope = 'namespace' AND cluster = v_cluster AND namespace = v_ns)
       OR (scope = 'team' AND team IN (
             SELECT t.team FROM team_namespaces t WHERE t.cluster = v_cluster AND t.namespace = v_ns))
    ORDER BY id FOR UPDATE
  LOOP
    SELECT coalesce(sum(x.core), 0), coalesce(sum(x."memoryMiB"), 0) INTO v_core, v_mem
    FROM jsonb_to_recordset(p->'demand') AS x("cardUuid" text, core int, "memoryMiB" int)
    JOIN cards c ON c.uuid = x."cardUuid"
    WHERE q.gpu_model = '' OR c.model = q.gpu_model;
    CONTINUE WHEN v_core = 0 AND v_mem = 0;
    v_subject := format('quota %s (%s%s)', q.name,
      CASE WHEN q.scope = 'team' THEN 'team ' || q.team ELSE 'namespace ' || q.cluster || '/' || q.namespace END,
      CASE WHEN q.gpu_model <> '' THEN ', model ' || q.gpu_model ELSE '' END);
    IF q.core_used + v_core > q.core_limit THEN
      v_violations := v_violations || jsonb_build_object('code', 'quota-exceeded',
        'message', format('%s: core limit %s, in use %s, pod asks %s (over by %s)',
          v_subject, q.core_limit, q.core_used, v_core, q.core_used + v_core - q.core_limit));
    END IF;
    IF q.memory_used_mib + v_mem > q.memory_limit_mib THEN
      v_violations := v_violations || jsonb_build_object('code', 'quota-exceeded',
        'message', format('%s: memory limit %s MiB, in use %s MiB, pod asks %s MiB (over by %s MiB)',
          v_subject, q.memory_limit_mib, q.memory_used_mib, v_mem, q.memory_used_mib + v_mem - q.memory_limit_mib));
    END IF;
    UPDATE quotas SET core_used = core_used + v_core, memory_used_mib = memory_used_mib + v_mem WHERE id = q.id;
  END LOOP;
  IF jsonb_array_length(v_violations) > 0 THEN
    -- Undo the quota totals added above; the rows stay locked until the transaction ends.
    RAISE EXCEPTION USING ERRCODE = 'VC001', MESSAGE = v_violations::text;
  END IF;

  UPDATE cards c SET core_used = c.core_used + x.core, memory_used_mib = c.memory_used_mib + x."memoryMiB"
  FROM jsonb_to_recordset(p->'demand') AS x("cardUuid" text, core int, "memoryMiB" int)
  WHERE c.uuid = x."cardUuid";

  INSERT INTO allocations (cluster, pod_uid, namespace, pod, container, node, card_uuid, gpu_model,
    core, memory_mib, state, reserved_at)
  SELECT v_cluster, v_pod_uid, v_ns, p->>'pod', i.container, v_node, i."cardUuid", c.model,
    i.core, i."memoryMiB", 'reserved', p_at
  FROM jsonb_to_recordset(p->'items') AS i(container text, "cardUuid" text, core int, "memoryMiB" int)
  JOIN cards c ON c.uuid = i."cardUuid";
  RETURN '{"reused": false}'::jsonb;
END;
$$;
