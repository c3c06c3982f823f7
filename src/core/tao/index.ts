// TAO's public surface; dp.ts, best-fit.ts, problem.ts and duration-history.ts are internals of these.
export * from "./apply-plan.js";
export * from "./cache-credit.js";
export * from "./objective.js";
export * from "./plan-validation.js";
export * from "./planner.js";
export * from "./readiness.js";
export * from "./settings.js";
export * from "./signature.js";
export * from "./snapshot-builder.js";
export * from "./snapshot.js";
export * from "./tool-args.js";
export * from "./reservation-book.js";
export * from "./tao-pump.js";
