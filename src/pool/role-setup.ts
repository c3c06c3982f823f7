import { RatioRoleController } from "../core/roles/ratio-controller.js";
import type { RoleWorkModel } from "../core/roles/role-demand-meter.js";
import type { RoleController } from "../core/roles/roles.js";
import { ThresholdRoleController } from "../core/roles/threshold-controller.js";
import { DEFAULT_ADMISSION_SETTINGS, DEFAULT_KV_CAPACITY_TOKENS } from "../core/settings.js";
import type { EngineConfig, RolesConfig } from "./config.js";

/*
 * The role controller a pool config asks for (roles.controller), with what it prices
 * demand by: the split engines' cost model (their profile or decodeCost; the config
 * requires one) and one decode engine's KV room. Off: none.
 */

/** Sequences in a full decode batch when the config does not say: vLLM's max_num_seqs as the simulated engines' profiles take it. */
const DEFAULT_BATCH_SEQUENCES = 128;

export interface RoleSetup {
  controller: RoleController;
  model: RoleWorkModel;
}

export function roleSetupFor(roles: RolesConfig, engines: readonly EngineConfig[]): RoleSetup | undefined {
  if (roles.controller === "off") return undefined;
  const split = engines.filter((engine) => engine.role !== "mixed");
  const cost = split.find((engine) => engine.decodeCost !== undefined)?.decodeCost;
  if (cost === undefined) throw new RangeError("a role controller needs a cost model: give the prefill and decode engines a profile or a decodeCost");
  const model: RoleWorkModel = { ...cost, batchSequences: DEFAULT_BATCH_SEQUENCES };
  const cooldown = roles.cooldownMs === undefined ? {} : { cooldownMs: roles.cooldownMs };
  if (roles.controller === "threshold") return { controller: new ThresholdRoleController(cooldown), model };
  const decode = split.find((engine) => engine.role === "decode");
  const capacity = (decode?.kvCapacityTokens ?? DEFAULT_KV_CAPACITY_TOKENS) * DEFAULT_ADMISSION_SETTINGS.kvTarget;
  return { controller: new RatioRoleController({ decodeKvTokens: capacity }, cooldown), model };
}
