ALTER TABLE "allocations" ADD COLUMN "quota_core" integer;--> statement-breakpoint
ALTER TABLE "cards" ADD COLUMN "quota_weight" integer DEFAULT 100 NOT NULL;--> statement-breakpoint
CREATE INDEX "cards_weighted_idx" ON "cards" USING btree ("cluster","quota_weight") WHERE "cards"."quota_weight" < 100;--> statement-breakpoint
ALTER TABLE "allocations" ADD CONSTRAINT "allocations_quota_core_range" CHECK ("allocations"."quota_core" between 1 and "allocations"."core");--> statement-breakpoint
ALTER TABLE "cards" ADD CONSTRAINT "cards_quota_weight_range" CHECK ("cards"."quota_weight" between 1 and 100);
--> statement-breakpoint
-- The quota weight (above): a ledger card's 100 core stand for `quota_weight` hundredths of a whole
-- GPU in quotas and GPU-hours. A MIG instance shared as a small card keeps its core on its own
-- scale (its card capacity stays 100) and is weighted by the part of its parent it spans, so a
-- 50 share of a 3g.40gb costs a quota 25, as the instance held whole costs it 50. Each row keeps
-- what it cost (`quota_core`, rounded up), so its release gives back exactly that. NULL: the row
-- is from before this migration and cost its `core`.
--
-- vcuda_upsert_node takes each card's "quotaWeight" (absent: 100, as a replica of an earlier
-- release registers every card: it over-charges a shared instance until a replica of this one
-- registers the node again, never under-charges).
CREATE OR REPLACE FUNCTION vcuda_upsert_node(p_cluster text, p_node text, p_cards jsonb, p_at timestamptz)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO clusters (name, created_at) VALUES (p_cluster, p_at) ON CONFLICT DO NOTHING;
  INSERT INTO nodes (cluster, name, updated_at) VALUES (p_cluster, p_node, p_at)
  ON CONFLICT (cluster, name) DO UPDATE SET updated_at = excluded.updated_at;
  INSERT INTO cards (uuid, cluster, node, index, model, memory_mib, quota_weight, is_present, updated_at)
  SELECT x.uuid, p_cluster, p_node, x.index, x.model, x."memoryMiB", coalesce(x."quotaWeight", 100), true, p_at
  FROM jsonb_to_recordset(p_cards) AS x(uuid text, index int, model text, "memoryMiB" int, "quotaWeight" int)
  ORDER BY x.uuid
  ON CONFLICT (uuid) DO UPDATE SET cluster = excluded.cluster, node = excluded.node, index = excluded.index,
    model = excluded.model, memory_mib = excluded.memory_mib, quota_weight = excluded.quota_weight, is_present = true, updated_at = excluded.updated_at;
  UPDATE cards SET is_present = false, updated_at = p_at
  WHERE cluster = p_cluster AND node = p_node
    AND uuid NOT IN (SELECT x->>'uuid' FROM jsonb_array_elements(p_cards) x);
