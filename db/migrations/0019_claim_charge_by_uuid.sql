-- A DRA claim's MIG partitions in its charge (control-plane/claim-ledger/claim-partitions.ts). A
-- partition is held as the extender holds a MIG grant on its card: the instance's own ledger card
-- (`MIG-...`), or on a card kept for dynamic MIG each memory slice card it covers
-- (`<parent>/mig-slice-<k>`). Neither is the card an index names, so a charge item may now name its
-- ledger card by UUID: {container, cardUuid, core, memoryMiB} beside {container, cardIndex, core,
-- memoryMiB}. Such a card must be one of the charge's node (any other is refused not-found here,
-- worded with the UUID); vcuda_ledger_apply then decides the charge as before (same rules, locks,
-- words, idempotence), so two claims holding one slice meet the per-card rule.
CREATE OR REPLACE FUNCTION vcuda_ledger_apply_charges(p jsonb, replica text) RETURNS jsonb
LANGUAGE plpgsql
-- As vcuda_ledger_apply: planned once per session, every row found by key.
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $$
DECLARE
  -- The operations vcuda_ledger_apply decides (charges as reservations), where each stands in p,
  -- and which are charges.
  v_ops jsonb; v_place int[]; v_charge boolean[];
  -- The results by place in p: the refused charges' filled here, the others from vcuda_ledger_apply.
  v_out jsonb[]; v_res jsonb;
  k int;
BEGIN
  -- Read, not locked: vcuda_ledger_apply locks the cards these resolve to, and refuses a card
  -- that is no longer on the node. A replaced card's index names the one reported now. A whole
  -- MIG instance is a card of its node under its parent's index (control-plane/extender/
  -- ledger-nodes.ts, ledgerCardsOf): an index names the card itself, never an instance; a UUID
  -- names exactly that card (an instance or slice a MIG partition holds).
  WITH o AS (
    SELECT e AS op, i::int AS i FROM jsonb_array_elements(p) WITH ORDINALITY AS x(e, i)),
  items AS (
    SELECT o.i, it.n, it.item, o.op->>'cluster' AS cluster, o.op->>'node' AS node, c.uuid, c.memory_mib
    FROM o
    CROSS JOIN LATERAL jsonb_array_elements(o.op->'items') WITH ORDINALITY AS it(item, n)
    LEFT JOIN LATERAL (
      SELECT cards.uuid, cards.memory_mib FROM cards
      WHERE cards.cluster = o.op->>'cluster' AND cards.node = o.op->>'node'
        AND CASE WHEN it.item ? 'cardUuid' THEN cards.uuid = it.item->>'cardUuid'
          ELSE cards.index = (it.item->>'cardIndex')::int AND cards.uuid NOT LIKE 'MIG-%' END
      ORDER BY cards.is_present DESC, cards.uuid LIMIT 1) c ON true
    WHERE o.op->>'op' = 'charge'),
  charges AS (
    SELECT i,
      bool_and(uuid IS NOT NULL) AS known,
      jsonb_agg(jsonb_build_object('container', item->'container', 'cardUuid', uuid, 'core', item->'core',
        'memoryMiB', coalesce((item->>'memoryMiB')::int, memory_mib)) ORDER BY n) AS items,
      jsonb_agg(jsonb_build_object('code', 'not-found', 'message',
        CASE WHEN item ? 'cardUuid'
          THEN format('card %s on node %s/%s is not known to the ledger', item->>'cardUuid', cluster, node)
          ELSE format('no card of index %s on node %s/%s is known to the ledger', item->>'cardIndex', cluster, node)
        END)
        ORDER BY n) FILTER (WHERE uuid IS NULL) AS unknown
    FROM items GROUP BY i)
  SELECT
    jsonb_agg(CASE WHEN o.op->>'op' = 'charge'
      THEN o.op || jsonb_build_object('op', 'reserve', 'items', coalesce(c.items, '[]'))
      ELSE o.op END ORDER BY o.i) FILTER (WHERE c.known IS NOT false),
    array_agg(o.i ORDER BY o.i) FILTER (WHERE c.known IS NOT false),
    array_agg(o.op->>'op' = 'charge' ORDER BY o.i) FILTER (WHERE c.known IS NOT false),
    array_agg(CASE WHEN c.known IS false THEN jsonb_build_object('violations', c.unknown) END ORDER BY o.i)
  INTO v_ops, v_place, v_charge, v_out
  FROM o LEFT JOIN charges c ON c.i = o.i;
  IF v_out IS NULL THEN
    RETURN '[]';
  END IF;
  IF v_ops IS NULL THEN
    RETURN to_jsonb(v_out);
  END IF;

  v_res := vcuda_ledger_apply_as(v_ops, replica);
  FOR k IN 1 .. array_length(v_place, 1) LOOP
    v_out[v_place[k]] := v_res -> (k - 1);
  END LOOP;
  -- The charges accepted (a reused one wrote nothing) are bound, on rows this transaction inserted.
  IF true = ANY (v_charge) THEN
    UPDATE allocations a SET state = 'bound', bound_at = x.at
    FROM (
      SELECT e->>'cluster' AS cluster, e->>'podUid' AS uid, (e->>'at')::timestamptz AS at
      FROM jsonb_array_elements(v_ops) WITH ORDINALITY AS o(e, k)
      WHERE v_charge[o.k::int] AND v_res -> (o.k::int - 1) = '{"reused": false}'::jsonb) x
    WHERE a.cluster = x.cluster AND a.pod_uid = x.uid AND a.state = 'reserved';
  END IF;
  RETURN to_jsonb(v_out);
END;
$$;
