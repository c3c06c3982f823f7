ALTER TABLE `plans` ADD `limiter_shards` integer DEFAULT 1 NOT NULL;--> statement-breakpoint
ALTER TABLE `tenants` ADD `limiter_shards_override` integer;