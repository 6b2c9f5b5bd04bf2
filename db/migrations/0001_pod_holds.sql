CREATE TABLE "pod_holds" (
	"cluster" text NOT NULL,
	"pod_uid" text NOT NULL,
	"namespace" text NOT NULL,
	"pod" text NOT NULL,
	"reserved_at" timestamp with time zone NOT NULL,
	CONSTRAINT "pod_holds_cluster_pod_uid_pk" PRIMARY KEY("cluster","pod_uid")
);
