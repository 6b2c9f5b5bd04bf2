CREATE TABLE "allocations" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"cluster" text NOT NULL,
	"pod_uid" text NOT NULL,
	"namespace" text NOT NULL,
	"pod" text NOT NULL,
	"container" text NOT NULL,
	"node" text NOT NULL,
	"card_uuid" text NOT NULL,
	"gpu_model" text NOT NULL,
	"core" integer NOT NULL,
	"memory_mib" integer NOT NULL,
	"state" text NOT NULL,
	"reserved_at" timestamp with time zone NOT NULL,
	"bound_at" timestamp with time zone,
	"released_at" timestamp with time zone,
	CONSTRAINT "allocations_core_range" CHECK ("allocations"."core" between 1 and 100),
	CONSTRAINT "allocations_memory_positive" CHECK ("allocations"."memory_mib" >= 0)
);
--> statement-breakpoint
CREATE TABLE "cards" (
	"uuid" text PRIMARY KEY NOT NULL,
	"cluster" text NOT NULL,
	"node" text NOT NULL,
	"index" integer NOT NULL,
	"model" text NOT NULL,
	"memory_mib" integer NOT NULL,
	"is_present" boolean DEFAULT true NOT NULL,
	"core_used" integer DEFAULT 0 NOT NULL,
	"memory_used_mib" integer DEFAULT 0 NOT NULL,
	"updated_at" timestamp with time zone NOT NULL,
	CONSTRAINT "cards_core_within_card" CHECK ("cards"."core_used" >= 0 and "cards"."core_used" <= 100),
	CONSTRAINT "cards_memory_within_card" CHECK ("cards"."memory_used_mib" >= 0 and "cards"."memory_used_mib" <= "cards"."memory_mib")
);
--> statement-breakpoint
CREATE TABLE "clusters" (
	"name" text PRIMARY KEY NOT NULL,
	"jwks" jsonb DEFAULT '{"keys":[]}'::jsonb NOT NULL,
	"created_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
CREATE TABLE "nodes" (
	"cluster" text NOT NULL,
	"name" text NOT NULL,
	"updated_at" timestamp with time zone NOT NULL,
	CONSTRAINT "nodes_cluster_name_pk" PRIMARY KEY("cluster","name")
);
--> statement-breakpoint
CREATE TABLE "quotas" (
	"id" serial PRIMARY KEY NOT NULL,
	"name" text NOT NULL,
	"scope" text NOT NULL,
	"cluster" text,
	"namespace" text,
	"team" text,
	"gpu_model" text DEFAULT '' NOT NULL,
	"core_limit" integer NOT NULL,
	"memory_limit_mib" integer NOT NULL,
	"core_used" integer DEFAULT 0 NOT NULL,
	"memory_used_mib" integer DEFAULT 0 NOT NULL,
	"updated_at" timestamp with time zone NOT NULL,
	CONSTRAINT "quotas_subject" CHECK (("quotas"."scope" = 'namespace' and "quotas"."cluster" is not null and "quotas"."namespace" is not null and "quotas"."team" is null)
        or ("quotas"."scope" = 'team' and "quotas"."team" is not null and "quotas"."cluster" is null and "quotas"."namespace" is null)),
	CONSTRAINT "quotas_used_non_negative" CHECK ("quotas"."core_used" >= 0 and "quotas"."memory_used_mib" >= 0)
);
--> statement-breakpoint
CREATE TABLE "team_namespaces" (
	"team" text NOT NULL,
	"cluster" text NOT NULL,
	"namespace" text NOT NULL,
	CONSTRAINT "team_namespaces_cluster_namespace_pk" PRIMARY KEY("cluster","namespace")
);
--> statement-breakpoint
CREATE TABLE "usage_samples" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"cluster" text NOT NULL,
	"namespace" text NOT NULL,
	"pod_uid" text NOT NULL,
	"container" text NOT NULL,
	"card_uuid" text NOT NULL,
	"sampled_at" timestamp with time zone NOT NULL,
	"period_s" real NOT NULL,
	"sm_pct" real NOT NULL,
	"memory_used_mib" integer NOT NULL,
	"resolution" text NOT NULL,
	"samples" integer DEFAULT 1 NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX "allocations_live_idx" ON "allocations" USING btree ("cluster","pod_uid","container","card_uuid") WHERE "allocations"."state" <> 'released';--> statement-breakpoint
CREATE INDEX "allocations_pod_idx" ON "allocations" USING btree ("cluster","pod_uid");--> statement-breakpoint
CREATE INDEX "allocations_reserved_at_idx" ON "allocations" USING btree ("reserved_at");--> statement-breakpoint
CREATE INDEX "allocations_released_at_idx" ON "allocations" USING btree ("released_at");--> statement-breakpoint
CREATE INDEX "allocations_active_idx" ON "allocations" USING btree ("cluster","namespace") WHERE "allocations"."state" <> 'released';--> statement-breakpoint
CREATE INDEX "cards_cluster_node_idx" ON "cards" USING btree ("cluster","node");--> statement-breakpoint
CREATE UNIQUE INDEX "quotas_name_idx" ON "quotas" USING btree ("name");--> statement-breakpoint
CREATE INDEX "quotas_namespace_idx" ON "quotas" USING btree ("cluster","namespace");--> statement-breakpoint
CREATE INDEX "quotas_team_idx" ON "quotas" USING btree ("team");--> statement-breakpoint
CREATE INDEX "team_namespaces_team_idx" ON "team_namespaces" USING btree ("team");--> statement-breakpoint
CREATE INDEX "usage_samples_time_idx" ON "usage_samples" USING btree ("sampled_at");--> statement-breakpoint
CREATE INDEX "usage_samples_pod_idx" ON "usage_samples" USING btree ("cluster","pod_uid");