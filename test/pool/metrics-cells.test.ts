import { Histogram } from "prom-client";
import { describe, expect, it, vi } from "vitest";
import { HISTOGRAM_CELL_VALUES, HistogramCell, PoolMetrics } from "../../src/pool/metrics.js";
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

describe("histogram cells", () => {
  it("reach each scrape with the buckets, sum and count prom-client's own observe() gives, each value once", async () => {
    const metrics = new PoolMetrics();
    const reference = new PoolMetrics();
    const observe = (engine: string, seconds: number) => {
      metrics.engine(engine).serviceSeconds.observe(seconds);
      reference.serviceSeconds.observe({ engine }, seconds);
    };
    const wait = (seconds: number) => {
      metrics.queueWait.observe(seconds);
      reference.queueSeconds.observe(seconds);
    };
    const series = (text: string) => text.split("\n").filter((line) => /^agentix_pool_(service|queue)_seconds/.test(line));
    observe("e1", 0.003);
    observe("e1", 0.2);
    observe("e2", 7);
    wait(0);
    wait(0.04);
    let text = await metrics.registry.metrics();
    expect(series(text)).toEqual(series(await reference.registry.metrics()));
    expect(metricValue(text, 'agentix_pool_service_seconds_count{engine="e1"}')).toBe(2);
    expect(metricValue(text, "agentix_pool_queue_seconds_count")).toBe(2);

    observe("e1", 0.01);
    wait(1);
    text = await metrics.registry.metrics();
    expect(series(text)).toEqual(series(await reference.registry.metrics()));
    expect(metricValue(text, 'agentix_pool_service_seconds_count{engine="e1"}')).toBe(3);
    expect(metricValue(text, 'agentix_pool_service_seconds_count{engine="e2"}')).toBe(1);
    expect(metricValue(text, "agentix_pool_queue_seconds_count")).toBe(3);
  });

  it("hand their values over without a scrape once they hold HISTOGRAM_CELL_VALUES, so an unscraped pool holds no more", () => {
    const histogram = new Histogram({ name: "cell_test_seconds", help: "test", labelNames: ["engine"] as const, registers: [] });
    const observed = vi.spyOn(histogram, "observe");
    const cell = new HistogramCell(histogram, { engine: "e1" });
    for (let i = 1; i < HISTOGRAM_CELL_VALUES; i++) cell.observe(i / 1000);
    expect(observed).not.toHaveBeenCalled();
    cell.observe(5);
    expect(observed).toHaveBeenCalledTimes(HISTOGRAM_CELL_VALUES);
    expect(observed).toHaveBeenLastCalledWith({ engine: "e1" }, 5);
    cell.flush();
    expect(observed).toHaveBeenCalledTimes(HISTOGRAM_CELL_VALUES);
  });

  it("refuse a value that is not a finite number where it is observed, as prom-client's observe() does", () => {
    const metrics = new PoolMetrics();
    expect(() => metrics.engine("e1").serviceSeconds.observe(Number.NaN)).toThrow(TypeError);
    expect(() => metrics.queueWait.observe(Number.POSITIVE_INFINITY)).toThrow(TypeError);
    expect(() => new PoolMetrics().serviceSeconds.observe({ engine: "e1" }, Number.NaN)).toThrow(TypeError);
  });
});