END $$;
--> statement-breakpoint
-- vcuda_ledger_apply as migration 0017 defined it, with each item's quota cost scaled by its card's
-- weight: cards keep their core, quotas and the daily roll-up take the weighted cost.
CREATE OR REPLACE FUNCTION vcuda_ledger_apply(p jsonb) RETURNS jsonb
LANGUAGE plpgsql
-- Planned once per session: custom plans for each batch's arrays cost more to make than to run.
-- Every row it reads is found by key, so no plan may scan a table whole: a plan made while the
-- cards or allocations were few must not read all of them once they are many.
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $$
DECLARE
  -- The operations, in batch order. o_new: a reservation whose hold this batch inserted (false:
  -- the pod is held already, the reservation is reused); o_ok: accepted.
  o_op text[]; o_cluster text[]; o_uid text[]; o_ns text[]; o_pod text[]; o_node text[];
  o_at timestamptz[]; o_only text[]; o_new boolean[]; o_ok boolean[]; o_released int[];
  -- Who asks, as the refusals word it: 'claim' for a ResourceClaim's allocation, else 'pod'.
  o_kind text[];
  o_result jsonb[];
  -- Every reservation's items, in (operation, card uuid) order; i_pos: the card's place in c_*.
  -- i_qcore: what the item costs quotas, its core scaled by its card's quota weight.
  i_op int[]; i_container text[]; i_card text[]; i_core int[]; i_mem int[]; i_pos int[]; i_qcore int[]; i_n int;
  -- The allocation rows released.
  x_op int[]; x_cluster text[]; x_ns text[]; x_card text[]; x_model text[]; x_core int[]; x_mem int[];
  x_qcore int[];
  -- The cards locked, by uuid; their totals as this batch changes them (c_*0: as read).
  c_uuid text[]; c_cluster text[]; c_node text[]; c_present boolean[]; c_model text[]; c_cap int[];
  c_weight int[]; c_core int[]; c_mem int[]; c_core0 int[]; c_mem0 int[];
  -- The namespaces of the batch (n_key: length-prefixed cluster and namespace) and, per
  -- namespace, its range in the quota arrays.
  n_key text[] := '{}'; n_cluster text[] := '{}'; n_ns text[] := '{}'; n_first int[]; n_last int[];
  -- One entry per (namespace, quota that applies to it), in (namespace, quota id) order;
  -- q_canon: the entry whose totals stand for that quota (a team quota appears once per namespace).
  q_n int[]; q_id int[]; q_name text[]; q_scope text[]; q_cluster text[]; q_ns text[]; q_team text[];
  q_model text[]; q_core_limit int[]; q_mem_limit int[]; q_core int[]; q_mem int[]; q_core0 int[];
  q_mem0 int[]; q_canon int[];
  -- One reservation's demand per card, and what it adds to each quota.
  d_pos int[]; d_uuid text[]; d_core int[]; d_mem int[]; d_qcore int[];
  add_q int[]; add_core int[]; add_mem int[];
  v_bad_ops boolean; v_dup_pods boolean; v_cards text[] := '{}'; v_key text; v_refused boolean := false;
  v_accepted boolean := false;
  v_violations jsonb; v_card_refused boolean; v_core int; v_mem int; v_ns int;
  i int; j int; k int; m int; ip int := 1;
