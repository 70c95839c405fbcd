CREATE TABLE "inbound_webhooks" (
	"id" text PRIMARY KEY NOT NULL,
	"workspace_id" text NOT NULL,
	"name" text NOT NULL,
	"default_channel_id" text,
	"bot_name" text,
	"bot_avatar_url" text,
	"signature_required" boolean DEFAULT false NOT NULL,
	"is_active" boolean DEFAULT true NOT NULL,
	"secret_sealed" text NOT NULL,
	"signing_secret_sealed" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "webhook_idempotency_keys" (
	"webhook_id" text NOT NULL,
	"key" text NOT NULL,
	"request_hash" text NOT NULL,
	"status" integer NOT NULL,
	"body" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "webhook_idempotency_keys_webhook_id_key_pk" PRIMARY KEY("webhook_id","key")
);
--> statement-breakpoint
CREATE TABLE "webhook_requests" (
	"id" text PRIMARY KEY NOT NULL,
	"webhook_id" text NOT NULL,
	"status" integer NOT NULL,
	"outcome" text NOT NULL,
	"reason" text,
	"idempotency_key" text,
	"ip" text NOT NULL,
	"message_id" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "inbound_webhooks" ADD CONSTRAINT "inbound_webhooks_workspace_id_workspaces_id_fk" FOREIGN KEY ("workspace_id") REFERENCES "public"."workspaces"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "inbound_webhooks" ADD CONSTRAINT "inbound_webhooks_default_channel_id_channels_id_fk" FOREIGN KEY ("default_channel_id") REFERENCES "public"."channels"("id") ON DELETE set null ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "webhook_idempotency_keys" ADD CONSTRAINT "webhook_idempotency_keys_webhook_id_inbound_webhooks_id_fk" FOREIGN KEY ("webhook_id") REFERENCES "public"."inbound_webhooks"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "webhook_requests" ADD CONSTRAINT "webhook_requests_webhook_id_inbound_webhooks_id_fk" FOREIGN KEY ("webhook_id") REFERENCES "public"."inbound_webhooks"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "inbound_webhooks_workspace_id_idx" ON "inbound_webhooks" USING btree ("workspace_id","id");--> statement-breakpoint
CREATE INDEX "webhook_idempotency_keys_created_at_idx" ON "webhook_idempotency_keys" USING btree ("created_at");--> statement-breakpoint
CREATE INDEX "webhook_requests_webhook_id_id_idx" ON "webhook_requests" USING btree ("webhook_id","id");--> statement-breakpoint
CREATE INDEX "webhook_requests_created_at_idx" ON "webhook_requests" USING btree ("created_at");