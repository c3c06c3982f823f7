import { formatTime } from "../table.js";
import { type CommandSpec, printJson, printList, stringOption } from "../spec.js";
import { expectShape, KeyView } from "../views.js";

const HEADERS = ["ID", "NAME", "PREFIX", "CREATED", "LAST USED", "REVOKED"];

const row = (k: KeyView) => [k.id, k.name ?? "-", `${k.prefix}…`, formatTime(k.created_at), formatTime(k.last_used_at), formatTime(k.revoked_at)];

export const keyCommands: Record<string, CommandSpec> = {
  create: {
    usage: "keys create TENANT_ID [--name NAME]",
    summary: "create an API key (shown once)",
    positionals: ["TENANT_ID"],
    options: { name: { type: "string" } },
    async run(ctx, [tenantId], values) {
      const name = stringOption(values, "name");
      const raw = await ctx.client.json(
        "POST",
        `/admin/tenants/${encodeURIComponent(tenantId ?? "")}/keys`,
        name !== undefined ? { name } : {},
      );
      if (ctx.json) return printJson(ctx.io, raw);
      const key = expectShape(KeyView, raw, "API key");
      ctx.io.stdout(
        `Created key ${key.id} for tenant ${key.tenant_id}${key.name ? ` (${key.name})` : ""}.\n` +
          `${key.key ?? "(the edge did not return the key)"}\n` +
          "This is the only time the key is shown: store it now.\n",
      );
    },
  },
  list: {
    usage: "keys list TENANT_ID",
    summary: "list a tenant's keys (prefixes only) with last use",
    positionals: ["TENANT_ID"],
    options: {},
    async run(ctx, [tenantId]) {
      const raw = await ctx.client.json("GET", `/admin/tenants/${encodeURIComponent(tenantId ?? "")}/keys`);
      printList(ctx, { schema: KeyView, what: "key", headers: HEADERS, row }, raw);
    },
  },
  revoke: {
    usage: "keys revoke KEY_ID",
    summary: "revoke a key (refused from the next request on)",
    positionals: ["KEY_ID"],
    options: {},
    async run(ctx, [keyId]) {
      const raw = await ctx.client.json("DELETE", `/admin/keys/${encodeURIComponent(keyId ?? "")}`);
      if (ctx.json) return printJson(ctx.io, raw);
      const key = expectShape(KeyView, raw, "API key");
      ctx.io.stdout(`Revoked key ${key.id} (${key.prefix}…) of tenant ${key.tenant_id} at ${formatTime(key.revoked_at)}.\n`);
    },
  },
};
