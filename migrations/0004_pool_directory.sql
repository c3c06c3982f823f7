CREATE TABLE `pools` (
	`id` text PRIMARY KEY NOT NULL,
	`region` text NOT NULL,
	`url` text NOT NULL,
	`models` text NOT NULL,
	`weight` real DEFAULT 1 NOT NULL,
	`status` text DEFAULT 'active' NOT NULL,
	`signing_key_id` text NOT NULL,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL
);
--> statement-breakpoint
ALTER TABLE `plans` ADD `allowed_models` text;--> statement-breakpoint
ALTER TABLE `plans` ADD `allowed_regions` text;