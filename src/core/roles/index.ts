export * from "./ratio-controller.js";
export * from "./roles.js";
export * from "./threshold-controller.js";
export * from "./role-demand-meter.js";
export * from "./engine-roles.js";
export * from "./decode-placement.js";
