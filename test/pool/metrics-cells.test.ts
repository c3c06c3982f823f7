import { describe, expect, it } from "vitest";
import { PoolMetrics } from "../../src/pool/metrics.js";
import { metricValue } from "./helpers.js";

/*
 * Counters counted in cells bound once per engine and label set (metrics.ts) reach
 * Prometheus at each scrape with the same series and sums as prom-client's own inc().
 */

const hints = (engine: string, action: string, outcome: string) => `agentix_pool_kv_retention_hints_total{engine="${engine}",action="${action}",outcome="${outcome}"}`;

describe("KV retention hint cells", () => {
  it("count each engine, action and outcome in its own series, across scrapes", async () => {
    const metrics = new PoolMetrics();
    const e1 = metrics.engine("e1");
    e1.retentionHints("keep", "unsupported").inc();
    e1.retentionHints("keep", "unsupported").inc();
    e1.retentionHints("normal", "unsupported").inc();
    e1.retentionHints("keep", "sent").inc();
    metrics.engine("e2").retentionHints("drop", "failed").inc();
    let text = await metrics.registry.metrics();
    expect(metricValue(text, hints("e1", "keep", "unsupported"))).toBe(2);
    expect(metricValue(text, hints("e1", "normal", "unsupported"))).toBe(1);
    expect(metricValue(text, hints("e1", "keep", "sent"))).toBe(1);
    expect(metricValue(text, hints("e2", "drop", "failed"))).toBe(1);
    expect(metricValue(text, hints("e1", "drop", "unsupported"))).toBeUndefined();

    e1.retentionHints("keep", "unsupported").inc();
    text = await metrics.registry.metrics();
    expect(metricValue(text, hints("e1", "keep", "unsupported"))).toBe(3);
    expect(metricValue(text, hints("e1", "normal", "unsupported"))).toBe(1);
  });
});

describe("readiness prediction cells", () => {
  it("count each source in its own series, across scrapes", async () => {
    const metrics = new PoolMetrics();
    metrics.readinessPrediction("fallback").inc();
    metrics.readinessPrediction("client-hint").inc();
    metrics.readinessPrediction("fallback").inc();
    const series = (source: string) => `agentix_pool_readiness_predictions_total{source="${source}"}`;
    expect(metricValue(await metrics.registry.metrics(), series("fallback"))).toBe(2);
    metrics.readinessPrediction("client-hint").inc();
    const text = await metrics.registry.metrics();
    expect(metricValue(text, series("fallback"))).toBe(2);
    expect(metricValue(text, series("client-hint"))).toBe(2);
  });
});
