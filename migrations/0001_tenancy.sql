CREATE TABLE `plans` (
	`id` text PRIMARY KEY NOT NULL,
	`name` text NOT NULL,
	`rpm` integer NOT NULL,
	`tpm` integer NOT NULL,
	`max_concurrent` integer NOT NULL,
	`max_active_programs` integer NOT NULL,
	`monthly_token_budget` integer,
	`default_max_tokens` integer NOT NULL,
	`weight` real DEFAULT 1 NOT NULL,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL
);
--> statement-breakpoint
ALTER TABLE `tenants` ADD `plan_id` text DEFAULT 'free' NOT NULL;--> statement-breakpoint
ALTER TABLE `tenants` ADD `rpm_override` integer;--> statement-breakpoint
ALTER TABLE `tenants` ADD `tpm_override` integer;--> statement-breakpoint
ALTER TABLE `tenants` ADD `max_concurrent_override` integer;--> statement-breakpoint
ALTER TABLE `tenants` ADD `max_active_programs_override` integer;--> statement-breakpoint
ALTER TABLE `tenants` ADD `monthly_token_budget_override` integer;--> statement-breakpoint
ALTER TABLE `tenants` ADD `default_max_tokens_override` integer;--> statement-breakpoint
ALTER TABLE `usage` ADD `pool` text DEFAULT '' NOT NULL;--> statement-breakpoint
CREATE INDEX `usage_finished_idx` ON `usage` (`finished_at`);