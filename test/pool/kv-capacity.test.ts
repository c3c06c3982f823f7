import { afterEach, describe, expect, it } from "vitest";
import { DEFAULT_KV_CAPACITY_TOKENS } from "../../src/pool/config.js";
import { adapterFor } from "../../src/pool/engines/index.js";
import { labelValue, parsePrometheusText } from "../../src/pool/prometheus-text.js";
import { type PoolHandle, startPool } from "../../src/pool/server.js";
import { type FakeEngine, startFakeEngine } from "./fake-engine.js";
import { testConfig, waitFor } from "./helpers.js";

const VLLM_CACHE_INFO =
  'vllm:cache_config_info{block_size="16",cache_dtype="auto",enable_prefix_caching="True",engine="0",gpu_memory_utilization="0.9",num_gpu_blocks="26300",num_cpu_blocks="None"} 1.0\n';

describe("KV capacity from engine metrics", () => {
  it("reads labels, escapes included", () => {
    const [sample] = parsePrometheusText('x{a="1",b="say \\"hi\\"",c="2"} 1');
    expect(sample && [labelValue(sample, "a"), labelValue(sample, "b"), labelValue(sample, "c"), labelValue(sample, "d")]).toEqual(["1", 'say "hi"', "2", undefined]);
  });

  it("vLLM: num_gpu_blocks × block_size, summed over ranks; SGLang: max_total_num_tokens; none without them", () => {
    const vllm = adapterFor("vllm");
    expect(vllm.kvCapacityTokens?.(parsePrometheusText(VLLM_CACHE_INFO))).toBe(420_800);
    expect(vllm.kvCapacityTokens?.(parsePrometheusText(VLLM_CACHE_INFO + VLLM_CACHE_INFO.replace('engine="0"', 'engine="1"')))).toBe(841_600);
    expect(vllm.kvCapacityTokens?.(parsePrometheusText('vllm:cache_config_info{block_size="16",num_gpu_blocks="None"} 1\n'))).toBeUndefined();
    expect(adapterFor("sglang").kvCapacityTokens?.(parsePrometheusText("sglang:max_total_num_tokens 300000\n"))).toBe(300_000);
    expect(adapterFor("openai").kvCapacityTokens).toBeUndefined();
  });

  describe("in the pool", () => {
    const cleanups: (() => Promise<void>)[] = [];
    afterEach(async () => {
      for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
    });

    async function fake(metrics: string): Promise<FakeEngine> {
      const engine = await startFakeEngine({ metrics });
      cleanups.push(() => engine.close());
      return engine;
    }

    it("takes the engine's stated capacity unless the config sets one; the default otherwise", async () => {
      const stated = await fake(VLLM_CACHE_INFO.replace("26300", "1000"));
      const configured = await fake(VLLM_CACHE_INFO.replace("26300", "1000"));
      const silent = await fake("# nothing\n");
      const pool: PoolHandle = await startPool(
        testConfig({
          engines: [
            { id: "stated", url: stated.url },
            { id: "configured", url: configured.url, kvCapacityTokens: 50_000 },
            { id: "silent", url: silent.url },
          ],
        }),
      );
      cleanups.push(() => pool.close());
      await waitFor(() => pool.dispatcher.engineSnapshots()[0]?.kvCapacityTokens === 16_000, "the stated capacity");
      expect(pool.dispatcher.engineSnapshots().map((e) => [e.id, e.kvCapacityTokens])).toEqual([
        ["stated", 16_000],
        ["configured", 50_000],
        ["silent", DEFAULT_KV_CAPACITY_TOKENS],
      ]);
    });
  });
});
