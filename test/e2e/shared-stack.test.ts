import { describeAnthropicSdk } from "./suites/anthropic-sdk.js";
import { describeEdgeConcurrency } from "./suites/edge-concurrency.js";
import { describeOpenAiSdk } from "./suites/openai-sdk.js";
import { describeRegions } from "./suites/regions.js";
import { useLocalStack } from "./stack.js";

/*
 * The end-to-end suites that need nothing of a stack but its defaults (two pools, two
 * engines each), run against one stack: starting one takes 25–45 s on a loaded 2-core
 * machine, more than most suites take. Each suite makes its own tenants and programs
 * (the dev tenant's limits stay as the stack made them), so none reads another's
 * figures. The suites run one after another, in the order written here.
 */

const local = useLocalStack("shared", {
  engines: 2,
  timeScale: 50,
  // The pool holds nothing back: every call of the concurrency burst that reaches it runs at once.
  engineMaxInFlight: 64,
});

describeOpenAiSdk(local);
describeAnthropicSdk(local);
describeEdgeConcurrency(local);
// Last: its final test stops the EU pool.
describeRegions(local);
