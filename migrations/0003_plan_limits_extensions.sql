ALTER TABLE `plans` ADD `max_output_tokens` integer;--> statement-breakpoint
ALTER TABLE `plans` ADD `allowed_extensions` text DEFAULT '[]' NOT NULL;--> statement-breakpoint
ALTER TABLE `plans` ADD `tool_events_per_minute` integer DEFAULT 6000 NOT NULL;--> statement-breakpoint
ALTER TABLE `tenants` ADD `max_output_tokens_override` integer;--> statement-breakpoint
ALTER TABLE `tenants` ADD `allowed_extensions_override` text;--> statement-breakpoint
ALTER TABLE `tenants` ADD `tool_events_per_minute_override` integer;--> statement-breakpoint
ALTER TABLE `usage` ADD `usage_source` text DEFAULT 'engine' NOT NULL;--> statement-breakpoint
-- Hand-added after drizzle-kit's statements (data only, no schema change): the seeded
-- plans' output cap and pro's tenant-wide tool-event rate. Other plans keep the column
-- defaults (no output cap, 6000 tool events a minute); change them with PATCH /admin/plans/{id}.
UPDATE `plans` SET `max_output_tokens` = 8192 WHERE `id` = 'free' AND `max_output_tokens` IS NULL;
--> statement-breakpoint
UPDATE `plans` SET `max_output_tokens` = 32768, `tool_events_per_minute` = 60000 WHERE `id` = 'pro' AND `max_output_tokens` IS NULL;
