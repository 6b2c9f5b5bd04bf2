CREATE TABLE "usage_days" (
	"cluster" text NOT NULL,
	"namespace" text NOT NULL,
	"day" timestamp with time zone NOT NULL,
	"used_gpu_seconds" double precision NOT NULL,
	CONSTRAINT "usage_days_cluster_namespace_day_pk" PRIMARY KEY("cluster","namespace","day")
);
--> statement-breakpoint
CREATE INDEX "usage_days_day_idx" ON "usage_days" USING btree ("day");