-- Pending container sizes per node, arbitrated by the ledger so that replicas agree (see
-- pod_holds in db/schema.ts): vcuda_reserve takes an optional "pending" {coreAmounts, ttlMs}.
ALTER TABLE "pod_holds" ADD COLUMN "node" text;--> statement-breakpoint
ALTER TABLE "pod_holds" ADD COLUMN "core_amounts" integer[] DEFAULT '{}'::integer[] NOT NULL;--> statement-breakpoint
ALTER TABLE "pod_holds" ADD COLUMN "allocated_at" timestamp with time zone;--> statement-breakpoint
CREATE INDEX "pod_holds_pending_idx" ON "pod_holds" USING btree ("cluster","node") WHERE "pod_holds"."allocated_at" is null;--> statement-breakpoint
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
  v_amounts int[] := coalesce(ARRAY(SELECT x::int FROM jsonb_array_elements_text(p->'pending'->'coreAmounts') x), '{}');
  v_other record;
BEGIN
  -- A second reservation of the same pod waits here until the first ends, then sees it held.
  INSERT INTO pod_holds (cluster, pod_uid, namespace, pod, reserved_at, node, core_amounts)
  VALUES (v_cluster, v_pod_uid, v_ns, p->>'pod', p_at, v_node, v_amounts) ON CONFLICT DO NOTHING;
  IF NOT FOUND THEN
    RETURN '{"reused": true}'::jsonb;
  END IF;

  -- The device plugin's Allocate sees only a container's core amount, so while a pod placed on
  -- this node is not yet allocated no other pod with one of its amounts may join it. Reserves on
  -- one node queue on this lock, so each sees the holds of those committed before it, whichever
  -- control-plane replica made them.
  IF p ? 'pending' THEN
    PERFORM pg_advisory_xact_lock(hashtextextended(v_cluster || '/' || v_node, 7663));
    SELECT h.namespace, h.pod, (SELECT min(a) FROM unnest(h.core_amounts) a WHERE a = ANY (v_amounts)) AS amount
    INTO v_other
    FROM pod_holds h
    WHERE h.cluster = v_cluster AND h.node = v_node AND h.pod_uid <> v_pod_uid AND h.allocated_at IS NULL
      AND h.core_amounts && v_amounts
      AND h.reserved_at > p_at - make_interval(secs => (p->'pending'->>'ttlMs')::double precision / 1000)
    ORDER BY h.reserved_at
    LIMIT 1;
    IF FOUND THEN
      DELETE FROM pod_holds WHERE cluster = v_cluster AND pod_uid = v_pod_uid;
      RETURN jsonb_build_object('violations', jsonb_build_array(jsonb_build_object('code', 'capacity-conflict',
        'message', format('pod %s/%s with a %s-core container is still starting on %s; one pending container '
          'size per node keeps the device plugin''s choice unambiguous', v_other.namespace, v_other.pod,
          v_other.amount, v_node))));
    END IF;
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
