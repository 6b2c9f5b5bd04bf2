CREATE TABLE "replica_leases" (
	"replica" text PRIMARY KEY NOT NULL,
	"cluster" text NOT NULL,
	"renewed_at" timestamp with time zone NOT NULL,
	"expires_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
ALTER TABLE "pod_holds" ADD COLUMN "owner" text;--> statement-breakpoint
CREATE INDEX "replica_leases_cluster_idx" ON "replica_leases" USING btree ("cluster");--> statement-breakpoint
-- Hand-written from here. The reservation's transaction names its owner: the replica sets
-- vcuda.replica for the transaction (vcuda_ledger_apply_as) and every hold it inserts takes it,
-- whatever version of vcuda_ledger_apply does the inserting.
CREATE OR REPLACE FUNCTION vcuda_pod_hold_owner() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.owner IS NULL THEN
    NEW.owner := nullif(current_setting('vcuda.replica', true), '');
  END IF;
  RETURN NEW;
END $$;
--> statement-breakpoint
CREATE TRIGGER pod_holds_owner BEFORE INSERT ON pod_holds FOR EACH ROW EXECUTE FUNCTION vcuda_pod_hold_owner();
--> statement-breakpoint
CREATE OR REPLACE FUNCTION vcuda_ledger_apply_as(p jsonb, replica text) RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN
  PERFORM set_config('vcuda.replica', coalesce(replica, ''), true);
  RETURN vcuda_ledger_apply(p);
END $$;