BEGIN
  LOCK TABLE allocations IN ROW EXCLUSIVE MODE;

  -- Parse the batch and insert the new pods' holds (in key order). A second reservation of a pod
  -- (another replica's) waits here until the first ends, then sees it held.
  WITH o AS (
    SELECT * FROM ROWS FROM (jsonb_to_recordset(p) AS (op text, cluster text, "podUid" text, namespace text,
      pod text, node text, at timestamptz, "onlyState" text, "holderKind" text, items jsonb)) WITH ORDINALITY
      AS o(op, cluster, uid, ns, pod, node, at, only_state, holder_kind, items, i)),
  ins AS (
    INSERT INTO pod_holds (cluster, pod_uid, namespace, pod, reserved_at, node)
    SELECT cluster, uid, ns, pod, at, node FROM o WHERE op = 'reserve' ORDER BY cluster, uid
    ON CONFLICT DO NOTHING
    RETURNING cluster, pod_uid)
  SELECT
    bool_or(s.op IS DISTINCT FROM 'reserve' AND s.op IS DISTINCT FROM 'release'),
    (SELECT count(DISTINCT (o.cluster, o.uid)) FROM o) <> count(*) FILTER (WHERE s.first),
    array_agg(s.op ORDER BY s.i) FILTER (WHERE s.first), array_agg(s.cluster ORDER BY s.i) FILTER (WHERE s.first),
    array_agg(s.uid ORDER BY s.i) FILTER (WHERE s.first), array_agg(s.ns ORDER BY s.i) FILTER (WHERE s.first),
    array_agg(s.pod ORDER BY s.i) FILTER (WHERE s.first), array_agg(s.node ORDER BY s.i) FILTER (WHERE s.first),
    array_agg(s.at ORDER BY s.i) FILTER (WHERE s.first), array_agg(s.only_state ORDER BY s.i) FILTER (WHERE s.first),
    array_agg(CASE WHEN s.holder_kind = 'claim' THEN 'claim' ELSE 'pod' END ORDER BY s.i) FILTER (WHERE s.first),
    array_agg(s.op = 'reserve' AND EXISTS (SELECT 1 FROM ins WHERE ins.cluster = s.cluster AND ins.pod_uid = s.uid)
      ORDER BY s.i) FILTER (WHERE s.first),
    array_agg(s.i::int ORDER BY s.i, s.card, s.container) FILTER (WHERE s.card IS NOT NULL),
    array_agg(s.container ORDER BY s.i, s.card, s.container) FILTER (WHERE s.card IS NOT NULL),
    array_agg(s.card ORDER BY s.i, s.card, s.container) FILTER (WHERE s.card IS NOT NULL),
    array_agg(s.core ORDER BY s.i, s.card, s.container) FILTER (WHERE s.card IS NOT NULL),
    array_agg(s.mem ORDER BY s.i, s.card, s.container) FILTER (WHERE s.card IS NOT NULL)
  INTO v_bad_ops, v_dup_pods, o_op, o_cluster, o_uid, o_ns, o_pod, o_node, o_at, o_only, o_kind, o_new,
    i_op, i_container, i_card, i_core, i_mem
  FROM (
    SELECT o.op, o.cluster, o.uid, o.ns, o.pod, o.node, o.at, o.only_state, o.holder_kind, o.i, it.container,
      it."cardUuid" AS card, it.core, it."memoryMiB" AS mem, it.n IS NULL OR it.n = 1 AS first
    FROM o LEFT JOIN LATERAL ROWS FROM (jsonb_to_recordset(CASE WHEN o.op = 'reserve' THEN o.items END)
      AS (container text, "cardUuid" text, core int, "memoryMiB" int)) WITH ORDINALITY
      AS it(container, "cardUuid", core, "memoryMiB", n) ON true) s;
  IF v_bad_ops THEN
    RAISE EXCEPTION 'vcuda_ledger_apply: an operation is neither reserve nor release';
  END IF;
  IF v_dup_pods THEN
    RAISE EXCEPTION 'vcuda_ledger_apply: a pod appears twice in one batch';
  END IF;
  IF o_op IS NULL THEN
    RETURN '[]';
  END IF;
  i_n := coalesce(array_length(i_op, 1), 0);
  -- Filled up front: an element assigned into an empty array would set its lower bound.
  o_released := array_fill(0, ARRAY[array_length(o_op, 1)]);
  o_ok := array_fill(false, ARRAY[array_length(o_op, 1)]);
  o_result := array_fill(NULL::jsonb, ARRAY[array_length(o_op, 1)]);
  i_pos := array_fill(NULL::int, ARRAY[i_n]);
  i_qcore := array_fill(NULL::int, ARRAY[i_n]);

  -- The live rows of the pods to release, read before their cards are locked (as vcuda_release
  -- does, so the two lock in the same order): which cards and namespaces they hold.
  IF 'release' = ANY (o_op) THEN
    SELECT array_agg(a.card_uuid), array_agg(a.cluster), array_agg(a.namespace) INTO x_card, x_cluster, x_ns
    FROM unnest(o_op, o_cluster, o_uid) AS x(op, cluster, uid)
    JOIN allocations a ON a.cluster = x.cluster AND a.pod_uid = x.uid
    WHERE x.op = 'release' AND a.state <> 'released';
  END IF;

  -- The cards and namespaces the batch touches.
  FOR j IN 1 .. i_n LOOP
    IF o_new[i_op[j]] THEN
      v_cards := v_cards || i_card[j];
    END IF;
  END LOOP;
  FOR i IN 1 .. array_length(o_op, 1) LOOP
    CONTINUE WHEN NOT o_new[i];
    v_key := length(o_cluster[i]) || ':' || o_cluster[i] || '/' || o_ns[i];
    IF array_position(n_key, v_key) IS NULL THEN
      n_key := n_key || v_key; n_cluster := n_cluster || o_cluster[i]; n_ns := n_ns || o_ns[i];
    END IF;
  END LOOP;
  FOR j IN 1 .. coalesce(array_length(x_card, 1), 0) LOOP
    v_cards := v_cards || x_card[j];
    v_key := length(x_cluster[j]) || ':' || x_cluster[j] || '/' || x_ns[j];
    IF array_position(n_key, v_key) IS NULL THEN
      n_key := n_key || v_key; n_cluster := n_cluster || x_cluster[j]; n_ns := n_ns || x_ns[j];
    END IF;
  END LOOP;

  SELECT array_agg(uuid), array_agg(cluster), array_agg(node), array_agg(is_present), array_agg(model),
    array_agg(memory_mib), array_agg(quota_weight), array_agg(core_used), array_agg(memory_used_mib)
  INTO c_uuid, c_cluster, c_node, c_present, c_model, c_cap, c_weight, c_core, c_mem
  FROM (
    SELECT uuid, cluster, node, is_present, model, memory_mib, quota_weight, core_used, memory_used_mib FROM cards
    WHERE uuid = ANY (v_cards) ORDER BY uuid FOR UPDATE) c;
  c_core0 := c_core;
  c_mem0 := c_mem;

  -- The quotas of those namespaces (a namespace's own, and its team's), locked in id order.
  IF array_length(n_key, 1) > 0 THEN
    SELECT array_agg(s.n ORDER BY s.n, s.id), array_agg(s.id ORDER BY s.n, s.id),
      array_agg(s.name ORDER BY s.n, s.id), array_agg(s.scope ORDER BY s.n, s.id),
      array_agg(s.cluster ORDER BY s.n, s.id), array_agg(s.namespace ORDER BY s.n, s.id),
      array_agg(s.team ORDER BY s.n, s.id), array_agg(s.gpu_model ORDER BY s.n, s.id),
      array_agg(s.core_limit ORDER BY s.n, s.id), array_agg(s.memory_limit_mib ORDER BY s.n, s.id),
      array_agg(s.core_used ORDER BY s.n, s.id), array_agg(s.memory_used_mib ORDER BY s.n, s.id)
    INTO q_n, q_id, q_name, q_scope, q_cluster, q_ns, q_team, q_model, q_core_limit, q_mem_limit, q_core, q_mem
    FROM (
      SELECT n.i::int AS n, q.id, q.name, q.scope, q.cluster, q.namespace, q.team, q.gpu_model, q.core_limit,
        q.memory_limit_mib, q.core_used, q.memory_used_mib
      FROM unnest(n_cluster, n_ns) WITH ORDINALITY AS n(cluster, ns, i)
      LEFT JOIN team_namespaces t ON t.cluster = n.cluster AND t.namespace = n.ns
      JOIN quotas q ON (q.scope = 'namespace' AND q.cluster = n.cluster AND q.namespace = n.ns)
        OR (q.scope = 'team' AND q.team = t.team)
      ORDER BY q.id, n.i
      FOR UPDATE OF q) s;
  END IF;
  n_first := array_fill(1, ARRAY[coalesce(array_length(n_key, 1), 0)]);
  n_last := array_fill(0, ARRAY[coalesce(array_length(n_key, 1), 0)]);
  q_canon := array_fill(NULL::int, ARRAY[coalesce(array_length(q_n, 1), 0)]);
  FOR j IN 1 .. coalesce(array_length(q_n, 1), 0) LOOP
    IF n_last[q_n[j]] = 0 THEN
      n_first[q_n[j]] := j;
    END IF;
    n_last[q_n[j]] := j;
    q_canon[j] := array_position(q_id, q_id[j]);
  END LOOP;
  q_core0 := q_core;
  q_mem0 := q_mem;

  -- The releases claim their pods' live rows (an expiry leaves a pod that was confirmed since it
  -- was picked), add their GPU-seconds to the daily roll-up and drop the holds. A release racing
  -- this one for the same pod waited on its cards above and left nothing to claim.
  IF 'release' = ANY (o_op) THEN
    WITH rel AS (
      UPDATE allocations a SET state = 'released', released_at = x.at
      FROM unnest(o_op, o_cluster, o_uid, o_at, o_only) WITH ORDINALITY AS x(op, cluster, uid, at, only_state, i)
      WHERE x.op = 'release' AND a.cluster = x.cluster AND a.pod_uid = x.uid AND a.state <> 'released'
        AND (x.only_state IS NULL OR NOT EXISTS (
          SELECT 1 FROM allocations b WHERE b.cluster = x.cluster AND b.pod_uid = x.uid
            AND b.state <> 'released' AND b.state <> x.only_state))
      RETURNING x.i, x.at, a.cluster, a.pod_uid, a.namespace, a.card_uuid, a.gpu_model, a.core, a.memory_mib,
        a.reserved_at, coalesce(a.quota_core, a.core) AS qcore),
    days AS (
      INSERT INTO allocation_days (cluster, namespace, day, gpu_seconds)
      SELECT r.cluster, r.namespace, d,
        sum(extract(epoch FROM least(r.at, d + interval '1 day') - greatest(r.reserved_at, d)) * r.qcore / 100.0)::float8
      FROM rel r,
        generate_series(date_trunc('day', r.reserved_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC', r.at, interval '1 day') AS d
      WHERE r.at > r.reserved_at AND d < r.at
      GROUP BY 1, 2, 3
      ORDER BY 1, 2, 3
      ON CONFLICT (cluster, namespace, day) DO UPDATE SET gpu_seconds = allocation_days.gpu_seconds + excluded.gpu_seconds),
    holds AS (
      DELETE FROM pod_holds h USING (SELECT DISTINCT cluster, pod_uid FROM rel) r
      WHERE h.cluster = r.cluster AND h.pod_uid = r.pod_uid)
    SELECT array_agg(rel.i::int), array_agg(rel.cluster), array_agg(rel.namespace), array_agg(rel.card_uuid),
      array_agg(rel.gpu_model), array_agg(rel.core), array_agg(rel.memory_mib), array_agg(rel.qcore)
    INTO x_op, x_cluster, x_ns, x_card, x_model, x_core, x_mem, x_qcore
    FROM rel;
  END IF;


  -- Releases first: their rows leave their cards' and quotas' totals. A row on a card or of a
  -- namespace not locked above means its pod was reserved again since the read: run again.
  FOR j IN 1 .. coalesce(array_length(x_op, 1), 0) LOOP
    o_released[x_op[j]] := o_released[x_op[j]] + 1;
    k := array_position(c_uuid, x_card[j]);
    v_ns := array_position(n_key, length(x_cluster[j]) || ':' || x_cluster[j] || '/' || x_ns[j]);
    IF k IS NULL OR v_ns IS NULL THEN
      RAISE EXCEPTION USING ERRCODE = '40001',
        MESSAGE = 'vcuda_ledger_apply: a pod to release changed while the batch ran; run it again';
    END IF;
    c_core[k] := c_core[k] - x_core[j];
    c_mem[k] := c_mem[k] - x_mem[j];
    FOR m IN n_first[v_ns] .. n_last[v_ns] LOOP
      CONTINUE WHEN q_model[m] <> '' AND q_model[m] <> x_model[j];
      k := q_canon[m];
      q_core[k] := q_core[k] - x_qcore[j];
      q_mem[k] := q_mem[k] - x_mem[j];
    END LOOP;
  END LOOP;

  -- Then the reservations, one after another against the totals as they stand.
  FOR i IN 1 .. array_length(o_op, 1) LOOP
    IF o_op[i] = 'release' THEN
      o_result[i] := jsonb_build_object('released', o_released[i]);
      CONTINUE;
    END IF;
    -- This reservation's items (they follow in operation order): its demand per card, in uuid order.
    d_pos := '{}'; d_uuid := '{}'; d_core := '{}'; d_mem := '{}'; d_qcore := '{}';
    WHILE ip <= i_n AND i_op[ip] = i LOOP
      IF o_new[i] THEN
        i_pos[ip] := array_position(c_uuid, i_card[ip]);
        -- Rounded up: a share never costs a quota less than its part of a whole GPU.
        i_qcore[ip] := CASE WHEN i_pos[ip] IS NULL THEN i_core[ip]
          ELSE (i_core[ip] * c_weight[i_pos[ip]] + 99) / 100 END;
        m := coalesce(array_length(d_uuid, 1), 0);
        IF m > 0 AND d_uuid[m] = i_card[ip] THEN
          d_core[m] := d_core[m] + i_core[ip];
          d_mem[m] := d_mem[m] + i_mem[ip];
          d_qcore[m] := d_qcore[m] + i_qcore[ip];
        ELSE
          d_pos := d_pos || i_pos[ip]; d_uuid := d_uuid || i_card[ip];
          d_core := d_core || i_core[ip]; d_mem := d_mem || i_mem[ip]; d_qcore := d_qcore || i_qcore[ip];
        END IF;
      END IF;
      ip := ip + 1;
    END LOOP;
    IF NOT o_new[i] THEN
      o_result[i] := '{"reused": true}';
      CONTINUE;
    END IF;

    v_violations := '[]';
    FOR j IN 1 .. coalesce(array_length(d_uuid, 1), 0) LOOP
      k := d_pos[j];
      IF k IS NULL THEN
        v_violations := v_violations || jsonb_build_object('code', 'not-found',
          'message', format('card %s is not known to the ledger', d_uuid[j]));
      ELSIF c_cluster[k] <> o_cluster[i] OR c_node[k] <> o_node[i] THEN
        v_violations := v_violations || jsonb_build_object('code', 'invalid',
          'message', format('card %s is on %s/%s, not on %s/%s', d_uuid[j], c_cluster[k], c_node[k], o_cluster[i],
            o_node[i]));
      ELSIF NOT c_present[k] THEN
        v_violations := v_violations || jsonb_build_object('code', 'capacity-conflict',
          'message', format('card %s is no longer reported by %s', d_uuid[j], c_node[k]));
      ELSE
        IF d_core[j] > 100 - c_core[k] THEN
          v_violations := v_violations || jsonb_build_object('code', 'capacity-conflict',
            'message', format('card %s has %s core free, %s asks %s (over by %s)',
              d_uuid[j], 100 - c_core[k], o_kind[i], d_core[j], d_core[j] - (100 - c_core[k])));
        END IF;
        IF d_mem[j] > c_cap[k] - c_mem[k] THEN
          v_violations := v_violations || jsonb_build_object('code', 'capacity-conflict',
            'message', format('card %s has %s MiB free, %s asks %s MiB (over by %s MiB)',
              d_uuid[j], c_cap[k] - c_mem[k], o_kind[i], d_mem[j], d_mem[j] - (c_cap[k] - c_mem[k])));
        END IF;
      END IF;
    END LOOP;
    -- A pod refused by a card is not judged by its quotas (the most specific error wins).
    v_card_refused := v_violations <> '[]';

    add_q := '{}'; add_core := '{}'; add_mem := '{}';
    v_ns := array_position(n_key, length(o_cluster[i]) || ':' || o_cluster[i] || '/' || o_ns[i]);
    FOR m IN n_first[v_ns] .. n_last[v_ns] LOOP
      EXIT WHEN v_card_refused;
      k := q_canon[m];
      v_core := 0;
      v_mem := 0;
      FOR j IN 1 .. array_length(d_uuid, 1) LOOP
        IF q_model[m] = '' OR c_model[d_pos[j]] = q_model[m] THEN
          v_core := v_core + d_qcore[j];
          v_mem := v_mem + d_mem[j];
        END IF;
      END LOOP;
      v_violations := v_violations || vcuda_quota_refusals(q_name[m], q_scope[m], q_cluster[m], q_ns[m], q_team[m],
        q_model[m], q_core_limit[m], q_mem_limit[m], q_core[k], q_mem[k], v_core, v_mem, o_kind[i]);
      add_q := add_q || k; add_core := add_core || v_core; add_mem := add_mem || v_mem;
    END LOOP;

    IF v_violations <> '[]' THEN
      o_result[i] := jsonb_build_object('violations', v_violations);
      v_refused := true;
      CONTINUE;
    END IF;
    FOR j IN 1 .. array_length(d_uuid, 1) LOOP
      c_core[d_pos[j]] := c_core[d_pos[j]] + d_core[j];
      c_mem[d_pos[j]] := c_mem[d_pos[j]] + d_mem[j];
    END LOOP;
    FOR j IN 1 .. coalesce(array_length(add_q, 1), 0) LOOP
      q_core[add_q[j]] := q_core[add_q[j]] + add_core[j];
      q_mem[add_q[j]] := q_mem[add_q[j]] + add_mem[j];
    END LOOP;
    o_ok[i] := true;
    o_result[i] := '{"reused": false}';
    v_accepted := true;
  END LOOP;

  -- The writes, all on rows locked above (or inserted by this batch): refused pods' holds go,
  -- accepted pods' rows come, and the new totals are written as they stand.
  IF v_refused THEN
    DELETE FROM pod_holds h USING unnest(o_cluster, o_uid, o_new, o_ok) AS r(cluster, uid, new, ok)
    WHERE r.new AND NOT r.ok AND h.cluster = r.cluster AND h.pod_uid = r.uid;
  END IF;
  IF v_accepted THEN
    INSERT INTO allocations (cluster, pod_uid, namespace, pod, container, node, card_uuid, gpu_model,
      core, quota_core, memory_mib, state, reserved_at)
    SELECT o_cluster[it.op], o_uid[it.op], o_ns[it.op], o_pod[it.op], it.container, o_node[it.op], it.card,
      c_model[it.pos], it.core, it.qcore, it.mem, 'reserved', o_at[it.op]
    FROM unnest(i_op, i_container, i_card, i_core, i_mem, i_pos, i_qcore)
      AS it(op, container, card, core, mem, pos, qcore)
    WHERE o_ok[it.op];
  END IF;
  WITH card_totals AS (
    UPDATE cards SET core_used = c.core, memory_used_mib = c.mem
    FROM unnest(c_uuid, c_core, c_mem, c_core0, c_mem0) AS c(uuid, core, mem, core0, mem0)
    WHERE cards.uuid = c.uuid AND (c.core <> c.core0 OR c.mem <> c.mem0))
  UPDATE quotas SET core_used = q.core, memory_used_mib = q.mem
  FROM unnest(q_id, q_core, q_mem, q_core0, q_mem0) AS q(id, core, mem, core0, mem0)
  WHERE quotas.id = q.id AND (q.core <> q.core0 OR q.mem <> q.mem0);
  RETURN to_jsonb(o_result);
END;
$$;
--> statement-breakpoint
-- The release and the roll-up rebuild of migration 0004 (a replica of an earlier release still
-- calls vcuda_release), on what each row cost.
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
    SELECT q2.id, sum(coalesce(a.quota_core, a.core))::int AS core, sum(a.memory_mib)::int AS mem
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
    sum(extract(epoch FROM least(p_at, d + interval '1 day') - greatest(a.reserved_at, d)) * coalesce(a.quota_core, a.core) / 100.0)::float8
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
--> statement-breakpoint
CREATE OR REPLACE FUNCTION vcuda_rebuild_allocation_days() RETURNS void
LANGUAGE sql AS $$
  DELETE FROM allocation_days;
  INSERT INTO allocation_days (cluster, namespace, day, gpu_seconds)
  SELECT a.cluster, a.namespace, d,
    sum(extract(epoch FROM least(a.released_at, d + interval '1 day') - greatest(a.reserved_at, d)) * coalesce(a.quota_core, a.core) / 100.0)::float8
  FROM allocations a,
    generate_series(date_trunc('day', a.reserved_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC', a.released_at, interval '1 day') AS d
  WHERE a.state = 'released' AND a.released_at > a.reserved_at AND d < a.released_at
  GROUP BY 1, 2, 3;
$$;
--> statement-breakpoint
-- Admission's dry run for a pod of shares that may land on a weighted card: `p_share_core` of
-- `p_core` is shares (each under a whole card), which cost at the least their part of the cluster's
-- lightest present card of the model. Refuses only what no placement could fit; the 6-argument
-- form (no shares discounted) stays for replicas of an earlier release.
CREATE OR REPLACE FUNCTION vcuda_quota_precheck(p_cluster text, p_namespace text, p_core int, p_mem int,
  p_model text, p_asker text, p_share_core int) RETURNS jsonb
LANGUAGE sql STABLE AS $$
  SELECT vcuda_quota_precheck(p_cluster, p_namespace,
    p_core - p_share_core + (p_share_core * coalesce((
      SELECT min(c.quota_weight) FROM cards c
      WHERE c.cluster = p_cluster AND c.quota_weight < 100 AND c.is_present AND (p_model = '' OR c.model = p_model)),
      100) + 99) / 100,
    p_mem, p_model, p_asker)
$$;
--> statement-breakpoint
-- The usage roll-up rebuilt as recordUsage now adds to it: a sample of a weighted card (a shared MIG
-- instance, whose SM share is of the instance) counts its card's weight of it, as its allocation does.
CREATE OR REPLACE FUNCTION vcuda_rebuild_usage_days() RETURNS void
LANGUAGE sql AS $$
  DELETE FROM usage_days;
  INSERT INTO usage_days (cluster, namespace, day, used_gpu_seconds)
  SELECT u.cluster, u.namespace, to_timestamp(86400 * floor(date_part('epoch', u.sampled_at) / 86400)),
    sum(u.sm_pct * u.period_s * coalesce(c.quota_weight, 100))::float8 / 10000.0
  FROM usage_samples u LEFT JOIN cards c ON c.uuid = u.card_uuid
  GROUP BY 1, 2, 3;
$$;
