import { describe, expect, it } from "vitest";
import { z } from "zod";
import { Header } from "../../../src/protocol/headers.js";
import { adminCall, createTenant, type LocalStackHandle, localUsageRows, waitFor } from "../stack.js";

/*
 * Issue 11 end to end: the real edge (wrangler dev, local D1 and Durable Objects) in
 * front of two real pools, local-us-east and local-eu-west, each with its own
 * simulated engines and signing key, registered in the pool directory by the stack.
 * The tests run in order: the last one stops the EU pool.
 */

export function describeRegions(local: LocalStackHandle): void {
  const US = "local-us-east";
  const EU = "local-eu-west";

  interface CallResult {
    status: number;
    pool: string | null;
    programId: string | null;
    code: string | null;
    completionTokens: number;
    /** When the answer arrived (ms). */
    at: number;
  }

  const Completion = z.object({ usage: z.object({ completion_tokens: z.number() }) });
  const ErrorBody = z.object({ error: z.object({ code: z.string().nullable() }) });

  async function call(key: string, programId?: string, model = local.stack.model): Promise<CallResult> {
    const res = await fetch(`${local.stack.edgeUrl}/v1/chat/completions`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${key}`,
        "content-type": "application/json",
        ...(programId ? { [Header.program]: programId } : {}),
      },
      body: JSON.stringify({ model, messages: [{ role: "user", content: "Run the next step of the plan." }], max_tokens: 16 }),
    });
    const body: unknown = await res.json();
    const ok = res.status === 200;
    return {
      status: res.status,
      pool: res.headers.get(Header.pool),
      programId: res.headers.get(Header.program),
      code: ok ? null : ErrorBody.parse(body).error.code,
      completionTokens: ok ? Completion.parse(body).usage.completion_tokens : 0,
      at: Date.now(),
    };
  }

  const setStatus = (pool: string, action: "drain" | "activate" | "disable") => adminCall(local.stack, "POST", `/admin/pools/${pool}/${action}`);

  async function planTenant(name: string, fields: Record<string, unknown>): Promise<{ id: string; key: string }> {
    await adminCall(local.stack, "POST", "/admin/plans", {
      id: name,
      name,
      rpm: 6_000,
      tpm: 10_000_000,
      max_concurrent: 16,
      max_active_programs: 100,
      monthly_token_budget: null,
      default_max_tokens: 64,
      ...fields,
    });
    const tenant = await createTenant(local.stack, name);
    await adminCall(local.stack, "PATCH", `/admin/tenants/${tenant.id}`, { plan: name });
    return tenant;
  }

  const Health = z.looseObject({ healthy: z.boolean(), load: z.number(), read_at: z.number(), error: z.string().optional() });
  const healthOf = (listed: unknown) =>
    Object.fromEntries(
      z
        .object({ data: z.array(z.object({ id: z.string(), health: Health.nullable() })) })
        .parse(listed)
        .data.map((p) => [p.id, p.health]),
    );

  const UsageRow = z.object({ call_id: z.string(), pool: z.string(), status: z.string(), completion_tokens: z.number() });

  describe("regional pools end to end", () => {
    it("registers both pools, reads their status; a program's calls stay on one pool", async () => {
      const listed = z.object({ data: z.array(z.object({ id: z.string(), region: z.string(), status: z.string() })) }).parse(
        await adminCall(local.stack, "GET", "/admin/pools"),
      );
      expect(listed.data.map((p) => [p.id, p.region, p.status])).toEqual([
        [EU, "eu-west", "active"],
        [US, "us-east", "active"],
      ]);
      const first = await call(local.stack.devKey);
      expect(first.status).toBe(200);
      // The monitor's status rounds start with the first request.
      const health = await waitFor(
        async () => healthOf(await adminCall(local.stack, "GET", "/admin/pools")),
        (h) => h[US]?.healthy === true && h[EU]?.healthy === true,
        15_000,
      );
      expect(health[US]).toMatchObject({ healthy: true, engines: { total: 2, healthy: 2 } });
      const home = first.pool;
      expect([US, EU]).toContain(home);
      for (let i = 0; i < 8; i += 1) {
        const next = await call(local.stack.devKey, first.programId!);
        expect([next.status, next.pool]).toEqual([200, home]);
      }
    });

    it("lists /v1/models per plan, and refuses a model the plan may not use before any quota", async () => {
      const modelIds = async (key: string) => {
        const res = await fetch(`${local.stack.edgeUrl}/v1/models`, { headers: { authorization: `Bearer ${key}` } });
        return z.object({ data: z.array(z.object({ id: z.string() })) }).parse(await res.json()).data.map((m) => m.id);
      };
      const open = await planTenant("e2e-open", {});
      const otherModel = await planTenant("e2e-other-model", { allowed_models: ["some-other-model"] });
      const asia = await planTenant("e2e-asia", { allowed_regions: ["ap-southeast"] });
      expect(await modelIds(open.key)).toEqual([local.stack.model]);
      expect(await modelIds(otherModel.key)).toEqual([]);
      expect(await modelIds(asia.key)).toEqual([]);
      for (const tenant of [otherModel, asia]) {
        const refused = await call(tenant.key);
        expect([refused.status, refused.code, refused.programId]).toEqual([404, "model_not_found", null]);
      }
    });

    it("gives a drained pool no new programs, while its own programs stay", async () => {
      const tenant = await createTenant(local.stack, "e2e-drain");
      const onUs = await (async () => {
        await setStatus(EU, "drain");
        try {
          return await call(tenant.key);
        } finally {
          await setStatus(EU, "activate");
        }
      })();
      expect(onUs.pool).toBe(US);
      await setStatus(US, "drain");
      try {
        const fresh = await Promise.all(Array.from({ length: 6 }, () => call(tenant.key)));
        expect(fresh.map((r) => [r.status, r.pool])).toEqual(Array(6).fill([200, EU]));
        expect((await call(tenant.key, onUs.programId!)).pool).toBe(US);
      } finally {
        await setStatus(US, "activate");
      }
    });

    it("moves a program off a pool that stops mid-run, losing no call; a residency-restricted tenant gets 503, never another region", async () => {
      const tenant = await createTenant(local.stack, "e2e-failover");
      const euOnly = await planTenant("e2e-eu-only", { allowed_regions: ["eu-west"] });
      // Both programs start on the EU pool (new programs avoid the drained US pool).
      await setStatus(US, "drain");
      const first = await call(tenant.key);
      const firstEu = await call(euOnly.key);
      await setStatus(US, "activate");
      expect([first.pool, firstEu.pool]).toEqual([EU, EU]);
      const programId = first.programId!;

      const results: CallResult[] = [first];
      const euResults: CallResult[] = [firstEu];
      let stopAt = 0;
      const eu = local.stack.pools.find((p) => p.id === EU)!;
      const run = (async () => {
        for (let i = 0; i < 40; i += 1) {
          results.push(await call(tenant.key, programId));
          euResults.push(await call(euOnly.key, firstEu.programId!));
        }
      })();
      // Mid-run: the EU pool and its engines go away.
      await new Promise((resolve) => setTimeout(resolve, 400));
      stopAt = Date.now();
      const stopped = eu.stop();
      await run;
      await stopped;

      const before = results.filter((r) => r.at < stopAt);
      const after = results.filter((r) => r.at >= stopAt);
      expect(before.length).toBeGreaterThan(1);
      expect(after.length).toBeGreaterThan(5);
      // Every call of the unrestricted program was answered: the failover happens before the first byte.
      expect(results.map((r) => r.status)).toEqual(Array(results.length).fill(200));
      expect(new Set(before.map((r) => r.pool))).toEqual(new Set([EU]));
      const firstOnUs = after.findIndex((r) => r.pool === US);
      expect(firstOnUs).toBeGreaterThanOrEqual(0);
      expect(after.slice(firstOnUs).every((r) => r.pool === US)).toBe(true);
      const moveMs = after[firstOnUs]!.at - stopAt;
      console.log(`failover: first call answered by ${US} ${moveMs} ms after ${EU} began stopping; ${after.length} calls after the stop, all 200`);
      expect(moveMs).toBeLessThan(5_000);

      // The EU-only tenant never left its region: its calls after the stop were refused, not moved.
      const movedAt = after[firstOnUs]!.at;
      const euAfter = euResults.filter((r) => r.at > movedAt);
      console.log(`EU-only tenant after the stop: ${euResults.filter((r) => r.at >= stopAt).map((r) => `${r.status} ${r.code ?? r.pool}`).join(", ")}`);
      expect(euAfter.length).toBeGreaterThan(5);
      expect(euResults.every((r) => r.pool !== US)).toBe(true);
      expect(euAfter.every((r) => r.status === 502 || r.status === 503)).toBe(true);
      expect(euAfter.at(-1)).toMatchObject({ status: 503, code: "no_pool_available" });

      // The ledger: one row per call, on the pool that answered it, with the tokens the client saw
      // (rows reach D1 in batches within LEDGER_FLUSH_MS, so they are waited for).
      const rows = await waitFor(() => localUsageRows(local.stateDir, programId, UsageRow), (found) => found.length >= results.length);
      expect(rows).toHaveLength(results.length);
      expect(rows.map((r) => r.status)).toEqual(Array(results.length).fill("ok"));
      expect(rows.map((r) => r.pool).sort()).toEqual(results.map((r) => r.pool).sort());
      expect(rows.reduce((sum, r) => sum + r.completion_tokens, 0)).toBe(results.reduce((sum, r) => sum + r.completionTokens, 0));
      const euRows = await waitFor(() => localUsageRows(local.stateDir, firstEu.programId!, UsageRow), (found) => found.length >= euResults.length);
      expect(euRows).toHaveLength(euResults.length);
      expect(euRows.every((r) => r.pool !== US)).toBe(true);

      // The monitor's next status round marks the stopped pool down (what `agentix admin pools list` shows).
      const health = async () => healthOf(await adminCall(local.stack, "GET", "/admin/pools"));
      const seen = await waitFor(health, (h) => h[EU]?.healthy === false && h[US]?.healthy === true, 15_000);
      expect(seen[EU]).toMatchObject({ healthy: false, error: expect.any(String) });
      expect(seen[US]).toMatchObject({ healthy: true, engines: { total: 2, healthy: 2 } });
      console.log(`monitor: ${EU} read down ${seen[EU]!.read_at - stopAt} ms after the stop (${seen[EU]!.error})`);
    });
  });
}
