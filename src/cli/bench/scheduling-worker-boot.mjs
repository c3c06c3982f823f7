// Entry of a `agentix bench --jobs N` worker thread. The bench runs from TypeScript
// source under tsx, which does not carry over to worker threads: register it here,
// then load the worker itself.
import { register } from "tsx/esm/api";

register();
await import("./scheduling-worker.ts");
