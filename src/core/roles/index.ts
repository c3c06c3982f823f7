export * from "./ratio-controller.js";
export * from "./roles.js";
export * from "./threshold-controller.js";
export * from "./role-demand-meter.js";
