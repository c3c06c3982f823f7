import { PoolConfig } from "../pool/config.js";

/** The pool config's defaults, read from its schema (one source of truth): what a simulated pool runs with unless told otherwise. */
export const POOL_DEFAULTS = PoolConfig.parse({ signingSecret: "x".repeat(16), engines: [{ id: "sim", url: "http://sim.invalid" }] });

const [engineDefaults] = POOL_DEFAULTS.engines;
if (engineDefaults === undefined) throw new Error("the pool config's defaults name no engine");

/** A configured engine's defaults (its count cap, maxInFlight, among them). */
export const POOL_ENGINE_DEFAULTS = engineDefaults;
