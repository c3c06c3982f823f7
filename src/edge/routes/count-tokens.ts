import type { Context } from "hono";
import { invalidRequest } from "../../protocol/errors.js";
import { Header } from "../../protocol/headers.js";
import { COUNT_TOKENS_REQUEST_FIELDS, CountTokensRequest, type CountTokensResponse, unknownRequestFields } from "../../protocol/messages.js";
import { estimateMessagesInputTokens } from "../../protocol/translate/messages-chat.js";
import { unsupportedParameter } from "../chat/forward-body.js";
import { countTokensAtPool } from "../chat/pool-client.js";
import type { EdgeEnv } from "../context.js";
import { parseJsonBytes, readBodyWithin } from "../http/body.js";
import { poolSnapshot } from "../pools/directory-cache.js";
import { poolsForModel, routeCall } from "../pools/routing.js";
import { modelNotFound } from "./models.js";

/** Pools asked before the edge answers its own estimate. */
const POOLS_ASKED = 2;

/**
 * POST /v1/messages/count_tokens: the prompt's tokens as an engine's tokenizer and chat
 * template count them (what the call would be billed by), asked of the pool a new
 * program would go to (the next one if it fails), outside its queue. When no pool
 * can count (none reachable, no engine that counts), the edge's own estimate (the
 * count a call's reservation uses: four characters a token of the rendered prompt);
 * `x-agentix-token-count-source` says which. A model the tenant may not call is 404,
 * as for a call. Uses no quota.
 */
export async function countMessageTokens(c: Context<EdgeEnv>, continent: string | undefined): Promise<Response> {
  const { config, tenant } = c.var;
  const parsed = CountTokensRequest.safeParse(parseJsonBytes(await readBodyWithin(c.req.raw, config.maxBodyBytes)));
  if (!parsed.success) throw invalidRequest(parsed.error);
  const unknown = unknownRequestFields(parsed.data, COUNT_TOKENS_REQUEST_FIELDS)[0];
  if (unknown !== undefined) throw unsupportedParameter(unknown, "It is not a count_tokens field.", "Anthropic Messages");
  const snapshot = await poolSnapshot(c.env, (work) => c.executionCtx.waitUntil(work));
  const eligible = poolsForModel(snapshot, tenant.modelAccess, parsed.data.model);
  if (eligible.length === 0) throw modelNotFound(parsed.data.model);
  const now = Date.now();
  const route = routeCall({ eligible, snapshot, config, currentPoolId: undefined, continent, now });
  for (const pool of route.pools.slice(0, POOLS_ASKED)) {
    try {
      const answer: CountTokensResponse = { input_tokens: await countTokensAtPool({ poolUrl: pool.url, signingKey: pool.signingKey }, tenant.id, parsed.data, now) };
      return c.json(answer, 200, { [Header.tokenCountSource]: "engine" });
    } catch (error) {
      // Not a call: no breaker is told (a pool whose engines cannot count is not down).
      console.warn(`count_tokens: pool ${pool.id} did not count (${error instanceof Error ? error.message : String(error)})`);
    }
  }
  const answer: CountTokensResponse = { input_tokens: estimateMessagesInputTokens(parsed.data) };
  return c.json(answer, 200, { [Header.tokenCountSource]: "estimate" });
}
