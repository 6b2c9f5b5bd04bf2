ALTER TABLE "usage_samples" ADD COLUMN "memory_burst_mib" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "usage_samples" ADD COLUMN "memory_burst_evicted_mib" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "usage_samples" ADD COLUMN "burst_evicted_s" real DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "usage_samples" ADD COLUMN "burst_evictions" integer DEFAULT 0 NOT NULL;