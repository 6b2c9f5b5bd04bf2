-- A node's registration as one call: the cluster, the node and all its cards in one multi-row
-- upsert, then the cards it no longer reports marked absent. The client-side version sent one
-- statement per card (about 12 round trips for an 8-card node). Cards are upserted in uuid
-- order, the ledger's lock order, so a registration and a reservation cannot deadlock on them.
CREATE OR REPLACE FUNCTION vcuda_upsert_node(p_cluster text, p_node text, p_cards jsonb, p_at timestamptz)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO clusters (name, created_at) VALUES (p_cluster, p_at) ON CONFLICT DO NOTHING;
  INSERT INTO nodes (cluster, name, updated_at) VALUES (p_cluster, p_node, p_at)
  ON CONFLICT (cluster, name) DO UPDATE SET updated_at = excluded.updated_at;
  INSERT INTO cards (uuid, cluster, node, index, model, memory_mib, is_present, updated_at)
  SELECT x.uuid, p_cluster, p_node, x.index, x.model, x."memoryMiB", true, p_at
  FROM jsonb_to_recordset(p_cards) AS x(uuid text, index int, model text, "memoryMiB" int)
  ORDER BY x.uuid
  ON CONFLICT (uuid) DO UPDATE SET cluster = excluded.cluster, node = excluded.node, index = excluded.index,
    model = excluded.model, memory_mib = excluded.memory_mib, is_present = true, updated_at = excluded.updated_at;
  UPDATE cards SET is_present = false, updated_at = p_at
  WHERE cluster = p_cluster AND node = p_node
    AND uuid NOT IN (SELECT x->>'uuid' FROM jsonb_array_elements(p_cards) x);
END $$;
