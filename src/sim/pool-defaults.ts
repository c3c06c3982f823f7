import { EngineConfig, PoolConfig } from "../pool/config.js";
import type { EngineProfileName } from "./profiles.js";

/** The pool config's defaults, read from its schema (one source of truth): what a simulated pool runs with unless told otherwise. */
export const POOL_DEFAULTS = PoolConfig.parse({ signingSecret: "x".repeat(16), engines: [{ id: "sim", url: "http://sim.invalid" }] });

/** What the pool makes of an engine configured with just its profile: its count cap, and its decode cap (the profile's batch). */
export function poolEngineDefaults(profile: EngineProfileName): EngineConfig {
  return EngineConfig.parse({ id: "sim", url: "http://sim.invalid", profile });
}
