CREATE TABLE "allocation_days" (
	"cluster" text NOT NULL,
	"namespace" text NOT NULL,
	"day" timestamp with time zone NOT NULL,
	"gpu_seconds" double precision NOT NULL,
	CONSTRAINT "allocation_days_cluster_namespace_day_pk" PRIMARY KEY("cluster","namespace","day")
);
--> statement-breakpoint
CREATE INDEX "allocation_days_day_idx" ON "allocation_days" USING btree ("day");--> statement-breakpoint
CREATE INDEX "allocations_released_reserved_idx" ON "allocations" USING btree ("released_at","reserved_at");