-- Seeds the two starting plans. Tenants that existed before 0001 are already on
-- 'free': 0001 added tenants.plan_id with DEFAULT 'free'. Adjust limits later
-- through the admin API (PATCH /admin/plans/{id}), not by editing this file.
-- max_active_programs is generous on purpose: a client that sends no
-- x-agentix-program header starts a program per call, and each stays active
-- until PROGRAM_IDLE_TTL_MS (15 min) of idleness, so a cap below rpm x 15
-- would refuse plain OpenAI clients before their rate limit does.
INSERT OR IGNORE INTO `plans` (`id`, `name`, `rpm`, `tpm`, `max_concurrent`, `max_active_programs`, `monthly_token_budget`, `default_max_tokens`, `weight`, `created_at`, `updated_at`)
VALUES ('free', 'Free', 60, 60000, 4, 1000, 1000000, 1024, 1, CAST(strftime('%s', 'now') AS INTEGER) * 1000, CAST(strftime('%s', 'now') AS INTEGER) * 1000);
--> statement-breakpoint
INSERT OR IGNORE INTO `plans` (`id`, `name`, `rpm`, `tpm`, `max_concurrent`, `max_active_programs`, `monthly_token_budget`, `default_max_tokens`, `weight`, `created_at`, `updated_at`)
VALUES ('pro', 'Pro', 1000, 1000000, 64, 20000, 100000000, 4096, 4, CAST(strftime('%s', 'now') AS INTEGER) * 1000, CAST(strftime('%s', 'now') AS INTEGER) * 1000);
